"""The benchmark's generator at a small size: eight busy instances behind nginx, with a
ground truth. What holds at 20M lines must hold here, in seconds."""

import json
import sys
from pathlib import Path

import polars as pl
import pytest

from logforensics.analysis import analyze

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import generate  # noqa: E402

from tests.conftest import report_json


@pytest.fixture(scope="module")
def busy(tmp_path_factory):
    scratch = tmp_path_factory.mktemp("bench")
    generate.generate(30_000, scratch, seed=7)
    bundle, truth = generate.bundle_paths(scratch, 30_000, 7)
    return report_json(analyze([bundle])), json.loads(truth.read_text())


def test_totals_and_per_instance_counts_equal_the_truth(busy):
    got, truth = busy
    assert {k: got["totals"][k] for k in truth["totals"]} == truth["totals"]
    served = {row["name"]: row["requests"] for row in got["instances"]}
    assert served == truth["instances"]


def test_each_steps_split_is_within_its_stated_bound(busy):
    """No request ids at ~100 requests/s: records placed by time may swap near a step's edge;
    every per-step per-instance count is within the ± the report states, which is not 0 (and
    loose: steps here are a few seconds long, so many requests end near another step's)."""
    got, truth = busy
    runs = {r["index"]: r for r in got["runs"] if not r["warmup"]}
    bounds = []
    for want in truth["runs"]:
        have = runs[want["index"]]
        for name, count in want["per_instance"].items():
            bound = have["per_instance_uncertain"][name]
            assert abs(have["per_instance"][name] - count) <= bound, (want["index"], name)
            bounds.append(bound)
    assert max(bounds) > 0  # stated where time alone placed them


def test_instances_on_the_common_clock_are_not_moved(busy):
    """An instance's own fit must not drift: one-to-one pairing of one instance's lines
    against every instance's requests once walked each fit about a second per refinement."""
    got, _ = busy
    common = got["clock"]["offset_s"]
    for name, fit in got["clock"]["instances"].items():
        assert fit["offset_s"] == pytest.approx(common, abs=0.05), name
        assert fit["moved_s"] == 0.0, name


def test_upstream_addresses_are_mapped_by_requests_per_second(busy):
    """nginx stamps whole seconds and 60 requests end every second: echoes in time fit every
    instance about as well, so the mapping comes from the per-second counts (the bench
    generator sends instance gpu-N's traffic to 10.0.1.(11+N))."""
    got, _ = busy
    upstreams = got["proxy"]["upstreams"]
    assert {a: u["instance"] for a, u in upstreams.items()} == {
        f"10.0.1.{11 + n}:8000": f"gpu-{n}" for n in range(8)
    }
    assert all(u["by"] == "counts" and u["counts_r"] > 0.9 for u in upstreams.values())


def test_the_polars_floor_reads_every_record_the_truth_counts(tmp_path):
    """bench/floor.py, the reference `make bench` times beside `analyze`, is a floor only
    if it reads the fields `analyze` reads: every record of the short bundle's truth."""
    import floor

    truth = generate.generate_short(20_000, tmp_path, seed=7)
    bundle = Path(truth["bundle"])
    tables = floor.read([bundle / rel for rel in sorted(truth["files"])])
    want = {}
    for counts in truth["records"].values():
        for table, n in counts.items():
            want[table] = want.get(table, 0) + n
    instance, proxy = tables["instance"], tables["proxy"]
    records = instance.filter(pl.col("method").is_not_null() | pl.col("running").is_not_null())
    assert records["at"].null_count() == 0
    assert records["method"].drop_nulls().len() == want["server_requests"]
    assert records["running"].drop_nulls().len() == want["engine_stats"]
    assert (
        proxy.filter(pl.col("at").is_not_null() & pl.col("status").is_not_null()).height
        == (want["proxy_requests"])
    )


def test_the_polars_floor_reads_every_client_request(busy):
    import floor

    _, truth = busy
    bundle = Path(truth["bundle"])
    client = floor.read([bundle / "client" / "results.jsonl"])["client"]
    assert client.height == truth["totals"]["sent"]
    assert client["ended_at"].null_count() == 0
