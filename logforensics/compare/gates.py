"""`compare --fail-on CONDITION`: gates over a comparison, exit 3 when one holds (as `analyze`).

regressed            a matched step's success rate is lower beyond chance (one run a side) or
                     inferior at the margin (repetitions)
bottleneck_changed   the verdicts differ (moved, removed or appeared), or a side's runs disagree
                     (mixed): a gate that cannot show the bottleneck unchanged holds
success_drop>N%      at a matched step the candidate's success rate is more than N points lower
p95_ratio>X          at a matched step the candidate's P95 latency is more than X times the baseline's
"""

from __future__ import annotations

import re
from collections.abc import Callable

from logforensics.compare.model import Comparison

FLAGS: dict[str, Callable[[Comparison], bool]] = {
    "regressed": lambda c: any(
        p.success and p.success.decision in ("lower", "inferior") for p in c.steps
    ),
    "bottleneck_changed": lambda c: (
        c.bottleneck_change in ("moved", "removed", "appeared", "mixed")
    ),
}
THRESHOLD_RE = re.compile(r"^(success_drop|p95_ratio)\s*>\s*([0-9.]+)\s*(%?)$")


def _success_drop(c: Comparison, points: float) -> bool:
    return any(p.success and -p.success.delta * 100 > points for p in c.steps)


def _p95_ratio(c: Comparison, ratio: float) -> bool:
    return any(p.p95_ratio is not None and p.p95_ratio > ratio for p in c.steps)


def parse_gate(text: str) -> Callable[[Comparison], bool]:
    """A condition as a test of a comparison; ValueError naming the accepted forms."""
    text = text.strip()
    if text in FLAGS:
        return FLAGS[text]
    m = THRESHOLD_RE.match(text)
    if m:
        value = float(m.group(2))
        if m.group(1) == "success_drop":
            return lambda c: _success_drop(c, value)
        return lambda c: _p95_ratio(c, value)
    raise ValueError(
        f"unknown compare condition {text!r}: use regressed, bottleneck_changed, "
        "success_drop>N% or p95_ratio>X"
    )


def held(conditions: list[str], c: Comparison) -> list[str]:
    return [text for text in conditions if parse_gate(text)(c)]
