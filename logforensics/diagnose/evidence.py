"""What a rule declares (its signals) and what it returns (evidence, claims).

A signal is *discriminating* when it tells one cause from the others (KV
usage at 100% on the instance a failed request reached), *shared* when every
engine-side cause produces it (failures reached an instance, throughput
plateaued, latency grew). Shared signals add to the confidence of a cause the
discriminating evidence already names; they never name one, and never decide
between two.
"""

from __future__ import annotations

import dataclasses
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import polars as pl

from logforensics.diagnose.findings import Finding
from logforensics.diagnose.thresholds import Thresholds, option_name
from logforensics.model import Bottleneck

if TYPE_CHECKING:
    from logforensics.diagnose.facts import Facts

DISCRIMINATING = "discriminating"
SHARED = "shared"
QUALIFYING = "qualifying"  # decides a qualifier (a sub-cause), never the cause or its confidence
MAX_SOURCES = 20  # file:line references kept per evidence item


def combine(weights: list[float]) -> float:
    """Independent signals: each that fires adds its weight as 1 - Π(1 - w)."""
    remaining = 1.0
    for w in weights:
        remaining *= 1.0 - w
    return 1.0 - remaining


@dataclass(frozen=True)
class Signal:
    name: str
    title: str  # what it means, in a reader's words (report, README)
    weight: float
    test: str  # when it fires; {field} names a Thresholds field, e.g. "≥ {kv_full_pct:g}%"
    role: str = DISCRIMINATING

    def options(self) -> list[str]:
        """The Thresholds fields its test reads."""
        return [name for _, name, _, _ in string.Formatter().parse(self.test) if name]

    def threshold(self, t: Thresholds) -> str:
        return self.test.format(**dataclasses.asdict(t))

    def fired(self, value: object, t: Thresholds, sources: list[str] | None = None) -> Evidence:
        return Evidence(
            signal=self.name,
            title=self.title,
            role=self.role,
            value=value,
            threshold=self.threshold(t),
            sources=list(sources or [])[:MAX_SOURCES],
            weight=self.weight,
        )

    def documented_test(self) -> str:
        """The test as the README shows it: defaults filled in, each option named."""
        text = self.threshold(Thresholds())
        opts = ", ".join(f"`{option_name(o)}`" for o in dict.fromkeys(self.options()))
        return f"{text} ({opts})" if opts else text


@dataclass
class Evidence:
    signal: str
    title: str
    role: str
    value: object
    threshold: str
    sources: list[str] = field(default_factory=list)
    weight: float = 0.0
    supports: str = ""  # which verdict it speaks for

    def to_dict(self) -> dict:
        return {
            "signal": self.signal,
            "title": self.title,
            "role": self.role,
            "value": self.value,
            "threshold": self.threshold,
            "sources": self.sources[:MAX_SOURCES],
            "supports": self.supports,
        }


@dataclass(frozen=True)
class Qualifier:
    """A sub-cause that changes the fix while the bottleneck stays: the verdict names it,
    its summary replaces the rule's, its advice comes first."""

    name: str  # as the JSON's verdict.qualifiers carries it
    words: str  # in a reader's words
    when: str  # what decides it (README)
    summary: str  # as Rule.summary
    recommendations: tuple[str, ...]


@dataclass
class RuleResult:
    """One rule's reading of the case: which failed requests it explains, and why."""

    bottleneck: Bottleneck
    claims: pl.Series  # Boolean, one per row of Facts.failures (facts.no_claims when none)
    evidence: list[Evidence] = field(default_factory=list)
    subject: str | None = None  # what the summary names (an instance, an address)
    missing: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    qualifiers: list[Qualifier] = field(default_factory=list)  # of the rule's own

    @property
    def score(self) -> float:
        """Confidence from the discriminating evidence alone (what ranks causes)."""
        return combine([e.weight for e in self.evidence if e.role == DISCRIMINATING])


@dataclass(frozen=True)
class Rule:
    """A verdict rule: its signals, what it advises, and how it reads the facts."""

    bottleneck: Bottleneck
    headline: str  # the verdict in words, e.g. "The KV cache"
    summary: str  # what its failures did: {claimed}, {failed}, {sent}, {subject}
    signals: tuple[Signal, ...]
    recommendations: tuple[str, ...]
    evaluate: Callable[[Facts, Thresholds], RuleResult]
    outranks: tuple[Bottleneck, ...] = ()  # its claims take a failure from these causes
    corroborated: bool = False  # shared signals add to its confidence
    qualifiers: tuple[Qualifier, ...] = ()  # the sub-causes its results may name
