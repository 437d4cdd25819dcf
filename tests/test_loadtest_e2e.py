"""End to end: `logforensics loadtest` through a front proxy to two stub vLLM instances, then
`analyze` over the client's records and the instances' container logs.

The proxy admits 3 requests at a time and answers 503 to the rest after holding
them a while, as a queueing front proxy that gives up would. Ground truth is
what the proxy and the stubs saw; the analysis must arrive at it from the files.
"""

from __future__ import annotations

import io
import re
import time
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from logforensics.analysis import analyze
from logforensics.loadtest import LoadTestConfig, run_loadtest
from tests.conftest import report_json
from tests.stub_openai import StubOpenAI, StubProxy

STEPS = (2, 6)
IN_FLIGHT = 3
# Both outlast the stubs' 1 s stats interval: a stats line falls inside every
# request's time at an instance and inside every rejected request's window.
SERVE_S = 1.1  # every answered request takes this long at an instance
REJECT_AFTER_S = 1.2  # the proxy holds a request it has no room for, then answers 503
TIMEOUT_S = 3.0
LOGS_OUTLIVE_S = 0.5  # the instances keep running after the load test
DOCKER_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z \S")
STEP_ID = re.compile(r"-s(\d+)-\d+(?:-a\d+)?$")


@pytest.fixture(scope="module")
def e2e(tmp_path_factory) -> dict:
    """Run once; every test below reads the same run and the same analysis."""
    folder = tmp_path_factory.mktemp("e2e")
    logs = {name: folder / f"{name}.log" for name in ("instance-a", "instance-b")}
    client_file = folder / "run.jsonl"
    lines: list[str] = []
    with (
        StubOpenAI(log_path=logs["instance-a"]) as first,
        StubOpenAI(log_path=logs["instance-b"]) as second,
    ):
        stubs = {"instance-a": first, "instance-b": second}
        for stub in stubs.values():
            stub.delay(SERVE_S)
        with StubProxy(
            [first.url, second.url], max_in_flight=IN_FLIGHT, reject_delay_s=REJECT_AFTER_S
        ) as proxy:
            config = LoadTestConfig(
                url=proxy.url,
                model="stub-model",
                steps=STEPS,
                rest_s=0.3,  # shorter than the timeout: warned about and recorded
                timeout_s=TIMEOUT_S,
            )
            out = io.StringIO()
            summary = run_loadtest(config, out, progress=lines.append)
            forwarded = proxy.received()
            rejected = proxy.rejected
        # servers outlive the test that loads them: a log ending within milliseconds of the
        # last failure's end (the clock estimate then shifts it past the log) could not say
        # that failure never arrived, and the verdict would rightly be undecided
        time.sleep(LOGS_OUTLIVE_S)
    # the stubs are closed: their logs end with uvicorn's shutdown lines
    client_file.write_text(out.getvalue(), encoding="utf-8")
    analysis = analyze([client_file, logs["instance-a"], logs["instance-b"]])
    return {
        "analysis": analysis,
        "summary": summary,
        "progress": lines,
        "forwarded": forwarded,
        "rejected": rejected,
        "instance_of_url": {stub.url: name for name, stub in stubs.items()},
        "received": {name: stub.received() for name, stub in stubs.items()},
        "logs": logs,
        "client_file": client_file,
    }


def step_of(request_id: str) -> int:
    return int(STEP_ID.search(request_id).group(1))


def test_the_run_itself_went_as_staged(e2e):
    summary, rejected = e2e["summary"], e2e["rejected"]
    assert summary.steps_completed == len(STEPS)
    assert summary.requests == 1 + sum(STEPS)
    # 3 at once fit; step 2's other 3 were turned away at the proxy
    assert [step_of(r.request_id) for r in rejected] == [2] * (STEPS[1] - IN_FLIGHT)
    assert summary.failed == len(rejected)
    assert e2e["progress"][0].startswith("warning: rest 0.3 s is shorter than timeout 3 s")
    # both instances served some of every step (round robin)
    for received in e2e["received"].values():
        assert {step_of(r.request_id) for r in received} >= {1, 2}


def test_the_instance_logs_look_like_docker_logs_of_vllm(e2e):
    for name, path in e2e["logs"].items():
        text = path.read_text(encoding="utf-8")
        assert text.endswith("\n")
        assert all(DOCKER_LINE.match(line) for line in text.splitlines()), name
        for request in e2e["received"][name]:
            assert f"Received request chatcmpl-{request.request_id}: prompt: '" in text
        assert "Running: " in text and "Engine 000: Avg prompt throughput" in text


def test_every_input_line_is_understood(e2e):
    analysis = e2e["analysis"]
    assert analysis.errors == []
    by_path = {Path(f.path).name: f for f in analysis.inputs}
    assert by_path["run.jsonl"].role == "client"
    for name in ("instance-a", "instance-b"):
        account = by_path[f"{name}.log"]
        assert (account.role, account.instance) == ("server", name)
        assert account.unparsed == 0, account.unparsed_examples
        assert account.parsed + account.noise == account.lines
        assert {"vllm_stats", "uvicorn_access", "vllm_lifecycle"} <= set(account.formats)


