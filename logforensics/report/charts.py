"""Charts as inline PNG data URIs: the HTML report fetches nothing.

Every chart stays small whatever the input: beyond `MAX_REQUEST_LINES`
requests the timeline draws per-bin counts instead of one bar per request,
engine stats are reduced to at most `MAX_POINTS` bins per instance (peaks
kept), failure shading is merged into at most `MAX_SPANS` spans, and beyond
`MAX_PROXY_MARKS` proxy errors shade each time bin by their count. A PNG's
size depends on its pixels, not on the rows behind it.

All time axes are on the servers' clock (client times are shifted by the
estimated offset), so the timeline and the engine chart line up.
"""

from __future__ import annotations

import base64
import datetime as dt
import io
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.dates as mdates  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import polars as pl  # noqa: E402
from matplotlib.collections import LineCollection  # noqa: E402
from matplotlib.colors import LinearSegmentedColormap, to_rgb  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from logforensics.analysis import Analysis  # noqa: E402

OK_COLOUR = "#2e7d32"
FAILED_COLOUR = "#c62828"
PROXY_COLOUR = "#6a1b9a"
OUTCOME_COLOURS = {"ok": OK_COLOUR, "failed": FAILED_COLOUR, "unreached": FAILED_COLOUR}
UNREACHED_LANE = "never reached an instance"
UNKNOWN_LANE = "unknown"

WIDTH_IN = 9.0  # every chart the same width, so they scale alike on the page
NARROW_WIDTH_IN = 4.4  # the phone-width variant (a <picture> source below 600 px)
DPI = 120
MAX_REQUEST_LINES = 2000  # beyond this the timeline draws counts per time bin
MAX_BINS = 600
MAX_POINTS = 1500  # engine-stats points per instance and series
MAX_SPANS = 150  # shaded failure spans
MAX_PROXY_MARKS = 200  # beyond this proxy errors shade time bins, not a line each
BIN_STEPS_S = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400)
STYLE = {
    "font.size": 10,
    "axes.titlesize": 10,
    "axes.labelsize": 10,
    "legend.fontsize": 9,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
}


def _data_uri(fig, tight: bool = True) -> str:
    buf = io.BytesIO()
    if tight:
        fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight", pad_inches=0.08)
    else:
        fig.savefig(buf, format="png", dpi=DPI)
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


# The two time charts share their horizontal layout (inches), so that their time axes line
# up one above the other on the page: a failure in the timeline sits over the engine state
# at that moment.
TIME_LEFT_IN, TIME_RIGHT_IN = 0.85, 0.6
TIME_TOP_IN, TIME_BOTTOM_IN = 0.45, 0.62


def _time_figure(narrow: bool, rows: int, row_in: float, gap_in: float = 0.0, top_in=None):
    """A figure of `rows` stacked axes with the shared time-chart margins."""
    width = _width(narrow)
    top_in = TIME_TOP_IN if top_in is None else top_in
    height = top_in + TIME_BOTTOM_IN + rows * row_in + (rows - 1) * gap_in
    fig, axes = plt.subplots(rows, 1, figsize=(width, height), sharex=True, squeeze=False)
    fig.subplots_adjust(
        left=TIME_LEFT_IN / width,
        right=1 - TIME_RIGHT_IN / width,
        top=1 - top_in / height,
        bottom=TIME_BOTTOM_IN / height,
        hspace=gap_in / row_in if rows > 1 else 0,
    )
    return fig, list(axes[:, 0])


def bin_seconds(span_s: float, max_bins: int = MAX_BINS) -> int:
    """The smallest round bin width that cuts `span_s` into at most `max_bins` bins."""
    for step in BIN_STEPS_S:
        if span_s / step <= max_bins:
            return step
    return int(math.ceil(span_s / max_bins / 86400)) * 86400


def _fmt_bin(seconds: int) -> str:
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min"
    return f"{seconds / 3600:g} h"


def _width(narrow: bool) -> float:
    return NARROW_WIDTH_IN if narrow else WIDTH_IN


def _time_axis(ax, lo: dt.datetime, hi: dt.datetime, narrow: bool = False) -> None:
    """Concise UTC ticks (09:31, 09:32, …); the date in the label."""
    locator = mdates.AutoDateLocator(minticks=3, maxticks=5 if narrow else 9, tz=dt.timezone.utc)
    formatter = mdates.ConciseDateFormatter(locator, tz=dt.timezone.utc, show_offset=False)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(formatter)
    first, last = lo.astimezone(dt.timezone.utc).date(), hi.astimezone(dt.timezone.utc).date()
    day = str(first) if first == last else f"{first} – {last}"
    ax.set_xlabel(f"time (UTC, servers' clock), {day}")


