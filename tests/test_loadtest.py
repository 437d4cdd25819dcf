"""`logforensics loadtest` against the stub server: what is sent, what is recorded."""

from __future__ import annotations

import hashlib
import http.client
import io
import itertools
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner

from logforensics.loadtest import (
    DEFAULT_PROMPT,
    LoadTestConfig,
    LoadTestSummary,
    auto_rest_s,
    loadtest_command,
    run_loadtest,
)
from tests.stub_openai import StubOpenAI, StubProxy

PROJECT_ROOT = Path(__file__).resolve().parents[1]
EXPECTED_KEYS = [
    "request_id",
    "marker",
    "step",
    "concurrency",
    "index",
    "warmup",
    "attempt",
    "started_at",
    "ended_at",
    "latency_s",
    "ttft_s",
    "ok",
    "http_status",
    "error_class",
    "error",
    "output_tokens",
    "response_id",
    "rest_before_s",
    "timeout_s",
]
ISO_US_Z = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
STEP_LINE = re.compile(r"^step (\d+)/(\d+): (\d+) sent, (\d+) done, (\d+) failed, \d+\.\d s$")


@pytest.fixture
def stub():
    with StubOpenAI(completion_tokens=11) as server:
        yield server


def run(url: str, **overrides) -> tuple[list[dict], LoadTestSummary, list[str]]:
    """Run against `url` with test-sized defaults; return the parsed records too."""
    settings = {
        "model": "test-model",
        "steps": (2, 3),
        "timeout_s": 2.0,
        "sleep": lambda seconds: None,
        "retry_backoff_s": 0.01,
        **overrides,
    }
    out = io.StringIO()
    lines: list[str] = []
    summary = run_loadtest(LoadTestConfig(url=url, **settings), out, progress=lines.append)
    text = out.getvalue()
    assert text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()], summary, lines


def parse_time(text: str) -> datetime:
    assert ISO_US_Z.match(text), text
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)


def by_step(records: list[dict], step: int) -> list[dict]:
    return sorted(
        (r for r in records if r["step"] == step), key=lambda r: (r["index"], r["attempt"])
    )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_every_record_has_the_documented_fields_and_values(stub):
    before = datetime.now(timezone.utc)
    records, summary, _ = run(stub.url, run_id="abc123")
    after = datetime.now(timezone.utc)

    assert [list(record) for record in records] == [EXPECTED_KEYS] * 6
    warmup = records[0]
    assert (warmup["step"], warmup["concurrency"], warmup["index"], warmup["warmup"]) == (
        0,
        1,
        1,
        True,
    )
    assert warmup["request_id"] == "lf-abc123-s0-1"
    assert warmup["rest_before_s"] is None
    assert {(r["step"], r["concurrency"], r["index"]) for r in records[1:]} == {
        (1, 2, 1), (1, 2, 2), (2, 3, 1), (2, 3, 2), (2, 3, 3),
    }  # fmt: skip
    assert not any(r["warmup"] for r in records[1:])

    response_ids = {request.request_id: request.response_id for request in stub.received()}
    for record in records:
        assert record["marker"] == f"[lf-abc123-s{record['step']}-{record['index']}]"
        assert record["request_id"] == record["marker"][1:-1]
        assert record["attempt"] == 1
        assert record["ok"] is True
        assert record["http_status"] == 200
        assert record["error_class"] is None and record["error"] is None
        assert record["output_tokens"] == 11
        assert record["ttft_s"] is None  # not streaming
        assert record["response_id"] == response_ids[record["request_id"]]
        assert record["response_id"].startswith("chatcmpl-")
        assert record["timeout_s"] == 2.0 and isinstance(record["timeout_s"], float)
        started, ended = parse_time(record["started_at"]), parse_time(record["ended_at"])
        assert before <= started <= ended <= after
        assert isinstance(record["latency_s"], float)
        assert abs(record["latency_s"] - (ended - started).total_seconds()) < 0.05

    assert all(r["rest_before_s"] is None for r in by_step(records, 1))
    assert all(isinstance(r["rest_before_s"], float) for r in by_step(records, 2))
    assert max(parse_time(r["ended_at"]) for r in by_step(records, 1)) <= min(
        parse_time(r["started_at"]) for r in by_step(records, 2)
    )
    assert summary == LoadTestSummary(
        run_id="abc123", records=6, requests=6, failed=0, steps_completed=2, interrupted=False
    )


