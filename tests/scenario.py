"""Ground-truth incident generator: a scenario in, logs in the real formats out.

A `Scenario` says which requests were sent, when, how each ended and which
instance (if any) served it; `write_bundle` renders the client's result files
and each instance's log exactly as the real software prints them. Tests and
fixtures share it, so the truth behind every bundle is known.

Formats rendered (exact text: docs/formats.md):
* container prefixes: ``docker logs -t`` (RFC 3339, nanoseconds, Z), none
  (vLLM's own yearless stamp only), ``kubectl logs --prefix --timestamps``
  (all pods in one file);
* vLLM stats lines: V1 (``Engine 000: ... Waiting``) and V0 (old logger format
  without the opening bracket, ``Swapped``/``Pending``);
* vLLM request logging (``Received request chatcmpl-<X-Request-Id>``,
  ``Aborted request``), V0 preemption warnings;
* uvicorn access lines at the end of each non-streamed response;
* a relaying proxy's tracebacks (http.server's error banner, chained exceptions);
* client results: JSON lines (KST offsets), CSV (naive UTC), the seed script's rows.

    python -m tests.scenario all fixtures/
"""

from __future__ import annotations

import csv
import io
import json
import random
import sys
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

UTC = timezone.utc
KST = timezone(timedelta(hours=9))
CHAT_PATH = "/v1/chat/completions"
SEED_PROMPT = "클라우드 컴퓨팅을 세 문장으로 설명해주세요. ({i})"


@dataclass
class Request:
    step: int  # 0 = warm-up
    index: int
    started_at: datetime
    latency_s: float  # as the client saw it
    ok: bool
    served_by: str | None  # instance name, None = never reached one
    error: str | None = None
    http_status: int | None = 200
    output_tokens: int = 300
    peer_port: int = 0
    request_id: str | None = None  # sent as X-Request-Id
    server_latency_s: float | None = None  # how long the server worked on it, if not latency_s
    aborted: bool = False  # the client gave up; the server logged an abort

    @property
    def ended_at(self) -> datetime:
        return self.started_at + timedelta(seconds=self.latency_s)

    @property
    def server_end(self) -> datetime:
        return self.started_at + timedelta(seconds=self.server_latency_s or self.latency_s)

    @property
    def marker(self) -> str | None:
        return f"({self.index})" if self.step else None


@dataclass
class Style:
    """How the instances' logs look."""

    prefix: str = "docker"  # docker | none | kubectl (one file, every pod)
    stats: str = "v1"  # v1 | v0
    request_logging: bool = False
    max_running: int = 256  # beyond this, requests wait
    kv_per_request_pct: float = 0.1
    stats_interval_s: float = 10.0


@dataclass
class Scenario:
    name: str
    instances: list[str]
    requests: list[Request] = field(default_factory=list)
    log_start: datetime | None = None
    log_end: datetime | None = None
    style: Style = field(default_factory=Style)
    client_format: str = "jsonl"  # jsonl | csv
    seed_rows: bool = False  # also write the seed script's rows
    proxy_tracebacks_in: str | None = None  # instance whose log holds the relay's tracebacks
    traceback_steps: tuple[int, ...] = ()
    server_clock_offset_s: float = 0.0  # server clock minus client clock
    missing_logs: tuple[str, ...] = ()  # instances whose log is not in the bundle
    expected_verdict: str = "none"
    nginx_upstreams: dict[str, str] = field(
        default_factory=dict
    )  # instance → address; writes nginx logs

    @property
    def steps(self) -> list[int]:
        return sorted({r.step for r in self.requests if r.step > 0})


