"""Conditions two runs must share for their numbers to compare: flagged before any number.

Read from what the reports record: the tester (its result files' format), the step ladder,
a warm-up, the client timeout. Max tokens, prompt length, temperature, streaming and the
model are not in a report yet: `NOT_RECORDED` names them so a reader knows they were not
checked.
"""

from __future__ import annotations

from logforensics.compare.model import Condition
from logforensics.report.summary import Summary

NOT_RECORDED = ("max tokens", "prompt length", "temperature", "streaming", "model")


def _tester(s: Summary) -> str:
    formats = sorted({f.format for f in s.inputs if f.role == "client" and f.format})
    return ", ".join(formats) or "none"


def _ladder(s: Summary) -> str:
    return " → ".join(str(r.concurrency) for r in s.measured) or "none"


def _warmup(s: Summary) -> str:
    return "yes" if any(r.warmup for r in s.runs) else "no"


def _timeout(s: Summary) -> str:
    known = sorted({r.timeout_s for r in s.measured if r.timeout_s is not None})
    return ", ".join(f"{t:g} s" for t in known) or "not recorded"


# (what, how it reads off one run's report)
CONDITIONS = (
    ("tester", _tester),
    ("step ladder (concurrency)", _ladder),
    ("warm-up request", _warmup),
    ("client timeout", _timeout),
)


def _side_value(summaries: list[Summary], read) -> str:
    return " | ".join(dict.fromkeys(read(s) for s in summaries))


def differing_conditions(baseline: list[Summary], candidate: list[Summary]) -> list[Condition]:
    out = []
    for what, read in CONDITIONS:
        a, b = _side_value(baseline, read), _side_value(candidate, read)
        if a != b:
            out.append(Condition(what, a, b))
    return out
