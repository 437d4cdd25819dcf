"""`make bench`'s Targets table: issue #33's targets judged from a run's timings."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import run  # noqa: E402


def size(label, analyze_s, floor_s, rss_mib, tables_s=None, check="PASS", gib=3):
    res = run.SizeResult(label, {"lines": 1000, "bytes": gib * 2**30}, reused=True, check=check)
    res.timings = [
        run.Timing(
            "logforensics analyze --json", "", 1000, gib * 2**30, analyze_s, rss_mib * 1024, 0
        ),
        run.Timing(run.FLOOR, "", 1000, gib * 2**30, floor_s, 1, 0),
    ]
    if tables_s is not None:
        res.timings.append(run.Timing(run.TABLES_ANALYZE, "", 1000, 1, tables_s, 1, 0))
    return res


def rows_about(results, what):
    return [row for row in run.targets(results) if what in row]


def test_each_target_met_only_within_its_bound():
    results = {
        "20M": size("20M", 16.0, 10.0, 2000, tables_s=6.0),  # 1.6× the floor, 0.65× input
        "5M-short": size("5M-short", 7.5, 2.9, 669, gib=0.5),  # 2.6×; 1.31× input
    }
    (after,) = rows_about(results, "after the parse")
    assert "6.00 s" in after and after.endswith("| met |")
    floor20, floor5 = rows_about(results, "polars' floor on")
    assert "1.60× the floor's 10.00 s" in floor20 and floor20.endswith("| met |")
    assert "2.59×" in floor5 and floor5.endswith("NOT met |")
    rss20, rss5, rss150 = rows_about(results, "peak RSS")
    assert "0.65×" in rss20 and rss20.endswith("| met |")
    assert rss5.endswith("NOT met |")
    assert "150M" in rss150 and "not run" in rss150


def test_memory_met_only_with_the_counts_right():
    results = {"20M": size("20M", 16.0, 10.0, 2000, tables_s=6.5, check="FAIL: per-instance")}
    (rss20,) = rows_about(results, "on 20M | 2,000 MiB")
    assert rss20.endswith("NOT met |")
    (after,) = rows_about(results, "after the parse")
    assert after.endswith("NOT met |")