def seed_two_instances(rest_s: float = 150.0) -> Scenario:
    """The seed write-up's two-instance incident (SEEDS.md).

    Steps of 10, 13 and 20 concurrent requests, 150 s rest between steps;
    instance-1 serves 5 in every step, instance-2 serves 2, 3 and 10; every
    failure waits 120 s for an HTTP 503 and never reaches an instance.
    """
    rng = random.Random(20260224)
    t0 = datetime(2026, 2, 24, 6, 16, 2, 214_000, tzinfo=UTC)
    sc = Scenario(
        name="seed-two-instances",
        instances=["instance-1", "instance-2"],
        log_start=datetime(2026, 2, 24, 5, 58, 41, 100_000, tzinfo=UTC),
        log_end=datetime(2026, 2, 24, 6, 29, 55, tzinfo=UTC),
        proxy_tracebacks_in="instance-1",
        traceback_steps=(1, 2, 3),
        seed_rows=True,
        expected_verdict="front_proxy",
    )
    sc.requests.append(
        Request(0, 0, t0 - timedelta(seconds=11.5), 4.87, True, "instance-1", peer_port=40110)
    )
    plan = [(10, 5, 2), (13, 5, 3), (20, 5, 10)]
    start = t0
    for step, (sent, on_1, on_2) in enumerate(plan, start=1):
        outcome = ["instance-1"] * on_1 + ["instance-2"] * on_2
        outcome += [None] * (sent - len(outcome))
        rng.shuffle(outcome)
        for i, inst in enumerate(outcome, start=1):
            at = start + timedelta(seconds=rng.uniform(0.0, 0.012))
            if inst:
                latency = round(rng.uniform(3.38, 3.79), 2)
                sc.requests.append(
                    Request(step, i, at, latency, True, inst, peer_port=40200 + step * 40 + i)
                )
            else:
                latency = round(rng.uniform(120.02, 120.41), 2)
                sc.requests.append(
                    Request(
                        step,
                        i,
                        at,
                        latency,
                        False,
                        None,
                        "HTTP Error 503: Service Unavailable",
                        503,
                        output_tokens=0,
                    )
                )
        step_requests = [r for r in sc.requests if r.step == step]
        # the seed's first, garbage measurement: the next step went as soon as the successes were back
        last_end = max(r.ended_at for r in step_requests if r.ok or rest_s)
        start = last_end + timedelta(seconds=rest_s + rng.uniform(0.2, 0.9))
    return sc


def seed_missing_instance_log() -> Scenario:
    """The seed incident with instance-2's log lost: who served what cannot be proven."""
    sc = seed_two_instances()
    sc.name = "seed-one-log-missing"
    sc.missing_logs = ("instance-2",)
    sc.seed_rows = False
    sc.expected_verdict = "inconclusive"
    return sc


def _closed_loop_steps(
    rng: random.Random,
    instances: list[str],
    plan: list[int],
    latency_at: callable,
    t0: datetime,
    timeout_s: float,
    pick: callable,
    rest_s: float = 40.0,
    request_ids: bool = True,
) -> list[Request]:
    """Steps of N concurrent requests; latency depends on the instance's load."""
    out = []
    start = t0
    for step, sent in enumerate(plan, start=1):
        choice = [pick(rng, i, sent) for i in range(sent)]
        for i, inst in enumerate(choice, start=1):
            load = choice.count(inst)
            at = start + timedelta(seconds=rng.uniform(0.0, 0.02))
            server_latency = round(latency_at(load) * rng.uniform(0.95, 1.05), 2)
            rid = f"lf-9c1e-s{step}-{i}" if request_ids else None
            if server_latency <= timeout_s:
                out.append(
                    Request(
                        step,
                        i,
                        at,
                        server_latency,
                        True,
                        inst,
                        request_id=rid,
                        peer_port=41000 + step * 100 + i,
                        output_tokens=256,
                    )
                )
            else:
                out.append(
                    Request(
                        step,
                        i,
                        at,
                        timeout_s + rng.uniform(0.0, 0.02),
                        False,
                        inst,
                        "timed out",
                        None,
                        output_tokens=0,
                        request_id=rid,
                        server_latency_s=server_latency,
                        aborted=True,
                    )
                )
        last_end = max(r.ended_at for r in out if r.step == step)
        start = last_end + timedelta(seconds=rest_s + rng.uniform(0, 1))
    return out


