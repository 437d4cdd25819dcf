"""The hop ledger: for each request, what every witness saw, in the order it passed them.

One row per request, built with joins over the analysis' tables (no loop over
rows: a bench run has millions), in four groups of columns:

* ``client_*`` — what the load tester recorded: sent at, ended at, latency,
  outcome class, HTTP status, error text, and its own line;
* ``proxy_*`` — the proxy's line for it: when, the status it answered, the
  upstream it tried and what that answered, whether it reached it, what the
  line says happened (`proxy_event`: timeout, no_live_upstream, …), the
  proxy's times, and its error-log lines for the request;
* ``instance_*`` / ``engine_*`` — the instance that logged it: the matched
  line (access or lifecycle), its time and status, how it was matched, and
  the engine's lifecycle lines (received, aborted, finished);
* the conclusion — `reach` (reached / unreached / unknown), the instance it
  reached, the witness that decided (`reach_witness`), and for a failure the
  hop it died at (`failed_at`).

Sources stay Int64 ids in the frame (8 bytes a row); `write_ledger` writes them
as ``file:line`` text. Each side's times are on its own clock, as logged.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from logforensics import model
from logforensics.analysis import Analysis
from logforensics.correlate.attribute import clock_disputed
from logforensics.correlate.reach import client_outcome, failed_at

SOURCE_COLUMNS = ("client_source", "proxy_source", "instance_source")
SOURCE_LIST_COLUMNS = ("proxy_error_sources", "engine_sources")
LEDGER_FORMATS = (".parquet", ".csv", ".jsonl", ".ndjson")
LIST_SEPARATOR = "; "  # between sources in one CSV cell

# Where a failed request died, in the words the report uses.
FAILED_AT = {
    "proxy": "at the proxy",
    "instance": "after reaching an instance",
    "before_instance": "before any instance",
    "unknown": "unknown",
}

# a measured request that did not succeed — it failed, or its outcome is unknown (ok null) —
# in the requests frame, and in the ledger
NOT_OK = ~pl.col("warmup") & ~pl.col("ok").fill_null(False)
NOT_OK_ROW = ~pl.col("warmup") & ~pl.col("client_ok").fill_null(False)


REACHED_BY = ("reached_instance", "instance", "proxy_instance")  # what correlation named
DISPUTED_BY = ("instance_at_offset", "instance_at_rival")  # an ambiguous clock's two answers


def _list_of_sources(frame: pl.DataFrame, column: str) -> pl.Expr:
    """A List[Int64] source column the correlation stage gives, or empty lists before it does."""
    if column in frame.columns:
        return pl.col(column).cast(pl.List(model.SOURCE))
    return pl.lit([], dtype=pl.List(model.SOURCE)).alias(column)


def _lines_cited(table: pl.DataFrame, cited: pl.Series, *columns: pl.Expr) -> pl.DataFrame:
    """`columns` (the source first) of the table's rows whose source is cited, one row a source."""
    wanted = pl.DataFrame({"source": cited.drop_nulls().unique()}, schema={"source": model.SOURCE})
    picked = table.join(wanted, on="source", how="semi").select(*columns)
    return picked.unique(picked.columns[0], keep="first", maintain_order=True)


def _kinds_of(
    rows: pl.DataFrame, column: str, lookup: pl.DataFrame, kind: str, alias: str
) -> pl.DataFrame:
    """For each row (`_row`), the `kind` of every source in its list column, joined with ", "."""
    exploded = rows.select("_row", column).explode(column).drop_nulls(column)
    if exploded.is_empty():
        return rows.select("_row").with_columns(pl.lit(None, dtype=pl.Utf8).alias(alias))
    named = exploded.join(
        _lines_cited(lookup, exploded[column], pl.col("source").alias(column), pl.col(kind)),
        on=column,
        how="left",
        maintain_order="left",
    )
    return (
        named.group_by("_row")
        .agg(pl.col(kind).cast(pl.Utf8).drop_nulls().unique(maintain_order=True))
        .select("_row", pl.col(kind).list.join(", ").alias(alias))
    )


