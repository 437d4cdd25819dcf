"""The canonical tables every parser produces and every later stage reads.

All times are UTC with microsecond resolution. Every row keeps `source`
(``file:line``) so that any number in a report can be traced back to text.
"""

from __future__ import annotations

import enum

import polars as pl

UTC_US = pl.Datetime("us", "UTC")

CLIENT_REQUESTS = {
    "run": pl.Utf8,  # the file or block the request came from
    "step": pl.Int64,  # load step as the client recorded it (None if unknown)
    "index": pl.Int64,  # request number within its step
    "started_at": UTC_US,
    "ended_at": UTC_US,
    "latency_s": pl.Float64,
    "ok": pl.Boolean,
    "http_status": pl.Int64,
    "error": pl.Utf8,
    "output_tokens": pl.Int64,
    "marker": pl.Utf8,
    "request_id": pl.Utf8,
    "warmup": pl.Boolean,
    "timeout_s": pl.Float64,  # the client's timeout, where it recorded one
    "rest_before_s": pl.Float64,  # rest the client took before this request's step
    "source": pl.Utf8,
}

SERVER_REQUESTS = {
    "instance": pl.Utf8,
    "at": UTC_US,
    "at_precision_s": pl.Float64,  # how far the true time may be from `at`
    "event": pl.Utf8,  # access | received | finished | aborted
    "method": pl.Utf8,
    "path": pl.Utf8,
    "http_status": pl.Int64,
    "peer": pl.Utf8,
    "request_id": pl.Utf8,
    "prompt_marker": pl.Utf8,
    "source": pl.Utf8,
}

ENGINE_STATS = {
    "instance": pl.Utf8,
    "at": UTC_US,
    "running": pl.Int64,
    "waiting": pl.Int64,
    "swapped": pl.Int64,
    "gpu_kv_pct": pl.Float64,
    "cpu_kv_pct": pl.Float64,
    "prompt_tps": pl.Float64,
    "gen_tps": pl.Float64,
    "prefix_hit_pct": pl.Float64,
    "source": pl.Utf8,
}

ENGINE_EVENTS = {
    "instance": pl.Utf8,
    "at": UTC_US,
    "kind": pl.Utf8,  # preempted | kv_full | oom | engine_dead | ...
    "detail": pl.Utf8,
    "source": pl.Utf8,
}

PROXY_EVENTS = {
    "at": UTC_US,
    "instance": pl.Utf8,  # where the event was logged, if known
    "kind": pl.Utf8,  # timeout | broken_pipe | conn_refused | upstream_5xx | ...
    "http_status": pl.Int64,
    "upstream": pl.Utf8,
    "detail": pl.Utf8,
    "source": pl.Utf8,
}

PROXY_REQUESTS = {
    "at": UTC_US,  # when the proxy logged the request (nginx: its end)
    "proxy": pl.Utf8,  # the log it came from
    "client": pl.Utf8,  # the peer that called the proxy
    "method": pl.Utf8,
    "path": pl.Utf8,
    "http_status": pl.Int64,  # what the proxy answered
    "upstream": pl.Utf8,  # address (or group name) the proxy tried, as logged
    "upstream_status": pl.Int64,  # what the upstream answered, if it did
    "status_origin": pl.Utf8,  # upstream | proxy | unknown: who produced http_status
    "delivery": pl.Utf8,  # reached | refused | unknown: did the request reach a backend
    "request_time_s": pl.Float64,
    "upstream_time_s": pl.Float64,
    "request_id": pl.Utf8,
    "source": pl.Utf8,
}

SCHEMAS: dict[str, dict[str, pl.DataType]] = {
    "client_requests": CLIENT_REQUESTS,
    "server_requests": SERVER_REQUESTS,
    "engine_stats": ENGINE_STATS,
    "engine_events": ENGINE_EVENTS,
    "proxy_events": PROXY_EVENTS,
    "proxy_requests": PROXY_REQUESTS,
}


def empty(table: str) -> pl.DataFrame:
    return pl.DataFrame(schema=SCHEMAS[table])


def conform(table: str, frame: pl.DataFrame) -> pl.DataFrame:
    """Give a parser's frame exactly the canonical columns, in order, with their dtypes."""
    schema = SCHEMAS[table]
    columns = []
    for name, dtype in schema.items():
        if name in frame.columns:
            columns.append(pl.col(name).cast(dtype))
        else:
            columns.append(pl.lit(None, dtype=dtype).alias(name))
    return frame.select(columns)


class Bottleneck(str, enum.Enum):
    """The verdict values scripts rely on (a contract: see README)."""

    FRONT_PROXY = "front_proxy"
    KV_CACHE = "kv_cache"
    GPU = "gpu"
    NONE = "none"
    INCONCLUSIVE = "inconclusive"
