"""The server-side records a client request can leave, and how far their stamps may stray."""

from __future__ import annotations

import numpy as np
import polars as pl

from logforensics import model
from logforensics.ingest.sources import address_instance

INFERENCE_PATH_RE = r"^/(?:v1/)?(?:chat/completions|completions|generate|responses)\b"
MATCH_TOLERANCE_S = 1.0  # client/server stamps of the same moment, after the offset


def seconds(col: str) -> pl.Expr:
    return pl.col(col).dt.epoch("us") / 1e6


def in_time_order(times: pl.Series, sources: pl.Series) -> bool:
    """Whether rows are sorted by time, then source, with every time known: a sort of rows
    already in order would copy every column for nothing."""
    if times.null_count():
        return False
    if times.len() < 2:
        return True
    at = times.to_physical().to_numpy()  # (a datetime as its integer)
    # compared in place (no differences: two 50 MB arrays at 20M); sources only at the ties
    tied = np.flatnonzero(at[1:] <= at[:-1])
    if not len(tied):
        return True
    if (at[tied + 1] != at[tied]).any():
        return False
    numbers = sources.to_numpy()
    return bool((numbers[tied + 1] > numbers[tied]).all())


def step_label_key() -> pl.Expr:
    """(`run`, `step`) as one integer: a window over one key, not two. The run's code (a
    category's, below 2^31 - 1; a missing run 2^31 - 1) above 33 bits; the step (an Int32) offset
    to be non-negative, a missing one 2^32. Missing ones group as they would as two keys."""
    step = (pl.col("step").cast(pl.Int64) + 2**31).fill_null(2**32)
    run = pl.col("run").cast(pl.Categorical).to_physical().cast(pl.UInt64).fill_null(2**31 - 1)
    return run * 2**33 + step.cast(pl.UInt64)


def never_connected(columns: list[str]) -> pl.Expr:
    """The client's own connect was refused (outcome ``refused``, no HTTP answer at all:
    aiohttp's ``ConnectionRefusedError(111, …)``): nothing listened, so no proxy or
    instance holds a record of it, and it reached none."""
    if "outcome" not in columns:
        return pl.lit(False)
    answered = pl.col("http_status").is_not_null() if "http_status" in columns else pl.lit(False)
    return ((pl.col("outcome") == "refused") & ~answered).fill_null(False)


# the address a refused connect names: aiohttp's "Connect call failed ('127.0.0.1', 8011)"
# (an IPv6 one's four-tuple: "('::1', 8011, 0, 0)") and "Cannot connect to host
# 127.0.0.1:8011 ssl:default" (or "::1:8011": the port is the last colon's, before the
# space), urllib3's "HTTPConnectionPool(host='…', port=8011)", aiohttp's ConnectionKey(host='…',
# port=8011, …)
REFUSED_ADDRESS_RE = (
    r"Connect call failed \('([^']+)', (\d+)(?:, \d+, \d+)?\)"
    r"|Cannot connect to host \[?([^\s\]]+?)\]?:(\d+)(?:\s|$)"
    r"|host='([^']+)', port=(\d+)"
)


def refused_address() -> pl.Expr:
    """`host:port` a never-connected request's error names (the address nothing listened
    on), else null."""
    groups = model.text("error").str.extract_groups(REFUSED_ADDRESS_RE)  # (one pass)
    found = [groups.struct.field(str(i)) for i in range(1, 7)]
    host = pl.coalesce(found[0], found[2], found[4])
    port = pl.coalesce(found[1], found[3], found[5])
    return pl.concat_str([host, pl.lit(":"), port]).alias("refused_address")


