"""`instance_failure`: an instance died or restarted during the test.

Its signs: its log stops while another instance's goes on (SIGKILL and the
OOM killer leave no line at all), or it prints an engine-death, out-of-memory,
`Killed` or restart banner during the test; then the proxy cannot reach it
(connection refused, premature close, reset, naming its address). A failed
request is explained here when it went to that instance at or after the
moment it failed, until it next served a request, or when the proxy logged
one of those errors naming its upstream during the request's window. These
outrank the other causes: a refused connect to a dead instance is not the
proxy's limit, a request cut off by the death is not the KV cache's.

A death the proxy's retries hid (every request succeeded: nginx resent the dead
instance's in-flight requests elsewhere) is still a death: the proxy logged
losing or failing to reach the instance during the test, and its log stopped
or it printed a death banner, or requests that had reached it were retried on
another (`hidden_death`). It claims no failure; the verdict takes it where no
request failed (`verdict`), with what the retries cost in latency.
"""

from __future__ import annotations

import datetime as dt

import polars as pl

from logforensics import model
from logforensics.diagnose import kept_in_pool
from logforensics.diagnose.evidence import Rule, RuleResult, Signal
from logforensics.diagnose.facts import Facts, at_text, labels
from logforensics.diagnose.thresholds import Thresholds
from logforensics.model import Bottleneck, source_labels

DEATH_KINDS = ["engine_dead", "oom", "killed", "restart"]
# the proxy could not reach the upstream, or it hung up mid-request
UPSTREAM_DOWN_KINDS = [
    "conn_refused",
    "conn_failed",
    "upstream_closed",
    "conn_reset",
    "upstream_reset",
    "server_down",
]
STAMP_SLACK = dt.timedelta(seconds=1)  # vLLM's own stamps are whole seconds

STOPPED = Signal(
    "instance_log_stopped",
    "The instance's log stopped before the test's end while another instance's went on",
    0.5,
    "ends ≥ {log_silence_s:g} s early",
)
DIED = Signal(
    "engine_died",
    "The instance printed an engine-death, out-of-memory, Killed or restart banner during the test",
    0.6,
    "during the test",
)
UNREACHABLE = Signal(
    "proxy_could_not_reach_the_instance",
    "The proxy logged refused, closed or reset connections naming the instance, near a failed request sent there",
    0.5,
    "> 0 within {proxy_window_s:g} s",
)
LOST = Signal(
    "proxy_lost_the_instance",
    "The proxy logged refused, closed or reset connections naming the instance during the test "
    "(no request failed)",
    0.5,
    "> 0",
)
RETRIED_AWAY = Signal(
    "requests_retried_away",
    "Requests that reached the instance were resent by the proxy to another, which answered "
    "(no request failed)",
    0.3,
    "> 0",
)
REFUSED = Signal(
    "refused_while_down",
    "Requests sent straight to the instance's address were refused at connect after it "
    "failed: nothing listened there",
    0.5,
    "> 0",
)
ABORTED = Signal(
    "in_flight_aborted",
    "The engine aborted the requests in flight as it stopped, and failed requests were cut "
    "short then",
    0.3,
    "> 0 within {proxy_window_s:g} s",
)
AFTER = Signal(
    "failures_on_it_after_it_failed",
    "Failed requests sent to the instance at or after it failed, until it served again",
    0.4,
    "> 0",
)


def last_lines(facts: Facts) -> pl.DataFrame:
    """Each instance's last sign of life: its log's end, and the last line read in it."""

    # each table's last row per instance, then the last of those; of rows stamped alike,
    # the later line (the larger source). Grouped whole and filtered after, by a sort's
    # first row: polars finds it without copying the rows (a filter first, or an arg_max,
    # copied every access line's instance, time and source: 0.2 GB at 20M lines, 1.4 GB
    # at 150M)
    def last_of(frame: pl.LazyFrame, at: str, source: str) -> pl.LazyFrame:
        return frame.group_by("instance").agg(
            pl.col(at).max().alias("last_row_at"),
            pl.col(source)
            .sort_by(at, source, descending=True, nulls_last=True)
            .first()
            .alias("last_source"),
        )

    each = [last_of(f.lazy(), "at", "source") for f in (facts.server, facts.stats, facts.events)]
    last = (
        last_of(pl.concat(each), "last_row_at", "last_source")
        .filter(pl.col("last_row_at").is_not_null() & pl.col("instance").is_in(facts.instances))
        .collect()
    )
    ends = pl.DataFrame(
        {
            "instance": list(facts.coverage),
            "log_end": [b for _, b in facts.coverage.values()],
        },
        schema={"instance": model.LABEL, "log_end": pl.Datetime("us", "UTC")},
    )
    return last.join(ends, on="instance", how="left").with_columns(
        pl.max_horizontal("last_row_at", "log_end").alias("last_at")
    )


