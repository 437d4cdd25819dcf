"""One self-contained HTML file: inline CSS and PNG charts, all log text escaped."""

from __future__ import annotations

import datetime as dt

import jinja2
import polars as pl

from logforensics import __version__
from logforensics.analysis import Analysis
from logforensics.report import charts

_env = jinja2.Environment(
    loader=jinja2.PackageLoader("logforensics", "report/templates"),
    autoescape=True,  # prompts and log lines can hold <script>
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def _fmt_time(value) -> str:
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"
    return "–" if value is None else str(value)


def _fmt_num(value, digits: int = 2) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


_env.filters["t"] = _fmt_time
_env.filters["n"] = _fmt_num

HEADLINES = {
    "front_proxy": "Bottleneck: the front proxy",
    "kv_cache": "Bottleneck: the KV cache",
    "gpu": "Bottleneck: GPU compute",
    "none": "No bottleneck found",
    "inconclusive": "Inconclusive",
}


def render_html(analysis: Analysis) -> str:
    data = analysis.to_dict()
    unreached = (
        analysis.measured.filter(pl.col("reach") == "unreached")
        .sort("started_at")
        .select(
            "step", "index", "started_at", "ended_at", "latency_s", "http_status", "error", "source"
        )
        .to_dicts()
    )
    return _env.get_template("report.html.j2").render(
        a=data,
        headline=HEADLINES[data["verdict"]["bottleneck"]],
        steps=[r for r in analysis.runs if not r["warmup"]],
        instances=analysis.instances,
        unreached=unreached,
        charts={
            "timeline": charts.timeline(analysis),
            "engine": charts.engine_state(analysis),
            "capacity": charts.capacity(analysis),
            "balance": charts.balance(analysis),
        },
        version=__version__,
    )
