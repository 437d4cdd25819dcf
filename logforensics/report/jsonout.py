"""JSON for CI gates and scripts: the report data's contract (README "JSON output") as text."""

from __future__ import annotations

import json

from logforensics.analysis import Analysis
from logforensics.report.data import ReportData, as_report


def render_json(report: ReportData | Analysis) -> str:
    contract = as_report(report).contract
    return json.dumps(contract, indent=2, ensure_ascii=False, default=str) + "\n"
