"""The usual state of a production incident: the pods are gone, Prometheus kept the metrics.

recordings/field-skew-prom: two real vLLM 0.32 engines with their default logging, nginx
stamping whole seconds, the client under `faketime -f '+3.4s'` sending no request id, and a
real Prometheus that scraped both engines every second; its storage is served by a real
Prometheus here (tools/promserve.py). With the instance logs left out, the client, the
proxy's log and Prometheus must give what the whole bundle gives: the verdict, the clock,
and each step's split, the instances named by their address.
"""

from __future__ import annotations

import json
import sys

import polars as pl
import pytest

from logforensics.analysis import Options, analyze
from tests.conftest import PROMETHEUS_DATA, ROOT, corpus, incident_inputs

sys.path.insert(0, str(ROOT / "tools"))
import promserve  # noqa: E402

from tests.conftest import report_json

pytestmark = pytest.mark.skipif(
    promserve.binary() is None,
    reason=(
        "!!! PROMETHEUS NOT INSTALLED: the Prometheus-only incident was NOT analysed !!! "
        "Install Debian's `prometheus` (.ci/run does this)."
    ),
)
INCIDENT = "field-skew-prom"


@pytest.fixture(scope="module")
def served():
    folder = corpus(INCIDENT)
    with promserve.serving(folder / PROMETHEUS_DATA) as url:
        yield folder, url


def by_address(truth: dict, names: dict[str, str]) -> list[dict]:
    """The truth's per-step split with each instance named by its address."""
    return [{names[n]: c for n, c in s["per_instance"].items()} for s in truth["steps"]]


def test_prometheus_and_the_proxy_alone_give_what_the_logs_give(served):
    folder, url = served
    truth = json.loads((folder / "TRUTH.json").read_text())
    everything = incident_inputs(folder)
    full = report_json(analyze(everything, Options(prometheus_url=url)))
    logs_gone = [p for p in everything if not p.name.startswith("instance-")]
    analysis = analyze(logs_gone, Options(prometheus_url=url))
    alone = report_json(analysis)
    # the 6 client timeouts nginx logged as 499 without saying it connected: each engine's
    # gauge counted every request nginx had sent it, so they were inside
    failed = analysis.requests.filter(~pl.col("ok") & ~pl.col("warmup"))
    assert failed.height == truth["totals"]["failed"] == 6
    assert failed["reach_witness"].cast(pl.Utf8).to_list() == ["engine_count"] * 6
    assert full["verdict"]["bottleneck"] == alone["verdict"]["bottleneck"] == truth["verdict"]
    want_offset = -truth["clock"]["client_offset_s"]
    for got in (full, alone):
        lo, hi = got["clock"]["interval"]
        assert lo <= want_offset <= hi and hi - lo < 1.0, got["clock"]
    assert alone["clock"]["basis"].endswith("(no instance record)")
    # one instance however many witnesses name it: the upstream address and the series'
    # `instance` label are the same engine, named by that address
    upstreams = alone["proxy"]["upstreams"]
    assert {a: u["instance"] for a, u in upstreams.items()} == {a: a for a in upstreams}
    names = {"instance-1": "127.0.0.1:8001", "instance-2": "127.0.0.1:8002"}
    steps = [r for r in alone["runs"] if not r["warmup"]]
    assert [r["per_instance"] for r in steps] == by_address(truth, names)
    assert [r["sent"] for r in steps] == [s["sent"] for s in truth["steps"]]
    (read,) = [i for i in alone["inputs"] if i["format"] == "prometheus_api"]
    assert read["records"]["engine_stats"] > 0
    assert {i["name"] for i in alone["instances"]} == set(names.values())
