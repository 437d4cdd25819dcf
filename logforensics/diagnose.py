"""From evidence to a verdict. Each rule names the signals behind it.

A verdict's confidence combines independent signals: each that fires adds
its weight as 1 - Π(1 - w). Thresholds are named here, documented in the
README, and overridable from the command line.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import polars as pl

from logforensics import model
from logforensics.model import Bottleneck


@dataclass
class Thresholds:
    kv_full_pct: float = 90.0  # GPU KV cache usage that counts as full
    idle_kv_pct: float = 50.0  # below this (and nothing waiting) an instance had room
    unreached_share: float = 0.8  # share of failures that never reached an instance
    proxy_window_s: float = 5.0  # proxy errors this close to a failure count for it
    latency_growth: float = 2.0  # P50 of the last step over the first's that counts as growth
    throughput_plateau: float = 0.1  # throughput growth below this share counts as flat
    min_confidence: float = 0.4  # below this the verdict is inconclusive


@dataclass
class Evidence:
    signal: str
    value: object
    threshold: str
    sources: list[str] = field(default_factory=list)
    weight: float = 0.0
    supports: str = ""  # which verdict it speaks for

    def to_dict(self) -> dict:
        return {
            "signal": self.signal,
            "value": self.value,
            "threshold": self.threshold,
            "sources": self.sources[:20],
            "supports": self.supports,
        }


@dataclass
class Verdict:
    bottleneck: Bottleneck
    confidence: float
    evidence: list[Evidence]
    summary: str
    recommendations: list[str]
    missing: list[str] = field(default_factory=list)  # what to collect next time

    def to_dict(self) -> dict:
        return {
            "bottleneck": self.bottleneck.value,
            "confidence": round(self.confidence, 2),
            "summary": self.summary,
            "evidence": [e.to_dict() for e in self.evidence],
            "recommendations": self.recommendations,
            "missing": self.missing,
        }


RECOMMENDATIONS = {
    Bottleneck.FRONT_PROXY: [
        "Raise the proxy's connection/worker limits and check its upstream timeouts: failures died in front of the instances.",
        "Balance by least connections rather than round robin: LLM requests vary widely in duration.",
        "Have clients retry 503s with exponential back-off instead of hanging until a 120 s timeout.",
        "Adding GPU instances will not help until the front is fixed (the seed: twice the price, no more successes).",
    ],
    Bottleneck.KV_CACHE: [
        "Lower max_num_seqs or max_model_len so concurrent sequences fit the KV cache.",
        "Raise gpu_memory_utilization (default 0.9) if memory allows, or quantise (e.g. AWQ) to free memory for KV.",
        "Split the model across GPUs (tensor_parallel_size) when the KV cache cannot fit on one.",
    ],
    Bottleneck.GPU: [
        "Add replicas behind the balancer: each instance is at its compute limit.",
        "Tune max_num_batched_tokens / max_num_seqs and keep CUDA graphs on (enforce_eager=False).",
        "Check that the client timeout is longer than the latency at this concurrency.",
    ],
    Bottleneck.NONE: ["No bottleneck reached: raise the load in the next test to find the limit."],
    Bottleneck.INCONCLUSIVE: [],
}
SUMMARIES = {
    Bottleneck.FRONT_PROXY: "The front proxy: {failed} of {sent} requests failed, {unreached} of them without ever reaching an instance.",
    Bottleneck.KV_CACHE: "The KV cache: the instances ran out of KV cache space ({failed} of {sent} requests failed).",
    Bottleneck.GPU: "GPU compute: requests reached the instances and queued while the KV cache had room ({failed} of {sent} requests failed).",
    Bottleneck.NONE: "No bottleneck: all {sent} requests succeeded and no engine saturated.",
    Bottleneck.INCONCLUSIVE: "Inconclusive: the logs cannot tell where the {failed} failure(s) happened.",
}


def _combine(weights: list[float]) -> float:
    remaining = 1.0
    for w in weights:
        remaining *= 1.0 - w
    return 1.0 - remaining


def failure_windows(client: pl.DataFrame, offset_s: float) -> pl.DataFrame:
    """Each failed request's [start, end] on the servers' clock."""
    shift = pl.duration(microseconds=int(round(offset_s * 1e6)))
    return client.filter(
        ~pl.col("ok") & ~pl.col("warmup") & pl.col("started_at").is_not_null()
    ).select(
        (pl.col("started_at") + shift).alias("w_start"), (pl.col("ended_at") + shift).alias("w_end")
    )


def _within(frame: pl.DataFrame, windows: pl.DataFrame, pad_s: float = 0.0) -> pl.DataFrame:
    if frame.is_empty() or windows.is_empty():
        return frame.clear()
    pad = dt.timedelta(seconds=pad_s)
    padded = windows.select(
        (pl.col("w_start") - pad).alias("w_start"), (pl.col("w_end") + pad).alias("w_end")
    )
    return (
        frame.join_where(padded, pl.col("at") >= pl.col("w_start"), pl.col("at") <= pl.col("w_end"))
        .unique("source", maintain_order=True)
        .drop("w_start", "w_end")
    )


def capacity_signals(runs: list[dict], t: Thresholds) -> list[Evidence]:
    """GPU-bound signs across steps: latency grows with concurrency, throughput stops growing."""
    steps = [r for r in runs if not r["warmup"] and r["latency_s"]["p50"] is not None]
    out = []
    if len(steps) < 2:
        return out
    first, last = steps[0], steps[-1]
    growth = (
        last["latency_s"]["p50"] / first["latency_s"]["p50"] if first["latency_s"]["p50"] else None
    )
    if growth and last["concurrency"] > first["concurrency"] and growth >= t.latency_growth:
        out.append(
            Evidence(
                "latency_grew_with_concurrency",
                f"P50 {first['latency_s']['p50']:.2f} s at {first['concurrency']} → {last['latency_s']['p50']:.2f} s at {last['concurrency']} (×{growth:.1f})",
                f"×{t.latency_growth:g} or more",
                [],
                0.3,
            )
        )
    tps = [(r["concurrency"], r["output_tokens_per_s"]) for r in steps if r["output_tokens_per_s"]]
    if len(tps) >= 3:
        (c1, t1), (c2, t2) = tps[-2], tps[-1]
        if c2 >= 1.3 * c1 and t2 <= (1 + t.throughput_plateau) * t1:
            out.append(
                Evidence(
                    "throughput_plateaued",
                    f"{t1:.0f} → {t2:.0f} output tokens/s while concurrency went {c1} → {c2}",
                    f"growth < {t.throughput_plateau:.0%} for ≥ 30% more load",
                    [],
                    0.3,
                )
            )
    return out


def diagnose(
    client: pl.DataFrame,
    tables: dict[str, pl.DataFrame],
    offset_s: float,
    instances: list[str],
    t: Thresholds,
    runs: list[dict] | None = None,
) -> Verdict:
    measured = client.filter(~pl.col("warmup"))
    sent = measured.height
    failed = measured.filter(~pl.col("ok"))
    unreached = failed.filter(pl.col("reach") == "unreached")
    reached_failures = failed.filter(pl.col("reach") == "reached")
    unknown_failures = failed.filter(pl.col("reach") == "unknown")
    stats, events, proxy = tables["engine_stats"], tables["engine_events"], tables["proxy_events"]
    windows = failure_windows(client, offset_s)
    stats_in = _within(stats, windows)
    missing = []
    if not instances:
        missing.append("the instances' logs (vLLM stdout with uvicorn access lines)")
    if stats.is_empty():
        missing.append("vLLM's periodic stats lines (keep the engine's INFO logging on)")
    if sent == 0:
        missing.append("the load-test client's per-request results")

    growth = capacity_signals(runs or [], t)
    if failed.is_empty():
        if sent == 0:
            return _verdict(Bottleneck.INCONCLUSIVE, [], missing, sent=sent, failed=0, unreached=0)
        return _no_failures(stats, growth, t, missing, sent)

    scores: dict[Bottleneck, list[Evidence]] = {b: [] for b in Bottleneck}
    share_unreached = unreached.height / failed.height
    if share_unreached >= t.unreached_share:
        scores[Bottleneck.FRONT_PROXY].append(
            Evidence(
                "failures_never_reached_an_instance",
                f"{unreached.height}/{failed.height}",
                f"share >= {t.unreached_share:g}",
                model.source_labels(unreached["source"]),
                0.6,
            )
        )
    refused = failed.filter(pl.col("proxy_delivery") == "refused")
    if refused.height:
        scores[Bottleneck.FRONT_PROXY].append(
            Evidence(
                "proxy_refused_before_any_upstream",
                f"{refused.height}/{failed.height}",
                "> 0 (the proxy's own log)",
                model.source_labels(refused["proxy_source"]),
                0.6,
            )
        )
    if stats_in.height:
        max_waiting = stats_in["waiting"].max() or 0
        max_kv = stats_in["gpu_kv_pct"].max()
        sources = model.source_labels(stats_in["source"])
        if max_waiting == 0 and (max_kv is None or max_kv < t.idle_kv_pct):
            scores[Bottleneck.FRONT_PROXY].append(
                Evidence(
                    "instances_had_room_during_failures",
                    f"max Waiting {max_waiting}, max GPU KV cache {max_kv if max_kv is not None else 'n/a'}%",
                    f"Waiting == 0 and KV < {t.idle_kv_pct:g}%",
                    sources,
                    0.5,
                )
            )
        if max_kv is not None and max_kv >= t.kv_full_pct:
            scores[Bottleneck.KV_CACHE].append(
                Evidence(
                    "gpu_kv_cache_full_during_failures",
                    f"{max_kv}%",
                    f">= {t.kv_full_pct:g}%",
                    model.source_labels(
                        stats_in.filter(pl.col("gpu_kv_pct") >= t.kv_full_pct)["source"]
                    ),
                    0.6,
                )
            )
        if max_waiting > 0 and (max_kv is None or max_kv < t.kv_full_pct):
            scores[Bottleneck.GPU].append(
                Evidence(
                    "requests_queued_with_kv_room",
                    f"max Waiting {max_waiting}, max GPU KV cache {max_kv}%",
                    f"Waiting > 0 and KV < {t.kv_full_pct:g}%",
                    model.source_labels(stats_in.filter(pl.col("waiting") > 0)["source"]),
                    0.5,
                )
            )
    pressure = _within(
        events.filter(pl.col("kind").is_in(["kv_full", "preempted", "oom"])),
        windows,
        t.proxy_window_s,
    )
    if pressure.height:
        scores[Bottleneck.KV_CACHE].append(
            Evidence(
                "kv_pressure_events_at_failure_times",
                ", ".join(
                    f"{k}×{n}" for k, n in pressure.group_by("kind").len().sort("kind").iter_rows()
                ),
                "> 0",
                model.source_labels(pressure["source"]),
                0.6,
            )
        )
    proxy_in = _within(proxy, windows, t.proxy_window_s)
    if proxy_in.height:
        # an access log and an error log may both report one failure: count per file
        per_file = proxy_in.with_columns(model.source_file().alias("file"))
        kinds = "; ".join(
            f"{k}×{n} in {f.rsplit('/', 1)[-1]}"
            for f, k, n in per_file.group_by("file", "kind").len().sort("file", "kind").iter_rows()
        )
        scores[Bottleneck.FRONT_PROXY].append(
            Evidence(
                "proxy_errors_at_failure_times",
                kinds,
                "> 0",
                model.source_labels(proxy_in["source"]),
                0.5,
            )
        )
    if reached_failures.height and reached_failures.height / failed.height >= 0.5:
        scores[Bottleneck.GPU].append(
            Evidence(
                "failures_reached_an_instance",
                f"{reached_failures.height}/{failed.height}",
                "share >= 0.5",
                model.source_labels(reached_failures["source"]),
                0.3,
            )
        )
    scores[Bottleneck.GPU] += growth if scores[Bottleneck.GPU] else []
    if unknown_failures.height / failed.height > 0.5:
        missing.append(
            "logs covering the failure times from every instance (the failures fall outside some instance's log)"
        )

    for bottleneck, items in scores.items():
        for e in items:
            e.supports = bottleneck.value
    ranked = sorted(
        ((b, _combine([e.weight for e in items]), items) for b, items in scores.items() if items),
        key=lambda x: -x[1],
    )
    counts = {"sent": sent, "failed": failed.height, "unreached": unreached.height}
    if unknown_failures.height / failed.height > 0.5:
        # most failures cannot be placed: whatever else fired, the logs cannot say where they died
        flat = [e for _, _, items in ranked for e in items]
        return _verdict(Bottleneck.INCONCLUSIVE, flat, missing, **counts)
    if not ranked or ranked[0][1] < t.min_confidence:
        flat = [e for _, _, items in ranked for e in items]
        return _verdict(Bottleneck.INCONCLUSIVE, flat, missing, **counts)
    best, confidence, items = ranked[0]
    if (
        best in (Bottleneck.GPU, Bottleneck.KV_CACHE)
        and stats_in.is_empty()
        and pressure.is_empty()
    ):
        # queueing and latency growth fit both the GPU and the KV cache: only the
        # engine's own numbers tell them apart
        missing.append(
            "vLLM's stats lines covering the failure times (they tell GPU from KV-cache limits)"
        )
        flat = [e for _, _, its in ranked for e in its]
        return _verdict(Bottleneck.INCONCLUSIVE, flat, missing, **counts)
    if len(ranked) > 1 and ranked[1][1] >= confidence - 0.1:
        # two stories fit about as well: say so rather than pick one
        flat = [e for _, _, its in ranked for e in its]
        return _verdict(Bottleneck.INCONCLUSIVE, flat, missing, **counts)
    return _verdict(best, items, missing, confidence=confidence, **counts)


def _no_failures(stats, growth, t: Thresholds, missing, sent) -> Verdict:
    """Every request succeeded: a bottleneck only if the engines showed saturation."""
    counts = {"sent": sent, "failed": 0, "unreached": 0}
    evidence = [Evidence("failed_requests", 0, "== 0", [], 0.6)]
    kv_peak = stats["gpu_kv_pct"].max() if stats.height else None
    waiting_peak = stats["waiting"].max() if stats.height else None
    if kv_peak is not None and kv_peak >= t.kv_full_pct:
        full = model.source_labels(stats.filter(pl.col("gpu_kv_pct") >= t.kv_full_pct)["source"])
        return _verdict(
            Bottleneck.KV_CACHE,
            [Evidence("gpu_kv_cache_full", f"{kv_peak}%", f">= {t.kv_full_pct:g}%", full, 0.5)],
            missing,
            **counts,
        )
    if waiting_peak and growth:
        queued = model.source_labels(stats.filter(pl.col("waiting") > 0)["source"])
        return _verdict(
            Bottleneck.GPU,
            [
                Evidence("requests_queued", f"max Waiting {waiting_peak}", "> 0", queued, 0.4),
                *growth,
            ],
            missing,
            **counts,
        )
    if kv_peak is not None:
        evidence.append(
            Evidence("peak_gpu_kv_cache_pct", kv_peak, f"< {t.kv_full_pct:g}%", [], 0.3)
        )
    return _verdict(Bottleneck.NONE, evidence, missing, **counts)


def _verdict(bottleneck, evidence, missing, confidence=None, **counts) -> Verdict:
    if confidence is None:
        confidence = (
            _combine([e.weight for e in evidence]) if bottleneck != Bottleneck.INCONCLUSIVE else 0.0
        )
    for e in evidence:
        e.supports = e.supports or bottleneck.value
    evidence = sorted(evidence, key=lambda e: -e.weight)
    return Verdict(
        bottleneck=bottleneck,
        confidence=confidence,
        evidence=evidence,
        summary=SUMMARIES[bottleneck].format(**counts),
        recommendations=RECOMMENDATIONS[bottleneck],
        missing=missing,
    )
