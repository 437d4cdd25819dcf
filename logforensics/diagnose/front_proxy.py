"""`front_proxy`: failed requests died in front of the instances.

A failure explained here never reached any instance (the proxy's own
refusal or queue timeout says so, or it failed inside every instance log's
span and none saw it) while some instance had room for it. When every
instance read in its window was saturated, the front only shed what the
engines could not take: `kv_cache` or `gpu` claims it (`shedding`).
"""

from __future__ import annotations

import polars as pl

from logforensics import model
from logforensics.diagnose import kv_cache, shedding
from logforensics.diagnose.evidence import Rule, RuleResult, Signal
from logforensics.diagnose.facts import (
    Facts,
    inside_spans,
    labels,
    merged_windows,
    names,
    waited_in_front,
)
from logforensics.diagnose.thresholds import Thresholds
from logforensics.model import Bottleneck

UNREACHED = Signal(
    "failures_never_reached_an_instance",
    "Failed requests that never reached any instance (the proxy refused them, or no log saw them inside every log's span)",
    0.6,
    "> 0",
)
REFUSED = Signal(
    "proxy_refused_before_any_upstream",
    "Failed requests the proxy's own log shows refused before any upstream",
    0.6,
    "> 0 (the proxy's log)",
)
ROOM = Signal(
    "instances_had_room_during_failures",
    "An instance had room during the failed requests' windows",
    0.5,
    "Waiting = 0, KV < {idle_kv_pct:g}%",
)
WAITED = Signal(
    "failures_waited_in_front_of_the_instances",
    "Failed requests their instance received only late in their time at the client: they waited in front of it (a proxy's queue)",
    0.6,
    "arrived ≥ {front_wait_s:g} s after it was sent and after half its time",
)
PROXY_ERRORS = Signal(
    "proxy_errors_at_failure_times",
    "Proxy errors at the times of failed requests that never reached an instance",
    0.5,
    "> 0 within {proxy_window_s:g} s",
)


def evaluate(facts: Facts, t: Thresholds) -> RuleResult:
    if not facts.failed:
        return RuleResult(Bottleneck.FRONT_PROXY, facts.no_claims())
    keys = shedding.KEYS
    unreached = pl.col("reach") == "unreached"
    states = shedding.states(facts, t)
    room = states.filter(
        ~pl.col("saturated") & (pl.col("kv_max").is_null() | (pl.col("kv_max") < t.idle_kv_pct))
    )
    # a failure whose every instance read was saturated: the front shed what the engines
    # could not take (kv_cache and gpu claim it)
    shedding_ = pl.col("fid").is_in(shedding.shed(facts, t, states)["fid"].implode())
    waited = (pl.col("reach") == "reached") & waited_in_front(t)
    claimed = facts.failures.select(((unreached & ~shedding_) | waited).alias("c"))["c"]
    late = facts.failures.filter(waited)
    mine = facts.failures.filter(unreached & ~shedding_)
    evidence = []
    if late.height:
        wait = (late["arrived_at"] - late["w_start"]).dt.total_seconds()
        evidence.append(
            WAITED.fired(
                f"{late.height}/{facts.failed} reached {names(late)} "
                f"{wait.min():.0f}–{wait.max():.0f} s after they were sent",
                t,
                labels(late),
            )
        )
    if mine.height:
        evidence.append(UNREACHED.fired(f"{mine.height}/{facts.failed}", t, labels(mine)))
        refused = mine.filter(pl.col("proxy_delivery") == "refused")
        if refused.height:
            evidence.append(
                REFUSED.fired(
                    f"{refused.height}/{facts.failed}", t, labels(refused, "proxy_source")
                )
            )
        roomy = room.filter(pl.col("fid").is_in(mine["fid"].implode()))
        if roomy.height:
            rows = facts.window_stats.join(roomy.select(keys), on=keys)
            kv = roomy["kv_max"].max()
            kv_text = "not reported" if kv is None else f"{kv:g}% ({kv_cache.devices(rows)})"
            evidence.append(
                ROOM.fired(
                    f"max Waiting 0, max KV cache {kv_text} on "
                    f"{names(roomy)}, during "
                    f"{roomy['fid'].n_unique()} of {mine.height} of these failures",
                    t,
                    labels(rows),
                )
            )
        errors = inside_spans(facts.proxy_events, merged_windows(mine, t.proxy_window_s))
        if errors.height:
            # an access log and an error log may both report one failure: count per file
            per_file = errors.with_columns(model.source_file().alias("file"))
            kinds = "; ".join(
                f"{k}×{n} in {f.rsplit('/', 1)[-1]}"
                for f, k, n in per_file.group_by("file", "kind")
                .len()
                .sort("file", "kind")
                .iter_rows()
            )
            evidence.append(PROXY_ERRORS.fired(kinds, t, labels(errors)))
    return RuleResult(Bottleneck.FRONT_PROXY, claimed, evidence)


RULE = Rule(
    bottleneck=Bottleneck.FRONT_PROXY,
    headline="The front proxy",
    summary="{claimed} of {failed} failed requests never reached an instance or waited in front of one",
    signals=(UNREACHED, REFUSED, WAITED, ROOM, PROXY_ERRORS),
    recommendations=(
        "Raise the proxy's own limits — connections and workers, queue length and timeout, "
        "in-flight or rate limits (its 429s and 503s) — and check its upstream timeouts: "
        "failures died in front of the instances.",
        "Balance by least connections rather than round robin: LLM requests vary widely in "
        "duration.",
        "Have clients retry 429s and 503s with exponential back-off, neither at once in a tight "
        "loop nor by hanging until their timeout.",
        "Adding instances will not help until the front is fixed: the failed requests never "
        "reached one.",
    ),
    evaluate=evaluate,
)