def kv_cache_exhaustion() -> Scenario:
    """One instance whose KV cache fills: preemptions, waiting requests, timeouts.

    V0 engine, old logger format without the opening bracket, no container
    prefix (vLLM's yearless stamps only), client results as CSV.
    """
    rng = random.Random(42)
    t0 = datetime(2026, 3, 9, 13, 2, 5, 310_000, tzinfo=UTC)
    sc = Scenario(
        name="kv-cache-exhaustion",
        instances=["llama-8b-0"],
        log_start=t0 - timedelta(minutes=6),
        style=Style(
            prefix="none",
            stats="v0",
            request_logging=True,
            max_running=9,
            kv_per_request_pct=10.8,
            stats_interval_s=5.0,
        ),
        client_format="csv",
        expected_verdict="kv_cache",
    )
    # past 9 running sequences the cache is full: queued requests wait, latency explodes
    sc.requests = _closed_loop_steps(
        rng,
        sc.instances,
        [4, 8, 16, 24],
        latency_at=lambda load: 6.0 if load <= 9 else 6.0 * (load / 9) ** 2.6,
        t0=t0,
        timeout_s=30.0,
        pick=lambda rng, i, n: "llama-8b-0",
    )
    sc.log_end = max(r.server_end for r in sc.requests) + timedelta(seconds=30)
    return sc


def gpu_saturation() -> Scenario:
    """Two instances at their compute limit: queueing with KV room, latency growing."""
    rng = random.Random(7)
    t0 = datetime(2026, 4, 2, 9, 30, 11, 5_000, tzinfo=UTC)
    names = ["gpu-a", "gpu-b"]
    sc = Scenario(
        name="gpu-saturation",
        instances=names,
        log_start=t0 - timedelta(minutes=4),
        style=Style(
            prefix="docker",
            stats="v1",
            request_logging=True,
            max_running=24,
            kv_per_request_pct=1.9,
        ),
        expected_verdict="gpu",
    )
    sc.requests = _closed_loop_steps(
        rng,
        names,
        [8, 16, 32, 64, 96],
        latency_at=lambda load: 4.0 * max(1.0, load / 6) ** 1.1,
        t0=t0,
        timeout_s=30.0,
        pick=lambda rng, i, n: names[i % 2],
    )
    sc.log_end = max(r.server_end for r in sc.requests) + timedelta(seconds=30)
    return sc


def healthy() -> Scenario:
    """Three instances, every request succeeds; kubectl --prefix, one file for all pods."""
    rng = random.Random(5)
    t0 = datetime(2026, 5, 20, 22, 10, 0, 500_000, tzinfo=UTC)
    names = ["vllm-0", "vllm-1", "vllm-2"]
    sc = Scenario(
        name="healthy",
        instances=names,
        log_start=t0 - timedelta(minutes=3),
        style=Style(prefix="kubectl", stats="v1", kv_per_request_pct=0.8),
        expected_verdict="none",
    )
    sc.requests = _closed_loop_steps(
        rng,
        names,
        [6, 12, 24],
        latency_at=lambda load: 3.2 + 0.02 * load,
        t0=t0,
        timeout_s=120.0,
        pick=lambda rng, i, n: names[i % 3],
        request_ids=False,
    )
    sc.log_end = max(r.server_end for r in sc.requests) + timedelta(seconds=40)
    return sc


def skewed_balancer() -> Scenario:
    """A healthy backend behind a balancer that sends most traffic to one of four instances."""
    rng = random.Random(99)
    t0 = datetime(2026, 6, 11, 3, 0, 0, tzinfo=UTC)
    names = ["node-1", "node-2", "node-3", "node-4"]
    sc = Scenario(
        name="skewed-balancer",
        instances=names,
        log_start=t0 - timedelta(minutes=2),
        style=Style(prefix="docker", stats="v1", kv_per_request_pct=0.5),
        expected_verdict="none",
    )
    weights = [0.7, 0.1, 0.1, 0.1]
    sc.requests = _closed_loop_steps(
        rng,
        names,
        [20, 40, 60],
        latency_at=lambda load: 3.0 + 0.03 * load,
        t0=t0,
        timeout_s=120.0,
        pick=lambda rng, i, n: rng.choices(names, weights)[0],
    )
    sc.log_end = max(r.server_end for r in sc.requests) + timedelta(seconds=30)
    return sc


