"""The clock: two offsets that fit alike, a time-zone mistake."""

from __future__ import annotations

import polars as pl

from logforensics.diagnose import Finding
from logforensics.findings.base import FindingFacts, Kind

KINDS = {
    "clock_ambiguous": Kind(
        advice="Send a request id with every request (logforensics loadtest does), or pass "
        "--offset once the clocks are known."
    ),
    "time_zone_mismatch": Kind(
        advice="Log with explicit offsets (ISO 8601 with Z or +hh:mm) on every side, or pass "
        "--offset."
    ),
}


def find(facts: FindingFacts) -> list[Finding]:
    clock, requests = facts.clock, facts.requests
    out = []
    if clock.ambiguous:
        by_time, disputed = requests.select(
            (
                ~pl.col("warmup")
                & (
                    pl.col("match_key").is_in(["time_window", "engine_lifecycle"])
                    | (pl.col("reach_witness").is_in(["coverage", "engine_stats"]))
                )
            )
            .sum()
            .alias("by_time"),
            (~pl.col("warmup") & pl.col("clock_disputed")).sum().alias("disputed"),
        ).row(0)
        out.append(
            Finding(
                "clock_ambiguous",
                f"the client→server offset is {clock.offset_s:+.1f} s ({clock.paired} records "
                f"agree), but {clock.second_offset_s:+.1f} s has {clock.second_paired} as well: "
                f"{disputed} request(s) the two place at different instances are left "
                f"unattributed (each step's split states them as its ±); "
                f"{by_time} placed by time are where both put them",
            )
        )
    if clock.zone_hint:
        out.append(
            Finding(
                "time_zone_mismatch",
                f"client and server clocks differ by {clock.offset_s:+.0f} s ≈ {clock.zone_hint}",
            )
        )
    return out
