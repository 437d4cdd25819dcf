"""Reach on real recordings: every witness, and nothing claimed that a witness does not prove.

Incidents from ../shared/corpus (real vLLM 0.32 behind real nginx/HAProxy):
kv-tiny's five client timeouts were aborted by the engines (nginx 499 with an
upstream, vLLM ``Aborted request(s)``); crash-midtest's instance-2 was killed
with six requests inside it (its log just stops), and nginx refused the next
eight (``connect() failed (111: Connection refused)``).
"""

from __future__ import annotations

import json
import re

import polars as pl
import pytest

from logforensics.analysis import analyze
from logforensics.correlate.proxy import map_by_address
from logforensics.report import build_report, render_html, render_markdown
from tests.conftest import report_json
from tests.corpus import default_logging, truth, variant

LIFECYCLE = re.compile(r"Received request|Added request|Aborted request|Request \S+ aborted")


def steps(got: dict) -> list[dict]:
    return [r for r in got["runs"] if not r["warmup"]]


def test_client_timeouts_the_engines_aborted_reached_them(tmp_path):
    a = analyze([variant("kv-tiny", tmp_path)])
    failed = a.requests.filter(~pl.col("ok") & ~pl.col("warmup"))
    assert failed.height == 5
    assert failed["reach"].to_list() == ["reached"] * 5
    assert set(failed["reach_witness"]) == {"engine_lifecycle"}
    # each holds its engine's lines: received, added, and the abort
    assert all(len(sources) >= 3 for sources in failed["engine_sources"].to_list())
    want = truth("kv-tiny")["steps"]
    assert [s["per_instance"] for s in steps(report_json(a))] == [s["per_instance"] for s in want]


def test_requests_inside_an_instance_when_it_died_reached_it(tmp_path):
    a = analyze([variant("crash-midtest", tmp_path)])
    failed = a.requests.filter(~pl.col("ok") & ~pl.col("warmup"))
    in_flight = failed.filter(pl.col("step") == 12)
    assert in_flight["reached_instance"].to_list() == ["instance-2"] * 6
    assert set(in_flight["match_key"]) == {"engine_lifecycle"}
    refused = failed.filter(pl.col("step") == 16)
    assert refused["reach"].to_list() == ["unreached"] * 8
    assert set(refused["reach_witness"]) == {"proxy"}


def test_without_request_logging_an_abandoned_request_proves_nothing(tmp_path):
    """The same timeouts, with vLLM's request logging off and no proxy log: no instance
    line can show them, and the engines were busy, so "never reached" is not claimed."""
    strip = lambda text: "".join(  # noqa: E731
        line for line in text.splitlines(keepends=True) if not LIFECYCLE.search(line)
    )
    folder = variant(
        "kv-tiny",
        tmp_path / "kv",
        drop={"nginx-access.log", "nginx-error.log"},
        rewrite={"instance-1.log": strip, "instance-2.log": strip},
    )
    got = report_json(analyze([folder]))
    assert got["totals"]["failed"] == 5
    assert got["totals"]["unreached"] == 0
    assert got["totals"]["unknown"] == 5


def test_the_proxy_alone_proves_a_refusal(tmp_path):
    """crash-midtest without instance-2's log: the refused eight stay unreached (nginx's own
    line proves it), and nothing is claimed about the six that died inside instance-2."""
    folder = variant("crash-midtest", tmp_path / "c", drop={"instance-2.log", "metrics-8002.txt"})
    a = analyze([folder])
    failed = a.requests.filter(~pl.col("ok") & ~pl.col("warmup"))
    assert failed.filter(pl.col("step") == 16)["reach"].to_list() == ["unreached"] * 8
    died = failed.filter(pl.col("step") == 12)
    assert died["reach"].to_list() == ["reached"] * 6  # nginx: connected, then premature close
    assert set(died["reach_witness"]) == {"proxy"}


def test_a_metrics_scrape_is_never_an_instance(tmp_path):
    got = report_json(analyze([variant("haproxy-queue", tmp_path)]))
    assert [i["name"] for i in got["instances"]] == ["instance-1", "instance-2"]
    for run in got["runs"]:
        assert set(run["per_instance"]) == {"instance-1", "instance-2"}


