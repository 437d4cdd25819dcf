"""Build the diagnose stage's inputs directly in the canonical schemas of `model.py`.

A case is a few instances' stats lines and events, the proxy's events, and the
client's requests with the columns the correlation stage adds (`reach`,
`instance`, `proxy_*`). Times are seconds after T0 on one clock (offset 0).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import polars as pl

from logforensics import model
from logforensics.diagnose import Thresholds, Verdict, diagnose
from logforensics.model import Latency, Step
from tests.conftest import make_step

T0 = dt.datetime(2026, 3, 1, 10, 0, tzinfo=dt.timezone.utc)
CORRELATION_COLUMNS = {
    "instance": pl.Utf8,
    "proxy_instance": pl.Utf8,
    "proxy_upstream": pl.Utf8,
    "proxy_delivery": pl.Utf8,
    "proxy_status": pl.Int64,
    "proxy_source": model.SOURCE,
    "reach": pl.Utf8,
}


def at(seconds: float | None) -> dt.datetime | None:
    return None if seconds is None else T0 + dt.timedelta(seconds=seconds)


def src(file: str, line: int) -> int:
    return model.source_prefix(f"{file}:") * model.LINE_SPAN + line


@dataclass
class Case:
    instances: list[str]
    requests: list[dict] = field(default_factory=list)
    stats: list[dict] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)
    proxy_events: list[dict] = field(default_factory=list)
    server: list[dict] = field(default_factory=list)
    timings: list[dict] = field(default_factory=list)
    runs: list[Step] = field(default_factory=list)
    coverage: dict[str, tuple[float, float]] | None = None
    upstreams: dict[str, str] = field(default_factory=dict)
    _lines: dict[str, int] = field(default_factory=dict)

    def line(self, file: str) -> int:
        """The next line number of a file (sources stay distinct and in order)."""
        self._lines[file] = self._lines.get(file, 0) + 1
        return self._lines[file]

    def request(
        self,
        start: float,
        end: float,
        ok: bool | None,
        *,
        step: int = 1,
        reach: str = "reached",
        instance: str | None = None,
        proxy_instance: str | None = None,
        upstream: str | None = None,
        delivery: str | None = None,
        proxy_status: int | None = None,
        http_status: int | None = None,
        error: str | None = None,
        outcome: str | None = None,
    ) -> Case:
        n = len(self.requests) + 1
        row = {
            "run": "client.jsonl",
            "step": step,
            "index": n,
            "started_at": at(start),
            "ended_at": at(end),
            "latency_s": end - start,
            "ok": ok,
            "http_status": http_status if http_status is not None else (200 if ok else None),
            "error": error,
            "warmup": False,
            "source": src("client.jsonl", n),
            "instance": instance,
            "proxy_instance": proxy_instance,
            "proxy_upstream": upstream,
            "proxy_delivery": delivery,
            "proxy_status": proxy_status,
            "proxy_source": src("access.log", n) if upstream or delivery else None,
            "reach": reach,
        }
        if outcome is not None:
            row["outcome"] = outcome
        self.requests.append(row)
        return self

    def requests_n(self, count: int, start: float, end: float, ok: bool | None, **kw) -> Case:
        for _ in range(count):
            self.request(start, end, ok, **kw)
        return self

    def stat(self, instance: str, t: float, running=0, waiting=0, gpu=None, cpu=None, **kw) -> Case:
        self.stats.append(
            {
                "instance": instance,
                "at": at(t),
                "running": running,
                "waiting": waiting,
                "gpu_kv_pct": gpu,
                "cpu_kv_pct": cpu,
                "prompt_tps": kw.get("prompt_tps", 0.0),
                "gen_tps": kw.get("gen_tps", 10.0 if running else 0.0),
                "source": src(f"{instance}.log", self.line(f"{instance}.log")),
            }
        )
        return self

    def stats_every(self, instance: str, start: float, end: float, step: float = 10, **kw) -> Case:
        t = start
        while t <= end:
            self.stat(instance, t, **kw)
            t += step
        return self

    def event(self, instance: str, t: float | None, kind: str, detail: str, file=None) -> Case:
        file = file or f"{instance}.log"
        self.events.append(
            {
                "instance": instance,
                "at": at(t),
                "kind": kind,
                "detail": detail,
                "source": src(file, self.line(file)),
            }
        )
        return self

    def timing(self, instance: str, t: float, queue_s: float, **kw) -> Case:
        """A request the engine's span shows arriving at `t` and waiting `queue_s` in its queue
        (`prefill_s`, `decode_s` where given)."""
        file = f"{instance}-spans.json"
        self.timings.append(
            {
                "instance": instance,
                "at": at(t),
                "request_id": f"chatcmpl-{len(self.timings) + 1}",
                "queue_s": queue_s,
                "prefill_s": kw.get("prefill_s"),
                "decode_s": kw.get("decode_s"),
                "source": src(file, self.line(file)),
            }
        )
        return self

    def proxy_event(self, t: float, kind: str, upstream: str | None, status=None) -> Case:
        self.proxy_events.append(
            {
                "at": at(t),
                "kind": kind,
                "http_status": status,
                "upstream": upstream,
                "detail": kind,
                "source": src("error.log", self.line("error.log")),
            }
        )
        return self

    def frame(self) -> pl.DataFrame:
        optional = {"outcome": pl.Utf8, "arrived_at": model.UTC_US}
        extra = {k: t for k, t in optional.items() if any(k in r for r in self.requests)}
        schema = {**model.CLIENT_REQUESTS, **CORRELATION_COLUMNS, **extra}
        rows = [{k: r.get(k) for k in schema} for r in self.requests]
        return pl.DataFrame(rows, schema=schema)

    def tables(self) -> dict[str, pl.DataFrame]:
        def table(name: str, rows: list[dict]) -> pl.DataFrame:
            if not rows:
                return model.empty(name)
            return model.conform(name, pl.DataFrame(rows, schema_overrides=model.SCHEMAS[name]))

        return {
            "client_requests": model.conform("client_requests", self.frame()),
            "server_requests": table("server_requests", self.server),
            "engine_stats": table("engine_stats", self.stats),
            "engine_events": table("engine_events", self.events),
            "proxy_events": table("proxy_events", self.proxy_events),
            "request_timings": table("request_timings", self.timings),
            "proxy_requests": model.empty("proxy_requests"),
        }

    def verdict(self, t: Thresholds | None = None) -> Verdict:
        coverage = (
            {k: (at(a), at(b)) for k, (a, b) in self.coverage.items()}
            if self.coverage is not None
            else None
        )
        return diagnose(
            self.frame(),
            self.tables(),
            0.0,
            self.instances,
            t or Thresholds(),
            self.runs,
            coverage,
            self.upstreams,
        )


def run(concurrency: int, p50: float, tokens_per_s: float | None) -> Step:
    """A step with the fields the shared signals read."""
    return make_step(concurrency, latency_s=Latency(p50=p50), output_tokens_per_s=tokens_per_s)


def signals(verdict: Verdict) -> dict[str, str]:
    """signal → role, for the primary's evidence."""
    return {e.signal: e.role for e in verdict.evidence}
