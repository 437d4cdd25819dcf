"""genai-perf / perf_analyzer ``profile_export.json``
(``system_clock`` ns).
"""

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
    account_document,
    finish_requests,
    place_on_clock,
    salvage_objects,
)

# ---------------------------------------------------------------- genai-perf profile_export.json

GENAI_REQUEST_RE = r'\{\s*"timestamp"\s*:'


@register_file_format
class GenAIPerfJson(FileFormat):
    """genai-perf / perf_analyzer ``profile_export.json``: experiments → requests (ns)."""

    name = "genai_perf_json"
    priority = 14
    samples = (
        Sample(
            "perf_analyzer src/profile_data_exporter.cc shape; values invented",
            file="genai_perf_profile_export.json",
        ),
    )
    role = "client"

    def sniff(self, head: list[str]) -> bool:
        text = "\n".join(head)
        return head[0].lstrip().startswith("{") and bool(
            re.search(r'"experiments"\s*:\s*\[\s*\{\s*"experiment"\s*:', text)
        )

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        result = ParseResult(formats=[self.name])
        text = source.text
        rows: list[tuple[int, int, dict]] = []  # (experiment, record number, request)
        modes: dict[int, str] = {}
        try:
            doc = json.loads(text)
            readable_to = len(text)
            for e, exp in enumerate(doc.get("experiments") or []):
                mode = exp.get("experiment") or {}
                modes[e] = f"{mode.get('mode')} {mode.get('value')}"
                rows.extend((e, 0, r) for r in exp.get("requests") or [])
        except ValueError as exc:
            salvaged = salvage_objects(text, GENAI_REQUEST_RE)
            readable_to = salvaged[-1][1] if salvaged else 0
            exp_at = [m.start() for m in re.finditer(r'"experiment"\s*:\s*\{', text)]
            rows = [(max(0, sum(p < pos for p in exp_at) - 1), 0, r) for pos, _, r in salvaged]
            result.notes.append(
                f"the document is cut short or broken ({exc.msg} at character {exc.pos}): "
                f"{len(salvaged)} complete request records read; the rest is unparsed"
            )
        account_document(result, source, readable_to)
        if modes:
            result.notes.append("experiments: " + "; ".join(modes[e] for e in sorted(modes)))
        if not rows:
            return result
        n_exp = max(e for e, _, _ in rows) + 1

        def body(request: dict) -> str:
            outs = request.get("response_outputs") or []
            return "\n".join(
                str(o.get("response", o.get("text_output", ""))) if isinstance(o, dict) else str(o)
                for o in outs
            )

        f = pl.DataFrame(
            {
                "_exp": [e for e, _, _ in rows],
                "timestamp": [r.get("timestamp") for _, _, r in rows],
                "_last": [
                    max(r.get("response_timestamps") or [None], key=lambda v: v or 0)
                    for _, _, r in rows
                ],
                "_responses": [len(r.get("response_timestamps") or []) for _, _, r in rows],
                "_body": [body(r) for _, _, r in rows],
            },
            schema_overrides={"timestamp": pl.Float64, "_last": pl.Float64, "_body": pl.Utf8},
        ).with_row_index("_rec", offset=1)
        is_error = pl.col("_body").str.contains(r'"error"\s*:|"object"\s*:\s*"error"')
        message = pl.col("_body").str.extract(r'"message"\s*:\s*"((?:[^"\\]|\\.)*)"', 1)
        code = (
            pl.col("_body")
            .str.extract(r'"code"\s*:\s*"?([1-5]\d{2})\b', 1)
            .cast(pl.Int64, strict=False)
        )
        ok = (pl.col("_responses") > 0) & ~is_error
        frame = f.select(
            (pl.col("_exp") + 1 if n_exp > 1 else pl.lit(None, dtype=pl.Int64)).alias("step"),
            (pl.col("_rec") - 1).cast(pl.Int64).alias("index"),
            (pl.col("timestamp") / 1e9).alias("_start"),
            (pl.col("_last") / 1e9).alias("_end"),
            pl.lit(None, dtype=pl.Float64).alias("latency_s"),
            ok.alias("ok"),
            pl.when(~ok).then(code).alias("http_status"),
            pl.when(is_error)
            .then(pl.coalesce(message, pl.lit("error in the response body")))
            .when(pl.col("_responses") == 0)
            .then(pl.lit("no response recorded"))
            .alias("error"),
            pl.col("_body")
            .str.extract_all(r'"completion_tokens"\s*:\s*\d+')
            .list.last()
            .str.extract(r"(\d+)$", 1)
            .cast(pl.Int64, strict=False)
            .alias("output_tokens"),
            pl.col("_body").str.extract(r'"id"\s*:\s*"([^"]+)"', 1).alias("request_id"),
            model.source_id(f"{source.display}:record ", pl.col("_rec")),
        )
        frame = place_on_clock(
            frame, ctx, result.notes, clock="system_clock ns (timestamp / response_timestamps)"
        )
        finish_requests(result, frame, source.display)
        return result
