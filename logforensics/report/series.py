"""What each chart draws, prepared once from the analysis: arrays, never frames.

`charts` only draws these. Every series stays small whatever the input:
beyond `MAX_REQUEST_LINES` requests the timeline is per-bin counts instead of
one bar per request, engine stats are reduced to at most `MAX_POINTS` bins per
instance (peaks kept), failure shading is merged into at most `MAX_SPANS`
spans, and beyond `MAX_PROXY_MARKS` proxy errors are counts per time bin.

Times are matplotlib date numbers (days since 1970-01-01 UTC) on the servers'
clock: client times are shifted by the estimated offset, so the timeline and
the engine chart line up.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass

import numpy as np
import polars as pl

from logforensics import model
from logforensics.analysis import Analysis
from logforensics.model import Step

UNREACHED_LANE = "never reached an instance"
UNKNOWN_LANE = "unknown"
PER_PROXY = " (per proxy)"  # a lane the proxy's log alone names
MAX_REQUEST_LINES = 2000  # beyond this the timeline draws counts per time bin
MAX_BINS = 600
MAX_POINTS = 1500  # engine-stats points per instance and series
MAX_SPANS = 150  # shaded failure spans
MAX_PROXY_MARKS = 200  # beyond this proxy errors shade time bins, not a line each
BIN_STEPS_S = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400)
US_PER_DAY = 86_400e6


def bin_seconds(span_s: float, max_bins: int = MAX_BINS) -> int:
    """The smallest round bin width that cuts `span_s` into at most `max_bins` bins."""
    for step in BIN_STEPS_S:
        if span_s / step <= max_bins:
            return step
    return int(math.ceil(span_s / max_bins / 86400)) * 86400


def bin_label(seconds: int) -> str:
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min"
    return f"{seconds / 3600:g} h"


def date_numbers(series: pl.Series) -> np.ndarray:
    """Datetimes as matplotlib date numbers (days), fast."""
    return series.dt.epoch("us").to_numpy().astype("float64") / US_PER_DAY


def date_number(moment: dt.datetime) -> float:
    return moment.timestamp() * 1e6 / US_PER_DAY


@dataclass
class Bins:
    """Counts per time bin: `edges` has one more entry than each count array."""

    edges: np.ndarray
    step_s: int


@dataclass
class LaneBars:
    start: np.ndarray
    end: np.ndarray
    ok: np.ndarray  # bool


@dataclass
class LaneCounts:
    ok: np.ndarray
    failed: np.ndarray
    peak: int


@dataclass
class TimelineSeries:
    """One lane per instance, one for requests that never reached one; proxy errors."""

    lanes: list[str]
    requests: list[int]  # per lane
    lo: dt.datetime
    hi: dt.datetime
    total: int
    bars: dict[str, LaneBars] | None  # one bar per request, or…
    bins: Bins | None  # …requests started per bin
    counts: dict[str, LaneCounts] | None
    proxy_marks: np.ndarray | None  # a line per proxy error, or…
    proxy_bins: Bins | None  # …each bin shaded by its share of the peak
    proxy_shade: np.ndarray | None
    proxy_errors: int


@dataclass
class InstanceStats:
    at: np.ndarray
    running: np.ndarray
    waiting: np.ndarray
    gpu_kv_pct: np.ndarray
    gen_tps: np.ndarray


@dataclass
class EngineSeries:
    """Running / Waiting, GPU KV cache % and generation throughput per instance."""

    instances: dict[str, InstanceStats]
    lo: dt.datetime
    hi: dt.datetime
    failure_spans: list[tuple[float, float]]
    queue_top: int
    has_tps: bool
    lines: int
    reduced_to_s: int | None  # the bin width when stats were reduced


@dataclass
class CapacitySeries:
    concurrency: list[int]
    success_pct: list[float]
    p50_s: list[float]
    p95_s: list[float]
    output_tokens_per_s: list[float]


@dataclass
class BalanceSeries:
    instances: list[str]
    steps: list[tuple[int, int]]  # (step index, sent)
    served: dict[str, list[int]]  # per instance, per step
    even: list[float]  # per step


@dataclass
class ChartSeries:
    timeline: TimelineSeries | None
    engine: EngineSeries | None
    capacity: CapacitySeries | None
    balance: BalanceSeries | None


def _shift(analysis: Analysis) -> pl.Expr:
    return pl.duration(microseconds=int(round(analysis.clock.offset_s * 1e6)))


def time_range(analysis: Analysis) -> tuple[dt.datetime, dt.datetime] | None:
    """The span both time charts share: the measured requests (servers' clock), else the stats.

    An instance log often covers hours around the test; the charts show the test.
    """
    shift = _shift(analysis)
    # (lazy: the filter then reads only the columns selected after it)
    timed = analysis.measured.lazy().filter(pl.col("started_at").is_not_null())
    n, lo, hi = (
        timed.select(
            pl.len().alias("n"),
            (pl.col("started_at") + shift).min().alias("lo"),
            (pl.coalesce("ended_at", "started_at") + shift).max().alias("hi"),
        )
        .collect()
        .row(0)
    )
    if not n:
        stats = analysis.tables["engine_stats"].filter(pl.col("at").is_not_null())
        if stats.is_empty():
            return None
        lo, hi = stats.select(pl.col("at").min().alias("lo"), pl.col("at").max().alias("hi")).row(0)
    pad = max((hi - lo) * 0.03, dt.timedelta(seconds=15))
    return lo - pad, hi + pad


def count_bins(times: pl.Series, step_s: int) -> tuple[Bins, np.ndarray]:
    """Events per `step_s` bin from the first event's bin to the last's."""
    binned = pl.DataFrame({"at": times}).group_by(pl.col("at").dt.truncate(f"{step_s}s")).len()
    first = binned["at"].min()
    slot = ((binned["at"] - first).dt.total_seconds() // step_s).cast(pl.Int64).to_numpy()
    counts = np.zeros(int(slot.max()) + 1)
    counts[slot] = binned["len"].to_numpy()
    edges = date_number(first) + step_s / 86400 * np.arange(counts.size + 1)
    return Bins(edges, step_s), counts


def timeline(analysis: Analysis) -> TimelineSeries | None:
    shift = _shift(analysis)
    measured = analysis.measured
    # labels throughout (6.6M strings at 20M, formatted and sorted, were 0.4 s); a lane the
    # proxy's log alone names is flagged (`_via`), and named once counted (`_named_lanes`)
    by_proxy = pl.coalesce(pl.col("proxy_instance", "proxy_upstream").cast(model.LABEL))
    via_proxy = (pl.col("reach") == "reached") & pl.col("proxy_delivery").is_not_null()
    lane = (
        pl.when(pl.col("instance").is_not_null())
        .then(pl.col("instance").cast(model.LABEL))
        .when(via_proxy)
        .then(by_proxy)
        .when(pl.col("reach") == "unreached")
        .then(model.label(UNREACHED_LANE))
        .otherwise(model.label(UNKNOWN_LANE))
    )
    # (a query, not a table: past MAX_REQUEST_LINES only counts are drawn, and counted
    # lazily they take no copy of the requests: 0.14 GB and more at 20M)
    reqs = (
        measured.lazy()
        .filter(pl.col("started_at").is_not_null())
        .select(
            lane.alias("lane"),
            (pl.col("instance").is_null() & via_proxy).fill_null(False).alias("_via"),
            pl.col("ok").fill_null(False),
            (pl.col("started_at") + shift).alias("s"),
            (pl.coalesce("ended_at", "started_at") + shift).alias("e"),
        )
    )
    per_lane = dict(
        _named_lanes(reqs.group_by("lane", "_via").len().collect())
        .group_by("lane")
        .agg(pl.col("len").sum())
        .iter_rows()
    )
    total = sum(per_lane.values())
    if not total:
        return None
    lanes = [*analysis.instances, UNREACHED_LANE]
    if per_lane.get(UNKNOWN_LANE):
        lanes.append(UNKNOWN_LANE)
    extra = sorted(set(per_lane) - set(lanes))
    lanes[len(analysis.instances) : len(analysis.instances)] = extra
    lo, hi = time_range(analysis)
    span_s = (hi - lo).total_seconds()
    bars = bins = counts = None
    if total > MAX_REQUEST_LINES:
        bins, counts = _lane_counts(reqs, lanes, bin_seconds(span_s))
    else:
        bars = {}
        # (a lane's bars in time order; the bins need none)
        ordered = _named_lanes(reqs.sort("s").collect())
        for name in lanes:
            rows = ordered.filter(pl.col("lane") == name)
            if rows.height:
                bars[name] = LaneBars(
                    date_numbers(rows["s"]), date_numbers(rows["e"]), rows["ok"].to_numpy()
                )
    proxy = analysis.tables["proxy_events"].filter(pl.col("at").is_not_null())
    marks = proxy_bins = shade = None
    if proxy.height > MAX_PROXY_MARKS:
        proxy_bins, per_bin = count_bins(proxy["at"], bin_seconds(span_s))
        shade = per_bin / per_bin.max()
    elif proxy.height:
        marks = date_numbers(proxy["at"])
    return TimelineSeries(
        lanes=lanes,
        requests=[per_lane.get(name, 0) for name in lanes],
        lo=lo,
        hi=hi,
        total=total,
        bars=bars,
        bins=bins,
        counts=counts,
        proxy_marks=marks,
        proxy_bins=proxy_bins,
        proxy_shade=shade,
        proxy_errors=proxy.height,
    )


def _named_lanes(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame`'s lanes as drawn: one the proxy's log alone names (`_via`) as its own,
    `<name> (per proxy)`. (On the rows counted: on every request, 0.23 GB at 20M.)"""
    lane = pl.col("lane").cast(pl.Utf8)
    return frame.with_columns(
        pl.when(pl.col("_via")).then(lane + PER_PROXY).otherwise(lane).alias("lane")
    ).drop("_via")


def _lane_counts(
    reqs: pl.LazyFrame, lanes: list[str], step: int
) -> tuple[Bins, dict[str, LaneCounts]]:
    """Requests started per bin and lane, ok and failed apart."""
    binned = (
        _named_lanes(
            reqs.select("lane", "_via", "ok", pl.col("s").dt.truncate(f"{step}s").alias("bin"))
            .group_by("lane", "_via", "bin")
            .agg(pl.col("ok").sum().alias("ok"), (~pl.col("ok")).sum().alias("failed"))
            .collect()
        )
        .group_by("lane", "bin")
        .agg(pl.col("ok").sum(), pl.col("failed").sum())
    )
    first = binned["bin"].min()
    binned = binned.with_columns(
        ((pl.col("bin") - pl.lit(first)).dt.total_seconds() // step).cast(pl.Int64).alias("slot")
    )
    slots = int(binned["slot"].max()) + 1
    edges = date_number(first) + step / 86400 * np.arange(slots + 1)
    out = {}
    for name in lanes:
        rows = binned.filter(pl.col("lane") == name)
        if rows.is_empty():
            continue
        ok, failed = np.zeros(slots), np.zeros(slots)
        slot = rows["slot"].to_numpy()
        ok[slot] = rows["ok"].to_numpy()
        failed[slot] = rows["failed"].to_numpy()
        out[name] = LaneCounts(ok, failed, int(max(1.0, float((ok + failed).max()))))
    return Bins(edges, step), out


def failure_spans(analysis: Analysis) -> list[tuple[float, float]]:
    """Failed requests' [start, end] on the servers' clock, merged; at most MAX_SPANS."""
    shift = _shift(analysis)
    failed = (
        analysis.measured.lazy()
        .filter(~pl.col("ok") & pl.col("started_at").is_not_null())
        .select(
            (pl.col("started_at") + shift).alias("s"),
            (pl.coalesce("ended_at", "started_at") + shift).alias("e"),
        )
        .collect()
        .sort("s")
    )
    if failed.is_empty():
        return []
    s, e = date_numbers(failed["s"]), date_numbers(failed["e"])
    reach = np.maximum.accumulate(e)  # the furthest end so far: spans merge while they overlap
    gap = 0.0
    total = float(reach[-1] - s[0]) or 1e-6
    while True:
        starts = np.concatenate([[True], s[1:] > reach[:-1] + gap])
        first = np.flatnonzero(starts)
        last = np.concatenate([first[1:] - 1, [len(s) - 1]])
        if len(first) <= MAX_SPANS:
            return list(zip(s[first].tolist(), reach[last].tolist(), strict=True))
        gap = total / MAX_SPANS if gap == 0 else gap * 2


def _reduce_stats(rows: pl.DataFrame, span_s: float) -> pl.DataFrame:
    """At most MAX_POINTS per instance: the bin's peak for queues and KV, mean throughput."""
    if rows.height <= MAX_POINTS:
        return rows
    step = bin_seconds(span_s, MAX_POINTS)
    return (
        rows.with_columns(pl.col("at").dt.truncate(f"{step}s"))
        .group_by("at")
        .agg(
            pl.col("running").max(),
            pl.col("waiting").max(),
            pl.col("gpu_kv_pct").max(),
            pl.col("gen_tps").mean(),
        )
        .sort("at")
    )


def _floats(series: pl.Series) -> np.ndarray:
    return series.cast(pl.Float64).to_numpy()


def engine(analysis: Analysis) -> EngineSeries | None:
    stats = analysis.tables["engine_stats"].filter(pl.col("at").is_not_null()).sort("at")
    if stats.is_empty():
        return None
    lo, hi = time_range(analysis)
    span_s = (hi - lo).total_seconds()
    present = set(stats["instance"].drop_nulls().to_list())
    names = [n for n in analysis.instances if n in present]
    names += sorted(present - set(names))
    instances = {}
    for name in names:
        rows = _reduce_stats(stats.filter(pl.col("instance") == name), span_s)
        instances[name] = InstanceStats(
            at=date_numbers(rows["at"]),
            running=_floats(rows["running"]),
            waiting=_floats(rows["waiting"]),
            gpu_kv_pct=_floats(rows["gpu_kv_pct"]),
            gen_tps=_floats(rows["gen_tps"]),
        )
    reduced = stats.height > MAX_POINTS * max(1, len(analysis.instances))
    return EngineSeries(
        instances=instances,
        lo=lo,
        hi=hi,
        failure_spans=failure_spans(analysis),
        queue_top=max(1, int(stats["running"].max() or 0), int(stats["waiting"].max() or 0)),
        has_tps=bool(stats["gen_tps"].is_not_null().any()),
        lines=stats.height,
        reduced_to_s=bin_seconds(span_s, MAX_POINTS) if reduced else None,
    )


def _nan(value) -> float:
    return float("nan") if value is None else float(value)


def capacity(step_runs: list[Step]) -> CapacitySeries | None:
    steps = sorted(
        (r for r in step_runs if not r.warmup and r.sent),
        key=lambda r: (r.concurrency, r.index),
    )
    if len(steps) < 2:
        return None
    return CapacitySeries(
        concurrency=[r.concurrency for r in steps],
        success_pct=[100 * r.succeeded / r.sent for r in steps],
        p50_s=[_nan(r.latency_s.p50) for r in steps],
        p95_s=[_nan(r.latency_s.p95) for r in steps],
        output_tokens_per_s=[_nan(r.output_tokens_per_s) for r in steps],
    )


def balance(step_runs: list[Step], instances: list[str]) -> BalanceSeries | None:
    steps = [r for r in step_runs if not r.warmup]
    if not steps or len(instances) < 2:
        return None
    return BalanceSeries(
        instances=instances,
        steps=[(r.index, r.sent) for r in steps],
        served={n: [r.per_instance.get(n, 0) for r in steps] for n in instances},
        even=[sum(r.per_instance.values()) / len(instances) for r in steps],
    )


def chart_series(analysis: Analysis) -> ChartSeries:
    return ChartSeries(
        timeline=timeline(analysis),
        engine=engine(analysis),
        capacity=capacity(analysis.runs),
        balance=balance(analysis.runs, analysis.instances),
    )
