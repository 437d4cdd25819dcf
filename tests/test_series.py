"""The timeline's lanes on a real recording: a request in its instance's lane, in the lane of
the instance the proxy delivered it to where no instance log holds it, else unreached."""

from collections import Counter

from logforensics.analysis import analyze
from logforensics.report import series
from tests.conftest import corpus


def test_lanes_count_each_request_once_by_its_strongest_witness():
    analysis = analyze([corpus("decode-bound")])
    timeline = series.timeline(analysis)
    expected = Counter()
    for row in analysis.measured.iter_rows(named=True):
        if row["started_at"] is None:
            continue
        if row["instance"] is not None:
            expected[row["instance"]] += 1
        elif row["reach"] == "reached" and row["proxy_delivery"] is not None:
            expected[f"{row['proxy_instance'] or row['proxy_upstream']} (per proxy)"] += 1
        elif row["reach"] == "unreached":
            expected[series.UNREACHED_LANE] += 1
        else:
            expected[series.UNKNOWN_LANE] += 1
    got = dict(zip(timeline.lanes, timeline.requests, strict=True))
    assert {k: v for k, v in got.items() if v} == dict(expected)
    assert sum(1 for lane in got if lane.endswith("(per proxy)")) == 2  # this recording's
    assert timeline.total == sum(expected.values())
    for lane, bars in timeline.bars.items():  # each lane's bars in time order
        assert list(bars.start) == sorted(bars.start), lane