def build_ledger(analysis: Analysis, which: pl.Expr | None = None) -> pl.DataFrame:
    """The ledger of every request (or of those `which` selects), in time order."""
    requests = analysis.requests
    if which is not None:
        requests = requests.filter(which)
    requests = requests.with_columns(
        _list_of_sources(requests, "engine_sources"),
        _list_of_sources(requests, "proxy_error_sources"),
    )
    tables = analysis.tables
    rows = requests.with_row_index("_row")
    proxy_lines = _lines_cited(
        tables["proxy_requests"],
        rows["proxy_source"],
        pl.col("source").alias("proxy_source"),
        pl.col("at").alias("proxy_at"),
        pl.col("upstream_status").alias("proxy_upstream_status"),
        pl.col("request_time_s").alias("proxy_request_time_s"),
        pl.col("upstream_time_s").alias("proxy_upstream_time_s"),
    )
    proxy_verdicts = _lines_cited(
        tables["proxy_events"],
        rows["proxy_source"],
        pl.col("source").alias("proxy_source"),
        pl.col("kind").alias("proxy_event"),
    )
    instance_lines = _lines_cited(
        tables["server_requests"],
        rows["server_source"],
        pl.col("source").alias("server_source"),
        pl.col("at").alias("instance_at"),
        pl.col("event").alias("instance_event"),
        pl.col("http_status").alias("instance_status"),
    )
    engine_events = _kinds_of(
        rows, "engine_sources", tables["server_requests"], "event", "engine_events"
    )
    proxy_errors = _kinds_of(
        rows, "proxy_error_sources", tables["proxy_events"], "kind", "proxy_error_kinds"
    )
    joined = (
        rows.join(proxy_lines, on="proxy_source", how="left", maintain_order="left")
        .join(proxy_verdicts, on="proxy_source", how="left", maintain_order="left")
        .join(instance_lines, on="server_source", how="left", maintain_order="left")
        .join(engine_events, on="_row", how="left", maintain_order="left")
        .join(proxy_errors, on="_row", how="left", maintain_order="left")
    )
    # the instance the strongest witness names, else the proxy's upstream address as logged
    reached_instance = (
        pl.when(pl.col("reach") == "reached")
        .then(pl.coalesce(*(c for c in REACHED_BY if c in joined.columns), "proxy_upstream"))
        .alias("reached_instance")
    )
    # an ambiguous clock's two offsets placed it at different instances: both, best's first
    clock_candidates = (
        pl.when(clock_disputed(joined))
        .then(
            pl.concat_str(
                *(pl.col(c).cast(pl.Utf8).fill_null("none") for c in DISPUTED_BY),
                separator=" or ",
            )
        )
        .alias("clock_candidates")
    )
    return joined.select(
        pl.col("run").cast(pl.Utf8),
        "step",
        "index",
        "warmup",
        "request_id",
        "marker",
        pl.col("started_at").alias("client_sent_at"),
        pl.col("ended_at").alias("client_ended_at"),
        pl.col("latency_s").alias("client_latency_s"),
        pl.col("ok").alias("client_ok"),
        client_outcome(joined.columns),
        pl.col("http_status").alias("client_http_status"),
        model.text("error").alias("client_error"),
        pl.col("source").alias("client_source"),
        "proxy_at",
        "proxy_status",
        "proxy_upstream",
        "proxy_upstream_status",
        "proxy_instance",
        "proxy_delivery",
        "proxy_event",
        "proxy_request_time_s",
        "proxy_upstream_time_s",
        "proxy_source",
        "proxy_error_kinds",
        "proxy_error_sources",
        "instance",
        "instance_at",
        "instance_event",
        "instance_status",
        pl.col("match_key").alias("instance_match_key"),
        pl.col("ambiguous").alias("instance_ambiguous"),
        clock_candidates,
        pl.col("late").alias("instance_finished_after_client_gave_up"),
        pl.col("server_source").alias("instance_source"),
        "engine_events",
        "engine_sources",
        "reach",
        reached_instance,
        "reach_witness",
        failed_at(),
    ).sort("client_sent_at", "client_source", nulls_last=True, maintain_order=True)


def with_source_labels(ledger: pl.LazyFrame) -> pl.LazyFrame:
    """Every source id as `file:line` text (lists stay lists)."""
    return ledger.with_columns(
        *(model.source_label(c) for c in SOURCE_COLUMNS),
        *(
            pl.col(c).list.eval(model.source_label(""), parallel=False).alias(c)
            for c in SOURCE_LIST_COLUMNS
        ),
    )


def write_ledger(ledger: pl.DataFrame, path: Path) -> None:
    """The ledger as Parquet, CSV (flat: lists joined with "; ") or JSON lines, by extension."""
    suffix = path.suffix.lower()
    if suffix not in LEDGER_FORMATS:
        raise ValueError(f"{path}: the ledger is written as {', '.join(LEDGER_FORMATS)}")
    labelled = with_source_labels(ledger.lazy())
    path.parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".parquet":
        labelled.sink_parquet(path)
    elif suffix == ".csv":
        labelled.with_columns(
            pl.col(c).list.join(LIST_SEPARATOR) for c in SOURCE_LIST_COLUMNS
        ).sink_csv(path, datetime_format="%Y-%m-%dT%H:%M:%S%.6fZ")
    else:
        labelled.sink_ndjson(path)
