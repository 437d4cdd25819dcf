"""`gpu`: the instance a failed request reached was at its compute limit.

Read on that instance, during that request's window, with the KV cache
known to have room and no preemption on record for it: requests waiting, or
the engine busy (running, prefilling or decoding) while the request timed
out. A stats line is printed between engine steps, so when one step lasts
longer than the interval `Running` can read 0–1 while many requests are
inside: busy throughput and the timeouts are then the compute evidence. An
engine's own spans (OpenTelemetry) say per request how long it waited in the
queue: requests that arrived in the window and waited there while the KV
cache had room waited for compute, not for memory.
"""

from __future__ import annotations

import polars as pl

from logforensics.diagnose import kv_cache, shared, shedding
from logforensics.diagnose.evidence import QUALIFYING, Evidence, Qualifier, Rule, RuleResult, Signal
from logforensics.diagnose.facts import (
    PRESSURE_KINDS,
    Facts,
    claims,
    labels,
    names,
    preemption_sign,
    waited_in_front,
)
from logforensics.diagnose.thresholds import Thresholds
from logforensics.model import Bottleneck

QUEUED = Signal(
    "requests_queued_with_kv_room",
    "Requests waited, KV cache with room, on the instance a failed request reached, in its window (no preemption on record)",
    0.5,
    "Waiting > 0, KV < {kv_full_pct:g}%",
)
BUSY = Signal(
    "instance_busy_while_requests_timed_out",
    "Requests timed out at an instance busy computing (running or processing tokens) with its KV cache low (no preemption on record)",
    0.5,
    "timed out, KV < {idle_kv_pct:g}%",
)
QUEUE_TIME = Signal(
    "requests_waited_in_the_engine_queue_with_kv_room",
    "Requests that arrived at that instance in a failed request's window waited in its queue "
    "(the engine's own spans), KV cache with room (no preemption on record)",
    0.5,
    "queue ≥ {queue_time_s:g} s, KV < {kv_full_pct:g}%",
)
SHED = Signal(
    "shed_at_the_front_while_engines_busy",
    "Failed requests never reached an instance while every instance read in their window had "
    "requests waiting with KV room: the front shed what the engines could not compute",
    0.5,
    "every instance Waiting > 0, KV < {kv_full_pct:g}%",
)
SHED_AT_FRONT = Qualifier(
    "shed_at_front",
    "shed at the front",
    "most failures it explains never reached an instance (`shed_at_the_front_while_engines_busy`)",
    "{claimed} of {failed} failed requests were refused or dropped at the front while "
    "{subject} had requests waiting with KV cache to spare: the front shed what the engines could not compute",
    (
        "Add compute (replicas) before raising the front's limits: its refusals protected "
        "engines already queueing, and a higher limit would only move these failures inside them.",
    ),
)
PHASE = Signal(
    "compute_phase",
    "Where the engines' compute went in the windows of the failures it explains: prompt against "
    "generated tokens and Running against its peak (stats lines), or prefill against decode "
    "time (the engine's spans)",
    0.0,
    "prefill: prompt ≥ generated tokens, Waiting > 0 with Running below its peak; decode: "
    "generated > prompt tokens, Running at its peak; spans: the larger time",
    role=QUALIFYING,
)
PREFILL = Qualifier(
    "prefill",
    "prefill-bound",
    "`compute_phase` reads prefill: the engines took in at least as many prompt tokens as they "
    "generated while requests waited with Running below its peak (or prefill outlasted decode "
    "in the engine's spans)",
    "{claimed} of {failed} failed requests reached {subject} while the engine there was busy "
    "with prompts (prefill), with KV cache to spare",
    (
        "Prefill-bound: time to first token grows with load. Enable chunked prefill and tune "
        "max_num_batched_tokens, cache shared prompt prefixes (enable_prefix_caching), shorten "
        "prompts, or separate prefill from decode (disaggregated serving).",
    ),
)
DECODE = Qualifier(
    "decode",
    "decode-bound",
    "`compute_phase` reads decode: the engines generated more tokens than they took in with "
    "Running at its peak (or decode outlasted prefill in the engine's spans)",
    "{claimed} of {failed} failed requests reached {subject} while the engine there was busy "
    "generating (decode) at its batch limit, with KV cache to spare",
    (
        "Decode-bound: time per output token grows with load at a full batch. Add replicas, "
        "raise max_num_seqs where KV room allows, use speculative decoding, or cap max_tokens.",
    ),
)
QUEUED_WITHOUT_FAILURES = Signal(
    "requests_queued",
    "Requests waited, KV cache with room, while latency grew (no request failed)",
    0.4,
    "Waiting > 0, KV < {kv_full_pct:g}%",
)