def test_the_stub_received_exactly_the_recorded_ids_and_markers(stub):
    records, _, _ = run(stub.url + "/v1/", steps=(3,), prompts=("alpha text", "beta text"))

    received = stub.received()
    assert sorted(request.request_id for request in received) == sorted(
        r["request_id"] for r in records
    )
    record_by_id = {record["request_id"]: record for record in records}
    for request in received:
        record = record_by_id[request.request_id]
        assert request.method == "POST"
        assert request.path == "/v1/chat/completions"
        assert request.header("Authorization") is None
        assert request.header("Content-Type") == "application/json"
        # the marker first: no two prompts share a prefix for a cache to reuse
        assert request.prompt.startswith(record["marker"] + " ")
        assert request.body == {
            "model": "test-model",
            "messages": [{"role": "user", "content": request.prompt}],
            "max_tokens": 300,
            "temperature": 0.0,
            "stream": False,
        }
    prompts = {r["index"]: record_by_id[r["request_id"]] for r in by_step(records, 1)}
    prompt_of = {request.request_id: request.prompt for request in received}
    assert [prompt_of[prompts[i]["request_id"]].split("] ", 1)[1] for i in (1, 2, 3)] == [
        "alpha text",
        "beta text",
        "alpha text",
    ]


def test_a_step_fires_its_requests_concurrently(stub):
    stub.delay(0.3, markers=["-s1-"])
    records, _, _ = run(stub.url, steps=(4,))

    step = by_step(records, 1)
    assert len(step) == 4
    assert max(parse_time(r["started_at"]) for r in step) < min(
        parse_time(r["ended_at"]) for r in step
    )
    assert all(0.3 <= r["latency_s"] < 1.0 for r in step)


def test_auto_rest_outlasts_the_timeout_and_comes_only_between_steps(stub):
    out = io.StringIO()
    rests: list[tuple[float, int]] = []

    def sleep(seconds: float) -> None:
        rests.append((seconds, out.getvalue().count("\n")))

    lines: list[str] = []
    config = LoadTestConfig(url=stub.url, model="m", steps=(1, 1, 1), timeout_s=0.5, sleep=sleep)
    summary = run_loadtest(config, out, progress=lines.append)

    assert config.rest_between_steps_s == auto_rest_s(0.5)
    assert all(seconds > 0.5 for seconds, _ in rests)
    # one rest after step 1 (warm-up + 1 record written), one after step 2; none after the warm-up
    assert rests == [(auto_rest_s(0.5), 2), (auto_rest_s(0.5), 3)]
    assert auto_rest_s(120) > 120
    assert summary.warnings == []
    assert not any("warning" in line for line in lines)
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [r["rest_before_s"] is None for r in records] == [True, True, False, False]


def test_a_numeric_rest_shorter_than_the_timeout_warns_and_is_recorded(stub):
    taken: list[float] = []

    def sleep(seconds: float) -> None:
        taken.append(seconds)
        time.sleep(seconds)

    records, summary, lines = run(stub.url, steps=(1, 2), rest_s=0.15, timeout_s=1.0, sleep=sleep)

    assert taken == [0.15]
    assert len(summary.warnings) == 1
    assert lines[0] == summary.warnings[0]
    assert lines[0].startswith("warning: rest 0.15 s is shorter than timeout 1 s")
    step_two = by_step(records, 2)
    assert len(step_two) == 2
    assert all(0.15 <= r["rest_before_s"] < 0.4 for r in step_two)
    assert all(r["timeout_s"] == 1.0 for r in records)
    step_lines = [STEP_LINE.match(line) for line in lines if line.startswith("step ")]
    assert [m.groups() for m in step_lines] == [
        ("1", "2", "1", "1", "0"),
        ("2", "2", "2", "2", "0"),
    ]

    _, quiet, _ = run(stub.url, steps=(1, 1), rest_s=1.0, timeout_s=0.5)
    assert quiet.warnings == []