def failure_moments(facts: Facts, t: Thresholds) -> pl.DataFrame:
    """instance, failed_at, how ("log_stopped" / "banner"), source, detail: when each
    instance that failed during the test did."""
    test_end = facts.test_end()
    test_start = facts.measured["w_start"].min()
    if test_end is None:
        return pl.DataFrame(
            schema={
                "instance": model.LABEL,
                "failed_at": pl.Datetime("us", "UTC"),
                "how": pl.Utf8,
                "source": pl.Int64,
                "detail": pl.Utf8,
            }
        )
    silence = dt.timedelta(seconds=t.log_silence_s)
    last = last_lines(facts)
    latest = last["last_at"].max()
    stopped = last.filter(
        (pl.col("last_at") < test_end - silence) & (pl.lit(latest) >= pl.col("last_at") + silence)
    ).select(
        "instance",
        pl.col("last_at").alias("failed_at"),
        pl.lit("log_stopped").alias("how"),
        pl.col("last_source").alias("source"),
        pl.lit(None, dtype=pl.Utf8).alias("detail"),
    )
    banners = facts.events.filter(
        pl.col("kind").is_in(DEATH_KINDS)
        & (pl.col("at") >= test_start)
        & (pl.col("at") <= test_end)
        & pl.col("instance").is_in(facts.instances)
    ).select(
        "instance",
        pl.col("at").alias("failed_at"),
        pl.lit("banner").alias("how"),
        "source",
        pl.format("{}: {}", pl.col("kind"), pl.col("detail").str.slice(0, 160)).alias("detail"),
    )
    return pl.concat([stopped, banners]).sort("failed_at")


def _after_death(facts: Facts, moments: pl.DataFrame) -> pl.Series:
    """Failures that went to an instance at or after it failed, before it served again."""
    first = moments.group_by("instance").agg(pl.col("failed_at").min())
    # (only the columns read here: a filter or join copies every column it is given)
    served_again = (
        facts.measured.select("target", "w_start", "ok")
        .filter(pl.col("ok").eq(True))
        .join(first, left_on="target", right_on="instance")
        .filter(pl.col("w_start") > pl.col("failed_at"))
        .group_by("target")
        .agg(pl.col("w_start").min().alias("recovered_at"))
    )
    hit = (
        facts.failures.select("fid", "target", "w_start", "w_end")
        .join(first, left_on="target", right_on="instance")
        .join(served_again, on="target", how="left")
        .filter(
            (pl.col("w_end") >= pl.col("failed_at") - STAMP_SLACK)
            & (pl.col("recovered_at").is_null() | (pl.col("w_start") < pl.col("recovered_at")))
        )["fid"]
    )
    return facts.failures.select(pl.col("fid").is_in(hit.implode()).alias("c"))["c"]


def _unreachable(facts: Facts, t: Thresholds) -> tuple[pl.Series, pl.DataFrame]:
    """Failures whose upstream the proxy could not reach during their window, and those
    proxy errors."""
    errors = facts.proxy_events.filter(
        pl.col("kind").is_in(UPSTREAM_DOWN_KINDS)
        & pl.col("upstream").is_not_null()
        & pl.col("at").is_not_null()
    ).sort("at")
    timed = facts.failures.filter(
        pl.col("proxy_upstream").is_not_null() & pl.col("w_start").is_not_null()
    )
    if errors.is_empty() or timed.is_empty():
        return facts.no_claims(), errors.clear()
    pad = dt.timedelta(seconds=t.proxy_window_s)
    nearest = (
        timed.select("fid", "proxy_upstream", (pl.col("w_start") - pad).alias("from"), "w_end")
        .sort("from")
        .join_asof(
            errors.select(
                pl.col("upstream").cast(model.LABEL).alias("proxy_upstream"),
                pl.col("at").alias("err_at"),
            ),
            left_on="from",
            right_on="err_at",
            by="proxy_upstream",
            strategy="forward",
            check_sortedness=False,  # sorted by `from` as a whole, so within each upstream too
        )
        .filter(pl.col("err_at") <= pl.col("w_end") + pad)
    )
    hit = facts.failures.select(pl.col("fid").is_in(nearest["fid"].implode()).alias("c"))["c"]
    upstreams = facts.failures.filter(hit)["proxy_upstream"].unique()
    return hit, errors.filter(pl.col("upstream").is_in(upstreams.implode()))


