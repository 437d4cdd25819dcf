"""Renderers of one Analysis: HTML (self-contained), JSON, Markdown."""

from logforensics.report.html import render_html
from logforensics.report.jsonout import render_json
from logforensics.report.markdown import render_markdown

__all__ = ["render_html", "render_json", "render_markdown"]
