"""CI gates: `--fail-on CONDITION`, evaluated on the JSON report (`report.jsonout.contract`).

A condition is ``METRIC OP VALUE``, e.g. ``unreached>0``, ``failed>=1``,
``success<0.99`` (or ``success<99%``), ``p95>5s`` (or ``p95>500ms``),
``bottleneck!=none``, ``bottleneck==front_proxy``, ``confidence>=0.5``.
Operators: ``> >= < <= == !=`` (``=`` means ``==``).

A condition whose metric has no value in this analysis (``p95`` when no request
succeeded, ``success`` when none was sent) does not hold: pair a latency gate
with ``success<…`` to catch a run where everything failed.

`parse_condition` raises ValueError with a message fit for click.BadParameter.
"""

from __future__ import annotations

import difflib
import operator
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from logforensics.model import Bottleneck

OPERATORS: dict[str, Callable] = {
    ">=": operator.ge,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
    ">": operator.gt,
    "<": operator.lt,
}
OP_ALIASES = {"=": "=="}
CONDITION_RE = re.compile(
    r"^\s*(?P<metric>[A-Za-z_][\w.]*)\s*(?P<op>>=|<=|==|!=|=|>|<)\s*(?P<value>.*?)\s*$"
)
DURATION_RE = re.compile(
    r"^(?P<num>[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)\s*(?P<unit>ms|s|m|min)?$"
)
NUMBER_RE = re.compile(r"^(?P<num>[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)\s*(?P<pct>%)?$")
DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0}


def _measured_runs(d: dict) -> list[dict]:
    return [r for r in d.get("runs") or [] if not r.get("warmup")]


def _worst_latency(q: str) -> Callable[[dict], float | None]:
    def get(d: dict) -> float | None:
        values = [
            (r.get("latency_s") or {}).get(q)
            for r in _measured_runs(d)
            if (r.get("latency_s") or {}).get(q) is not None
        ]
        return max(values) if values else None

    return get


def _total(key: str) -> Callable[[dict], float | None]:
    return lambda d: (d.get("totals") or {}).get(key)


def _success(d: dict) -> float | None:
    t = d.get("totals") or {}
    return t["succeeded"] / t["sent"] if t.get("sent") else None


def _failure(d: dict) -> float | None:
    t = d.get("totals") or {}
    return t["failed"] / t["sent"] if t.get("sent") else None


@dataclass(frozen=True)
class Metric:
    name: str
    kind: str  # count | fraction | duration | choice | number
    get: Callable[[dict], object]
    describes: str


METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric("sent", "count", _total("sent"), "requests sent (warm-up excluded)"),
        Metric("succeeded", "count", _total("succeeded"), "requests that succeeded"),
        Metric("failed", "count", _total("failed"), "requests that failed"),
        Metric(
            "unreached", "count", _total("unreached"), "failures that never reached an instance"
        ),
        Metric("unknown", "count", _total("unknown"), "requests whose reach cannot be told"),
        Metric("success", "fraction", _success, "share of requests that succeeded (0..1 or %)"),
        Metric("failure", "fraction", _failure, "share of requests that failed (0..1 or %)"),
        Metric("p50", "duration", _worst_latency("p50"), "worst step P50 latency of successes"),
        Metric("p95", "duration", _worst_latency("p95"), "worst step P95 latency of successes"),
        Metric("p99", "duration", _worst_latency("p99"), "worst step P99 latency of successes"),
        Metric(
            "bottleneck",
            "choice",
            lambda d: (d.get("verdict") or {}).get("bottleneck"),
            "the verdict: " + ", ".join(b.value for b in Bottleneck),
        ),
        Metric(
            "confidence",
            "fraction",
            lambda d: (d.get("verdict") or {}).get("confidence"),
            "the verdict's confidence (0..1 or %)",
        ),
        Metric(
            "contaminated",
            "count",
            lambda d: sum(1 for r in _measured_runs(d) if r.get("contaminated")),
            "steps that started while the previous one was pending",
        ),
        Metric(
            "skewed",
            "count",
            lambda d: sum(
                1 for r in _measured_runs(d) if (r.get("balance") or {}).get("verdict") == "skewed"
            ),
            "steps whose load-balancer split is proven uneven",
        ),
        Metric(
            "unmatched",
            "count",
            lambda d: d.get("unmatched_server_records"),
            "instance inference records that match no client request",
        ),
        Metric("errors", "count", lambda d: len(d.get("errors") or []), "unusable inputs"),
    )
}
ALIASES = {"ok": "succeeded", "success_rate": "success", "failure_rate": "failure"}


