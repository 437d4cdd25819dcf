"""From evidence to a verdict. Each rule names the signals behind it.

A verdict's confidence combines independent signals: each that fires adds
its weight as 1 - Π(1 - w). Thresholds are named here, documented in the
README, and overridable from the command line.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import polars as pl

from logforensics.model import Bottleneck


@dataclass
class Thresholds:
    kv_full_pct: float = 90.0  # GPU KV cache usage that counts as full
    idle_kv_pct: float = 50.0  # below this (and nothing waiting) an instance had room
    unreached_share: float = 0.8  # share of failures that never reached an instance
    proxy_window_s: float = 5.0  # proxy errors this close to a failure count for it
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
    Bottleneck.FRONT_PROXY: "The front proxy: {failed} failed request(s), {unreached} of which never reached any instance, while the instances had room.",
    Bottleneck.KV_CACHE: "The KV cache: instances ran out of KV cache space at the failure times.",
    Bottleneck.GPU: "GPU compute: requests reached the instances and queued while the KV cache had room.",
    Bottleneck.NONE: "No bottleneck: all {sent} requests succeeded.",
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


def diagnose(
    client: pl.DataFrame,
    tables: dict[str, pl.DataFrame],
    offset_s: float,
    instances: list[str],
    t: Thresholds,
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

    if failed.is_empty():
        kv_peak = stats["gpu_kv_pct"].max() if stats.height else None
        evidence = [Evidence("failed_requests", 0, "== 0", [], 0.6, Bottleneck.NONE.value)]
        if kv_peak is not None:
            evidence.append(
                Evidence(
                    "peak_gpu_kv_cache_pct",
                    kv_peak,
                    f"< {t.kv_full_pct:g}%",
                    [],
                    0.3 if kv_peak < t.kv_full_pct else 0.0,
                    Bottleneck.NONE.value,
                )
            )
        if sent == 0:
            return _verdict(Bottleneck.INCONCLUSIVE, [], missing, sent=sent, failed=0, unreached=0)
        return _verdict(Bottleneck.NONE, evidence, missing, sent=sent, failed=0, unreached=0)

    scores: dict[Bottleneck, list[Evidence]] = {b: [] for b in Bottleneck}
    share_unreached = unreached.height / failed.height
    if share_unreached >= t.unreached_share:
        scores[Bottleneck.FRONT_PROXY].append(
            Evidence(
                "failures_never_reached_an_instance",
                f"{unreached.height}/{failed.height}",
                f"share >= {t.unreached_share:g}",
                unreached["source"].to_list(),
                0.6,
            )
        )
    if stats_in.height:
        max_waiting = stats_in["waiting"].max() or 0
        max_kv = stats_in["gpu_kv_pct"].max()
        sources = stats_in["source"].to_list()
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
                    stats_in.filter(pl.col("gpu_kv_pct") >= t.kv_full_pct)["source"].to_list(),
                    0.6,
                )
            )
        if max_waiting > 0 and (max_kv is None or max_kv < t.kv_full_pct):
            scores[Bottleneck.GPU].append(
                Evidence(
                    "requests_queued_with_kv_room",
                    f"max Waiting {max_waiting}, max GPU KV cache {max_kv}%",
                    f"Waiting > 0 and KV < {t.kv_full_pct:g}%",
                    stats_in.filter(pl.col("waiting") > 0)["source"].to_list(),
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
                pressure["source"].to_list(),
                0.6,
            )
        )
    proxy_in = _within(proxy, windows, t.proxy_window_s)
    if proxy_in.height:
        kinds = ", ".join(
            f"{k}×{n}" for k, n in proxy_in.group_by("kind").len().sort("kind").iter_rows()
        )
        scores[Bottleneck.FRONT_PROXY].append(
            Evidence(
                "proxy_errors_at_failure_times",
                kinds,
                "> 0",
                proxy_in["source"].to_list(),
                0.5,
            )
        )
    if reached_failures.height and reached_failures.height / failed.height >= 0.5:
        scores[Bottleneck.GPU].append(
            Evidence(
                "failures_reached_an_instance",
                f"{reached_failures.height}/{failed.height}",
                "share >= 0.5",
                reached_failures["source"].to_list(),
                0.3,
            )
        )
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
    if not ranked or ranked[0][1] < t.min_confidence:
        flat = [e for _, _, items in ranked for e in items]
        return _verdict(Bottleneck.INCONCLUSIVE, flat, missing, **counts)
    best, confidence, items = ranked[0]
    if len(ranked) > 1 and ranked[1][1] >= confidence - 0.1:
        # two stories fit about as well: say so rather than pick one
        flat = [e for _, _, its in ranked for e in its]
        return _verdict(Bottleneck.INCONCLUSIVE, flat, missing, **counts)
    return _verdict(best, items, missing, confidence=confidence, **counts)


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
