"""`kv_cache`: the instance a failed request reached was out of KV cache space.

Read on that instance, during that request's window: KV usage at or above
full with requests waiting, preemption / KV-full / out-of-memory lines, or the stats-line sign of
preemption (Running falls while Waiting rises after a line at full KV: vLLM
0.32 never prints `Preemptions:` although it preempts). A /metrics scrape's
`vllm:num_preemptions_total` proves preemption happened between the engine's
start and the scrape, not when: it counts for a failure only together with
requests waiting in that failure's window.
"""

from __future__ import annotations

import polars as pl

from logforensics.diagnose import shedding
from logforensics.diagnose.evidence import Qualifier, Rule, RuleResult, Signal
from logforensics.diagnose.facts import (
    PRESSURE_KINDS,
    Facts,
    at_text,
    claims,
    labels,
    names,
    preemption_sign,
)
from logforensics.diagnose.thresholds import Thresholds
from logforensics.model import Bottleneck, source_labels

FULL = Signal(
    "kv_cache_full_during_failures",
    "KV cache full with requests waiting, on the instance a failed request reached, in its window",
    0.6,
    "≥ {kv_full_pct:g}%, Waiting > 0",
)
PRESSURE = Signal(
    "kv_pressure_events_at_failure_times",
    "Preemption, KV-full or out-of-memory lines on that instance, in a failed request's window",
    0.6,
    "> 0",
)
PREEMPTION_SIGN = Signal(
    "preemption_seen_in_stats",
    "Running fell while Waiting rose right after a full KV cache (preemption), in a failed request's window",
    0.4,
    "after a line ≥ {kv_full_pct:g}%",
)
COUNTER = Signal(
    "preemptions_on_record",
    "The engine recorded preemptions (a /metrics counter, or lines at other times) and requests waited there during the failures",
    0.4,
    "> 0, Waiting > 0",
)
SHED = Signal(
    "shed_at_the_front_while_kv_full",
    "Failed requests never reached an instance while every instance read in their window was "
    "saturated, a KV cache among them full or preempting: the front shed what the engines could not take",
    0.6,
    "every instance saturated, KV ≥ {kv_full_pct:g}% or preempting on one",
)
SHED_AT_FRONT = Qualifier(
    "shed_at_front",
    "shed at the front",
    "most failures it explains never reached an instance (`shed_at_the_front_while_kv_full`)",
    "{claimed} of {failed} failed requests were refused or dropped at the front while "
    "{subject} ran with the KV cache full or preempting: the front shed what the engines could not take",
    (
        "Add KV capacity (more instances, or the measures below) before raising the front's "
        "limits: its refusals protected engines whose KV cache was already full, and a higher "
        "limit would only move these failures inside them.",
    ),
)
FULL_WITHOUT_FAILURES = Signal(
    "kv_cache_full",
    "KV cache full (no request failed)",
    0.5,
    "≥ {kv_full_pct:g}%",
)


def preempted_instances(facts: Facts) -> list[str]:
    """Instances with any preemption on record (a line, a stats field or a counter)."""
    rows = facts.events.filter(pl.col("kind") == "preempted")
    return rows["instance"].drop_nulls().unique().sort().to_list()


def devices(rows: pl.DataFrame) -> str:
    names = rows["kv_device"].drop_nulls().unique().sort().to_list()
    return " / ".join(names) if names else "device not named"


