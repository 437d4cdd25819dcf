"""The report's data, built once from an Analysis; the HTML, JSON and Markdown renderers show it.

`build_report(analysis)` computes everything a reader sees — the verdict, its
evidence with the text of the lines it cites, the findings, the steps, the
failed requests' hop chains grouped for reading, the chart series — and the
JSON contract (``ReportData.contract``: `Analysis.to_dict()` plus the
ledger). No renderer goes back to the analysis' frames or recomputes any of
it. Cited lines are read here, once per file, for every part at a time.
"""

from __future__ import annotations

import datetime as dt
import itertools
import os
from collections.abc import Iterable
from dataclasses import dataclass, field

import polars as pl

from logforensics import __version__
from logforensics.analysis import Analysis
from logforensics.diagnose import qualified_words
from logforensics.model import Step
from logforensics.report import ledger as hop_ledger
from logforensics.report.jsonout import FORMAT_VERSION
from logforensics.report.lines import CitedLine, read_cited_lines, split_source
from logforensics.report.series import ChartSeries, chart_series
from logforensics.report.summary import Quote, Summary, summarize

EVIDENCE_LINES = 3  # lines quoted under an evidence item; the rest are counted
EVIDENCE_CANDIDATES = 4  # per cited file, its first sources tried for text (records have none)
MAX_SOURCE_LINES = 8  # line numbers listed per file under an evidence item
LEDGER_ALL_ROWS = 1000  # up to this many failed requests, every one is shown
LEDGER_GROUP_ROWS = 300  # past it, this many rows in all, spread over the groups
LEDGER_MIN_GROUP_ROWS = 3  # …but at least this many of each group shown
MAX_GROUPS = 40  # groups shown; the rest are counted
LEDGER_JSON_ROWS = 200  # failed requests in the JSON report's ledger (--ledger has all)

HEADLINES = {
    "front_proxy": "Bottleneck: the front proxy",
    "kv_cache": "Bottleneck: the KV cache",
    "gpu": "Bottleneck: GPU compute",
    "instance_failure": "Bottleneck: an instance failed",
    "none": "No bottleneck found",
    "inconclusive": "Inconclusive",
}


# Which witness decided a request's reach, in words.
WITNESSES = {
    "request_id": "the request id, on both sides",
    "prompt_marker": "the prompt's marker in the engine's request line",
    "engine_lifecycle": "the engine's request lifecycle lines",
    "access_line": "the instance's access line at its time",
    "instance_log": "an instance's log",
    "instance": "an instance's log",
    "proxy": "the proxy's log",
    "front_answer": "the front's answer: it never dispatched it (llm-d's rejected-*)",
    "refused_connect": "the client's own connect was refused: nothing listened",
    "client_peer": "the client's own trace: the instance's address it connected to",
    "coverage": "no instance logged its arrival, inside the span every log covers",
    "engine_stats": "every engine's stats showed nothing running or waiting when it failed",
}

OUTCOMES = {
    "ok": "ok",
    "timeout": "client timeout",
    "refused": "connection refused",
    "reset": "connection reset",
    "cancelled": "cancelled",
    "error": "error",
    "unknown": "outcome unknown",
}

GROUP_KEYS = ("failed_at", "reached_instance", "client_outcome")  # past LEDGER_ALL_ROWS
FACETS = (  # (ledger column, what the report calls it)
    ("failed_at", "where it died"),
    ("reached_instance", "instance"),
    ("client_outcome", "outcome"),
    ("step", "step"),
)
NONE = "none"  # a facet's value for rows with none (no instance reached, no step)


def outcome_text(outcome: str | None) -> str:
    if outcome and outcome.startswith("http_"):
        return "HTTP " + outcome.removeprefix("http_")
    return OUTCOMES.get(outcome, outcome or "–")


def witness_text(witness: str | None) -> str:
    return WITNESSES.get(witness, witness or "no witness: no log shows it, none rules it out")


def pretty_threshold(text) -> str:
    return str(text).replace(">=", "≥").replace("<=", "≤").replace("!=", "≠")


# ------------------------------------------------------------------ paths


