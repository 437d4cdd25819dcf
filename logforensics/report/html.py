"""One self-contained HTML file: inline CSS, PNG charts and a small filter script; all log text escaped.

Autoescape is on and stays on: prompts, error texts and log lines can hold
``<script>``; nothing from a log is ever marked ``|safe``. Long lists are cut
to `MAX_ROWS` rows with their counts shown, and every log text to
`MAX_TEXT` characters, so that a report of a huge bundle stays small. The
page reads without its script (the filters only hide rows) and in print.
"""

from __future__ import annotations

import datetime as dt

import jinja2

from logforensics.report.data import ReportData, relative
from logforensics.report.series import ChartSeries

MAX_ROWS = 200  # rows per table; the rest is counted, not shown
MAX_TEXT = 400  # characters of one log text

# the report's templates and filters (the comparison's page uses them too)
ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("logforensics", "report/templates"),
    autoescape=True,  # prompts and log lines can hold <script>
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def _fmt_time(value, short: bool = False) -> str:
    if isinstance(value, str):
        try:
            value = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return value
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.timezone.utc)
        text = value.strftime("%H:%M:%S.%f" if short else "%Y-%m-%d %H:%M:%S.%f")[:-3]
        return text if short else text + "Z"
    return "–" if value is None else str(value)


def _fmt_num(value, digits: int = 2) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if value != value:  # NaN
            return "–"
        return f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _fmt_value(value, short: bool = False) -> str:
    """Any fact of a hop: times (`short`: without the date), numbers or text."""
    if isinstance(value, dt.datetime):
        return _fmt_time(value, short)
    if isinstance(value, float):
        return _fmt_num(value, 3)
    return _fmt_num(value)


def _fmt_pct(value, digits: int = 0) -> str:
    return "–" if value is None else f"{100 * value:.{digits}f}%"


def _clip(value, limit: int = MAX_TEXT) -> str:
    """A log text cut to `limit` characters (escaped later by autoescape, never here)."""
    if value is None:
        return "–"
    text = str(value)
    return (
        text if len(text) <= limit else text[:limit] + f" … ({len(text) - limit:,} more characters)"
    )


ENV.filters["t"] = _fmt_time
ENV.filters["n"] = _fmt_num
ENV.filters["v"] = _fmt_value
ENV.filters["pct"] = _fmt_pct
ENV.filters["clip"] = _clip

CHART_CAPTIONS = {
    "timeline": (
        "Timeline of requests per instance",
        "Each request as a bar from start to end, in the lane of the instance that served it, "
        "green if it succeeded, red if it failed; the number right of a lane is its request count. "
        "Look for red in the “never reached an instance” lane: those requests died before any "
        "instance saw them. Dashed purple lines are proxy errors.",
    ),
    "engine": (
        "Engine state per instance",
        "vLLM's own view of each instance: Running and Waiting requests, GPU KV cache usage and "
        "generation throughput; red shading marks when requests were failing. Low Running, zero "
        "Waiting and low KV cache during the failures mean the instances had room: the requests "
        "were lost in front of them. KV near 100% or a growing Waiting queue point at the engine.",
    ),
    "capacity": (
        "Capacity curve across steps",
        "Concurrency against success rate, latency of the successes and output tokens/s. Where "
        "success drops while latency stays flat, requests are lost before the GPU; where latency "
        "climbs with concurrency and throughput levels off, the GPU is saturated.",
    ),
    "balance": (
        "Load-balancer split per step",
        "Requests each instance served in each step; the dotted line is what an even split would "
        "give. A bar that stays flat while the others grow is an instance capped somewhere on "
        "its path.",
    ),
}

BALANCE_SHORT = {
    "even": "even",
    "skewed": "skewed",
    "uneven, sample too small to prove skew": "uneven (n.s.)",
    "n/a": "–",
}


def _offset_text(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    return f"{seconds:+.3f} s"


def draw_charts(series: ChartSeries) -> dict[str, dict | None]:
    """Each chart twice: page width, and a narrow layout for phones (`<picture>` picks)."""
    from logforensics.report import charts  # matplotlib loads only when charts are drawn

    out = {}
    for key, draw in charts.CHARTS:
        data = getattr(series, key)
        if data is None:
            out[key] = None
            continue
        wide = draw(data)
        wide["narrow_uri"] = draw(data, narrow=True)["uri"]
        out[key] = wide
    return out


def render_html(r: ReportData) -> str:
    summary = r.summary
    warnings = [f for f in r.findings if f.severity != "info"]
    infos = [f for f in r.findings if f.severity == "info"]
    return ENV.get_template("report.html.j2").render(
        report=r,
        summary=summary,
        evidence=r.evidence[:3],
        more_evidence=r.evidence[3:],
        steps=r.steps[:MAX_ROWS],
        balance_short=BALANCE_SHORT,
        warnings=warnings[:MAX_ROWS],
        warnings_total=len(warnings),
        infos=infos[:MAX_ROWS],
        infos_total=len(infos),
        inputs=summary.inputs[:MAX_ROWS],
        short=lambda p: relative(p, r.root),
        offset_text=_offset_text,
        errors=summary.errors[:MAX_ROWS],
        charts=draw_charts(r.charts),
        captions=CHART_CAPTIONS,
    )
