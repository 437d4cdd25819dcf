"""vegeta, hey, llm-load-test, genai-bench and inference-perf result files.

Samples (origins in each format's `samples`) written from each tool's writer
(vegeta lib/results.go, hey requester/print.go, llm-load-test utils.py,
genai-bench's mock run data, inference-perf reportgen/base.py) and a real
stage summary from inference-perf's demos. Per-request counts and outcomes
are exact.
"""

import datetime as dt
import json
from pathlib import Path

import polars as pl

from logforensics.ingest import ParseContext, SourceFile, detect
from tests.conftest import write

UTC = dt.timezone.utc
CTX = ParseContext(year=2026)
SAMPLES = Path(__file__).parents[1] / "logforensics" / "ingest" / "samples"


def parse(path: Path, ctx: ParseContext = CTX):
    source = SourceFile(path, path.name, "client")
    fmt = detect(source)
    result = fmt.parse(source, ctx)
    assert result.parsed + result.noise + result.unparsed == result.lines
    return fmt.name, result, result.table("client_requests")


def outcomes(requests: pl.DataFrame) -> dict[str, int]:
    return dict(requests.group_by("outcome").len().iter_rows())


# ---------------------------------------------------------------- vegeta, hey


def test_vegeta_json_and_csv_read_the_same_results():
    _, _, json_req = parse(SAMPLES / "vegeta_results.json")
    _, _, csv_req = parse(SAMPLES / "vegeta_results.csv")
    columns = ["index", "started_at", "latency_s", "outcome", "http_status", "request_id"]
    assert json_req.select(columns).equals(csv_req.select(columns))
    assert outcomes(json_req) == {"ok": 4, "http_503": 1, "timeout": 1}
    assert json_req["request_id"][0] == "cmpl-7a1c0e5b9d2f4c3e8a6b1d0f2e4c6a80"  # from the body
    assert json_req["started_at"][1] == dt.datetime(2026, 1, 1, 0, 0, 30, 323456, tzinfo=UTC)


def test_vegeta_attacks_are_steps(tmp_path):
    lines = (SAMPLES / "vegeta_results.json").read_text().splitlines()
    named = [
        json.dumps({**json.loads(line), "attack": "rate-10" if i < 3 else "rate-50"})
        for i, line in enumerate(lines)
    ]
    _, _, req = parse(write(tmp_path / "r.json", "\n".join(named) + "\n"))
    assert req["step"].to_list() == [1, 1, 1, 2, 2, 2]


def test_hey_offsets_need_an_anchor_and_failures_without_answer_are_absent():
    _, result, req = parse(SAMPLES / "hey_results.csv")
    assert req.height == 6 and outcomes(req) == {"ok": 5, "http_503": 1}
    assert req["started_at"].is_null().all()
    assert any("not placeable" in n for n in result.notes)
    assert any("not in this file" in n for n in result.notes)
    anchor = dt.datetime(2026, 1, 1, tzinfo=UTC)
    _, _, placed = parse(SAMPLES / "hey_results.csv", ParseContext(year=2026, client_anchor=anchor))
    assert placed["started_at"][0] == anchor
    assert placed["started_at"][4] == anchor + dt.timedelta(seconds=0.8127)


# ---------------------------------------------------------------- LLM testers


def test_llm_load_test_output_file():
    name, result, req = parse(SAMPLES / "llm_load_test_output-004.json")
    assert name == "llm_load_test" and req.height == 6
    assert outcomes(req) == {"ok": 4, "http_503": 1, "refused": 1}
    assert req["concurrency"].unique().to_list() == [4]
    assert req["started_at"][0] == dt.datetime(2026, 1, 1, 0, 0, 30, 250000, tzinfo=UTC)
    assert result.tester_summaries[0] | {} == {
        "tester": "llm-load-test",
        "concurrency": 4,
        "sent": 6,
        "ok": 4,
        "failed": 2,
        "duration_s": 2.6,
    }


