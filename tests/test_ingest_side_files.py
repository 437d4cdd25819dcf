"""Load testers' side files: summaries and configurations, recognised and never counted as
requests.

genai-perf's statistics table is a real one (perf_analyzer issue #393); genai-bench's
experiment metadata and GuideLLM's scenarios are real files of their repositories (and a
scenario pasted in GuideLLM's pull request #432); `vllm bench sweep serve`'s summary.json
is built in the layout vLLM's sweep code writes (each format's `samples` say where from).
"""

import json
import shutil

import pytest

from logforensics.ingest import ParseContext
from logforensics.ingest.base import SAMPLES_DIR as SAMPLES
from logforensics.ingest.inputs import load
from tests.conftest import read_client_file as parse
from tests.conftest import write

CTX = ParseContext(year=2026)


# ---------------------------------------------------------------- genai-perf


def test_genai_perf_csv_keeps_its_statistics_with_thousands_separators():
    name, result, req = parse(SAMPLES / "genai_perf_profile_export_genai_perf.csv")
    assert name == "genai_perf_csv" and req.height == 0
    assert (result.parsed, result.noise, result.unparsed) == (9, 3, 0)
    (figures,) = result.tester_summaries
    assert figures["tester"] == "genai-perf"
    assert figures["requests"] == 353  # "Request Count (count),353.00"
    assert "sent" not in figures  # its count covers the measurement windows only
    assert figures["requests_per_s"] == 1.70 and figures["output_tokens_per_s"] == 410.43
    # "Request Latency (ms)","71,107.96",…: ms → s, the thousands separators read
    assert figures["latency_s"]["mean"] == pytest.approx(71.10796)
    assert figures["latency_s"]["p50"] == pytest.approx(72.28039)
    assert figures["latency_s"]["p99"] == pytest.approx(101.00172)
    assert figures["latency_s"]["max"] == pytest.approx(102.84843)
    assert figures["ttft_s"]["p95"] == pytest.approx(59.0145)
    assert figures["concurrency"] is None  # the file says none; its folder did not either


def test_genai_perf_csv_concurrency_from_its_artifact_folder(tmp_path):
    folder = tmp_path / "artifacts" / "Qwen_Qwen3-14B-openai-chat-concurrency144"
    folder.mkdir(parents=True)
    path = folder / "profile_export_genai_perf.csv"
    shutil.copy(SAMPLES / "genai_perf_profile_export_genai_perf.csv", path)
    _, result, _ = parse(path)
    assert result.tester_summaries[0]["concurrency"] == 144
    assert any("concurrency 144 from the artifact folder" in n for n in result.notes)


def test_genai_perf_csv_skips_gpu_telemetry_and_reads_ns_units(tmp_path):
    # perf_analyzer's older table (ns, no unit on token counts) and a telemetry block after
    # it, in the layout CsvExporter and telemetry_data_exporter_util write
    text = (
        "Metric,avg,min,max,p99,p95,p90,p75,p50,p25\r\n"
        'Request Latency (ns),"8,000,000",7,9,9,9,9,8,8,8\r\n'
        "Num Output Token,4.50,3.00,6.00,5.97,5.85,5.70,5.25,4.50,3.75\r\n"
        "\r\n"
        "Metric,Value\r\n"
        "Request Throughput (per sec),200.00\r\n"
        "\r\n"
        "Metric,GPU,avg,min,max,p99,p95,p90,p75,p50,p25\r\n"
        'Gpu Power Usage (W),gpu0,"1,100.00",1,1,1,1,1,1,1,1\r\n'
    )
    _, result, req = parse(write(tmp_path / "profile_export_genai_perf.csv", text))
    assert req.height == 0 and result.unparsed == 0
    assert (result.parsed, result.noise) == (3, 6)
    figures = result.tester_summaries[0]
    assert figures["latency_s"]["mean"] == pytest.approx(0.008)
    assert figures["requests_per_s"] == 200.0 and figures["requests"] is None


# ---------------------------------------------------------------- vllm bench sweep serve


