"""A comparison of runs as records: built once (`compare.build`), rendered as HTML, JSON and
Markdown, gated by `--fail-on`. Its JSON carries its own format version."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from logforensics.model import Failures

# 1: the first: runs, bottleneck, steps (matched, success tests), instances, conditions,
#    conclusion
# 2: steps matched by the rate the tester fixed (steps_by "rate", steps[].key that rate)
COMPARE_FORMAT_VERSION = 2


@dataclass(frozen=True)
class RunRef:
    """One run as given: its report's verdict in short."""

    label: str  # the folder's or file's name
    path: str
    read_as: str  # analysed | tables | report (a JSON report read back)
    format_version: int  # of the report (the current one for a run analysed here)
    bottleneck: str
    confidence: float
    subject: str | None
    summary: str


@dataclass(frozen=True)
class Side:
    """One configuration: its runs (repetitions of it), and the verdict they share."""

    name: str  # baseline | candidate
    runs: list[RunRef]
    bottleneck: str  # the runs' verdict, or "mixed"
    instances: list[str]


@dataclass(frozen=True)
class StepSide:
    """One side of a matched step, summed over the side's runs."""

    runs: int  # runs that had this step
    concurrency: int
    sent: int
    succeeded: int
    failed: int
    unreached: int
    success_rates: list[float]  # one per run: the unit of the statistics
    p50_s: float | None  # the median over runs of each run's figure
    p95_s: float | None
    output_tokens_per_s: float | None
    per_instance: dict[str, int]
    balance: str  # the balance test's verdict (of each run, joined where they differ)
    failures: Failures | None  # None: a report of format 9 does not say


@dataclass(frozen=True)
class SuccessTest:
    """Candidate against baseline on the step's success rate."""

    test: str  # stats.FISHER | stats.WELCH
    baseline_rate: float
    candidate_rate: float
    delta: float
    p_value: float | None  # Fisher's, with one run a side
    interval: list[float] | None  # 95 % of candidate − baseline, with repetitions
    margin: float | None  # the non-inferiority margin, with repetitions
    decision: str  # could be chance | higher | lower | non-inferior | inferior | inconclusive
    fragile: list[str] = field(default_factory=list)  # runs whose removal flips the decision


@dataclass(frozen=True)
class StepPair:
    key: float  # the concurrency, the rate, or the position (`Comparison.steps_by`)
    baseline: StepSide | None
    candidate: StepSide | None
    success: SuccessTest | None
    p95_ratio: float | None  # candidate / baseline: reported, never called a regression
    tokens_ratio: float | None


@dataclass(frozen=True)
class InstanceSide:
    requests: int
    share: float | None
    peak_running: int | None
    peak_waiting: int | None
    peak_kv_pct: float | None


@dataclass(frozen=True)
class InstanceRow:
    name: str
    baseline: InstanceSide | None  # None: not in the baseline's runs
    candidate: InstanceSide | None


@dataclass(frozen=True)
class Condition:
    """A condition the runs differ in that changes the numbers."""

    what: str
    baseline: str
    candidate: str


@dataclass(frozen=True)
class Comparison:
    format_version: int
    generated_at: dt.datetime
    change: str | None  # what was changed, in the user's words (--change)
    baseline: Side
    candidate: Side
    bottleneck_change: str  # unchanged | moved | removed | appeared | none | mixed
    steps_by: str  # rate | concurrency | order
    steps: list[StepPair]
    instances: list[InstanceRow]
    conditions: list[Condition]
    not_checked: list[str]  # conditions some run does not record: not compared
    conclusion: list[str]  # sentences built by `conclude.RULES` from the records above

    @property
    def key_name(self) -> str:
        """The matched steps' column heading and chart axis."""
        return {"rate": "requests/s", "concurrency": "concurrency"}.get(self.steps_by, "step")

    def load(self, p: StepPair) -> str:
        """A matched step in a sentence: "at 20 concurrent", "at 2.5 requests/s", "in step 3"."""
        if self.steps_by == "rate":
            return f"at {p.key:g} requests/s"
        return f"at {p.key} concurrent" if self.steps_by == "concurrency" else f"in step {p.key}"
