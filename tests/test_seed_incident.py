"""The seed write-up's incident, end to end: the numbers SEEDS.md gives."""

import json

import pytest

from logforensics.analysis import analyze
from tests.conftest import report_json


@pytest.fixture(scope="module")
def result(request):
    from tests.conftest import FIXTURES

    bundle = FIXTURES / "seed-two-instances"
    return report_json(analyze([bundle])), json.loads((bundle / "expected.json").read_text())


def test_verdict_is_front_proxy(result):
    got, expected = result
    assert got["verdict"]["bottleneck"] == expected["verdict"]["bottleneck"] == "front_proxy"
    assert got["verdict"]["confidence"] >= 0.8
    signals = {e["signal"] for e in got["verdict"]["evidence"]}
    assert signals == {
        "failures_never_reached_an_instance",
        "instances_had_room_during_failures",
        "proxy_errors_at_failure_times",
    }


def test_per_step_counts_match_the_write_up(result):
    got, expected = result
    steps = [r for r in got["runs"] if not r["warmup"]]
    assert [r["sent"] for r in steps] == [10, 13, 20]
    assert [r["succeeded"] for r in steps] == [7, 8, 15]
    assert [r["per_instance"]["instance-1"] for r in steps] == [5, 5, 5]
    assert [r["per_instance"]["instance-2"] for r in steps] == [2, 3, 10]
    # every failure never reached an instance: unreached == failed, per step
    assert [r["unreached"] for r in steps] == [r["failed"] for r in steps] == [3, 5, 5]
    for got_run, want in zip(steps, expected["runs"], strict=True):
        for key in ("sent", "succeeded", "failed", "unreached", "per_instance"):
            assert got_run[key] == want[key], (got_run["index"], key)


def test_totals_and_warmup(result):
    got, expected = result
    assert got["totals"] == {
        **expected["totals"],
        "unknown": 0,
        "reached_unseen": 0,
        "outcome_unknown": 0,
        "retried": 0,
    }
    warmups = [r for r in got["runs"] if r["warmup"]]
    assert len(warmups) == 1 and warmups[0]["sent"] == 1


def test_findings_name_the_capped_instance_and_the_small_sample_skew(result):
    got, _ = result
    kinds = [f["kind"] for f in got["findings"]]
    assert "instance_capped" in kinds
    capped = next(f for f in got["findings"] if f["kind"] == "instance_capped")
    assert "instance-1" in capped["detail"] and "7 → 8 → 15" in capped["detail"]
    skew = [f["detail"] for f in got["findings"] if f["kind"] == "lb_skew"]
    assert len(skew) == 3 and all("too small to prove" in d for d in skew)
    assert not any(f["kind"] == "contaminated_step" for f in got["findings"])


def test_clock_is_aligned_and_rows_file_counted_once(result):
    got, _ = result
    assert abs(got["clock"]["offset_s"]) < 0.05
    assert got["clock"]["fit"] == 1.0
    formats = {i["path"].rsplit("/", 1)[-1]: i["format"] for i in got["inputs"]}
    assert formats["rows.txt"] == "seed_rows"
    assert formats["results.jsonl"] == "client_jsonl"
    assert formats["instance-1.log"] == formats["instance-2.log"] == "server_log"
    assert formats["expected.json"] is None  # listed as skipped, not an error
    assert any(f["kind"] == "duplicate_client_records" for f in got["findings"])
    assert all(i["unparsed"] == 0 for i in got["inputs"] if i["format"])
