"""Conditions two runs must share for their numbers to compare: flagged before any number.

Read from what the reports record: the tester (its result files' format), the step ladder,
a warm-up, the client timeout; and where the tester wrote its configuration beside its
records (`logforensics loadtest`'s `run.config.json`, an input's `config`), the model, max
tokens, a fixed output length (`ignore_eos`), temperature, streaming and the prompts. A
condition some run does not record is not compared: `not_checked` names it, so a reader
knows it was not.
"""

from __future__ import annotations

from collections.abc import Callable

from logforensics.compare.model import Condition
from logforensics.report.summary import Summary

NOT_RECORDED = "not recorded"


def _tester(s: Summary) -> str:
    formats = sorted({f.format for f in s.inputs if f.role == "client" and f.format and f.records})
    return ", ".join(formats) or "none"


def _ladder(s: Summary) -> str:
    return " → ".join(str(r.concurrency) for r in s.measured) or "none"


def _warmup(s: Summary) -> str:
    return "yes" if any(r.warmup for r in s.runs) else "no"


def _timeout(s: Summary) -> str:
    known = sorted({r.timeout_s for r in s.measured if r.timeout_s is not None})
    return ", ".join(f"{t:g} s" for t in known) or NOT_RECORDED


def _config(s: Summary) -> dict:
    """The run's configuration as its tester recorded it (the first client input's)."""
    return next((f.config for f in s.inputs if f.role == "client" and f.config), {})


def _configured(key: str, show: Callable[[object], str] = str) -> Callable[[Summary], str]:
    def read(s: Summary) -> str:
        value = _config(s).get(key)
        return NOT_RECORDED if value is None else show(value)

    return read


def _prompts(s: Summary) -> str:
    c = _config(s)
    if c.get("prompts") is None:
        return NOT_RECORDED
    return f"{c['prompts']} (sha256 {str(c.get('prompts_sha256'))[:12]})"


def _yes_no(value) -> str:
    return "yes" if value else "no"


# (what, how it reads off one run's report), in the order they are shown
CONDITIONS: tuple[tuple[str, Callable[[Summary], str]], ...] = (
    ("tester", _tester),
    ("model", _configured("model")),
    ("step ladder (concurrency)", _ladder),
    ("warm-up request", _warmup),
    ("client timeout", _timeout),
    ("max tokens", _configured("max_tokens")),
    ("fixed output length (ignore_eos)", _configured("ignore_eos", _yes_no)),
    ("temperature", _configured("temperature", lambda v: f"{v:g}")),
    ("streaming", _configured("stream", _yes_no)),
    ("prompts", _prompts),
)


def _side_value(summaries: list[Summary], read) -> str:
    return " | ".join(dict.fromkeys(read(s) for s in summaries))


def differing_conditions(baseline: list[Summary], candidate: list[Summary]) -> list[Condition]:
    """The conditions recorded by every run whose values differ between the sides (or
    between the runs of one side)."""
    out = []
    for what, read in CONDITIONS:
        values = [read(s) for s in baseline + candidate]
        if NOT_RECORDED in values:
            continue
        a, b = _side_value(baseline, read), _side_value(candidate, read)
        if a != b or " | " in a or " | " in b:
            out.append(Condition(what, a, b))
    return out


def not_checked(runs: list[Summary]) -> list[str]:
    """The conditions some run does not record: not compared."""
    return [what for what, read in CONDITIONS if any(read(s) == NOT_RECORDED for s in runs)]
