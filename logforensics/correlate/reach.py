"""Did each request reach an instance, and which witness says so."""

from __future__ import annotations

import numpy as np
import polars as pl

from logforensics import model
from logforensics.correlate.attribute import clock_disputed
from logforensics.correlate.records import MATCH_TOLERANCE_S, never_connected

WITNESS_OF_MATCH = {
    "request_id": "request_id",  # the same id on both sides
    "marker": "prompt_marker",  # the prompt's unique text in the engine's request line
    "engine_lifecycle": "engine_lifecycle",  # the engine logged it arriving (and aborting)
    "time_window": "access_line",  # an access line at the request's time
}


# A front that says in its answer it never dispatched the request: llm-d's router (EPP)
# flow control, `x-llm-d-request-dropped-reason: rejected-*` ("Rejected — request never
# reached an inference server", llm-d-router pkg/common/error/error.go, PR #1027; 503
# rejected-no-endpoints, llm-d-router #2881). `evicted-*` was dispatched first: not here.
FRONT_REJECTED_RE = r"rejected-(?:saturated|ttl-expired|context-cancelled|no-endpoints)\b"


def front_rejected() -> pl.Expr:
    """A failure whose answer (the client's error text) carries the front's own word that
    it never reached an inference server."""
    return (
        ~pl.col("ok").fill_null(True) & model.text("error").str.contains(FRONT_REJECTED_RE)
    ).fill_null(False)