def busy() -> pl.Expr:
    """The engine was working: requests running or waiting, or tokens processed."""
    return (
        (pl.col("running").fill_null(0) > 0)
        | (pl.col("waiting").fill_null(0) > 0)
        | (pl.col("prompt_tps").fill_null(0) > 0)
        | (pl.col("gen_tps").fill_null(0) > 0)
    )


def evaluate(facts: Facts, t: Thresholds) -> RuleResult:
    if not facts.failed:
        return _without_failures(facts, t)
    keys = ["fid", "instance"]
    ws = facts.window_stats
    preempted = kv_cache.preempted_instances(facts)
    states = (
        ws.group_by(keys)
        .agg(
            pl.col("kv_pct").max().alias("kv_max"),
            pl.col("waiting").max().alias("waiting_max"),
            busy().any().alias("busy"),
            preemption_sign(t).any().alias("sign"),
        )
        .join(
            facts.window_events.filter(pl.col("kind").is_in(PRESSURE_KINDS))
            .select(keys)
            .unique()
            .with_columns(pl.lit(True).alias("pressure")),
            on=keys,
            how="left",
        )
        .join(facts.failures.select("fid", "slow"), on="fid")
        .filter(
            pl.col("kv_max").is_not_null()
            & ~pl.col("instance").is_in(preempted)
            & ~pl.col("sign")
            & pl.col("pressure").is_null()
        )
    )
    queued = states.filter((pl.col("waiting_max") > 0) & (pl.col("kv_max") < t.kv_full_pct))
    working = states.filter(
        pl.col("busy") & pl.col("slow") & (pl.col("kv_max") < t.idle_kv_pct)
    ).join(queued.select(keys), on=keys, how="anti")
    waited = (
        facts.window_timings.filter(pl.col("queue_s") >= t.queue_time_s)
        .group_by(keys)
        .agg(pl.col("queue_s").max().alias("queue_max"), pl.len().alias("waited"))
        .join(states.filter(pl.col("kv_max") < t.kv_full_pct).select(*keys, "kv_max"), on=keys)
    )
    queued_or_working = pl.concat([f.select(keys) for f in (queued, working, waited)])
    claimed = claims(
        facts,
        queued_or_working,
        (pl.col("reach") == "reached") & ~pl.col("client_error") & ~waited_in_front(t),
    )
    mine = pl.col("fid").is_in(facts.failures.filter(claimed)["fid"].implode())
    queued, working, waited = queued.filter(mine), working.filter(mine), waited.filter(mine)
    shed = shedding.shed(facts, t).filter(pl.col("by") == "gpu")
    evidence = []
    if queued.height:
        rows = ws.join(queued.select(keys), on=keys).filter(pl.col("waiting") > 0)
        evidence.append(
            QUEUED.fired(
                f"up to {queued['waiting_max'].max()} waiting, KV ≤ {queued['kv_max'].max():g}% "
                f"({kv_cache.devices(rows)}) on {names(queued)}, for "
                f"{queued['fid'].n_unique()} of {facts.failed} failed requests",
                t,
                labels(rows),
            )
        )
    if working.height:
        rows = ws.join(working.select(keys), on=keys).filter(busy())
        evidence.append(
            BUSY.fired(
                f"{working['fid'].n_unique()} of {facts.failed} failed requests timed out at "
                f"{names(working)}, where the engine processed up to "
                f"{_max(rows, 'prompt_tps')} prompt and {_max(rows, 'gen_tps')} generated "
                f"tokens/s with up to {_max(rows, 'running')} running; KV ≤ "
                f"{working['kv_max'].max():g}% ({kv_cache.devices(rows)}), no preemption on record",
                t,
                labels(rows),
            )
        )
    if waited.height:
        rows = facts.window_timings.join(waited.select(keys), on=keys).filter(
            pl.col("queue_s") >= t.queue_time_s
        )
        evidence.append(
            QUEUE_TIME.fired(
                f"{rows['source'].n_unique()} request(s) waited up to "
                f"{waited['queue_max'].max():.2f} s in the queue of {names(waited)}, in the "
                f"windows of {waited['fid'].n_unique()} of {facts.failed} failed requests; KV ≤ "
                f"{waited['kv_max'].max():g}%, no preemption on record",
                t,
                labels(rows),
            )
        )
    qualifiers = []
    named = [f.select(keys) for f in (queued, working, waited)]
    phase = _phase(facts, pl.concat(named).unique(), t)
    if phase is not None:
        qualifier, found = phase
        evidence.append(found)
        qualifiers += [qualifier] if qualifier else []
    if not shed.is_empty():
        evidence.append(shedding.evidence(SHED, facts, shed, t))
        named.append(shedding.pressed(shed))
        if shed["fid"].n_unique() >= claimed.sum():
            qualifiers.insert(0, SHED_AT_FRONT)
        claimed = claimed | claims(facts, shed, pl.lit(True))
    subject = names(pl.concat(named))
    return RuleResult(
        Bottleneck.GPU, claimed, evidence, subject=subject or None, qualifiers=qualifiers
    )


