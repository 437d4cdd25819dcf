"""The report: its data built once (`build_report`), rendered as HTML, JSON and Markdown."""

from logforensics.report.data import ReportData, build_report
from logforensics.report.html import render_html
from logforensics.report.jsonout import render_json
from logforensics.report.markdown import render_markdown

# the outputs `analyze` writes, in the order it writes them: (kind, renderer of ReportData)
RENDERERS = (("html", render_html), ("json", render_json), ("md", render_markdown))

__all__ = [
    "RENDERERS",
    "ReportData",
    "build_report",
    "render_html",
    "render_json",
    "render_markdown",
]