def decide_reach(
    requests: pl.DataFrame,
    coverage: dict,
    offset_s: float,
    server: pl.DataFrame | None = None,
    stats: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """`reach`, the witness behind it, and `reached_instance`, from every witness.

    reached   — an instance's log holds it (witness: what tied it, see
                `WITNESS_OF_MATCH`), or the proxy's log shows it delivered to
                an upstream (witness "proxy"; the instance side unverified when
                that instance's log is silent);
    unreached — the proxy says it never got to any upstream (witness "proxy",
                the strongest proof), or the front's answer says it never
                dispatched it (witness "front_answer", `front_rejected`), or the
                client's own connect was refused (witness "refused_connect",
                `never_connected`); or it failed inside the span every
                instance's log covers, no instance logged it, every success is
                accounted for, and the instances would have logged it: they log
                each request's arrival (witness "coverage"), or their stats
                just before it ended show nothing running or waiting (witness
                "engine_stats"). Without either, a request the proxy or the
                client abandoned leaves no line at all (uvicorn writes none),
                so absence proves nothing;
    reached   — also a request the logs place at one instance under the clock's
                offset and at another under its rival's, when the clock is
                ambiguous (witness "either_clock"; no instance named);
    reached   — also a success no log names: an answer came from an instance
                (witness "success"), one whose log is missing or silent; where the
                client's own trace names the instance's address it connected to
                (`connect_target`), that instance (witness "client_peer");
    reached   — also a failure the proxy sent to an instance without saying
                whether it got there, when that instance's engine counted, at
                some moment inside the request's time, at least as many requests
                running or waiting as the proxy had sent it and not yet seen
                finished (witness "engine_count", `held_by_engine`);
    unknown   — anything else: failures whose reach nothing decides.
    `reached_instance` is the instance the strongest witness names (none for
    a success no log saw).
    """
    if "proxy_delivery" not in requests.columns:
        requests = requests.with_columns(pl.lit(None, dtype=pl.Utf8).alias("proxy_delivery"))
    if "error" not in requests.columns:
        requests = requests.with_columns(pl.lit(None, dtype=model.LABEL).alias("error"))
    if "proxy_instance" not in requests.columns:
        requests = requests.with_columns(pl.lit(None, dtype=pl.Utf8).alias("proxy_instance"))
    out = requests.with_columns(covered_expr(coverage, offset_s).alias("_covered"))
    # a success no log saw was served by an instance whose log is missing: a
    # failure may have reached that instance too, so "never reached" is unproven
    provable = not unaccounted_successes(out)
    logs_arrivals = bool(coverage) and all(name in arrivals_logged(server) for name in coverage)
    out = out.with_columns(engines_idle_at_end(out, coverage, offset_s, stats).alias("_idle"))
    out = out.with_columns(held_by_engine(out, offset_s, stats).alias("_held"))
    by_proxy = pl.col("proxy_delivery")
    # an arrival no request claimed may be this one's, delivered late by a queueing proxy
    unclaimed = (
        pl.col("unclaimed_arrival") if "unclaimed_arrival" in requests.columns else pl.lit(False)
    )
    # the two clocks an ambiguous fit leaves place it at two instances (or one and none)
    disputed, at_either = clock_disputed(requests), pl.lit(False)
    if "clock_disputed" in requests.columns:
        both = (
            pl.col("instance_at_offset").is_not_null() & pl.col("instance_at_rival").is_not_null()
        )
        at_either = disputed & both
    failed_unseen = (
        ~disputed
        & pl.col("instance").is_null()
        & ~pl.col("ok").fill_null(True)
        & pl.col("_covered")
        & pl.lit(provable)
        & ~unclaimed
        & (by_proxy.is_null() | (by_proxy == "unknown"))
    )
    refused = never_connected(requests.columns)
    peer = client_peer(requests.columns)
    reach = (
        pl.when(
            pl.col("instance").is_not_null()
            | (by_proxy == "reached")
            | pl.col("ok").fill_null(False)
        )
        .then(model.label("reached"))
        .when((by_proxy == "refused") | front_rejected() | refused)
        .then(model.label("unreached"))
        .when(at_either)
        .then(model.label("reached"))
        .when(pl.col("_held"))
        .then(model.label("reached"))
        .when(failed_unseen & (pl.lit(logs_arrivals) | pl.col("_idle")))
        .then(model.label("unreached"))
        .otherwise(model.label("unknown"))
    )
    witness = (
        pl.when(pl.col("instance").is_not_null())
        .then(
            pl.col("match_key").replace_strict(
                WITNESS_OF_MATCH, default="instance_log", return_dtype=model.LABEL
            )
        )
        .when(by_proxy.is_in(["reached", "refused"]))
        .then(model.label("proxy"))
        .when(front_rejected())
        .then(model.label("front_answer"))
        .when(refused)
        .then(model.label("refused_connect"))
        .when(at_either)
        .then(model.label("either_clock"))
        .when(pl.col("ok").fill_null(False) & peer.is_not_null())
        .then(model.label("client_peer"))
        .when(pl.col("ok").fill_null(False))
        .then(model.label("success"))
        .when(pl.col("_held"))
        .then(model.label("engine_count"))
        .when(reach == "unreached")
        .then(
            pl.when(pl.lit(logs_arrivals))
            .then(model.label("coverage"))
            .otherwise(model.label("engine_stats"))
        )
    )
    reached_instance = pl.coalesce(
        pl.col("instance"),
        pl.when((by_proxy == "reached") | pl.col("_held")).then(pl.col("proxy_instance")),
        pl.when(pl.col("ok").fill_null(False)).then(peer),
    )
    return out.with_columns(  # (labels: 4 bytes a request, not a string's 16)
        reach.cast(model.LABEL).alias("reach"),
        witness.cast(model.LABEL).alias("reach_witness"),
        reached_instance.alias("reached_instance"),
    ).drop("_covered", "_idle", "_held")


def arrivals_logged(server: pl.DataFrame | None) -> set[str]:
    """Instances whose logs record each request's arrival (vLLM's request logging)."""
    if server is None or server.is_empty():
        return set()
    return set(server.filter(pl.col("event") == "received")["instance"].unique().to_list())


def engines_idle_at_end(
    requests: pl.DataFrame, coverage: dict, offset_s: float, stats: pl.DataFrame | None
) -> pl.Expr:
    """Per failed request no instance logged (False for the rest, which it cannot decide):
    did every instance's last stats line before its end show nothing inside?

    A request inside an engine counts as running or waiting until it ends;
    stats lines come every few seconds while the engine is busy (newer vLLM
    prints none while idle, so the last one before a quiet spell is the
    zero line). When each instance's latest line at or before the failure's
    end reads Running 0, Waiting 0, the failed request was in none of them.
    """
    if stats is None or stats.is_empty() or not coverage or requests.is_empty():
        return pl.lit(False)
    # an instance that logs stats but printed none yet had been idle since it started
    names = sorted(set(coverage) & set(stats["instance"].drop_nulls().unique().to_list()))
    if len(names) < len(coverage):
        return pl.lit(False)
    shift_us = int(round(offset_s * 1e6))
    # (69k of 6.6M requests at 20M: eight searches of the rest were 0.7 s)
    asked = requests.select(
        pl.col("instance").is_null()
        & ~pl.col("ok").fill_null(True)
        & pl.col("ended_at").is_not_null()
    ).to_series()
    rows = np.flatnonzero(asked.to_numpy())
    ends = (requests["ended_at"].gather(rows).dt.epoch("us") + shift_us).to_numpy()
    idle = np.ones(len(rows), dtype=bool)
    by_instance = (
        stats.filter(pl.col("instance").is_in(names) & pl.col("at").is_not_null())
        .select(
            "instance",
            pl.col("at").dt.epoch("us"),
            (pl.col("running").fill_null(0) + pl.col("waiting").fill_null(0)).alias("inside"),
        )
        .sort("at", maintain_order=True)
        .partition_by("instance", as_dict=True)
    )
    for own in by_instance.values():
        # the instance's last line at or before each end (none yet: it had been idle)
        last = np.searchsorted(own["at"].to_numpy(), ends, side="right") - 1
        inside = own["inside"].to_numpy()
        idle &= (last < 0) | (inside[np.maximum(last, 0)] == 0)
    answer = np.zeros(requests.height, dtype=bool)
    answer[rows] = idle
    return pl.lit(pl.Series(answer))


def held_by_engine(requests: pl.DataFrame, offset_s: float, stats: pl.DataFrame | None) -> pl.Expr:
    """Per request: a failure the proxy sent to an instance (its delivery not logged, nor
    the instance's own line) that the instance's engine was holding.

    An engine's running + waiting gauge counts every request inside it. At a
    stats moment well inside the failure's time (MATCH_TOLERANCE_S from either
    end), the proxy had sent that instance the requests whose times (widened by
    the tolerance) hold the moment; when the engine counted at least as many,
    each of them was inside, the failure too. Another client's requests would
    only raise the count, so a load test must be the engine's only traffic
    (as the other witnesses of time assume).
    """
    needed = {"proxy_instance", "proxy_delivery", "instance", "ok", "started_at", "ended_at"}
    if stats is None or stats.is_empty() or not needed <= set(requests.columns):
        return pl.lit(False)
    is_open = (
        pl.col("instance").is_null()
        & pl.col("proxy_instance").is_not_null()
        & ~pl.col("ok").fill_null(True)
        & (pl.col("proxy_delivery").is_null() | (pl.col("proxy_delivery") == "unknown"))
    )
    if not requests.select(is_open.any()).item():  # (no such failure: no pass a request)
        return pl.lit(False)
    timed = requests.select(
        pl.coalesce("instance", "proxy_instance").cast(pl.Utf8).alias("_to"),
        (pl.col("started_at").dt.epoch("us") / 1e6 + offset_s).alias("_s"),
        (pl.col("ended_at").dt.epoch("us") / 1e6 + offset_s).alias("_e"),
        is_open.alias("_open"),
    )
    held = np.zeros(requests.height, dtype=bool)
    inside = stats.filter(pl.col("at").is_not_null()).select(
        pl.col("instance").cast(pl.Utf8),
        (pl.col("at").dt.epoch("us") / 1e6).alias("t"),
        (pl.col("running").fill_null(0) + pl.col("waiting").fill_null(0)).alias("n"),
    )
    for (name,), own in inside.partition_by("instance", as_dict=True).items():
        routed = timed.with_row_index("_i").filter(
            (pl.col("_to") == name) & pl.col("_s").is_not_null() & pl.col("_e").is_not_null()
        )
        open_ = routed.filter(pl.col("_open"))
        if open_.is_empty():
            continue
        own = own.sort("t")
        t, n = own["t"].to_numpy(), own["n"].to_numpy()
        starts = np.sort(routed["_s"].to_numpy() - MATCH_TOLERANCE_S)
        ends = np.sort(routed["_e"].to_numpy() + MATCH_TOLERANCE_S)
        # requests the proxy had sent it at each moment: started by then, not yet ended
        sent = np.searchsorted(starts, t, side="right") - np.searchsorted(ends, t, side="left")
        good = np.concatenate(([0], np.cumsum((n >= sent) & (sent > 0))))
        lo = np.searchsorted(t, open_["_s"].to_numpy() + MATCH_TOLERANCE_S, side="left")
        hi = np.searchsorted(t, open_["_e"].to_numpy() - MATCH_TOLERANCE_S, side="right")
        hit = good[np.maximum(hi, lo)] - good[lo] > 0
        held[open_["_i"].to_numpy()[hit]] = True
    return pl.lit(pl.Series(held))


def client_peer(columns: list[str]) -> pl.Expr:
    """The instance the client's own trace says it connected to (`connect_target` of a
    request that connected), else null."""
    if "connect_target" not in columns:
        return pl.lit(None, dtype=model.LABEL)
    return pl.when(~never_connected(columns)).then(pl.col("connect_target"))


MISSING_LOG_SHARE = 0.02  # successes no instance log saw, beyond which a log is missing


def unaccounted_successes(requests: pl.DataFrame) -> int:
    """Successful, timed requests inside every log's span that no instance log saw."""
    timed = pl.col("ok") & pl.col("started_at").is_not_null()
    # counted, not filtered: a filter would copy every column of the requests
    lost, timed_ok = requests.select(
        (
            timed
            & pl.col("instance").is_null()
            & ~clock_disputed(requests)
            & (pl.col("proxy_delivery").fill_null("") != "reached")
            & client_peer(requests.columns).is_null()  # (its instance known, its log present)
            & pl.col("_covered")
        )
        .sum()
        .alias("lost"),
        timed.sum().alias("timed_ok"),
    ).row(0)
    return lost if lost >= max(1, MISSING_LOG_SHARE * timed_ok) else 0


def missing_log_successes(requests: pl.DataFrame, coverage: dict, offset_s: float) -> int:
    """The successes `decide_reach` takes as proof that a log is missing or short (so a
    failure may have reached its instance, and "never reached" is unproven): what the
    missing-log finding reports, so the two cannot disagree."""
    return unaccounted_successes(
        requests.with_columns(covered_expr(coverage, offset_s).alias("_covered"))
    )


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


# Where a failed request died: the hop the evidence places its end at.
FAILED_AT = ("proxy", "before_instance", "instance", "unknown")


def failed_at() -> pl.Expr:
    """The hop a request that did not succeed died at (null for a success): the proxy
    refused it, it reached an instance, it never reached one, or nothing decides."""
    return (
        pl.when(pl.col("ok").fill_null(False))
        .then(model.label(None))
        .when((pl.col("proxy_delivery") == "refused") | front_rejected())
        .then(model.label("proxy"))
        .when(pl.col("reach") == "reached")
        .then(model.label("instance"))
        .when(pl.col("reach") == "unreached")
        .then(model.label("before_instance"))
        .otherwise(model.label("unknown"))
        .alias("failed_at")
    )


def client_outcome(columns: list[str]) -> pl.Expr:
    """The correlation stage's outcome class where it gave one, else a coarse class of our own."""
    coarse = (
        pl.when(pl.col("ok"))
        .then(pl.lit("ok"))
        .when(pl.col("http_status") >= 400)
        .then(pl.format("http_{}", pl.col("http_status")))
        .when(pl.col("error").is_not_null() | (pl.col("ok") == False))  # noqa: E712 (null stays out)
        .then(pl.lit("error"))
        .otherwise(pl.lit("unknown"))
    )
    return (pl.coalesce("outcome", coarse) if "outcome" in columns else coarse).alias(
        "client_outcome"
    )
