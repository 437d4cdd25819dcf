"""The tester's own figures against what the logs show."""

from __future__ import annotations

from logforensics.diagnose import Finding
from logforensics.findings.base import FindingFacts, Kind

KINDS = {
    "tester_figures_differ": Kind(
        advice="Trust the per-request evidence over a summary: a tester can leave requests it "
        "sent out of its report (GuideLLM closing a benchmark), and a lost log can hide some."
    ),
}


def find(facts: FindingFacts) -> list[Finding]:
    """A step whose tester's own count differs from what the logs show."""
    out = []
    for f in facts.figures:
        if f["agree"] is not False:
            continue
        theirs, ours = f["theirs"], f["ours"]
        keys = [k for k in ("sent", "ok", "failed") if theirs[k] is not None]
        said = " / ".join(f"{k} {theirs[k]}" for k in keys)
        seen = " / ".join(f"{k} {ours[k]}" for k in keys)
        out.append(
            Finding(
                "tester_figures_differ",
                f"step {f['step']} (concurrency {f['concurrency']}): {f['tester']}'s own figures "
                f"say {said}, the logs show {seen} ({f['file']})",
            )
        )
    return out