def _phase(
    facts: Facts, pairs: pl.DataFrame, t: Thresholds
) -> tuple[Qualifier | None, Evidence] | None:
    """Prefill or decode, where the claimed failures' windows say: the engine's own spans
    first (prefill against decode time of the requests arriving there), else its stats
    lines (prompt against generated tokens, Running against its peak on that instance)."""
    if pairs.is_empty():
        return None
    tester = _tester_speeds(facts, pairs)
    seen = f"; {tester}" if tester else ""
    timings = facts.window_timings.join(pairs, on=["fid", "instance"]).unique("source")
    prefill_s, decode_s = timings["prefill_s"].sum(), timings["decode_s"].sum()
    if timings.height and (prefill_s or decode_s):
        which = PREFILL if prefill_s >= decode_s else DECODE
        value = (
            f"{which.words}: {timings.height} request(s) spent {prefill_s:.1f} s in prefill and "
            f"{decode_s:.1f} s in decode on {names(timings)} (the engine's spans){seen}"
        )
        return which, PHASE.fired(value, t, labels(timings))
    rows = facts.window_stats.join(pairs, on=["fid", "instance"]).unique("source")
    if rows.is_empty():
        if tester is None:
            return None
        return None, PHASE.fired(f"undecided: no engine figures in the windows; {tester}", t)
    peaks = facts.stats.group_by("instance").agg(pl.col("running").max().alias("peak"))
    rows = rows.join(peaks, on="instance", how="left")
    prompt, generated = rows["prompt_tps"].sum(), rows["gen_tps"].sum()
    below = rows.filter((pl.col("waiting") > 0) & (pl.col("running") < pl.col("peak"))).height
    at_peak = rows.filter(pl.col("running") >= pl.col("peak")).height
    which = None
    if prompt >= generated and prompt > 0 and below:
        which = PREFILL
    elif generated > prompt and at_peak:
        which = DECODE
    value = (
        f"{which.words if which else 'undecided'}: over {rows.height} stats line(s) on "
        f"{names(rows)}, {prompt:.0f} prompt against {generated:.0f} generated tokens/s summed; "
        f"{below} line(s) with requests waiting below the peak Running, {at_peak} at it "
        f"({', '.join(f'{i} {p}' for i, p in peaks.sort('instance').iter_rows() if i in set(rows['instance']))})"
        f"{seen}"
    )
    return which, PHASE.fired(value, t, labels(rows))


