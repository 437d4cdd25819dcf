"""An OpenAI-compatible stub server and a capacity-limited front proxy, for tests.

Both listen on 127.0.0.1 on a free port, record every request they receive,
and are context managers that shut down without waiting out their delays.
"""

from __future__ import annotations

import http.client
import itertools
import json
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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
    response_id: str | None = None
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


class StubOpenAI(_StubServer):
    """Answers /v1/chat/completions like vLLM, plain or streamed, with faults on demand.

    Streaming is chosen by the request body, as a real server does. A streamed
    answer sends the role chunk at once, waits `content_delay_s`, then sends
    `chunks` `chunk_interval_s` apart, the finish chunk, the usage chunk when
    asked for, and ``data: [DONE]``.
    """

    def __init__(
        self,
        completion_tokens: int = 7,
        chunks: Sequence[str] = ("Once", " upon", " a time"),
        content_delay_s: float = 0.0,
        chunk_interval_s: float = 0.0,
    ) -> None:
        self.completion_tokens = completion_tokens
        self.chunks = tuple(chunks)
        self.content_delay_s = content_delay_s
        self.chunk_interval_s = chunk_interval_s
        self._rules: list[_Rule] = []
        super().__init__()

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

    def handle(self, handler: _Handler) -> None:
        request = self._record(handler)
        delay_s, verdict = self._plan(request)
        if (delay_s and self.closing.wait(delay_s)) or (verdict and verdict.action == "drop"):
            handler.close_connection = True
            return
        if verdict is not None:
            request.response_status = verdict.status
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
        body = request.body or {}
        request.response_id = f"chatcmpl-stub-{request.number}"
        request.response_status = 200
        if body.get("stream"):
            self._stream(handler, request, body)
            return
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

    def _usage(self, request: ReceivedRequest) -> dict:
        prompt_tokens = len(request.prompt.split())
        return {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": prompt_tokens + self.completion_tokens,
        }

    def _stream(self, handler: _Handler, request: ReceivedRequest, body: dict) -> None:
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

        handler.start_chunked(200, "text/event-stream")
        handler.write_chunk(event(delta({"role": "assistant", "content": ""})))
        pause = self.content_delay_s
        for piece in self.chunks:
            if pause and self.closing.wait(pause):
                handler.close_connection = True
                return
            handler.write_chunk(event(delta({"content": piece})))
            pause = self.chunk_interval_s
        handler.write_chunk(event(delta({}, "length")))
        if (body.get("stream_options") or {}).get("include_usage"):
            handler.write_chunk(event([], usage=self._usage(request)))
        handler.write_chunk(b"data: [DONE]\n\n")
        handler.end_chunked()


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
