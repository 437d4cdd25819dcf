"""An OpenAI-compatible stub server and a capacity-limited front proxy, for tests.

Both listen on 127.0.0.1 on a free port, record every request they receive,
and are context managers that shut down without waiting out their delays.
Given a `log_path`, the stub also writes the container log a vLLM instance
would (see `VllmLog`), so a load test against it can be analysed end to end.
"""

from __future__ import annotations

import http.client
import itertools
import json
import select
import socket
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO
from urllib.parse import urlsplit

HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "content-length", "host", "te", "upgrade"}
)


@dataclass
class ReceivedRequest:
    """One request as a server saw it, and what it answered."""

    number: int  # arrival order at this server, from 1
    method: str
    path: str
    headers: list[tuple[str, str]]
    raw_body: bytes
    received_at: float  # time.monotonic()
    response_status: int | None = None  # None: the connection was dropped unanswered
    response_id: str | None = None  # stub only: vLLM's id, chatcmpl-<X-Request-Id>
    aborted: bool = False  # stub only: the client went away before the answer's end
    forwarded_to: str | None = None  # proxy only: the upstream that got it

    def header(self, name: str) -> str | None:
        wanted = name.lower()
        return next((value for key, value in self.headers if key.lower() == wanted), None)

    @property
    def request_id(self) -> str | None:
        return self.header("X-Request-Id")

    @property
    def body(self) -> dict | None:
        try:
            return json.loads(self.raw_body)
        except ValueError:
            return None

    @property
    def prompt(self) -> str:
        messages = (self.body or {}).get("messages") or []
        return "\n".join(str(message.get("content", "")) for message in messages)