def test_vllm_sweep_summary_keeps_each_runs_figures_and_its_parameters():
    name, result, req = parse(SAMPLES / "vllm_bench_sweep_summary.json")
    assert name == "vllm_bench_sweep_summary" and req.height == 0
    assert (result.parsed, result.unparsed) == (2, 0)
    first, second = result.tester_summaries
    assert (first["run"], first["concurrency"], first["rate"]) == (0, 4, None)  # "inf"
    assert (first["sent"], first["ok"], first["failed"]) == (8, 7, 1)
    assert (second["sent"], second["ok"], second["failed"]) == (8, 8, 0)
    assert first["latency_s"] == {"mean": 6.03943, "p50": 6.034, "p99": 6.20184}
    assert first["ttft_s"]["p99"] == pytest.approx(0.1279)
    assert first["requests_per_s"] == 0.5637 and first["output_tokens_per_s"] == 72.153
    assert first["parameters"] == {"max_num_seqs": 32}  # the sweep's serve parameter
    assert any("max_num_seqs=32" in n for n in result.notes)


def test_vllm_sweep_requests_are_counted_once_from_the_run_files(tmp_path):
    """The sweep writes run=N.json (one `vllm bench serve` result each) and summary.json
    (their list) in one folder: the requests come from the run files, the summary adds the
    tester's figures and no request."""
    runs = json.loads((SAMPLES / "vllm_bench_sweep_summary.json").read_text())
    folder = tmp_path / "SERVE--max_num_seqs=32-BENCH--max_concurrency=4"
    folder.mkdir()
    for run in runs:
        write(folder / f"run={run['run_number']}.json", json.dumps(run, indent=4))
    shutil.copy(SAMPLES / "vllm_bench_sweep_summary.json", folder / "summary.json")
    inputs = load([tmp_path], CTX)
    rows = inputs.tables["client_requests"]
    assert rows.height == 16  # 8 + 8 from the run files, none from the summary
    assert rows["ok"].sum() == 15
    sweep = [s for s in inputs.tester_summaries if s["tester"] == "vllm bench serve (sweep)"]
    assert [(s["ok"], s["failed"]) for s in sweep] == [(7, 1), (8, 0)]


def test_vllm_sweep_summary_broken_is_unparsed(tmp_path):
    text = (SAMPLES / "vllm_bench_sweep_summary.json").read_text()[:800]
    name, result, req = parse(write(tmp_path / "summary.json", text))
    assert name == "vllm_bench_sweep_summary" and req.height == 0
    assert result.parsed == 0 and result.unparsed == result.lines
    assert result.tester_summaries == []


# ---------------------------------------------------------------- genai-bench


def test_genai_bench_metadata_is_configuration_in_a_note():
    name, result, req = parse(SAMPLES / "genai_bench_experiment_metadata.json")
    assert name == "genai_bench_metadata" and req.height == 0
    assert (result.parsed, result.unparsed) == (1, 0)
    assert result.tester_summaries == []
    (note,) = result.notes
    assert "genai-bench 0.0.2" in note and "model zai-org/GLM-4.6" in note
    assert "iterates num_concurrency over [1]" in note
    assert "traffic scenarios [D(100,100)]" in note
    assert "each run stops at 50 requests or 300 s" in note


def test_genai_bench_metadata_beside_its_run_file_counts_only_the_run(tmp_path):
    shutil.copy(SAMPLES / "genai_bench_run.json", tmp_path / "D100_100_text-to-text.json")
    shutil.copy(
        SAMPLES / "genai_bench_experiment_metadata.json", tmp_path / "experiment_metadata.json"
    )
    alone = load([tmp_path / "D100_100_text-to-text.json"], CTX).tables["client_requests"]
    both = load([tmp_path], CTX).tables["client_requests"]
    assert both.height == alone.height == 32


# ---------------------------------------------------------------- GuideLLM scenarios


