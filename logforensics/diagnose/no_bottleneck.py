"""`none`: every request succeeded and no engine saturated.

Only when no request failed; a KV cache that filled or a queue that grew
with latency still names its cause (see `kv_cache`, `gpu`).
"""

from __future__ import annotations

import polars as pl

from logforensics.diagnose.evidence import Rule, RuleResult, Signal
from logforensics.diagnose.facts import Facts
from logforensics.diagnose.kv_cache import devices
from logforensics.diagnose.thresholds import Thresholds
from logforensics.model import Bottleneck

NO_FAILURES = Signal("failed_requests", "Failed requests", 0.6, "= 0")
PEAK_KV = Signal("peak_kv_cache_pct", "Peak KV cache usage", 0.3, "< {kv_full_pct:g}%")


def evaluate(facts: Facts, t: Thresholds) -> RuleResult:
    evidence = []
    if facts.sent and not facts.failed:
        evidence.append(NO_FAILURES.fired(0, t))
        peak = facts.stats["kv_pct"].max()
        if peak is not None and peak < t.kv_full_pct:
            rows = facts.stats.filter(pl.col("kv_pct") == peak)
            evidence.append(PEAK_KV.fired(f"{peak:g}% ({devices(rows)} KV cache)", t))
    return RuleResult(Bottleneck.NONE, facts.no_claims(), evidence)


RULE = Rule(
    bottleneck=Bottleneck.NONE,
    headline="No bottleneck",
    summary="all {sent} requests succeeded and no engine saturated",
    signals=(NO_FAILURES, PEAK_KV),
    recommendations=("No bottleneck reached: raise the load in the next test to find the limit.",),
    evaluate=evaluate,
)
