"""The vLLM routers. Exact text, from the projects' source or real output:

* vLLM production-stack ``src/vllm_router/log.py`` and
  ``services/request_service/request.py`` (``Routing request %s [with session
  id %s] to %s at %f, process time = %.4f``).
* vllm-project/router (PyPI ``vllm-router``, the Rust router adapted from SGLang's):
  real output of 0.1.17 (``tracing_subscriber`` fmt lines ``DATE TIME LEVEL
  target: file:line: message``, ANSI-coloured on the console, plain in its
  ``--log-dir`` file; the Python launcher's own ``DEBUG: …`` prints).
"""

from __future__ import annotations

import polars as pl

from logforensics.ingest import register_line_format
from logforensics.ingest.base import (
    Claim,
    Sample,
    SourceFile,
)
from logforensics.ingest.toolkit import (
    UTC_US,
    ProxyLineFormat,
    first_kind,
    proxy_failures,
    source_column,
)

# ------------------------------------------------------- vLLM production-stack

ROUTER_RE = (
    r"Routing request (?P<rid>\S+)(?: with session id \S+)? to (?P<url>\S+) "
    r"at (?P<epoch>\d+(?:\.\d+)?), process time = (?P<pt>[\d.]+)"
)
ROUTER_ERROR_RE = (
    r"^(?:ERROR|WARNING): (?P<err>(?:HTTP|Unexpected) error in (?:prefiller|decoder): .*?"
    r"|Failed to connect to backend.*?)(?: \([\w.]+:\d+:[\w.]+\))?$"
)


@register_line_format
class ProductionStackRouter(ProxyLineFormat):
    """The vLLM production-stack router (``vllm_router``).

    ``Routing request ID [with session id S] to URL at EPOCH, process time =
    T`` → a `proxy_requests` row: `at` = EPOCH (the router's own clock, to
    the microsecond), `upstream` = URL, `request_id` = ID (the client's
    X-Request-Id when it sent one). It records the routing decision only:
    status and delivery are unknown. Prefill/decode errors →
    `proxy_events`.
    """

    name = "vllm_router"
    priority = 37
    per_line = True
    samples = (
        Sample(
            "production-stack src/vllm_router log.py + request.py; values invented",
            "[2026-02-24 06:16:14,001] INFO: Routing request 8d2c9a1c to http://10.0.0.22:8000 at "
            "1771913774.0, process time = 0.0009 "
            "(request.py:350:vllm_router.services.request_service.request)",
            role="proxy",
            tables=(("proxy_requests", 1),),
        ),
    )
    pattern = ROUTER_RE + "|" + ROUTER_ERROR_RE

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        routed = self.parsed(lines, ROUTER_RE)
        rows = routed.select(
            (pl.col("epoch").cast(pl.Float64) * 1e6)
            .round(0)
            .cast(pl.Int64)
            .cast(UTC_US)
            .alias("at"),
            pl.col("instance").alias("proxy"),
            pl.col("url").alias("upstream"),
            pl.lit("unknown").alias("status_origin"),
            pl.lit("unknown").alias("delivery"),
            pl.col("rid").alias("request_id"),
            source_column(source),
        )
        failed = self.parsed(
            lines.filter(~pl.col("line_no").is_in(routed["line_no"].implode())), ROUTER_ERROR_RE
        ).with_columns(
            pl.lit(None, dtype=pl.Int64).alias("http_status"),
            pl.lit(None, dtype=pl.Utf8).alias("upstream"),
        )
        kind = first_kind(
            {"timeout": r"[Tt]imeout", "conn_failed": r"[Cc]onnect", "upstream_error": r"."},
            pl.col("err"),
        )
        events = proxy_failures(failed, kind, pl.col("err"), source)
        return Claim(
            records=pl.concat([routed["line_no"], failed["line_no"]]),
            tables={"proxy_requests": rows, "proxy_events": events},
        )


# ------------------------------------------------ vllm-project/router (Rust)

