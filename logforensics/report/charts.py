"""Charts as inline PNG data URIs, drawn from prepared series: the HTML report fetches nothing.

Each function draws one `series` dataclass (built once by `report.series`) at
page width or, with `narrow`, for phones. A PNG's size depends on its pixels,
not on the rows behind it.
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
from matplotlib.collections import LineCollection  # noqa: E402
from matplotlib.colors import LinearSegmentedColormap, to_rgb  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from logforensics.report.series import (  # noqa: E402
    BalanceSeries,
    Bins,
    CapacitySeries,
    EngineSeries,
    LaneBars,
    LaneCounts,
    TimelineSeries,
    bin_label,
)

OK_COLOUR = "#2e7d32"
FAILED_COLOUR = "#c62828"
PROXY_COLOUR = "#6a1b9a"

WIDTH_IN = 9.0  # every chart the same width, so they scale alike on the page
NARROW_WIDTH_IN = 4.4  # the phone-width variant (a <picture> source below 600 px)
DPI = 120
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


def data_uri(fig, tight: bool = True) -> str:
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


def _width(narrow: bool) -> float:
    return NARROW_WIDTH_IN if narrow else WIDTH_IN


def time_axis(ax, lo: dt.datetime, hi: dt.datetime, narrow: bool = False) -> None:
    """Concise UTC ticks (09:31, 09:32, …); the date in the label."""
    locator = mdates.AutoDateLocator(minticks=3, maxticks=5 if narrow else 9, tz=dt.timezone.utc)
    # finer steps than matplotlib's own, so a few minutes' test finds 3–5 ticks (else it warns)
    locator.intervald[mdates.SECONDLY] = [1, 2, 3, 5, 10, 15, 20, 30, 45, 60]
    locator.intervald[mdates.MINUTELY] = [1, 2, 3, 5, 10, 15, 20, 30]
    formatter = mdates.ConciseDateFormatter(locator, tz=dt.timezone.utc, show_offset=False)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(formatter)
    first, last = lo.astimezone(dt.timezone.utc).date(), hi.astimezone(dt.timezone.utc).date()
    day = str(first) if first == last else f"{first} – {last}"
    ax.set_xlabel(f"time (UTC, servers' clock), {day}")


def timeline(series: TimelineSeries, narrow: bool = False) -> dict:
    """One lane per instance, one for requests that never reached one; proxy errors marked."""
    lanes, lo, hi = series.lanes, series.lo, series.hi
    note = None
    with plt.rc_context(STYLE):
        fig, (ax,) = _time_figure(narrow, 1, 0.85 * len(lanes))
        peaks = {}
        if series.counts is not None:
            note = f"{series.total:,} requests: drawn as requests started per {bin_label(series.bins.step_s)}, each lane scaled to its own peak."
            _timeline_counts(ax, series.bins, series.counts, lanes)
            peaks = {
                name: f"  (peak {c.peak:,} per {bin_label(series.bins.step_s)})"
                for name, c in series.counts.items()
            }
        else:
            _timeline_bars(ax, series.bars, lanes)
        if series.proxy_bins is not None:
            _proxy_error_bins(ax, series.proxy_bins, series.proxy_shade, len(lanes))
        elif series.proxy_marks is not None:
            ax.vlines(
                series.proxy_marks,
                -0.5,
                len(lanes) - 0.5,
                colors=PROXY_COLOUR,
                linestyles="dashed",
                lw=0.8,
                alpha=0.7 if series.proxy_errors < 100 else 0.25,
            )
        for i, count in enumerate(series.requests):
            ax.text(
                1.005,
                i,
                f"{count:,}",
                transform=ax.get_yaxis_transform(),
                va="center",
                fontsize=9,
            )
        for i, name in enumerate(lanes):
            ax.text(
                0.006,
                i - 0.47,
                name + peaks.get(name, ""),
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
        time_axis(ax, lo, hi, narrow=narrow)
        ax.grid(axis="x", alpha=0.3)
        handles = [
            plt.Line2D([], [], color=OK_COLOUR, lw=3, label="succeeded"),
            plt.Line2D([], [], color=FAILED_COLOUR, lw=3, label="failed"),
        ]
        if series.proxy_bins is not None:
            label = f"proxy errors ({series.proxy_errors:,}; darker = more per bin)"
            handles.append(Patch(color=PROXY_COLOUR, alpha=0.35, label=label))
        elif series.proxy_marks is not None:
            handles.append(plt.Line2D([], [], color=PROXY_COLOUR, ls="--", label="proxy error"))
        ax.legend(
            handles=handles,
            loc="lower center",
            bbox_to_anchor=(0.5, 1.0),
            ncol=3,
            frameon=False,
        )
        return {"uri": data_uri(fig, tight=False), "note": note}


def _proxy_error_bins(ax, bins: Bins, shade: np.ndarray, lanes: int) -> None:
    """Too many proxy errors for a line each: shade each time bin by its share of the peak."""
    colours = LinearSegmentedColormap.from_list(
        "proxy", [(*to_rgb(PROXY_COLOUR), 0.0), (*to_rgb(PROXY_COLOUR), 0.45)]
    )
    ax.pcolormesh(bins.edges, [-0.5, lanes - 0.5], shade[np.newaxis, :], cmap=colours, zorder=0)


def _timeline_bars(ax, bars: dict[str, LaneBars], lanes: list[str]) -> None:
    """Each request a bar from start to end, spread within its lane."""
    for i, name in enumerate(lanes):
        lane = bars.get(name)
        if lane is None:
            continue
        k = np.arange(lane.start.size)
        y = i + 0.09 + ((k % 12) - 5.5) / 19  # below the lane's label
        s, e, ok = lane.start, lane.end, lane.ok
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


def _timeline_counts(ax, bins: Bins, counts: dict[str, LaneCounts], lanes: list[str]) -> None:
    """Requests started per bin, ok stacked under failed, each lane scaled to its peak.

    Each lane is two filled step outlines (one artist each), not a bar per
    bin: at a million requests a bar per bin cost seconds to build and draw.
    """
    for i, name in enumerate(lanes):
        lane = counts.get(name)
        if lane is None:
            continue
        base = i + 0.45
        h_ok, h_failed = 0.66 * lane.ok / lane.peak, 0.66 * lane.failed / lane.peak
        ax.stairs(base - h_ok, bins.edges, baseline=base, fill=True, color=OK_COLOUR, lw=0)
        if lane.failed.any():
            ax.stairs(
                base - h_ok - h_failed,
                bins.edges,
                baseline=base - h_ok,
                fill=True,
                color=FAILED_COLOUR,
                lw=0,
            )


def engine_state(series: EngineSeries, narrow: bool = False) -> dict:
    """Running / Waiting, GPU KV cache % and generation throughput per instance."""
    lo, hi = series.lo, series.hi
    panels = 3 if series.has_tps else 2
    names = list(series.instances)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    with plt.rc_context(STYLE):
        legend_rows = math.ceil((len(names) + 1) / (2 if narrow else 5))
        fig, axes = _time_figure(
            narrow, panels, 1.35, gap_in=0.38, top_in=0.55 + 0.22 * legend_rows
        )
        ax_q, ax_kv = axes[0], axes[1]
        for k, (name, stats) in enumerate(series.instances.items()):
            colour = colours[k % len(colours)]
            ax_q.step(stats.at, stats.running, where="post", color=colour, label=name)
            ax_q.step(
                stats.at, stats.waiting, where="post", color=colour, ls="--", lw=1.2, alpha=0.9
            )
            ax_kv.plot(stats.at, stats.gpu_kv_pct, color=colour, marker=".", ms=3, label=name)
            if series.has_tps:
                axes[2].plot(stats.at, stats.gen_tps, color=colour, lw=1.2, label=name)
        for a, b in series.failure_spans:
            for ax in axes:
                ax.axvspan(a, b, color=FAILED_COLOUR, alpha=0.08, lw=0)
        ax_q.set_ylim(bottom=0, top=series.queue_top * 1.15)
        ax_q.yaxis.get_major_locator().set_params(integer=True)
        ax_q.set_ylabel("requests")
        ax_q.set_title("Running (solid) and Waiting (dashed)", loc="left")
        ax_kv.set_ylabel("GPU KV %")
        ax_kv.set_ylim(0, 105)
        ax_kv.set_title("GPU KV cache usage", loc="left")
        if series.has_tps:
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
        time_axis(axes[-1], lo, hi, narrow=narrow)
        for ax in axes:
            ax.grid(alpha=0.3)
        note = (
            f"{series.lines:,} stats lines: drawn as the peak per {bin_label(series.reduced_to_s)}."
            if series.reduced_to_s
            else None
        )
        return {"uri": data_uri(fig, tight=False), "note": note}


def capacity(series: CapacitySeries, narrow: bool = False) -> dict:
    """Concurrency against success rate, latency of successes and throughput."""
    conc = series.concurrency
    with plt.rc_context(STYLE):
        if narrow:
            fig, axes = plt.subplots(3, 1, figsize=(NARROW_WIDTH_IN, 7.2))
        else:
            fig, axes = plt.subplots(1, 3, figsize=(WIDTH_IN, 2.9))
        axes[0].plot(conc, series.success_pct, "o-", color=OK_COLOUR)
        axes[0].set_ylabel("success %")
        axes[0].set_ylim(0, 105)
        axes[1].plot(conc, series.p50_s, "o-", label="P50")
        axes[1].plot(conc, series.p95_s, "s--", label="P95")
        axes[1].set_ylabel("latency of successes (s)")
        axes[1].set_ylim(bottom=0)
        axes[1].legend(frameon=False)
        axes[2].plot(conc, series.output_tokens_per_s, "o-", color="#555")
        axes[2].set_ylabel("output tokens/s")
        axes[2].set_ylim(bottom=0)
        for ax in axes:
            ax.set_xlabel("concurrent requests")
            ax.grid(alpha=0.3)
        fig.tight_layout(w_pad=1.5, h_pad=1.0)
        return {"uri": data_uri(fig), "note": None}


def balance(series: BalanceSeries, narrow: bool = False) -> dict:
    """Requests each instance served per step, against an even split."""
    steps, names = series.steps, series.instances
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(_width(narrow), 3.4 if narrow else 3.2))
        width = 0.8 / len(names)
        for k, name in enumerate(names):
            xs = [i + (k - (len(names) - 1) / 2) * width for i in range(len(steps))]
            ax.bar(xs, series.served[name], width, label=name)
        for i, even in enumerate(series.even):
            ax.hlines(even, i - 0.45, i + 0.45, colors="black", linestyles="dotted", lw=1.5)
        many = len(steps) > (5 if narrow else 12)
        ax.set_xticks(
            range(len(steps)),
            [str(index) if many else f"step {index}\n{sent} sent" for index, sent in steps],
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
        return {"uri": data_uri(fig), "note": None}


# the report's charts in page order: (the ChartSeries field it draws, how)
CHARTS = (
    ("timeline", timeline),
    ("engine", engine_state),
    ("capacity", capacity),
    ("balance", balance),
)