def _shift(analysis: Analysis) -> pl.Expr:
    return pl.duration(microseconds=int(round(analysis.clock.offset_s * 1e6)))


def _num(series: pl.Series) -> np.ndarray:
    """Datetimes as matplotlib date numbers (days), fast."""
    us = series.dt.epoch("us").to_numpy().astype("float64")
    return us / 86_400e6


def _time_range(analysis: Analysis) -> tuple[dt.datetime, dt.datetime] | None:
    """The span both time charts share: the measured requests (servers' clock), else the stats.

    An instance log often covers hours around the test; the charts show the test.
    """
    shift = _shift(analysis)
    reqs = analysis.measured.filter(pl.col("started_at").is_not_null())
    if reqs.height:
        lo, hi = reqs.select(
            (pl.col("started_at") + shift).min().alias("lo"),
            (pl.coalesce("ended_at", "started_at") + shift).max().alias("hi"),
        ).row(0)
    else:
        stats = analysis.tables["engine_stats"].filter(pl.col("at").is_not_null())
        if stats.is_empty():
            return None
        lo, hi = stats.select(pl.col("at").min().alias("lo"), pl.col("at").max().alias("hi")).row(0)
    pad = max((hi - lo) * 0.03, dt.timedelta(seconds=15))
    return lo - pad, hi + pad


def timeline(analysis: Analysis, narrow: bool = False) -> dict | None:
    """One lane per instance, one for requests that never reached one; proxy errors marked."""
    shift = _shift(analysis)
    reqs = analysis.measured.filter(pl.col("started_at").is_not_null())
    if reqs.is_empty():
        return None
    lane = (
        pl.when(pl.col("instance").is_not_null())
        .then(pl.col("instance"))
        .when((pl.col("reach") == "reached") & pl.col("proxy_delivery").is_not_null())
        .then(pl.format("{} (per proxy)", pl.coalesce("proxy_instance", "proxy_upstream")))
        .when(pl.col("reach") == "unreached")
        .then(pl.lit(UNREACHED_LANE))
        .otherwise(pl.lit(UNKNOWN_LANE))
    )
    reqs = reqs.select(
        lane.alias("lane"),
        pl.col("ok").fill_null(False),
        (pl.col("started_at") + shift).alias("s"),
        (pl.coalesce("ended_at", "started_at") + shift).alias("e"),
    ).sort("s")
    lanes = [*analysis.instances, UNREACHED_LANE]
    if (reqs["lane"] == UNKNOWN_LANE).any():
        lanes.append(UNKNOWN_LANE)
    extra = sorted(set(reqs["lane"].unique().to_list()) - set(lanes))
    lanes[len(analysis.instances) : len(analysis.instances)] = extra
    lo, hi = _time_range(analysis)
    span_s = (hi - lo).total_seconds()
    aggregated = reqs.height > MAX_REQUEST_LINES
    note = None
    with plt.rc_context(STYLE):
        fig, (ax,) = _time_figure(narrow, 1, 0.85 * len(lanes))
        if aggregated:
            step = bin_seconds(span_s)
            note = f"{reqs.height:,} requests: drawn as requests started per {_fmt_bin(step)}, each lane scaled to its own peak."
            peaks = _timeline_counts(ax, reqs, lanes, step)
        else:
            _timeline_bars(ax, reqs, lanes)
        proxy = analysis.tables["proxy_events"].filter(pl.col("at").is_not_null())
        proxy_shaded = proxy.height > MAX_PROXY_MARKS
        if proxy_shaded:
            _proxy_error_bins(ax, proxy, bin_seconds(span_s), len(lanes))
        elif proxy.height:
            ax.vlines(
                _num(proxy["at"]),
                -0.5,
                len(lanes) - 0.5,
                colors=PROXY_COLOUR,
                linestyles="dashed",
                lw=0.8,
                alpha=0.7 if proxy.height < 100 else 0.25,
            )
        counts = dict(reqs.group_by("lane").len().iter_rows())
        for i, name in enumerate(lanes):
            ax.text(
                1.005,
                i,
                f"{counts.get(name, 0):,}",
                transform=ax.get_yaxis_transform(),
                va="center",
                fontsize=9,
            )
        for i, name in enumerate(lanes):
            ax.text(
                0.006,
                i - 0.47,
                name + (peaks.get(name, "") if aggregated else ""),
                transform=ax.get_yaxis_transform(),
                va="top",
                fontsize=9,
                fontweight="bold",
                color="#333",
            )
            if i:
                ax.axhline(i - 0.5, color="#bbb", lw=0.8)
        ax.set_yticks([])
        ax.set_ylim(len(lanes) - 0.5, -0.5)  # first lane on top
        ax.set_xlim(mdates.date2num(lo), mdates.date2num(hi))
        _time_axis(ax, lo, hi, narrow=narrow)
        ax.grid(axis="x", alpha=0.3)
        handles = [
            plt.Line2D([], [], color=OK_COLOUR, lw=3, label="succeeded"),
            plt.Line2D([], [], color=FAILED_COLOUR, lw=3, label="failed"),
        ]
        if proxy_shaded:
            label = f"proxy errors ({proxy.height:,}; darker = more per bin)"
            handles.append(Patch(color=PROXY_COLOUR, alpha=0.35, label=label))
        elif proxy.height:
            handles.append(plt.Line2D([], [], color=PROXY_COLOUR, ls="--", label="proxy error"))
        ax.legend(
            handles=handles,
            loc="lower center",
            bbox_to_anchor=(0.5, 1.0),
            ncol=3,
            frameon=False,
        )
        return {"uri": _data_uri(fig, tight=False), "note": note}