@dataclass
class _Rule:
    """Which requests a behaviour applies to: by marker in the prompt, arrival number, count."""

    action: str  # delay | fail | drop
    markers: frozenset[str] | None = None
    from_nth: int | None = None
    times: int | None = None
    seconds: float = 0.0
    status: int = 503
    used: int = 0

    def selects(self, request: ReceivedRequest) -> bool:
        if self.markers is not None and not any(
            marker in request.prompt for marker in self.markers
        ):
            return False
        if self.from_nth is not None and request.number < self.from_nth:
            return False
        return self.times is None or self.used < self.times


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 5  # idle keep-alive connections must not outlive a test

    def do_POST(self) -> None:
        try:
            self.server.stub.handle(self)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up: normal in these tests

    do_GET = do_POST

    def log_message(self, format: str, *args) -> None:
        pass

    def send_json(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def start_chunked(
        self, status: int, content_type: str, extra: Iterable[tuple[str, str]] = ()
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        for name, value in extra:
            self.send_header(name, value)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):X}\r\n".encode("ascii") + data + b"\r\n")
        self.wfile.flush()

    def end_chunked(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class _StubServer:
    """Serve in a background thread; `close` wakes every delayed handler first."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.closing = threading.Event()
        self.requests: list[ReceivedRequest] = []
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.stub = self
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self.closing.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def received(self) -> list[ReceivedRequest]:
        with self.lock:
            return list(self.requests)

    def _record(self, handler: _Handler) -> ReceivedRequest:
        length = int(handler.headers.get("Content-Length") or 0)
        raw_body = handler.rfile.read(length) if length else b""
        with self.lock:
            request = ReceivedRequest(
                number=len(self.requests) + 1,
                method=handler.command,
                path=handler.path,
                headers=list(handler.headers.items()),
                raw_body=raw_body,
                received_at=time.monotonic(),
            )
            self.requests.append(request)
        return request

    def handle(self, handler: _Handler) -> None:
        raise NotImplementedError


VLLM_VERSION = "0.10.1.1"
STATS_INTERVAL_S = 1.0
HOLD_POLL_S = 0.02  # how often a held request looks for its client having gone
KV_PCT_PER_REQUEST = 0.4


def _docker_stamp(ns: int) -> tuple[str, datetime]:
    """`docker logs -t`'s prefix for a moment (RFC 3339, UTC, nanoseconds) and the moment."""
    moment = datetime.fromtimestamp(ns // 1_000_000_000, timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ns % 1_000_000_000:09d}Z", moment


def chat_prompt(messages: Sequence[dict]) -> str:
    """The prompt vLLM logs: the messages through a Llama-3-style chat template."""
    turns = "".join(
        f"<|start_header_id|>{message.get('role', 'user')}<|end_header_id|>\n\n"
        f"{message.get('content', '')}<|eot_id|>"
        for message in messages
    )
    return f"<|begin_of_text|>{turns}<|start_header_id|>assistant<|end_header_id|>\n\n"


class VllmLog:
    """A vLLM (V1) instance's stdout as ``docker logs -t`` shows it, flushed line by line.

    Every line starts with the runtime's RFC 3339 UTC stamp with nanoseconds;
    vLLM's own lines then carry ``(APIServer pid=1) INFO MM-DD HH:MM:SS
    [file.py:N]`` (UTC, as in a container), uvicorn's access lines none. While
    requests are in flight, or were since the last tick, an ``Engine 000:``
    stats line follows every `stats_interval_s` (Running = requests in flight,
    Waiting 0, a small KV cache usage). `close` writes uvicorn's shutdown lines.
    """

    def __init__(
        self, path: str | Path, port: int, model: str, stats_interval_s: float = STATS_INTERVAL_S
    ) -> None:
        self.path = Path(path)
        self._out: IO[str] | None = self.path.open("a", encoding="utf-8")
        self._lock = threading.RLock()
        self.running = 0
        self._prompt_tokens = 0  # since the last stats line
        self._generation_tokens = 0
        self._active = False  # whether anything happened since the last stats line
        self._last_stats = time.monotonic()
        self._startup(port, model)
        self._stop = threading.Event()
        self._ticker = threading.Thread(
            target=self._tick, args=(stats_interval_s,), name="vllm-stats", daemon=True
        )
        self._ticker.start()

    def write(self, text: str, *, vllm: str | None = None, level: str = "INFO") -> None:
        """One line; `vllm` ("file.py:N") gives it vLLM's own header, stamped the same instant."""
        with self._lock:
            if self._out is None:
                return
            prefix, moment = _docker_stamp(time.time_ns())
            if vllm is not None:
                text = f"(APIServer pid=1) {level} {moment:%m-%d %H:%M:%S} [{vllm}] {text}"
            self._out.write(f"{prefix} {text}\n")
            self._out.flush()

    def _startup(self, port: int, model: str) -> None:
        for location, text in (
            ("api_server.py:1805", f"vLLM API server version {VLLM_VERSION}"),
            ("utils.py:326", f"non-default args: {{'model': {model!r}}}"),
            (
                "core.py:73",
                f"Initializing a V1 LLM engine (v{VLLM_VERSION}) with config: model={model!r}",
            ),
            ("kv_cache_utils.py:833", "GPU KV cache size: 1,402,880 tokens"),
            ("api_server.py:1818", f"Starting vLLM API server 0 on http://127.0.0.1:{port}"),
            ("launcher.py:29", "Available routes are:"),
            ("launcher.py:37", "Route: /v1/chat/completions, Methods: POST"),
        ):
            self.write(text, vllm=location)
        for text in (
            "Started server process [1]",
            "Waiting for application startup.",
            "Application startup complete.",
        ):
            self.write(f"INFO:     {text}")

    def received(self, request_id: str, prompt: str, body: dict, prompt_tokens: int) -> None:
        params = (
            f"SamplingParams(n=1, presence_penalty=0.0, frequency_penalty=0.0, "
            f"repetition_penalty=1.0, temperature={body.get('temperature', 1.0)}, top_p=1.0, "
            f"top_k=0, min_p=0.0, seed=None, stop=[], stop_token_ids=[], "
            f"max_tokens={body.get('max_tokens')}, min_tokens=0, logprobs=None, "
            f"skip_special_tokens=True, spaces_between_special_tokens=True)"
        )
        with self._lock:
            self.running += 1
            self._prompt_tokens += prompt_tokens
            self._active = True
            self.write(
                f"Received request {request_id}: prompt: {prompt!r}, params: {params}, "
                "prompt_token_ids: None, lora_request: None.",
                vllm="logger.py:39",
            )

    def access(self, peer: tuple[str, int], request_line: str, status: int) -> None:
        """uvicorn's access line, written when the response headers go out."""
        try:
            phrase = HTTPStatus(status).phrase
        except ValueError:
            phrase = ""
        self.write(f'INFO:     {peer[0]}:{peer[1]} - "{request_line}" {status} {phrase}'.rstrip())

    def finished(self, generation_tokens: int) -> None:
        with self._lock:
            self.running -= 1
            self._generation_tokens += generation_tokens
            self._active = True

    def aborted(self, request_id: str) -> None:
        with self._lock:
            self.running -= 1
            self._active = True
            self.write(f"Aborted request {request_id}.", vllm="async_llm.py:485")

    def dropped(self) -> None:
        """A request that ended with no answer and no client abort (the stub dropped it)."""
        with self._lock:
            self.running -= 1
            self._active = True

    def _tick(self, interval_s: float) -> None:
        while not self._stop.wait(interval_s):
            self.stats()

    def stats(self) -> None:
        """The V1 stats line, if the engine had work since the last one."""
        with self._lock:
            now = time.monotonic()
            elapsed = max(now - self._last_stats, 1e-3)
            self._last_stats = now
            if not (self.running or self._active):
                return
            self.write(
                f"Engine 000: Avg prompt throughput: {self._prompt_tokens / elapsed:.1f} tokens/s, "
                f"Avg generation throughput: {self._generation_tokens / elapsed:.1f} tokens/s, "
                f"Running: {self.running} reqs, Waiting: 0 reqs, "
                f"GPU KV cache usage: {self.running * KV_PCT_PER_REQUEST:.1f}%, "
                "Prefix cache hit rate: 0.0%",
                vllm="loggers.py:123",
            )
            self._prompt_tokens = self._generation_tokens = 0
            self._active = False

    def close(self) -> None:
        self._stop.set()
        self._ticker.join(timeout=5)
        for text in (
            "Shutting down",
            "Waiting for application shutdown.",
            "Application shutdown complete.",
            "Finished server process [1]",
        ):
            self.write(f"INFO:     {text}")
        with self._lock:
            if self._out is not None:
                self._out.close()
                self._out = None


def _client_gone(handler: _Handler) -> bool:
    """Has the peer closed its side? (Readable with nothing to read means EOF.)"""
    sock = handler.connection
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        return bool(readable) and sock.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):
        return True


class StubOpenAI(_StubServer):
    """Answers /v1/chat/completions like vLLM, plain or streamed, with faults on demand.

    Streaming is chosen by the request body, as a real server does. A streamed
    answer sends the role chunk at once, waits `content_delay_s`, then sends
    `chunks` `chunk_interval_s` apart, the finish chunk, the usage chunk when
    asked for, and ``data: [DONE]``. The answer's id is vLLM's,
    ``chatcmpl-<X-Request-Id>``. A request whose client disconnects while it
    is held (a delay, a pause between chunks) is abandoned, as vLLM aborts it.

    With `log_path`, the stub writes a vLLM instance's container log there
    (`VllmLog`): a chat request it accepts (every one but those a `fail` rule
    answers, which vLLM would refuse before logging) gets its ``Received
    request`` line on arrival; every request its access line when the response headers go
    out (at the end of a plain answer, at the start of a streamed one) and an
    ``Aborted request`` line if the client goes away before the end.
    """

    def __init__(
        self,
        completion_tokens: int = 7,
        chunks: Sequence[str] = ("Once", " upon", " a time"),
        content_delay_s: float = 0.0,
        chunk_interval_s: float = 0.0,
        log_path: str | Path | None = None,
        model: str = "stub-model",
        stats_interval_s: float = STATS_INTERVAL_S,
    ) -> None:
        self.completion_tokens = completion_tokens
        self.chunks = tuple(chunks)
        self.content_delay_s = content_delay_s
        self.chunk_interval_s = chunk_interval_s
        self._rules: list[_Rule] = []
        self.log: VllmLog | None = None
        super().__init__()
        if log_path is not None:
            self.log = VllmLog(log_path, self.port, model, stats_interval_s)

    def close(self) -> None:
        super().close()
        if self.log is not None:
            self.log.close()

    def delay(
        self,
        seconds: float,
        *,
        markers: Iterable[str] | None = None,
        from_nth: int | None = None,
        times: int | None = None,
    ) -> StubOpenAI:
        """Hold the selected requests `seconds` before any byte of the answer."""
        return self._add(_Rule("delay", _frozen(markers), from_nth, times, seconds=seconds))

    def fail(
        self,
        status: int = 503,
        *,
        markers: Iterable[str] | None = None,
        from_nth: int | None = None,
        times: int | None = None,
    ) -> StubOpenAI:
        """Answer the selected requests with `status` and an OpenAI-style error body."""
        return self._add(_Rule("fail", _frozen(markers), from_nth, times, status=status))

    def drop(
        self,
        *,
        markers: Iterable[str] | None = None,
        from_nth: int | None = None,
        times: int | None = None,
    ) -> StubOpenAI:
        """Close the selected requests' connections without answering."""
        return self._add(_Rule("drop", _frozen(markers), from_nth, times))

    def _add(self, rule: _Rule) -> StubOpenAI:
        with self.lock:
            self._rules.append(rule)
        return self

    def _plan(self, request: ReceivedRequest) -> tuple[float, _Rule | None]:
        """Delays add up; the first matching fail or drop decides the answer."""
        delay_s = 0.0
        verdict = None
        with self.lock:
            for rule in self._rules:
                if not rule.selects(request):
                    continue
                if rule.action == "delay":
                    rule.used += 1
                    delay_s += rule.seconds
                elif verdict is None:
                    rule.used += 1
                    verdict = rule
        return delay_s, verdict

    def _hold(self, handler: _Handler, seconds: float) -> str | None:
        """Wait `seconds`; "closing" if the stub shuts down, "gone" if the client leaves."""
        until = time.monotonic() + seconds
        while (remaining := until - time.monotonic()) > 0:
            if self.closing.wait(min(remaining, HOLD_POLL_S)):
                return "closing"
            if _client_gone(handler):
                return "gone"
        return None

    def _access(self, handler: _Handler, status: int) -> None:
        if self.log is not None:
            self.log.access(handler.client_address, handler.requestline, status)

    def _end(self, request: ReceivedRequest, how: str, logged: bool) -> None:
        """Account for an accepted request's end: "finished", "gone" (aborted) or "dropped"."""
        request.aborted = how == "gone"
        if self.log is None or not logged:
            return
        if how == "finished":
            self.log.finished(self.completion_tokens)
        elif how == "gone":
            self.log.aborted(request.response_id)
        else:
            self.log.dropped()

    def handle(self, handler: _Handler) -> None:
        request = self._record(handler)
        delay_s, verdict = self._plan(request)
        body = request.body if isinstance(request.body, dict) else {}
        if verdict is not None and verdict.action == "fail":
            if delay_s and self._hold(handler, delay_s):
                handler.close_connection = True
                return
            request.response_status = verdict.status
            self._access(handler, verdict.status)
            handler.send_json(
                verdict.status,
                {
                    "object": "error",
                    "message": f"stub says {verdict.status}",
                    "type": "ServiceUnavailableError",
                    "code": verdict.status,
                },
            )
            return
        # vLLM adopts the client's X-Request-Id
        request.response_id = f"chatcmpl-{request.request_id or f'stub-{request.number}'}"
        # only a generation request reaches the engine's request logger (not GET /health)
        logged = self.log is not None and request.method == "POST" and "messages" in body
        if logged:
            self.log.received(
                request.response_id,
                chat_prompt(body["messages"]),
                body,
                self._usage(request)["prompt_tokens"],
            )
        how = "dropped"
        try:
            how = self._answer(handler, request, body, delay_s, verdict)
        except (BrokenPipeError, ConnectionResetError):
            how = "gone"
            raise
        finally:
            self._end(request, how, logged)

    def _answer(
        self,
        handler: _Handler,
        request: ReceivedRequest,
        body: dict,
        delay_s: float,
        verdict: _Rule | None,
    ) -> str:
        held = self._hold(handler, delay_s) if delay_s else None
        if held is not None or verdict is not None:  # the client left, shutdown, or a drop
            handler.close_connection = True
            return "gone" if held == "gone" else "dropped"
        request.response_status = 200
        if body.get("stream"):
            return self._stream(handler, request, body)
        self._access(handler, 200)
        handler.send_json(
            200,
            {
                "id": request.response_id,
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "".join(self.chunks)},
                        "finish_reason": "length",
                    }
                ],
                "usage": self._usage(request),
            },
        )
        return "finished"

    def _usage(self, request: ReceivedRequest) -> dict:
        prompt_tokens = len(request.prompt.split())
        return {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": prompt_tokens + self.completion_tokens,
        }

    def _stream(self, handler: _Handler, request: ReceivedRequest, body: dict) -> str:
        def event(choices: list, **extra) -> bytes:
            payload = {
                "id": request.response_id,
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": body.get("model"),
                "choices": choices,
                **extra,
            }
            return f"data: {json.dumps(payload)}\n\n".encode()

        def delta(content: dict, finish_reason: str | None = None) -> list:
            return [{"index": 0, "delta": content, "finish_reason": finish_reason}]

        self._access(handler, 200)
        handler.start_chunked(200, "text/event-stream")
        handler.write_chunk(event(delta({"role": "assistant", "content": ""})))
        pause = self.content_delay_s
        for piece in self.chunks:
            held = self._hold(handler, pause) if pause else None
            if held is not None:
                handler.close_connection = True
                return "gone" if held == "gone" else "dropped"
            handler.write_chunk(event(delta({"content": piece})))
            pause = self.chunk_interval_s
        handler.write_chunk(event(delta({}, "length")))
        if (body.get("stream_options") or {}).get("include_usage"):
            handler.write_chunk(event([], usage=self._usage(request)))
        handler.write_chunk(b"data: [DONE]\n\n")
        handler.end_chunked()
        return "finished"


