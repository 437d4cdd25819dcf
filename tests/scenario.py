"""Ground-truth incident generator: a scenario in, logs in the real formats out.

A `Scenario` says which requests were sent, when, how each ended and which
instance (if any) served it; `write_bundle` renders the client's result files
and each instance's container log exactly as the real software prints them
(``docker logs -t`` RFC 3339 prefixes, vLLM V1 stats lines, uvicorn access
lines, a relaying proxy's tracebacks). Tests and fixtures share it, so the
truth behind every bundle is known.

    python -m tests.scenario seed fixtures/seed-two-instances
"""

from __future__ import annotations

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
    latency_s: float
    ok: bool
    served_by: str | None  # instance name, None = never reached one
    error: str | None = None
    http_status: int | None = 200
    output_tokens: int = 300
    peer_port: int = 0

    @property
    def ended_at(self) -> datetime:
        return self.started_at + timedelta(seconds=self.latency_s)


@dataclass
class Scenario:
    instances: list[str]
    requests: list[Request] = field(default_factory=list)
    log_start: datetime | None = None
    log_end: datetime | None = None
    proxy_tracebacks_in: str | None = None  # instance whose log holds the relay's tracebacks
    traceback_steps: tuple[int, ...] = ()
    server_clock_offset_s: float = 0.0  # server clock minus client clock

    @property
    def steps(self) -> list[int]:
        return sorted({r.step for r in self.requests if r.step > 0})


def seed_two_instances() -> Scenario:
    """The seed write-up's two-instance incident (SEEDS.md).

    Steps of 10, 13 and 20 concurrent requests, 150 s rest between steps;
    instance-1 serves 5 in every step, instance-2 serves 2, 3 and 10; every
    failure waits 120 s for an HTTP 503 and never reaches an instance.
    """
    rng = random.Random(20260224)
    t0 = datetime(2026, 2, 24, 6, 16, 2, 214_000, tzinfo=UTC)
    sc = Scenario(
        instances=["instance-1", "instance-2"],
        log_start=datetime(2026, 2, 24, 5, 58, 41, 100_000, tzinfo=UTC),
        log_end=datetime(2026, 2, 24, 6, 29, 55, tzinfo=UTC),
        proxy_tracebacks_in="instance-1",
        traceback_steps=(1, 2, 3),
    )
    sc.requests.append(
        Request(0, 0, t0 - timedelta(seconds=11.5), 4.87, True, "instance-1", peer_port=40110)
    )
    plan = [(10, 5, 2), (13, 5, 3), (20, 5, 10)]
    start = t0
    for step, (sent, on_1, on_2) in enumerate(plan, start=1):
        served = ["instance-1"] * on_1 + ["instance-2"] * on_2
        failed = sent - len(served)
        outcome = served + [None] * failed
        rng.shuffle(outcome)
        for i, inst in enumerate(outcome, start=1):
            jitter = rng.uniform(0.0, 0.012)
            if inst:
                sc.requests.append(
                    Request(
                        step,
                        i,
                        start + timedelta(seconds=jitter),
                        round(rng.uniform(3.38, 3.79), 2),
                        True,
                        inst,
                        peer_port=40200 + step * 40 + i,
                    )
                )
            else:
                sc.requests.append(
                    Request(
                        step,
                        i,
                        start + timedelta(seconds=jitter),
                        round(rng.uniform(120.02, 120.41), 2),
                        False,
                        None,
                        error="HTTP Error 503: Service Unavailable",
                        http_status=503,
                        output_tokens=0,
                    )
                )
        last_end = max(r.ended_at for r in sc.requests if r.step == step)
        start = last_end + timedelta(seconds=150 + rng.uniform(0.2, 0.9))
    return sc


# ---------------------------------------------------------------- rendering


def rfc3339_nano(t: datetime, rng: random.Random) -> str:
    """docker logs -t / kubectl --timestamps: UTC, nanoseconds, 'Z'."""
    t = t.astimezone(UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond:06d}{rng.randrange(1000):03d}Z"


