"""Each input file's account: lines not understood, a file skipped."""

from __future__ import annotations

from logforensics.diagnose import Finding
from logforensics.findings.base import FindingFacts, Kind

KINDS = {
    "unparsed_lines": Kind(
        advice="Check the unparsed lines listed under Inputs: a format this tool does not know "
        "yet, or damaged logs."
    ),
    "skipped_file": Kind("info"),
}


def find(facts: FindingFacts) -> list[Finding]:
    out = []
    for f in facts.inputs.files:
        if f.unparsed:
            first = f.unparsed_examples[0][0] if f.unparsed_examples else "?"
            out.append(
                Finding(
                    "unparsed_lines",
                    f"{f.path}: {f.unparsed} of {f.lines} lines not understood (first at line "
                    f"{first})",
                )
            )
        if f.skipped:
            out.append(Finding("skipped_file", f"{f.path}: skipped ({f.skipped})"))
    return out
