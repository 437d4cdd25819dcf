"""Preemption beyond the KV verdict: a request preempted again and again (its work
recomputed each time), and preemptions that were no KV shortage (priority churn)."""

from __future__ import annotations

import polars as pl

from logforensics.diagnose import Finding
from logforensics.findings.base import FindingFacts, Kind
from logforensics.model import source_labels

KINDS = {
    "preempted_repeatedly": Kind(
        advice="A request preempted many times recomputes its prompt each time (vLLM preempts "
        "by recompute): lower max_num_seqs so fewer sequences compete for the KV cache, or "
        "give long requests their own pool."
    ),
    "preemptions_not_kv": Kind(
        severity="info",
        advice="Priority preemptions evict lower-priority requests for higher ones "
        "(--scheduling-policy priority): they are not a KV shortage; check the priorities "
        "the clients send.",
    ),
}
# the id a per-request preemption line names: vLLM PR #42827's "Preempting request <id>: N
# computed tokens lost …", V0's "Sequence group <id> is preempted by PreemptionMode…"
REQUEST_ID_RE = r"Preempting request (\S+?):|Sequence group (\S+) is preempted"
REPEATED = 2  # preemptions of one request that make it worth naming
NAMED = 5  # requests named in the finding
NOT_KV = {"preempted_priority": "for priority", "preempted_cache_reset": "by a prefix-cache reset"}


# the histogram's event (`ingest.metrics`): "<metric> = N (…)", N cumulative
HISTOGRAM_COUNT_RE = r"= (\d+) \("


def find(facts: FindingFacts) -> list[Finding]:
    return (_repeated(facts.events) or _repeated_uncounted(facts.events)) + _not_kv(facts.events)


def _repeated(events: pl.DataFrame) -> list[Finding]:
    ids = events.filter(pl.col("kind") == "preempted").with_columns(
        pl.coalesce(
            pl.col("detail").str.extract(REQUEST_ID_RE, 1),
            pl.col("detail").str.extract(REQUEST_ID_RE, 2),
        ).alias("request")
    )
    counted = (
        ids.filter(pl.col("request").is_not_null())
        .group_by("instance", "request")
        .agg(pl.len().alias("n"), pl.col("source").sort_by("at"))
        .filter(pl.col("n") >= REPEATED)
        .sort(["n", "instance", "request"], descending=[True, False, False])
    )
    if counted.is_empty():
        return []
    named = counted.head(NAMED)
    text = ", ".join(f"{r} {n}× on {i}" for i, r, n, _ in named.iter_rows())
    more = f" and {counted.height - NAMED} more" if counted.height > NAMED else ""
    sources = [label for ids_ in named["source"] for label in source_labels(pl.Series(ids_))]
    return [
        Finding(
            "preempted_repeatedly",
            f"{counted.height} request(s) were preempted {REPEATED} or more times: {text}{more}",
            sources=sources[:20],
        )
    ]


def _repeated_uncounted(events: pl.DataFrame) -> list[Finding]:
    """Without per-request lines, vLLM's `request_num_preemptions` histogram still counts
    the finished requests preempted 2+ times, per instance, by its last scrape."""
    rows = events.filter(pl.col("kind") == "preempted_repeatedly").sort("at", nulls_last=True)
    if rows.is_empty():
        return []
    last = (
        rows.group_by("instance", maintain_order=True)
        .agg(pl.col("detail").last().str.extract(HISTOGRAM_COUNT_RE, 1).cast(pl.Int64))
        .sort("instance")
    )
    parts = ", ".join(f"{n} on {instance}" for instance, n in last.iter_rows())
    return [
        Finding(
            "preempted_repeatedly",
            f"finished requests preempted {REPEATED} or more times, by each instance's last "
            f"scrape (vllm:request_num_preemptions, cumulative since it started; no request "
            f"ids): {parts}",
            sources=source_labels(rows["source"])[-20:],
        )
    ]


def _not_kv(events: pl.DataFrame) -> list[Finding]:
    rows = events.filter(pl.col("kind").is_in(list(NOT_KV)))
    if rows.is_empty():
        return []
    last = (
        rows.sort("at", nulls_last=True)
        .group_by("kind", "instance")
        .agg(pl.col("detail").last())
        .sort("kind", "instance")
    )
    parts = [
        f"{NOT_KV[kind]} on {instance}: {detail}" for kind, instance, detail in last.iter_rows()
    ]
    return [
        Finding(
            "preemptions_not_kv",
            "the engine preempted without a KV shortage: " + "; ".join(parts),
            sources=source_labels(rows.sort("at", nulls_last=True)["source"])[:20],
        )
    ]
