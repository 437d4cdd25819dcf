#!/usr/bin/env python3
"""A small relaying proxy in the style of the seed write-up: Python's
http.server (ThreadingHTTPServer) on 127.0.0.1:PROXY_PORT relays each POST to
the vLLM instances, round robin by arrival, through a small fixed pool of
upstream workers per instance (PROXY_WORKERS threads each, one upstream
request per thread: a per-server connection limit). A request whose job is
still queued after PROXY_QUEUE_TIMEOUT s is dropped -- it never reaches an
instance -- and answered 503 by the proxy; if the client has already hung
up, send_error() fails with BrokenPipeError and socketserver prints the
traceback on stderr. A job a worker has taken gets PROXY_UPSTREAM_TIMEOUT s.

Logs exactly as http.server does, on stderr: log_request access lines
(`127.0.0.1 - - [date] "POST /v1/chat/completions HTTP/1.1" 200 -`),
log_error lines from send_error (`code 503, message ...`), this proxy's own
log_message lines (`forward #N -> http://127.0.0.1:8001 (waited 0.0s)`,
`upstream ... answered 200 for #N in 9.8s`, `dropped #N ...`), and
tracebacks. Loopback only; bounded by the client's own request count.
"""
import itertools
import os
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT = int(os.environ.get("PROXY_PORT", "8000"))
UPSTREAMS = os.environ.get("PROXY_UPSTREAMS", "http://127.0.0.1:8001,http://127.0.0.1:8002").split(",")
WORKERS = int(os.environ.get("PROXY_WORKERS", "2"))           # per upstream
QUEUE_TIMEOUT = float(os.environ.get("PROXY_QUEUE_TIMEOUT", "25"))
UPSTREAM_TIMEOUT = float(os.environ.get("PROXY_UPSTREAM_TIMEOUT", "120"))
assert all(u.startswith(("http://127.0.0.1:", "http://localhost:")) for u in UPSTREAMS), "loopback only"

POOLS = {u: ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="up") for u in UPSTREAMS}
RR = itertools.cycle(UPSTREAMS)
SEQ = itertools.count(1)
LOCK = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"   # one request per connection, like the seed's
    server_version = "relay/0.1"

    def _relay(self, upstream, n, body, t_in):
        # runs in an upstream worker: the request reaches the instance here
        self.log_message("forward #%d -> %s (waited %.1fs)", n, upstream, time.monotonic() - t_in)
        req = urllib.request.Request(upstream + self.path, data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
        t0 = time.monotonic()
        try:
            with urllib.request.urlopen(req, timeout=UPSTREAM_TIMEOUT) as r:
                status, ctype, data = r.status, r.headers.get("Content-Type"), r.read()
        except urllib.error.HTTPError as e:   # pass the instance's error through
            status, ctype, data = e.code, e.headers.get("Content-Type"), e.read()
        self.log_message("upstream %s answered %d for #%d in %.1fs", upstream, status, n, time.monotonic() - t0)
        return status, ctype, data

    def _forward(self, body):
        with LOCK:
            upstream, n = next(RR), next(SEQ)
        job = POOLS[upstream].submit(self._relay, upstream, n, body, time.monotonic())
        try:
            return job.result(timeout=QUEUE_TIMEOUT)
        except TimeoutError:
            if job.cancel():   # still queued: drop it, it never leaves the proxy
                self.log_message("dropped #%d after %.0fs in the queue for %s", n, QUEUE_TIMEOUT, upstream)
                raise
        return job.result(timeout=UPSTREAM_TIMEOUT)

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        try:
            status, ctype, data = self._forward(body)
        except TimeoutError:
            self.send_error(503, "Service Unavailable", "no upstream worker free")
            return
        except Exception as exc:
            self.send_error(502, f"Bad Gateway: {exc}")
            return
        self.send_response(status)
        self.send_header("Content-Type", ctype or "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


if __name__ == "__main__":
    srv = ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
    print(f"relay proxy on 127.0.0.1:{PORT} -> {', '.join(UPSTREAMS)}; {WORKERS} workers per upstream, "
          f"queue timeout {QUEUE_TIMEOUT:.0f}s, upstream timeout {UPSTREAM_TIMEOUT:.0f}s", flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    sys.exit(0)
