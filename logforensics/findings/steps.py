"""Each step as a measurement: the warm-up left out, the split, the rest, an overlap."""

from __future__ import annotations

from logforensics.diagnose import Finding
from logforensics.findings.base import FindingFacts, Kind

KINDS = {
    "warmup": Kind("info", "Keep the warm-up request out of the measurement (as done here)."),
    "lb_skew": Kind(
        advice="Check the balancer's algorithm and weights; least-connections suits LLM "
        "requests of uneven length better than round robin."
    ),
    "short_rest": Kind(
        advice="Rest longer than the client timeout between steps (loadtest --rest auto does)."
    ),
    "contaminated_step": Kind(
        advice="Rest longer than the client timeout between steps, so one step's stragglers "
        "cannot overlap the next."
    ),
}


def find(facts: FindingFacts) -> list[Finding]:
    out = []
    for run in facts.steps:
        if run.warmup:
            out.append(
                Finding(
                    "warmup",
                    f"{run.sent} warm-up request(s) recognised and left out of the step statistics",
                )
            )
    for run in facts.measured:
        b = run.balance
        if b.verdict not in ("even", "n/a"):
            counts = ":".join(str(run.routed[n]) for n in facts.instances)
            p = f"{b.p_even:.2f}" if b.p_even is not None else "n/a"
            out.append(
                Finding(
                    "lb_skew",
                    f"step {run.index} ({run.sent} sent): split {counts} across "
                    f"{', '.join(facts.instances)}; {b.verdict} (chi-square p = {p} against an "
                    "even split)",
                )
            )
        rest, timeout = run.rest_before_s, run.timeout_s
        if rest is not None and timeout is not None and rest < timeout:
            out.append(
                Finding(
                    "short_rest",
                    f"step {run.index} began {rest:.1f} s after the previous step, less than the "
                    f"client timeout ({timeout:.0f} s): a straggler of the previous step could "
                    "overlap it",
                )
            )
        if run.contaminated:
            busy = run.busy_at_start
            why = (
                f"{run.overlap_s:.1f} s overlap"
                if run.overlap_s is not None
                else f"{busy.instance} still had {busy.running} running and "
                f"{busy.waiting} waiting before any of its requests arrived"
            )
            out.append(
                Finding(
                    "contaminated_step",
                    f"step {run.index} started while earlier requests were still pending ({why}): "
                    "its numbers mix two loads; rest longer than the client timeout between steps",
                )
            )
    return out
