"""Charts as inline PNG data URIs: the HTML report fetches nothing."""

from __future__ import annotations

import base64
import datetime as dt
import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.dates as mdates  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import polars as pl  # noqa: E402

from logforensics.analysis import Analysis  # noqa: E402

OUTCOME_COLOURS = {
    "ok": "#2e7d32",
    "failed": "#c62828",
    "unreached": "#c62828",
    "unknown": "#9e9e9e",
}
UNREACHED_LANE = "never reached an instance"
UNKNOWN_LANE = "unknown"


def _data_uri(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def timeline(analysis: Analysis) -> str | None:
    """One lane per instance plus one for requests that never reached one."""
    reqs = analysis.requests.filter(pl.col("started_at").is_not_null())
    if reqs.is_empty():
        return None
    lane = (
        pl.when(pl.col("instance").is_not_null())
        .then(pl.col("instance"))
        .when(pl.col("reach") == "unreached")
        .then(pl.lit(UNREACHED_LANE))
        .otherwise(pl.lit(UNKNOWN_LANE))
    )
    reqs = reqs.with_columns(lane.alias("lane")).sort("started_at")
    lanes = [*analysis.instances, UNREACHED_LANE]
    if (reqs["lane"] == UNKNOWN_LANE).any():
        lanes.append(UNKNOWN_LANE)
    fig, ax = plt.subplots(figsize=(10, 1.0 + 0.9 * len(lanes)))
    for i, name in enumerate(lanes):
        rows = reqs.filter(pl.col("lane") == name)
        n = rows.height
        for k, r in enumerate(rows.iter_rows(named=True)):
            y = i + (k % 12 - 5.5) / 16  # spread concurrent requests within the lane
            colour = OUTCOME_COLOURS["ok"] if r["ok"] else OUTCOME_COLOURS["failed"]
            ax.plot(
                [r["started_at"], r["ended_at"]],
                [y, y],
                color=colour,
                lw=1.6,
                alpha=0.8,
                solid_capstyle="butt",
            )
        ax.text(1.005, i, f"{n}", transform=ax.get_yaxis_transform(), va="center", fontsize=8)
    proxy = analysis.tables["proxy_events"]
    for at in proxy["at"].to_list():
        ax.axvline(at, color="#6a1b9a", lw=0.8, ls="--", alpha=0.7)
    ax.set_yticks(range(len(lanes)), lanes)
    ax.set_ylim(-0.7, len(lanes) - 0.3)
    ax.invert_yaxis()
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S", tz="UTC"))
    ax.set_xlabel("time (UTC, client clock)")
    ax.grid(axis="x", alpha=0.3)
    handles = [
        plt.Line2D([], [], color=OUTCOME_COLOURS["ok"], lw=2, label="succeeded"),
        plt.Line2D([], [], color=OUTCOME_COLOURS["failed"], lw=2, label="failed"),
    ]
    if proxy.height:
        handles.append(plt.Line2D([], [], color="#6a1b9a", ls="--", label="proxy error"))
    ax.legend(
        handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.28), ncol=3, frameon=False
    )
    return _data_uri(fig)


def balance(analysis: Analysis) -> str | None:
    """Requests each instance served per step, against an even split."""
    steps = [r for r in analysis.runs if not r["warmup"]]
    if not steps or len(analysis.instances) < 2:
        return None
    fig, ax = plt.subplots(figsize=(7, 3.2))
    width = 0.8 / len(analysis.instances)
    for k, name in enumerate(analysis.instances):
        xs = [i + k * width for i in range(len(steps))]
        ax.bar(xs, [r["per_instance"][name] for r in steps], width, label=name)
    for i, r in enumerate(steps):
        even = sum(r["per_instance"].values()) / len(analysis.instances)
        ax.hlines(
            even,
            i - width / 2,
            i + width * (len(analysis.instances) - 0.5),
            colors="black",
            linestyles="dotted",
        )
    ax.set_xticks(
        [i + width * (len(analysis.instances) - 1) / 2 for i in range(len(steps))],
        [f"step {r['index']}\n{r['sent']} sent" for r in steps],
    )
    ax.set_ylabel("requests served")
    ax.legend(frameon=False, fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return _data_uri(fig)


def capacity(analysis: Analysis) -> str | None:
    """Concurrency against success rate, latency and throughput (the seed's table)."""
    steps = [r for r in analysis.runs if not r["warmup"]]
    if len(steps) < 2:
        return None
    conc = [r["concurrency"] for r in steps]
    fig, axes = plt.subplots(1, 3, figsize=(10, 2.8))
    axes[0].plot(conc, [100 * r["succeeded"] / r["sent"] for r in steps], "o-")
    axes[0].set_ylabel("success %")
    axes[0].set_ylim(0, 105)
    axes[1].plot(conc, [r["latency_s"]["p50"] for r in steps], "o-", label="P50")
    axes[1].plot(conc, [r["latency_s"]["p95"] for r in steps], "s--", label="P95")
    axes[1].set_ylabel("latency of successes (s)")
    axes[1].legend(frameon=False, fontsize=8)
    axes[2].plot(conc, [r["output_tokens_per_s"] or 0 for r in steps], "o-")
    axes[2].set_ylabel("output tokens/s")
    for ax in axes:
        ax.set_xlabel("concurrent requests")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return _data_uri(fig)


def engine_state(analysis: Analysis) -> str | None:
    """Running, Waiting and KV cache % per instance, failure times shaded."""
    stats = analysis.tables["engine_stats"].sort("at")
    if stats.is_empty():
        return None
    fig, (ax_q, ax_kv) = plt.subplots(2, 1, figsize=(10, 4.2), sharex=True)
    for name in analysis.instances:
        rows = stats.filter(pl.col("instance") == name)
        if rows.is_empty():
            continue
        ax_q.step(rows["at"], rows["running"], where="post", label=f"{name} Running")
        ax_q.step(rows["at"], rows["waiting"], where="post", ls="--", label=f"{name} Waiting")
        ax_kv.plot(rows["at"], rows["gpu_kv_pct"], marker=".", label=name)
    shift = dt.timedelta(seconds=analysis.clock.offset_s)
    for r in analysis.measured.filter(~pl.col("ok") & pl.col("started_at").is_not_null()).iter_rows(
        named=True
    ):
        for ax in (ax_q, ax_kv):
            ax.axvspan(r["started_at"] + shift, r["ended_at"] + shift, color="#c62828", alpha=0.04)
    ax_q.set_ylim(
        bottom=0,
        top=max(1, int(stats["running"].max() or 0), int(stats["waiting"].max() or 0)) * 1.15,
    )
    ax_q.yaxis.get_major_locator().set_params(integer=True)
    ax_q.set_ylabel("requests")
    ax_q.legend(frameon=False, fontsize=7, ncol=2)
    ax_kv.set_ylabel("GPU KV cache %")
    ax_kv.set_ylim(0, 105)
    ax_kv.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S", tz="UTC"))
    ax_kv.set_xlabel("time (UTC, server clock)")
    for ax in (ax_q, ax_kv):
        ax.grid(alpha=0.3)
    return _data_uri(fig)