def _tester_speeds(facts: Facts, pairs: pl.DataFrame) -> str | None:
    """The tester's own medians of time to first token and time per output token (answered
    requests), at its lightest step against the steps of the failures explained. Figures
    beside the engine's, never deciding: both grow under prefill and under decode load
    (aiperf-haproxy, prefill-bound by its engines' stats: TTFT ×1.2 and TPOT ×1.7 from
    concurrency 2 to 4)."""
    answered = facts.measured.filter(
        pl.col("ok").fill_null(False)
        & pl.col("ttft_s").is_not_null()
        & pl.col("latency_s").is_not_null()
    ).with_columns(
        pl.when(pl.col("output_tokens") > 1)
        .then((pl.col("latency_s") - pl.col("ttft_s")) / (pl.col("output_tokens") - 1))
        .alias("tpot_s"),
        pl.coalesce(pl.col("concurrency"), pl.col("step")).alias("_load"),
    )
    if answered.is_empty():
        return None
    failed_steps = facts.failures.join(pairs.select("fid").unique(), on="fid")
    loads = failed_steps.select(pl.coalesce(pl.col("concurrency"), pl.col("step")))
    heavy = answered.filter(pl.col("_load").is_in(loads.to_series().drop_nulls().implode()))
    lightest = answered["_load"].min()
    light = answered.filter(pl.col("_load") == lightest)
    if heavy.is_empty() or light.is_empty() or heavy["_load"].min() == lightest:
        return None
    by = "concurrency" if answered["concurrency"].is_not_null().any() else "step"
    a, b = light["ttft_s"].median(), heavy["ttft_s"].median()
    parts = [f"TTFT {a:.2f} → {b:.2f} s (×{b / a:.1f})" if a else f"TTFT → {b:.2f} s"]
    c, d = light["tpot_s"].median(), heavy["tpot_s"].median()
    if c and d:
        parts.append(f"TPOT {c * 1000:.0f} → {d * 1000:.0f} ms (×{d / c:.1f})")
    steps = ", ".join(str(x) for x in heavy["_load"].unique().sort().to_list())
    return (
        f"the tester's medians over answered requests, {by} {lightest} against {steps}: "
        f"{', '.join(parts)} (figures only: both grow under prefill and under decode load)"
    )


def _max(rows: pl.DataFrame, column: str) -> str:
    value = rows[column].max()
    return "?" if value is None else f"{value:g}"


def _without_failures(facts: Facts, t: Thresholds) -> RuleResult:
    """Every request succeeded: a compute bottleneck only if requests queued with KV room
    while latency grew."""
    queued = facts.stats.filter(
        (pl.col("waiting") > 0)
        & (pl.col("kv_pct") < t.kv_full_pct)
        & ~pl.col("instance").is_in(kv_cache.preempted_instances(facts))
    )
    evidence = []
    if queued.height and shared.capacity(facts.runs, t):
        evidence.append(
            QUEUED_WITHOUT_FAILURES.fired(
                f"max Waiting {queued['waiting'].max()} on {names(queued)}", t, labels(queued)
            )
        )
    return RuleResult(Bottleneck.GPU, facts.no_claims(), evidence, subject=names(queued) or None)


RULE = Rule(
    bottleneck=Bottleneck.GPU,
    headline="GPU compute",
    summary="{claimed} of {failed} failed requests reached {subject} while the engine there was busy computing, with KV cache to spare",
    signals=(QUEUED, BUSY, QUEUE_TIME, SHED, PHASE, QUEUED_WITHOUT_FAILURES),
    recommendations=(
        "Add replicas behind the balancer: each instance is at its compute limit.",
        "Tune max_num_batched_tokens / max_num_seqs and keep CUDA graphs on (enforce_eager=False).",
        "Check that the client timeout is longer than the latency at this concurrency.",
    ),
    evaluate=evaluate,
    corroborated=True,
    qualifiers=(SHED_AT_FRONT, PREFILL, DECODE),
)
