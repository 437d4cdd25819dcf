"""The endpoint picker (EPP) of llm-d and the Gateway API Inference Extension: its zap JSON
lines. Exact text, from the projects' source and real output found with the search tool:

* the EPP moved from kubernetes-sigs/gateway-api-inference-extension (removed there at
  a70292c1, 2026-06-16) to llm-d/llm-d-router (@ ebab6879); every per-request line carries
  the context key ``x-request-id`` (the client's X-Request-Id header, else a UUID the EPP
  makes), right after ``msg``;
* ``Request handled`` (requestcontrol/director.go): the pick. GIE v0.4/v0.5 logged it at the
  default verbosity with the endpoint as a Go struct dump (``{NamespacedName:ns/pod
  Address:IP …}``, no port: real lines in rh-aiservices-bu/llm-d-playbook and KServe's
  llmisvc docs); GIE v1.0+ and llm-d-router at ``-v=3`` with ``"endpoint":"ip:port[,ip:port…]"``
  (the primary profile's pick, then fallbacks; from the code, no emitted copy found);
* ``Request dropped`` (llm-d-router flowcontrol/controller/controller.go, ``-v=3``: requestID,
  flowKey, outcome, err) and ``Flow control outcome`` (requestcontrol/admission.go, ``-v=4``)
  with the outcomes ``Dispatched``, ``RejectedCapacity``, ``RejectedOther``,
  ``RejectedNoEndpoints``, ``EvictedTTL``, ``EvictedContextCancelled``, ``EvictedOther``,
  ``EvictedNoEndpoints`` (from the code, no emitted copy found);
* the default ``-v=2`` lines (``EPP received request``, ``EPP sent request body response(s)
  to proxy``: real, GIE PR #2384) and the ``-v=4`` scheduler/plugin lines (real, llm-d-router
  #867 and PR #199) name no endpoint: noise here.

At the default verbosity of GIE v1.x and llm-d-router the EPP writes no line naming the
endpoint: such a file is recognised, its lines noise, and it attributes nothing (run the
EPP at ``-v=3`` for ``Request handled``).
"""

from __future__ import annotations

import polars as pl

from logforensics.ingest import register_line_format
from logforensics.ingest.base import Claim, Sample, SourceFile
from logforensics.ingest.toolkit import (
    ProxyLineFormat,
    first_kind,
    format_text,
    json_field,
    no_lines,
    proxy_failures,
    proxy_rows,
    zap_time,
)

# zap JSON as controller-runtime and llm-d-router configure it: level (info/debug/error, or
# "Level(-N)" for logr's V(N) before GIE #2712), ts (RFC 3339 or epoch seconds), an optional
# logger, caller (a .go file), msg, then the context keys, x-request-id first
EPP_RE = (
    r'^\{"level":"(?:[a-z]+|Level\(-\d+\)|LEVEL\(-\d+\))","ts":[^,]+,(?:"logger":"[^"]*",)?'
    r'"caller":"[\w./-]+\.go:\d+","msg":"(?P<what>[^"]*)","x-request-id":"(?P<rid>[^"]*)"'
)
HANDLED = "Request handled"
DROPPED = ("Request dropped", "Flow control outcome")
FAILED = ("Error handling request", "Failed to process request")
# an outcome that never reached an inference server (llm-d's dropped-reason header says so:
# "rejected-*" never reached one); a cancelled one is the client's leaving
REFUSALS = {
    "refused": r"^Rejected|^EvictedTTL$|^EvictedNoEndpoints$|^EvictedOther$",
}
ERROR_KINDS = {
    "refused": r"ResourceExhausted|queue at capacity|saturated|TTL expired|no endpoints",
    "upstream_error": r".",
}