def _retried_away(facts: Facts, name: str) -> pl.DataFrame:
    """Measured requests an attempt of which reached `name` before the proxy retried them."""
    return facts.measured.filter(
        pl.col("proxy_also_reached")
        .cast(pl.Utf8)
        .str.split(", ")
        .list.contains(name)
        .fill_null(False)
    )


def hidden_death(facts: Facts, t: Thresholds) -> RuleResult:
    """An instance that failed during the test while no request failed. Claims nothing; its
    evidence is the verdict's where all succeeded.

    Two witnesses of three, one of them the proxy's: the proxy logged losing or failing
    to reach it (`lost`), requests that had reached it were retried on another (`away`),
    and its log stopped or it printed a death banner no later than that (`own`; a log
    that stops long after is an idle engine's). One alone is not enough: a retry after
    a slow answer (504) is no death, nor an idle engine's silence.
    """
    end, start = facts.test_end(), facts.measured["w_start"].min()
    nothing = RuleResult(Bottleneck.INSTANCE_FAILURE, facts.no_claims())
    if end is None or start is None:
        return nothing
    pad = dt.timedelta(seconds=t.proxy_window_s)
    errors = facts.proxy_events.filter(
        pl.col("kind").is_in(UPSTREAM_DOWN_KINDS)
        & pl.col("upstream").is_not_null()
        & pl.col("at").is_between(start - pad, end + pad)
    ).sort("at")
    who_errors = errors.select(
        pl.col("upstream")
        .cast(pl.Utf8)
        .replace_strict(facts.upstream_instances, default=pl.col("upstream").cast(pl.Utf8))
    ).to_series()
    hops = facts.measured["proxy_also_reached"].drop_nulls().cast(pl.Utf8).str.split(", ").explode()
    moments = failure_moments(facts, t)
    evidence, who = [], []
    for name in pl.concat([who_errors, hops]).unique(maintain_order=True).to_list():
        lost = errors.filter(who_errors == name)
        away = _retried_away(facts, name)
        until = lost["at"].min() if lost.height else away["w_end"].max()
        own = moments.filter(
            (pl.col("instance") == name) & (pl.col("failed_at") <= until + STAMP_SLACK)
        )
        if (lost.height > 0) + (away.height > 0) + (own.height > 0) < 2:
            continue
        who.append(name)
        for row in own.filter(pl.col("how") == "log_stopped").iter_rows(named=True):
            evidence.append(
                STOPPED.fired(
                    _stopped_text(facts, row), t, source_labels(pl.Series([row["source"]]))
                )
            )
        banners = own.filter(pl.col("how") == "banner")
        if banners.height:
            first = banners.row(0, named=True)
            evidence.append(
                DIED.fired(
                    f"{name} at {at_text(first['failed_at'])}: {first['detail']}",
                    t,
                    labels(banners.rename({"failed_at": "at"})),
                )
            )
        if lost.height:
            evidence.append(LOST.fired(_errors_text(facts, lost), t, labels(lost)))
        if away.height:
            evidence.append(
                RETRIED_AWAY.fired(
                    _retried_text(facts, name, away), t, labels(away, "proxy_source")
                )
            )
    if not who:
        return nothing
    return RuleResult(
        Bottleneck.INSTANCE_FAILURE, facts.no_claims(), evidence, subject=", ".join(who)
    )