class StubProxy(_StubServer):
    """A front proxy that forwards round-robin but refuses work beyond `max_in_flight`.

    It reproduces requests that fail at the proxy and never reach an instance:
    while `max_in_flight` forwarded requests are unanswered, a new one waits
    `reject_delay_s` and gets `reject_status`. Upstream failures become 502/504.
    """

    def __init__(
        self,
        upstreams: Sequence[str],
        max_in_flight: int,
        reject_delay_s: float = 0.0,
        reject_status: int = 503,
        upstream_timeout_s: float = 30.0,
    ) -> None:
        if not upstreams:
            raise ValueError("a proxy needs at least one upstream")
        self.upstreams = tuple(url.rstrip("/") for url in upstreams)
        self.max_in_flight = max_in_flight
        self.reject_delay_s = reject_delay_s
        self.reject_status = reject_status
        self.upstream_timeout_s = upstream_timeout_s
        self.in_flight = 0
        self._next_upstream = itertools.cycle(self.upstreams)
        super().__init__()

    @property
    def rejected(self) -> list[ReceivedRequest]:
        return [request for request in self.received() if request.forwarded_to is None]

    def handle(self, handler: _Handler) -> None:
        request = self._record(handler)
        with self.lock:
            admitted = self.in_flight < self.max_in_flight
            if admitted:
                self.in_flight += 1
                request.forwarded_to = next(self._next_upstream)
        if not admitted:
            if self.reject_delay_s and self.closing.wait(self.reject_delay_s):
                handler.close_connection = True
                return
            request.response_status = self.reject_status
            handler.send_json(
                self.reject_status,
                {"error": "no capacity at the front proxy", "code": self.reject_status},
            )
            return
        try:
            self._forward(handler, request)
        finally:
            with self.lock:
                self.in_flight -= 1

    def _forward(self, handler: _Handler, request: ReceivedRequest) -> None:
        upstream = urlsplit(request.forwarded_to)
        connection = http.client.HTTPConnection(
            upstream.hostname, upstream.port, timeout=self.upstream_timeout_s
        )
        headers = {name: value for name, value in request.headers if name.lower() not in HOP_BY_HOP}
        try:
            try:
                connection.request(
                    request.method, request.path, body=request.raw_body, headers=headers
                )
                response = connection.getresponse()
            except TimeoutError:
                request.response_status = 504
                handler.send_json(504, {"error": "upstream timed out", "code": 504})
                return
            except (OSError, http.client.HTTPException) as exc:
                request.response_status = 502
                handler.send_json(502, {"error": f"upstream failed: {exc!r}", "code": 502})
                return
            request.response_status = response.status
            passed_on = [
                (name, value)
                for name, value in response.getheaders()
                if name.lower() not in HOP_BY_HOP
                and name.lower() not in ("content-type", "date", "server")
            ]
            handler.start_chunked(
                response.status,
                response.getheader("Content-Type", "application/octet-stream"),
                passed_on,
            )
            try:
                while chunk := response.read1(65536):
                    handler.write_chunk(chunk)
            except (OSError, http.client.HTTPException):
                handler.close_connection = True  # cut short, as the upstream did
                return
            handler.end_chunked()
        finally:
            connection.close()


def _frozen(markers: Iterable[str] | None) -> frozenset[str] | None:
    return None if markers is None else frozenset(markers)
