"""The comparison's charts, as inline PNG data URIs: every run's capacity curve on one chart,
and each instance's share per step as paired bars (baseline beside candidate)."""

from __future__ import annotations

import matplotlib.pyplot as plt

from logforensics.compare.model import Comparison
from logforensics.report.charts import NARROW_WIDTH_IN, STYLE, WIDTH_IN, data_uri

SIDE_STYLE = {"baseline": ("#5f6368", "o--"), "candidate": ("#1a57b8", "s-")}


def capacity(c: Comparison, narrow: bool = False) -> str | None:
    """Success % against the step, one line per side (its runs summed); with repetitions each
    run's own rate as a faint point beside it (the runs are the samples)."""
    shared = [p for p in c.steps if p.baseline or p.candidate]
    if not shared:
        return None
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(NARROW_WIDTH_IN if narrow else WIDTH_IN / 1.6, 3.0))
        for name in ("baseline", "candidate"):
            points = [(p.key, getattr(p, name)) for p in shared if getattr(p, name)]
            colour, style = SIDE_STYLE[name]
            ax.plot(
                [k for k, _ in points],
                [100 * s.succeeded / s.sent if s.sent else 0 for _, s in points],
                style,
                color=colour,
                label=f"{name} ({', '.join(r.label for r in getattr(c, name).runs)})",
            )
            runs = [(k, rate) for k, s in points if s.runs > 1 for rate in s.success_rates]
            if runs:
                ax.plot([k for k, _ in runs], [100 * r for _, r in runs], "o", color=colour,
                        alpha=0.35, markersize=4)  # fmt: skip
        ax.set_xticks(sorted({p.key for p in shared}))
        ax.set_ylim(0, 105)
        ax.set_ylabel("success %")
        ax.set_xlabel(c.key_name)
        ax.grid(alpha=0.3)
        ax.legend(frameon=False, loc="lower left")
        return data_uri(fig)


def split(c: Comparison, narrow: bool = False) -> str | None:
    """Requests each instance was reached by, per step, baseline and candidate side by side."""
    names = [row.name for row in c.instances]
    pairs = [p for p in c.steps if p.baseline or p.candidate]
    if not names or not pairs:
        return None
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(NARROW_WIDTH_IN if narrow else WIDTH_IN, 3.2))
        slots = [(p, side) for p in pairs for side in ("baseline", "candidate")]
        width = 0.8 / max(1, len(names))
        colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        for k, name in enumerate(names):
            xs, ys = [], []
            for i, (p, side) in enumerate(slots):
                s = getattr(p, side)
                xs.append(i + (k - (len(names) - 1) / 2) * width)
                ys.append(s.per_instance.get(name, 0) if s else 0)
            ax.bar(xs, ys, width, label=name, color=colours[k % len(colours)])
        ax.set_xticks(
            range(len(slots)),
            [f"{p.key:g}\n{'base' if side == 'baseline' else 'cand'}" for p, side in slots],
        )
        ax.set_ylabel("requests reached")
        ax.yaxis.get_major_locator().set_params(integer=True)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(
            frameon=False, ncol=min(len(names), 6), loc="lower center", bbox_to_anchor=(0.5, 1.0)
        )
        return data_uri(fig)


# (key, title, caption, draw): the page shows them in this order
CHARTS = (
    (
        "capacity",
        "Capacity, both sides",
        "Success rate at each load, baseline (grey, dashed) against candidate (blue); with "
        "repetitions, each run's own rate as a faint point. A line that does not rise where "
        "the change added capacity means the change did not reach the bottleneck.",
        capacity,
    ),
    (
        "split",
        "Each instance's requests per step, baseline beside candidate",
        "A new instance whose bars stay at zero took none of the load; a bar that stays flat "
        "while the others grow is an instance capped on its path.",
        split,
    ),
)