def connect_target(requests: pl.DataFrame, addresses: dict[str, list[str]]) -> pl.DataFrame:
    """`requests` with `connect_target`: the instance whose start-up lines announce the
    address the client itself says it connected to (its trace's peer), or, for a request
    that never connected, the address its error names (sent straight to the instance,
    which was not listening: it stays unreached); else null. A proxy's address is no
    instance's: through a proxy it stays null."""
    if requests.is_empty():
        return requests.with_columns(pl.lit(None, dtype=model.LABEL).alias("connect_target"))
    columns = requests.columns
    peer = pl.col("server_address") if "server_address" in columns else pl.lit(None, pl.Utf8)
    refused = refused_address() if "error" in columns else pl.lit(None, pl.Utf8)
    # only the requests that name an address (a trace's peer, a refused connect) are read:
    # the address of each of 6.6M requests at 20M was 0.2 GB of text, nearly all of it null
    read = [c for c in ("outcome", "http_status", "error", "server_address") if c in columns]
    named = (
        requests.select(pl.int_range(pl.len(), dtype=pl.UInt32).alias("_row"), *read)
        .filter(never_connected(columns) | peer.is_not_null())
        .select(
            "_row",
            pl.when(never_connected(columns))
            .then(refused)
            .otherwise(peer.cast(pl.Utf8))
            .alias("_address"),
        )
        .filter(pl.col("_address").is_not_null())
    )
    pairs = {}
    for address in named["_address"].unique().to_list():
        host, _, port = address.rpartition(":")
        pairs[address] = address_instance(host, port, addresses)
    targets = named.select(
        "_row",
        pl.col("_address")
        .replace_strict(pairs, default=None, return_dtype=pl.Utf8)
        .cast(model.LABEL)
        .alias("connect_target"),
    ).filter(pl.col("connect_target").is_not_null())
    if targets.is_empty():  # (one null, not a row of them)
        return requests.with_columns(pl.lit(None, dtype=model.LABEL).alias("connect_target"))
    return requests.with_columns(by_row(targets, requests.height)["connect_target"])


def by_row(decided: pl.DataFrame, height: int) -> pl.DataFrame:
    """`decided` (a `_row` each, at most once) laid out one row per request, nulls where none
    was decided: gathered by position, not joined on millions of keys."""
    # positions as polars gathers by (UInt32: an Int64 was cast, copied, and masked again)
    where = np.zeros(height, dtype=np.uint32)
    rows = decided["_row"].to_numpy()
    where[rows] = np.arange(decided.height, dtype=np.uint32)
    undecided = np.ones(height, dtype=bool)
    undecided[rows] = False
    # a column of nulls stays one null (gathered, 6.6M of them were 0.26 GB at 20M)
    nulls = model.null_counts(decided)
    empty = {c: t for c, t in decided.schema.items() if nulls[c] == decided.height}
    laid = decided.drop(*empty).gather(pl.Series(where).set(pl.Series(undecided), None))
    return laid.with_columns(pl.lit(None, dtype=t).alias(c) for c, t in empty.items()).select(
        decided.columns
    )


def timed_requests(requests: pl.DataFrame, *extra: pl.Expr | str) -> pl.DataFrame:
    """The requests with a start, as the matchers read them: `_row`, `ok`, `s` and `e`
    (start and end, epoch seconds) and `extra`; only those columns are copied. A request
    that never connected is none of them: a record at its time is another's."""
    return (
        requests.lazy()
        .filter(pl.col("started_at").is_not_null() & ~never_connected(requests.columns))
        .select(
            "_row", "ok", seconds("started_at").alias("s"), seconds("ended_at").alias("e"), *extra
        )
        .collect()
    )


# what the clock fit, the matching and the upstream mapping read of a record
RECORD_COLUMNS = ("instance", "at", "at_precision_s", "http_status", "source")


def is_inference_path(paths: pl.Series) -> pl.Expr:
    """Whether each of `paths` (a column of that name) is an inference call's. A log holds
    few distinct paths: each is matched once, not once a line."""
    distinct = paths.drop_nulls().unique().cast(pl.Utf8)
    return pl.col("path").is_in(distinct.filter(distinct.str.contains(INFERENCE_PATH_RE)).implode())