def test_a_routers_own_metrics_are_no_instances_to_name(tmp_path):
    """recordings/vrouter-compute/metrics-router.txt: the Rust vllm-router's own
    `vllm_router_*` series, no engine's. It is said to hold no engine metrics; it is not
    "metrics of an unknown instance" the user should name."""
    got = report_json(analyze([variant("vrouter-compute", tmp_path)]))
    (scrape,) = [i for i in got["inputs"] if i["path"].endswith("metrics-router.txt")]
    assert "no vLLM or SGLang metrics in this scrape" in scrape["notes"]
    assert not any("unknown instance" in note for note in scrape["notes"])
    assert [i["name"] for i in got["instances"]] == ["instance-1", "instance-2"]


def test_upstreams_map_to_the_address_an_instance_announces():
    """vLLM's start-up line names where it listens; the proxy names the same host:port."""
    addresses = {
        "instance-1": ["http://127.0.0.1:8001"],  # Starting vLLM server on http://127.0.0.1:8001
        "instance-2": ["http://0.0.0.0:8002"],  # --host 0.0.0.0
        "gpu-a": ["http://0.0.0.0:8000"],
        "gpu-b": ["http://0.0.0.0:8000"],
    }
    mapped = map_by_address(
        ["127.0.0.1:8001", "10.0.0.7:8002", "10.0.0.8:8000", "vllm_backend/vllm1", "pool"],
        addresses,
        {"vllm_backend/vllm1": "127.0.0.1:8001"},  # HAProxy: server vllm1 127.0.0.1:8001
    )
    # vllm1 and 127.0.0.1:8001 both claim instance-1: contradictory, neither is taken
    assert mapped == {"10.0.0.7:8002": "instance-2"}
    assert map_by_address(["127.0.0.1:8001"], addresses, {}) == {"127.0.0.1:8001": "instance-1"}


def test_the_same_counts_as_the_truth_on_every_incident_in_the_corpus(tmp_path):
    """A fast, in-process version of `make validate`'s counts (its CLI run scores the verdict)."""
    for name in ("kv-tiny", "crash-midtest", "haproxy-queue", "compute-loadtest"):
        got = report_json(analyze([variant(name, tmp_path / name)]))
        want = truth(name)
        assert [
            (s["sent"], s["ok"], s["failed"], s["unreached"], s["per_instance"])
            for s in want["steps"]
        ] == [
            (s["sent"], s["succeeded"], s["failed"], s["unreached"], s["per_instance"])
            for s in steps(got)
        ], name
        assert json.dumps(got["totals"]["unknown"]) == "0", name


def test_nginx_error_log_decides_what_a_plain_access_line_leaves_open(tmp_path):
    """Without $upstream_connect_time a 502 says nothing of delivery; the error line of the same
    failure does: "prematurely closed" (reached) or "connect() failed (111" (refused)."""
    no_connect_time = lambda text: re.sub(r' uct="[^"]*"', "", text)  # noqa: E731
    folder = variant(
        "crash-midtest",
        tmp_path / "c",
        drop={"instance-2.log", "metrics-8002.txt"},
        rewrite={"nginx-access.log": no_connect_time},
    )
    a = analyze([folder])
    failed = a.requests.filter(~pl.col("ok") & ~pl.col("warmup"))
    assert failed.filter(pl.col("step") == 12)["proxy_delivery"].to_list() == ["reached"] * 6
    assert failed.filter(pl.col("step") == 16)["proxy_delivery"].to_list() == ["refused"] * 8
    alone = variant(
        "crash-midtest",
        tmp_path / "alone",
        drop={"instance-2.log", "metrics-8002.txt", "nginx-error.log"},
        rewrite={"nginx-access.log": no_connect_time},
    )
    failed = analyze([alone]).requests.filter(~pl.col("ok") & ~pl.col("warmup"))
    assert set(failed["proxy_delivery"]) == {"unknown"}


def test_the_testers_own_figures_sit_beside_the_logs_and_a_difference_is_a_finding(tmp_path):
    """GuideLLM 0.8 closed its concurrent@4 benchmark listing 7 requests of the 8 it sent;
    the eighth is in nginx's and instance-2's logs, answered in full."""
    got = report_json(analyze([variant("guidellm-kv", tmp_path)]))
    by_level = {f["concurrency"]: f for f in got["tester_figures"] if f["ours"]}
    assert by_level[4]["theirs"] == {"sent": 7, "ok": 7, "failed": 0}
    assert by_level[4]["ours"] == {"sent": 8, "ok": 8, "failed": 0}
    assert [f["agree"] for f in sorted(by_level.values(), key=lambda f: f["concurrency"])] == [
        True,
        False,
        True,
        True,
    ]
    (differ,) = [f for f in got["findings"] if f["kind"] == "tester_figures_differ"]
    assert "sent 7" in differ["detail"] and "sent 8" in differ["detail"]


