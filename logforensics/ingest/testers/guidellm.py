"""GuideLLM ``benchmarks.json`` (v0.2/0.3 records
``GenerativeTextResponseStats``/``GenerativeTextErrorStats``; v0.4+
``GenerativeRequestStats`` with ``info.timings``), and ``benchmarks.yaml``
when PyYAML is importable. Records may be a sample: the totals then come
from the benchmark's aggregate counts.
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
    concat_frames,
    finish_requests,
    first_column,
    place_on_clock,
    placeholders,
    records_frame,
    salvage_objects,
    status_from_text,
    to_seconds,
)

# ---------------------------------------------------------------- GuideLLM

GUIDELLM_RECORD_RE = r'\{\s*"type_"\s*:\s*"generative_(?:request_stats|text_response|text_error)"'
GUIDELLM_STATUSES = ("successful", "incomplete", "errored")


def strategy_concurrency(bench: dict) -> int | None:
    """The concurrency a benchmark's strategy ran: ``synchronous`` 1, ``concurrent`` its
    streams, ``throughput`` its max_concurrency where set; rate strategies (``constant``,
    ``poisson``) fix a rate, not a concurrency: None. v0.4+ ``config.strategy``, v0.2 ``args``."""
    strategy = (bench.get("config") or {}).get("strategy") or (bench.get("args") or {}).get(
        "strategy"
    )
    if not isinstance(strategy, dict):
        return None
    kind = strategy.get("type_") or strategy.get("type")
    value = {"synchronous": 1, "concurrent": strategy.get("streams")}.get(kind)
    if kind == "throughput":
        value = strategy.get("max_concurrency")
    return int(value) if isinstance(value, int | float) else None


@register_file_format
class GuideLLMReport(FileFormat):
    """GuideLLM ``benchmarks.json`` / ``.yaml``: benchmarks → requests by status."""

    name = "guidellm_report"
    priority = 10
    samples = (
        Sample(
            "tests/data/loadtesters: GuideLLM v0.4 report schema (see tests/test_ingest_loadtesters.py)",
            file="guidellm_v04_benchmarks.json",
        ),
    )
    role = "client"

    def sniff(self, head: list[str]) -> bool:
        text = "\n".join(head)
        if head[0].lstrip().startswith("{"):
            return bool(
                re.search(
                    r'"type_"\s*:\s*"generative_(?:benchmark|request_stats|text_response|text_error)"'
                    r'|"guidellm_version"\s*:',
                    text,
                )
            )
        first = head[0].strip()
        return first in ("args:", "benchmarks:", "metadata:") and bool(
            re.search(r"guidellm_version:|type_: generative_|openai_http", text)
        )

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        result = ParseResult(formats=[self.name])
        text = source.text
        records: list[tuple[int, str, dict]] = []  # (benchmark, status, record)
        totals: dict[int, dict] = {}
        levels: dict[int, int | None] = {}  # benchmark → the concurrency its strategy ran
        if not text.lstrip().startswith("{"):
            doc, readable_to = self._yaml(source, result)
            if doc is None:
                return result
        else:
            try:
                doc, readable_to = json.loads(text), len(text)
            except ValueError as exc:
                doc = None
                salvaged = salvage_objects(text, GUIDELLM_RECORD_RE)
                readable_to = salvaged[-1][1] if salvaged else 0
                bench_at = [m.start() for m in re.finditer(r'"requests"\s*:\s*\{', text)]
                status_at = [
                    (m.start(), m.group(1))
                    for m in re.finditer(r'"(successful|incomplete|errored)"\s*:\s*\[', text)
                ]
                for pos, _, obj in salvaged:
                    bench = max(0, sum(p < pos for p in bench_at) - 1)
                    status = next((s for p, s in reversed(status_at) if p < pos), "successful")
                    records.append((bench, status, obj))
                result.notes.append(
                    f"the document is cut short or broken ({exc.msg} at character {exc.pos}): "
                    f"{len(salvaged)} complete request records read up to character "
                    f"{readable_to}; the rest of the file is unparsed, and the benchmarks' "
                    "aggregate counts (if any) were lost with it"
                )
        if doc is not None:
            if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list):
                result.notes.append("no `benchmarks` list in the document: nothing read")
                account_document(result, source, 0)
                return result
            for b, bench in enumerate(doc["benchmarks"]):
                requests = (bench or {}).get("requests") or {}
                for status in GUIDELLM_STATUSES:
                    records.extend((b, status, r) for r in requests.get(status) or [])
                totals[b] = self._totals(bench or {})
                levels[b] = strategy_concurrency(bench or {})
            version = (doc.get("metadata") or {}).get("guidellm_version")
            if version:
                result.notes.append(f"GuideLLM {version}")
        account_document(result, source, readable_to)
        n_bench = max([b for b, _, _ in records] + list(totals) + [0]) + 1
        frame = self._rows(records, source.display, n_bench, levels)
        frames = [frame]
        for b, total in totals.items():
            frames.extend(
                self._sampled_out(
                    b, total, records, source.display, n_bench, result.notes, levels.get(b)
                )
            )
        frame = place_on_clock(
            concat_frames(frames),
            ctx,
            result.notes,
            clock="epoch seconds (GuideLLM request_start / request_end)",
        )
        finish_requests(result, frame, source.display)
        return result

    @staticmethod
    def _yaml(source: SourceFile, result: ParseResult):
        try:
            import yaml  # noqa: PLC0415  (optional: not a dependency)
        except ImportError:
            result.notes.append(
                "GuideLLM YAML report not read: PyYAML is not installed (it is not a "
                "dependency); install it, or give the JSON report (--output-path benchmarks.json)"
            )
            account_document(result, source, 0)
            return None, 0
        try:
            return yaml.safe_load(source.text), len(source.text)
        except yaml.YAMLError as exc:
            result.notes.append(f"YAML not readable ({exc}); nothing read")
            account_document(result, source, 0)
            return None, 0

    @staticmethod
    def _totals(bench: dict) -> dict | None:
        """Counts by status: v0.4+ metrics.request_totals, v0.3 request_totals, v0.2 total_count."""
        for found in (
            (bench.get("metrics") or {}).get("request_totals"),
            bench.get("request_totals"),
            bench.get("total_count"),
        ):
            if isinstance(found, dict):
                return found
        return None

    @staticmethod
    def _rows(
        records: list[tuple[int, str, dict]], display: str, n_bench: int, levels: dict
    ) -> pl.DataFrame:
        if not records:
            return pl.DataFrame()
        frame = records_frame([r for _, _, r in records]).with_columns(
            pl.Series("_bench", [b for b, _, _ in records], dtype=pl.Int64),
            pl.Series("_status", [s for _, s, _ in records], dtype=pl.Utf8),
            pl.int_range(1, len(records) + 1, dtype=pl.Int64).alias("_rec"),
        )
        f = frame
        start = pl.coalesce(
            first_column(f, "request_start_time", dtype=pl.Float64),
            first_column(f, "info.timings.request_start", dtype=pl.Float64),
            first_column(f, "info.timings.resolve_start", dtype=pl.Float64),
            first_column(f, "start_time", dtype=pl.Float64),
        )
        end = pl.coalesce(
            first_column(f, "request_end_time", dtype=pl.Float64),
            first_column(f, "info.timings.request_end", dtype=pl.Float64),
            first_column(f, "info.timings.resolve_end", dtype=pl.Float64),
            first_column(f, "end_time", dtype=pl.Float64),
        )
        error = pl.coalesce(
            first_column(f, "info.error", dtype=pl.Utf8), first_column(f, "error", dtype=pl.Utf8)
        )
        status = pl.col("_status")
        return f.select(
            (pl.col("_bench") + 1 if n_bench > 1 else pl.lit(None, dtype=pl.Int64)).alias("step"),
            pl.col("_bench")
            .replace_strict(levels, default=None, return_dtype=pl.Int64)
            .alias("concurrency"),
            to_seconds(start).alias("_start"),
            to_seconds(end).alias("_end"),
            first_column(f, "request_latency", dtype=pl.Float64).alias("latency_s"),
            status.alias("_word"),  # successful | incomplete (cancelled) | errored
            status_from_text(error).alias("http_status"),
            pl.when(status != "successful").then(error).alias("error"),
            pl.coalesce(
                first_column(f, "output_tokens", dtype=pl.Int64),
                first_column(f, "output_metrics.total_tokens", dtype=pl.Int64),
            ).alias("output_tokens"),
            # v0.4+ response_id is the server's own id (chatcmpl-…): the join key with vLLM
            pl.coalesce(
                first_column(f, "response_id", dtype=pl.Utf8),
                first_column(f, "request_id", dtype=pl.Utf8),
                first_column(f, "info.request_id", dtype=pl.Utf8),
            ).alias("request_id"),
            model.source_id(f"{display}:record ", pl.col("_rec")),
        )

    @staticmethod
    def _sampled_out(b, total, records, display, n_bench, notes, level) -> list[pl.DataFrame]:
        if not total:
            return []
        step = b + 1 if n_bench > 1 else None
        out, missing = [], []
        for status in GUIDELLM_STATUSES:
            want = int(total.get(status) or 0)
            have = sum(1 for rb, s, _ in records if rb == b and s == status)
            if want > have:
                missing.append(f"{want - have} {status}")
                out.append(
                    placeholders(
                        want - have,
                        status == "successful",
                        f"{display}:benchmark {b + 1} {status} (aggregate count)",
                        step,
                        None if status == "successful" else f"{status} (sampled out: no record)",
                        level,
                    )
                )
            elif have > want:
                notes.append(
                    f"benchmark {b + 1}: {have} {status} records but the aggregate says {want}; "
                    "the records are kept"
                )
        if missing:
            notes.append(
                f"benchmark {b + 1}: the file holds a sample of its requests; totals come from "
                f"the aggregate counts ({', '.join(missing)} have no per-request record and "
                "cannot be matched one by one)"
            )
        return out
