"""What every family of findings reads, and how a kind is declared."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from logforensics.correlate.clock import ClockFit
from logforensics.ingest.inputs import Inputs
from logforensics.model import Step


@dataclass(frozen=True)
class Kind:
    """A kind of finding: how much it matters, and what to do about it."""

    severity: str = "warning"  # info | warning
    advice: str | None = None


@dataclass(frozen=True)
class FindingFacts:
    """The analysis' results the findings read, built once."""

    steps: list[Step]  # every step run, the warm-up included
    instances: list[str]
    clock: ClockFit
    inputs: Inputs
    requests: pl.DataFrame  # correlated, with the reach decision
    coverage: dict  # instance → the span its logs cover (the reach decision's)
    unmatched: int  # inference records in the instance logs no client request matched
    figures: list[dict]  # the tester's own figures beside the logs' (steps.tester_figures)
    year_notes: list[str]  # where the year of year-less stamps was assumed
    events: pl.DataFrame  # engine_events: preemptions, KV-full, deaths, as the engines said

    @property
    def measured(self) -> list[Step]:
        return [s for s in self.steps if not s.warmup]
