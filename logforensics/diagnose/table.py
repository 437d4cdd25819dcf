"""The README's verdict and threshold tables, rendered from the rules.

`python -m logforensics.diagnose.table README.md` rewrites them in place;
a test fails when the README's copy is stale.
"""

from __future__ import annotations

import sys
from pathlib import Path

from logforensics.diagnose.evidence import Rule, Signal
from logforensics.diagnose.shared import SIGNALS as SHARED_SIGNALS
from logforensics.diagnose.thresholds import option_name, threshold_fields
from logforensics.diagnose.verdict import RULES

BEGIN = (
    "<!-- verdict tables: generated from logforensics/diagnose by "
    "`python -m logforensics.diagnose.table README.md`; edit the rules, not this -->"
)
END = "<!-- end of verdict tables -->"


def _row(verdicts: str, signal: Signal) -> str:
    return (
        f"| {verdicts} | {signal.title} (`{signal.name}`) | {signal.role} | "
        f"{signal.documented_test()} | {signal.weight:g} |"
    )


def _outranking(rule: Rule) -> str:
    lower = ", ".join(f"`{b.value}`" for b in rule.outranks)
    return f"* `{rule.bottleneck.value}` outranks {lower}: where both explain a failure, it does."


def render() -> str:
    lines = [
        "| verdict | signal | kind | fires when (option) | weight |",
        "|---|---|---|---|---|",
    ]
    for rule in RULES:
        lines += [_row(f"`{rule.bottleneck.value}`", s) for s in rule.signals]
    corroborated = ", ".join(f"`{r.bottleneck.value}`" for r in RULES if r.corroborated)
    lines += [_row(f"{corroborated} (corroborating)", s) for s in SHARED_SIGNALS]
    lines += ["", *(_outranking(r) for r in RULES if r.outranks), ""]
    lines += [
        "| verdict | qualifier | named when | the fix it leads with |",
        "|---|---|---|---|",
        *(
            f"| `{r.bottleneck.value}` | `{q.name}` ({q.words}) | {q.when} | "
            f"{' '.join(q.recommendations)} |"
            for r in RULES
            for q in r.qualifiers
        ),
        "",
    ]
    lines += ["| option | default | what it sets |", "|---|---|---|"]
    lines += [
        f"| `{option_name(f.name)}` | {f.default:g} | {f.metadata['help']} |"
        for f in threshold_fields()
    ]
    return "\n".join([BEGIN, *lines, END])


def replace_in(text: str) -> str:
    """`text` with the tables between the markers replaced by freshly rendered ones."""
    head, sep, rest = text.partition(BEGIN)
    if not sep:
        raise ValueError("the README has no verdict-table marker")
    _, sep, tail = rest.partition(END)
    if not sep:
        raise ValueError("the README's verdict table has no end marker")
    return head + render() + tail


def main(path: str) -> None:
    file = Path(path)
    file.write_text(replace_in(file.read_text(encoding="utf-8")), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1])
