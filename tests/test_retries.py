"""Retries are hops, deaths are deaths (issue #30, item 5).

recordings/retry-nonidempotent: two real vLLM 0.32 engines with their default logging
behind nginx 1.22 with `proxy_next_upstream error timeout non_idempotent`. instance-2
was SIGKILLed 3 s into the second step with 4 requests in flight; nginx resent each to
instance-1 (`ua="127.0.0.1:8002, 127.0.0.1:8001" us="502, 200"`, both attempts
connected), and every client request succeeded. A retried request reached both
instances; the instance died even though the test "passed".
"""

from __future__ import annotations

import datetime as dt

import polars as pl
import pytest

from logforensics.analysis import analyze
from logforensics.correlate.steps import assign_steps
from tests.conftest import incident_inputs, report_json
from tests.corpus import truth, variant
from tests.test_ingest_proxy import parse

INCIDENT = "retry-nonidempotent"

# verbatim from the recording's nginx-access.log (lines 10 and 21)
IN_FLIGHT = (
    '127.0.0.1 - - [04/Dec/2026:20:14:30 +0000] "POST /v1/chat/completions HTTP/1.1" 200 2309 '
    '"-" "python-requests/2.34.2" rt=14.456 uct="0.000, 0.000" urt="3.374, 11.081" '
    'ua="127.0.0.1:8002, 127.0.0.1:8001" us="502, 200" msec=1796415270.329 '
    'rid=758a0efcaea8db8b04ec432b7d4cc7b6 xrid="f7b6e017-c55b-44db-927f-5eb871f670ce"'
)
REFUSED_FIRST = (
    '127.0.0.1 - - [04/Dec/2026:20:15:23 +0000] "POST /v1/chat/completions HTTP/1.1" 200 2309 '
    '"-" "python-requests/2.34.2" rt=12.894 uct="-, 0.000" urt="0.000, 12.894" '
    'ua="127.0.0.1:8002, 127.0.0.1:8001" us="502, 200" msec=1796415323.466 '
    'rid=6ad93d234b4bf0a3a2673e7b52a0c60d xrid="5d5c0c53-64ae-44e2-a6ea-65beb80fefa4"'
)
HEAD = '10.0.3.7 - - [24/Feb/2026:06:16:03 +0000] "POST /v1/completions HTTP/1.1"'


@pytest.mark.parametrize(
    ("line", "attempts", "also", "delivery"),
    [
        # connected to :8002, which closed mid-request; resent to :8001
        (IN_FLIGHT, 2, "127.0.0.1:8002", "reached"),
        # refused at connect (uct "-"): :8002 was chosen, never reached
        (REFUSED_FIRST, 2, None, "reached"),
        # `proxy_next_upstream http_500`: the first upstream answered 500 itself
        (
            f'{HEAD} 200 10 "-" "ua" rt=1.3 ua="10.0.0.22:8000, 10.0.0.21:8000" us="500, 200" '
            'urt="0.041, 1.238"',
            2,
            "10.0.0.22:8000",
            "reached",
        ),
        # a 502 with no connect time logged cannot tell a refused connect from a reset
        (
            f'{HEAD} 200 10 "-" "ua" 10.0.0.22:8000, 10.0.0.21:8000 502, 200 1.240 0.000, 1.238',
            2,
            None,
            "reached",
        ),  # fmt: skip
        # three attempts, the first two connected (timeouts), the third answered
        (
            f'{HEAD} 200 10 "-" "ua" rt=9.1 uct="0.001, 0.000, 0.001" urt="3.0, 3.0, 3.1" '
            'ua="10.0.0.21:8000, 10.0.0.22:8000, 10.0.0.23:8000" us="504, 504, 200"',
            3,
            "10.0.0.21:8000, 10.0.0.22:8000",
            "reached",
        ),
        # GuideLLM cancelling at a benchmark's end: nginx chose :8001, never connected
        (
            f'{HEAD} 499 0 "-" "ua" rt=0.000 uct="-" urt="0.000" ua="127.0.0.1:8001" us="-"',
            1,
            None,
            "refused",
        ),
    ],
)
def test_an_earlier_attempt_is_a_hop_only_where_it_reached_its_upstream(
    tmp_path, line, attempts, also, delivery
):
    _, result = parse(tmp_path, line + "\n", "nginx-access.log")
    row = result.table("proxy_requests").row(0, named=True)
    assert (row["attempts"], row["also_reached"], row["delivery"]) == (attempts, also, delivery)


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> dict:
    return report_json(analyze(incident_inputs(variant(INCIDENT, tmp_path_factory.mktemp("full")))))


def test_a_retried_request_counts_for_every_instance_it_reached(report):
    want = truth(INCIDENT)
    steps = [r for r in report["runs"] if not r["warmup"]]
    assert [r["concurrency"] for r in steps] == [s["concurrency"] for s in want["steps"]]
    assert [r["per_instance"] for r in steps] == [s["per_instance"] for s in want["steps"]]
    assert [r["served_by"] for r in steps] == [s["served_by"] for s in want["steps"]]
    # 4 resent after reaching instance-2, 1 after being refused at connect
    assert [r["retried"] for r in steps] == [0, 4, 1]
    assert report["totals"]["retried"] == want["retried"] == 5
    assert report["totals"]["failed"] == 0


