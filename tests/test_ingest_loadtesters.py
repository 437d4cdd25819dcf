"""Load testers' own result files → client_requests (logforensics/ingest/testers/).

Where each sample in tests/data/loadtesters/ takes its shape from (key names,
key order, nesting, units, clocks, how the file is written):

* guidellm_v04_benchmarks.json — vllm-project/guidellm
  src/guidellm/schemas/request_stats.py (GenerativeRequestStats, computed
  request_start_time/request_end_time/request_latency/output_tokens),
  src/guidellm/schemas/info.py @ 04fcfd86 (RequestInfo, RequestTimings: epoch s),
  src/guidellm/benchmark/schemas/generative/benchmark.py (requests:
  StatusBreakdown successful/incomplete/errored/total), .../generative/metrics.py
  (SchedulerMetrics.requests_made) and the `request_totals: StatusBreakdown`
  field, src/guidellm/benchmark/schemas/report.py (top level metadata/args/
  benchmarks, written with json.dumps: one line). Values invented; the file
  holds 2 of 3 successful requests (a sample).
* guidellm_v04_truncated.json — the same document cut inside `errored`.
* guidellm_v02_benchmarks.json — neuralmagic/guidellm
  src/guidellm/benchmark/benchmark.py (GenerativeTextResponseStats /
  GenerativeTextErrorStats, total_count, sampled_size, run_stats) and
  src/guidellm/benchmark/output.py (GenerativeBenchmarksReport.save_json:
  json.dumps of {"benchmarks": [...]}).
* guidellm_benchmarks.yaml — the v0.4 report as yaml.dump writes it (keys
  sorted), trimmed to the fields read.
* vllm_bench_detailed.json — vllm-project/vllm vllm/benchmarks/serve.py
  @ 009e6d4a (result dict and result_json: date "%Y%m%d-%H%M%S" local time,
  start_times from time.perf_counter(), json.dump on one line) and
  vllm/benchmarks/lib/endpoint_request_func.py (a failed request keeps
  latency 0.0, ttft 0.0, error = response.reason).
* vllm_bench_summary.json — the same without --save-detailed (serve.py deletes
  input_lens, output_lens, start_times, ttfts, itls, generated_texts, errors;
  latencies and queue_times survive).
* vllm_bench_aggregates_old.json — benchmarks/benchmark_serving.py @ 0049e29c
  (no `failed`, the misspelled "request_goodput:" key), without the arrays.
* vllm_bench_append_truncated.json — --append-result (one object per line),
  the second line cut inside generated_texts.
* aiperf_profile_export.jsonl — ai-dynamo/aiperf
  docs/tutorials/working-with-profile-exports.md @ 13992dbd (MetricRecordInfo:
  metadata with epoch-ns request_start_ns/request_end_ns, x_request_id sent as
  X-Request-ID; metrics {value, unit}; error {code, type, message}).
* aiperf_ugly.jsonl — the same shape with a warm-up record, request_latency in
  "s" on one line, a repeated x_request_id and a last line cut in half.
* generic_same_requests.jsonl — aiperf_profile_export.jsonl's three requests
  in the README's generic client form.
* genai_perf_profile_export.json — triton-inference-server/perf_analyzer
  src/profile_data_exporter.cc (compact rapidjson Writer; experiments first;
  timestamps are system_clock ns) and the openai fixture of
  triton-inference-server/client genai-perf tests/test_llm_profile_data_parser.py
  (SSE chunks in response_outputs). The failed request's body is vLLM's
  ErrorResponse; how perf_analyzer records a failed request was not verified.
* llmperf_individual_responses.json — ray-project/llmperf
  src/llmperf/common_metrics.py, ray_clients/openai_chat_completions_client.py
  (error_code None on success, else the HTTP status; zeros on failure),
  token_benchmark_ray.py (json.dump(indent=4)), and the committed
  benchmarks/results/.../*_individual_responses.json (key order).
* llmperf_truncated_individual_responses.json — the same, cut in record 3.
* llmperf_fork_relative_individual_responses.json — the same plus a
  `start_time` in seconds since the test began, as forks add (a newer upstream
  token_benchmark_ray.py stores `sample_time` under REQ_START_TIME, whose key
  string was not seen).
* locust_stats.csv / locust_stats_history.csv / locust_failures.csv —
  locustio/locust locust/stats.py StatsCSV column lists (requests_csv_columns,
  stats_history_csv_columns, failures_columns), as in docs/formats.md §6.6.
* k6_results.json — grafana/k6 JSON output (docs/formats.md §6.7: Metric and
  Point lines) and lib/netext/httpext/tracer.go (Trail.SaveSamples: every
  http_req_* sample is stamped at the request's EndTime).
"""

