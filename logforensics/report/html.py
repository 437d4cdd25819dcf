"""One self-contained HTML file: inline CSS and PNG charts, all log text escaped.

Autoescape is on and stays on: prompts, error texts and log lines can hold
``<script>``; nothing from a log is ever marked ``|safe``. Long lists are cut
to `MAX_ROWS` rows with their counts shown, and every log text to
`MAX_TEXT` characters, so that a report of a huge bundle stays small.
"""

from __future__ import annotations

import datetime as dt
import os
from collections import Counter

import jinja2
import polars as pl

from logforensics import __version__, model
from logforensics.analysis import Analysis
from logforensics.report import charts

MAX_ROWS = 200  # rows per table; the rest is counted, not shown
MAX_TEXT = 400  # characters of one log text
MAX_SOURCE_LINES = 8  # line numbers listed per file under an evidence item

_env = jinja2.Environment(
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


def _pretty_threshold(text) -> str:
    return str(text).replace(">=", "≥").replace("<=", "≤").replace("!=", "≠")


_env.filters["t"] = _fmt_time
_env.filters["n"] = _fmt_num
_env.filters["pct"] = _fmt_pct
_env.filters["clip"] = _clip
_env.filters["thr"] = _pretty_threshold

HEADLINES = {
    "front_proxy": "Bottleneck: the front proxy",
    "kv_cache": "Bottleneck: the KV cache",
    "gpu": "Bottleneck: GPU compute",
    "none": "No bottleneck found",
    "inconclusive": "Inconclusive",
}

# What each evidence signal means, in words a reader of the ticket follows.
SIGNALS = {
    "failures_never_reached_an_instance": "Failures that never reached any instance",
    "instances_had_room_during_failures": "The instances had room while requests failed",
    "proxy_errors_at_failure_times": "Proxy errors at the failure times",
    "gpu_kv_cache_full_during_failures": "GPU KV cache full while requests failed",
    "kv_pressure_events_at_failure_times": "KV-cache pressure (preemption, KV full, OOM) at the failure times",
    "requests_queued_with_kv_room": "Requests queued while the KV cache had room",
    "failures_reached_an_instance": "Failures that did reach an instance",
    "failed_requests": "Failed requests",
    "peak_gpu_kv_cache_pct": "Peak GPU KV cache usage",
}

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


def _common_root(paths: list[str]) -> str:
    """The folder every input sits in, so that sources can be shown relative to it."""
    paths = [p for p in paths if p]
    if not paths:
        return ""
    try:
        root = os.path.commonpath([os.path.dirname(p) or "." for p in paths])
    except ValueError:  # mixed absolute and relative paths
        return ""
    return "" if root in (".", "", "/") else root.rstrip("/") + "/"


def _short(path: str, root: str) -> str:
    return path[len(root) :] if root and path.startswith(root) else path


def group_sources(sources: list[str], root: str = "") -> list[dict]:
    """`file:line` sources grouped by file: [{file, path, lines, more}], in first-seen order."""
    groups: dict[str, list[str]] = {}
    for src in sources:
        path, sep, line = str(src).rpartition(":")
        if not sep or not line.isdigit():
            path, line = str(src), ""
        groups.setdefault(path, [])
        if line:
            groups[path].append(line)
    return [
        {
            "file": _short(path, root),
            "path": path,
            "lines": lines[:MAX_SOURCE_LINES],
            "more": max(0, len(lines) - MAX_SOURCE_LINES),
        }
        for path, lines in groups.items()
    ]


def _evidence(items: list[dict], root: str) -> list[dict]:
    return [
        {
            "title": SIGNALS.get(e["signal"], e["signal"].replace("_", " ").capitalize()),
            "signal": e["signal"],
            "value": e["value"],
            "threshold": e["threshold"],
            "supports": e.get("supports", ""),
            "sources": group_sources(e.get("sources") or [], root),
        }
        for e in items
    ]


def _unreached(analysis: Analysis) -> dict:
    frame = analysis.measured.filter(pl.col("reach") == "unreached").sort(
        "started_at", nulls_last=True
    )
    id_cols = [c for c in ("request_id", "marker") if c in frame.columns]
    by_error = Counter(
        (e if e is not None else "(no error text)") for e in frame["error"].to_list()
    ).most_common(10)
    rows = frame.head(MAX_ROWS).with_columns(model.source_label()).to_dicts()
    for r in rows:
        r["request"] = next((r[c] for c in id_cols if r.get(c)), None)
    dates = {
        _fmt_time(r[c])[:10]
        for r in rows
        for c in ("started_at", "ended_at")
        if r.get(c) is not None
    }
    return {
        "rows": rows,
        "date": next(iter(dates)) if len(dates) == 1 else None,
        "total": frame.height,
        "by_error": by_error,
        "with_request": any(r["request"] for r in rows),
    }


def _offset_text(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    return f"{seconds:+.3f} s"


def all_charts(analysis: Analysis) -> dict[str, dict | None]:
    """Each chart twice: page width, and a narrow layout for phones (`<picture>` picks)."""
    out = {}
    for key, draw in (
        ("timeline", charts.timeline),
        ("engine", charts.engine_state),
        ("capacity", charts.capacity),
        ("balance", charts.balance),
    ):
        wide = draw(analysis)
        if wide is not None:
            wide["narrow_uri"] = draw(analysis, narrow=True)["uri"]
        out[key] = wide
    return out


def report_context(analysis: Analysis) -> dict:
    """Everything the template shows, computed once."""
    data = analysis.to_dict()
    root = _common_root([f["path"] for f in data["inputs"]])
    verdict = data["verdict"]
    evidence = _evidence(verdict["evidence"], root)
    findings = [
        {**f, "detail": f["detail"].replace(root, "") if root else f["detail"]}
        for f in data["findings"]
    ]
    advised: set[str] = set()
    for f in findings:  # each kind's advice once, after its first finding
        f["show_advice"] = bool(f.get("advice")) and f["kind"] not in advised
        advised.add(f["kind"])
    warnings = [f for f in findings if f["severity"] != "info"]
    infos = [f for f in findings if f["severity"] == "info"]
    steps = [r for r in analysis.runs if not r["warmup"]]
    dates = sorted({_fmt_time(r["started_at"])[:10] for r in steps if r["started_at"]})
    inputs = data["inputs"]
    return {
        "a": data,
        "headline": HEADLINES.get(verdict["bottleneck"], verdict["bottleneck"]),
        "redacted": any(f["kind"] == "redacted" for f in findings),
        "confidence_pct": int(round(verdict["confidence"] * 100)),
        "evidence": evidence[:3],
        "more_evidence": evidence[3:],
        "steps": steps[:MAX_ROWS],
        "steps_total": len(steps),
        "step_dates": dates,
        "balance_short": BALANCE_SHORT,
        "instances": analysis.instances,
        "unreached": _unreached(analysis),
        "warnings": warnings[:MAX_ROWS],
        "warnings_total": len(warnings),
        "infos": infos[:MAX_ROWS],
        "infos_total": len(infos),
        "inputs": inputs[:MAX_ROWS],
        "inputs_total": len(inputs),
        "root": root,
        "short": lambda p: _short(p, root),
        "offset_text": _offset_text,
        "errors": data["errors"][:MAX_ROWS],
        "errors_total": len(data["errors"]),
        "max_rows": MAX_ROWS,
        "charts": all_charts(analysis),
        "captions": CHART_CAPTIONS,
        "version": __version__,
    }


def render_html(analysis: Analysis) -> str:
    return _env.get_template("report.html.j2").render(**report_context(analysis))
