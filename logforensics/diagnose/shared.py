"""Signals every engine-side cause produces: they corroborate, they never decide.

Requests that reached an instance and failed, latency that grew with load and
throughput that stopped growing are what a KV-bound engine and a
compute-bound one both show; the assembly adds them to the confidence of a
cause whose own (discriminating) evidence already fired.
"""

from __future__ import annotations

import polars as pl

from logforensics.correlate.steps import is_plateau, throughput_by_load
from logforensics.diagnose.evidence import SHARED, Evidence, Signal
from logforensics.diagnose.facts import Facts, labels
from logforensics.diagnose.thresholds import Thresholds
from logforensics.model import Step

REACHED = Signal(
    "failures_reached_an_instance",
    "Failed requests that did reach an instance",
    0.3,
    "share ≥ {reached_share:g}",
    SHARED,
)
LATENCY = Signal(
    "latency_grew_with_concurrency",
    "Latency (P50 of the successes) grew from the first step to the last",
    0.3,
    "×{latency_growth:g} or more",
    SHARED,
)
PLATEAU = Signal(
    "throughput_plateaued",
    "Output throughput stopped growing while concurrency rose",
    0.3,
    "< +{throughput_plateau:.0%} for +{plateau_load_growth:.0%} load",
    SHARED,
)
SIGNALS = (REACHED, LATENCY, PLATEAU)


def evaluate(facts: Facts, t: Thresholds) -> list[Evidence]:
    return [*reached(facts, t), *capacity(facts.runs, t)]


def reached(facts: Facts, t: Thresholds) -> list[Evidence]:
    got = facts.failures.filter(pl.col("reach") == "reached")
    if not facts.failed or got.height / facts.failed < t.reached_share or not got.height:
        return []
    return [REACHED.fired(f"{got.height}/{facts.failed}", t, labels(got))]


def capacity(runs: list[Step], t: Thresholds) -> list[Evidence]:
    """Across steps: latency grows with concurrency, throughput stops growing."""
    steps = [r for r in runs if not r.warmup and r.latency_s.p50 is not None]
    out = []
    if len(steps) < 2:
        return out
    first, last = steps[0], steps[-1]
    p50a, p50b = first.latency_s.p50, last.latency_s.p50
    growth = p50b / p50a if p50a else None
    if growth and last.concurrency > first.concurrency and growth >= t.latency_growth:
        out.append(
            LATENCY.fired(
                f"P50 {p50a:.2f} s at {first.concurrency} → {p50b:.2f} s at "
                f"{last.concurrency} (×{growth:.1f})",
                t,
            )
        )
    tps = throughput_by_load(steps)
    if len(tps) >= 3 and is_plateau(tps[-2], tps[-1], t):
        (c1, t1), (c2, t2) = tps[-2], tps[-1]
        out.append(
            PLATEAU.fired(
                f"{t1:.0f} → {t2:.0f} output tokens/s while concurrency went {c1} → {c2}", t
            )
        )
    return out
