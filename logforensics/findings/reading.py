"""How the inputs were read: an assumed year, client records seen twice."""

from __future__ import annotations

from logforensics.diagnose import Finding
from logforensics.findings.base import FindingFacts, Kind

KINDS = {
    "year_assumed": Kind(),
    "duplicate_client_records": Kind("info"),
}


def find(facts: FindingFacts) -> list[Finding]:
    out = [Finding("year_assumed", note) for note in facts.year_notes]
    out += [Finding("duplicate_client_records", s.note()) for s in facts.inputs.same_run]
    return out