import datetime as dt
import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from logforensics.ingest import FILE_FORMATS, ParseContext, SourceFile, detect
from logforensics.model import source_labels as labels
from tests.conftest import RECORDINGS, outcomes, read_client_file, report_json

DATA = Path(__file__).parent / "data" / "loadtesters"
UTC = dt.timezone.utc
CTX = ParseContext(year=2026)

SAMPLES = {
    "guidellm_v04_benchmarks.json": "guidellm_report",
    "guidellm_v04_truncated.json": "guidellm_report",
    "guidellm_v02_benchmarks.json": "guidellm_report",
    "guidellm_benchmarks.yaml": "guidellm_report",
    "vllm_bench_detailed.json": "vllm_bench",
    "vllm_bench_summary.json": "vllm_bench",
    "vllm_bench_aggregates_old.json": "vllm_bench",
    "vllm_bench_append_truncated.json": "vllm_bench",
    "aiperf_profile_export.jsonl": "aiperf_jsonl",
    "aiperf_ugly.jsonl": "aiperf_jsonl",
    "genai_perf_profile_export.json": "genai_perf_json",
    "llmperf_individual_responses.json": "llmperf_responses",
    "llmperf_truncated_individual_responses.json": "llmperf_responses",
    "llmperf_fork_relative_individual_responses.json": "llmperf_responses",
    "locust_stats.csv": "locust_csv",
    "locust_stats_history.csv": "locust_csv",
    "locust_failures.csv": "locust_csv",
    "k6_results.json": "k6_json",
    "generic_same_requests.jsonl": "client_jsonl",
}
OURS = sorted(set(SAMPLES.values()) - {"client_jsonl"})


def t(h, m, s, us=0):
    return dt.datetime(2026, 2, 24, h, m, s, us, tzinfo=UTC)


def source(path: Path) -> SourceFile:
    return SourceFile(path, path.name, path.stem)


def parse(name, ctx=CTX, path=None):
    src = source(path or DATA / name)
    fmt = detect(src)
    assert fmt is not None, f"{name} not recognised"
    result = fmt.parse(src, ctx)
    assert result.parsed >= 0 and result.noise >= 0 and result.unparsed >= 0
    assert result.parsed + result.noise + result.unparsed == result.lines
    return fmt, result, result.table("client_requests")


def noted(result, *words):
    return any(all(w in n for w in words) for n in result.notes)


# ---------------------------------------------------------------- sniffing


def test_every_sample_is_there():
    assert sorted(p.name for p in DATA.iterdir()) == sorted(SAMPLES)


@pytest.mark.parametrize("name, fmt", SAMPLES.items())
def test_each_sample_is_sniffed_as_its_own_format(name, fmt):
    assert detect(source(DATA / name)).name == fmt


@pytest.mark.parametrize("fmt", OURS)
def test_sniff_rejects_the_other_formats_samples(fmt, tmp_path):
    others = [DATA / n for n, f in SAMPLES.items() if f != fmt]
    generic = tmp_path / "generic.jsonl"
    generic.write_text('{"started_at": "2026-02-24T06:16:02Z", "latency_s": 1.0, "ok": true}\n')
    seed = tmp_path / "rows.txt"
    seed.write_text("(1, 3.57, 300, 'OK')\n(2, 120.31, 0, 'HTTP Error 503: Service Unavailable')\n")
    log = tmp_path / "gpu-0.log"
    log.write_text(
        '2026-02-24T06:16:05.614699807Z INFO:     10.0.0.2:40246 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
    )
    for path in [*others, generic, seed, log]:
        assert not FILE_FORMATS[fmt].sniff(source(path).head()), f"{fmt} claims {path.name}"


