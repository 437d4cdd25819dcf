"""`logforensics loadtest`: a step load test whose every request can be found again.

Each request carries an id (``X-Request-Id``) and a marker at the start of its
prompt (no two prompts share a prefix, so prefix caching cannot make later steps
cheaper), and is written as one JSON line the moment it ends, so the post-mortem
can match the client's view to what the instances logged, even when the run is
cut short. The run's configuration is written beside the records
(``run.config.json`` for ``-o run.jsonl``): two runs with the same one compare.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import os
import secrets
import signal
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import IO
from urllib.parse import urlsplit

import click

from logforensics import __version__

DEFAULT_STEPS = (5, 9, 13, 20)
DEFAULT_PROMPT = "Write a short story about a lighthouse keeper who finds a message in a bottle."
RETRY_STATUSES = frozenset({429, 502, 503, 504})
ERROR_TEXT_LIMIT = 200
INTERRUPTED = "Interrupted"  # error_class of requests abandoned on Ctrl-C
EXIT_INTERRUPTED = 130  # what shells report for a job ended by SIGINT
CONFIG_KEY = "logforensics_loadtest"  # the configuration file's mark: its writer's version

RECORD_KEYS = (
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
)


def auto_rest_s(timeout_s: float) -> float:
    """A rest longer than the timeout, so one step's stragglers cannot overlap the next."""
    return round(timeout_s * 1.1 + 5.0, 6)


def iso_utc(moment: datetime) -> str:
    """Always microseconds and a ``Z``: the form the client parsers read without guessing."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class LoadTestConfig:
    """Everything a run needs; `sleep` and `stop` are injectable so tests never wait for real."""

    url: str
    model: str
    steps: Sequence[int] = DEFAULT_STEPS
    rest_s: float | None = None  # None: auto_rest_s(timeout_s)
    max_tokens: int = 300
    temperature: float = 0.0
    timeout_s: float = 120.0
    prompts: Sequence[str] = (DEFAULT_PROMPT,)
    api_key: str | None = field(default=None, repr=False)
    stream: bool = False
    ignore_eos: bool = False  # vLLM's extension: every answer runs to max_tokens
    retries: int = 0
    retry_backoff_s: float = 1.0  # doubled after every failed attempt
    run_id: str = field(default_factory=lambda: secrets.token_hex(4))
    # None: wait on `stop`, so that Ctrl-C cuts a rest short
    sleep: Callable[[float], object] | None = None
    stop: threading.Event = field(default_factory=threading.Event)
    interrupt_grace_s: float = 1.0  # how long in-flight requests may finish after `stop`

    def __post_init__(self) -> None:
        self.steps = tuple(int(step) for step in self.steps)
        self.prompts = tuple(self.prompts)
        if not self.steps or any(step < 1 for step in self.steps):
            raise ValueError(f"steps must be concurrencies of at least 1, got {self.steps}")
        if self.timeout_s <= 0:
            raise ValueError(f"timeout must be positive, got {self.timeout_s}")
        if self.rest_s is not None and self.rest_s < 0:
            raise ValueError(f"rest must not be negative, got {self.rest_s}")
        if self.retries < 0:
            raise ValueError(f"retries must not be negative, got {self.retries}")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {self.max_tokens}")
        if not self.prompts:
            raise ValueError("at least one prompt is needed")
        _Endpoint.parse(self.url)

    @property
    def rest_between_steps_s(self) -> float:
        return auto_rest_s(self.timeout_s) if self.rest_s is None else float(self.rest_s)

    def record(self, records: str, started_at: datetime) -> dict:
        """The configuration as written beside the records: what makes two runs comparable
        (the prompts by count and digest, never their text; no API key)."""
        digest = hashlib.sha256("\n".join(self.prompts).encode("utf-8")).hexdigest()
        return {
            CONFIG_KEY: __version__,
            "run_id": self.run_id,
            "records": records,
            "started_at": iso_utc(started_at),
            "url": self.url,
            "model": self.model,
            "steps": list(self.steps),
            "rest_s": self.rest_between_steps_s,
            "timeout_s": self.timeout_s,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "ignore_eos": self.ignore_eos,
            "stream": self.stream,
            "retries": self.retries,
            "prompts": len(self.prompts),
            "prompts_sha256": digest,
            "marker": "prompt start",
        }


def config_path(output: Path) -> Path:
    """Where the run's configuration goes: `run.config.json` beside `run.jsonl`."""
    return output.with_name(f"{output.stem}.config.json")