def test_a_request_slower_than_the_timeout_times_out(stub):
    stub.delay(1.5, markers=["-s1-"])
    records, summary, lines = run(stub.url, steps=(2,), timeout_s=0.4)

    assert records[0]["ok"] is True  # the warm-up was not delayed
    step = by_step(records, 1)
    assert len(step) == 2
    for record in step:
        assert record["ok"] is False
        assert record["error_class"] == "TimeoutError"
        assert record["http_status"] is None
        assert record["output_tokens"] is None and record["response_id"] is None
        assert "0.4" in record["error"]
        assert 0.4 <= record["latency_s"] < 1.4  # cut at the timeout, before the 1.5 s delay
    assert summary.failed == 2
    assert STEP_LINE.match(lines[-1]).groups() == ("1", "1", "2", "2", "2")


def test_the_timeout_bounds_the_whole_request_not_each_read():
    trickle = StubOpenAI(chunks=["word "] * 20, chunk_interval_s=0.1)
    with trickle:
        records, _, _ = run(trickle.url, steps=(1,), stream=True, timeout_s=0.5)
        received = {request.request_id: request.response_id for request in trickle.received()}

    for record in records:
        assert record["error_class"] == "TimeoutError"
        assert record["http_status"] == 200  # the headers had arrived
        assert record["ttft_s"] is not None and record["ttft_s"] < 0.5
        assert record["response_id"] == received[record["request_id"]]
        assert 0.5 <= record["latency_s"] < 1.5  # cut at the timeout, not after the 2 s stream


def test_a_refused_connection_is_recorded():
    records, summary, lines = run(f"http://127.0.0.1:{free_port()}", steps=(1,))

    assert len(records) == 2  # no retries unless asked
    for record in records:
        assert record["ok"] is False
        assert record["error_class"] == "ConnectionRefusedError"
        assert record["http_status"] is None
        assert record["latency_s"] < 1.0
        assert record["error"] and len(record["error"]) <= 200
    assert lines[0].startswith("warm-up: failed (ConnectionRefusedError)")
    assert summary.failed == 2


def test_a_dropped_connection_is_retried_and_stops_at_the_first_success(stub):
    stub.drop(markers=["-s1-1]"], times=1)
    records, summary, _ = run(stub.url, steps=(1,), retries=3)

    first, second = by_step(records, 1)
    assert (first["attempt"], first["ok"], first["error_class"], first["http_status"]) == (
        1, False, "RemoteDisconnected", None,
    )  # fmt: skip
    assert (second["attempt"], second["ok"], second["http_status"]) == (2, True, 200)
    assert second["request_id"] == first["request_id"] + "-a2"
    assert summary.failed == 0