def test_generic_client_records_are_still_client_jsonl(tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_text('{"started_at": "2026-02-24T06:16:02Z", "latency_s": 1.0, "ok": true}\n')
    assert detect(source(path)).name == "client_jsonl"
    assert detect(source(DATA / "generic_same_requests.jsonl")).name == "client_jsonl"


def test_load_tester_formats_sniff_before_the_generic_ones():
    order = list(FILE_FORMATS)
    assert max(order.index(f) for f in OURS) < order.index("client_jsonl")


# ---------------------------------------------------------------- GuideLLM


def test_guidellm_v04_records_and_the_sampled_out_remainder():
    fmt, result, rows = parse("guidellm_v04_benchmarks.json")
    assert (result.lines, result.parsed, result.unparsed) == (1, 1, 0)
    # 2 successful + 1 incomplete + 1 errored records, + 1 successful only in the totals
    assert rows.height == 5
    assert rows["ok"].to_list() == [True, True, False, False, True]
    assert rows["started_at"][0] == t(6, 16, 2, 214000)
    assert rows["ended_at"][0] == t(6, 16, 5, 614000)
    assert rows["latency_s"][0] == 3.4
    assert rows["output_tokens"].to_list()[:2] == [128, 128]
    # v0.4+ response_id is vLLM's own id: the join key
    assert rows["request_id"][0] == "chatcmpl-4f1e2d3c4b5a69788796a5b4c3d2e1f0"
    assert rows["request_id"][3] == "d6f8b1c3-4e50-4192-bdce-3f4a5b6c7d8e"
    assert rows["http_status"][3] == 503
    assert rows["error"][3].startswith("HTTPStatusError: Server error '503 Service Unavailable'")
    assert rows["error"][2] is None  # GuideLLM wrote none: the outcome says what it was
    assert rows["outcome"].to_list() == ["ok", "ok", "cancelled", "http_503", "ok"]
    assert labels(rows["source"])[0] == "guidellm_v04_benchmarks.json:record 1"
    assert (
        labels(rows["source"])[4]
        == "guidellm_v04_benchmarks.json:benchmark 1 successful (aggregate count)"
    )
    assert rows["started_at"][4] is None
    assert noted(result, "sample", "totals come from the aggregate counts", "1 successful")
    assert noted(result, "absolute times", "epoch seconds")


def test_guidellm_v02_schema():
    _, result, rows = parse("guidellm_v02_benchmarks.json")
    assert rows["ok"].to_list() == [True, True, False]
    assert rows["started_at"].to_list() == [
        t(6, 16, 2, 214000),
        t(6, 16, 2, 300000),
        t(6, 16, 2, 250000),
    ]
    assert rows["latency_s"].to_list() == [3.4, 3.486, 0.012]
    assert rows["output_tokens"].to_list() == [128, 130, 0]
    assert rows["request_id"][2] == "11111111-aaaa-4bbb-8ccc-000000000003"
    assert rows["http_status"].to_list() == [None, None, 503]  # "503 Server Error: ..."
    assert not noted(result, "sample")  # total_count matches the records


def test_guidellm_truncated_document_keeps_the_complete_records():
    _, result, rows = parse("guidellm_v04_truncated.json")
    assert rows.height == 3
    assert rows["ok"].to_list() == [True, True, False]
    assert rows["request_id"][1] == "chatcmpl-5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d"
    assert (result.lines, result.parsed, result.unparsed) == (1, 0, 1)
    assert noted(result, "cut short", "3 complete request records")


def test_guidellm_yaml_is_read_as_the_json_report():
    _, result, rows = parse("guidellm_benchmarks.yaml")
    assert rows.height > 0 and result.parsed == result.lines


def test_guidellm_081_json_and_yaml_of_one_run(tmp_path):
    """GuideLLM 0.8.1's own json and yaml (corpus guidellm-kv): the same requests, read
    once; the scheduler's 8th request of concurrent@4, created but never recorded, is sent
    with outcome unknown; concurrency is the strategy's streams."""
    from logforensics.ingest.inputs import load
    from tests.conftest import corpus

    folder = corpus("guidellm-kv")
    inputs = load([folder / "benchmarks.json", folder / "benchmarks.yaml"], CTX)
    rows = inputs.tables["client_requests"]
    per_step = rows.group_by("concurrency").agg(
        pl.len().alias("sent"), (pl.col("outcome") == "ok").sum().alias("ok")
    )
    assert sorted(per_step.rows()) == [(2, 4, 4), (4, 8, 7), (8, 16, 13), (16, 32, 18)]
    assert rows.filter(pl.col("outcome") == "timeout").height == 17
    assert [s.file.endswith("benchmarks.yaml") for s in inputs.same_run] == [True]
    assert [s["concurrency"] for s in inputs.tester_summaries] == [2, 4, 8, 16]


# ---------------------------------------------------------------- vLLM bench serve


def test_vllm_detailed_anchored_by_the_files_date_in_the_client_zone():
    ctx = ParseContext(year=2026, client_tz="Asia/Seoul")
    _, result, rows = parse("vllm_bench_detailed.json", ctx)
    assert rows["ok"].to_list() == [True, False, True, True]
    assert rows["index"].to_list() == [0, 1, 2, 3]
    # date 20260224-151610 KST = 06:16:10Z is the last request's end (start 81234.56 + 7.44 s)
    assert rows["ended_at"][3] == t(6, 16, 10)
    assert rows["started_at"][0] == t(6, 16, 2, 500000)
    assert rows["latency_s"].to_list() == [3.5, None, 3.6, 7.44]
    assert rows["ended_at"][1] is None  # vLLM records no latency for a failure
    assert rows["http_status"].to_list() == [None, 503, None, None]  # "Service Unavailable"
    assert rows["error"][1] == "Service Unavailable"
    assert rows["output_tokens"].to_list() == [300, 0, 300, 300]
    assert labels(rows["source"])[1] == "vllm_bench_detailed.json:record 2"
    assert noted(
        result, "perf_counter", "anchored by the file's `date` 20260224-151610", "Asia/Seoul"
    )


def test_vllm_file_anchor_wins_over_started_at_and_says_so():
    ctx = ParseContext(year=2026, client_tz="Asia/Seoul", client_anchor=t(6, 16, 0))
    _, result, rows = parse("vllm_bench_detailed.json", ctx)
    assert rows["started_at"][0] == t(6, 16, 2, 500000)
    assert noted(result, "--started-at not used", "differ by -2.5 s")


def test_vllm_without_save_detailed_keeps_latencies_but_no_times():
    _, result, rows = parse("vllm_bench_summary.json")
    assert rows["ok"].to_list() == [True, False, True, True]
    assert rows["latency_s"].to_list() == [3.5, None, 3.6, 7.44]
    assert rows["started_at"].null_count() == 4
    assert noted(result, "latency > 0")
    assert noted(result, "no `start_times`")


def test_vllm_aggregates_only_become_unplaceable_rows():
    _, result, rows = parse("vllm_bench_aggregates_old.json")
    assert rows.height == 10
    assert rows["ok"].sum() == 8
    assert rows["started_at"].null_count() == 10
    assert noted(result, "aggregates only", "cannot be matched one by one")
    assert noted(result, "num_prompts − completed = 2")


def test_vllm_append_result_with_a_cut_line():
    _, result, rows = parse("vllm_bench_append_truncated.json")
    assert rows["step"].to_list() == [1] * 4 + [2] * 4
    assert (result.lines, result.parsed, result.unparsed) == (2, 1, 1)
    assert result.unparsed_examples[0][0] == 2
    # run 2 lost its errors array: outcome from ttft > 0, still 3 ok / 1 failed
    assert rows.filter(rows["step"] == 2)["ok"].to_list() == [True, False, True, True]
    assert rows["started_at"][4] == t(15, 20, 2, 500000)  # date read in UTC (the default zone)
    assert noted(result, "line 2 is cut short")


# ---------------------------------------------------------------- AIPerf


def test_aiperf_profile_export():
    _, result, rows = parse("aiperf_profile_export.jsonl")
    assert (result.lines, result.parsed, result.noise) == (3, 3, 0)
    assert rows["ok"].to_list() == [True, False, True]
    assert rows["started_at"][0] == t(6, 16, 2, 214000)
    assert rows["ended_at"][2] == t(6, 16, 5, 786000)
    assert rows["latency_s"].to_list() == [3.4, 0.012, 3.486]
    assert rows["output_tokens"].to_list() == [300, None, 280]
    assert rows["ttft_s"].to_list() == [0.255886568, None, 0.255886568]
    assert rows["request_id"][0] == "7609a2e7-aa53-4ab1-98f4-f35ecafefd25"
    assert rows["http_status"].to_list() == [None, 503, None]
    assert rows["error"][1] == (
        "Service Unavailable: upstream connect error or disconnect/reset before headers"
    )
    assert labels(rows["source"]) == [f"aiperf_profile_export.jsonl:{n}" for n in (1, 2, 3)]
    assert noted(result, "epoch ns")


def test_aiperf_warmup_mixed_units_duplicates_and_a_cut_line():
    _, result, rows = parse("aiperf_ugly.jsonl")
    assert rows.height == 4
    assert rows["warmup"].to_list() == [True, False, False, False]
    assert rows["latency_s"][2] == 3.486  # written in "s", the others in "ms"
    assert (result.parsed, result.unparsed) == (4, 1)
    assert result.unparsed_examples[0][0] == 5
    assert noted(result, "mixed units")
    assert noted(
        result, "0b1f5d0e-2c4a-4f7e-9d6b-5a8e3c1d2f40", "aiperf_ugly.jsonl:3", "aiperf_ugly.jsonl:4"
    )
    assert noted(result, "aiperf_ugly.jsonl:5")


def test_the_same_requests_in_two_formats_give_the_same_rows():
    _, _, aiperf = parse("aiperf_profile_export.jsonl")
    _, _, generic = parse("generic_same_requests.jsonl")
    cols = [c for c in aiperf.columns if c not in ("run", "source")]
    assert aiperf.select(cols).equals(generic.select(cols))


# ---------------------------------------------------------------- genai-perf


def test_genai_perf_profile_export():
    _, result, rows = parse("genai_perf_profile_export.json")
    assert rows["ok"].to_list() == [True, False, True]
    assert rows["started_at"][0] == t(6, 16, 2, 214000)
    assert rows["ended_at"][0] == t(6, 16, 5, 614000)  # the last response timestamp
    assert rows["latency_s"].to_list() == [3.4, 0.012, 3.486]
    assert rows["request_id"].to_list() == ["chatcmpl-aaa111", None, "chatcmpl-bbb222"]
    assert rows["output_tokens"].to_list() == [3, None, None]  # from the usage chunk only
    assert rows["http_status"].to_list() == [None, 503, None]
    assert rows["error"][1] == "Service Unavailable"
    assert noted(result, "experiments: concurrency 2")


# ---------------------------------------------------------------- LLMPerf


def test_llmperf_upstream_records_count_but_cannot_be_placed():
    _, result, rows = parse("llmperf_individual_responses.json")
    assert (result.lines, result.parsed) == (35, 35)
    assert rows["ok"].to_list() == [True, False, True]
    assert rows["latency_s"].to_list() == [7.453143953000108, None, 7.442206753999926]
    assert rows["output_tokens"].to_list() == [160, 0, 156]
    assert rows["http_status"].to_list() == [None, 503, None]
    assert rows["error"][1] == "Service Unavailable"
    assert rows["started_at"].null_count() == 3
    assert noted(result, "no per-request timestamps")


def test_llmperf_relative_times_anchored_at_started_at():
    ctx = ParseContext(year=2026, client_anchor=t(6, 16, 2))
    _, result, rows = parse("llmperf_fork_relative_individual_responses.json", ctx)
    assert rows["started_at"].to_list() == [t(6, 16, 2), t(6, 16, 2, 20000), t(6, 16, 2, 500000)]
    assert rows["ended_at"][0] == t(6, 16, 9, 453144)
    assert noted(result, "anchored at --started-at 2026-02-24T06:16:02.000Z")


def test_relative_times_without_an_anchor_are_not_placed():
    _, result, rows = parse("llmperf_fork_relative_individual_responses.json")
    assert rows.height == 3
    assert rows["started_at"].null_count() == 3
    assert noted(result, "not placeable on the servers' clock")


def test_llmperf_truncated_array():
    _, result, rows = parse("llmperf_truncated_individual_responses.json")
    assert rows["ok"].to_list() == [True, False]
    assert (result.parsed, result.noise, result.unparsed) == (22, 1, 5)
    assert noted(result, "cut short", "2 complete records")


# ---------------------------------------------------------------- Locust


def test_locust_stats_are_aggregates():
    _, result, rows = parse("locust_stats.csv")
    assert rows.height == 48
    assert (rows["ok"].sum(), (~rows["ok"]).sum()) == (35, 13)
    assert rows["started_at"].null_count() == 48
    assert (result.parsed, result.noise) == (3, 1)
    assert noted(result, "aggregates only", "cannot be matched one by one")
    assert noted(result, "POST /v1/chat/completions: 43 requests, 13 failures")


def test_locust_history_and_failures_give_notes_and_a_span_not_rows():
    _, history, rows = parse("locust_stats_history.csv")
    assert rows.height == 0
    assert history.span == (t(6, 16, 2), t(6, 21, 0))
    assert noted(history, "user count 10 → 13 → 20")
    _, failures, rows = parse("locust_failures.csv")
    assert rows.height == 0
    assert noted(failures, "8× HTTPError('503 Server Error")


# ---------------------------------------------------------------- k6


def test_k6_points_stamped_at_the_requests_end():
    _, result, rows = parse("k6_results.json")
    assert rows["ok"].to_list() == [True, False, False]
    # ended 15:16:05.614000123+09:00; http_req_duration 3400 ms
    assert rows["ended_at"][0] == t(6, 16, 5, 614000)
    assert rows["started_at"][0] == t(6, 16, 2, 214000)
    assert rows["latency_s"].to_list() == [3.4, 0.012, 60.0]
    assert rows["http_status"].to_list() == [200, 503, None]
    assert rows["error"].to_list() == [None, "HTTP 503", "request timeout"]
    assert (result.parsed, result.noise, result.unparsed) == (9, 7, 0)
    assert noted(result, "runner's offset")


# ---------------------------------------------------------------- end to end

INSTANCE_LOG = """\
2026-02-24T06:15:40.100000374Z (APIServer pid=1) INFO 02-24 06:15:40 [api_server.py:1395] vLLM API server version 0.10.1.1
2026-02-24T06:15:51.025881983Z INFO:     10.0.0.2:56250 - "GET /health HTTP/1.1" 200 OK
2026-02-24T06:15:57.080482807Z (APIServer pid=1) INFO 02-24 06:15:57 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, Running: 0 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%, Prefix cache hit rate: 0.0%
2026-02-24T06:16:05.614699807Z INFO:     10.0.0.2:40246 - "POST /v1/chat/completions HTTP/1.1" 200 OK
2026-02-24T06:16:05.786617995Z INFO:     10.0.0.2:40245 - "POST /v1/chat/completions HTTP/1.1" 200 OK
2026-02-24T06:16:07.089789271Z (APIServer pid=1) INFO 02-24 06:16:07 [loggers.py:123] Engine 000: Avg prompt throughput: 110.0 tokens/s, Avg generation throughput: 58.0 tokens/s, Running: 0 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%, Prefix cache hit rate: 0.0%
2026-02-24T06:16:17.090011022Z (APIServer pid=1) INFO 02-24 06:16:17 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, Running: 0 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%, Prefix cache hit rate: 0.0%
"""


def test_end_to_end_aiperf_results_and_an_instance_log(tmp_path):
    from logforensics.analysis import analyze

    folder = tmp_path / "bundle"
    folder.mkdir()
    shutil.copy(DATA / "aiperf_profile_export.jsonl", folder / "profile_export.jsonl")
    (folder / "gpu-0.log").write_text(INSTANCE_LOG)
    got = report_json(analyze([folder]))
    assert got["totals"] == {
        "sent": 3,
        "succeeded": 2,
        "failed": 1,
        "unreached": 1,
        "unknown": 0,
        "reached_unseen": 0,
        "outcome_unknown": 0,
        "retried": 0,
    }
    # the stats lines above never showed a request running: the peaks are read, not defaulted
    assert got["instances"] == [
        {
            "name": "gpu-0",
            "requests": 2,
            "share": 1.0,
            "peak_running": 0,
            "peak_waiting": 0,
            "peak_kv_pct": 0.0,
        }
    ]
    measured = [r for r in got["runs"] if not r["warmup"]]
    assert sum(r["per_instance"]["gpu-0"] for r in measured) == 2
    formats = {Path(f["path"]).name: f["format"] for f in got["inputs"]}
    assert formats == {"profile_export.jsonl": "aiperf_jsonl", "gpu-0.log": "server_log"}
    client = next(f for f in got["inputs"] if f["format"] == "aiperf_jsonl")
    assert client["records"] == {"client_requests": 3}
    assert any("epoch ns" in n for n in client["notes"])


def test_aiperf_013_artifact_folder(tmp_path):
    """corpus aiperf-haproxy: AIPerf 0.13.0's whole artifact folder (a zip sweep over
    concurrency 2, 4, 8, 64, each cell with its own 2-request warm-up phase): requests only
    from each cell's profile_export.jsonl, concurrency from its run_config.json phases, the
    warm-up as warm-up; every other file understood as the same run; AIPerf's own figures."""
    from logforensics.ingest.inputs import load
    from tests.conftest import corpus

    inputs = load([corpus("aiperf-haproxy") / "aiperf"], CTX)
    rows = inputs.tables["client_requests"]
    measured = rows.filter(~pl.col("warmup"))
    per = measured.group_by("concurrency").agg(
        pl.len().alias("sent"), (pl.col("outcome") == "ok").sum().alias("ok")
    )
    assert sorted(per.rows()) == [(2, 6, 6), (4, 8, 6), (8, 16, 16), (64, 96, 0)]
    assert set(measured.filter(pl.col("outcome") != "ok")["outcome"]) == {"timeout"}
    warmup = rows.filter(pl.col("warmup"))
    assert warmup.height == 8 and set(warmup["concurrency"]) == {1}
    assert all(f.format and f.unparsed == 0 for f in inputs.files), [
        (f.path, f.skipped, f.unparsed) for f in inputs.files if not f.format or f.unparsed
    ]
    profiling = [s for s in inputs.tester_summaries if s["phase"] == "profiling"]
    assert [(s["concurrency"], s["sent"], s["ok"], s["failed"]) for s in profiling] == [
        (2, 6, 6, 0),
        (4, 8, 6, 2),
        (8, 16, 16, 0),
    ]  # fmt: skip  (the 64 cell's run failed before AIPerf wrote its summary)


def test_llmperf_summary_beside_its_responses(tmp_path):
    """token_benchmark_ray.py writes {model}_{in}_{out}_summary.json beside the individual
    responses: its num_concurrent_requests is the requests' concurrency, its figures the
    tester's own."""
    from logforensics.ingest.base import SAMPLES_DIR
    from logforensics.ingest.inputs import load

    shutil.copy(
        DATA / "llmperf_individual_responses.json", tmp_path / "m_550_150_individual_responses.json"
    )
    shutil.copy(SAMPLES_DIR / "llmperf_summary.json", tmp_path / "m_550_150_summary.json")
    inputs = load([tmp_path], CTX)
    rows = inputs.tables["client_requests"]
    assert rows.height > 0 and set(rows["concurrency"]) == {5}
    (summary,) = inputs.tester_summaries
    assert (summary["concurrency"], summary["sent"], summary["ok"], summary["failed"]) == (
        5,
        50,
        48,
        2,
    )
    assert summary["latency_s"]["p95"] == 1.61


def test_loadtests_configuration_is_kept_on_its_input_and_counts_no_request(tmp_path):
    """`run.config.json` beside `run.jsonl`: the run's conditions on the input (`config`), one
    line parsed, no request; the records beside it are counted as ever."""
    from logforensics.analysis import analyze
    from logforensics.ingest.base import SAMPLES_DIR

    sample = SAMPLES_DIR / "lf_run.config.json"
    config = json.loads(sample.read_text())
    folder = tmp_path / "run"
    folder.mkdir()
    shutil.copy(sample, folder / "run.config.json")
    shutil.copy(DATA / "aiperf_profile_export.jsonl", folder / "profile_export.jsonl")
    got = report_json(analyze([folder]))
    (read,) = [f for f in got["inputs"] if f["format"] == "loadtest_config"]
    assert (read["lines"], read["parsed"], read["unparsed"], read["records"]) == (1, 1, 0, {})
    assert read["config"] == config
    assert (config["max_tokens"], config["ignore_eos"], config["marker"]) == (
        64,
        True,
        "prompt start",
    )
    assert got["totals"]["sent"] == 3  # the requests are the record file's alone
    others = [f for f in got["inputs"] if f["format"] != "loadtest_config"]
    assert all("config" not in f for f in others)  # left out where a file has none


def test_loadtests_console_with_its_configuration_and_warning_lines_is_all_understood():
    """The console of a recorded run (compare-conditions/short): the configuration line and
    the short-rest warning are the tester's own, not unparsed lines."""
    from logforensics.ingest.base import ParseContext as Ctx
    from tests.conftest import RECORDINGS

    path = RECORDINGS / "compare-conditions" / "short" / "client-stdout.log"
    source = SourceFile(path, str(path), "client-stdout")
    fmt = detect(source)
    assert fmt is FILE_FORMATS["tester_console"]
    result = fmt.parse(source, Ctx(year=2026))
    assert (result.lines, result.unparsed) == (7, 0)
    assert [(s["concurrency"], s["sent"], s["ok"]) for s in result.tester_summaries] == [
        (2, 2, 2),
        (4, 4, 4),
    ]


def test_aiperf_rate_run_cut_streams_and_the_peer_it_talked_to():
    """recordings/aiperf-restart (AIPerf 0.13.0, `--request-rate 1 --concurrency 4`, no
    run_config.json): the phase's rate and cap from the summary's input_config; the 3 streams
    vLLM aborted at its SIGTERM, recorded by AIPerf as 200s with 36, 23, 6 of the 64 tokens
    asked with ignore_eos (inputs.json), are failures; the HTTP trace's peer is kept."""
    from logforensics.ingest.inputs import load

    inputs = load([RECORDINGS / "aiperf-restart" / "aiperf"], CTX)
    rows = inputs.tables["client_requests"]
    assert rows.height == 106
    assert set(rows["rate"]) == {1.0} and set(rows["concurrency"]) == {4}
    cut = rows.filter(pl.col("error").cast(pl.Utf8).str.starts_with("cut short"))
    assert cut["error"].to_list() == [
        f"cut short: the server counted {n} of the 64 tokens asked with ignore_eos"
        for n in (36, 23, 6)
    ]
    assert cut["ok"].to_list() == [False] * 3
    assert outcomes(rows) == {"ok": 40, "error": 3, "refused": 63}
    connected = rows.filter(pl.col("outcome") != "refused")
    assert set(connected["server_address"]) == {"127.0.0.1:8011"}
    assert rows.filter(pl.col("outcome") == "refused")["server_address"].null_count() == 63
    (profile,) = [f for f in inputs.files if f.path.endswith("profile_export.jsonl")]
    assert any("rate 1/s (at most 4 in flight)" in n for n in profile.notes)
    assert any("3 answer(s) AIPerf recorded as successes" in n for n in profile.notes)


def test_aiperf_without_its_inputs_claims_no_stream_cut(tmp_path):
    """Without inputs.json nothing says what each request asked: AIPerf's word stands."""
    shutil.copy(
        RECORDINGS / "aiperf-restart" / "aiperf" / "profile_export.jsonl",
        tmp_path / "profile_export.jsonl",
    )
    _, _, rows = read_client_file(tmp_path / "profile_export.jsonl")
    assert outcomes(rows) == {"ok": 43, "refused": 63}
    assert rows["rate"].null_count() == rows.height  # nor which load it ran