@register_line_format
class EndpointPicker(ProxyLineFormat):
    """The llm-d / Gateway API Inference Extension endpoint picker's per-request lines.

    ``Request handled`` → a `proxy_requests` row: `at` = ``ts`` (when it picked: the
    routing decision, as the vLLM production-stack router's), `request_id` =
    ``x-request-id``, `upstream` = the first endpoint (``ip:port``; in the v0.5 struct dump
    the pod, ``namespace/name``); whether the request then reached it is unknown (the data
    plane may fall back to the next endpoint). ``Request dropped`` / ``Flow control
    outcome`` with an outcome other than ``Dispatched`` → a row that never reached an
    instance (`delivery` refused, one per request) and, but for a cancelled request, a
    `proxy_event` ``refused``; an ``error`` line ``Error handling request`` / ``Failed to
    process request`` → a `proxy_event` by its error text (ResourceExhausted → refused), one
    per request. Its other per-request lines (lifecycle, scores, plugins) are noise.
    """

    name = "llm_d_epp"
    priority = 9
    per_line = True
    # zap's JSON lines open as Caddy's and Traefik v1's do, and vLLM's lifecycle pattern
    # would read "Added request to cache" as a request "to": these are the EPP's
    supersedes = ("caddy_json", "traefik_log", "vllm_lifecycle")
    samples = (
        Sample(
            "real output: GIE v0.5 EPP under KServe LLMInferenceService, default verbosity "
            '(rh-aiservices-bu/llm-d-playbook qwen3-0.6b README); its duplicate "model" key '
            "as printed",
            '{"level":"Level(-2)","ts":"2025-11-21T01:46:00Z","caller":"requestcontrol/'
            'director.go:251","msg":"Request handled","x-request-id":"b43b7ccd-c87a-4f52-8ebe-'
            '717b5dcc48ad","model":"Qwen/Qwen3-4B","resolvedTargetModel":"Qwen/Qwen3-4B",'
            '"criticality":"Critical","model":"Qwen/Qwen3-4B","targetModel":"Qwen/Qwen3-4B",'
            '"endpoint":"{NamespacedName:demo-llm/qwen-kserve-c5d769949-p4tkg Address:'
            "10.129.2.21 Labels:map[app.kubernetes.io/component:llminferenceservice-workload "
            "app.kubernetes.io/name:qwen app.kubernetes.io/part-of:llminferenceservice "
            'kserve.io/component:workload llm-d.ai/role:both pod-template-hash:c5d769949]}"}',
            role="proxy",
            tables=(("proxy_requests", 1),),
        ),
        Sample(
            "constructed from llm-d-router @ ebab6879 requestcontrol/director.go:507 (-v=3, "
            "JSON encoder of GIE #2712: epoch ts, level info); no emitted copy found",
            '{"level":"info","ts":1776910413.512,"caller":"requestcontrol/director.go:507",'
            '"msg":"Request handled","x-request-id":"ebb9e80e-8cee-43f5-888f-2b6c7a155160",'
            '"objectiveKey":"","incomingModelName":"openai/gpt-oss-120b","targetModelName":'
            '"openai/gpt-oss-120b","priority":0,"endpoint":"10.0.4.203:8000,10.0.4.204:8000"}',
            role="proxy",
            tables=(("proxy_requests", 1),),
        ),
        Sample(
            "constructed from llm-d-router @ ebab6879 flowcontrol/controller/controller.go:313 "
            "(-v=3) and flowcontrol/types/errors.go; no emitted copy found",
            '{"level":"info","ts":1776910414.027,"caller":"controller/controller.go:313",'
            '"msg":"Request dropped","x-request-id":"710a2ee7-fb67-4151-a3b9-56ad753fb55a",'
            '"requestID":"710a2ee7-fb67-4151-a3b9-56ad753fb55a","flowKey":{"ID":"","Priority":0},'
            '"outcome":"RejectedCapacity","err":"request rejected pre-queue: queue at capacity"}',
            role="proxy",
            tables=(("proxy_requests", 1), ("proxy_events", 1)),
        ),
        Sample(
            "real output: GIE EPP at the default -v=2 (GIE PR #2384; a load tester's own id)",
            '{"level":"info","ts":"2026-02-20T22:24:39Z","caller":"handlers/server.go:217",'
            '"msg":"EPP received request","x-request-id":"bench-1f452021-72"}',
            role="proxy",
            status="noise",
        ),
        Sample(
            "real output: llm-d-router at -v=4 (llm-d/llm-d-router #867)",
            '{"level":"Level(-4)","ts":"2026-04-23T02:13:33Z","caller":"scorer/active_request.go'
            ':251","msg":"Added request to cache","x-request-id":"ebb9e80e-8cee-43f5-888f-'
            '2b6c7a155160","objectiveKey":"","incomingModelName":"openai/gpt-oss-120b",'
            '"targetModelName":"openai/gpt-oss-120b","priority":0,"requestId":"ebb9e80e-8cee-'
            '43f5-888f-2b6c7a155160","endpointName":"rob-dev/pd-nvidia-gpu-vllm-decode-'
            '778fd78978-qkzp2-rank-0","profileName":"decode"}',
            role="proxy",
            status="noise",
        ),
        Sample(
            "real output: llm-d-inference-scheduler's prefix scorer at -v=4 (llm-d/llm-d-router "
            "PR #199)",
            '{"level":"Level(-4)","ts":"2025-06-23T22:03:32Z","logger":"prefix-aware-scorer",'
            '"caller":"scorer/prefix_aware.go:72","msg":"Got pod scores","x-request-id":'
            '"e3df4a6e-8d95-42bf-917b-0ed21ca756b6","model":"food-review","resolvedTargetModel":'
            '"food-review","criticality":"Critical","scores":{"default/food-review-vllm-sim-'
            '5bfdb4f94f-85j5p":80}}',
            role="proxy",
            status="noise",
        ),
    )
    pattern = EPP_RE

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        gate = pl.col("msg").str.contains('"x-request-id":"', literal=True)
        if not lines.select(gate.any()).item():
            return Claim(records=no_lines())
        hits = self.parsed(lines, EPP_RE, needs=gate).with_columns(
            pl.coalesce(zap_time(), pl.col("at")).alias("at")
        )
        endpoint = json_field("$.endpoint")
        pod = endpoint.str.extract(r"NamespacedName:(\S+)", 1)
        handled = hits.filter(pl.col("what") == HANDLED).with_columns(
            pl.coalesce(pod, endpoint.str.split(",").list.first().str.strip_chars()).alias(
                "upstream"
            ),
            pl.lit("unknown").alias("status_origin"),
            pl.lit("unknown").alias("delivery"),
            pl.col("rid").alias("request_id"),
        )
        outcome = json_field("$.outcome")
        dropped = (
            hits.filter(pl.col("what").is_in(DROPPED))
            .with_columns(outcome.alias("_outcome"), json_field("$.err").alias("_err"))
            .filter(pl.col("_outcome").is_not_null() & (pl.col("_outcome") != "Dispatched"))
            .unique("rid", keep="first", maintain_order=True)
            .with_columns(
                pl.lit(None, dtype=pl.Utf8).alias("upstream"),
                pl.lit(None, dtype=pl.Int64).alias("http_status"),
                pl.lit("proxy").alias("status_origin"),
                pl.lit("refused").alias("delivery"),
                pl.col("rid").alias("request_id"),
            )
        )
        failed = (
            hits.filter(pl.col("what").is_in(FAILED))
            .with_columns(
                json_field("$.error").alias("_err"),
                pl.lit(None, dtype=pl.Utf8).alias("upstream"),
                pl.lit(None, dtype=pl.Int64).alias("http_status"),
            )
            .filter(~pl.col("rid").is_in(dropped["rid"].implode()))
            .unique("rid", keep="first", maintain_order=True)
        )
        rows = proxy_rows(pl.concat([handled, dropped], how="diagonal_relaxed"), source)
        said = format_text(
            "endpoint picker dropped request {}: {} ({})",
            pl.col("rid"),
            pl.col("_outcome"),
            pl.coalesce(pl.col("_err"), pl.lit("no error text")),
        )
        events = pl.concat(
            [
                proxy_failures(dropped, first_kind(REFUSALS, pl.col("_outcome")), said, source),
                proxy_failures(
                    failed,
                    first_kind(ERROR_KINDS, pl.coalesce(pl.col("_err"), pl.lit(""))),
                    format_text(
                        "endpoint picker failed request {}: {}",
                        pl.col("rid"),
                        pl.coalesce(pl.col("_err"), pl.col("what")),
                    ),
                    source,
                ),
            ]
        )
        used = pl.concat([handled["line_no"], dropped["line_no"], failed["line_no"]])
        noise = hits.filter(~pl.col("line_no").is_in(used.implode()))["line_no"]
        return Claim(
            records=used,
            noise=noise,
            tables={"proxy_requests": rows, "proxy_events": events},
        )
