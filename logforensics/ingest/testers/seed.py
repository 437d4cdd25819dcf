"""The seed write-up's script output: one Python tuple per request,
``(i, elapsed_seconds, completion_tokens, 'OK' | error_text[:40])``, a block of rows per
load step. It records no absolute time."""

from __future__ import annotations

import re

import polars as pl

from logforensics.ingest import outcome, register_file_format
from logforensics.ingest.base import (
    FileFormat,
    ParseContext,
    ParseResult,
    Sample,
    SourceFile,
)
from logforensics.ingest.toolkit import (
    source_expr,
)

TUPLE_RE = r"""\(\s*(\d+)\s*,\s*(-?[\d.]+)\s*,\s*(\d+)\s*,\s*(?:'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)")\s*\)"""
STEP_HEADER_RE = r"(?i)^\s*#*\s*(?:N|concurrency|concurrent|workers|동시(?: 요청)?)\s*[=:]?\s*(\d+)"


@register_file_format
class SeedRows(FileFormat):
    name = "seed_rows"
    priority = 20
    samples = (
        Sample(
            "the seed write-up's rows, (i, round(elapsed, 2), tokens, 'OK' | str(e)[:40])",
            file="seed_rows.txt",
        ),
    )
    role = "client"

    def sniff(self, head: list[str]) -> bool:
        rx = re.compile(TUPLE_RE)
        return sum(bool(rx.search(line)) for line in head) >= max(1, len(head) // 2)

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        lines = source.lines
        header = pl.col("text").str.extract(STEP_HEADER_RE, 1).cast(pl.Int64, strict=False)
        rows = lines.with_columns(
            header.alias("declared"),
            pl.col("text").str.extract_all(TUPLE_RE).alias("tuples"),
        )
        is_header = pl.col("declared").is_not_null() & (pl.col("tuples").list.len() == 0)
        noise = pl.col("text").str.contains(r"(?i)^\s*$|^\s*(#|total|elapsed|took|warm)")
        result = ParseResult(lines=lines.height, formats=[self.name])
        records = rows.filter(pl.col("tuples").list.len() > 0)
        result.parsed = records.height
        result.noise = rows.filter(~(pl.col("tuples").list.len() > 0) & (is_header | noise)).height
        unparsed = rows.filter((pl.col("tuples").list.len() == 0) & ~is_header & ~noise)
        result.set_unparsed(unparsed)
        flat = (
            rows.with_columns(is_header.alias("is_header"))
            .filter(pl.col("is_header") | (pl.col("tuples").list.len() > 0))
            .explode("tuples")
            .with_columns(pl.col("tuples").str.extract_groups(TUPLE_RE).alias("_t"))
            .unnest("_t")
            .with_columns(pl.col("1").cast(pl.Int64, strict=False).alias("index"))
        )
        # A new step starts at a header line, or where the request number stops rising.
        restart = pl.col("is_header") | (
            pl.col("index") <= pl.col("index").forward_fill().shift(1)
        ).fill_null(False)
        flat = flat.with_columns(restart.cum_sum().alias("block"))
        # The script fires a block's requests at once: a block's size is its concurrency,
        # unless a header line ("N=20", "동시 요청 20") declares it.
        declared = pl.col("declared").filter(pl.col("is_header")).first().over("block")
        flat = flat.with_columns(declared.alias("declared")).filter(~pl.col("is_header"))
        flat = flat.with_columns(
            (pl.col("block").rank("dense")).cast(pl.Int64).alias("step"),
            pl.coalesce("declared", pl.len().over("block").cast(pl.Int64)).alias("concurrency"),
        )
        text = pl.coalesce(pl.col("4"), pl.col("5"))
        result_of = outcome.classify(error=text)
        frame = flat.select(
            pl.lit(source.display).alias("run"),
            "step",
            "concurrency",
            "index",
            pl.col("2").cast(pl.Float64).alias("latency_s"),
            outcome.ok_of(result_of),
            result_of,
            text.str.extract(r"(?:HTTP Error |status(?: code)?:? ?)(\d{3})", 1)
            .cast(pl.Int64)
            .alias("http_status"),
            pl.when(text != "OK").then(text).alias("error"),
            pl.col("3").cast(pl.Int64).alias("output_tokens"),
            pl.lit(False).alias("warmup"),
            source_expr(source.display).alias("source"),
        )
        result.add("client_requests", frame)
        result.notes.append(
            "no absolute per-request times in this format: requests are placed on the "
            "servers' clock only through another client file of the same run"
        )
        return result
