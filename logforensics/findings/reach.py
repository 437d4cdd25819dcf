"""Whether the logs can say where a request went: a missing log, a proxy's word alone, a
client that left first, requests nothing places, records no client sent."""

from __future__ import annotations

import polars as pl

from logforensics.correlate import reach, steps
from logforensics.diagnose import Finding
from logforensics.findings.base import FindingFacts, Kind

KINDS = {
    "missing_instance_log": Kind(
        advice="Collect the log of every instance behind the balancer for the whole test."
    ),
    "successes_unseen": Kind("info"),
    "unverified_by_instance": Kind(),
    "client_timeout_shorter_than_server_latency": Kind(
        advice="Raise the client timeout above the server's latency at this load, or lower the "
        "load."
    ),
    "unknown_reach": Kind(
        advice="Record absolute start/end times per request (logforensics loadtest does) and "
        "keep every instance's log for the whole test."
    ),
    "unmatched_server_records": Kind("info"),
}


GAVE_UP = ["timeout", "cancelled"]  # outcomes of a client that stopped waiting


def find(facts: FindingFacts) -> list[Finding]:
    return [*_unseen_successes(facts), *_unverified(facts), *_rest(facts)]


def _unseen_successes(facts: FindingFacts) -> list[Finding]:
    """Successes no instance log saw: the reach decision's own count decides whether a log is
    missing (and failures unprovable), the rest are named as tolerated."""
    if not facts.instances:
        return []
    requests = facts.requests
    # counted, not filtered: a filter would copy every column of the requests
    unseen = requests.select(
        (
            pl.col("ok")
            & pl.col("started_at").is_not_null()
            & pl.col("instance").is_null()
            & (pl.col("proxy_delivery").fill_null("") != "reached")
        ).sum()
    ).item()
    lost = reach.missing_log_successes(requests, facts.coverage, facts.clock.offset_s)
    if lost:
        return [
            Finding(
                "missing_instance_log",
                f"{lost} successful request(s) appear in no instance's log: an instance's log is "
                "missing or short, so failures cannot be proven to have never reached an instance",
            )
        ]
    if unseen:
        return [
            Finding(
                "successes_unseen",
                f"{unseen} successful request(s) appear in no instance's log, outside the span "
                "every log covers or too few to doubt it (at most "
                f"{reach.MISSING_LOG_SHARE:.0%} of the timed successes): failures inside that "
                "span are still judged by the logs",
            )
        ]
    return []


def _unverified(facts: FindingFacts) -> list[Finding]:
    requests, instances = facts.requests, facts.instances
    unverified = requests.filter(
        ~pl.col("warmup") & pl.col("instance").is_null() & (pl.col("proxy_delivery") == "reached")
    )
    if not unverified.height:
        return []
    by = unverified.group_by(steps.upstream_name().alias("u")).len().sort("u")
    listed = ", ".join(f"{u or 'an unmapped upstream'}: {n}" for u, n in by.iter_rows())
    unanswered = unverified.filter(~pl.col("ok").fill_null(False)).height
    silent = set(instances) - reach.arrivals_logged(facts.inputs.tables["server_requests"])
    why = "that instance's log is missing, or the mapping is off"
    if unanswered and silent:
        quiet = (
            "an engine that logs no request lines (vLLM without --enable-log-requests) "
            "writes none for a request it did not answer"
        )
        rest = unverified.height - unanswered
        why = f"{unanswered} of them were never answered, and {quiet}" + (
            f"; for the other {rest}, {why}" if rest else ""
        )
    return [
        Finding(
            "unverified_by_instance",
            f"{unverified.height} request(s) reached an upstream per the proxy's log but appear "
            f"in no instance log ({listed}): {why}",
        )
    ]


def _rest(facts: FindingFacts) -> list[Finding]:
    requests = facts.requests
    out = []
    # the client gave up (its own timeout or cancel): a refusal or an error is no wait
    gave_up = pl.col("late") & pl.col("outcome").cast(pl.Utf8).is_in(GAVE_UP)
    late, unknown = requests.select(
        gave_up.sum(), (~pl.col("warmup") & (pl.col("reach") == "unknown")).sum()
    ).row(0)
    if late:
        out.append(
            Finding(
                "client_timeout_shorter_than_server_latency",
                f"{late} request(s) the client gave up on were finished by the server afterwards: "
                "the client timeout is shorter than the server's latency at this load",
            )
        )
    if unknown:
        out.append(
            Finding(
                "unknown_reach",
                f"{unknown} request(s) cannot be placed: no absolute time, or outside the "
                "span every instance's log covers",
            )
        )
    if facts.unmatched:
        out.append(
            Finding(
                "unmatched_server_records",
                f"{facts.unmatched} inference record(s) in the instance logs match no client "
                "request (other clients, retries, or a client file that is missing)",
            )
        )
    return out
