"""hey ``-o csv``: one line a request that got an HTTP answer, times relative to hey's start.

The columns (``requester/print.go``'s ``csvTmpl``): ``response-time``,
``DNS+dialup``, ``DNS``, ``Request-write``, ``Response-delay``,
``Response-read`` (seconds, ``%4.4f``), ``status-code``, ``offset`` (seconds
since hey started when the request was sent). A request that failed without
an answer (timeout, refused, reset) is not written at all (``report.go``
counts it in its error distribution only): such failures can be neither
counted nor placed from this file, and the notes say so. Offsets are a
counter: ``--started-at`` anchors them, else the requests are counted but not
placed. hey's concurrency (``-c``) is not in the file.
"""

from __future__ import annotations

import polars as pl

from logforensics import model
from logforensics.ingest import register_file_format
from logforensics.ingest.base import FileFormat, ParseContext, ParseResult, Sample, SourceFile
from logforensics.ingest.toolkit import finish_requests, place_on_clock

HEADER = (
    "response-time,DNS+dialup,DNS,Request-write,Response-delay,Response-read,status-code,offset"
)
ROW_RE = r"^\s*[\d.]+,[\d.]+,[\d.]+,[\d.]+,[\d.]+,[\d.]+,\d+,[\d.]+\s*$"


@register_file_format
class HeyCsv(FileFormat):
    """hey's ``-o csv`` output."""

    name = "hey_csv"
    role = "client"
    priority = 5
    samples = (
        Sample(
            "hey -o csv, header and number formats as rakyll/hey requester/print.go @ 89858275 "
            "writes them; values invented",
            file="hey_results.csv",
            tables=(("client_requests", 6),),
        ),
    )

    def sniff(self, head: list[str]) -> bool:
        return bool(head) and head[0].strip() == HEADER

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        lines = source.lines
        text = pl.col("text")
        rows = lines.slice(1).filter(text.str.contains(ROW_RE))
        blank = lines.filter(text.str.strip_chars() == "")
        result = ParseResult(lines=lines.height, formats=[self.name])
        result.parsed = rows.height
        result.noise = 1 + blank.height
        result.set_unparsed(
            lines.slice(1).filter(~text.str.contains(ROW_RE) & (text.str.strip_chars() != ""))
        )
        fields = rows.with_columns(text.str.split(",").alias("_f"))

        def field(i: int, dtype=pl.Float64) -> pl.Expr:
            return pl.col("_f").list.get(i).str.strip_chars().cast(dtype, strict=False)

        frame = fields.select(
            field(7).alias("_start"),
            field(0).alias("latency_s"),
            field(6, pl.Int64).alias("http_status"),
            model.source_id(f"{source.display}:", pl.col("line_no")),
        ).with_columns((pl.col("_start") + pl.col("latency_s")).alias("_end"))
        result.notes.append(
            "hey writes only requests that got an HTTP answer: failures without one (timeouts, "
            "refused or reset connections) are not in this file and are not counted here (hey's "
            "console summary lists them under 'Error distribution')"
        )
        frame = place_on_clock(
            frame, ctx, result.notes, clock="seconds since hey started (`offset`)"
        )
        finish_requests(result, frame, source.display)
        return result