def test_a_death_the_retries_hid_is_an_instance_failure(report):
    verdict = report["verdict"]
    assert verdict["bottleneck"] == truth(INCIDENT)["verdict"] == "instance_failure"
    assert verdict["subject"] == "instance-2"
    by_signal = {e["signal"]: e for e in verdict["evidence"]}
    assert set(by_signal) == {
        "instance_log_stopped",
        "proxy_lost_the_instance",
        "requests_retried_away",
    }
    assert by_signal["proxy_lost_the_instance"]["value"].startswith(
        "conn_refused×1, upstream_closed×4 naming 127.0.0.1:8002 (instance-2)"
    )
    paid = by_signal["requests_retried_away"]["value"]
    # what the retries cost: the 4 resent requests' client latency against their steps' others
    assert paid.startswith("4 request(s) reached instance-2") and "14.46–14.71 s" in paid
    assert len(by_signal["requests_retried_away"]["sources"]) == 4


@pytest.mark.parametrize(
    ("drop", "verdict"),
    [
        # its log stopped and its requests were resent: two witnesses
        ({"nginx-error.log"}, "instance_failure"),
        # the proxy lost it and resent its requests: two witnesses
        ({"instance-2.log"}, "instance_failure"),
        # resent requests alone: a retry after a slow answer looks the same
        ({"nginx-error.log", "instance-2.log"}, "none"),
    ],
)
def test_two_witnesses_name_a_hidden_death(tmp_path, drop, verdict):
    folder = variant(INCIDENT, tmp_path / "bundle", drop=drop)
    got = report_json(analyze(incident_inputs(folder)))
    assert got["verdict"]["bottleneck"] == verdict
    assert got["totals"]["retried"] == 5


def test_a_step_label_run_twice_is_two_steps(tmp_path):
    """The lab's client labels steps by concurrency: its second step of 8 after a 40 s rest
    is a step of its own; a constant-rate step with idle gaps but no burst keeps its label."""
    client = (
        analyze(incident_inputs(variant(INCIDENT, tmp_path / "b", drop={"client-stdout.log"})))
        .requests.filter(~pl.col("warmup"))
        .group_by("step")
        .len()
        .sort("step")
    )
    assert client.rows() == [(1, 4), (2, 8), (3, 8)]
    t0 = dt.datetime(2026, 12, 4, tzinfo=dt.timezone.utc)
    at = [t0 + dt.timedelta(seconds=8 * k) for k in range(6)]
    slow_rate = pl.DataFrame(
        {
            "run": ["r"] * 6,
            "step": [1] * 6,
            "warmup": [False] * 6,
            "started_at": at,
            "ended_at": [a + dt.timedelta(seconds=1) for a in at],
        }
    )
    assert assign_steps(slow_rate)["step"].to_list() == [1] * 6


def test_a_rest_opened_by_a_request_that_ends_before_it_starts_is_still_seen():
    """No two starts of the label are 5 s apart, but the request at 4 s is logged as ending
    at -3 s (a client clock stepped back): nothing is in flight from 1 s to 8 s, and the
    burst at 8 s is the label running again. The quick test for labels with a rest must
    not skip it."""
    t0 = dt.datetime(2026, 12, 4, tzinfo=dt.timezone.utc)

    def at(seconds: float) -> dt.datetime:
        return t0 + dt.timedelta(seconds=seconds)

    frame = pl.DataFrame(
        {
            "run": ["r"] * 4,
            "step": [2] * 4,
            "warmup": [False] * 4,
            "started_at": [at(0), at(4), at(8), at(8.5)],
            "ended_at": [at(1), at(-3), at(9), at(9)],
        }
    )
    assert assign_steps(frame)["step"].to_list() == [1, 1, 2, 2]


def test_a_step_the_tester_ran_at_a_rate_is_never_split():
    """recordings/aiperf-restart: AIPerf's Poisson arrivals at 1/s left a 6 s gap
    (23:44:06-23:44:12) and then two starts 1.2 s apart — a rest and a burst by the shape
    alone; a step with the rate its tester set (`rate`) stays one step."""
    starts = [
        dt.datetime(2026, 12, 5, 23, 44, s, us, tzinfo=dt.timezone.utc)
        for s, us in ((5, 103792), (5, 519932), (6, 32385), (6, 78361), (12, 59630), (13, 226501))
    ]
    frame = pl.DataFrame(
        {
            "run": ["r"] * 6,
            "step": [4] * 6,
            "warmup": [False] * 6,
            "started_at": starts,
            "ended_at": [a + dt.timedelta(milliseconds=1) for a in starts],
        }
    )
    assert assign_steps(frame)["step"].n_unique() == 2  # read as a label run twice
    at_rate = frame.with_columns(pl.lit(1.0).alias("rate"))
    assert assign_steps(at_rate)["step"].to_list() == [4] * 6