@pytest.mark.parametrize(
    ("sample", "said"),
    [
        # 0.3: rate_type, data as a dict
        ("guidellm_scenario_chat_v03.json", "profile sweep; prompt tokens 512; output tokens 256"),
        # 0.7: spec.profile.kind, data as a list of kinds
        ("guidellm_scenario_chat_v07.json", "profile sweep; prompt tokens 512; output tokens 256"),
        # 0.4-0.6 YAML: profile, rate list (streams for concurrent), max_seconds, target
        (
            "guidellm_scenario_pr432.yaml",
            "profile concurrent; rate (streams) 1, 2, 4, 8; max seconds 120; target "
            "http://vllm-deployment.kserve-e2e-perf.svc.cluster.local:8000/; prompt tokens "
            "4096; output tokens 1024",
        ),
    ],
)
def test_guidellm_scenario_says_the_load_in_a_note(sample, said):
    name, result, req = parse(SAMPLES / sample)
    assert name == "guidellm_scenario" and req.height == 0
    assert (result.parsed, result.unparsed) == (1, 0) and result.tester_summaries == []
    assert result.notes == [f"GuideLLM scenario (the run's configuration, no requests): {said}"]


def test_guidellm_scenario_v07_constraints_and_streams(tmp_path):
    # 0.7's own schema: ConcurrentProfileArgs.streams, MaxRequestsConstraintArgs.count,
    # MaxDurationConstraintArgs.seconds, BackendArgs target/model
    scenario = {
        "spec": {
            "profile": {"kind": "concurrent", "streams": [4, 8]},
            "constraints": [
                {"kind": "max_requests", "count": 200},
                {"kind": "max_duration", "seconds": 60},
            ],
            "backend": {"kind": "openai_http", "target": "http://127.0.0.1:8000/v1"},
            "data": [{"kind": "synthetic_text", "prompt_tokens": 256, "output_tokens": 128}],
        }
    }
    _, result, req = parse(write(tmp_path / "s.json", json.dumps(scenario, indent=2)))
    assert req.height == 0
    assert result.notes == [
        "GuideLLM scenario (the run's configuration, no requests): profile concurrent; streams "
        "4, 8; max requests 200; max seconds 60; target http://127.0.0.1:8000/v1; prompt tokens "
        "256; output tokens 128"
    ]


def test_aiperf_server_metrics_jsonl_gives_the_engines_state_per_scrape(tmp_path):
    """AIPerf 0.13.0's real per-scrape export: an engine_stats row a scrape, named by the
    endpoint's address (mapped to a log later), throughput from the counters' growth; a
    counter that falls (the engine started again) is a restart, as Prometheus reads it."""
    from logforensics.ingest import FILE_FORMATS, ParseContext, SourceFile, detect
    from logforensics.ingest.base import SAMPLES_DIR

    real = (SAMPLES_DIR / "aiperf_server_metrics_export.jsonl").read_text()
    path = tmp_path / "server_metrics_export.jsonl"
    path.write_text(real)
    source = SourceFile(path, path.name, "x")
    assert detect(source) is FILE_FORMATS["aiperf_server_metrics_jsonl"]
    result = FILE_FORMATS["aiperf_server_metrics_jsonl"].parse(source, ParseContext(year=2026))
    stats = result.table("engine_stats")
    assert stats["instance"].to_list() == ["127.0.0.1:8011"] * 3
    assert stats["running"].to_list() == [0, 0, 1]
    assert stats["at"][2].isoformat() == "2026-12-05T22:22:55.674026+00:00"
    assert round(stats["prompt_tps"][2], 2) == 293.03
    assert result.addresses == {"127.0.0.1:8011": ["127.0.0.1:8011"]}
    assert (result.parsed, result.unparsed) == (3, 0)
    assert result.notes[0].endswith("1 before the run, 1 warmup, 1 profiling")
    # the last scrape again, 5 s later, its token counters fallen: the engine started again
    again = json.loads(real.splitlines()[-1])
    again["timestamp_ns"] += 5_000_000_000
    for family, value in (("vllm:prompt_tokens", 10.0), ("vllm:generation_tokens", 1.0)):
        again["metrics"][family][0]["value"] = value
    path.write_text(real + json.dumps(again, separators=(",", ":")) + "\n")
    restarted = FILE_FORMATS["aiperf_server_metrics_jsonl"].parse(
        SourceFile(path, path.name, "x"), ParseContext(year=2026)
    )
    events = restarted.table("engine_events")
    assert events["kind"].to_list() == ["restart"]
    assert events["at"][0] == stats["at"][2]  # the last sample before the fall
    assert restarted.table("engine_stats")["prompt_tps"][3] == 2.0  # 10 new tokens in 5 s
