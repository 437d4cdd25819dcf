"""JSON for CI gates and scripts: `Analysis.to_dict()` as text."""

from __future__ import annotations

import json

from logforensics.analysis import Analysis


def render_json(analysis: Analysis) -> str:
    return json.dumps(analysis.to_dict(), indent=2, ensure_ascii=False, default=str) + "\n"
