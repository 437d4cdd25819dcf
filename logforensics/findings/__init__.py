"""Findings: what is worth knowing beside the verdict, never folded into it.

A stage like the diagnosis rules: each module is one family of findings, declaring its
kinds (severity and advice, `Kind`) beside the function that finds them, and `FINDINGS`
orders the families as the report lists them. Every family reads the same `FindingFacts`,
built once by `analyze`; a finding about reach reads the reach decision's own functions, so
the two cannot disagree.
"""

from __future__ import annotations

import dataclasses

from logforensics.diagnose import Finding
from logforensics.findings import (
    balance,
    clock,
    files,
    preemption,
    reach,
    reading,
    steps,
    tester,
)
from logforensics.findings.base import FindingFacts, Kind

# the families, in the order the report lists their findings
FINDINGS = (reading, steps, balance, clock, files, reach, preemption, tester)


def find(facts: FindingFacts) -> list[Finding]:
    """Every family's findings, in `FINDINGS` order, each with its kind's advice."""
    out = []
    for family in FINDINGS:
        for f in family.find(facts):
            kind = family.KINDS[f.kind]
            out.append(
                dataclasses.replace(f, severity=kind.severity, advice=f.advice or kind.advice)
            )
    return out


__all__ = ["FINDINGS", "FindingFacts", "Kind", "find"]
