"""NVIDIA AIPerf ``profile_export.jsonl`` (epoch ns)."""

from __future__ import annotations

import json
import re

import polars as pl

from logforensics import model
from logforensics.ingest import register_file_format
from logforensics.ingest.base import (
    FileFormat,
    ParseContext,
    ParseResult,
    Sample,
    SourceFile,
)
from logforensics.ingest.toolkit import (
    PER_SECOND,
    decode_json_objects,
    finish_requests,
    nested,
    place_on_clock,
)

# ---------------------------------------------------------------- AIPerf profile_export.jsonl


@register_file_format
class AIPerfJsonl(FileFormat):
    """NVIDIA AIPerf ``profile_export.jsonl``: one MetricRecordInfo per line."""

    name = "aiperf_jsonl"
    priority = 12
    samples = (
        Sample(
            "ai-dynamo/aiperf docs/tutorials/working-with-profile-exports.md record shape",
            file="aiperf_profile_export.jsonl",
        ),
    )
    role = "client"

    def sniff(self, head: list[str]) -> bool:
        for line in head[:5]:
            try:
                record = json.loads(line)
            except ValueError:
                if re.match(
                    r'\s*\{\s*"metadata"\s*:\s*\{.*"(?:request_start_ns|x_request_id)"', line
                ):
                    return True
                continue
            meta = record.get("metadata") if isinstance(record, dict) else None
            if isinstance(meta, dict) and (
                {"request_start_ns", "x_request_id", "session_num"} & set(meta)
            ):
                return True
        return False

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        lines = source.lines
        result = ParseResult(lines=lines.height, formats=[self.name])
        decoded, bad = decode_json_objects(lines)
        is_record = (
            nested(decoded, "metadata").is_not_null()
            if "metadata" in decoded.columns
            else pl.lit(False)
        )
        records = decoded.filter(is_record) if decoded.height else decoded
        not_records = lines.filter(
            pl.col("line_no").is_in(bad["line_no"].implode())
            | (
                pl.col("line_no").is_in(decoded["line_no"].implode())
                & ~pl.col("line_no").is_in(records["line_no"].implode())
            )
        )
        result.parsed = records.height
        result.noise = lines.filter(pl.col("text").str.strip_chars() == "").height
        result.set_unparsed(not_records)
        if not_records.height:
            result.notes.append(
                f"{not_records.height} line(s) are not AIPerf records (cut short or not JSON), "
                f"first at {source.display}:{not_records['line_no'][0]}; the other lines are read"
            )
        if records.is_empty():
            return result
        r = records
        latency_unit = nested(r, "metrics", "request_latency", "unit", dtype=pl.Utf8)
        units = (
            r.select(latency_unit.drop_nulls().unique(maintain_order=True)).to_series().to_list()
        )
        unknown = [u for u in units if u not in PER_SECOND]
        if len(units) > 1:
            result.notes.append(
                f"request_latency comes in mixed units ({', '.join(units)}): each record's "
                "value is converted by its own unit"
            )
        if unknown:
            result.notes.append(f"request_latency in unknown unit(s) {unknown}: left empty")
        per_second = latency_unit.replace_strict(PER_SECOND, default=None, return_dtype=pl.Float64)
        error = nested(r, "error")
        error_text = pl.when(error.is_not_null()).then(
            pl.concat_str(
                [
                    nested(r, "error", "type", dtype=pl.Utf8),
                    nested(r, "error", "message", dtype=pl.Utf8),
                ],
                separator=": ",
                ignore_nulls=True,
            )
        )
        code = nested(r, "error", "code", dtype=pl.Int64)
        cancelled = nested(r, "metadata", "was_cancelled", dtype=pl.Boolean).fill_null(False)
        frame = r.select(
            pl.coalesce(
                nested(r, "metadata", "session_num", dtype=pl.Int64),
                nested(r, "metadata", "request_num", dtype=pl.Int64),
            ).alias("index"),
            (nested(r, "metadata", "request_start_ns", dtype=pl.Float64) / 1e9).alias("_start"),
            (nested(r, "metadata", "request_end_ns", dtype=pl.Float64) / 1e9).alias("_end"),
            (nested(r, "metrics", "request_latency", "value", dtype=pl.Float64) / per_second).alias(
                "latency_s"
            ),
            (error.is_null() & ~cancelled).alias("ok"),
            pl.when(code.is_between(100, 599)).then(code).alias("http_status"),
            pl.when(error.is_not_null())
            .then(pl.coalesce(error_text, pl.lit("error")))
            .when(cancelled)
            .then(pl.lit("cancelled"))
            .alias("error"),
            pl.coalesce(
                nested(r, "metrics", "output_sequence_length", "value", dtype=pl.Int64),
                nested(r, "metrics", "output_token_count", "value", dtype=pl.Int64),
            ).alias("output_tokens"),
            nested(r, "metadata", "x_request_id", dtype=pl.Utf8).alias("request_id"),
            (nested(r, "metadata", "benchmark_phase", dtype=pl.Utf8) == "warmup")
            .fill_null(False)
            .alias("warmup"),
            model.source_id(f"{source.display}:", pl.col("line_no")),
        )
        frame = place_on_clock(
            frame, ctx, result.notes, clock="epoch ns (request_start_ns / request_end_ns)"
        )
        finish_requests(result, frame, source.display)
        return result