def common_root(paths: list[str]) -> str:
    """The folder every input sits in, so that sources can be shown relative to it."""
    paths = [p for p in paths if p]
    if not paths:
        return ""
    try:
        root = os.path.commonpath([os.path.dirname(p) or "." for p in paths])
    except ValueError:  # mixed absolute and relative paths
        return ""
    return "" if root in (".", "", "/") else root.rstrip("/") + "/"


def relative(path: str, root: str) -> str:
    return path[len(root) :] if root and path.startswith(root) else path


@dataclass
class SourceGroup:
    """One file's cited line numbers (the first `MAX_SOURCE_LINES`, the rest counted)."""

    file: str  # relative to the inputs' common folder
    path: str
    lines: list[str]
    more: int


def group_sources(sources: list[str], root: str = "") -> list[SourceGroup]:
    """`file:line` sources grouped by file, in first-seen order."""
    groups: dict[str, list[str]] = {}
    for src in sources:
        place = split_source(str(src))
        path, line = (place[0], str(place[1])) if place else (str(src), "")
        groups.setdefault(path, [])
        if line:
            groups[path].append(line)
    return [
        SourceGroup(
            relative(path, root),
            path,
            lines[:MAX_SOURCE_LINES],
            max(0, len(lines) - MAX_SOURCE_LINES),
        )
        for path, lines in groups.items()
    ]


# ------------------------------------------------------------------ the parts


@dataclass
class Quoted:
    """A cited line as a report shows it: its source relative to the inputs' folder."""

    source: str  # file:line, relative
    text: str


@dataclass
class EvidenceItem:
    signal: str
    title: str  # the diagnosis' words for the signal
    role: str  # discriminating (tells causes apart) | shared (corroborates)
    value: object
    threshold: str
    sources: list[SourceGroup]
    lines: list[Quoted]  # the first cited lines, with their text
    more_lines: int  # cited lines not quoted


@dataclass
class FindingItem:
    kind: str
    title: str
    detail: str
    severity: str
    advice: str | None
    show_advice: bool  # each kind's advice once, after its first finding
    lines: list[Quoted] = field(default_factory=list)  # the first lines it cites, if it cites any
    more_lines: int = 0


@dataclass
class Hop:
    """What one witness saw of a request."""

    witness: str  # client | proxy | instance | conclusion
    title: str
    facts: list[tuple[str, object]]
    lines: list[Quoted]  # its lines, with their text
    unquoted: list[str] = field(default_factory=list)  # its sources that have no text
    note: str | None = None  # what it lacks ("no line in the proxy's log")


@dataclass
class LedgerRow:
    step: int | None
    index: int | None
    request: str | None  # the request id, else the prompt marker
    sent_at: dt.datetime | None
    latency_s: float | None
    outcome: str
    outcome_text: str
    failed_at: str
    failed_at_text: str
    instance: str  # where it got, or NONE
    error: str | None
    hops: list[Hop]


@dataclass
class LedgerGroup:
    failed_at_text: str
    instance: str
    outcome_text: str
    count: int
    rows: list[LedgerRow]


@dataclass
class Facet:
    column: str  # ledger column, and the HTML's data-* attribute
    label: str
    values: list[tuple[str, str, int]]  # (value, text, requests)


@dataclass
class FailedRequests:
    """The ledger of the requests that did not succeed, as the report shows it."""

    total: int  # failed, and of unknown outcome
    outcome_unknown: int
    rows: list[LedgerRow]  # every failed request, when there are few enough…
    groups: list[LedgerGroup]  # …else groups with their first rows
    groups_total: int
    shown: int
    facets: list[Facet]
    ledger_path: str | None  # where --ledger wrote the full ledger
    date: str | None  # the one date all rows share, if they do
    has_proxy: bool
    has_instances: bool


@dataclass
class ReportData:
    summary: Summary  # what the report states (the JSON report is its rendering)
    headline: str
    confidence_pct: int
    redacted: bool
    root: str
    evidence: list[EvidenceItem]
    findings: list[FindingItem]
    steps: list[Step]  # measured steps
    tester_figures: list[dict]  # the tester's own figures beside the logs' (contract)
    step_dates: list[str]
    instances: list[str]
    failed: FailedRequests
    charts: ChartSeries
    version: str = __version__


# ------------------------------------------------------------------ building