def vllm_stamp(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%m-%d %H:%M:%S")


def client_jsonl(sc: Scenario) -> str:
    """The same requests as JSON lines, stamped in the client's local zone (KST)."""
    out = []
    for r in sorted(sc.requests, key=lambda r: (r.step, r.index)):
        out.append(
            json.dumps(
                {
                    "step": r.step,
                    "concurrency": sum(1 for x in sc.requests if x.step == r.step),
                    "index": r.index,
                    "warmup": r.step == 0,
                    "started_at": r.started_at.astimezone(KST).isoformat(timespec="microseconds"),
                    "ended_at": r.ended_at.astimezone(KST).isoformat(timespec="microseconds"),
                    "latency_s": r.latency_s,
                    "ok": r.ok,
                    "http_status": r.http_status,
                    "error": r.error,
                    "output_tokens": r.output_tokens,
                    "marker": f"({r.index})" if r.step else None,
                },
                ensure_ascii=False,
            )
        )
    return "\n".join(out) + "\n"


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
UVICORN_START = [
    "INFO:     Started server process [1]",
    "INFO:     Waiting for application startup.",
    "INFO:     Application startup complete.",
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


def instance_log(sc: Scenario, name: str, rng: random.Random) -> str:
    """One instance's `docker logs -t` output: startup, access, stats, health checks."""
    events: list[tuple[datetime, int, str]] = []  # (time, order, body)
    offset = timedelta(seconds=sc.server_clock_offset_s)  # server clock minus true time
    t = sc.log_start
    for level, loc, msg in STARTUP:
        events.append((t, 0, f"(APIServer pid=1) {level} {vllm_stamp(t + offset)} [{loc}] {msg}"))
        t += timedelta(seconds=rng.uniform(0.3, 9.0))
    for line in UVICORN_START:
        events.append((t, 0, line))
        t += timedelta(milliseconds=rng.uniform(2, 40))
    served = [r for r in sc.requests if r.served_by == name]
    for r in served:
        # uvicorn logs when the response headers go out: the end of a non-streamed request.
        at = r.ended_at - timedelta(seconds=rng.uniform(0.004, 0.03))
        events.append(
            (at, 1, f'INFO:     10.0.0.2:{r.peer_port} - "POST {CHAT_PATH} HTTP/1.1" 200 OK')
        )
    health = sc.log_start + timedelta(seconds=70)
    while health < sc.log_end:
        events.append(
            (
                health,
                1,
                f'INFO:     10.0.0.2:{rng.randrange(32768, 60999)} - "GET /health HTTP/1.1" 200 OK',
            )
        )
        health += timedelta(seconds=30 + rng.uniform(-0.05, 0.05))
    # V1 logs stats every 10 s while the engine has had work since the last line.
    busy = [(r.started_at, r.ended_at) for r in served]
    tick = sc.log_start + timedelta(seconds=95)
    last_active = None
    while tick < sc.log_end:
        window = (tick - timedelta(seconds=10), tick)
        running = sum(1 for s, e in busy if s <= tick < e)
        worked = [(s, e) for s, e in busy if s < window[1] and e > window[0]]
        if worked or (last_active and tick - last_active <= timedelta(seconds=10)):
            tokens = sum(
                300
                * (min(e, window[1]) - max(s, window[0])).total_seconds()
                / (e - s).total_seconds()
                for s, e in worked
            )
            gen = tokens / 10.0
            kv = 0.1 * running
            events.append(
                (
                    tick,
                    2,
                    (
                        f"(APIServer pid=1) INFO {vllm_stamp(tick + offset)} [loggers.py:123] Engine 000: "
                        f"Avg prompt throughput: {len(worked) * 3.1:.1f} tokens/s, "
                        f"Avg generation throughput: {gen:.1f} tokens/s, Running: {running} reqs, "
                        f"Waiting: 0 reqs, GPU KV cache usage: {kv:.1f}%, Prefix cache hit rate: 0.0%"
                    ),
                )
            )
            if worked:
                last_active = tick
        tick += timedelta(seconds=10 + rng.uniform(0.0, 0.02))
    if name == sc.proxy_tracebacks_in:
        for step in sc.traceback_steps:
            failed = [r for r in sc.requests if r.step == step and r.served_by is None]
            if failed:
                r = failed[0]
                at = r.started_at + timedelta(seconds=120.0)
                for k, line in enumerate(_traceback(51000 + step)):
                    events.append((at + timedelta(microseconds=40 * k), 3, line))
    events.sort(key=lambda e: (e[0], e[1]))
    # events hold true times; the log shows the server's clock
    return "".join(f"{rfc3339_nano(at + offset, rng)} {body}\n" for at, _, body in events)


def write_bundle(sc: Scenario, folder: Path, seed: int = 7) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    (folder / "client").mkdir(exist_ok=True)
    (folder / "client" / "results.jsonl").write_text(client_jsonl(sc), encoding="utf-8")
    (folder / "client" / "rows.txt").write_text(seed_rows(sc), encoding="utf-8")
    for name in sc.instances:
        (folder / f"{name}.log").write_text(instance_log(sc, name, rng), encoding="utf-8")


def truth(sc: Scenario) -> dict:
    """The counts a correct analysis must find."""
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
            "sent": sum(r["sent"] for r in runs),
            "succeeded": sum(r["succeeded"] for r in runs),
            "failed": sum(r["failed"] for r in runs),
            "unreached": sum(r["unreached"] for r in runs),
        },
        "runs": runs,
    }


SCENARIOS = {"seed": seed_two_instances}

if __name__ == "__main__":
    kind, out = sys.argv[1], Path(sys.argv[2])
    scenario = SCENARIOS[kind]()
    write_bundle(scenario, out)
    expected = {"verdict": {"bottleneck": "front_proxy"}, **truth(scenario)}
    (out / "expected.json").write_text(json.dumps(expected, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}")