def nginx_max_conns() -> Scenario:
    """nginx in front of two instances with `max_conns=6` each: beyond 12 in flight it
    answers 502 at once ("no live upstreams"). gpu-b's own log was lost; nginx's log
    proves what reached it."""
    rng = random.Random(31)
    t0 = datetime(2026, 7, 1, 14, 0, 3, 120_000, tzinfo=UTC)
    names = ["gpu-a", "gpu-b"]
    sc = Scenario(
        name="nginx-max-conns",
        instances=names,
        log_start=t0 - timedelta(minutes=3),
        style=Style(prefix="docker", stats="v1", kv_per_request_pct=0.9),
        missing_logs=("gpu-b",),
        nginx_upstreams={"gpu-a": "10.0.1.11:8000", "gpu-b": "10.0.1.12:8000"},
        expected_verdict="front_proxy",
    )
    start = t0
    for step, sent in enumerate([6, 12, 24], start=1):
        for i in range(1, sent + 1):
            at = start + timedelta(seconds=rng.uniform(0.0, 0.02))
            if i <= 12:
                inst = names[i % 2]
                # gpu-b is an older card: its answers come ~3 s later
                latency = rng.uniform(3.3, 3.9) if inst == "gpu-a" else rng.uniform(6.6, 7.4)
                sc.requests.append(
                    Request(
                        step, i, at, round(latency, 2), True, inst, peer_port=42000 + step * 100 + i
                    )
                )
            else:
                sc.requests.append(
                    Request(
                        step,
                        i,
                        at,
                        round(rng.uniform(0.004, 0.02), 3),
                        False,
                        None,
                        "HTTP Error 502: Bad Gateway",
                        502,
                        output_tokens=0,
                    )
                )
        start = max(r.ended_at for r in sc.requests if r.step == step) + timedelta(seconds=30)
    sc.log_end = start
    return sc


# ---------------------------------------------------------------- rendering


def rfc3339_nano(t: datetime, rng: random.Random) -> str:
    """docker logs -t / kubectl --timestamps: UTC, nanoseconds, 'Z'."""
    t = t.astimezone(UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond:06d}{rng.randrange(1000):03d}Z"


