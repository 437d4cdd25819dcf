"""Did each request reach an instance, and which witness says so."""

from __future__ import annotations

import polars as pl


def decide_reach(requests: pl.DataFrame, coverage: dict, offset_s: float) -> pl.DataFrame:
    """`reach` and the witness behind it, from the instance logs and the proxy's log.

    reached   — an instance log holds it (witness "instance"), or the proxy's log
                shows it delivered to an upstream whose own log is missing or
                silent (witness "proxy": the instance side is unverified);
    unreached — the proxy says it refused it before any upstream (witness
                "proxy", the strongest proof), or it failed inside the span every
                instance's log covers and matched nothing while every success is
                accounted for (witness "coverage");
    unknown   — anything else.
    """
    if "proxy_delivery" not in requests.columns:
        requests = requests.with_columns(pl.lit(None, dtype=pl.Utf8).alias("proxy_delivery"))
    out = requests.with_columns(covered_expr(coverage, offset_s).alias("_covered"))
    # a success no log saw was served by an instance whose log is missing: a
    # failure may have reached that instance too, so "never reached" is unproven
    provable = not unaccounted_successes(out)
    by_proxy = pl.col("proxy_delivery")
    reach = (
        pl.when(pl.col("instance").is_not_null())
        .then(pl.lit("reached"))
        .when(by_proxy == "reached")
        .then(pl.lit("reached"))
        .when(by_proxy == "refused")
        .then(pl.lit("unreached"))
        .when(~pl.col("ok") & pl.col("_covered") & pl.lit(provable))
        .then(pl.lit("unreached"))
        .otherwise(pl.lit("unknown"))
    )
    witness = (
        pl.when(pl.col("instance").is_not_null())
        .then(pl.lit("instance"))
        .when(by_proxy.is_in(["reached", "refused"]))
        .then(pl.lit("proxy"))
        .when(reach == "unreached")
        .then(pl.lit("coverage"))
    )
    return out.with_columns(reach.alias("reach"), witness.alias("reach_witness")).drop("_covered")


MISSING_LOG_SHARE = 0.02  # successes no instance log saw, beyond which a log is missing


def unaccounted_successes(requests: pl.DataFrame) -> int:
    """Successful, timed requests inside every log's span that no instance log saw."""
    lost = requests.filter(
        pl.col("ok")
        & pl.col("started_at").is_not_null()
        & pl.col("instance").is_null()
        & (pl.col("proxy_delivery").fill_null("") != "reached")
        & pl.col("_covered")
    ).height
    timed_ok = requests.filter(pl.col("ok") & pl.col("started_at").is_not_null()).height
    return lost if lost >= max(1, MISSING_LOG_SHARE * timed_ok) else 0


def covered_expr(coverage: dict, offset: float) -> pl.Expr:
    """Whether a request's whole window lies inside the span every instance's log covers."""
    if not coverage:
        return pl.lit(False)
    lo = max(span[0] for span in coverage.values())
    hi = min(span[1] for span in coverage.values())
    shift = pl.duration(microseconds=int(round(offset * 1e6)))
    return (
        ((pl.col("started_at") + shift) >= lo) & ((pl.col("ended_at") + shift) <= hi)
    ).fill_null(False)