# after the ISO stamp is peeled: `` INFO vllm_router_rs::server: src/server.rs:1192: …``
ROUTER_RS_RE = (
    r"^\s*(?:\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?Z?\s+)?"
    r"(?P<lvl>TRACE|DEBUG|INFO|WARN|ERROR)\s+(?P<target>vllm_router_rs(?:::\w+)*): "
    r"(?:(?P<file>src/[\w/.-]+\.rs):(?P<lno>\d+): )?(?P<message>.*)$"
)
# the Python launcher (``vllm_router_rs`` start-up prints, stdout)
ROUTER_RS_LAUNCHER_RE = (
    r"^DEBUG: (?:Server startup function called|Initializing logging|Logging initialized|"
    r"Initializing Prometheus metrics|Prometheus metrics initialized|Creating HTTP client|"
    r"HTTP client created|Creating AppContext|AppContext created)$"
)
# messages of a request the router gave up on or refused, by kind (the binary's own
# strings: the concurrency middleware's 429s and queue timeout; the HTTP router's
# "Failed to send typed request worker_url=…", "Request failed: …", retries)
ROUTER_RS_KINDS = {
    "refused": r"returning 429|Request queue is full|timed out in queue",
    "timeout": r"[Tt]imed? ?out|[Tt]imeout",
    "conn_refused": r"[Cc]onnection refused",
    "conn_failed": r"[Cc]onnect|tcp connect error",
    "upstream_error": r"[Rr]equest failed|Failed to send|[Ee]rror|[Rr]etrying",
}
URL_IN_TEXT_RE = r"(?:worker_url=|worker[: ]+)?(https?://[\w.:-]+(?:/\S*)?)"


@register_line_format
class VllmRouterRs(ProxyLineFormat):
    """vllm-project/router (the Rust ``vllm-router``), its tracing lines.

    It writes no line per routed request: at ``--log-level debug`` its
    concurrency limiter writes ``Token bucket: acquired 1 tokens, N remaining``
    when it admits a request and ``returned 1 tokens`` when one ends, with no
    request id and no worker, so they give no `proxy_requests` row (a request
    cannot be told from another, nor its upstream known); they and the
    start-up, health and policy lines are the router's own (noise). A WARN or
    ERROR line is a `proxy_event`: a refusal of its limiter (``returning
    429``, a full queue, a queue timeout → refused), a timeout, a failed
    connection, a failed request to a worker (upstream error), with the worker
    URL the message names; other warnings (``Concurrency queue processor
    shutting down`` at exit) are noise.
    """

    name = "vllm_router_rs"
    priority = 26
    per_line = True
    supersedes = ("runtime_chatter",)  # its start-up lines ("Starting server on …") are its own
    samples = (
        Sample(
            "real output: vllm-router 0.1.17 (PyPI) --policy round_robin --log-level debug, "
            "its --log-dir file (recordings/vrouter-compute)",
            "2026-12-01 17:52:53  INFO vllm_router_rs::server: src/server.rs:1192: Router ready "
            '| workers: ["http://127.0.0.1:8002", "http://127.0.0.1:8001"]',
            role="proxy",
            status="noise",
        ),
        Sample(
            "real output: vllm-router 0.1.17, its --log-dir file: one request admitted "
            "(recordings/vrouter-compute)",
            "2026-12-01 17:53:00 DEBUG vllm_router_rs::core::token_bucket: "
            "src/core/token_bucket.rs:75: Token bucket: acquired 1 tokens, 32767 remaining",
            role="proxy",
            status="noise",
        ),
        Sample(
            "real output: vllm-router 0.1.17, its console (stdout, ANSI colours as printed) "
            "(recordings/vrouter-compute)",
            "\x1b[2m2026-12-01 17:52:53\x1b[0m \x1b[32m INFO\x1b[0m "
            "\x1b[2mvllm_router_rs::server\x1b[0m\x1b[2m:\x1b[0m \x1b[2msrc/server.rs\x1b[0m"
            "\x1b[2m:\x1b[0m\x1b[2m1270:\x1b[0m Starting server on 127.0.0.1:8000",
            role="proxy",
            status="noise",
        ),
        Sample(
            "real output: vllm-router 0.1.17, its Python launcher's start-up print "
            "(recordings/vrouter-compute)",
            "DEBUG: Server startup function called",
            role="proxy",
            status="noise",
        ),
    )
    pattern = ROUTER_RS_RE + "|" + ROUTER_RS_LAUNCHER_RE

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        hits = self.parsed(
            lines, ROUTER_RS_RE, needs=pl.col("msg").str.contains("vllm_router_rs", literal=True)
        )
        launcher = lines.filter(pl.col("msg").str.contains(ROUTER_RS_LAUNCHER_RE))
        bad = hits.filter(pl.col("lvl").is_in(["WARN", "ERROR"])).with_columns(
            pl.lit(None, dtype=pl.Int64).alias("http_status"),
            pl.col("message").str.extract(URL_IN_TEXT_RE, 1).alias("upstream"),
        )
        kind = first_kind(ROUTER_RS_KINDS, pl.col("message"))
        events = proxy_failures(bad, kind, pl.col("message"), source)
        failed = bad.filter(kind.is_not_null())["line_no"]
        return Claim(
            records=failed,
            noise=pl.concat(
                [
                    hits.filter(~pl.col("line_no").is_in(failed.implode()))["line_no"],
                    launcher["line_no"],
                ]
            ),
            tables={"proxy_events": events},
        )