def vllm_stamp(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%m-%d %H:%M:%S")


def client_records(sc: Scenario) -> list[dict]:
    out = []
    for r in sorted(sc.requests, key=lambda r: (r.step, r.index)):
        out.append(
            {
                "request_id": r.request_id,
                "step": r.step,
                "concurrency": sum(1 for x in sc.requests if x.step == r.step),
                "index": r.index,
                "warmup": r.step == 0,
                "started_at": r.started_at,
                "ended_at": r.ended_at,
                "latency_s": r.latency_s,
                "ok": r.ok,
                "http_status": r.http_status,
                "error": r.error,
                "output_tokens": r.output_tokens,
                "marker": r.marker,
            }
        )
    return out


def client_jsonl(sc: Scenario) -> str:
    """The requests as JSON lines, stamped in the client's local zone (KST)."""
    lines = []
    for rec in client_records(sc):
        rec = {k: v for k, v in rec.items() if not (k == "request_id" and v is None)}
        for k in ("started_at", "ended_at"):
            rec[k] = rec[k].astimezone(KST).isoformat(timespec="microseconds")
        lines.append(json.dumps(rec, ensure_ascii=False))
    return "\n".join(lines) + "\n"


def client_csv(sc: Scenario) -> str:
    """The requests as CSV with other common spellings, naive UTC times."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(
        [
            "id",
            "step",
            "i",
            "start_time",
            "end_time",
            "latency",
            "status_code",
            "error",
            "completion_tokens",
            "warmup",
        ]
    )
    for rec in client_records(sc):
        writer.writerow(
            [
                rec["request_id"] or "",
                rec["step"],
                rec["index"],
                rec["started_at"].strftime("%Y-%m-%d %H:%M:%S.%f"),
                rec["ended_at"].strftime("%Y-%m-%d %H:%M:%S.%f"),
                rec["latency_s"],
                "" if rec["http_status"] is None else rec["http_status"],
                rec["error"] or "",
                rec["output_tokens"],
                str(rec["warmup"]).lower(),
            ]
        )
    return buf.getvalue()


def seed_rows(sc: Scenario) -> str:
    """The seed script's output: a header per step, then one tuple per request."""
    out = []
    for step in sc.steps:
        rows = sorted((r for r in sc.requests if r.step == step), key=lambda r: r.index)
        out.append(f"# N={len(rows)}")
        for r in rows:
            outcome = "OK" if r.ok else (r.error or "")[:40]
            out.append(repr((r.index, r.latency_s, r.output_tokens, outcome)))
        total = max(r.ended_at for r in rows) - min(r.started_at for r in rows)
        out.append(f"total {total.total_seconds():.2f}s")
        out.append("")
    return "\n".join(out)


STARTUP = [
    ("INFO", "api_server.py:1395", "vLLM API server version 0.10.1.1"),
    (
        "INFO",
        "utils.py:326",
        "non-default args: {'model': 'google/gemma-4-e4b-it', 'max_model_len': 8192}",
    ),
    ("INFO", "config.py:1604", "Using max model len 8192"),
    (
        "INFO",
        "core.py:73",
        "Initializing a V1 LLM engine (v0.10.1.1) with config: model='google/gemma-4-e4b-it'",
    ),
    ("INFO", "gpu_model_runner.py:1892", "Model loading took 15.7402 GiB and 9.417 seconds"),
    ("INFO", "kv_cache_utils.py:833", "GPU KV cache size: 1,402,880 tokens"),
    ("INFO", "kv_cache_utils.py:837", "Maximum concurrency for 8,192 tokens per request: 171.25x"),
    ("INFO", "api_server.py:1818", "Starting vLLM API server 0 on http://0.0.0.0:8000"),
    ("INFO", "launcher.py:29", "Available routes are:"),
    ("INFO", "launcher.py:37", "Route: /v1/chat/completions, Methods: POST"),
]
STARTUP_V0 = [
    ("INFO", "api_server.py:219", "vLLM API server version 0.5.4"),
    (
        "INFO",
        "llm_engine.py:174",
        "Initializing an LLM engine (v0.5.4) with config: model='meta-llama/Meta-Llama-3.1-8B-Instruct'",
    ),
    ("INFO", "model_runner.py:732", "Loading model weights took 14.9888 GB"),
    ("INFO", "gpu_executor.py:102", "# GPU blocks: 5402, # CPU blocks: 2048"),
    ("INFO", "api_server.py:292", "Available routes are:"),
]
UVICORN_START = [
    "INFO:     Started server process [1]",
    "INFO:     Waiting for application startup.",
    "INFO:     Application startup complete.",
    "INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)",
]


def _traceback(peer_port: int) -> list[str]:
    return [
        "----------------------------------------",
        f"Exception occurred during processing of request from ('10.0.0.2', {peer_port})",
        "Traceback (most recent call last):",
        '  File "/app/proxy.py", line 74, in _forward',
        "    with urllib.request.urlopen(req, timeout=120) as resp:",
        '  File "/usr/lib/python3.11/urllib/request.py", line 216, in urlopen',
        "    return opener.open(url, data, timeout)",
        "TimeoutError",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3.11/socketserver.py", line 691, in process_request_thread',
        "    self.finish_request(request, client_address)",
        '  File "/app/proxy.py", line 76, in _forward',
        '    self.send_error(502, f"Bad Gateway: {exc}")',
        '  File "/usr/lib/python3.11/http/server.py", line 492, in send_error',
        "    self.wfile.write(body)",
        "BrokenPipeError: [Errno 32] Broken pipe",
        "----------------------------------------",
    ]


def _vllm_line(style: Style, level: str, t: datetime, loc: str, msg: str) -> str:
    if style.stats == "v0":  # the old logger format: no process prefix, no opening bracket
        return f"{level} {vllm_stamp(t)} {loc}] {msg}"
    return f"(APIServer pid=1) {level} {vllm_stamp(t)} [{loc}] {msg}"


def instance_events(sc: Scenario, name: str, rng: random.Random) -> list[tuple[datetime, int, str]]:
    """One instance's lines as (true time, order, text without runtime prefix)."""
    style = sc.style
    offset = timedelta(seconds=sc.server_clock_offset_s)  # server clock minus true time
    events: list[tuple[datetime, int, str]] = []
    t = sc.log_start
    for level, loc, msg in STARTUP_V0 if style.stats == "v0" else STARTUP:
        events.append((t, 0, _vllm_line(style, level, t + offset, loc, msg)))
        t += timedelta(seconds=rng.uniform(0.3, 9.0))
    for line in UVICORN_START:
        events.append((t, 0, line))
        t += timedelta(milliseconds=rng.uniform(2, 40))
    served = [r for r in sc.requests if r.served_by == name]
    for r in served:
        if style.request_logging:
            rid = f"chatcmpl-{r.request_id or format(rng.getrandbits(128), '032x')}"
            prompt = (
                "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\\n\\n"
                + SEED_PROMPT.format(i=r.index)
            )
            events.append(
                (
                    r.started_at,
                    1,
                    _vllm_line(
                        style,
                        "INFO",
                        r.started_at + offset,
                        "logger.py:39",
                        f"Received request {rid}: prompt: '{prompt}', params: SamplingParams(n=1, "
                        f"temperature=0.0, max_tokens=300), prompt_token_ids: None, lora_request: None.",
                    ),
                )
            )
            if r.aborted:
                events.append(
                    (
                        r.ended_at,
                        1,
                        _vllm_line(
                            style,
                            "INFO",
                            r.ended_at + offset,
                            "async_llm_engine.py:181",
                            f"Aborted request {rid}.",
                        ),
                    )
                )
        if r.ok:
            # uvicorn logs when the response headers go out: the end of a non-streamed request.
            at = r.ended_at - timedelta(seconds=rng.uniform(0.004, 0.03))
            events.append(
                (at, 1, f'INFO:     10.0.0.2:{r.peer_port} - "POST {CHAT_PATH} HTTP/1.1" 200 OK')
            )
    health = sc.log_start + timedelta(seconds=70)
    while health < sc.log_end:
        port = rng.randrange(32768, 60999)
        events.append((health, 1, f'INFO:     10.0.0.2:{port} - "GET /health HTTP/1.1" 200 OK'))
        health += timedelta(seconds=30 + rng.uniform(-0.05, 0.05))
    events += _stats_events(sc, name, served, rng)
    if name == sc.proxy_tracebacks_in:
        for step in sc.traceback_steps:
            failed = [r for r in sc.requests if r.step == step and r.served_by is None]
            if failed:
                at = failed[0].started_at + timedelta(seconds=120.0)
                for k, line in enumerate(_traceback(51000 + step)):
                    events.append((at + timedelta(microseconds=40 * k), 3, line))
    events.sort(key=lambda e: (e[0], e[1]))
    return events


def _stats_events(sc: Scenario, name: str, served: list[Request], rng: random.Random):
    """The engine's periodic stats while it has had work since the last line."""
    style = sc.style
    offset = timedelta(seconds=sc.server_clock_offset_s)
    busy = [(r.started_at, r.server_end) for r in served]
    interval = timedelta(seconds=style.stats_interval_s)
    tick = sc.log_start + timedelta(seconds=95)
    last_active = None
    preempted = 0
    out = []
    while tick < sc.log_end:
        window_start = tick - interval
        inflight = sum(1 for s, e in busy if s <= tick < e)
        running = min(inflight, style.max_running)
        waiting = inflight - running
        worked = [(s, e) for s, e in busy if s < tick and e > window_start]
        if worked or (last_active and tick - last_active <= interval):
            tokens = sum(
                300
                * (min(e, tick) - max(s, window_start)).total_seconds()
                / (e - s).total_seconds()
                for s, e in worked
            )
            gen = tokens / style.stats_interval_s
            kv = min(
                99.9, style.kv_per_request_pct * running + (rng.uniform(0, 0.6) if running else 0)
            )
            if style.stats == "v0":
                msg = (
                    f"Avg prompt throughput: {len(worked) * 4.2:.1f} tokens/s, Avg generation throughput: "
                    f"{gen:.1f} tokens/s, Running: {running} reqs, Swapped: 0 reqs, Pending: {waiting} reqs, "
                    f"GPU KV cache usage: {kv:.1f}%, CPU KV cache usage: 0.0%."
                )
                out.append(
                    (tick, 2, _vllm_line(style, "INFO", tick + offset, "metrics.py:351", msg))
                )
                if waiting and kv >= 95:
                    preempted += 1
                    warn = (
                        f"Sequence group cmpl-{rng.getrandbits(64):016x}-0 is preempted by "
                        "PreemptionMode.RECOMPUTE mode because there is not enough KV cache space. This "
                        "can affect the end-to-end performance. Increase gpu_memory_utilization or "
                        f"tensor_parallel_size to provide more KV cache memory. "
                        f"total_num_cumulative_preemption={preempted}"
                    )
                    out.append(
                        (
                            tick + timedelta(milliseconds=3),
                            2,
                            _vllm_line(style, "WARNING", tick + offset, "scheduler.py:1089", warn),
                        )
                    )
            else:
                msg = (
                    f"Engine 000: Avg prompt throughput: {len(worked) * 3.1:.1f} tokens/s, "
                    f"Avg generation throughput: {gen:.1f} tokens/s, Running: {running} reqs, "
                    f"Waiting: {waiting} reqs, GPU KV cache usage: {kv:.1f}%, Prefix cache hit rate: 0.0%"
                )
                out.append(
                    (tick, 2, _vllm_line(style, "INFO", tick + offset, "loggers.py:123", msg))
                )
            if worked:
                last_active = tick
        tick += interval + timedelta(seconds=rng.uniform(0.0, 0.02))
    return out


def render_instance(sc: Scenario, name: str, rng: random.Random) -> str:
    offset = timedelta(seconds=sc.server_clock_offset_s)
    events = instance_events(sc, name, rng)
    if sc.style.prefix == "none":
        return "".join(f"{body}\n" for _, _, body in events)
    # events hold true times; the log shows the server's clock
    return "".join(f"{rfc3339_nano(at + offset, rng)} {body}\n" for at, _, body in events)


def render_kubectl(sc: Scenario, rng: random.Random) -> str:
    """`kubectl logs -l app=vllm --prefix --timestamps`: every pod in one stream."""
    offset = timedelta(seconds=sc.server_clock_offset_s)
    merged = []
    for name in sc.instances:
        if name in sc.missing_logs:
            continue
        for at, order, body in instance_events(sc, name, rng):
            merged.append((at, order, f"[pod/{name}/vllm] {rfc3339_nano(at + offset, rng)} {body}"))
    merged.sort(key=lambda e: (e[0], e[1]))
    return "".join(f"{line}\n" for _, _, line in merged)


NGINX_MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]


