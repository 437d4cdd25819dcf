"""A short Markdown summary that pastes well into a GitHub, GitLab or Jira comment."""

from __future__ import annotations

from logforensics.analysis import Analysis
from logforensics.report.html import HEADLINES


def _cell(value) -> str:
    if value is None:
        return "–"
    text = f"{value:.2f}" if isinstance(value, float) else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(analysis: Analysis) -> str:
    d = analysis.to_dict()
    v = d["verdict"]
    lines = [
        f"### {HEADLINES[v['bottleneck']]} (confidence {v['confidence']:.0%})",
        "",
        v["summary"],
        "",
    ]
    if v["evidence"]:
        lines.append("**Evidence**")
        lines.append("")
        for e in v["evidence"]:
            src = ", ".join(f"`{s}`" for s in e["sources"][:3])
            more = f" (+{len(e['sources']) - 3} more)" if len(e["sources"]) > 3 else ""
            lines.append(
                f"- {e['signal'].replace('_', ' ')}: **{_cell(e['value'])}** (threshold {e['threshold']}) {src}{more}"
            )
        lines.append("")
    steps = [r for r in analysis.runs if not r["warmup"]]
    if steps:
        head = ["step", "sent", "ok", "failed", "unreached", *analysis.instances, "P50 s", "P95 s"]
        lines.append("| " + " | ".join(_cell(h) for h in head) + " |")
        lines.append("|" + "---|" * len(head))
        for r in steps:
            row = [
                r["index"],
                r["sent"],
                r["succeeded"],
                r["failed"],
                r["unreached"],
                *[r["per_instance"][n] for n in analysis.instances],
                r["latency_s"]["p50"],
                r["latency_s"]["p95"],
            ]
            lines.append("| " + " | ".join(_cell(x) for x in row) + " |")
        lines.append("")
    if d["findings"]:
        lines.append("**Findings**")
        lines.append("")
        lines += [
            f"- {f['kind'].replace('_', ' ')}: {_cell(f['detail'])}"
            for f in d["findings"]
            if f["severity"] != "info"
        ]
        lines.append("")
    if v["recommendations"]:
        lines.append("**Next steps**")
        lines.append("")
        lines += [f"- {r}" for r in v["recommendations"]]
        lines.append("")
    return "\n".join(lines)
