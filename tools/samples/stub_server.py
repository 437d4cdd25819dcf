"""A stand-in OpenAI server for the load testers: some 200s, some 503s, some closed connections.

By arrival number n (from 1): n % 5 == 2 -> 503; n % 7 == 3 -> the connection
is closed without an answer; n % 6 == 5 -> the 200 comes after SLOW seconds
(past hey -t 1); else an OpenAI chat completion at once (after 50 ms).
"""

import contextlib
import itertools
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SLOW = float(sys.argv[2]) if len(sys.argv) > 2 else 2.5
COUNTER = itertools.count(1)
LOCK = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with LOCK:
            n = next(COUNTER)
        if n % 7 == 3:
            self.close_connection = True
            self.connection.shutdown(2)
            return
        if n % 5 == 2:
            body = json.dumps({"error": {"message": "overloaded", "code": 503}}).encode()
            status = 503
        else:
            time.sleep(SLOW if n % 6 == 5 else 0.05)
            body = json.dumps(
                {
                    "id": f"chatcmpl-stub{n:04d}",
                    "object": "chat.completion",
                    "model": "tiny-llama",
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": "ok"},
                            "finish_reason": "length",
                        }
                    ],
                    "usage": {"prompt_tokens": 12, "completion_tokens": 1, "total_tokens": 13},
                }
            ).encode()
            status = 200
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        with contextlib.suppress(OSError):
            self.wfile.write(body)


ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