def nginx_logs(sc: Scenario, rng: random.Random) -> tuple[str, str]:
    """nginx access log (combined + $upstream_addr $upstream_status $request_time
    $upstream_response_time) and error.log, both stamped when the request ended."""
    access, errors = [], []
    for r in sorted(sc.requests, key=lambda r: r.ended_at):
        t = r.ended_at.astimezone(UTC)
        local = f"{t.day:02d}/{NGINX_MONTHS[t.month - 1]}/{t.year}:{t:%H:%M:%S} +0000"
        if r.served_by:
            up = sc.nginx_upstreams[r.served_by]
            size = rng.randrange(900, 1600)
            upstream = f"{up} {r.http_status} {r.latency_s:.3f} {max(0.0, r.latency_s - 0.002):.3f}"
        else:
            size = 157
            upstream = f"vllm_backend {r.http_status} {r.latency_s:.3f} 0.000"
            errors.append(
                f"{t:%Y/%m/%d %H:%M:%S} [error] 31#31: *{1000 + len(errors)} no live upstreams while "
                f'connecting to upstream, client: 10.0.3.7, server: _, request: "POST {CHAT_PATH} HTTP/1.1", '
                f'upstream: "http://vllm_backend{CHAT_PATH}", host: "llm.internal"'
            )
        access.append(
            f'10.0.3.7 - - [{local}] "POST {CHAT_PATH} HTTP/1.1" {r.http_status} {size} "-" '
            f'"python-requests/2.32.3" {upstream}'
        )
    return "\n".join(access) + "\n", "\n".join(errors) + ("\n" if errors else "")