@dataclass
class LoadTestSummary:
    """What the caller needs to report and to choose an exit status."""

    run_id: str
    records: int  # JSON lines written, one per attempt
    requests: int  # requests sent (a request's retries count once), warm-up included
    failed: int  # requests whose last attempt failed
    steps_completed: int
    interrupted: bool
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Endpoint:
    https: bool
    host: str
    port: int
    path: str

    @classmethod
    def parse(cls, url: str) -> _Endpoint:
        """Accept a base URL with or without the OpenAI-style ``/v1`` suffix."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"url must look like http://host[:port][/prefix], got {url!r}")
        prefix = parts.path.rstrip("/")
        if prefix.endswith("/v1"):
            prefix = prefix[: -len("/v1")]
        https = parts.scheme == "https"
        port = parts.port or (443 if https else 80)
        return cls(https, parts.hostname, port, f"{prefix}/v1/chat/completions")

    def connection(self, timeout_s: float) -> http.client.HTTPConnection:
        if self.https:
            return http.client.HTTPSConnection(
                self.host, self.port, timeout=timeout_s, context=ssl.create_default_context()
            )
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout_s)


@dataclass(frozen=True)
class _Request:
    """One prompt sent at one step; its retries share its marker."""

    run_id: str
    step: int
    concurrency: int
    index: int
    prompt: str
    rest_before_s: float | None

    @property
    def base_id(self) -> str:
        return f"lf-{self.run_id}-s{self.step}-{self.index}"

    @property
    def marker(self) -> str:
        return f"[{self.base_id}]"

    @property
    def warmup(self) -> bool:
        return self.step == 0


class _Attempt:
    """One HTTP exchange; holds its socket so an interrupt can cut it off."""

    def __init__(self, request: _Request, number: int):
        self.request = request
        self.number = number
        self.request_id = request.base_id if number == 1 else f"{request.base_id}-a{number}"
        self.started_at: datetime | None = None
        self.started_mono = 0.0
        self.http_status: int | None = None
        self.ttft_s: float | None = None  # kept on the attempt so a failure mid-stream still has it
        self.response_id: str | None = None
        self.sock: socket.socket | None = None
        self.settled = False

    def abort(self) -> None:
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.shutdown(socket.SHUT_RDWR)


@dataclass
class _Outcome:
    ok: bool
    http_status: int | None = None
    error_class: str | None = None
    error: str | None = None
    output_tokens: int | None = None
    response_id: str | None = None
    ttft_s: float | None = None
    retryable: bool = False


class _Deadline:
    """A total time limit over the whole exchange, not per socket read."""

    def __init__(self, started_mono: float, timeout_s: float):
        self.at = started_mono + timeout_s
        self.timeout_s = timeout_s

    def arm(self, attempt: _Attempt) -> None:
        if attempt.settled:
            raise ConnectionAbortedError("abandoned")
        remaining = self.at - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"timed out after {self.timeout_s:g} s")
        if attempt.sock is not None:
            attempt.sock.settimeout(remaining)


def _short(text: str) -> str:
    return " ".join(text.split())[:ERROR_TEXT_LIMIT]


def _failure(exc: BaseException, attempt: _Attempt, timeout_s: float) -> _Outcome:
    if isinstance(exc, TimeoutError):
        message = f"timed out after {timeout_s:g} s"
    else:
        message = str(exc) or type(exc).__name__
    return _Outcome(
        ok=False,
        http_status=attempt.http_status,
        error_class=type(exc).__name__,
        error=_short(message),
        response_id=attempt.response_id,
        ttft_s=attempt.ttft_s,
        retryable=isinstance(exc, (TimeoutError, ConnectionError)),
    )


def _read_body(response: http.client.HTTPResponse, attempt: _Attempt, deadline: _Deadline) -> bytes:
    parts = []
    while True:
        deadline.arm(attempt)
        chunk = response.read1(65536)
        if not chunk:
            return b"".join(parts)
        parts.append(chunk)


class _Runner:
    def __init__(
        self, config: LoadTestConfig, out: IO[str], progress: Callable[[str], None] | None
    ):
        self.config = config
        self.out = out
        self.say = progress or (lambda line: print(line, file=sys.stderr, flush=True))
        self.endpoint = _Endpoint.parse(config.url)
        self.lock = threading.Lock()
        self.in_flight: set[_Attempt] = set()
        self.closed = False
        self.records = 0
        self.sent: set[str] = set()  # markers whose first attempt began
        self.final_ok: dict[str, bool] = {}  # marker -> ok of its latest attempt
        self.final_error: dict[str, str | None] = {}

    def run(self) -> LoadTestSummary:
        config = self.config
        warnings = []
        rest = config.rest_between_steps_s
        if config.rest_s is not None and rest < config.timeout_s and len(config.steps) > 1:
            warning = (
                f"warning: rest {rest:g} s is shorter than timeout {config.timeout_s:g} s: "
                "a step's timed-out requests may still be running when the next step starts"
            )
            warnings.append(warning)
            self.say(warning)
        steps_completed = 0
        try:
            if not config.stop.is_set():
                started = time.monotonic()
                warmup = self._run_step(step=0, concurrency=1, rest_before_s=None)
                self._report_warmup(warmup, time.monotonic() - started)
            previous_end = time.monotonic()
            for number, concurrency in enumerate(config.steps, start=1):
                rest_before = None
                if number > 1:
                    (config.sleep or config.stop.wait)(rest)
                    rest_before = round(time.monotonic() - previous_end, 6)
                if config.stop.is_set():
                    break
                started = time.monotonic()
                requests = self._run_step(number, concurrency, rest_before)
                previous_end = time.monotonic()
                self._report_step(number, requests, previous_end - started)
                if config.stop.is_set():
                    break
                steps_completed += 1
        finally:
            with self.lock:
                self.closed = True
        return LoadTestSummary(
            run_id=config.run_id,
            records=self.records,
            requests=len(self.sent),
            failed=sum(not ok for ok in self.final_ok.values()),
            steps_completed=steps_completed,
            interrupted=config.stop.is_set(),
            warnings=warnings,
        )

    def _report_warmup(self, requests: list[_Request], elapsed_s: float) -> None:
        marker = requests[0].marker
        with self.lock:
            ok = self.final_ok.get(marker)
            error_class = self.final_error.get(marker)
        if ok is None:
            return
        outcome = "ok" if ok else f"failed ({error_class})"
        self.say(f"warm-up: {outcome}, {elapsed_s:.1f} s")

    def _report_step(self, number: int, requests: list[_Request], elapsed_s: float) -> None:
        markers = [request.marker for request in requests]
        with self.lock:
            sent = sum(marker in self.sent for marker in markers)
            done = sum(marker in self.final_ok for marker in markers)
            failed = sum(not self.final_ok.get(marker, True) for marker in markers)
        suffix = " (interrupted)" if self.config.stop.is_set() else ""
        self.say(
            f"step {number}/{len(self.config.steps)}: {sent} sent, {done} done, "
            f"{failed} failed, {elapsed_s:.1f} s{suffix}"
        )

    def _run_step(self, step: int, concurrency: int, rest_before_s: float | None) -> list[_Request]:
        """Fire `concurrency` requests at once, one daemon thread each, and wait for them all.

        Daemon threads rather than a ThreadPoolExecutor: the executor's workers are
        joined at exit, so one request stuck in connect() would hold Ctrl-C hostage.
        """
        prompts = self.config.prompts
        requests = [
            _Request(
                run_id=self.config.run_id,
                step=step,
                concurrency=concurrency,
                index=index,
                # the same index gets the same prompt at every step, so steps compare
                prompt=prompts[(index - 1) % len(prompts)],
                rest_before_s=rest_before_s,
            )
            for index in range(1, concurrency + 1)
        ]
        threads = []
        for request in requests:
            if self.config.stop.is_set():
                break
            thread = threading.Thread(
                target=self._run_request, args=(request,), name=request.base_id, daemon=True
            )
            thread.start()
            threads.append(thread)
        self._wait_for(threads)
        return requests

    def _wait_for(self, threads: list[threading.Thread]) -> None:
        while True:
            alive = [thread for thread in threads if thread.is_alive()]
            if not alive:
                return
            if self.config.stop.is_set():
                grace_end = time.monotonic() + self.config.interrupt_grace_s
                for thread in alive:
                    thread.join(max(0.0, grace_end - time.monotonic()))
                self._abandon_in_flight()
                return
            alive[0].join(0.05)

    def _abandon_in_flight(self) -> None:
        with self.lock:
            attempts = list(self.in_flight)
        for attempt in attempts:
            outcome = _Outcome(
                ok=False,
                http_status=attempt.http_status,
                error_class=INTERRUPTED,
                error="abandoned: the run was interrupted while this request was in flight",
                response_id=attempt.response_id,
                ttft_s=attempt.ttft_s,
            )
            self._settle(attempt, outcome, datetime.now(timezone.utc), time.monotonic())
            attempt.abort()

    def _run_request(self, request: _Request) -> None:
        for number in range(1, self.config.retries + 2):
            outcome = self._perform(_Attempt(request, number))
            if outcome is None or outcome.ok or not outcome.retryable:
                return
            if number > self.config.retries:
                return
            if self.config.stop.wait(self.config.retry_backoff_s * 2 ** (number - 1)):
                return

    def _perform(self, attempt: _Attempt) -> _Outcome | None:
        if not self._begin(attempt):
            return None
        try:
            outcome = self._exchange(attempt)
        except Exception as exc:  # every failure is data for the record, never a crash
            outcome = _failure(exc, attempt, self.config.timeout_s)
        self._settle(attempt, outcome, datetime.now(timezone.utc), time.monotonic())
        return outcome

    def _begin(self, attempt: _Attempt) -> bool:
        """Register the attempt before it touches the network, so an interrupt can see it."""
        with self.lock:
            if self.closed or self.config.stop.is_set():
                return False
            self.in_flight.add(attempt)
            self.sent.add(attempt.request.marker)
            attempt.started_at = datetime.now(timezone.utc)
            attempt.started_mono = time.monotonic()
            return True

    def _settle(
        self, attempt: _Attempt, outcome: _Outcome, ended_at: datetime, ended_mono: float
    ) -> None:
        """Write the attempt's one record, whoever gets here first (worker or interrupt)."""
        request = attempt.request
        record = {
            "request_id": attempt.request_id,
            "marker": request.marker,
            "step": request.step,
            "concurrency": request.concurrency,
            "index": request.index,
            "warmup": request.warmup,
            "attempt": attempt.number,
            "started_at": iso_utc(attempt.started_at),
            "ended_at": iso_utc(ended_at),
            "latency_s": round(ended_mono - attempt.started_mono, 6),
            "ttft_s": None if outcome.ttft_s is None else round(outcome.ttft_s, 6),
            "ok": outcome.ok,
            "http_status": outcome.http_status,
            "error_class": outcome.error_class,
            "error": outcome.error,
            "output_tokens": outcome.output_tokens,
            "response_id": outcome.response_id,
            "rest_before_s": request.rest_before_s,
            "timeout_s": float(self.config.timeout_s),
        }
        line = json.dumps(record) + "\n"
        with self.lock:
            if attempt.settled or self.closed:
                return
            attempt.settled = True
            self.in_flight.discard(attempt)
            self.out.write(line)
            self.out.flush()
            self.records += 1
            self.final_ok[request.marker] = outcome.ok
            self.final_error[request.marker] = outcome.error_class

    def _headers(self, attempt: _Attempt) -> dict[str, str]:
        headers = {
            "Content-Type": "application/json",
            "Accept": "text/event-stream" if self.config.stream else "application/json",
            "User-Agent": f"logforensics-loadtest/{__version__}",
            "X-Request-Id": attempt.request_id,
        }
        if self.config.api_key:
            headers["Authorization"] = f"Bearer {self.config.api_key}"
        return headers

    def _body(self, request: _Request) -> bytes:
        body = {
            "model": self.config.model,
            "messages": [{"role": "user", "content": f"{request.marker} {request.prompt}"}],
            "max_tokens": self.config.max_tokens,
            "temperature": self.config.temperature,
            "stream": self.config.stream,
        }
        if self.config.ignore_eos:  # sent only when asked: other servers may refuse it
            body["ignore_eos"] = True
        if self.config.stream:
            body["stream_options"] = {"include_usage": True}
        return json.dumps(body).encode("utf-8")

    def _exchange(self, attempt: _Attempt) -> _Outcome:
        deadline = _Deadline(attempt.started_mono, self.config.timeout_s)
        connection = self.endpoint.connection(self.config.timeout_s)
        try:
            connection.connect()
            attempt.sock = connection.sock  # kept: http.client drops its own reference early
            deadline.arm(attempt)
            connection.request(
                "POST",
                self.endpoint.path,
                body=self._body(attempt.request),
                headers=self._headers(attempt),
            )
            deadline.arm(attempt)
            response = connection.getresponse()
            attempt.http_status = response.status
            if not 200 <= response.status < 300:
                text = _read_body(response, attempt, deadline).decode("utf-8", errors="replace")
                return _Outcome(
                    ok=False,
                    http_status=response.status,
                    error_class="HTTPError",
                    error=_short(f"HTTP {response.status} {response.reason}: {text}"),
                    retryable=response.status in RETRY_STATUSES,
                )
            if self.config.stream:
                return self._read_stream(response, attempt, deadline)
            payload = json.loads(_read_body(response, attempt, deadline))
            usage = payload.get("usage") or {}
            return _Outcome(
                ok=True,
                http_status=response.status,
                output_tokens=usage.get("completion_tokens"),
                response_id=payload.get("id"),
            )
        finally:
            connection.close()

    def _read_stream(
        self, response: http.client.HTTPResponse, attempt: _Attempt, deadline: _Deadline
    ) -> _Outcome:
        """Read SSE events up to ``[DONE]``: time to first content, the id, the final usage."""
        output_tokens = None
        while True:
            deadline.arm(attempt)
            line = response.readline()
            if not line:
                return _Outcome(
                    ok=False,
                    http_status=response.status,
                    error_class="IncompleteStream",
                    error="the stream ended before data: [DONE]",
                    output_tokens=output_tokens,
                    response_id=attempt.response_id,
                    ttft_s=attempt.ttft_s,
                )
            line = line.strip()
            if not line.startswith(b"data:"):
                continue
            data = line[len(b"data:") :].strip()
            if data == b"[DONE]":
                return _Outcome(
                    ok=True,
                    http_status=response.status,
                    output_tokens=output_tokens,
                    response_id=attempt.response_id,
                    ttft_s=attempt.ttft_s,
                )
            event = json.loads(data)
            if "error" in event or event.get("object") == "error":
                detail = event.get("error", event)
                message = detail.get("message", "") if isinstance(detail, dict) else str(detail)
                return _Outcome(
                    ok=False,
                    http_status=response.status,
                    error_class="StreamError",
                    error=_short(message or json.dumps(detail)),
                    output_tokens=output_tokens,
                    response_id=attempt.response_id,
                    ttft_s=attempt.ttft_s,
                )
            attempt.response_id = attempt.response_id or event.get("id")
            if attempt.ttft_s is None and any(
                (choice.get("delta") or {}).get("content") for choice in event.get("choices") or []
            ):
                attempt.ttft_s = time.monotonic() - attempt.started_mono
            usage = event.get("usage")
            if usage:
                output_tokens = usage.get("completion_tokens", output_tokens)