def test_never_reached_needs_every_condition_at_once():
    """decide_reach on hand-built rows: "unreached" by coverage only for a failure inside
    every log's span that no log saw, no proxy line decided and no unclaimed arrival fits."""
    import datetime as dt

    from logforensics.correlate.reach import decide_reach

    t0 = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.timezone.utc)

    def row(start, ok, delivery=None, unclaimed=False):
        return {
            "started_at": t0 + dt.timedelta(seconds=start),
            "ended_at": t0 + dt.timedelta(seconds=start + 5),
            "ok": ok,
            "instance": None,
            "match_key": None,
            "proxy_delivery": delivery,
            "proxy_instance": None,
            "unclaimed_arrival": unclaimed,
        }

    rows = [
        row(100, False),  # inside, unseen: never reached
        row(100, False, delivery="unknown"),  # the proxy said nothing either way: the same
        row(5000, True, delivery="unknown"),  # a success is never "unreached"
        row(5000, False, delivery="unknown"),  # outside the logs' span: unknown
        row(100, False, unclaimed=True),  # an arrival no request claimed may be it
    ]
    requests = pl.DataFrame(rows)
    coverage = {"a": (t0, t0 + dt.timedelta(seconds=1000))}
    server = pl.DataFrame({"instance": ["a"], "event": ["received"]})
    got = decide_reach(requests, coverage, 0.0, server)["reach"].to_list()
    assert got == ["unreached", "unreached", "reached", "unknown", "unknown"]


@pytest.mark.parametrize(
    "incident, missing_address",
    [
        ("kv-tiny", "127.0.0.1:8002"),
        ("compute-loadtest", "127.0.0.1:8002"),
        ("crash-midtest", "127.0.0.1:8002"),
        ("haproxy-queue", "vllm_backend/vllm2"),
    ],
)
def test_a_lost_instance_log_moves_no_request_onto_the_other(tmp_path, incident, missing_address):
    """instance-2's log lost: instance-1 keeps exactly its own requests (ids that instance-1
    would have logged are not its; the proxy's lines go to the requests of their address),
    and the proxy's log alone still counts instance-2's under its address."""
    folder = variant(incident, tmp_path / incident, drop={"instance-2.log"})
    got = report_json(analyze([folder]))
    want = truth(incident)["steps"]
    measured = steps(got)
    assert [s["per_instance"] for s in measured] == [
        {"instance-1": s["per_instance"]["instance-1"]} for s in want
    ]
    proxy_counts = [s["per_upstream"].get(missing_address, 0) for s in measured]
    assert proxy_counts == [s["per_instance"]["instance-2"] for s in want]


def test_caddy_refusals_are_proved_by_its_error_line_of_the_same_microseconds(tmp_path):
    """recordings/caddy-crash: Caddy's access log names no upstream; its 502 for a dead
    instance-2 is written with the error line `dial tcp 127.0.0.1:8002: connect: connection
    refused` of the same failure (in another file, stamped 30 µs apart). That pair proves the
    six step-12 failures never reached an instance; without the error log nothing does."""
    a = analyze([variant("caddy-crash", tmp_path / "c")])
    failed = a.requests.filter(~pl.col("ok") & ~pl.col("warmup") & (pl.col("step") == 3))
    assert failed.height == 6
    assert set(failed["proxy_delivery"]) == {"refused"}
    assert set(failed["proxy_upstream"]) == {"127.0.0.1:8002"}
    assert set(failed["reach"]) == {"unreached"}
    alone = variant("caddy-crash", tmp_path / "alone", drop={"caddy.log"})
    failed = analyze([alone]).requests.filter(~pl.col("ok") & (pl.col("step") == 3))
    assert set(failed["proxy_delivery"]) == {"unknown"}
    assert "unreached" not in set(failed["reach"])