def write_bundle(sc: Scenario, folder: Path, seed: int = 7) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    client = folder / "client"
    client.mkdir(exist_ok=True)
    if sc.client_format == "csv":
        (client / "results.csv").write_text(client_csv(sc), encoding="utf-8")
    else:
        (client / "results.jsonl").write_text(client_jsonl(sc), encoding="utf-8")
    if sc.seed_rows:
        (client / "rows.txt").write_text(seed_rows(sc), encoding="utf-8")
    if sc.nginx_upstreams:
        access, errors = nginx_logs(sc, random.Random(seed + 1))
        (folder / "nginx").mkdir(exist_ok=True)
        (folder / "nginx" / "access.log").write_text(access, encoding="utf-8")
        (folder / "nginx" / "error.log").write_text(errors, encoding="utf-8")
    if sc.style.prefix == "kubectl":
        (folder / "pods.log").write_text(render_kubectl(sc, rng), encoding="utf-8")
        return
    for name in sc.instances:
        text = render_instance(sc, name, rng)  # rendered even when missing: same randomness
        if name not in sc.missing_logs:
            (folder / f"{name}.log").write_text(text, encoding="utf-8")


def truth(sc: Scenario) -> dict:
    """What really happened: counts per step, per instance, never-reached."""
    runs = []
    for step in sc.steps:
        rows = [r for r in sc.requests if r.step == step]
        runs.append(
            {
                "index": step,
                "concurrency": len(rows),
                "sent": len(rows),
                "succeeded": sum(r.ok for r in rows),
                "failed": sum(not r.ok for r in rows),
                "unreached": sum(r.served_by is None for r in rows),
                "per_instance": {n: sum(r.served_by == n for r in rows) for n in sc.instances},
            }
        )
    return {
        "totals": {
            k: sum(r[k] for r in runs) for k in ("sent", "succeeded", "failed", "unreached")
        },
        "runs": runs,
    }


