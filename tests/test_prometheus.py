"""`--prometheus` against a real Prometheus server (Debian's `prometheus`, 2.42 here), not a mock.

Set-up: OpenMetrics text with timestamps is written here from vLLM's metric
names, labels and HELP/TYPE lines (vLLM 0.32's, verbatim from corpus kv-tiny
``metrics-8001.txt``; V0's ``vllm:gpu_cache_usage_perc`` and
``vllm:num_requests_swapped``, from ``vllm/engine/metrics.py``, for an older
engine), turned into TSDB blocks by ``promtool tsdb create-blocks-from
openmetrics``, and ``prometheus`` is started on a free loopback port with that
storage (retention 100 years: the samples are dated 2026-01-01) and nothing to
scrape. Where either program is missing the tests skip, loudly (``.ci/run``
installs them).

The recording: three engines scraped every 5 s for 10 minutes from T0.

* ``vllm-0`` (pod label, scrape address 10.0.0.11:8000): load rises, the KV
  cache fills to 97 %, requests wait, preemptions grow, requests are aborted;
* ``vllm-1`` (pod label, 10.0.0.12:8000): its pod restarts after +295 s: no
  sample for 30 s, then every counter starts again from zero;
* ``127.0.0.1:8001`` (no pod label, V0 names): the instance whose log
  announces that address.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from logforensics.analysis import Options, analyze
from logforensics.cli import cli
from logforensics.ingest import FILE_FORMATS, ParseContext, SourceFile, detect, prometheus_api
from logforensics.ingest.base import ParseResult
from logforensics.ingest.prometheus import label_name, read_samples
from tests.conftest import ROOT, write

sys.path.insert(0, str(ROOT / "tools"))
import promserve  # noqa: E402

PROMETHEUS = os.environ.get("LOGFORENSICS_PROMETHEUS") or shutil.which("prometheus")
PROMTOOL = os.environ.get("LOGFORENSICS_PROMTOOL") or shutil.which("promtool")
pytestmark = pytest.mark.skipif(
    PROMETHEUS is None or PROMTOOL is None,
    reason=(
        "!!! PROMETHEUS NOT INSTALLED: --prometheus was NOT tested against a real server !!! "
        "Install Debian's `prometheus` (apt-get install -y prometheus; .ci/run does this) or "
        "point LOGFORENSICS_PROMETHEUS and LOGFORENSICS_PROMTOOL at the binaries."
    ),
)

UTC = dt.timezone.utc
T0 = dt.datetime(2026, 1, 1, tzinfo=UTC)
SCRAPE_S = 5
POINTS = 120  # 10 minutes
GAP = range(60, 66)  # vllm-1's pod is gone for 30 s, then restarts
WINDOW = (T0 - dt.timedelta(minutes=1), T0 + dt.timedelta(minutes=11))
SAMPLE = Path(__file__).parents[1] / "logforensics" / "ingest" / "samples"

# HELP/TYPE lines: vLLM 0.32 as corpus kv-tiny metrics-8001.txt has them; V0's from
# vllm/engine/metrics.py. OpenMetrics names a counter family without `_total`.
FAMILIES = {
    "vllm:num_requests_running": ("gauge", "Number of requests in model execution batches."),
    "vllm:num_requests_waiting": ("gauge", "Number of requests waiting to be processed."),
    "vllm:kv_cache_usage_perc": ("gauge", "KV-cache usage. 1 means 100 percent usage."),
    "vllm:gpu_cache_usage_perc": ("gauge", "GPU KV-cache usage. 1 means 100 percent usage."),
    "vllm:num_requests_swapped": ("gauge", "Number of requests swapped to CPU."),
    "vllm:num_preemptions": ("counter", "Cumulative number of preemption from the engine."),
    "vllm:prompt_tokens": ("counter", "Number of prefill tokens processed."),
    "vllm:generation_tokens": ("counter", "Number of generation tokens processed."),
    "vllm:request_success": ("counter", "Count of successfully processed requests."),
}


def _engine(i: int, restart_at: int | None = None) -> dict[str, float]:
    """One scrape of a vLLM 0.32 engine at step i (counters from zero at `restart_at`)."""
    n = i - restart_at if restart_at is not None and i >= restart_at else i
    return {
        "vllm:num_requests_running": min(16, i // 5),
        "vllm:num_requests_waiting": max(0, i // 5 - 16),
        "vllm:kv_cache_usage_perc": min(0.97, i / 100),
        "vllm:num_preemptions_total": max(0, n - 80) // 4 if restart_at is None else n // 20,
        "vllm:prompt_tokens_total": 150 * n,
        "vllm:generation_tokens_total": 600 * n,
        'vllm:request_success_total{finished_reason="abort"}': max(0, (n - 100) // 5),
    }


def recording() -> dict[str, dict[int, dict[str, float]]]:
    """Label set → step → metric → value, for the three engines."""
    old = {
        "vllm:num_requests_running": 2,
        "vllm:num_requests_waiting": 0,
        "vllm:gpu_cache_usage_perc": 0.25,
        "vllm:num_requests_swapped": 0,
    }
    return {
        'engine="0",instance="10.0.0.11:8000",job="vllm",model_name="tiny-llama",pod="vllm-0"': {
            i: _engine(i) for i in range(POINTS)
        },
        'engine="0",instance="10.0.0.12:8000",job="vllm",model_name="tiny-llama",pod="vllm-1"': {
            i: _engine(i, restart_at=GAP.stop) for i in range(POINTS) if i not in GAP
        },
        'instance="127.0.0.1:8001",job="vllm-v0",model_name="tiny-llama"': {
            i: dict(old, **{"vllm:generation_tokens_total": 100 * i}) for i in range(POINTS)
        },
    }


def openmetrics() -> str:
    """The recording as OpenMetrics text: each family once, its series time-ordered."""
    lines = []
    data = recording()
    for family, (kind, help_text) in FAMILIES.items():
        lines += [f"# HELP {family} {help_text}", f"# TYPE {family} {kind}"]
        for labels, steps in data.items():
            for i, values in steps.items():
                for key, value in values.items():
                    name, _, extra = key.partition("{")
                    if name.removesuffix("_total") != family:
                        continue
                    own = labels + ("," + extra.rstrip("}") if extra else "")
                    stamp = T0.timestamp() + SCRAPE_S * i
                    lines.append(f"{name}{{{own}}} {value} {stamp:.0f}")
    return "\n".join(lines + ["# EOF"]) + "\n"


@pytest.fixture(scope="module")
def prometheus_url(tmp_path_factory):
    """A real Prometheus serving the recording; stopped after the module's tests."""
    root = tmp_path_factory.mktemp("prometheus")
    (root / "recording.om").write_text(openmetrics())
    subprocess.run(
        [PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", "recording.om", "data"],
        cwd=root,
        check=True,
        capture_output=True,
    )
    try:
        with promserve.serving(root / "data") as url:
            yield url
    except promserve.PrometheusUnavailable as exc:
        pytest.skip(
            f"!!! PROMETHEUS DID NOT START: --prometheus was NOT tested against a real server !!! {exc}"
        )


def read(url: str, start=WINDOW[0], end=WINDOW[1]) -> ParseResult:
    samples, notes = prometheus_api.fetch(prometheus_api.Api(url), start, end)
    result = ParseResult(notes=notes)
    read_samples(samples.with_columns(label_name().alias("instance")), result)
    return result


def test_every_scrape_once_at_its_own_time_per_instance(prometheus_url):
    result = read(prometheus_url)
    assert not any("fell between steps" in n for n in result.notes)
    stats = result.table("engine_stats")
    per = dict(stats.group_by("instance").len().iter_rows())
    assert per == {"vllm-0": POINTS, "vllm-1": POINTS - len(GAP), "127.0.0.1:8001": POINTS}
    first = stats.filter(pl.col("instance") == "vllm-0").sort("at")
    assert first["at"][0] == T0
    assert (first["at"].diff().drop_nulls() == dt.timedelta(seconds=SCRAPE_S)).all()
    assert first["gpu_kv_pct"].max() == 97.0  # vllm:kv_cache_usage_perc, a fraction
    assert first["waiting"].max() == 7 and first["running"].max() == 16
    assert first["gen_tps"].drop_nulls().unique().to_list() == [120.0]  # 600 tokens / 5 s
    old = stats.filter(pl.col("instance") == "127.0.0.1:8001")  # V0 names
    assert old["gpu_kv_pct"].unique().to_list() == [25.0]
    assert old["swapped"].unique().to_list() == [0]


def test_a_step_too_coarse_for_the_data_is_made_finer(prometheus_url):
    """An hour before the recording makes the sample counts imply a 35 s interval; the
    steps are refined until no scrape falls between them."""
    result = read(prometheus_url, start=T0 - dt.timedelta(hours=1))
    per = dict(result.table("engine_stats").group_by("instance").len().iter_rows())
    assert per == {"vllm-0": POINTS, "vllm-1": POINTS - len(GAP), "127.0.0.1:8001": POINTS}
    assert not any("fell between steps" in n for n in result.notes)


def test_a_pod_restart_is_a_counter_reset_and_an_engine_restart(prometheus_url):
    result = read(prometheus_url)
    events = result.table("engine_events")
    restarts = events.filter(pl.col("kind") == "restart")
    assert restarts["instance"].to_list() == ["vllm-1"]
    # the last sample before the gap: the engine was last seen alive then
    assert restarts["at"].to_list() == [T0 + dt.timedelta(seconds=SCRAPE_S * (GAP.start - 1))]
    assert "vllm:generation_tokens_total 35400 → 0" in restarts["detail"][0]
    preempted = dict(
        events.filter(pl.col("kind") == "preempted").group_by("instance").len().iter_rows()
    )
    assert preempted == {"vllm-0": 9, "vllm-1": 4}  # growths, the reset itself none
    aborted = events.filter(pl.col("kind") == "requests_aborted")
    assert aborted["instance"].to_list() == ["vllm-0"] * 3
    restarted = result.table("engine_stats").filter(pl.col("instance") == "vllm-1")
    assert restarted["gen_tps"].min() >= 0  # no negative rate across the reset


def test_a_window_without_data_is_a_clear_error(prometheus_url):
    later = (WINDOW[0] + dt.timedelta(days=1), WINDOW[1] + dt.timedelta(days=1))
    with pytest.raises(prometheus_api.PrometheusError, match="holds no engine metrics"):
        read(prometheus_url, *later)


def test_unreachable_and_refused_queries_are_named(prometheus_url):
    with pytest.raises(prometheus_api.PrometheusError, match=r"is unreachable \(.*refused"):
        prometheus_api.Api(f"http://127.0.0.1:{promserve.free_port()}").get(
            "/api/v1/query", query="up"
        )
    with pytest.raises(prometheus_api.PrometheusError, match="answered HTTP 400: bad_data"):
        prometheus_api.Api(prometheus_url).query_range("rate(", 0, 1, "1")
    with pytest.raises(prometheus_api.PrometheusError, match="not JSON"):
        prometheus_api.Api(prometheus_url + "/graph?x=").get("")


def test_a_saved_answer_is_read_as_a_file(prometheus_url, tmp_path):
    query = "{__name__=~'vllm:num_requests_running|vllm:kv_cache_usage_perc|vllm:num_preemptions_total'}"
    params = f"query={urllib.request.quote(query)}&start={T0.timestamp():.0f}&end={T0.timestamp() + 600:.0f}&step=60"
    with urllib.request.urlopen(f"{prometheus_url}/api/v1/query_range?{params}") as answer:
        text = answer.read().decode()
    path = write(tmp_path / "answer.json", text)
    source = SourceFile(path, "answer.json", "answer")
    assert detect(source) is FILE_FORMATS["prometheus_query_range"]
    result = FILE_FORMATS["prometheus_query_range"].parse(source, ParseContext(year=2026))
    assert result.unparsed == 0
    stats = result.table("engine_stats")
    assert dict(stats.group_by("instance").len().iter_rows()) == {
        "vllm-0": 11,
        "vllm-1": 11,
        "127.0.0.1:8001": 11,
    }
    assert any("step times" in n for n in result.notes)


def test_the_registered_sample_is_a_real_answer(prometheus_url):
    """ingest/samples/prometheus_query_range.json is this server's answer, as saved."""
    doc = json.loads((SAMPLE / "prometheus_query_range.json").read_text())
    query = "{__name__=~'vllm:num_requests_running|vllm:num_preemptions_total',pod='vllm-1'}"
    params = f"query={urllib.request.quote(query)}&start={T0.timestamp() + 270:.0f}&end={T0.timestamp() + 345:.0f}&step=15"
    with urllib.request.urlopen(f"{prometheus_url}/api/v1/query_range?{params}") as answer:
        assert json.loads(answer.read()) == doc


def _client(tmp_path: Path) -> Path:
    rows = [
        {
            "started_at": (T0 + dt.timedelta(seconds=30 + 5 * i)).isoformat(),
            "latency_s": 2.0,
            "ok": i % 4 != 0,
            "error": None if i % 4 else "timed out",
        }
        for i in range(100)
    ]
    return write(tmp_path / "client.jsonl", "".join(json.dumps(r) + "\n" for r in rows))


def _instance_log(tmp_path: Path) -> Path:
    # vLLM 0.32's start-up line, as corpus kv-tiny instance-1.log prints it
    return write(
        tmp_path / "gpu-a.log",
        "(APIServer pid=31372) INFO 01-01 00:00:02 [entry.py:140] Starting vLLM server on "
        "http://127.0.0.1:8001\n",
    )


def test_analyze_maps_series_to_log_instances_and_names(prometheus_url, tmp_path):
    options = Options(prometheus_url=prometheus_url, instance_labels={"vllm-1": "gpu-b"})
    analysis = analyze([_client(tmp_path), _instance_log(tmp_path)], options)
    account = next(f for f in analysis.inputs if f.path == prometheus_url)
    assert account.format == "prometheus_api" and account.instance == "gpu-a, gpu-b, vllm-0"
    assert any("labelled 127.0.0.1:8001 are instance gpu-a" in n for n in account.notes)
    assert any("vllm-1 are instance gpu-b: --instance gpu-b=vllm-1" in n for n in account.notes)
    stats = analysis.tables["engine_stats"]
    assert stats.filter(pl.col("instance") == "gpu-a").height == POINTS
    assert analysis.errors == []


def test_cli_goes_on_without_an_unreachable_prometheus(tmp_path):
    js = tmp_path / "r.json"
    url = f"http://127.0.0.1:{promserve.free_port()}"
    result = CliRunner().invoke(
        cli, ["analyze", str(_client(tmp_path)), "--prometheus", url, "--json", str(js)]
    )
    assert result.exit_code == 2, result.output
    assert f"--prometheus {url} is unreachable" in result.output
    data = json.loads(js.read_text())
    client = next(f for f in data["inputs"] if f["path"].endswith("client.jsonl"))
    assert client["records"]["client_requests"] == 100
    assert data["verdict"]["bottleneck"]  # analysed all the same
    assert data["errors"][0].endswith("the other inputs were analysed without it")


def test_cli_window_without_data(prometheus_url, tmp_path):
    result = CliRunner().invoke(
        cli,
        [
            "analyze",
            str(_client(tmp_path)),
            "--prometheus",
            prometheus_url,
            "--from",
            "2027-01-01T00:00:00Z",
            "--to",
            "2027-01-01T01:00:00Z",
        ],
    )
    assert result.exit_code == 2
    assert "holds no engine metrics" in result.output


def test_preemptions_split_by_reason_are_counted_by_it(tmp_path):
    """vLLM PR #58037's num_preemptions_by_reason_total in a saved query_range answer: each
    reason's growth is its own event (only kv_full is KV pressure), the total not again."""

    times = (1796509370.0, 1796509385.0)

    def series(name: str, values: tuple[str, str], **labels) -> dict:
        metric = {"__name__": name, "instance": "10.0.0.5:8000", "engine": "0", **labels}
        return {"metric": metric, "values": [[t, v] for t, v in zip(times, values, strict=True)]}

    answer = {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [
                series("vllm:num_preemptions_total", ("29", "33")),
                series(
                    "vllm:num_preemptions_by_reason_total",
                    ("20", "21"),
                    reason="kv_full",
                ),
                series(
                    "vllm:num_preemptions_by_reason_total",
                    ("9", "12"),
                    reason="priority",
                ),
                series("vllm:num_requests_running", ("8", "8")),
            ],
        },
    }
    path = tmp_path / "answer.json"
    path.write_text(json.dumps(answer))
    fmt = FILE_FORMATS["prometheus_query_range"]
    result = fmt.parse(SourceFile(path, path.name, "x"), ParseContext(year=2026))
    events = result.table("engine_events").sort("kind")
    assert events["kind"].to_list() == ["preempted", "preempted_priority"]
    assert (
        events["detail"]
        .to_list()[1]
        .startswith(
            'vllm:num_preemptions_by_reason_total{engine="0",instance="10.0.0.5:8000",'
            'reason="priority"} +3 (to 12)'
        )
    )
    assert "+1 (to 21)" in events["detail"][0]
