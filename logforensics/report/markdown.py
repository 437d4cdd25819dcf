"""A short Markdown summary that pastes well into a GitHub, GitLab or Jira comment.

Verdict and confidence, the three strongest evidence items with their sources,
the step table, the findings that matter and what to do. Log text is escaped
(``|`` and ``<``), so a hostile line can neither break the table nor inject
markup; lists are cut short with their counts (the HTML report has the rest).
"""

from __future__ import annotations

import re

from logforensics import __version__
from logforensics.analysis import Analysis
from logforensics.report.html import (
    HEADLINES,
    SIGNALS,
    _common_root,
    _pretty_threshold,
    group_sources,
)

MAX_STEPS = 30
MAX_FINDINGS = 10
MAX_TEXT = 300


def _escape(text: str) -> str:
    text = " ".join(str(text).split())  # no newline may end a table row or a list item
    if len(text) > MAX_TEXT:
        text = text[:MAX_TEXT] + " …"
    # `<` only where it could open a tag: "<script>" is shown, "KV < 50%" stays as written
    return re.sub(r"<(?=[A-Za-z/!?])", r"\\<", text.replace("|", "\\|"))


def _cell(value) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.2f}"
    return _escape(value)


def _code(text: str) -> str:
    text = " ".join(str(text).split())
    fence = "``" if "`" in text else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _sources(sources: list[str], root: str) -> str:
    parts = []
    for g in group_sources(sources, root)[:3]:
        lines = ", ".join(g["lines"][:5])
        more = len(g["lines"]) - 5 + g["more"] if len(g["lines"]) > 5 or g["more"] else 0
        text = _code(g["file"])
        if lines:
            text += f" line{'s' if len(g['lines']) > 1 else ''} {lines}"
            if more > 0:
                text += f" (+{more} more)"
        parts.append(text)
    return "; ".join(parts)


def render_markdown(analysis: Analysis) -> str:
    d = analysis.to_dict()
    v = d["verdict"]
    t = d["totals"]
    root = _common_root([f["path"] for f in d["inputs"]])
    lines = [
        f"### {HEADLINES.get(v['bottleneck'], v['bottleneck'])} (confidence {v['confidence']:.0%})",
        "",
        _escape(v["summary"]),
        "",
        f"**{t['sent']}** sent · **{t['succeeded']}** ok · **{t['failed']}** failed · "
        f"**{t['unreached']}** never reached an instance"
        + (f" · **{t['unknown']}** unknown" if t.get("unknown") else ""),
        "",
    ]
    if v["evidence"]:
        lines += ["**Evidence**", ""]
        for k, e in enumerate(v["evidence"][:3], start=1):
            title = SIGNALS.get(e["signal"], e["signal"].replace("_", " "))
            src = _sources(e["sources"], root)
            lines.append(
                f"{k}. {title}: **{_cell(e['value'])}** "
                f"(threshold {_escape(_pretty_threshold(e['threshold']))})"
                + (f" — {src}" if src else "")
            )
        if len(v["evidence"]) > 3:
            lines.append(f"\n_{len(v['evidence']) - 3} weaker signal(s) in the full report._")
        lines.append("")
    steps = [r for r in analysis.runs if not r["warmup"]]
    if steps:
        head = [
            "step",
            "sent",
            "ok",
            "failed",
            "unreached",
            *analysis.instances,
            "P50 s",
            "P95 s",
            "tok/s",
        ]
        lines.append("| " + " | ".join(_cell(h) for h in head) + " |")
        lines.append("|" + "---|" * len(head))
        for r in steps[:MAX_STEPS]:
            tps = r["output_tokens_per_s"]
            row = [
                r["index"],
                r["sent"],
                r["succeeded"],
                r["failed"],
                r["unreached"],
                *[r["per_instance"].get(n, 0) for n in analysis.instances],
                r["latency_s"]["p50"],
                r["latency_s"]["p95"],
                None if tps is None else f"{tps:,.0f}",
            ]
            lines.append("| " + " | ".join(_cell(x) for x in row) + " |")
        if len(steps) > MAX_STEPS:
            lines.append(f"\n_Showing {MAX_STEPS} of {len(steps)} steps._")
        lines.append("")
    findings = [f for f in d["findings"] if f["severity"] != "info"]
    if findings:
        lines += ["**Findings**", ""]
        for f in findings[:MAX_FINDINGS]:
            detail = f["detail"].replace(root, "") if root else f["detail"]
            lines.append(f"- {f['kind'].replace('_', ' ')}: {_escape(detail)}")
        if len(findings) > MAX_FINDINGS:
            lines.append(f"- … and {len(findings) - MAX_FINDINGS} more in the full report")
        lines.append("")
    if v["recommendations"]:
        lines += ["**Next steps**", ""]
        lines += [f"- {_escape(r)}" for r in v["recommendations"]]
        lines.append("")
    if v.get("missing"):
        lines += [f"_Collect next time: {_escape('; '.join(v['missing']))}._", ""]
    redacted = any(f["kind"] == "redacted" for f in d["findings"])
    lines.append(
        f"_logforensics {__version__} · {d.get('generated_at')}"
        + (" · redacted" if redacted else "")
        + "_"
    )
    lines.append("")
    return "\n".join(lines)
