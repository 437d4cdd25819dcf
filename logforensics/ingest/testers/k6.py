"""k6 ``--out json`` points, stamped at each request's end."""

from __future__ import annotations

import json
import re

import polars as pl

from logforensics import model, timeparse
from logforensics.ingest import register_file_format
from logforensics.ingest.base import (
    FileFormat,
    ParseContext,
    ParseResult,
    Sample,
    SourceFile,
)
from logforensics.ingest.toolkit import (
    decode_json_objects,
    finish_requests,
    first_column,
    nested,
    place_on_clock,
)

# ---------------------------------------------------------------- k6 --out json


@register_file_format
class K6Json(FileFormat):
    """k6 ``--out json``: Metric declarations and Points; one http_req_duration point per request."""

    name = "k6_json"
    priority = 17
    samples = (
        Sample(
            "grafana/k6 JSON output Metric/Point lines; values invented", file="k6_results.json"
        ),
    )
    role = "client"

    def sniff(self, head: list[str]) -> bool:
        for line in head[:5]:
            if re.match(r'\s*\{\s*"type"\s*:\s*"(?:Point|Metric)"\s*,', line):
                return True
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if (
                isinstance(record, dict)
                and record.get("type") in ("Point", "Metric")
                and "metric" in record
                and isinstance(record.get("data"), dict)
            ):
                return True
        return False

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        lines = source.lines
        result = ParseResult(lines=lines.height, formats=[self.name])
        decoded, bad = decode_json_objects(lines)
        kind = first_column(decoded, "type", dtype=pl.Utf8)
        metric = first_column(decoded, "metric", dtype=pl.Utf8)
        classified = (
            decoded.select(
                "line_no",
                ((kind == "Point") & metric.str.starts_with("http_req"))
                .fill_null(False)
                .alias("req"),
                kind.is_in(["Point", "Metric"]).fill_null(False).alias("known"),
            )
            if decoded.height
            else pl.DataFrame(schema={"line_no": pl.Int64, "req": pl.Boolean, "known": pl.Boolean})
        )
        blank = lines.filter(pl.col("text").str.strip_chars() == "").height
        result.parsed = classified.filter(pl.col("req")).height
        result.noise = blank + classified.filter(~pl.col("req") & pl.col("known")).height
        unknown = lines.filter(
            pl.col("line_no").is_in(bad["line_no"].implode())
            | pl.col("line_no").is_in(classified.filter(~pl.col("known"))["line_no"].implode())
        )
        result.set_unparsed(unknown)
        if unknown.height:
            result.notes.append(
                f"{unknown.height} line(s) are not k6 JSON output (cut short or foreign), first "
                f"at {source.display}:{unknown['line_no'][0]}; the other lines are read"
            )
        result.notes.append(
            "per-request data from the http_req_duration points; http_reqs, http_req_failed and "
            "the other http_req_* points of the same request are counted parsed, other metrics noise"
        )
        if decoded.is_empty():
            return result
        points = decoded.filter((kind == "Point") & (metric == "http_req_duration"))
        if points.is_empty():
            return result
        p = points

        def tag(name: str) -> pl.Expr:
            return nested(p, "data", "tags", name, dtype=pl.Utf8)

        status = tag("status").cast(pl.Int64, strict=False)
        expected = tag("expected_response")
        ok = pl.coalesce(
            expected.replace_strict(
                {"true": True, "false": False}, default=None, return_dtype=pl.Boolean
            ),
            status.is_between(200, 399),
        )
        end = timeparse.iso_to_utc(nested(p, "data", "time", dtype=pl.Utf8), ctx.client_tz)
        duration_s = nested(p, "data", "value", dtype=pl.Float64) / 1000
        frame = p.select(
            ((end.dt.epoch("us") / 1e6) - duration_s).alias("_start"),
            (end.dt.epoch("us") / 1e6).alias("_end"),
            duration_s.alias("latency_s"),
            ok.alias("ok"),
            pl.when(status > 0).then(status).alias("http_status"),
            pl.when(~ok.fill_null(False))
            .then(
                pl.coalesce(
                    tag("error"),
                    pl.format("k6 error_code {}", tag("error_code")),
                    pl.when(status > 0)
                    .then(pl.format("HTTP {}", status))
                    .otherwise(pl.lit("no response (status 0)")),
                )
            )
            .alias("error"),
            pl.coalesce(tag("request_id"), tag("x_request_id")).alias("request_id"),
            model.source_id(f"{source.display}:", pl.col("line_no")),
        )
        frame = place_on_clock(
            frame,
            ctx,
            result.notes,
            clock="RFC 3339 stamps with the runner's offset, taken at each request's end "
            "(start = end − http_req_duration, which leaves out connection set-up)",
        )
        finish_requests(result, frame, source.display)
        return result
