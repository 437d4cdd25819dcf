"""What a report states, as records: built once from an Analysis (`summarize`), written as
the JSON report field by field (report.jsonout) and read back from it the same, so that
`compare` reads a saved report and a fresh analysis alike.

Every part is typed but the tester's own figures and the ledger's pointer, which are the
JSON's own objects.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field

from logforensics.analysis import Analysis
from logforensics.ingest.inputs import InputFile
from logforensics.model import OMIT_EMPTY, Capacity, OverallBalance, Step, from_json


@dataclass(frozen=True)
class Quote:
    """A cited line's text, for a reader without the logs."""

    source: str  # file:line
    text: str


@dataclass(frozen=True)
class CauseEvidence:
    """One signal a cause was judged on."""

    signal: str
    title: str
    role: str  # discriminating (tells causes apart) | shared (corroborates)
    value: object
    threshold: str
    sources: list[str]
    supports: str


@dataclass(frozen=True)
class EvidenceRecord(CauseEvidence):
    """The verdict's evidence, with the text of the first lines it cites."""

    lines: list[Quote] = field(default_factory=list)
    more_lines: int = 0  # cited lines not quoted


@dataclass(frozen=True)
class SecondaryRecord:
    bottleneck: str
    failures: int
    share: float
    confidence: float
    subject: str | None
    evidence: list[CauseEvidence]


@dataclass(frozen=True)
class VerdictRecord:
    bottleneck: str  # model.Bottleneck's values
    confidence: float
    summary: str
    subject: str | None
    failures: int
    share: float | None
    evidence: list[EvidenceRecord]
    secondary: list[SecondaryRecord]
    contested: int
    unexplained: int
    recommendations: list[str]
    missing: list[str]
    # sub-causes that change the fix (`diagnose.QUALIFIERS`): shed_at_front, prefill, decode
    qualifiers: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Totals:
    """The measured requests (warm-up left out), each counted once by its witness."""

    sent: int
    succeeded: int
    failed: int
    unreached: int
    unknown: int
    reached_unseen: int  # successes no present log saw
    outcome_unknown: int
    retried: int


@dataclass(frozen=True)
class InstanceShare:
    name: str
    requests: int  # measured requests it was reached by
    share: float | None
    # the most its engine reported at once (stats lines, metrics); null where none did
    peak_running: int | None = None
    peak_waiting: int | None = None
    peak_kv_pct: float | None = None


@dataclass(frozen=True)
class FindingRecord:
    kind: str
    detail: str
    severity: str
    advice: str | None
    # only where a finding cites lines (written so, absent otherwise)
    sources: list[str] = field(default_factory=list, metadata=OMIT_EMPTY)
    lines: list[Quote] = field(default_factory=list, metadata=OMIT_EMPTY)


@dataclass(frozen=True)
class UnparsedExample:
    line: int
    text: str


@dataclass(frozen=True)
class InputRecord:
    """One input file as read: its format, its lines accounted for."""

    path: str
    format: str | None
    formats: list[str]
    role: str | None
    instance: str | None
    lines: int
    parsed: int
    noise: int
    unparsed: int
    records: dict[str, int]
    span: list[dt.datetime] | None
    unparsed_examples: list[UnparsedExample]
    unparsed_shapes: list[dict]
    notes: list[str]
    skipped: str | None
    # the run's configuration as its tester recorded it (`logforensics loadtest`'s)
    config: dict | None = field(default=None, metadata=OMIT_EMPTY)


@dataclass(frozen=True)
class RivalClock:
    """The best other offset and the records that agree with it."""

    offset_s: float
    paired: int


@dataclass(frozen=True)
class InstanceClock:
    """One instance's own clock against the common one."""

    offset_s: float
    method: str
    matched: int
    considered: int
    moved_s: float | None


@dataclass(frozen=True)
class ClockRecord:
    """The client→servers offset, how it was decided and what else the evidence allows."""

    offset_s: float
    method: str  # forced | estimated | assumed
    matched: int
    considered: int
    fit: float | None
    residual_s: float | None
    zone_hint: str | None
    paired: int
    ambiguous: bool
    interval: list[float] | None
    basis: str | None
    second: RivalClock | None
    instances: dict[str, InstanceClock]


@dataclass(frozen=True)
class UpstreamRecord:
    """A proxy upstream address and the instance it was mapped to, with what decided it."""

    instance: str | None
    fit: float | None
    lines: int
    forced: bool
    by: str | None
    counts_r: float | None