def _retried_text(facts: Facts, name: str, away: pl.DataFrame) -> str:
    """How many requests the proxy resent from `name`, and the latency they paid against
    the same steps' requests that were not retried."""
    retried_any = facts.measured.filter((pl.col("proxy_attempts") > 1).fill_null(False))
    steps = away["step"].unique().implode()
    others = facts.measured.filter(
        pl.col("step").is_in(steps)
        & pl.col("ok").eq(True)
        & ~(pl.col("proxy_attempts") > 1).fill_null(False)
    )["latency_s"]
    lat = away.filter(pl.col("ok").eq(True))["latency_s"].drop_nulls()
    text = (
        f"{away.height} request(s) reached {name} and were resent by the proxy to another "
        f"instance ({retried_any.height} retried in all)"
    )
    if lat.len() and others.drop_nulls().len():
        base = others.median()
        text += (
            f"; their latency {lat.min():.2f}–{lat.max():.2f} s against a median {base:.2f} s "
            f"for the same steps' requests not retried (+{lat.median() - base:.2f} s)"
        )
    return text


def evaluate(facts: Facts, t: Thresholds) -> RuleResult:
    if not facts.failed:
        return hidden_death(facts, t)
    moments = failure_moments(facts, t)
    after = _after_death(facts, moments)
    unreachable, errors = _unreachable(facts, t)
    claimed = after | unreachable
    mine = facts.failures.filter(claimed).with_columns(
        pl.coalesce(
            pl.col("target"),
            pl.col("proxy_upstream").replace_strict(
                facts.upstream_instances, default=None, return_dtype=pl.Utf8
            ),
            pl.col("proxy_upstream"),
        ).alias("who")
    )
    if mine.is_empty():
        return RuleResult(Bottleneck.INSTANCE_FAILURE, claimed)
    who = mine["who"].drop_nulls().unique().sort().to_list()
    if mine["target"].is_not_null().all():  # else an address no log names: all are context
        moments = moments.filter(pl.col("instance").is_in(mine["target"].unique().implode()))
    evidence = []
    for row in moments.filter(pl.col("how") == "log_stopped").iter_rows(named=True):
        evidence.append(
            STOPPED.fired(_stopped_text(facts, row), t, source_labels(pl.Series([row["source"]])))
        )
    banners = moments.filter(pl.col("how") == "banner")
    if banners.height:
        first = banners.row(0, named=True)
        evidence.append(
            DIED.fired(
                f"{first['instance']} at {at_text(first['failed_at'])}: {first['detail']}"
                + (f" (+{banners.height - 1} more)" if banners.height > 1 else ""),
                t,
                labels(banners.rename({"failed_at": "at"})),
            )
        )
    if errors.height:
        evidence.append(UNREACHABLE.fired(_errors_text(facts, errors), t, labels(errors)))
    refused = mine.filter(pl.col("connect_target").is_not_null() & (pl.col("reach") == "unreached"))
    if refused.height:
        evidence.append(REFUSED.fired(_refused_text(refused), t, labels(refused)))
    evidence += _aborted(facts, mine, t)
    evidence.append(AFTER.fired(_after_text(facts, mine, moments), t, labels(mine)))
    missing = [
        f"which instance {address} is (--upstream {address}=NAME), to name the instance that failed"
        for address in who
        if address not in facts.instances and address not in facts.upstream_instances
    ]
    findings = kept_in_pool.findings(mine, moments, errors, t)
    return RuleResult(
        Bottleneck.INSTANCE_FAILURE,
        claimed,
        evidence,
        subject=", ".join(who) or None,
        missing=missing,
        findings=findings,
    )


def _refused_text(refused: pl.DataFrame) -> str:
    who = ", ".join(refused["connect_target"].drop_nulls().unique().sort().to_list())
    fast = refused["latency_s"].drop_nulls()
    took = f", each within {fast.max() * 1000:.0f} ms" if fast.len() else ""
    return (
        f"{refused.height} request(s) refused at connect by {who}'s address from "
        f"{at_text(refused['w_start'].min())} to {at_text(refused['w_start'].max())}{took} "
        "(the client's own error: connection refused, no HTTP answer)"
    )