def evaluate(facts: Facts, t: Thresholds) -> RuleResult:
    if not facts.failed:
        return _without_failures(facts, t)
    reached = pl.col("reach") == "reached"
    ws = facts.window_stats
    keys = ["fid", "instance"]
    queued = ws.filter(pl.col("waiting") > 0).select(keys).unique()
    full = ws.filter(pl.col("kv_pct") >= t.kv_full_pct).join(queued, on=keys, how="semi")
    sign = ws.filter(preemption_sign(t))
    pressure = facts.window_events.filter(pl.col("kind").is_in(PRESSURE_KINDS))
    elsewhere = preemptions_elsewhere(facts)
    counted = elsewhere["instance"].unique()
    waiting_counted = ws.filter(
        (pl.col("waiting") > 0) & pl.col("instance").is_in(counted.implode())
    )
    # a 4xx is the request's own fault unless the engine said why (a KV-full line)
    state = pl.concat([f.select(keys) for f in (full, sign, waiting_counted)]).unique()
    claimed = claims(facts, state, reached & ~pl.col("client_error")) | claims(
        facts, pressure.select(keys), reached
    )
    shed = shedding.shed(facts, t).filter(pl.col("by") == "kv_cache")
    reached_claims = claimed
    claimed = claimed | claims(facts, shed, pl.lit(True))
    pairs = pl.concat([state, pressure.select(keys)]).unique()
    fids = facts.failures.filter(reached_claims)["fid"]
    mine = pl.col("fid").is_in(fids.implode())
    full, sign, pressure, waiting_counted = (
        f.filter(mine) for f in (full, sign, pressure, waiting_counted)
    )
    evidence = []
    if full.height:
        evidence.append(
            FULL.fired(
                f"up to {full['kv_pct'].max():g}% ({devices(full)} KV cache) on "
                f"{names(full)}, for {full['fid'].n_unique()} of {facts.failed} failed requests",
                t,
                labels(full),
            )
        )
    if pressure.height:
        kinds = ", ".join(
            f"{k}×{c}"
            for k, c in pressure.unique("source").group_by("kind").len().sort("kind").iter_rows()
        )
        evidence.append(PRESSURE.fired(f"{kinds} on {names(pressure)}", t, labels(pressure)))
    if sign.height:
        evidence.append(
            PREEMPTION_SIGN.fired(
                f"{sign['source'].n_unique()} stats line(s) on {names(sign)}", t, labels(sign)
            )
        )
    if waiting_counted.height:
        records = elsewhere.filter(pl.col("instance").is_in(waiting_counted["instance"].implode()))
        evidence.append(
            COUNTER.fired(
                _counter_text(facts, records, waiting_counted),
                t,
                source_labels(records["source"]) + labels(waiting_counted),
            )
        )
    qualifiers = []
    if not shed.is_empty():
        evidence.append(shedding.evidence(SHED, facts, shed, t))
        pairs = pl.concat([pairs, shedding.pressed(shed)]).unique()
        mine = pl.col("fid").is_in(facts.failures.filter(claimed)["fid"].implode())
        if shed["fid"].n_unique() >= reached_claims.sum():
            qualifiers.append(SHED_AT_FRONT)
    return RuleResult(
        Bottleneck.KV_CACHE,
        claimed,
        evidence,
        subject=names(pairs.filter(mine)) or None,
        qualifiers=qualifiers,
    )


def preemptions_elsewhere(facts: Facts) -> pl.DataFrame:
    """Preemption records outside every failure's window: a scrape's counter (whose time
    is the scrape's, or unknown), or lines from other moments of the test."""
    inside = facts.window_events.select("source").unique()
    return facts.events.filter(pl.col("kind") == "preempted").join(inside, on="source", how="anti")


def _counter_text(facts: Facts, records: pl.DataFrame, waiting: pl.DataFrame) -> str:
    end = facts.test_end()
    parts = []
    for name, n, detail, at in (
        records.sort("at", nulls_last=True)
        .group_by("instance")
        .agg(pl.len(), pl.col("detail").last(), pl.col("at").last())
        .sort("instance")
        .iter_rows()
    ):
        what = detail if n == 1 else f"{n} records, the last: {detail}"
        if at is None:
            when = "read at an unknown time (a counter: preemption happened before it was read)"
        elif end is not None and at > end:
            when = (
                f"read at {at_text(at)}, after the test (a counter: preemption happened between "
                "the engine's start and then, which includes the test)"
            )
        else:
            when = f"at {at_text(at)}, outside the failed requests' windows"
        parts.append(f"{name}: {what[:200]}, {when}")
    most = waiting["waiting"].max()
    return "; ".join(parts) + f"; up to {most} requests waiting during the failures"


def _without_failures(facts: Facts, t: Thresholds) -> RuleResult:
    """Every request succeeded: a KV-cache bottleneck only if the cache filled."""
    full = facts.stats.filter(pl.col("kv_pct") >= t.kv_full_pct)
    evidence = []
    if full.height:
        evidence.append(
            FULL_WITHOUT_FAILURES.fired(
                f"{full['kv_pct'].max():g}% ({devices(full)} KV cache) on {names(full)}",
                t,
                labels(full),
            )
        )
    return RuleResult(Bottleneck.KV_CACHE, facts.no_claims(), evidence, subject=names(full) or None)


RULE = Rule(
    bottleneck=Bottleneck.KV_CACHE,
    headline="The KV cache",
    summary="{claimed} of {failed} failed requests reached {subject} while the KV cache there was full or preempting",
    signals=(FULL, PRESSURE, PREEMPTION_SIGN, COUNTER, SHED, FULL_WITHOUT_FAILURES),
    recommendations=(
        "Lower max_num_seqs or max_model_len so concurrent sequences fit the KV cache.",
        "Raise gpu_memory_utilization (default 0.9) if memory allows, or quantise (e.g. AWQ) "
        "to free memory for KV (on a CPU build: VLLM_CPU_KVCACHE_SPACE).",
        "Split the model across GPUs (tensor_parallel_size) when the KV cache cannot fit on one.",
    ),
    evaluate=evaluate,
    corroborated=True,
    qualifiers=(SHED_AT_FRONT,),
)