def test_the_verdict_is_the_front_proxy(e2e):
    result = report_json(e2e["analysis"])
    verdict = result["verdict"]
    assert verdict["bottleneck"] == "front_proxy", verdict
    signals = {e["signal"] for e in verdict["evidence"]}
    assert "failures_never_reached_an_instance" in signals
    # the stats lines say the instances were idle while the proxy turned requests away
    assert "instances_had_room_during_failures" in signals
    rejected = len(e2e["rejected"])
    assert result["totals"] == {
        "sent": sum(STEPS),
        "succeeded": sum(STEPS) - rejected,
        "failed": rejected,
        "unreached": rejected,
        "unknown": 0,
        "reached_unseen": 0,
        "outcome_unknown": 0,
        "retried": 0,
    }
    assert result["clock"]["method"] == "estimated"
    assert abs(result["clock"]["offset_s"]) < 0.5  # one machine, one clock
    assert result["unmatched_server_records"] == 0


def test_every_rejected_request_is_unreached(e2e):
    requests = e2e["analysis"].requests
    unreached = requests.filter(pl.col("reach") == "unreached")
    assert unreached.height == len(e2e["rejected"])
    assert set(unreached["request_id"]) == {r.request_id for r in e2e["rejected"]}
    assert unreached["instance"].is_null().all()
    assert (unreached["http_status"] == 503).all()


def test_every_success_is_attributed_to_the_instance_the_proxy_chose(e2e):
    requests = e2e["analysis"].requests
    instance_of_url = e2e["instance_of_url"]
    truth = {
        r.request_id: instance_of_url[r.forwarded_to]
        for r in e2e["forwarded"]
        if r.forwarded_to is not None
    }
    ok = requests.filter(pl.col("ok"))
    assert ok.height == len(truth)  # the warm-up included
    got = {
        row["request_id"]: (row["instance"], row["match_key"], row["reach"])
        for row in ok.iter_rows(named=True)
    }
    assert got == {rid: (name, "request_id", "reached") for rid, name in truth.items()}


def test_per_step_counts_per_instance_equal_what_each_stub_received(e2e):
    runs = report_json(e2e["analysis"])["runs"]
    warmups = [run for run in runs if run["warmup"]]
    assert len(warmups) == 1 and warmups[0]["sent"] == 1
    measured = sorted((run for run in runs if not run["warmup"]), key=lambda run: run["index"])
    assert [run["concurrency"] for run in measured] == list(STEPS)
    received = {
        name: Counter(step_of(r.request_id) for r in requests)
        for name, requests in e2e["received"].items()
    }
    for number, run in enumerate(measured, start=1):
        assert run["per_instance"] == {name: counts[number] for name, counts in received.items()}
        assert run["unreached"] == (STEPS[1] - IN_FLIGHT if number == 2 else 0)
        assert run["contaminated"] is False
    assert sum(warmups[0]["per_instance"].values()) == 1
    assert warmups[0]["per_instance"] == {
        name: counts[0] for name, counts in received.items()
    }  # fmt: skip


def test_the_stats_lines_count_the_requests_in_flight(e2e):
    stats = e2e["analysis"].tables["engine_stats"]
    for name in ("instance-a", "instance-b"):
        own = stats.filter(pl.col("instance") == name)
        assert own.height >= 2
        assert 1 <= own["running"].max() <= IN_FLIGHT
    assert (stats["waiting"] == 0).all()
    assert stats["gpu_kv_pct"].max() < 5.0


def test_the_warm_up_and_the_short_rest_are_recognised(e2e):
    result = report_json(e2e["analysis"])
    assert "warmup" in {finding["kind"] for finding in result["findings"]}
    runs = {run["index"]: run for run in result["runs"]}
    assert runs[0]["warmup"] is True and runs[0]["rest_before_s"] is None
    assert 0.3 <= runs[2]["rest_before_s"] < 1.0
    assert runs[2]["timeout_s"] == TIMEOUT_S


def test_a_request_the_client_gave_up_on_is_seen_aborted_at_its_instance(tmp_path):
    """No proxy: the instance sees the disconnect, logs it, and the failure has reached it."""
    log = tmp_path / "gpu-0.log"
    with StubOpenAI(log_path=log) as stub:
        stub.delay(1.0, markers=["-s1-2]"])
        config = LoadTestConfig(
            url=stub.url, model="stub-model", steps=(2,), timeout_s=0.4, sleep=lambda s: None
        )
        out = io.StringIO()
        run_loadtest(config, out, progress=lambda line: None)
        deadline = time.monotonic() + 2.0
        while not any(r.aborted for r in stub.received()) and time.monotonic() < deadline:
            time.sleep(0.02)
    client_file = tmp_path / "run.jsonl"
    client_file.write_text(out.getvalue(), encoding="utf-8")
    (gave_up,) = [r for r in stub.received() if r.aborted]
    assert f"Aborted request chatcmpl-{gave_up.request_id}." in log.read_text(encoding="utf-8")

    analysis = analyze([client_file, log])

    events = analysis.tables["server_requests"].filter(pl.col("event") == "aborted")
    assert events["request_id"].to_list() == [f"chatcmpl-{gave_up.request_id}"]
    row = analysis.requests.filter(pl.col("request_id") == gave_up.request_id).row(0, named=True)
    assert (row["ok"], row["error"]) == (False, "timed out after 0.4 s")
    assert (row["instance"], row["match_key"], row["reach"]) == ("gpu-0", "request_id", "reached")
    assert report_json(analysis)["totals"]["unreached"] == 0
