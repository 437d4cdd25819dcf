"""Finding: the balancer kept sending requests to an instance after it failed.

A health-check gap: with passive checks off (nginx `max_fails=0`) and no
retry on the next upstream, every request the balancer routes to a dead
instance fails, for as long as the test runs.
"""

from __future__ import annotations

import datetime as dt

import polars as pl

from logforensics.diagnose.facts import at_text
from logforensics.diagnose.findings import Finding
from logforensics.diagnose.thresholds import Thresholds

KIND = "failed_instance_kept_in_pool"
ADVICE = (
    "Health-check the upstreams so a dead instance leaves the pool: nginx max_fails / "
    "fail_timeout (max_fails=0 turns it off) with proxy_next_upstream error timeout http_502 "
    "to retry on another instance; HAProxy `check` on each server with `option redispatch`; "
    "Envoy outlier detection."
)


def findings(
    failed: pl.DataFrame, moments: pl.DataFrame, errors: pl.DataFrame, t: Thresholds
) -> list[Finding]:
    """`failed`: the failures the instance failure explains, with `who` (instance or address)."""
    out = []
    pad = dt.timedelta(seconds=t.proxy_window_s)
    for who in failed["who"].drop_nulls().unique().sort().to_list():
        own = moments.filter(pl.col("instance") == who)["failed_at"]
        named = errors.filter(pl.col("upstream") == who)["at"]
        since = own.min() if own.len() else named.min()
        if since is None:
            continue
        # routed by a balancer (its log names where it sent them); sent straight, no pool
        routed = pl.col("proxy_upstream").is_not_null() | pl.col("proxy_instance").is_not_null()
        later = failed.filter((pl.col("who") == who) & (pl.col("w_start") > since + pad) & routed)
        if later.is_empty():
            continue
        out.append(
            Finding(
                KIND,
                f"after {who} failed ({at_text(since)}) the balancer still sent it "
                f"{later.height} request(s), the last at {at_text(later['w_start'].max())}; "
                "all failed: nothing took it out of the pool",
                advice=ADVICE,
            )
        )
    return out
