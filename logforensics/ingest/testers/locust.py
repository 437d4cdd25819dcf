"""Locust ``--csv`` files: aggregates only."""

from __future__ import annotations

import polars as pl

from logforensics.ingest import register_file_format
from logforensics.ingest.base import (
    FileFormat,
    ParseContext,
    ParseResult,
    Sample,
    SourceFile,
)
from logforensics.ingest.toolkit import (
    NOTE_EXAMPLES,
    finish_requests,
    first_column,
    iso_text,
    place_on_clock,
    placeholders,
    seconds_to_utc,
    to_seconds,
)

# ---------------------------------------------------------------- Locust --csv

LOCUST_HEADERS = {
    "stats": ("Type,Name,Request Count,Failure Count", "Method,Name,# requests,# failures"),
    "history": ("Timestamp,User Count,",),
    "failures": ("Method,Name,Error,Occurrences", "Method,Name,Error,Occurences"),
    "exceptions": ("Count,Message,Traceback,Nodes",),
}


def _locust_kind(header: str) -> str | None:
    plain = header.replace('"', "").strip()
    for kind, starts in LOCUST_HEADERS.items():
        if any(plain.startswith(s) for s in starts):
            return kind
    return None


@register_file_format
class LocustCsv(FileFormat):
    """Locust ``--csv PREFIX`` files: per-endpoint and per-second aggregates, no requests."""

    name = "locust_csv"
    priority = 16
    samples = (
        Sample(
            "locust/stats.py StatsCSV requests_csv_columns; values invented",
            file="locust_stats.csv",
        ),
    )
    role = "client"

    def sniff(self, head: list[str]) -> bool:
        return _locust_kind(head[0]) is not None

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        lines = source.lines
        result = ParseResult(lines=lines.height, formats=[self.name])
        kind = _locust_kind(source.head(1)[0])
        try:
            table = pl.read_csv(
                source.raw, infer_schema_length=0, truncate_ragged_lines=True, ignore_errors=True
            )
        except Exception as exc:  # an empty or hopeless CSV
            result.notes.append(f"CSV not readable ({exc}); nothing read")
            result.set_unparsed(lines)
            return result
        table.columns = [c.strip() for c in table.columns]
        blank = lines.filter(pl.col("text").str.strip_chars() == "").height
        result.noise = 1 + blank  # the header
        if kind == "exceptions":  # tracebacks span lines: every line is part of a row
            result.parsed = lines.height - result.noise
            result.notes.append(f"{table.height} distinct exception(s) recorded by Locust")
            return result
        result.parsed = min(table.height, lines.height - result.noise)
        if result.unparsed:
            result.set_unparsed(lines.tail(result.unparsed))
        getattr(self, f"_{kind}")(table, source, result, ctx)
        return result

    @staticmethod
    def _num(table: pl.DataFrame, *names: str) -> pl.Expr:
        return first_column(table, *names, dtype=pl.Utf8).cast(pl.Float64, strict=False)

    def _stats(
        self, table: pl.DataFrame, source: SourceFile, result: ParseResult, ctx: ParseContext
    ) -> None:
        name = first_column(table, "Name", dtype=pl.Utf8)
        count = self._num(table, "Request Count", "# requests")
        fails = self._num(table, "Failure Count", "# failures")
        median = self._num(table, "Median Response Time", "Median response time")
        avg = self._num(table, "Average Response Time", "Average response time")
        rows = table.select(
            first_column(table, "Type", "Method", dtype=pl.Utf8).fill_null("").alias("type"),
            name.alias("name"),
            count.alias("count"),
            fails.alias("fails"),
            median.alias("median"),
            avg.alias("avg"),
        )
        total = rows.filter(pl.col("name").is_in(["Aggregated", "Total"]))
        endpoints = rows.filter(~pl.col("name").is_in(["Aggregated", "Total"]))
        for r in endpoints.head(NOTE_EXAMPLES + 2).iter_rows(named=True):
            result.notes.append(
                f"{r['type']} {r['name']}: {r['count'] or 0:.0f} requests, {r['fails'] or 0:.0f} failures, "
                f"median {r['median']} ms, mean {r['avg']} ms"
            )
        if total.height:
            sent, failed = total["count"][0], total["fails"][0]
        else:
            sent, failed = endpoints["count"].sum(), endpoints["fails"].sum()
        sent, failed = int(sent or 0), int(failed or 0)
        frame = pl.concat(
            [
                placeholders(sent - failed, True, f"{source.display}:Aggregated", None),
                placeholders(
                    failed,
                    False,
                    f"{source.display}:Aggregated",
                    None,
                    "failed (Locust counts only; see the *_failures.csv file)",
                ),
            ]
        )
        result.notes.append(
            f"aggregates only: {sent} requests, {failed} failures; requests cannot be matched "
            "one by one (Locust's --csv keeps no per-request rows); response times are in ms"
        )
        frame = place_on_clock(frame, ctx, result.notes, clock="none")
        finish_requests(result, frame, source.display)

    def _history(
        self, table: pl.DataFrame, source: SourceFile, result: ParseResult, ctx: ParseContext
    ) -> None:
        rows = table.select(
            self._num(table, "Timestamp").alias("t"),
            self._num(table, "User Count").alias("users"),
            first_column(table, "Name", dtype=pl.Utf8).alias("name"),
            self._num(table, "Total Request Count").alias("total"),
            self._num(table, "Total Failure Count").alias("failures"),
        ).filter(pl.col("t").is_not_null())
        if rows.is_empty():
            return
        times = rows.select(seconds_to_utc(to_seconds(pl.col("t"))).alias("at"))["at"]
        result.span = (times.min(), times.max())
        users = rows.select(pl.col("users").unique(maintain_order=True))["users"].to_list()
        agg = rows.filter(pl.col("name") == "Aggregated")
        last = (agg if agg.height else rows).tail(1).row(0, named=True)
        result.notes.append(
            f"per-second history from {iso_text(rows['t'].min())} to {iso_text(rows['t'].max())} "
            "(epoch seconds from the file); user count "
            + " → ".join(f"{u:.0f}" for u in users if u is not None)
            + f"; final totals {last['total']:.0f} requests, {last['failures']:.0f} failures "
            "(aggregates: requests are counted from *_stats.csv, not here)"
        )

    def _failures(
        self, table: pl.DataFrame, source: SourceFile, result: ParseResult, ctx: ParseContext
    ) -> None:
        rows = table.select(
            first_column(table, "Method", dtype=pl.Utf8).alias("method"),
            first_column(table, "Name", dtype=pl.Utf8).alias("name"),
            first_column(table, "Error", dtype=pl.Utf8).alias("error"),
            self._num(table, "Occurrences", "Occurences").alias("n"),
        )
        for r in rows.head(NOTE_EXAMPLES + 2).iter_rows(named=True):
            result.notes.append(f"{r['method']} {r['name']}: {r['n'] or 0:.0f}× {r['error']}")
        result.notes.append(
            f"failure kinds only ({rows['n'].sum():.0f} occurrences): no per-request rows; "
            "the counts are taken from *_stats.csv"
        )