def test_503_with_two_retries_gives_three_attempt_records(stub):
    stub.fail(503, markers=["-s1-2]"])
    records, summary, _ = run(stub.url, steps=(2,), retries=2, retry_backoff_s=0.05)

    failing = [r for r in records if r["index"] == 2]
    base = failing[0]["request_id"]
    assert [r["attempt"] for r in failing] == [1, 2, 3]
    assert [r["request_id"] for r in failing] == [base, f"{base}-a2", f"{base}-a3"]
    assert {r["marker"] for r in failing} == {f"[{base}]"}
    for record in failing:
        assert (record["ok"], record["http_status"], record["error_class"]) == (
            False,
            503,
            "HTTPError",
        )
        assert record["error"].startswith("HTTP 503")
    gaps = [
        (parse_time(later["started_at"]) - parse_time(earlier["ended_at"])).total_seconds()
        for earlier, later in itertools.pairwise(failing)
    ]
    assert gaps[0] >= 0.05 and gaps[1] >= 0.1  # exponential back-off
    assert [r.request_id for r in stub.received() if base in r.request_id] == [
        base, f"{base}-a2", f"{base}-a3",
    ]  # fmt: skip
    assert len(records) == 5 and summary.requests == 3 and summary.failed == 1


def test_no_retry_by_default_nor_on_a_client_error(stub):
    stub.fail(503, markers=["-s1-1]"])
    stub.fail(400, markers=["-s1-2]"])
    records, _, _ = run(stub.url, steps=(2,))
    assert [(r["index"], r["http_status"]) for r in by_step(records, 1)] == [(1, 503), (2, 400)]

    records, _, _ = run(stub.url, steps=(2,), retries=3)
    statuses = [(r["index"], r["attempt"], r["http_status"]) for r in by_step(records, 1)]
    assert statuses == [(1, 1, 503), (1, 2, 503), (1, 3, 503), (1, 4, 503), (2, 1, 400)]


def test_streaming_records_ttft_and_usage():
    streaming = StubOpenAI(completion_tokens=13, content_delay_s=0.25, chunk_interval_s=0.05)
    with streaming:
        records, _, _ = run(streaming.url, steps=(2,), stream=True)
        received = {request.request_id: request for request in streaming.received()}

    for record in records:
        assert record["ok"] is True
        assert record["output_tokens"] == 13
        # the role chunk comes at once: ttft counts to the first *content*
        assert 0.25 <= record["ttft_s"] < 1.25  # generous: two cores, tests in parallel
        assert record["latency_s"] >= record["ttft_s"] + 0.1  # two more chunks, 0.05 s apart
        request = received[record["request_id"]]
        assert record["response_id"] == request.response_id
        assert request.body["stream"] is True
        assert request.body["stream_options"] == {"include_usage": True}


LOG_LINE = re.compile(
    r"^(?P<stamp>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z) "
    r"(?:\(APIServer pid=1\) INFO (?P<md>\d\d-\d\d \d\d:\d\d:\d\d) \[[\w.]+:\d+\] )?(?P<msg>.*)$"
)


