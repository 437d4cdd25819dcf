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

STAMP = (
    r"(?:\d{4}-\d{2}-\d{2}T[\d:.]+(?:Z|[+-]\d{2}:?\d{2})?\s+)?"  # the corpus's clients stamp lines
)
TUPLE_RE = r"""\(\s*(\d+)\s*,\s*(-?[\d.]+)\s*,\s*(\d+)\s*,\s*(?:'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)")\s*\)"""
# a block's header, maybe stamped: "N=20", "# concurrency: 5", "동시 요청 20",
# "2026-12-01T14:18:25.368+00:00 step concurrency=5" (the corpus's seed client),
# "2026-12-04T16:00:13.535+00:00 step 2: indexes 1..2" (its --pad-words variant)
STEP_HEADER_RE = (
    rf"(?i)^\s*{STAMP}#*\s*(?:step\s+)?"
    r"(?:(?:N|concurrency|concurrent|workers|동시(?: 요청)?)\s*[=:]?\s*(\d+)\s*$"
    r"|(\d+):\s+indexes\s+\d+\s*\.\.\s*\d+\s*$)"
)
# the script's per-step summary (the write-up's table): "concurrent=5 ok=5/5 mean=11.05s
# throughput=89.5 tok/s wall=16.8s", or stamped "step 8: 5/8 OK, total 60.11s, 1.3 tok/s"
STEP_SUMMARY_RE = (
    r"^\s*(?:concurrent|concurrency|N)=(?P<level>\d+) ok=(?P<ok>\d+)/(?P<sent>\d+)"
    r"(?: mean=(?P<mean>[\d.]+)s)?(?: throughput=(?P<tps>[\d.]+) tok/s)?(?: wall=(?P<wall>[\d.]+)s)?"
)
STEP_TALLY_RE = (
    rf"^\s*{STAMP}step (?P<level>\d+): (?P<ok>\d+)/(?P<sent>\d+) OK"
    r"(?:, total (?P<wall>[\d.]+)s)?(?:, (?P<tps>[\d.]+) tok/s)?\s*$"
)
SUMMARY_RES = (STEP_SUMMARY_RE, STEP_TALLY_RE)  # same group names: level, ok, sent, …
WARMUP_RE = rf"(?i)^\s*{STAMP}warm[- ]?up\b"


@register_file_format
class SeedRows(FileFormat):
    name = "seed_rows"
    priority = 21
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
        header = pl.coalesce(
            pl.col("text").str.extract(STEP_HEADER_RE, group) for group in (1, 2)
        ).cast(pl.Int64, strict=False)
        rows = lines.with_columns(
            header.alias("declared"),
            pl.col("text").str.extract_all(TUPLE_RE).alias("tuples"),
        )
        is_header = pl.col("declared").is_not_null() & (pl.col("tuples").list.len() == 0)
        summary = pl.any_horizontal(pl.col("text").str.contains(rx) for rx in SUMMARY_RES)
        noise = (
            pl.col("text").str.contains(
                rf"(?i)^\s*$|^\s*{STAMP}(#|total|elapsed|took|warm|done\s*$)"
            )
            | summary
        )
        result = ParseResult(lines=lines.height, formats=[self.name])
        records = rows.filter(pl.col("tuples").list.len() > 0)
        result.parsed = records.height
        result.noise = rows.filter(~(pl.col("tuples").list.len() > 0) & (is_header | noise)).height
        unparsed = rows.filter((pl.col("tuples").list.len() == 0) & ~is_header & ~noise)
        result.set_unparsed(unparsed)
        flat = (
            rows.with_columns(is_header.alias("is_header"))
            .filter(pl.col("is_header") | (pl.col("tuples").list.len() > 0))
            .explode("tuples", empty_as_null=True)  # a header keeps its row
            .with_columns(pl.col("tuples").str.extract_groups(TUPLE_RE).alias("_t"))
            .unnest("_t")
            .with_columns(pl.col("1").cast(pl.Int64, strict=False).alias("index"))
        )
        # A new step starts at a header line, or where the request number stops rising.
        warmup = pl.col("text").str.contains(WARMUP_RE)
        restart = (
            pl.col("is_header")
            | warmup
            | warmup.shift(1).fill_null(False)
            | (pl.col("index") <= pl.col("index").forward_fill().shift(1)).fill_null(False)
        )
        flat = flat.with_columns(warmup.alias("warmup"))
        flat = flat.with_columns(restart.cum_sum().alias("block"))
        # The script fires a block's requests at once: a block's size is its concurrency,
        # unless a header line ("N=20", "동시 요청 20") declares it.
        declared = pl.col("declared").filter(pl.col("is_header")).first().over("block")
        flat = flat.with_columns(declared.alias("declared")).filter(~pl.col("is_header"))
        measured = flat.filter(~pl.col("warmup"))
        steps = measured.select(pl.col("block").unique().sort())["block"].to_list()
        flat = flat.with_columns(
            pl.col("block")
            .replace_strict(steps, list(range(1, len(steps) + 1)), default=None)
            .cast(pl.Int64)
            .alias("step"),
            pl.when(~pl.col("warmup"))
            .then(pl.coalesce("declared", pl.len().over("block").cast(pl.Int64)))
            .alias("concurrency"),
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
            "warmup",
            source_expr(source.display).alias("source"),
        )
        result.add("client_requests", frame)
        for row in rows.filter(summary).iter_rows(named=True):
            found = next(m for rx in SUMMARY_RES if (m := re.search(rx, row["text"])))
            result.tester_summaries.append(
                {
                    "tester": "a script printing (i, seconds, tokens, result) rows",
                    "concurrency": int(found["level"]),
                    "sent": int(found["sent"]),
                    "ok": int(found["ok"]),
                    "failed": int(found["sent"]) - int(found["ok"]),
                    "latency_s": {
                        "mean": float(found["mean"]) if found.groupdict().get("mean") else None
                    },
                    "output_tokens_per_s": float(found["tps"]) if found["tps"] else None,
                    "duration_s": float(found["wall"]) if found["wall"] else None,
                    "line": row["line_no"],
                }
            )
        result.notes.append(
            "no absolute per-request times in this format: requests are placed on the "
            "servers' clock only through another client file of the same run"
        )
        return result