def quote_candidates(sources: list[str]) -> list[str]:
    """The sources to quote first: the first few of each of the first cited files, in turn.

    An item citing an access log and an error log then shows a line of each;
    one citing eight instance logs reads three of them, not all eight.
    """
    per_file: dict[str, list[str]] = {}
    for source in sources:
        place = split_source(source)
        file = place[0] if place else source
        if file not in per_file and len(per_file) == EVIDENCE_LINES:
            continue
        firsts = per_file.setdefault(file, [])
        if len(firsts) < EVIDENCE_CANDIDATES:
            firsts.append(source)
        elif len(per_file) == EVIDENCE_LINES and all(
            len(f) == EVIDENCE_CANDIDATES for f in per_file.values()
        ):
            break
    return [s for turn in itertools.zip_longest(*per_file.values()) for s in turn if s]


def _quote(line: CitedLine, root: str) -> Quoted:
    return Quoted(f"{relative(line.path, root)}:{line.line}", line.text)


def _quoted(q: Quote, root: str) -> Quoted:
    return Quoted(relative(q.source, root), q.text)


def _evidence(summary: Summary, root: str) -> list[EvidenceItem]:
    return [
        EvidenceItem(
            signal=e.signal,
            title=e.title,
            role=e.role,
            value=e.value,
            threshold=pretty_threshold(e.threshold),
            sources=group_sources(e.sources, root),
            lines=[_quoted(q, root) for q in e.lines],
            more_lines=e.more_lines,
        )
        for e in summary.verdict.evidence
    ]


def _findings(summary: Summary, root: str) -> list[FindingItem]:
    advised: set[str] = set()
    out = []
    for f in summary.findings:
        out.append(
            FindingItem(
                kind=f.kind,
                title=f.kind.replace("_", " "),
                detail=f.detail.replace(root, "") if root else f.detail,
                severity=f.severity,
                advice=f.advice,
                show_advice=bool(f.advice) and f.kind not in advised,
                lines=[_quoted(q, root) for q in f.lines],
                more_lines=len(f.sources) - len(f.lines),
            )
        )
        advised.add(f.kind)
    return out