def read_log(path: Path) -> list[tuple[datetime, str]]:
    """(time, message) per line; every line must carry docker's stamp, vLLM's lines theirs too."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        match = LOG_LINE.match(line)
        assert match, line
        at = datetime.strptime(match["stamp"][:26], "%Y-%m-%dT%H:%M:%S.%f").replace(
            tzinfo=timezone.utc
        )
        if match["md"]:
            assert match["md"] == at.strftime("%m-%d %H:%M:%S")
        out.append((at, match["msg"]))
    return out


def logged(lines: list[tuple[datetime, str]], needle: str) -> list[datetime]:
    return [at for at, msg in lines if needle in msg]


def test_the_stub_writes_a_vllm_container_log(tmp_path):
    log = tmp_path / "gpu-0.log"
    prompt = 'it\'s a "quoted"\nprompt'
    with StubOpenAI(log_path=log, stats_interval_s=0.1) as server:
        server.delay(0.3, markers=["-s1-1]"])
        server.fail(503, markers=["-s1-2]"])
        records, _, _ = run(server.url, steps=(3,), prompts=(prompt,))
        received = {request.request_id: request for request in server.received()}
        health = http.client.HTTPConnection("127.0.0.1", server.port, timeout=2)
        health.request("GET", "/health")
        assert health.getresponse().status == 200
        health.close()
        assert server.log.path == log
    lines = read_log(log)
    text = log.read_text(encoding="utf-8")
    record = {r["index"]: r for r in by_step(records, 1)}

    assert lines[0][1] == "vLLM API server version 0.10.1.1"
    assert lines[-1][1] == "INFO:     Finished server process [1]"
    served = [r for r in records if r["ok"]]
    for r in served:
        request = received[r["request_id"]]
        assert r["response_id"] == request.response_id == f"chatcmpl-{r['request_id']}"
        expected = repr(
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n"
            f"{request.prompt}<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
        )
        assert f"Received request {request.response_id}: prompt: {expected}, params: " in text
    assert '] it\\\'s a "quoted"\\nprompt<|eot_id|>' in text  # repr-escaped, on one line
    # a plain answer's access line goes out with its headers, at the end
    (arrived,) = logged(lines, f"Received request chatcmpl-{record[1]['request_id']}:")
    peer_lines = [(at, msg) for at, msg in lines if msg.startswith("INFO:     127.0.0.1:")]
    assert all(
        msg.endswith(' - "POST /v1/chat/completions HTTP/1.1" 200 OK')
        or msg.endswith(' - "POST /v1/chat/completions HTTP/1.1" 503 Service Unavailable')
        for _, msg in peer_lines[:-1]
    )
    assert len(peer_lines) == len(records) + 1
    assert peer_lines[-1][1].endswith(' - "GET /health HTTP/1.1" 200 OK')
    assert text.count("Received request") == len(served)
    assert max(at for at, _ in peer_lines) - arrived >= timedelta(seconds=0.3)
    # a request vLLM refuses is never logged as received
    assert f"chatcmpl-{record[2]['request_id']}" not in text
    assert record[2]["http_status"] == 503
    stats = [msg for _, msg in lines if msg.startswith("Engine 000: ")]
    assert stats and all(
        re.fullmatch(
            r"Engine 000: Avg prompt throughput: \d+\.\d tokens/s, Avg generation throughput: "
            r"\d+\.\d tokens/s, Running: \d+ reqs, Waiting: 0 reqs, GPU KV cache usage: \d+\.\d%, "
            r"Prefix cache hit rate: 0\.0%",
            msg,
        )
        for msg in stats
    )
    assert "Running: 1 reqs" in text  # the delayed request, alone in flight


def test_the_stub_logs_a_streamed_answer_at_its_start_and_an_abort_when_the_client_leaves(
    tmp_path,
):
    log = tmp_path / "gpu-0.log"
    trickle = StubOpenAI(chunks=["word "] * 10, chunk_interval_s=0.1, log_path=log)
    with trickle:
        trickle.delay(0.2, markers=["-s1-"])
        records, _, _ = run(trickle.url, steps=(1,), stream=True, timeout_s=0.6)
        deadline = time.monotonic() + 2
        while len([r for r in trickle.received() if r.aborted]) < 2:
            assert time.monotonic() < deadline, "the stub never saw the client leave"
            time.sleep(0.02)
    lines = read_log(log)

    for record in records:
        rid = f"chatcmpl-{record['request_id']}"
        assert record["error_class"] == "TimeoutError"
        (arrived,) = logged(lines, f"Received request {rid}:")
        (aborted,) = logged(lines, f"Aborted request {rid}.")
        ended = parse_time(record["ended_at"])
        # the stub notices the closed socket within its poll; the client stamps its end just after
        assert ended - timedelta(seconds=0.1) <= aborted < ended + timedelta(seconds=0.5)
        assert arrived < aborted
    # the headers of a stream go out at its start: before the content, long before the end
    access = logged(lines, '"POST /v1/chat/completions HTTP/1.1" 200 OK')
    assert len(access) == 2
    step_one = next(r for r in records if r["step"] == 1)
    (arrived,) = logged(lines, f"Received request chatcmpl-{step_one['request_id']}:")
    assert arrived + timedelta(seconds=0.2) <= access[1] < arrived + timedelta(seconds=0.45)


def test_the_front_proxy_rejects_beyond_capacity_and_those_requests_reach_no_instance():
    with StubOpenAI() as first, StubOpenAI() as second:
        first.delay(0.3, markers=["-s1-"])
        second.delay(0.3, markers=["-s1-"])
        with StubProxy([first.url, second.url], max_in_flight=2, reject_delay_s=0.05) as proxy:
            records, summary, _ = run(proxy.url, steps=(4,))
            rejected_ids = {request.request_id for request in proxy.rejected}
        reached = [request.request_id for request in first.received() + second.received()]

    step = by_step(records, 1)
    failed = {r["request_id"] for r in step if not r["ok"]}
    assert {(r["ok"], r["http_status"]) for r in step} == {(True, 200), (False, 503)}
    assert len(failed) == 2 and failed == rejected_ids
    assert not failed & set(reached)
    assert sorted(reached) == sorted(r["request_id"] for r in records if r["ok"])
    assert any("-s1-" in rid for rid in (r.request_id for r in first.received()))
    assert any("-s1-" in rid for rid in (r.request_id for r in second.received()))
    assert summary.failed == 2


def test_setting_stop_ends_the_run_after_the_current_step(stub):
    config = LoadTestConfig(url=stub.url, model="m", steps=(1, 2, 3), sleep=lambda s: None)
    out = io.StringIO()

    def progress(line: str) -> None:
        if line.startswith("step 1/"):
            config.stop.set()

    summary = run_loadtest(config, out, progress=progress)
    assert [json.loads(line)["step"] for line in out.getvalue().splitlines()] == [0, 1]
    assert (summary.interrupted, summary.steps_completed, summary.records) == (True, 0, 2)


CLI_BASE = ["--model", "test-model", "--timeout", "2"]


def test_cli_sends_the_key_from_the_environment_and_never_writes_it(stub, tmp_path):
    secret = "sk-test-7f3c9e1d55aa"
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("first prompt\n\nsecond prompt\n", encoding="utf-8")
    output = tmp_path / "run.jsonl"
    args = [*CLI_BASE, "--url", stub.url, "--steps", "1,2", "--rest", "0"]
    args += ["--prompts", str(prompts), "--api-key-env", "LF_TEST_KEY", "-o", str(output)]

    result = CliRunner().invoke(loadtest_command, args, env={"LF_TEST_KEY": secret})

    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in output.read_text().splitlines()]
    assert len(records) == 4
    assert all(request.header("Authorization") == f"Bearer {secret}" for request in stub.received())
    assert secret not in output.read_text()
    assert secret not in (tmp_path / "run.config.json").read_text()
    assert secret not in result.output
    assert "warning: rest 0 s is shorter than timeout 2 s" in result.stderr
    assert "step 1/2: 1 sent, 1 done, 0 failed" in result.stderr
    assert "step 2/2: 2 sent, 2 done, 0 failed" in result.stderr
    prompt_of = {request.request_id: request.prompt for request in stub.received()}
    second_of_step_two = next(r for r in records if (r["step"], r["index"]) == (2, 2))
    assert (
        prompt_of[second_of_step_two["request_id"]]
        == f"{second_of_step_two['marker']} second prompt"
    )

    unset = CliRunner().invoke(
        loadtest_command,
        [*CLI_BASE, "--url", stub.url, "--steps", "1", "-o", str(tmp_path / "nokey.jsonl")],
        env={"OPENAI_API_KEY": None},
    )
    assert unset.exit_code == 0, unset.output
    assert [request.header("Authorization") for request in stub.received()[4:]] == [None, None]


def test_cli_asks_for_a_fixed_output_length_and_writes_its_configuration_beside(stub, tmp_path):
    output = tmp_path / "run.jsonl"
    args = [*CLI_BASE, "--url", stub.url, "--steps", "2,3", "--rest", "0", "--max-tokens", "64"]
    result = CliRunner().invoke(loadtest_command, [*args, "--ignore-eos", "-o", str(output)])
    assert result.exit_code == 0, result.output
    assert all(request.body["ignore_eos"] is True for request in stub.received())
    assert all(request.body["max_tokens"] == 64 for request in stub.received())
    (line,) = (tmp_path / "run.config.json").read_text().splitlines()  # one line: sniffable
    config = json.loads(line)
    run_id = json.loads(output.read_text().splitlines()[0])["request_id"].split("-")[1]
    assert config == {
        "logforensics_loadtest": config["logforensics_loadtest"],
        "run_id": run_id,
        "records": "run.jsonl",
        "started_at": config["started_at"],
        "url": stub.url,
        "model": "test-model",
        "steps": [2, 3],
        "rest_s": 0.0,
        "timeout_s": 2.0,
        "max_tokens": 64,
        "temperature": 0.0,
        "ignore_eos": True,
        "stream": False,
        "retries": 0,
        "prompts": 1,
        "prompts_sha256": hashlib.sha256(DEFAULT_PROMPT.encode()).hexdigest(),
        "marker": "prompt start",
    }
    # without the flag the field is not sent at all: a server that knows no ignore_eos
    CliRunner().invoke(loadtest_command, [*args, "-o", str(tmp_path / "plain.jsonl")])
    assert all("ignore_eos" not in request.body for request in stub.received()[6:])
    assert json.loads((tmp_path / "plain.config.json").read_text())["ignore_eos"] is False


@pytest.mark.parametrize(
    ("extra", "complaint"),
    [
        (["--steps", "5,x"], "--steps"),
        (["--steps", "3,0"], "--steps"),
        (["--rest", "soon"], "--rest"),
        (["--prompt", "a", "--prompts", "PROMPTS"], "not both"),
        (["--api-key", "sk-nope"], "No such option"),
    ],
)
def test_cli_rejects_bad_options_before_sending_anything(tmp_path, extra, complaint):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("p\n", encoding="utf-8")
    output = tmp_path / "run.jsonl"
    extra = [str(prompts) if arg == "PROMPTS" else arg for arg in extra]
    args = [*CLI_BASE, "--url", f"http://127.0.0.1:{free_port()}", "-o", str(output), *extra]

    result = CliRunner().invoke(loadtest_command, args)

    assert result.exit_code == 2
    assert complaint in result.output
    assert not output.exists()


def test_sigint_keeps_every_record_and_exits_130(stub, tmp_path):
    stub.delay(30, markers=["-s2-"])
    output = tmp_path / "run.jsonl"
    env = {key: value for key, value in os.environ.items() if key != "OPENAI_API_KEY"}
    command = [sys.executable, "-m", "logforensics.loadtest", *CLI_BASE, "--timeout", "60"]
    command += ["--url", stub.url, "--steps", "2,3", "--rest", "0", "-o", str(output)]
    process = subprocess.Popen(
        command,
        cwd=PROJECT_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 15
        while sum("-s2-" in (r.request_id or "") for r in stub.received()) < 3:
            assert process.poll() is None and time.monotonic() < deadline, "step 2 never started"
            time.sleep(0.02)
        assert len(output.read_text().splitlines()) == 3  # warm-up and step 1
        interrupted_at = time.monotonic()
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()

    assert process.returncode == 130, stderr
    assert time.monotonic() - interrupted_at < 5  # not the 30 s the stub holds step 2
    text = output.read_text()
    assert text.endswith("\n")
    records = [json.loads(line) for line in text.splitlines()]
    assert [r["step"] for r in records] == [0, 1, 1, 2, 2, 2]
    assert all(r["ok"] for r in records[:3])
    for record in records[3:]:
        assert (record["ok"], record["error_class"], record["http_status"]) == (
            False,
            "Interrupted",
            None,
        )
    assert "interrupted" in stderr
