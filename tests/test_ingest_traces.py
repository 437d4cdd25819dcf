"""Engines' OpenTelemetry spans (OTLP JSON, Jaeger JSON) → request_timings and server_requests.

Samples in ingest/samples (origins there): the collector's file exporter lines
with vLLM's llm_request spans (attribute names from vllm/tracing SpanAttributes),
the same spans as Jaeger's JSON, and SGLang's span tree (sglang/srt/tracing).
"""

import json
from pathlib import Path

import polars as pl

from logforensics.analysis import Options, analyze
from logforensics.ingest import FILE_FORMATS, ParseContext, SourceFile, detect
from logforensics.ingest.inputs import load
from tests.conftest import write

CTX = ParseContext(year=2026)
SAMPLES = Path(__file__).parents[1] / "logforensics" / "ingest" / "samples"


def parse(path: Path, instance: str = "spans"):
    source = SourceFile(path, path.name, instance)
    fmt = detect(source)
    return fmt, fmt.parse(source, CTX)


def test_vllm_spans_give_each_requests_engine_timings():
    fmt, result = parse(SAMPLES / "otlp_vllm_spans.jsonl")
    assert fmt.name == "otlp_json" and result.unparsed == 0
    timings = result.table("request_timings").sort("request_id")
    assert timings["instance"].to_list() == ["vllm-0", "vllm-0", "vllm-1"]
    assert timings["queue_s"].to_list() == [0.05, 4.81, 0.04]
    assert timings["decode_s"].to_list() == [1.94, 2.05, 1.98]
    server = result.table("server_requests").sort("request_id")
    assert server["event"].unique().to_list() == ["finished"]  # never `received`: see traces
    assert (server["at"] - timings["at"]).dt.total_milliseconds().to_list() == [2250, 7120, 2310]
    assert any("1 SGLang" not in n and "of 4 spans" in n for n in result.notes)


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


def test_sglang_spans_are_read_with_sglangs_own_keys():
    _, result = parse(SAMPLES / "otlp_sglang_spans.json", "sglang-0")
    row = result.table("request_timings").row(0, named=True)
    assert row["instance"] == "sglang-0"  # only service.name: the file's instance
    assert row["request_id"] == "7c1d2e3f4a5b46c7a8d9e0f1a2b3c4d5"
    assert round(row["queue_s"], 3) == 1.4 and round(row["prefill_s"], 3) == 0.288
    assert round(row["e2e_s"], 2) == 3.1
    assert any("name no pod" in n for n in result.notes)


def test_a_cut_line_is_counted_and_the_others_read(tmp_path):
    lines = (SAMPLES / "otlp_vllm_spans.jsonl").read_text().splitlines()
    path = write(tmp_path / "spans.jsonl", lines[0] + "\n" + lines[1][:500] + "\n")
    _, result = parse(path)
    assert (result.lines, result.parsed, result.unparsed) == (2, 1, 1)
    assert result.table("request_timings").height == 2


def test_span_pods_are_mapped_to_log_instances_and_named(tmp_path):
    spans = tmp_path / "spans.jsonl"
    spans.write_text((SAMPLES / "otlp_vllm_spans.jsonl").read_text())
    # kubectl logs --prefix names the pod: a log of that name is that instance
    write(
        tmp_path / "vllm-0.log",
        'INFO:     127.0.0.1:44558 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n',
    )
    inputs = load([tmp_path], CTX, instance_labels={"vllm-1": "gpu-b"})
    names = inputs.tables["request_timings"]["instance"].unique().sort().to_list()
    assert names == ["gpu-b", "vllm-0"]
    account = next(f for f in inputs.files if f.path.endswith("spans.jsonl"))
    assert any("vllm-1 are instance gpu-b" in n for n in account.notes)
    assert account.instance == "gpu-b, vllm-0"  # the instances its rows describe
    assert "spans" not in inputs.addresses  # the file itself names no instance


def test_spans_tie_requests_by_id_and_never_prove_a_miss(tmp_path):
    rows = [
        {
            "started_at": f"2026-01-01T00:00:{30 + k}.0Z",
            "latency_s": 3.0,
            "ok": True,
            "request_id": f"chatcmpl-lf-000{k + 1}",
        }
        for k in range(3)
    ] + [
        {
            "started_at": "2026-01-01T00:00:34.0Z",
            "latency_s": 30.0,
            "ok": False,
            "error": "timed out",
            "request_id": "chatcmpl-lf-0004",
        }
    ]
    client = write(tmp_path / "client.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    analysis = analyze([client, SAMPLES / "otlp_vllm_spans.jsonl"], Options())
    req = analysis.requests.sort("request_id")
    assert req["reached_instance"].to_list()[:3] == ["vllm-0", "vllm-0", "vllm-1"]
    assert req["reach_witness"].to_list()[:3] == ["request_id"] * 3
    # no span for the timed-out request: that is no proof it missed the engines
    assert req.filter(pl.col("request_id") == "chatcmpl-lf-0004")["reach"].to_list() == ["unknown"]


def test_no_other_format_reads_span_exports():
    for name in ("otlp_vllm_spans.jsonl", "otlp_sglang_spans.json", "jaeger_vllm_traces.json"):
        head = SourceFile(SAMPLES / name, name, "x").head()
        claimed = [f.name for f in FILE_FORMATS.values() if f.sniff(head)]
        assert len(claimed) == 1, (name, claimed)