def run_loadtest(
    config: LoadTestConfig, out: IO[str], progress: Callable[[str], None] | None = None
) -> LoadTestSummary:
    """Warm up, then run every step, writing one JSON line per attempt to `out` as it ends.

    `progress` gets every human-facing line (warnings, one line per step);
    without it they go to stderr. Setting `config.stop` ends the run early:
    nothing new is launched, in-flight requests get `interrupt_grace_s` to
    finish and are then recorded as abandoned.
    """
    return _Runner(config, out, progress).run()


def _parse_steps(ctx: click.Context, param: click.Parameter, value: str) -> tuple[int, ...]:
    try:
        steps = tuple(int(part) for part in value.split(",") if part.strip())
    except ValueError:
        raise click.BadParameter(f"expected concurrencies like 5,9,13,20, got {value!r}") from None
    if not steps or any(step < 1 for step in steps):
        raise click.BadParameter(f"every step needs a concurrency of at least 1, got {value!r}")
    return steps


def _parse_rest(ctx: click.Context, param: click.Parameter, value: str) -> float | None:
    if value.strip().lower() == "auto":
        return None
    try:
        seconds = float(value)
    except ValueError:
        raise click.BadParameter(f"expected 'auto' or seconds, got {value!r}") from None
    if seconds < 0:
        raise click.BadParameter(f"rest must not be negative, got {value!r}")
    return seconds


