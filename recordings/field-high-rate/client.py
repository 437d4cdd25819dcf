#!/usr/bin/env python3
"""Load-test client, closed loop: the lab's client.py (one warm-up request, then steps,
a rest between them, one JSONL record per request, a unique marker "(i)" in every
prompt, no X-Request-Id) changed for a HIGH REQUEST RATE: in a step of concurrency N,
N worker threads each send a request, wait for its answer (or its timeout) and send the
next one at once, until the step's duration is over; a worker does not start a new
request after that, and the step ends when every worker's last request has ended.

Written to run under plain `faketime -f '+3.4s'` (libfaketime 0.9.10): it uses no timed
waits on locks/events/conditions (those hang under it), only time.sleep, socket
timeouts (requests' timeout), Thread.join() and `with lock:`.
Each record names its step (`step`) and, since a step sends many more requests than its
concurrency, the concurrency too (`concurrency`, the same number; 0 for the warm-up).
Bounded: every request has a timeout; only 127.0.0.1.
"""
import argparse
import json
import sys
import threading
import time
from datetime import datetime, timezone
from urllib.parse import urlparse

import requests

ap = argparse.ArgumentParser()
ap.add_argument("--url", default="http://127.0.0.1:8000/v1/chat/completions")
ap.add_argument("--model", default="tiny-llama")
ap.add_argument("--steps", default="8,16,32", help="concurrency of each step")
ap.add_argument("--duration", type=float, default=45.0, help="seconds each step sends")
ap.add_argument("--rest", type=float, default=15.0, help="seconds between steps")
ap.add_argument("--max-tokens", type=int, default=2)
ap.add_argument("--timeout", type=float, default=90.0, help="client timeout, s")
ap.add_argument("--ignore-eos", action="store_true",
                help="vLLM extra param: always generate max_tokens tokens")
ap.add_argument("--out", required=True)
args = ap.parse_args()

host = urlparse(args.url).hostname
assert host in ("127.0.0.1", "localhost", "::1"), "loopback only"

PROMPT = "({i}) Name one thing about the imaginary city number {i}."

lock = threading.Lock()
out = open(args.out, "a", buffering=1)
next_index = [1]


def now():
    return datetime.now(timezone.utc).astimezone()


def iso(dt):
    return dt.isoformat(timespec="milliseconds")


def one(i, step, warmup=False):
    body = {
        "model": args.model,
        "messages": [{"role": "user", "content": PROMPT.format(i=i)}],
        "max_tokens": args.max_tokens,
        "temperature": 0,
    }
    if args.ignore_eos:
        body["ignore_eos"] = True
    rec = {"index": i, "step": step, "concurrency": step, "warmup": warmup, "marker": f"({i})"}
    t0 = time.monotonic()
    start = now()
    status = None
    err = None
    ctoks = None
    ptoks = None
    rid = None
    finish = None
    try:
        r = requests.post(args.url, json=body, timeout=args.timeout)
        status = r.status_code
        if r.ok:
            d = r.json()
            rid = d.get("id")
            u = d.get("usage") or {}
            ctoks = u.get("completion_tokens")
            ptoks = u.get("prompt_tokens")
            finish = (d.get("choices") or [{}])[0].get("finish_reason")
        else:
            err = f"HTTP {status}: " + " ".join(r.text.split())[:300]
    except Exception as e:  # timeout, reset, refused ...
        err = f"{type(e).__name__}: {e}"[:400]
    end = now()
    rec.update(
        start=iso(start), end=iso(end), latency_s=round(time.monotonic() - t0, 3),
        status=status, completion_tokens=ctoks, prompt_tokens=ptoks,
        finish_reason=finish, error=err, response_id=rid,
    )
    with lock:
        out.write(json.dumps(rec) + "\n")
    return rec


def worker(step, deadline, recs):
    while time.monotonic() < deadline:
        with lock:
            i = next_index[0]
            next_index[0] += 1
        r = one(i, step)
        with lock:
            recs.append(r)


def main():
    steps = [int(s) for s in args.steps.split(",")]
    print(f"{iso(now())} warm-up", flush=True)
    w = one(0, 0, warmup=True)
    print(f"{iso(now())} warm-up done status={w['status']} lat={w['latency_s']} err={w['error']}", flush=True)
    time.sleep(5)
    for k, n in enumerate(steps):
        first = next_index[0]
        print(f"{iso(now())} step concurrency={n} for {args.duration:g} s, first index {first}", flush=True)
        recs = []
        t0 = time.monotonic()
        deadline = t0 + args.duration
        threads = [threading.Thread(target=worker, args=(n, deadline, recs)) for _ in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        el = time.monotonic() - t0
        last = next_index[0] - 1
        ok = sum(1 for r in recs if r["status"] == 200)
        lats = sorted(r["latency_s"] for r in recs)
        errs = {}
        for r in recs:
            if r["error"]:
                key = r["error"].split(":")[0]
                errs[key] = errs.get(key, 0) + 1
        print(f"{iso(now())} step {n}: indexes {first}..{last} sent={len(recs)} ok={ok} "
              f"failed={len(recs) - ok} in {el:.1f} s = {len(recs) / el:.1f} req/s "
              f"({ok / el:.1f} ok/s) statuses={sorted(set(str(r['status']) for r in recs))} "
              f"lat min/med/p90/max={lats[0]}/{lats[len(lats)//2]}/{lats[int(len(lats)*0.9)]}/{lats[-1]} "
              f"errors={errs}", flush=True)
        if k < len(steps) - 1:
            print(f"{iso(now())} rest {args.rest:g}s", flush=True)
            time.sleep(args.rest)
    print(f"{iso(now())} done", flush=True)


if __name__ == "__main__":
    sys.exit(main())