@dataclass(frozen=True)
class Condition:
    text: str  # as the user wrote it, trimmed
    metric: str
    op: str
    value: float | str

    def measure(self, analysis_dict: dict):
        return METRICS[self.metric].get(analysis_dict)

    def holds(self, analysis_dict: dict) -> bool:
        actual = self.measure(analysis_dict)
        if actual is None:
            return False
        return bool(OPERATORS[self.op](actual, self.value))

    def describe(self, analysis_dict: dict) -> str:
        """The condition and what was measured: ``p95>5s (p95 = 7.12 s: worst step P95 …)``."""
        actual = self.measure(analysis_dict)
        return f"{self.text} ({self.metric} = {_show(self.metric, actual)}: {METRICS[self.metric].describes})"


def _show(metric: str, value) -> str:
    if value is None:
        return "n/a"
    kind = METRICS[metric].kind
    if kind == "duration":
        return f"{value:.3f} s"
    if kind == "fraction":
        return f"{value:.4g}"
    return str(value)


def _known() -> str:
    return ", ".join(METRICS)


def parse_condition(text: str) -> Condition:
    """``METRIC OP VALUE`` → Condition; ValueError with a usable message otherwise."""
    if text is None or not str(text).strip():
        raise ValueError("empty condition: expected METRIC OP VALUE, e.g. unreached>0")
    text = str(text).strip()
    m = CONDITION_RE.match(text)
    if not m:
        raise ValueError(
            f"{text!r}: expected METRIC OP VALUE, e.g. unreached>0 or p95>5s "
            f"(operators: {' '.join(OPERATORS)})"
        )
    name = m.group("metric").lower()
    name = ALIASES.get(name, name)
    op = OP_ALIASES.get(m.group("op"), m.group("op"))
    raw = m.group("value")
    if name not in METRICS:
        close = difflib.get_close_matches(name, list(METRICS) + list(ALIASES), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ValueError(f"{text!r}: unknown metric {name!r}{hint}; known: {_known()}")
    if not raw:
        raise ValueError(f"{text!r}: missing the value after {op!r}")
    if re.match(r"^[<>=!]", raw):
        raise ValueError(f"{text!r}: unknown operator; use one of {' '.join(OPERATORS)}")
    metric = METRICS[name]
    if metric.kind == "choice":
        if op not in ("==", "!="):
            raise ValueError(f"{text!r}: {name} can only be compared with == or !=")
        value = raw.lower()
        choices = [b.value for b in Bottleneck]
        if value not in choices:
            raise ValueError(f"{text!r}: {name} is one of {', '.join(choices)}, not {raw!r}")
        return Condition(text, name, op, value)
    if metric.kind == "duration":
        d = DURATION_RE.match(raw)
        if not d:
            raise ValueError(
                f"{text!r}: {name} takes a duration such as 5s, 500ms or 2m, not {raw!r}"
            )
        return Condition(
            text, name, op, float(d.group("num")) * DURATION_UNITS[d.group("unit") or "s"]
        )
    n = NUMBER_RE.match(raw)
    if not n:
        if DURATION_RE.match(raw):
            raise ValueError(f"{text!r}: {name} is a {metric.kind}, not a duration: drop the unit")
        raise ValueError(f"{text!r}: {raw!r} is not a number")
    value = float(n.group("num"))
    if metric.kind == "fraction":
        if n.group("pct"):
            value /= 100
        if not 0 <= value <= 1:
            raise ValueError(
                f"{text!r}: {name} is a fraction between 0 and 1 (or a percentage such as 99%)"
            )
    elif n.group("pct"):
        raise ValueError(f"{text!r}: {name} is a {metric.kind}, not a percentage")
    return Condition(text, name, op, value)


def parse_conditions(texts: Iterable[str]) -> list[Condition]:
    return [parse_condition(t) for t in texts]


def evaluate(conditions: Iterable[Condition | str], analysis_dict: dict) -> list[str]:
    """The conditions that hold, each described with what was measured (empty: all clear)."""
    held = []
    for c in conditions:
        cond = c if isinstance(c, Condition) else parse_condition(c)
        if cond.holds(analysis_dict):
            held.append(cond.describe(analysis_dict))
    return held
