"""Concurrent chat requests with given X-Request-Ids; one JSONL row each (the generic client form).

usage: pod_client.py URL OUT ID:MAX_TOKENS:TIMEOUT ...
"""

import datetime as dt
import json
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

URL, OUT = sys.argv[1], sys.argv[2]


def one(spec):
    rid, max_tokens, timeout = spec.split(":")
    body = {
        "model": "tiny-llama",
        "messages": [{"role": "user", "content": f"Tell me about ({rid})"}],
        "max_tokens": int(max_tokens),
        "temperature": 0,
        "ignore_eos": True,
    }
    req = urllib.request.Request(
        URL + "/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "X-Request-Id": rid},
    )
    started = dt.datetime.now(dt.timezone.utc)
    t0 = time.monotonic()
    row = {"started_at": started.isoformat().replace("+00:00", "Z")}
    try:
        with urllib.request.urlopen(req, timeout=float(timeout)) as resp:
            answer = json.loads(resp.read())
        row.update(
            ok=True,
            http_status=200,
            request_id=rid,
            output_tokens=answer["usage"]["completion_tokens"],
        )
    except Exception as exc:  # the client's own error text, as a load tester keeps it
        row.update(ok=False, error=repr(exc)[:200], request_id=rid)
    row["latency_s"] = round(time.monotonic() - t0, 6)
    return row


with ThreadPoolExecutor(len(sys.argv) - 3) as pool:
    rows = list(pool.map(one, sys.argv[3:]))
with open(OUT, "a") as out:
    for row in rows:
        out.write(json.dumps(row) + "\n")
        print(row)
