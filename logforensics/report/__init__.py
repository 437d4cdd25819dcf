"""The report: its data built once (`build_report`), rendered as HTML, JSON and Markdown."""

from logforensics.report.data import ReportData, build_report
from logforensics.report.html import render_html
from logforensics.report.jsonout import render_json
from logforensics.report.markdown import render_markdown

__all__ = ["ReportData", "build_report", "render_html", "render_json", "render_markdown"]
