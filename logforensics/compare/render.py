"""The comparison rendered: JSON (its records, versioned), Markdown and one offline HTML page.
`RENDERERS` is the table the command line writes from."""

from __future__ import annotations

import json

from logforensics import __version__
from logforensics.compare import charts
from logforensics.compare.conclude import died, listed
from logforensics.compare.model import Comparison, InstanceSide, StepPair, StepSide
from logforensics.diagnose import Thresholds, cause_words
from logforensics.model import as_json
from logforensics.report.html import ENV
from logforensics.report.markdown import escape


def render_json(c: Comparison) -> str:
    return json.dumps(as_json(c), indent=2, ensure_ascii=False) + "\n"


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x:.0%}"


def _num(x: float | None, digits: int = 1) -> str:
    return "–" if x is None else f"{x:,.{digits}f}"


def _cell(text) -> str:
    return escape(str(text))


def _instance_cells(side: InstanceSide | None) -> list[str]:
    if side is None:
        return ["absent", "–", "–"]
    kv = "–" if side.peak_kv_pct is None else f"{side.peak_kv_pct:.0f} %"
    peaks = f"{_num(side.peak_running, 0)} / {_num(side.peak_waiting, 0)} / {kv}"
    return [str(side.requests), _pct(side.share), peaks]


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _ok(s: StepSide | None) -> str:
    return "–" if s is None else f"{s.succeeded} / {s.sent}"


def _counts(s: StepSide | None) -> list[str]:
    return ["–"] * 2 if s is None else [str(s.failed), str(s.unreached)]


def failed_where(s: StepSide | None) -> str:
    """Where a step side's failures died, in words ("12 never reached an instance")."""
    if s is None or not s.failed:
        return "–"
    if s.failures is None:
        return "not said by a report of format 9"
    return listed([words for *_, words in died(s.failures, {}, Thresholds())])


def split(s: StepSide | None) -> str:
    """Each instance's requests at the step: "instance-1 15, instance-2 15"."""
    if s is None or not s.per_instance:
        return "–"
    return ", ".join(f"{name} {n}" for name, n in s.per_instance.items())


def success_text(p: StepPair) -> str:
    """The step's success test in a cell: "could be chance (p = 0.74)", "non-inferior (-4 to
    +60 points); fragile: any one run"."""
    t = p.success
    if t is None:
        return "–"
    if t.p_value is not None:
        return f"{t.decision} (p = {t.p_value:.2f})"
    lo, hi = t.interval
    text = f"{t.decision} ({lo * 100:+.0f} to {hi * 100:+.0f} points)"
    if t.fragile:
        every = len(t.fragile) == p.baseline.runs + p.candidate.runs
        text += f"; fragile: {'any one run' if every else ', '.join(t.fragile)}"
    return text


def render_markdown(c: Comparison) -> str:
    b, k = c.baseline, c.candidate
    lines = [f"### Did {_cell(c.change or 'the change')} help?", ""]
    lines += [escape(s, limit=None) for s in c.conclusion] + [""]
    lines += [
        "| | verdict | runs |",
        "|---|---|---|",
        f"| baseline | {cause_words(b.bottleneck)} | {_cell(', '.join(r.label for r in b.runs))} |",
        f"| candidate | {cause_words(k.bottleneck)} | {_cell(', '.join(r.label for r in k.runs))} |",
        "",
    ]
    key = c.key_name
    head = [key, "baseline ok / sent", "failed", "unreached", "where they failed",
            "candidate ok / sent", "failed", "unreached", "where they failed",
            "success, candidate against baseline"]  # fmt: skip
    lines += [_row(head), "|" + "---|" * len(head)]
    for p in c.steps:
        cells = [f"{p.key:g}"]
        for s in (p.baseline, p.candidate):
            cells += [_ok(s), *(_counts(s)), _cell(failed_where(s))]
        lines.append(_row([*cells, _cell(success_text(p))]))
    lines += ["", f"_Steps matched by {c.steps_by}._", ""]
    head = [key, "P50 s base", "cand", "P95 s base", "cand", "×P95", "tok/s base", "cand",
            "split base", "cand", "balance base", "cand"]  # fmt: skip
    lines += [_row(head), "|" + "---|" * len(head)]
    for p in c.steps:
        a, z = p.baseline, p.candidate
        lines.append(_row([
            f"{p.key:g}", _num(a and a.p50_s), _num(z and z.p50_s), _num(a and a.p95_s),
            _num(z and z.p95_s), _num(p.p95_ratio, 2), _num(a and a.output_tokens_per_s, 0),
            _num(z and z.output_tokens_per_s, 0), _cell(split(a)), _cell(split(z)),
            _cell(a.balance if a else "–"), _cell(z.balance if z else "–"),
        ]))  # fmt: skip
    lines.append("")
    if c.instances:
        lines += ["| instance | baseline requests | share | peak running / waiting / KV "
                  "| candidate requests | share | peak running / waiting / KV |",
                  "|---|---|---|---|---|---|---|"]  # fmt: skip
        for row in c.instances:
            cells = [_cell(row.name)]
            for side in (row.baseline, row.candidate):
                cells += _instance_cells(side)
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    if c.not_checked:
        lines.append(f"_Not recorded by every run, so not checked: {', '.join(c.not_checked)}._")
    lines += ["", f"_logforensics {__version__} compare · {as_json(c.generated_at)}_", ""]
    return "\n".join(lines)


def render_html(c: Comparison) -> str:
    drawn = [
        {"key": key, "title": title, "caption": caption,
         "uri": draw(c), "narrow_uri": draw(c, narrow=True)}
        for key, title, caption, draw in charts.CHARTS
    ]  # fmt: skip
    return ENV.get_template("compare.html.j2").render(
        c=c,
        version=__version__,
        charts=[d for d in drawn if d["uri"]],
        failed_where=failed_where,
        success_text=success_text,
        split=split,
        words=cause_words,
    )


# the outputs `compare` writes (`-o`, `--json`, `--md`), in order: (kind, renderer)
RENDERERS = (("html", render_html), ("json", render_json), ("md", render_markdown))