def test_error_lines_several_failures_could_own_decide_none(tmp_path):
    """The six 502s and the six refusals all stamped in one microsecond: which error line
    belongs to which 502 cannot be told, so every one stays open (a guess would be a wrong
    count, even where here all six name the same address)."""
    bursts = lambda text: "\n".join(  # noqa: E731  every 502 entry given one stamp
        re.sub(r'"ts":\d+\.\d+', '"ts":1796148909.9892', line) if '"status":502' in line else line
        for line in text.splitlines()
    )
    folder = variant(
        "caddy-crash",
        tmp_path / "b",
        rewrite={"caddy-access.log": bursts, "caddy.log": bursts},
    )
    failed = analyze([folder]).requests.filter(~pl.col("ok") & (pl.col("step") == 3))
    assert set(failed["proxy_delivery"]) == {"unknown"}


def test_the_balancer_is_judged_on_where_it_sent_requests_not_where_they_survived(tmp_path):
    """recordings/caddy-crash, step 12: instance-1 served 6, instance-2 was dead and Caddy
    sent it 6 it could not deliver. Reached 6:0 (the truth's per-instance counts) but the
    balancer split 6:6: no skew finding, and the dead instance's finding instead."""
    analysis = analyze([variant("caddy-crash", tmp_path)])
    got = report_json(analysis)
    last = steps(got)[-1]
    assert last["per_instance"] == {"instance-1": 6, "instance-2": 0}
    assert last["routed"] == {"instance-1": 6, "instance-2": 6}
    assert last["balance"]["verdict"] == "even"
    kinds = {f["kind"] for f in got["findings"]}
    assert "lb_skew" not in kinds and "failed_instance_kept_in_pool" in kinds
    # the step tables say why a 6:0 split is "even": 6 more were sent to the dead one
    assert "0 (+6 refused)" in render_markdown(build_report(analysis))
    assert "+6 refused</small>" in render_html(build_report(analysis))


def test_a_success_no_present_log_saw_reached_an_instance_all_the_same(tmp_path):
    """kv-tiny without instance-2's log and the proxy's: its successes are served by an instance
    whose log is missing (an answer came back), never "unknown"; only failures can be."""
    folder = variant(
        "kv-tiny",
        tmp_path / "k",
        drop={"instance-2.log", "metrics-8002.txt", "nginx-access.log", "nginx-error.log"},
    )
    a = analyze([folder])
    measured = a.requests.filter(~pl.col("warmup"))
    unseen = measured.filter(pl.col("ok") & pl.col("reached_instance").is_null())
    assert unseen.height > 0
    assert set(unseen["reach"].cast(pl.Utf8)) == {"reached"}
    assert set(unseen["reach_witness"].cast(pl.Utf8)) == {"success"}
    assert measured.filter(pl.col("ok") & (pl.col("reach") == "unknown")).is_empty()
    got = report_json(a)
    assert got["totals"]["reached_unseen"] == unseen.height
    assert sum(r["reached_unseen"] for r in got["runs"] if not r["warmup"]) == unseen.height
    unknown = measured.filter(pl.col("reach") == "unknown")
    assert got["totals"]["unknown"] == unknown.height
    assert not unknown["ok"].fill_null(False).any()
    md = render_markdown(build_report(a))
    assert f"**{unseen.height}** served by an instance whose log is missing" in md


def test_without_request_logging_an_unanswered_delivery_is_explained_not_blamed_on_a_log(
    tmp_path,
):
    """kv-tiny as vLLM's default logging writes it: the 5 client timeouts nginx delivered left
    no line at either engine (uvicorn logs only answers); the finding says so instead of
    calling a log missing."""
    folder = variant(
        "kv-tiny",
        tmp_path / "k",
        rewrite={"instance-1.log": default_logging, "instance-2.log": default_logging},
    )
    got = report_json(analyze([folder]))
    (detail,) = [f["detail"] for f in got["findings"] if f["kind"] == "unverified_by_instance"]
    assert detail.startswith("5 request(s) reached an upstream")
    assert "5 of them were never answered" in detail and "log is missing" not in detail