def _read_prompts(path: Path) -> tuple[str, ...]:
    prompts = tuple(
        line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    )
    if not prompts:
        raise click.BadParameter(f"{path} holds no prompt", param_hint="--prompts")
    return prompts


@click.command("loadtest")
@click.option(
    "--url", required=True, help="Base URL of the server or front proxy, e.g. http://10.0.0.5:8000."
)
@click.option("--model", required=True, help="Model name sent in every request.")
@click.option(
    "--steps",
    default="5,9,13,20",
    show_default=True,
    callback=_parse_steps,
    help="Concurrency of each step, comma-separated.",
)
@click.option(
    "--rest",
    default="auto",
    show_default=True,
    callback=_parse_rest,
    help="Seconds between steps; auto rests longer than the timeout.",
)
@click.option("--max-tokens", type=click.IntRange(min=1), default=300, show_default=True)
@click.option("--temperature", type=float, default=0.0, show_default=True)
@click.option(
    "--timeout",
    "timeout_s",
    type=click.FloatRange(min=0, min_open=True),
    default=120.0,
    show_default=True,
    help="Total seconds allowed per request.",
)
@click.option(
    "--ignore-eos",
    is_flag=True,
    help="Ask the server (vLLM) to generate max_tokens every time: a fixed output length.",
)
@click.option("--prompt", help="Prompt text (the request's marker is put before it).")
@click.option(
    "--prompts",
    "prompts_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="File of prompts, one per line; request i of every step gets line i (cycling).",
)
@click.option(
    "--api-key-env",
    default="OPENAI_API_KEY",
    show_default=True,
    help="Environment variable holding the API key (no key sent if unset).",
)
@click.option("--stream", is_flag=True, help="Stream responses and record the time to first token.")
@click.option(
    "--retries",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Retries on 429/502/503/504, timeouts and connection errors; each attempt is a record.",
)
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="JSONL file to write, one line per attempt.",
)
@click.pass_context
def loadtest_command(
    ctx: click.Context,
    url: str,
    model: str,
    steps: tuple[int, ...],
    rest: float | None,
    max_tokens: int,
    temperature: float,
    timeout_s: float,
    prompt: str | None,
    prompts_file: Path | None,
    api_key_env: str,
    stream: bool,
    ignore_eos: bool,
    retries: int,
    output: Path,
) -> None:
    """Run a step load test against an OpenAI-compatible server, one JSON line per request."""
    if prompt is not None and prompts_file is not None:
        raise click.UsageError("give --prompt or --prompts, not both")
    if prompts_file is not None:
        prompts = _read_prompts(prompts_file)
    else:
        prompts = (prompt if prompt is not None else DEFAULT_PROMPT,)
    try:
        config = LoadTestConfig(
            url=url,
            model=model,
            steps=steps,
            rest_s=rest,
            max_tokens=max_tokens,
            temperature=temperature,
            timeout_s=timeout_s,
            prompts=prompts,
            api_key=os.environ.get(api_key_env) or None,
            stream=stream,
            ignore_eos=ignore_eos,
            retries=retries,
        )
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None

    def echo(line: str) -> None:
        click.echo(line, err=True)

    echo(
        f"run {config.run_id}: steps {','.join(map(str, config.steps))}, "
        f"rest {config.rest_between_steps_s:g} s, timeout {config.timeout_s:g} s -> {output}"
    )
    settings = config_path(output)
    record = config.record(output.name, datetime.now(timezone.utc))
    settings.write_text(json.dumps(record) + "\n", encoding="utf-8")
    echo(f"configuration -> {settings}")
    with _stop_on_sigint(config.stop), output.open("w", encoding="utf-8") as out:
        try:
            summary = run_loadtest(config, out, progress=echo)
        except KeyboardInterrupt:
            echo(f"aborted; the records written so far are in {output}")
            ctx.exit(EXIT_INTERRUPTED)
    echo(
        f"{summary.records} records for {summary.requests} requests "
        f"({summary.failed} failed) written to {output}"
    )
    if summary.interrupted:
        echo("interrupted")
        ctx.exit(EXIT_INTERRUPTED)


@contextlib.contextmanager
def _stop_on_sigint(stop: threading.Event):
    """The first Ctrl-C asks the run to stop cleanly; a second one aborts at once."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)

    def request_stop(signum, frame):
        stop.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    signal.signal(signal.SIGINT, request_stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


if __name__ == "__main__":
    loadtest_command()