def inference_records(server: pl.DataFrame) -> pl.DataFrame:
    """Access lines of inference calls: the records a client request can produce, with
    the columns read of them (`RECORD_COLUMNS`; a record's other fields stay in
    `server_requests`, found by `source`)."""
    # the rows' order found on two narrow columns, then all columns gathered once
    order = (
        server.select((pl.col("event") == "access") & is_inference_path(server["path"]), "at")
        .with_row_index("_i")
        .filter(pl.col("event"))
        .sort("at", maintain_order=True)["_i"]
    )
    return server.select(RECORD_COLUMNS)[order]


ID_PREFIX_RE = r"^(?:chat)?cmpl-"
# engine-side suffixes vLLM adds to the external id: "-0" per choice, "-1f2e3d4c" internally
ID_SUFFIX_RE = r"-(?:\d+|[0-9a-f]{8})$"
LIFECYCLE_EVENTS = ("received", "finished", "aborted")


def with_request_keys(frame: pl.DataFrame, column: str = "request_id") -> pl.DataFrame:
    """Add `_key`: the id a request is known by on both sides, without vLLM's decorations.

    vLLM logs ``chatcmpl-<id>`` and, for the same request, lines with an
    engine-side suffix (``Added request chatcmpl-<id>-8d1ef5c6``). A suffix is
    cut only where the id without it is itself logged on that instance, so a
    client id that ends in digits (``lf-0001``) is never cut.
    """
    bare = pl.col(column).str.replace(ID_PREFIX_RE, "")
    keyed = frame.with_columns(bare.alias("_k0")).with_columns(
        pl.col("_k0").str.replace(ID_SUFFIX_RE, "").alias("_k1")
    )
    if "instance" not in frame.columns:
        return keyed.with_columns(pl.col("_k0").alias("_key")).drop("_k0", "_k1")
    logged = keyed.select("instance", pl.col("_k0").alias("_k1"), pl.lit(True).alias("_parent"))
    keyed = keyed.join(
        logged.drop_nulls().unique(), on=["instance", "_k1"], how="left", maintain_order="left"
    )
    cut = pl.col("_parent").fill_null(False) & (pl.col("_k0") != pl.col("_k1"))
    return keyed.with_columns(
        pl.when(cut).then(pl.col("_k1")).otherwise(pl.col("_k0")).alias("_key")
    ).drop("_k0", "_k1", "_parent")


def engine_requests(server: pl.DataFrame) -> pl.DataFrame:
    """One row per request an engine logged: its lifecycle lines grouped by id, per instance.

    vLLM with request logging writes ``Received request`` and ``Added
    request`` when a request arrives, ``Aborted request(s)`` / ``Request …
    aborted.`` when the client or the proxy hung up, and (some versions)
    ``Finished request``. A request that arrived and has no end line was still
    running when the log ended, or finished where the version logs nothing.
    """
    life = server.filter(
        pl.col("event").is_in(LIFECYCLE_EVENTS) & pl.col("request_id").is_not_null()
    )
    if life.is_empty():
        return pl.DataFrame(schema=ENGINE_REQUESTS)
    event = pl.col("event")
    return (
        with_request_keys(life)
        .sort("at", "source")
        .group_by("instance", "_key", maintain_order=True)
        .agg(
            pl.col("at").filter(event == "received").min().alias("received_at"),
            pl.col("at_precision_s").max().fill_null(0.0).alias("at_precision_s"),
            pl.col("at").filter(event == "aborted").min().alias("aborted_at"),
            pl.col("at").filter(event == "finished").min().alias("finished_at"),
            pl.col("source").alias("engine_sources"),
        )
        .rename({"_key": "engine_key"})
        .cast(ENGINE_REQUESTS)
    )


ENGINE_REQUESTS = {
    "instance": model.LABEL,
    "engine_key": pl.Utf8,
    "received_at": pl.Datetime("us", "UTC"),
    "at_precision_s": pl.Float64,
    "aborted_at": pl.Datetime("us", "UTC"),
    "finished_at": pl.Datetime("us", "UTC"),
    "engine_sources": pl.List(model.SOURCE),
}