def test_an_engine_holding_every_request_sent_to_it_proves_a_silent_failure_reached_it():
    """Two requests sent to gpu-0 (nginx named the upstream, not whether it connected); one
    answered. A stats moment inside both counting 2 inside proves the failure reached it;
    counting 1 proves nothing (the failure may never have got there)."""
    import datetime as dt

    from logforensics.correlate.reach import decide_reach

    t0 = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.timezone.utc)
    requests = pl.DataFrame(
        {
            "started_at": [t0, t0],
            "ended_at": [t0 + dt.timedelta(seconds=30)] * 2,
            "ok": [True, False],
            "instance": ["gpu-0", None],
            "match_key": ["time_window", None],
            "proxy_delivery": ["reached", "unknown"],
            "proxy_instance": ["gpu-0", "gpu-0"],
        }
    )

    def reach_with(inside: int) -> list[str]:
        stats = pl.DataFrame(
            {
                "instance": ["gpu-0"],
                "at": [t0 + dt.timedelta(seconds=15)],
                "running": [inside],
                "waiting": [0],
            }
        )
        got = decide_reach(requests, {}, 0.0, None, stats)
        return got.select(pl.col("reach", "reach_witness").cast(pl.Utf8)).rows()

    assert reach_with(2)[1] == ("reached", "engine_count")
    assert reach_with(1)[1] == ("unknown", None)


def test_a_fronts_own_rejection_in_the_answer_proves_never_reached():
    """llm-d's router answers a request its flow control never dispatched with
    `x-llm-d-request-dropped-reason: rejected-…` (the header as llm-d-router #2881 quotes it,
    kept in the client's error text); `evicted-…` was dispatched first and proves nothing."""
    import datetime as dt

    from logforensics import model
    from logforensics.correlate.reach import decide_reach, failed_at

    t0 = dt.datetime(2026, 9, 15, 18, 18, 21, tzinfo=dt.timezone.utc)
    errors = [
        "HTTP/1.1 503 Service Unavailable; x-llm-d-request-dropped-reason: rejected-no-endpoints",
        "429 Too Many Requests (x-llm-d-request-dropped-reason: rejected-saturated)",
        "429 Too Many Requests (x-llm-d-request-dropped-reason: evicted-ttl-expired)",
        "HTTP 503",
    ]
    frame = model.conform(
        model.REQUESTS,
        pl.DataFrame(
            {
                "started_at": [t0] * 4,
                "ended_at": [t0 + dt.timedelta(seconds=1)] * 4,
                "ok": [False] * 4,
                "error": errors,
                "warmup": [False] * 4,
            }
        ),
    )
    got = decide_reach(frame, {}, 0.0).with_columns(failed_at())
    assert got["reach"].cast(pl.Utf8).to_list() == ["unreached", "unreached", "unknown", "unknown"]
    assert got["reach_witness"].cast(pl.Utf8).to_list() == [
        "front_answer",
        "front_answer",
        None,
        None,
    ]
    assert got["failed_at"].to_list() == ["proxy", "proxy", "unknown", "unknown"]


def test_a_refused_connect_never_reached_and_takes_no_record(tmp_path):
    """recordings/aiperf-restart: while the instance was down AIPerf's 63 connects were
    refused in < 6 ms (aiohttp `ConnectionRefusedError(111, "Connect call failed
    ('127.0.0.1', 8011)")`): never reached, by the client's own word, and no access line at
    their time is theirs (before, two were matched "late" and claimed as client timeouts);
    the successes whose record the time matching missed are placed by the client's trace
    (its peer 127.0.0.1:8011, the address instance-1 announced)."""
    a = analyze([variant("aiperf-restart", tmp_path)])
    r = a.requests
    refused = r.filter(pl.col("outcome") == "refused")
    assert refused.height == 63
    assert set(refused["reach"]) == {"unreached"}
    assert set(refused["reach_witness"]) == {"refused_connect"}
    assert refused["instance"].null_count() == 63 and not refused["late"].any()
    assert set(refused["connect_target"]) == {"instance-1"}  # named in the error text
    ok = r.filter(pl.col("ok"))
    assert set(ok["reached_instance"]) == {"instance-1"} and ok.height == 40
    assert set(ok["reach_witness"]) <= {"access_line", "client_peer"}
    got = report_json(a)
    assert [f["kind"] for f in got["findings"]].count("missing_instance_log") == 0
    assert "client_timeout_shorter_than_server_latency" not in [f["kind"] for f in got["findings"]]
    assert [s["per_instance"] for s in steps(got)] == [{"instance-1": 43}]
