"""A front that sheds load is not the bottleneck when the engines behind it are full.

A failed request that never reached an instance died at the front (a proxy's refusal or
queue timeout, a router's flow control). Whether the front is the bottleneck depends on the
engines behind it: with room, the front's limit is below what they take (raise it); with
every instance read in the request's window saturated, the front only shed what the engines
could not take (raising its limit moves the failures inside; add capacity). The engines'
state decides which, and which kind of saturation: the KV cache (full, preempting) or
compute (requests waiting with KV room).
"""

from __future__ import annotations

import polars as pl

from logforensics import model
from logforensics.correlate.reach import FRONT_REJECTED_RE, front_rejected
from logforensics.diagnose.evidence import MAX_SOURCES, Evidence, Signal
from logforensics.diagnose.facts import PRESSURE_KINDS, Facts, labels, names, preemption_sign
from logforensics.diagnose.thresholds import Thresholds

KEYS = ["fid", "instance"]


def states(facts: Facts, t: Thresholds) -> pl.DataFrame:
    """Each (failure, instance read in its window): the most KV and waiting seen, whether
    the KV cache was pressed (full, a pressure line, the stats' preemption sign) and
    whether the instance was saturated (pressed, or requests waiting)."""
    return facts.once(("shedding.states", t), lambda: _states(facts, t))


def _states(facts: Facts, t: Thresholds) -> pl.DataFrame:
    ws = facts.window_stats
    pressure = (
        facts.window_events.filter(pl.col("kind").is_in(PRESSURE_KINDS))
        .select(KEYS)
        .unique()
        .with_columns(pl.lit(True).alias("pressure"))
    )
    return (
        ws.group_by(KEYS)
        .agg(
            pl.col("kv_pct").max().alias("kv_max"),
            pl.col("waiting").max().alias("waiting_max"),
            preemption_sign(t).any().alias("sign"),
        )
        .join(pressure, on=KEYS, how="left")
        .with_columns(
            (
                (pl.col("kv_max") >= t.kv_full_pct).fill_null(False)
                | pl.col("sign")
                | pl.col("pressure").fill_null(False)
            ).alias("pressed")
        )
        .with_columns((pl.col("pressed") | (pl.col("waiting_max") > 0)).alias("saturated"))
    )


def shed(facts: Facts, t: Thresholds, read: pl.DataFrame | None = None) -> pl.DataFrame:
    """The failures that never reached an instance while every instance read in their
    window was saturated: their `states` rows (`read`, where the caller has them), one per
    (failure, instance), with `by` the saturation that decides (`kv_cache` where a KV cache
    read was pressed, else `gpu`)."""
    read = states(facts, t) if read is None else read
    # a 4xx other than 408/429 is the request's own fault, not load the front shed
    unreached = facts.failures.filter(
        (pl.col("reach") == "unreached") & ~pl.col("client_error")
    ).select("fid")
    decided = (
        read.join(unreached, on="fid")
        .group_by("fid")
        .agg(pl.col("saturated").all().alias("all"), pl.col("pressed").any().alias("kv"))
        .filter(pl.col("all"))
        .select(
            "fid",
            pl.when(pl.col("kv")).then(pl.lit("kv_cache")).otherwise(pl.lit("gpu")).alias("by"),
        )
    )
    return read.join(decided, on="fid").sort(KEYS)


def pressed(shed_: pl.DataFrame) -> pl.DataFrame:
    """(fid, instance) of the shed failures' saturated instances: what the verdict names."""
    return shed_.filter(pl.col("saturated")).select(KEYS)


def evidence(signal: Signal, facts: Facts, shed_: pl.DataFrame, t: Thresholds) -> Evidence:
    """The shed failures and the engines' state while they died: the front's own lines
    first (its refusals), then the stats lines that show the engines saturated."""
    failures = facts.failures.filter(pl.col("fid").is_in(shed_["fid"].implode()))
    rows = facts.window_stats.join(shed_.select(KEYS), on=KEYS).filter(
        (pl.col("kv_pct") >= t.kv_full_pct) | (pl.col("waiting") > 0)
    )
    refused = failures.filter(pl.col("proxy_delivery") == "refused").height
    reasons = (
        failures.filter(front_rejected())
        .select(model.text("error").str.extract(f"({FRONT_REJECTED_RE})", 1).alias("why"))
        .group_by("why")
        .len()
        .sort("why")
    )
    said = [f"{refused} refused in the front's own log"] if refused else []
    said += [f"{n} answered {why} by the front" for why, n in reasons.iter_rows()]
    kv, waiting = shed_["kv_max"].max(), shed_["waiting_max"].max()
    value = (
        f"{failures.height}/{facts.failed} never reached an instance"
        + (f" ({'; '.join(said)})" if said else "")
        + f", while {names(shed_)} ran with KV cache up to "
        + ("not reported" if kv is None else f"{kv:g}%")
        + f" and up to {waiting or 0} requests waiting"
    )
    front = labels(failures, "proxy_source")[: MAX_SOURCES // 2]
    return signal.fired(value, t, front + labels(rows))