def _aborted(facts: Facts, mine: pl.DataFrame, t: Thresholds) -> list:
    """The engine's own count of the requests it aborted as it stopped, beside the failed
    requests that reached it and ended within `proxy_window_s` of that line."""
    pad = dt.timedelta(seconds=t.proxy_window_s)
    aborts = facts.events.filter(
        (pl.col("kind") == "aborted") & pl.col("instance").is_in(mine["who"].drop_nulls().implode())
    )
    out = []
    for row in aborts.sort("at").iter_rows(named=True):
        cut = mine.filter(
            (pl.col("reach") == "reached")
            & (pl.col("who") == row["instance"])
            & pl.col("w_end").is_between(row["at"] - pad, row["at"] + STAMP_SLACK + pad)
        )
        if cut.is_empty():
            continue
        out.append(
            ABORTED.fired(
                f"{row['instance']} at {at_text(row['at'])}: {row['detail']}; {cut.height} failed "
                f"request(s) that reached it ended then ({_outcomes(cut)})",
                t,
                [*labels(pl.DataFrame([row])), *labels(cut)],
            )
        )
    return out


def _outcomes(frame: pl.DataFrame) -> str:
    texts = (
        frame["error"]
        .drop_nulls()
        .cast(pl.Utf8)
        .str.slice(0, 90)
        .unique(maintain_order=True)
        .to_list()
    )
    return "; ".join(texts[:3]) + (f"; +{len(texts) - 3} more" if len(texts) > 3 else "")


def _stopped_text(facts: Facts, row: dict) -> str:
    end = facts.test_end()
    others = [(name, b) for name, (_, b) in facts.coverage.items() if name != row["instance"] and b]
    other = max(others, key=lambda x: x[1]) if others else None
    text = (
        f"{row['instance']}'s log ends at {at_text(row['failed_at'])}, "
        f"{(end - row['failed_at']).total_seconds():.0f} s before the test's last request ended"
    )
    return text + (f", while {other[0]}'s went on until {at_text(other[1])}" if other else "")


def _errors_text(facts: Facts, errors: pl.DataFrame) -> str:
    parts = []
    for upstream, group in errors.group_by("upstream", maintain_order=True):
        kinds = ", ".join(
            f"{k}×{n}" for k, n in group.group_by("kind").len().sort("kind").iter_rows()
        )
        name = facts.upstream_instances.get(upstream[0])
        label = f"{upstream[0]} ({name})" if name else upstream[0]
        parts.append(f"{kinds} naming {label}, first at {at_text(group['at'].min())}")
    return "; ".join(parts)


def _after_text(facts: Facts, mine: pl.DataFrame, moments: pl.DataFrame) -> str:
    first = moments["failed_at"].min() if moments.height else None
    where = ", ".join(mine["who"].drop_nulls().unique().sort().to_list())
    text = f"{mine.height} of {facts.failed} failed requests went to {where}"
    if first is None:
        return text + " while the proxy could not reach it"
    # a whole-second stamp may stand for any moment of its second
    slack = STAMP_SLACK if first.microsecond == 0 else dt.timedelta(0)
    in_flight = mine.filter(pl.col("w_start") <= first + slack).height
    return (
        text + f" at or after {at_text(first)}: {in_flight} in flight then, "
        f"{mine.height - in_flight} sent afterwards"
    )


RULE = Rule(
    bottleneck=Bottleneck.INSTANCE_FAILURE,
    headline="An instance failed",
    summary="{subject} failed during the test, and {claimed} of {failed} failed requests went to it at or after that moment",
    signals=(STOPPED, DIED, UNREACHABLE, REFUSED, ABORTED, AFTER, LOST, RETRIED_AWAY),
    recommendations=(
        "Find why the instance died: the host's kernel log (dmesg: the OOM killer), the "
        "container's exit code and restart count, and the instance's own log before its last line.",
        "Give the balancer health checks so a dead instance leaves the pool (nginx max_fails / "
        "fail_timeout, HAProxy `check`, Envoy outlier detection), and retry a failed connect on "
        "another instance (nginx proxy_next_upstream error timeout http_502).",
        "Run instances under a supervisor that restarts them and keeps their stdout "
        "(systemd/journald, Kubernetes), so the cause of death is on record.",
    ),
    evaluate=evaluate,
    outranks=(Bottleneck.FRONT_PROXY, Bottleneck.KV_CACHE, Bottleneck.GPU),
)
