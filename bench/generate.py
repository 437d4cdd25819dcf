"""Seeded, vectorised generator of large incident bundles with a known ground truth.

A bundle is what `logforensics analyze` is given after a long load test:

* ``client/results.jsonl`` — the load-test client's generic JSON-lines form
  (README "The generic client form"), one record per request, written in end
  order, ``started_at``/``ended_at`` ISO 8601 with ``Z``;
* ``instances/gpu-N.log`` — each vLLM instance's ``docker logs -t`` output:
  startup lines, uvicorn access lines (``POST /v1/chat/completions`` and
  ``GET /health``) and vLLM V1 stats lines every 10 s;
* ``proxy/nginx-access.log`` — the front nginx's access log with upstream
  fields (``$upstream_addr $upstream_status $request_time
  $upstream_response_time``); failed requests are refused by nginx itself,
  as real nginx logs a refusal: ``503`` with ``-`` as upstream (``limit_conn``
  / ``limit_req``) or ``502`` with the upstream group's name (``no live
  upstreams``), so the proxy's own line proves they never reached an instance.

Requests arrive at ~100/s (Poisson) over ten load steps of equal length; the
successes are spread unevenly over 8 instances; the failures (rarer in early
steps, more in late ones) never reach an instance. The health-check count is
chosen so that the bundle holds exactly the requested number of lines.

A *short-line* bundle (``5M-short``: a fleet's server side, no client file)
holds two instances' ``kubectl logs --timestamps`` output (RFC3339Nano, Go's
trailing zeros trimmed) of uvicorn access lines (chat completions through
nginx, health checks and metrics scrapes) and vLLM stats lines every second,
and the nginx access log in front of them; its truth is what the JSON can
show without a client: each file's records, each upstream's answered lines
and the instance it is.

The truth (totals, per-instance counts, per-step counts, lines and bytes per
file) is written as ``truth.json`` beside the bundle folder, never inside it
(the analyser reads every file in the folder):

    SCRATCH/1M-s20260224/bundle/...   the bundle
    SCRATCH/1M-s20260224/truth.json   its truth

    .venv/bin/python bench/generate.py --sizes 1M,5M --scratch /tmp/logforensics-bench
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import polars as pl

GENERATOR_VERSION = 1
SHORT_VERSION = 1  # the short-line bundle's generator
SHORT = "short"
SHORT_INSTANCES = 2
SHORT_NGINX_SHARE = 0.24  # of the lines: nginx's (1.2M of 5M)
SHORT_STATS_SHARE = 0.04  # vLLM stats lines, one a second per instance (0.2M of 5M)
SHORT_REFUSED = 0.005  # requests nginx refuses itself (503, no upstream)
SHORT_WEIGHTS = np.array([0.55, 0.45])  # the balancer's split
DEFAULT_SEED = 20260224
DEFAULT_SCRATCH = Path("/tmp/logforensics-bench")
INSTANCES = 8
RATE_PER_S = 100.0
STEPS = 10
T0 = np.datetime64("2026-02-24T06:00:00", "ns").astype(np.int64)  # first request, UTC ns
NS = 1_000_000_000
CHAT = "/v1/chat/completions"
# Load-balancer weights: uneven on purpose, so per-instance truth is not trivial.
LB_WEIGHTS = np.array([1.30, 1.20, 1.10, 1.00, 1.00, 0.90, 0.80, 0.70])
STATS_EVERY_S = 10.0
HEALTH_EVERY_S = 5.0  # nominal; the exact count fills the line budget
STARTUP = [
    "(APIServer pid=1) INFO {md} [api_server.py:1395] vLLM API server version 0.10.1.1",
    "(APIServer pid=1) INFO {md} [utils.py:326] non-default args: {{'model': "
    "'google/gemma-4-e4b-it', 'max_model_len': 8192}}",
    "(APIServer pid=1) INFO {md} [config.py:1604] Using max model len 8192",
    "(APIServer pid=1) INFO {md} [core.py:73] Initializing a V1 LLM engine (v0.10.1.1) with "
    "config: model='google/gemma-4-e4b-it'",
    "(APIServer pid=1) INFO {md} [gpu_model_runner.py:1892] Model loading took 15.7402 GiB "
    "and 9.417 seconds",
    "(APIServer pid=1) INFO {md} [kv_cache_utils.py:833] GPU KV cache size: 1,402,880 tokens",
    "(APIServer pid=1) INFO {md} [kv_cache_utils.py:837] Maximum concurrency for 8,192 tokens "
    "per request: 171.25x",
    "(APIServer pid=1) INFO {md} [api_server.py:1818] Starting vLLM API server 0 on "
    "http://0.0.0.0:8000",
    "(APIServer pid=1) INFO {md} [launcher.py:29] Available routes are:",
    "(APIServer pid=1) INFO {md} [launcher.py:37] Route: /v1/chat/completions, Methods: POST",
    "INFO:     Started server process [1]",
    "INFO:     Waiting for application startup.",
    "INFO:     Application startup complete.",
]


def parse_spec(text: str) -> tuple[int, str]:
    """'5M' → (5_000_000, 'incident'), '5M-short' → (5_000_000, 'short')."""
    size, _, kind = text.strip().partition("-")
    return parse_size(size), kind or "incident"


def parse_size(text: str) -> int:
    """'1M' → 1_000_000, '250k' → 250_000, '20000000' → 20_000_000."""
    t = text.strip().lower().replace("_", "")
    scale = {"k": 1_000, "m": 1_000_000, "g": 1_000_000_000}.get(t[-1:], 1)
    return int(float(t[:-1] if scale != 1 else t) * scale)


def size_label(lines: int, kind: str = "incident") -> str:
    suffix = "" if kind == "incident" else f"-{kind}"
    for unit, scale in (("M", 1_000_000), ("k", 1_000)):
        if lines % scale == 0:
            return f"{lines // scale}{unit}{suffix}"
    return f"{lines}{suffix}"


def fail_probability(step: np.ndarray) -> np.ndarray:
    """Failures are rare in the early steps and grow in the last four."""
    return 0.003 + 0.03 * np.clip(step - 6, 0, None) / 4


# ------------------------------------------------------------ text helpers


def _fixed(expr: pl.Expr, decimals: int) -> pl.Expr:
    """A non-negative integer count of 10^-decimals units as fixed-point text."""
    scale = 10**decimals
    return pl.format("{}.{}", expr // scale, (expr % scale).cast(pl.Utf8).str.zfill(decimals))


def _stamp(ns: pl.Expr, fmt: str) -> pl.Expr:
    return ns.cast(pl.Datetime("ns", "UTC")).dt.to_string(fmt)


def _docker(ns: pl.Expr) -> pl.Expr:
    """`docker logs -t` prefix: RFC 3339, nanoseconds, Z, one space."""
    return _stamp(ns, "%Y-%m-%dT%H:%M:%S%.9fZ ")


WRITE_ROWS = 2_000_000  # rows made into text at a time: a 150M bundle's text is 22 GB


def _write_lines(frame: pl.DataFrame, line: pl.Expr, path: Path) -> tuple[int, int]:
    """Write `line` of each row of `frame` verbatim, one per line, a part of the rows at a
    time (only the numbers are held whole); return (lines, bytes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as out:
        for start in range(0, max(frame.height, 1), WRITE_ROWS):
            part = frame.slice(start, WRITE_ROWS).select(line.alias("line"))
            part.write_csv(out, include_header=False, quote_style="never")
    return frame.height, path.stat().st_size


# ------------------------------------------------------------ the scenario


def _plan(target_lines: int, seed: int, rate: float) -> dict:
    """Draw every request: times, outcome, instance. Sized to the line budget."""
    rng = np.random.default_rng(seed)
    steps = np.arange(1, STEPS + 1)
    mean_fail = float(fail_probability(steps).mean())
    startup = INSTANCES * len(STARTUP)
    # lines per request: client + nginx + (access line if it reached an instance),
    # plus stats and nominal health lines per second of test, shared per request.
    per_request = 2 + (1 - mean_fail) + INSTANCES * (1 / STATS_EVERY_S + 1 / HEALTH_EVERY_S) / rate
    n = int((target_lines - startup - INSTANCES * 40) / per_request)
    if n < 1000:
        raise ValueError(f"{target_lines} lines is too small for a bundle")
    arrival = np.cumsum(rng.exponential(1 / rate, n))
    duration = float(arrival[-1])
    started_us = T0 // 1000 + (arrival * 1e6).astype(np.int64)
    step = np.minimum(STEPS, 1 + (arrival / (duration / STEPS)).astype(np.int64))
    failed = rng.random(n) < fail_probability(step)
    no_live_upstream = rng.random(n) < 0.4
    latency_ok = np.clip(rng.lognormal(np.log(2.5), 0.5, n), 0.2, 30.0)
    latency_fail = np.where(
        no_live_upstream, 0.001 + rng.uniform(0.0, 0.01, n), rng.uniform(0.001, 0.05, n)
    )
    latency_us = (np.where(failed, latency_fail, latency_ok) * 1e6).astype(np.int64)
    ended_us = started_us + latency_us
    instance = rng.choice(INSTANCES, size=n, p=LB_WEIGHTS / LB_WEIGHTS.sum())
    instance = np.where(failed, -1, instance)
    http_status = np.where(failed, np.where(no_live_upstream, 502, 503), 200)
    tokens = np.where(
        failed, 0, np.minimum(2048, np.maximum(1, latency_ok * 80 * rng.uniform(0.8, 1.2, n)))
    ).astype(np.int64)
    # index: the request's number within its step, in start order (steps are contiguous)
    first_of_step = np.searchsorted(step, steps)
    index = np.arange(n) - first_of_step[step - 1] + 1
    return {
        "rng": rng,
        "n": n,
        "started_us": started_us,
        "ended_us": ended_us,
        "latency_us": latency_us,
        "step": step,
        "index": index,
        "failed": failed,
        "instance": instance,
        "http_status": http_status,
        "tokens": tokens,
        "log_start_ns": T0 - 180 * NS,
        "log_end_ns": int(ended_us.max()) * 1000 + 30 * NS,
    }


def _client(p: dict) -> tuple[pl.DataFrame, pl.Expr]:
    frame = pl.DataFrame(
        {
            "i": np.arange(p["n"], dtype=np.int64),
            "s": p["started_us"],
            "e": p["ended_us"],
            "lat": p["latency_us"],
            "step": p["step"],
            "index": p["index"],
            "ok": ~p["failed"],
            "status": p["http_status"],
            "tokens": p["tokens"],
        }
    ).sort("e")
    iso = "%Y-%m-%dT%H:%M:%S%.6fZ"
    error = (
        pl.when(pl.col("ok"))
        .then(pl.lit("null"))
        .when(pl.col("status") == 503)
        .then(pl.lit('"HTTP Error 503: Service Temporarily Unavailable"'))
        .otherwise(pl.lit('"HTTP Error 502: Bad Gateway"'))
    )
    line = pl.concat_str(
        pl.lit('{"request_id":"bench-'),
        pl.col("i").cast(pl.Utf8).str.zfill(9),
        pl.lit('","step":'),
        pl.col("step").cast(pl.Utf8),
        pl.lit(',"index":'),
        pl.col("index").cast(pl.Utf8),
        pl.lit(',"started_at":"'),
        pl.col("s").cast(pl.Datetime("us", "UTC")).dt.to_string(iso),
        pl.lit('","ended_at":"'),
        pl.col("e").cast(pl.Datetime("us", "UTC")).dt.to_string(iso),
        pl.lit('","latency_s":'),
        _fixed(pl.col("lat"), 6),
        pl.lit(',"ok":'),
        pl.when(pl.col("ok")).then(pl.lit("true")).otherwise(pl.lit("false")),
        pl.lit(',"http_status":'),
        pl.col("status").cast(pl.Utf8),
        pl.lit(',"error":'),
        error,
        pl.lit(',"output_tokens":'),
        pl.col("tokens").cast(pl.Utf8),
        pl.lit("}"),
    )
    return frame, line


def _nginx(p: dict) -> tuple[pl.DataFrame, pl.Expr]:
    rng = p["rng"]
    n = p["n"]
    at_ns = p["ended_us"] * 1000 - rng.integers(1_000_000, 3_000_000, n)
    inst = p["instance"]
    # (drawn for every request, so the stream of draws stays as it was; refusals name none)
    routed = np.where(inst >= 0, inst, rng.integers(0, INSTANCES, n))
    frame = pl.DataFrame(
        {
            "at": at_ns,
            "status": p["http_status"],
            "ok": ~p["failed"],
            "up": routed,
            "req_ms": p["latency_us"] // 1000,
            "tokens": p["tokens"],
        }
    ).sort("at")
    body = (
        pl.when(pl.col("ok"))
        .then(350 + 4 * pl.col("tokens"))
        .when(pl.col("status") == 503)
        .then(197)
        .otherwise(157)
    )
    upstream = (
        pl.when(pl.col("ok"))
        .then(pl.concat_str(pl.lit("10.0.1."), (11 + pl.col("up")).cast(pl.Utf8), pl.lit(":8000")))
        .when(pl.col("status") == 503)
        .then(pl.lit("-"))
        .otherwise(pl.lit("vllm_pool"))
    )
    upstream_status = pl.when(pl.col("ok")).then(pl.lit("200")).otherwise(pl.lit("-"))
    upstream_time = (
        pl.when(pl.col("ok")).then(_fixed((pl.col("req_ms") - 2).clip(0), 3)).otherwise(pl.lit("-"))
    )
    line = pl.concat_str(
        pl.lit("10.0.0.2 - - ["),
        _stamp(pl.col("at"), "%d/%b/%Y:%H:%M:%S +0000"),
        pl.lit(f'] "POST {CHAT} HTTP/1.1" '),
        pl.col("status").cast(pl.Utf8),
        pl.lit(" "),
        body.cast(pl.Utf8),
        pl.lit(' "-" "python-urllib/3.11" '),
        upstream,
        pl.lit(" "),
        upstream_status,
        pl.lit(" "),
        _fixed(pl.col("req_ms"), 3),
        pl.lit(" "),
        upstream_time,
    )
    return frame, line


def _schedule(p: dict, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """An instance's startup line times and stats ticks (known before the health count)."""
    steps = rng.uniform(0.3, 5.0, len(STARTUP))
    startup = (
        p["log_start_ns"]
        + int(rng.integers(0, NS))
        + (np.concatenate([[0.0], np.cumsum(steps[:-1])]) * NS).astype(np.int64)
    )
    first = int(startup[-1]) + int(steps[-1] * NS)
    count = int((p["log_end_ns"] - first) / NS / STATS_EVERY_S) + 1
    ticks = first + (np.cumsum(STATS_EVERY_S + rng.uniform(0.0, 0.02, count)) * NS).astype(np.int64)
    return startup, ticks[ticks < p["log_end_ns"]]


def _instance_log(
    p: dict,
    k: int,
    schedule: tuple[np.ndarray, np.ndarray],
    health_lines: int,
    rng: np.random.Generator,
) -> tuple[pl.DataFrame, pl.Expr]:
    """One instance's container log: startup, access lines, health checks, stats."""
    startup, ticks = schedule
    mine = p["instance"] == k
    ends_ns = p["ended_us"][mine] * 1000
    starts_ns = p["started_us"][mine] * 1000
    m = int(mine.sum())
    parts = []

    # startup (vLLM-stamped lines and uvicorn's lifecycle lines)
    md = pl.Series(startup).cast(pl.Datetime("ns", "UTC")).dt.to_string("%m-%d %H:%M:%S").to_list()
    parts.append(
        pl.DataFrame(
            {
                "at": startup,
                "order": np.zeros(len(startup), dtype=np.int64),
                "body": [tmpl.format(md=d) for tmpl, d in zip(STARTUP, md, strict=True)],
            }
        )
    )

    # uvicorn access lines: written when the response headers go out (the end)
    at = ends_ns - rng.integers(4_000_000, 30_000_000, m)
    parts.append(
        pl.DataFrame({"at": at, "port": rng.integers(32768, 61000, m)}).select(
            "at",
            pl.lit(1, dtype=pl.Int64).alias("order"),
            pl.format(
                'INFO:     10.0.0.5:{} - "POST {} HTTP/1.1" 200 OK', pl.col("port"), pl.lit(CHAT)
            ).alias("body"),
        )
    )

    # health checks, spread over the whole log after startup
    hat = np.sort(rng.integers(int(startup[-1]) + 1, p["log_end_ns"], health_lines))
    parts.append(
        pl.DataFrame({"at": hat, "port": rng.integers(32768, 61000, health_lines)}).select(
            "at",
            pl.lit(1, dtype=pl.Int64).alias("order"),
            pl.format(
                'INFO:     10.0.0.9:{} - "GET /health HTTP/1.1" 200 OK', pl.col("port")
            ).alias("body"),
        )
    )

    # V1 stats every ~10 s: Running from the instance's own requests
    order_e = np.argsort(ends_ns)
    ends_sorted = ends_ns[order_e]
    tok_cum = np.concatenate([[0], np.cumsum(p["tokens"][mine][order_e])])
    starts_sorted = np.sort(starts_ns)
    running = np.searchsorted(starts_sorted, ticks, "right") - np.searchsorted(
        ends_sorted, ticks, "right"
    )
    window = int(STATS_EVERY_S * NS)
    gen_tokens = (
        tok_cum[np.searchsorted(ends_sorted, ticks, "right")]
        - tok_cum[np.searchsorted(ends_sorted, ticks - window, "right")]
    )
    started_in = np.searchsorted(starts_sorted, ticks, "right") - np.searchsorted(
        starts_sorted, ticks - window, "right"
    )
    stats = pl.DataFrame(
        {
            "at": ticks,
            "running": running,
            "gen10": gen_tokens,  # tokens in 10 s = tenths of tokens/s
            "prompt10": started_in * 35,
            "kv10": np.minimum(990, running * 35 // 10),  # tenths of a percent
        }
    )
    parts.append(
        stats.select(
            "at",
            pl.lit(2, dtype=pl.Int64).alias("order"),
            pl.concat_str(
                pl.lit("(APIServer pid=1) INFO "),
                _stamp(pl.col("at"), "%m-%d %H:%M:%S"),
                pl.lit(" [loggers.py:123] Engine 000: Avg prompt throughput: "),
                _fixed(pl.col("prompt10"), 1),
                pl.lit(" tokens/s, Avg generation throughput: "),
                _fixed(pl.col("gen10"), 1),
                pl.lit(" tokens/s, Running: "),
                pl.col("running").cast(pl.Utf8),
                pl.lit(" reqs, Waiting: 0 reqs, GPU KV cache usage: "),
                _fixed(pl.col("kv10"), 1),
                pl.lit("%, Prefix cache hit rate: 0.0%"),
            ).alias("body"),
        )
    )
    frame = pl.concat(parts).sort("at", "order", maintain_order=True)
    return frame, pl.concat_str(_docker(pl.col("at")), pl.col("body"))


# ------------------------------------------------------------ the bundle


def bundle_paths(
    scratch: Path, target_lines: int, seed: int, kind: str = "incident"
) -> tuple[Path, Path]:
    root = scratch / f"{size_label(target_lines, kind)}-s{seed}"
    return root / "bundle", root / "truth.json"


def generate(target_lines: int, scratch: Path, seed: int = DEFAULT_SEED) -> dict:
    """Write one bundle and its truth.json; return the truth."""
    t_begin = time.perf_counter()
    bundle, truth_path = bundle_paths(scratch, target_lines, seed)
    if bundle.exists():
        for old in sorted(bundle.rglob("*"), reverse=True):
            old.unlink() if old.is_file() else old.rmdir()
    p = _plan(target_lines, seed, RATE_PER_S)
    files: dict[str, dict] = {}

    def put(rel: str, made: tuple[pl.DataFrame, pl.Expr]) -> int:
        lines, size = _write_lines(*made, bundle / rel)
        files[rel] = {"lines": lines, "bytes": size}
        return lines

    written = put("client/results.jsonl", _client(p))
    written += put("proxy/nginx-access.log", _nginx(p))
    served = np.bincount(p["instance"][p["instance"] >= 0], minlength=INSTANCES)
    names = [f"gpu-{k}" for k in range(INSTANCES)]
    rngs = [np.random.default_rng([seed, 1, k]) for k in range(INSTANCES)]
    schedules = [_schedule(p, rng) for rng in rngs]
    fixed = written + int(served.sum()) + sum(len(a) + len(t) for a, t in schedules)
    health = target_lines - fixed  # health checks fill the budget exactly
    if health < 0:
        raise ValueError(f"line budget overrun by {-health} lines")
    for k, name in enumerate(names):
        share = health // INSTANCES + (1 if k < health % INSTANCES else 0)
        put(f"instances/{name}.log", _instance_log(p, k, schedules[k], share, rngs[k]))
    step_rows = []
    for s in range(1, STEPS + 1):
        in_step = p["step"] == s
        fails = int((in_step & p["failed"]).sum())
        step_rows.append(
            {
                "index": s,
                "sent": int(in_step.sum()),
                "succeeded": int((in_step & ~p["failed"]).sum()),
                "failed": fails,
                "unreached": fails,
                "per_instance": {
                    names[k]: int((in_step & (p["instance"] == k)).sum()) for k in range(INSTANCES)
                },
            }
        )
    n_failed = int(p["failed"].sum())
    truth = {
        "generator": {
            "version": GENERATOR_VERSION,
            "seed": seed,
            "target_lines": target_lines,
            "instances": INSTANCES,
            "rate_per_s": RATE_PER_S,
            "steps": STEPS,
        },
        "bundle": str(bundle),
        "lines": sum(f["lines"] for f in files.values()),
        "bytes": sum(f["bytes"] for f in files.values()),
        "files": files,
        "totals": {
            "sent": p["n"],
            "succeeded": p["n"] - n_failed,
            "failed": n_failed,
            "unreached": n_failed,
            "unknown": 0,
        },
        "instances": {names[k]: int(served[k]) for k in range(INSTANCES)},
        "runs": step_rows,
        "first_request": str(np.datetime64(int(p["started_us"].min()), "us")) + "Z",
        "last_response": str(np.datetime64(int(p["ended_us"].max()), "us")) + "Z",
        "generate_s": None,
    }
    truth["generate_s"] = round(time.perf_counter() - t_begin, 2)
    truth_path.write_text(json.dumps(truth, indent=2) + "\n", encoding="utf-8")
    return truth


# ------------------------------------------------------------ the short-line bundle


def _kubectl(ns: pl.Expr) -> pl.Expr:
    """`kubectl logs --timestamps`: RFC3339Nano as Go prints it (trailing zeros trimmed)."""
    nine = _stamp(ns, "%Y-%m-%dT%H:%M:%S%.9f")
    return pl.concat_str(nine.str.replace(r"0+$", "").str.replace(r"\.$", ""), pl.lit("Z "))


def generate_short(target_lines: int, scratch: Path, seed: int = DEFAULT_SEED) -> dict:
    """A short-line bundle (no client file) and its truth.json; return the truth."""
    t_begin = time.perf_counter()
    bundle, truth_path = bundle_paths(scratch, target_lines, seed, SHORT)
    if bundle.exists():
        for old in sorted(bundle.rglob("*"), reverse=True):
            old.unlink() if old.is_file() else old.rmdir()
    rng = np.random.default_rng([seed, 2])
    names = [f"vllm-{k}" for k in range(SHORT_INSTANCES)]
    n_nginx = int(target_lines * SHORT_NGINX_SHARE)
    ticks = int(target_lines * SHORT_STATS_SHARE) // SHORT_INSTANCES  # seconds of log
    startup = len(STARTUP)
    duration_ns = ticks * NS
    start_ns = T0 - 60 * NS
    at = np.sort(T0 + rng.integers(0, duration_ns - 60 * NS, n_nginx))
    refused = rng.random(n_nginx) < SHORT_REFUSED
    instance = np.where(refused, -1, rng.choice(SHORT_INSTANCES, n_nginx, p=SHORT_WEIGHTS))
    latency_ms = np.clip(rng.lognormal(np.log(800), 0.6, n_nginx), 20, 20_000).astype(np.int64)
    latency_ms = np.where(refused, 1, latency_ms)
    files: dict[str, dict] = {}

    def put(rel: str, frame: pl.DataFrame, line: pl.Expr) -> None:
        lines, size = _write_lines(frame, line, bundle / rel)
        files[rel] = {"lines": lines, "bytes": size}

    ok = ~refused
    nginx = pl.DataFrame({"at": at, "ok": ok, "up": instance, "ms": latency_ms})
    upstream = pl.concat_str(pl.lit("10.0.2."), (21 + pl.col("up")).cast(pl.Utf8), pl.lit(":8000"))
    put(
        "proxy/nginx-access.log",
        nginx,
        pl.concat_str(
            pl.lit("10.0.0.2 - - ["),
            _stamp(pl.col("at"), "%d/%b/%Y:%H:%M:%S +0000"),
            pl.lit(f'] "POST {CHAT} HTTP/1.1" '),
            pl.when("ok").then(pl.lit("200 512")).otherwise(pl.lit("503 197")),
            pl.lit(' "-" "python-httpx/0.27" '),
            pl.when("ok").then(upstream).otherwise(pl.lit("-")),
            pl.lit(" "),
            pl.when("ok").then(pl.lit("200")).otherwise(pl.lit("-")),
            pl.lit(" "),
            _fixed(pl.col("ms"), 3),
            pl.lit(" "),
            pl.when("ok").then(_fixed((pl.col("ms") - 1).clip(0), 3)).otherwise(pl.lit("-")),
        ),
    )
    records, upstreams = {}, {}
    # every instance logs as many access lines; health checks and metrics scrapes fill
    # each one's share of the line budget exactly
    access = target_lines - n_nginx - SHORT_INSTANCES * (ticks + startup)
    for k, name in enumerate(names):
        mine = at[instance == k] - rng.integers(1_000_000, 5_000_000, int((instance == k).sum()))
        own = access // SHORT_INSTANCES + (access % SHORT_INSTANCES if k == 0 else 0)
        extra = own - len(mine)
        if extra < 0:
            raise ValueError(f"{target_lines} lines is too small for a short-line bundle")
        chat = pl.DataFrame({"at": mine, "port": rng.integers(32768, 61000, len(mine))})
        other = pl.DataFrame(
            {
                "at": np.sort(start_ns + 30 * NS + rng.integers(0, duration_ns, extra)),
                "port": rng.integers(32768, 61000, extra),
                "metrics": rng.random(extra) < 0.5,
            }
        )
        tick_at = (
            start_ns
            + 20 * NS
            + np.arange(ticks, dtype=np.int64) * NS
            + rng.integers(0, 20_000_000, ticks)
        )
        started = np.searchsorted(np.sort(mine), tick_at)
        ended = np.searchsorted(np.sort(mine + 800_000_000), tick_at)
        parts = [
            pl.DataFrame(
                {
                    "at": start_ns + np.arange(startup, dtype=np.int64) * NS // 2,
                    "body": [t.format(md="02-24 05:59:00") for t in STARTUP],
                }
            ),
            chat.select(
                "at",
                pl.format(
                    'INFO:     10.0.0.2:{} - "POST {} HTTP/1.1" 200 OK', "port", pl.lit(CHAT)
                ).alias("body"),
            ),
            other.select(
                "at",
                pl.format(
                    'INFO:     10.0.3.9:{} - "GET {} HTTP/1.1" 200 OK',
                    "port",
                    pl.when("metrics").then(pl.lit("/metrics")).otherwise(pl.lit("/health")),
                ).alias("body"),
            ),
            pl.DataFrame({"at": tick_at, "running": np.maximum(0, started - ended)}).select(
                "at",
                pl.concat_str(
                    pl.lit("(APIServer pid=1) INFO "),
                    _stamp(pl.col("at"), "%m-%d %H:%M:%S"),
                    pl.lit(
                        " [loggers.py:123] Engine 000: Avg prompt throughput: 120.0 tokens/s, "
                        "Avg generation throughput: 310.5 tokens/s, Running: "
                    ),
                    pl.col("running").cast(pl.Utf8),
                    pl.lit(
                        " reqs, Waiting: 0 reqs, GPU KV cache usage: 3.1%, Prefix cache hit rate: 0.0%"
                    ),
                ).alias("body"),
            ),
        ]
        frame = pl.concat(parts).sort("at", maintain_order=True)
        put(f"instances/{name}.log", frame, pl.concat_str(_kubectl(pl.col("at")), "body"))
        records[f"instances/{name}.log"] = {
            "server_requests": len(mine) + extra,
            "engine_stats": ticks,
        }
        upstreams[f"10.0.2.{21 + k}:8000"] = {"instance": name, "lines": len(mine)}
    records["proxy/nginx-access.log"] = {
        "proxy_requests": n_nginx,
        **({"proxy_events": int(refused.sum())} if refused.any() else {}),
    }
    truth = {
        "generator": {
            "version": SHORT_VERSION,
            "kind": SHORT,
            "seed": seed,
            "target_lines": target_lines,
            "instances": SHORT_INSTANCES,
        },
        "bundle": str(bundle),
        "lines": sum(f["lines"] for f in files.values()),
        "bytes": sum(f["bytes"] for f in files.values()),
        "files": files,
        "totals": {"sent": 0, "succeeded": 0, "failed": 0, "unreached": 0, "unknown": 0},
        "instances": {name: 0 for name in names},
        "records": records,
        "upstreams": upstreams,
        "generate_s": None,
    }
    truth["generate_s"] = round(time.perf_counter() - t_begin, 2)
    truth_path.write_text(json.dumps(truth, indent=2) + "\n", encoding="utf-8")
    return truth


def is_current(truth_path: Path, target_lines: int, seed: int, kind: str = "incident") -> bool:
    """A bundle can be reused when its truth says same generator, seed and size, files intact."""
    try:
        truth = json.loads(truth_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    gen = truth.get("generator", {})
    version = SHORT_VERSION if kind == SHORT else GENERATOR_VERSION
    have = (gen.get("version"), gen.get("seed"), gen.get("target_lines"), gen.get("kind"))
    if have != (version, seed, target_lines, kind if kind == SHORT else None):
        return False
    bundle = Path(truth["bundle"])
    return all(
        (bundle / rel).is_file() and (bundle / rel).stat().st_size == meta["bytes"]
        for rel, meta in truth["files"].items()
    )


def ensure(
    target_lines: int, scratch: Path, seed: int = DEFAULT_SEED, kind: str = "incident"
) -> tuple[Path, dict, bool]:
    """The bundle for this size, kind and seed, generated unless a current one exists.

    Returns (bundle folder, truth, reused?).
    """
    bundle, truth_path = bundle_paths(scratch, target_lines, seed, kind)
    if is_current(truth_path, target_lines, seed, kind):
        return bundle, json.loads(truth_path.read_text(encoding="utf-8")), True
    make = generate_short if kind == SHORT else generate
    return bundle, make(target_lines, scratch, seed), False


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--sizes",
        default="1M,5M,20M,5M-short",
        help="comma-separated line counts (1M, 250k; 5M-short: the short-line bundle)",
    )
    ap.add_argument("--scratch", type=Path, default=DEFAULT_SCRATCH)
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("--force", action="store_true", help="regenerate even if current")
    args = ap.parse_args()
    for size in args.sizes.split(","):
        target, kind = parse_spec(size)
        if args.force:
            make = generate_short if kind == SHORT else generate
            truth, reused = make(target, args.scratch, args.seed), False
            bundle = Path(truth["bundle"])
        else:
            bundle, truth, reused = ensure(target, args.scratch, args.seed, kind)
        state = "reused" if reused else f"generated in {truth['generate_s']:.1f} s"
        print(
            f"{size_label(target, kind)}: {bundle} — {truth['lines']:,} lines, "
            f"{truth['bytes'] / 2**20:,.0f} MiB, {truth['totals']['sent']:,} requests ({state})"
        )


if __name__ == "__main__":
    main()