def expected(sc: Scenario) -> dict:
    """What a correct analysis of the bundle must say: the truth, less what the logs cannot prove."""
    want = {"verdict": {"bottleneck": sc.expected_verdict}, **truth(sc)}
    if sc.missing_logs and sc.nginx_upstreams:
        # the proxy's log still tells: refusals are unreached, deliveries reached (unverified)
        for run in want["runs"]:
            # an upstream whose instance left no log keeps its address: nothing can name it
            run["per_upstream"] = {
                (sc.nginx_upstreams[n] if n in sc.missing_logs else n): run["per_instance"][n]
                for n in sc.instances
                if run["per_instance"][n]
            }
            for n in sc.missing_logs:
                run["per_instance"].pop(n)
            run["unknown"] = 0
    elif sc.missing_logs:
        # a lost log hides who served its requests (they reached an instance all the same),
        # and so whether failures reached anyone
        for run in want["runs"]:
            run["reached_unseen"] = sum(run["per_instance"].pop(n) for n in sc.missing_logs)
            run["unknown"] = run["failed"]
            run["unreached"] = 0
        want["totals"]["unreached"] = 0
        for key in ("unknown", "reached_unseen"):
            want["totals"][key] = sum(r[key] for r in want["runs"])
    return want


SCENARIOS = {
    "seed-two-instances": seed_two_instances,
    "seed-one-log-missing": seed_missing_instance_log,
    "kv-cache-exhaustion": kv_cache_exhaustion,
    "gpu-saturation": gpu_saturation,
    "healthy": healthy,
    "skewed-balancer": skewed_balancer,
    "nginx-max-conns": nginx_max_conns,
}


def write_fixture(name: str, root: Path) -> Path:
    sc = SCENARIOS[name]()
    folder = root / sc.name
    write_bundle(sc, folder)
    (folder / "expected.json").write_text(
        json.dumps(expected(sc), indent=2) + "\n", encoding="utf-8"
    )
    return folder


if __name__ == "__main__":
    which, root = sys.argv[1], Path(sys.argv[2])
    for name in SCENARIOS if which == "all" else [which]:
        print(f"wrote {write_fixture(name, root)}")