@dataclass(frozen=True)
class ProxyClock:
    offset_s: float
    method: str
    matched: int
    considered: int
    interval: list[float] | None
    basis: str | None


@dataclass(frozen=True)
class ProxyRecord:
    """What the proxy's log witnessed: its upstreams, the requests it matched, its clock."""

    upstreams: dict[str, UpstreamRecord]
    matched: int
    delivered: int
    refused: int
    clock: ProxyClock | None


@dataclass(frozen=True)
class Summary:
    """The report's statements, in the JSON's order."""

    format_version: int
    generated_at: dt.datetime | None
    verdict: VerdictRecord
    totals: Totals
    instances: list[InstanceShare]
    runs: list[Step]
    capacity: Capacity
    balance: OverallBalance
    findings: list[FindingRecord]
    inputs: list[InputRecord]
    tester_figures: list[dict]
    errors: list[str]
    clock: ClockRecord
    coverage: dict[str, list[dt.datetime]]
    proxy: ProxyRecord | None
    unmatched_server_records: int
    ledger: dict | None = None

    @property
    def measured(self) -> list[Step]:
        """The steps without the warm-up."""
        return [r for r in self.runs if not r.warmup]


def summarize(
    analysis: Analysis,
    quotes: Callable[[list[str]], tuple[list[Quote], int]],
    ledger: dict | None,
    format_version: int,
) -> Summary:
    """The analysis' statements as records; `quotes(sources)` gives the first cited lines'
    text and how many more it cites."""
    verdict = from_json(VerdictRecord, analysis.verdict.to_dict())
    evidence = []
    for e, d in zip(analysis.verdict.evidence, verdict.evidence, strict=True):
        lines, more = quotes(e.sources)  # every source it cites, beyond those the JSON lists
        evidence.append(dataclasses.replace(d, lines=lines, more_lines=more))
    findings = []
    for f in analysis.findings:
        lines = quotes(f.sources)[0] if f.sources else []
        findings.append(FindingRecord(f.kind, f.detail, f.severity, f.advice, f.sources, lines))
    return Summary(
        format_version=format_version,
        generated_at=analysis.generated_at,
        verdict=dataclasses.replace(verdict, evidence=evidence),
        totals=Totals(**analysis.totals()),
        instances=[InstanceShare(**s) for s in analysis.instance_shares()],
        runs=analysis.runs,
        capacity=analysis.capacity,
        balance=analysis.balance,
        findings=findings,
        inputs=[input_record(f) for f in analysis.inputs],
        tester_figures=analysis.tester_figures,
        errors=analysis.errors,
        clock=from_json(ClockRecord, clock_dict(analysis)),
        coverage={k: [a, b] for k, (a, b) in sorted(analysis.coverage.items())},
        proxy=from_json(ProxyRecord, analysis.proxy_summary()),
        unmatched_server_records=analysis.unmatched_server_records,
        ledger=ledger,
    )


def input_record(f: InputFile) -> InputRecord:
    return InputRecord(
        path=f.path,
        format=f.format,
        formats=f.formats,
        role=f.role,
        instance=f.instance,
        lines=f.lines,
        parsed=f.parsed,
        noise=f.noise,
        unparsed=f.unparsed,
        records=f.records,
        span=list(f.span) if f.span else None,
        unparsed_examples=[UnparsedExample(n, t) for n, t in f.unparsed_examples],
        unparsed_shapes=f.unparsed_shapes,
        notes=f.notes,
        skipped=f.skipped,
        config=f.run_config,
    )


def clock_dict(analysis: Analysis) -> dict:
    c = analysis.clock
    return {
        "offset_s": c.offset_s,
        "method": c.method,
        "matched": c.matched,
        "considered": c.considered,
        "fit": c.fit,
        "residual_s": c.residual_s,
        "zone_hint": c.zone_hint,
        "paired": c.paired,
        "ambiguous": c.ambiguous,
        "interval": None if c.interval is None else list(c.interval),
        "basis": c.basis,
        "second": None
        if c.second_offset_s is None
        else {"offset_s": c.second_offset_s, "paired": c.second_paired},
        "instances": {
            name: {
                "offset_s": fit.offset_s,
                "method": fit.method,
                "matched": fit.matched,
                "considered": fit.considered,
                "moved_s": fit.moved_s,
            }
            for name, fit in analysis.instance_clocks.items()
        },
    }
