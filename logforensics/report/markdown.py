"""A short Markdown summary that pastes well into a GitHub, GitLab or Jira comment.

Verdict and confidence, the three strongest evidence items with their sources
and the first lines they cite (in a fenced block: tickets render it as text),
the step table, where the failed requests died, the findings that matter and
what to do. Text outside the fenced blocks is escaped (``|`` and ``<``), so a
hostile line can neither break the table nor inject markup; lists are cut
short with their counts (the HTML report has the rest).
"""

from __future__ import annotations

import re

from logforensics.model import Step, as_json
from logforensics.report.data import EvidenceItem, ReportData

MAX_STEPS = 30
MAX_FINDINGS = 10
MAX_TEXT = 300
INDENT = "   "  # a fenced block inside a numbered list item


def reached_cell(step: Step, name: str) -> str:
    """Requests that reached the instance (± those placed by time alone that could be another
    step's), and those the proxy sent it that it refused (a dead instance's): the balance is
    judged on both; or those that reached it and the proxy resent to another (a retry)."""
    reached = step.per_instance.get(name, 0)
    refused = step.routed.get(name, 0) - reached
    unsure = step.per_instance_uncertain.get(name, 0)
    count = f"{reached} ± {unsure}" if unsure else str(reached)
    if refused > 0:
        return f"{count} (+{refused} refused)"
    return f"{count} ({-refused} resent elsewhere)" if refused < 0 else count


def escape(text: str, limit: int | None = MAX_TEXT) -> str:
    """Markdown-safe text on one line, clipped at `limit` (log text: long; the tool's own
    sentences: never clipped); shared with the comparison's Markdown."""
    text = " ".join(str(text).split())  # no newline may end a table row or a list item
    if limit is not None and len(text) > limit:
        text = text[:limit] + " …"
    # `<` only where it could open a tag: "<script>" is shown, "KV < 50%" stays as written
    return re.sub(r"<(?=[A-Za-z/!?])", r"\\<", text.replace("|", "\\|"))


def _cell(value) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.2f}"
    return escape(value)


def _code(text: str) -> str:
    text = " ".join(str(text).split())
    fence = "``" if "`" in text else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _sources(item: EvidenceItem) -> str:
    parts = []
    for g in item.sources[:3]:
        lines = ", ".join(g.lines[:5])
        more = len(g.lines) - 5 + g.more if len(g.lines) > 5 or g.more else 0
        text = _code(g.file)
        if lines:
            text += f" line{'s' if len(g.lines) > 1 else ''} {lines}"
            if more > 0:
                text += f" (+{more} more)"
        parts.append(text)
    return "; ".join(parts)


def _fenced(item: EvidenceItem) -> list[str]:
    """The item's first cited lines as a fenced block, the fence longer than any backtick run."""
    rows = [f"{q.source}  {' '.join(q.text.split())}" for q in item.lines]
    longest = max((len(run) for row in rows for run in re.findall(r"`+", row)), default=0)
    fence = "`" * max(3, longest + 1)
    block = [f"{INDENT}{fence}text", *(INDENT + row for row in rows), INDENT + fence]
    if item.more_lines:
        block.append(f"{INDENT}_… and {item.more_lines:,} more cited line(s)._")
    return ["", *block, ""]


def render_markdown(r: ReportData) -> str:
    v = r.summary.verdict
    t = r.summary.totals
    lines = [
        f"### {r.headline} (confidence {v.confidence:.0%})",
        "",
        escape(v.summary),
        "",
        f"**{t.sent}** sent · **{t.succeeded}** ok · **{t.failed}** failed · "
        f"**{t.unreached}** never reached an instance"
        + (f" · **{t.unknown}** of unknown reach" if t.unknown else "")
        + (
            f" · **{t.reached_unseen}** served by an instance whose log is missing"
            if t.reached_unseen
            else ""
        )
        + (f" · **{t.retried}** retried by the proxy" if t.retried else ""),
        "",
    ]
    if r.evidence:
        lines += ["**Evidence**", ""]
        for k, e in enumerate(r.evidence[:3], start=1):
            src = _sources(e)
            lines.append(
                f"{k}. {escape(e.title)}: **{_cell(e.value)}** (threshold {escape(e.threshold)})"
                + (f" — {src}" if src else "")
            )
            if e.lines:
                lines += _fenced(e)
        if len(r.evidence) > 3:
            lines.append(f"\n_{len(r.evidence) - 3} weaker signal(s) in the full report._")
        lines.append("")
    if r.steps:
        head = [
            "step",
            "sent",
            "ok",
            "failed",
            "unreached",
            *r.instances,
            "P50 s",
            "P95 s",
            "tok/s",
        ]
        lines.append("| " + " | ".join(_cell(h) for h in head) + " |")
        lines.append("|" + "---|" * len(head))
        for s in r.steps[:MAX_STEPS]:
            tps = s.output_tokens_per_s
            row = [
                s.index,
                s.sent,
                s.succeeded,
                s.failed,
                s.unreached,
                *[reached_cell(s, n) for n in r.instances],
                s.latency_s.p50,
                s.latency_s.p95,
                None if tps is None else f"{tps:,.0f}",
            ]
            lines.append("| " + " | ".join(_cell(x) for x in row) + " |")
        if len(r.steps) > MAX_STEPS:
            lines.append(f"\n_Showing {MAX_STEPS} of {len(r.steps)} steps._")
        lines.append("")
    if r.failed.total:
        lines += [f"**Failed requests** ({r.failed.total:,})", ""]
        for facet in r.failed.facets[:3]:
            counts = "; ".join(f"{text} × {n:,}" for _, text, n in facet.values[:8])
            lines.append(f"- {facet.label}: {escape(counts)}")
        lines.append("")
    findings = [f for f in r.findings if f.severity != "info"]
    if findings:
        lines += ["**Findings**", ""]
        for f in findings[:MAX_FINDINGS]:
            lines.append(f"- {f.title}: {escape(f.detail)}")
        if len(findings) > MAX_FINDINGS:
            lines.append(f"- … and {len(findings) - MAX_FINDINGS} more in the full report")
        lines.append("")
    if v.recommendations:
        lines += ["**Next steps**", ""]
        lines += [f"- {escape(rec)}" for rec in v.recommendations]
        lines.append("")
    if v.missing:
        lines += [f"_Collect next time: {escape('; '.join(v.missing))}._", ""]
    lines.append(
        f"_logforensics {r.version} · {as_json(r.summary.generated_at)}"
        + (" · redacted" if r.redacted else "")
        + "_"
    )
    lines.append("")
    return "\n".join(lines)