def _shown_rows(failed: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The failed rows the HTML shows, and the groups (failed_at × instance × outcome) with counts.

    Few failures: all of them. Many: the largest `MAX_GROUPS` groups, each with
    its first rows in time order.
    """
    keys = list(GROUP_KEYS)
    groups = (
        failed.group_by(keys, maintain_order=True)
        .len("count")
        .sort("count", *keys, descending=[True, False, False, False], nulls_last=True)
    )
    if failed.height <= LEDGER_ALL_ROWS:
        return failed, groups
    top = groups.head(MAX_GROUPS)
    per_group = max(LEDGER_MIN_GROUP_ROWS, LEDGER_GROUP_ROWS // max(1, top.height))
    rows = (
        failed.with_columns(pl.int_range(pl.len()).over(keys).alias("_k"))
        .filter(pl.col("_k") < per_group)
        .join(top.select(keys), on=keys, how="semi", nulls_equal=True)
        .drop("_k")
    )
    return rows, groups


def _facets(failed: pl.DataFrame) -> list[Facet]:
    out = []
    for column, label in FACETS:
        counts = failed.group_by(pl.col(column).cast(pl.Utf8).fill_null(NONE)).len().sort(column)
        values = []
        for value, n in counts.iter_rows():
            if column == "failed_at":
                text = hop_ledger.FAILED_AT.get(value, value)
            elif column == "client_outcome":
                text = outcome_text(value)
            elif column == "step":
                text = "no step" if value == NONE else f"step {value}"
            else:
                text = "no instance" if value == NONE else value
            values.append((value, text, n))
        out.append(Facet(column, label, values))
    return out


def _iso_times(frame: pl.DataFrame) -> pl.DataFrame:
    """Datetime columns as ISO 8601 UTC text (the JSON contract's form)."""
    return frame.with_columns(
        pl.col(c).dt.strftime("%Y-%m-%dT%H:%M:%S%.6fZ")
        for c, t in frame.schema.items()
        if isinstance(t, pl.Datetime)
    )


def _cited(rows: list[dict]) -> Iterable[str]:
    for r in rows:
        yield from (r["client_source"], r["proxy_source"], r["instance_source"])
        yield from r["proxy_error_sources"] or []
        yield from r["engine_sources"] or []


def _hops(
    r: dict, texts: dict[str, CitedLine], root: str, has_proxy: bool, has_instances: bool
) -> list[Hop]:
    def lines(sources) -> tuple[list[Quoted], list[str]]:
        sources = [s for s in dict.fromkeys(sources) if s]
        return (
            [_quote(texts[s], root) for s in sources if s in texts],
            [relative(s, root) for s in sources if s not in texts],
        )

    quoted, bare = lines([r["client_source"]])
    hops = [
        Hop(
            "client",
            "Client",
            [
                ("sent (client clock)", r["client_sent_at"]),
                ("ended", r["client_ended_at"]),
                ("latency s", r["client_latency_s"]),
                ("outcome", outcome_text(r["client_outcome"])),
                ("HTTP", r["client_http_status"]),
                ("error", r["client_error"]),
            ],
            quoted,
            bare,
        )
    ]
    if has_proxy:
        quoted, bare = lines([r["proxy_source"], *(r["proxy_error_sources"] or [])])
        upstream = r["proxy_upstream"]
        if upstream and r["proxy_instance"]:
            upstream = f"{upstream} ({r['proxy_instance']})"
        hops.append(
            Hop(
                "proxy",
                "Proxy",
                [
                    ("logged at (proxy clock)", r["proxy_at"]),
                    ("answered", r["proxy_status"]),
                    ("upstream", upstream),
                    ("upstream answered", r["proxy_upstream_status"]),
                    ("delivery", r["proxy_delivery"]),
                    ("what the line says", r["proxy_event"]),
                    ("errors logged", r["proxy_error_kinds"]),
                    ("request time s", r["proxy_request_time_s"]),
                    ("upstream time s", r["proxy_upstream_time_s"]),
                ]
                if r["proxy_source"]
                else [("errors logged", r["proxy_error_kinds"])],
                quoted,
                bare,
                None if r["proxy_source"] else "no line for this request in the proxy's log",
            )
        )
    if has_instances:
        quoted, bare = lines([r["instance_source"], *(r["engine_sources"] or [])])
        seen = r["instance_source"] or r["engine_sources"]
        hops.append(
            Hop(
                "instance",
                r["instance"] or "Instance",
                [
                    ("logged at (servers' clock)", r["instance_at"]),
                    ("line", r["instance_event"]),
                    ("status", r["instance_status"]),
                    ("engine lifecycle", r["engine_events"]),
                    ("matched by", r["instance_match_key"]),
                    ("ambiguous", r["instance_ambiguous"] or None),
                    (
                        "finished after the client gave up",
                        r["instance_finished_after_client_gave_up"] or None,
                    ),
                ]
                if seen
                else [],
                quoted,
                bare,
                None
                if seen
                else (
                    f"the clock is ambiguous: its offset places this request at "
                    f"{r['clock_candidates'].replace(' or ', ', its rival at ')}"
                    if r.get("clock_candidates")
                    else "no instance's log shows this request"
                ),
            )
        )
    if r["reach"] == "reached":
        conclusion = f"reached {r['reached_instance'] or 'an instance'}"
    elif r["reach"] == "unreached":
        conclusion = "never reached any instance"
    else:
        conclusion = "unknown whether it reached an instance"
    hops.append(
        Hop(
            "conclusion",
            "Conclusion",
            [
                ("reach", conclusion),
                ("decided by", witness_text(r["reach_witness"])),
            ],
            [],
        )
    )
    return hops


def _ledger_row(
    r: dict, texts: dict[str, CitedLine], root: str, has_proxy: bool, has_instances: bool
) -> LedgerRow:
    return LedgerRow(
        step=r["step"],
        index=r["index"],
        request=r["request_id"] or r["marker"],
        sent_at=r["client_sent_at"],
        latency_s=r["client_latency_s"],
        outcome=r["client_outcome"],
        outcome_text=outcome_text(r["client_outcome"]),
        failed_at=r["failed_at"],
        failed_at_text=hop_ledger.FAILED_AT.get(r["failed_at"], r["failed_at"]),
        instance=r["reached_instance"] or NONE,
        error=r["client_error"],
        hops=_hops(r, texts, root, has_proxy, has_instances),
    )


def _failed_requests(
    analysis: Analysis,
    failed: pl.DataFrame,
    shown: list[dict],
    groups: pl.DataFrame,
    texts: dict[str, CitedLine],
    root: str,
    ledger_path: str | None,
) -> FailedRequests:
    has_proxy = not (
        analysis.tables["proxy_requests"].is_empty() and analysis.tables["proxy_events"].is_empty()
    )
    has_instances = bool(analysis.instances)
    rows = [_ledger_row(r, texts, root, has_proxy, has_instances) for r in shown]
    grouped = failed.height > LEDGER_ALL_ROWS
    ledger_groups = []
    if grouped:
        by_key: dict[tuple, list[LedgerRow]] = {}
        for raw, row in zip(shown, rows, strict=True):
            by_key.setdefault(tuple(raw[k] for k in GROUP_KEYS), []).append(row)
        for where, instance, outcome, count in groups.head(MAX_GROUPS).iter_rows():
            ledger_groups.append(
                LedgerGroup(
                    hop_ledger.FAILED_AT.get(where, where),
                    instance or NONE,
                    outcome_text(outcome),
                    count,
                    by_key.get((where, instance, outcome), []),
                )
            )
    dates = {r.sent_at.date().isoformat() for r in rows if r.sent_at}
    return FailedRequests(
        total=failed.height,
        outcome_unknown=failed["client_ok"].null_count(),
        rows=[] if grouped else rows,
        groups=ledger_groups,
        groups_total=groups.height,
        shown=len(rows),
        facets=_facets(failed),
        ledger_path=ledger_path,
        date=next(iter(dates)) if len(dates) == 1 else None,
        has_proxy=has_proxy,
        has_instances=has_instances,
    )


def _json_ledger(failed: pl.DataFrame, ledger_path: str | None) -> dict:
    """The JSON report's `ledger`: the first rows of the requests that did not succeed, the total."""
    rows = hop_ledger.with_source_labels(failed.head(LEDGER_JSON_ROWS).lazy()).collect()
    return {
        "total": failed.height,
        "outcome_unknown": failed["client_ok"].null_count(),
        "shown": rows.height,
        "rows": _iso_times(rows).to_dicts(),
        "file": ledger_path,
    }


def build_report(
    analysis: Analysis, ledger: pl.DataFrame | None = None, ledger_path: str | None = None
) -> ReportData:
    """Everything the reports show, computed once.

    `ledger` is the full hop ledger when the caller built it (for --ledger);
    otherwise only the failed requests' rows are built.
    """
    root = common_root([f.path for f in analysis.inputs])
    failed = (
        ledger.filter(hop_ledger.NOT_OK_ROW)
        if ledger is not None
        else hop_ledger.build_ledger(analysis, hop_ledger.NOT_OK)
    )
    shown, groups = _shown_rows(failed)
    shown_rows = hop_ledger.with_source_labels(shown.lazy()).collect().to_dicts()
    texts = read_cited_lines(
        [
            *(s for e in analysis.verdict.evidence for s in quote_candidates(e.sources)),
            *(s for f in analysis.findings for s in quote_candidates(f.sources)),
            *_cited(shown_rows),
        ],
        {f.path for f in analysis.inputs if f.format},
        analysis.redact_text,
    )

    def quotes(sources: list[str]) -> tuple[list[Quote], int]:
        quoted = [texts[s] for s in quote_candidates(sources) if s in texts][:EVIDENCE_LINES]
        return [Quote(q.source, q.text) for q in quoted], len(sources) - len(quoted)

    summary = summarize(analysis, quotes, _json_ledger(failed, ledger_path), FORMAT_VERSION)
    steps = summary.measured
    return ReportData(
        summary=summary,
        headline=HEADLINES.get(summary.verdict.bottleneck, summary.verdict.bottleneck)
        + qualified_words(summary.verdict.bottleneck, summary.verdict.qualifiers),
        confidence_pct=int(round(summary.verdict.confidence * 100)),
        redacted=any(f.kind == "redacted" for f in summary.findings),
        root=root,
        evidence=_evidence(summary, root),
        findings=_findings(summary, root),
        steps=steps,
        tester_figures=[f for f in summary.tester_figures if f["ours"] is not None],
        step_dates=sorted({r.started_at.date().isoformat() for r in steps if r.started_at}),
        instances=analysis.instances,
        failed=_failed_requests(analysis, failed, shown_rows, groups, texts, root, ledger_path),
        charts=chart_series(analysis),
    )