def test_genai_bench_requests_are_counted_not_placed(tmp_path):
    name, result, req = parse(SAMPLES / "genai_bench_run.json")
    assert name == "genai_bench" and req.height == 32  # 2 records, 30 from the aggregate
    assert req["started_at"].is_null().all() and req["concurrency"].unique().to_list() == [1]
    assert any("no per-request time" in n for n in result.notes)
    doc = json.loads((SAMPLES / "genai_bench_run.json").read_text())
    doc["_time_unit"] = "ms"
    doc["individual_request_metrics"][0]["e2e_latency"] = 2530.9
    doc["individual_request_metrics"].append(
        {"error_code": 500, "error_message": "Internal Server Error", "e2e_latency": None}
    )
    doc["aggregated_metrics"].update(num_requests=3, num_error_requests=1)
    _, _, req = parse(write(tmp_path / "run.json", json.dumps(doc, indent=4)))
    assert outcomes(req) == {"ok": 2, "http_500": 1}
    assert req["latency_s"][0] == 2.5309


def test_inference_perf_per_request_anchored_at_the_stage_start():
    name, result, req = parse(SAMPLES / "inference_perf_per_request_lifecycle_metrics.json")
    assert name == "inference_perf_requests" and req.height == 5
    assert outcomes(req) == {"ok": 3, "http_504": 1, "timeout": 1}
    assert req["started_at"].is_null().all()  # perf_counter, no anchor
    start = dt.datetime(2026, 1, 1, tzinfo=UTC)
    _, _, req = parse(
        SAMPLES / "inference_perf_per_request_lifecycle_metrics.json",
        ParseContext(year=2026, client_anchor=start),
    )
    assert req["started_at"].to_list()[:2] == [start, start + dt.timedelta(seconds=0.25)]
    assert req["request_id"][0] == "cmpl-4e1f2a3b5c6d7e8f9a0b1c2d3e4f5a60"


def test_inference_perf_cut_short_keeps_the_complete_records(tmp_path):
    text = (SAMPLES / "inference_perf_per_request_lifecycle_metrics.json").read_text()
    cut = text[: text.index('"TimeoutError"')]
    _, result, req = parse(write(tmp_path / "per_request_lifecycle_metrics.json", cut))
    assert req.height == 4 and result.unparsed > 0


def test_inference_perf_summary_is_the_testers_own_figures(tmp_path):
    _, result, req = parse(SAMPLES / "inference_perf_stage_0_lifecycle_metrics.json")
    assert req.height == 0 and result.tester_summaries[0]["sent"] == 60
    summary = {
        "load_summary": {
            "count": 483,
            "send_duration": 60.0,
            "requested_rate": 8.0,
            "concurrency": 8,
        },
        "successes": {"count": 480, "latency": {"request_latency": {"median": 2.11, "p90": 5.94}}},
        "failures": {
            "count": 3,
            "by_label": {
                "504 - Gateway Timeout": {"count": 2, "messages": []},
                "400 - Invalid JSON": {"count": 1, "messages": []},
            },
        },
    }
    path = write(tmp_path / "stage_2_lifecycle_metrics.json", json.dumps(summary, indent=2))
    _, result, _ = parse(path)
    figures = result.tester_summaries[0]
    assert (figures["step"], figures["concurrency"], figures["sent"], figures["failed"]) == (
        3,
        8,
        483,
        3,
    )
    assert figures["failures_by_label"] == {"504 - Gateway Timeout": 2, "400 - Invalid JSON": 1}
    prometheus = {
        "load_summary": {},
        "successes": {"count": 1140, "queue_len": {"mean": 0}},
        "failures": {},
    }
    _, result, _ = parse(
        write(tmp_path / "stage_0_prometheus_metrics.json", json.dumps(prometheus))
    )
    assert result.tester_summaries == [] and any("Prometheus" in n for n in result.notes)