def _proxy_error_bins(ax, proxy: pl.DataFrame, step: int, lanes: int) -> None:
    """Too many proxy errors for a line each: shade each time bin by its share of the peak."""
    binned = proxy.group_by(pl.col("at").dt.truncate(f"{step}s").alias("bin")).len()
    first = binned["bin"].min()
    slot = ((binned["bin"] - first).dt.total_seconds() // step).cast(pl.Int64).to_numpy()
    counts = np.zeros(int(slot.max()) + 1)
    counts[slot] = binned["len"].to_numpy()
    width = step / 86400
    edges = mdates.date2num(first) + width * np.arange(counts.size + 1)
    shade = LinearSegmentedColormap.from_list(
        "proxy", [(*to_rgb(PROXY_COLOUR), 0.0), (*to_rgb(PROXY_COLOUR), 0.45)]
    )
    ax.pcolormesh(
        edges, [-0.5, lanes - 0.5], counts[np.newaxis, :] / counts.max(), cmap=shade, zorder=0
    )


def _timeline_bars(ax, reqs: pl.DataFrame, lanes: list[str]) -> None:
    """Each request a bar from start to end, spread within its lane."""
    for i, name in enumerate(lanes):
        rows = reqs.filter(pl.col("lane") == name)
        if rows.is_empty():
            continue
        k = np.arange(rows.height)
        y = i + 0.09 + ((k % 12) - 5.5) / 19  # below the lane's label
        s, e = _num(rows["s"]), _num(rows["e"])
        ok = rows["ok"].to_numpy()
        for mask, colour in ((ok, OK_COLOUR), (~ok, FAILED_COLOUR)):
            if not mask.any():
                continue
            segments = np.stack(
                [np.column_stack([s[mask], y[mask]]), np.column_stack([e[mask], y[mask]])], axis=1
            )
            ax.add_collection(
                LineCollection(segments, colors=colour, linewidths=2.2, alpha=0.85, capstyle="butt")
            )
            # a request too short to show as a bar is still a visible dot
            ax.plot(s[mask], y[mask], "|", color=colour, ms=4, alpha=0.85)


def _timeline_counts(ax, reqs: pl.DataFrame, lanes: list[str], step: int) -> dict[str, str]:
    """Requests started per bin, ok stacked under failed, each lane scaled to its peak.

    Each lane is two filled step outlines (one artist each), not a bar per
    bin: at a million requests a bar per bin cost seconds to build and draw.
    """
    binned = (
        reqs.with_columns(pl.col("s").dt.truncate(f"{step}s").alias("bin"))
        .group_by("lane", "bin")
        .agg(pl.col("ok").sum().alias("ok"), (~pl.col("ok")).sum().alias("failed"))
    )
    first = binned["bin"].min()
    binned = binned.with_columns(
        ((pl.col("bin") - pl.lit(first)).dt.total_seconds() // step).cast(pl.Int64).alias("slot")
    )
    slots = int(binned["slot"].max()) + 1
    width = step / 86400
    edges = mdates.date2num(first) + width * np.arange(slots + 1)
    peaks = {}
    for i, name in enumerate(lanes):
        rows = binned.filter(pl.col("lane") == name)
        if rows.is_empty():
            continue
        ok, failed = np.zeros(slots), np.zeros(slots)
        slot = rows["slot"].to_numpy()
        ok[slot] = rows["ok"].to_numpy()
        failed[slot] = rows["failed"].to_numpy()
        peak = max(1.0, float((ok + failed).max()))
        base = i + 0.45
        h_ok, h_failed = 0.66 * ok / peak, 0.66 * failed / peak
        ax.stairs(base - h_ok, edges, baseline=base, fill=True, color=OK_COLOUR, lw=0)
        if failed.any():
            ax.stairs(
                base - h_ok - h_failed,
                edges,
                baseline=base - h_ok,
                fill=True,
                color=FAILED_COLOUR,
                lw=0,
            )
        peaks[name] = f"  (peak {int(peak):,} per {_fmt_bin(step)})"
    return peaks


def _failure_spans(analysis: Analysis) -> list[tuple[float, float]]:
    """Failed requests' [start, end] on the servers' clock, merged; at most MAX_SPANS."""
    shift = _shift(analysis)
    failed = (
        analysis.measured.filter(~pl.col("ok") & pl.col("started_at").is_not_null())
        .select(
            (pl.col("started_at") + shift).alias("s"),
            (pl.coalesce("ended_at", "started_at") + shift).alias("e"),
        )
        .sort("s")
    )
    if failed.is_empty():
        return []
    s, e = _num(failed["s"]), _num(failed["e"])
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


def engine_state(analysis: Analysis, narrow: bool = False) -> dict | None:
    """Running / Waiting, GPU KV cache % and generation throughput per instance."""
    stats = analysis.tables["engine_stats"].filter(pl.col("at").is_not_null()).sort("at")
    if stats.is_empty():
        return None
    lo, hi = _time_range(analysis)
    span_s = (hi - lo).total_seconds()
    has_tps = stats["gen_tps"].is_not_null().any()
    panels = 3 if has_tps else 2
    reduced = stats.height > MAX_POINTS * max(1, len(analysis.instances))
    names = [n for n in analysis.instances if n in set(stats["instance"].to_list())]
    names += sorted(set(stats["instance"].drop_nulls().to_list()) - set(names))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    with plt.rc_context(STYLE):
        legend_rows = math.ceil((len(names) + 1) / (2 if narrow else 5))
        fig, axes = _time_figure(
            narrow, panels, 1.35, gap_in=0.38, top_in=0.55 + 0.22 * legend_rows
        )
        ax_q, ax_kv = axes[0], axes[1]
        for k, name in enumerate(names):
            colour = colours[k % len(colours)]
            rows = _reduce_stats(stats.filter(pl.col("instance") == name), span_s)
            x = _num(rows["at"])
            ax_q.step(x, rows["running"].to_numpy(), where="post", color=colour, label=name)
            ax_q.step(
                x,
                rows["waiting"].to_numpy(),
                where="post",
                color=colour,
                ls="--",
                lw=1.2,
                alpha=0.9,
            )
            ax_kv.plot(x, rows["gpu_kv_pct"].to_numpy(), color=colour, marker=".", ms=3, label=name)
            if has_tps:
                axes[2].plot(x, rows["gen_tps"].to_numpy(), color=colour, lw=1.2, label=name)
        for a, b in _failure_spans(analysis):
            for ax in axes:
                ax.axvspan(a, b, color=FAILED_COLOUR, alpha=0.08, lw=0)
        top = max(1, int(stats["running"].max() or 0), int(stats["waiting"].max() or 0))
        ax_q.set_ylim(bottom=0, top=top * 1.15)
        ax_q.yaxis.get_major_locator().set_params(integer=True)
        ax_q.set_ylabel("requests")
        ax_q.set_title("Running (solid) and Waiting (dashed)", loc="left")
        ax_kv.set_ylabel("GPU KV %")
        ax_kv.set_ylim(0, 105)
        ax_kv.set_title("GPU KV cache usage", loc="left")
        if has_tps:
            axes[2].set_ylabel("tokens/s")
            axes[2].set_ylim(bottom=0)
            axes[2].set_title("generation throughput", loc="left")
        handles = [
            plt.Line2D([], [], color=colours[k % len(colours)], lw=2, label=name)
            for k, name in enumerate(names)
        ]
        handles.append(
            plt.Rectangle((0, 0), 1, 1, color=FAILED_COLOUR, alpha=0.2, label="failed requests")
        )
        ax_q.legend(
            handles=handles,
            loc="lower center",
            bbox_to_anchor=(0.5, 1.12),
            ncol=min(len(handles), 2 if narrow else 5),
            frameon=False,
        )
        ax_q.set_xlim(mdates.date2num(lo), mdates.date2num(hi))
        _time_axis(axes[-1], lo, hi, narrow=narrow)
        for ax in axes:
            ax.grid(alpha=0.3)
        note = (
            f"{stats.height:,} stats lines: drawn as the peak per {_fmt_bin(bin_seconds(span_s, MAX_POINTS))}."
            if reduced
            else None
        )
        return {"uri": _data_uri(fig, tight=False), "note": note}


def _nan(value) -> float:
    return float("nan") if value is None else float(value)


def capacity(analysis: Analysis, narrow: bool = False) -> dict | None:
    """Concurrency against success rate, latency of successes and throughput."""
    steps = sorted(
        (r for r in analysis.runs if not r["warmup"] and r["sent"]),
        key=lambda r: (r["concurrency"], r["index"]),
    )
    if len(steps) < 2:
        return None
    conc = [r["concurrency"] for r in steps]
    with plt.rc_context(STYLE):
        if narrow:
            fig, axes = plt.subplots(3, 1, figsize=(NARROW_WIDTH_IN, 7.2))
        else:
            fig, axes = plt.subplots(1, 3, figsize=(WIDTH_IN, 2.9))
        axes[0].plot(conc, [100 * r["succeeded"] / r["sent"] for r in steps], "o-", color=OK_COLOUR)
        axes[0].set_ylabel("success %")
        axes[0].set_ylim(0, 105)
        axes[1].plot(conc, [_nan(r["latency_s"]["p50"]) for r in steps], "o-", label="P50")
        axes[1].plot(conc, [_nan(r["latency_s"]["p95"]) for r in steps], "s--", label="P95")
        axes[1].set_ylabel("latency of successes (s)")
        axes[1].set_ylim(bottom=0)
        axes[1].legend(frameon=False)
        axes[2].plot(conc, [_nan(r["output_tokens_per_s"]) for r in steps], "o-", color="#555")
        axes[2].set_ylabel("output tokens/s")
        axes[2].set_ylim(bottom=0)
        for ax in axes:
            ax.set_xlabel("concurrent requests")
            ax.grid(alpha=0.3)
        fig.tight_layout(w_pad=1.5, h_pad=1.0)
        return {"uri": _data_uri(fig), "note": None}


def balance(analysis: Analysis, narrow: bool = False) -> dict | None:
    """Requests each instance served per step, against an even split."""
    steps = [r for r in analysis.runs if not r["warmup"]]
    names = analysis.instances
    if not steps or len(names) < 2:
        return None
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(_width(narrow), 3.4 if narrow else 3.2))
        width = 0.8 / len(names)
        for k, name in enumerate(names):
            xs = [i + (k - (len(names) - 1) / 2) * width for i in range(len(steps))]
            ax.bar(xs, [r["per_instance"].get(name, 0) for r in steps], width, label=name)
        for i, r in enumerate(steps):
            even = sum(r["per_instance"].values()) / len(names)
            ax.hlines(even, i - 0.45, i + 0.45, colors="black", linestyles="dotted", lw=1.5)
        many = len(steps) > (5 if narrow else 12)
        ax.set_xticks(
            range(len(steps)),
            [str(r["index"]) if many else f"step {r['index']}\n{r['sent']} sent" for r in steps],
        )
        if many:
            ax.set_xlabel("step")
        ax.set_ylabel("requests served")
        handles, _ = ax.get_legend_handles_labels()
        handles.append(plt.Line2D([], [], color="black", ls="dotted", label="even split"))
        ax.legend(
            handles=handles,
            loc="lower center",
            bbox_to_anchor=(0.5, 1.0),
            ncol=min(len(handles), 3 if narrow else 6),
            frameon=False,
        )
        ax.grid(axis="y", alpha=0.3)
        return {"uri": _data_uri(fig), "note": None}
