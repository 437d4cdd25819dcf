"""kubernetes-sigs/inference-perf reports: ``per_request_lifecycle_metrics.json`` and the
lifecycle summaries (``summary_lifecycle_metrics.json``, ``stage_N_lifecycle_metrics.json``).

Per request (``reportgen/base.py`` ``generate_reports``): ``start_time`` and
``end_time`` read from ``time.perf_counter()`` (a counter, not wall time:
``--started-at`` anchors the first request, taken as the stage's start, else
the requests are counted but not placed), the request and response text,
``info`` (``response_metrics.output_tokens``, null for a failure) and
``error`` ``{error_type, error_msg}`` (``HTTP Error 504``, ``TimeoutError``,
aiohttp's exception names). A success is a record without error whose
response was measured. The records carry no stage. An OpenAI answer in
``response`` gives the request its id.

A summary is the tool's own figures (``load_summary.count`` and
``concurrency``, ``successes.count``, ``failures.count`` and
``failures.by_label``): kept beside the tool's counts, its requests counted
from the per-request file. Its ``stage_N_prometheus_metrics.json`` sibling
(the server's metrics, averaged) is recognised and not read.
"""

from __future__ import annotations

import json
import re

import polars as pl

from logforensics import model
from logforensics.ingest import register_file_format
from logforensics.ingest.base import FileFormat, ParseContext, ParseResult, Sample, SourceFile
from logforensics.ingest.toolkit import (
    account_document,
    finish_requests,
    first_column,
    json_records,
    place_on_clock,
    records_frame,
)

RESPONSE_ID_RE = r'"id"\s*:\s*"((?:chat)?cmpl-[^"]+)"'
STAGE_RE = r"stage_(\d+)_"


@register_file_format
class InferencePerfRequests(FileFormat):
    """inference-perf's ``per_request_lifecycle_metrics.json``."""

    name = "inference_perf_requests"
    role = "client"
    priority = 8
    samples = (
        Sample(
            "inference-perf per_request_lifecycle_metrics.json as reportgen/base.py @ 7de5ef2e "
            "writes it (RequestLifecycleMetric, InferenceInfo.model_dump, json indent=2; "
            "errors as openai_client.py makes them); values invented",
            file="inference_perf_per_request_lifecycle_metrics.json",
            tables=(("client_requests", 5),),
        ),
    )

    def sniff(self, head: list[str]) -> bool:
        text = "\n".join(head[:8])
        return text.lstrip().startswith("[") and all(
            f'"{k}"' in text for k in ("start_time", "end_time", "request")
        )

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        result = ParseResult(formats=[self.name])
        _, records = json_records(source, result)
        if not records:
            result.notes.append("no request records in the file")
            return result
        f = records_frame(records).with_row_index("_rec", offset=1)
        error = pl.concat_str(
            [
                first_column(f, "error.error_type", dtype=pl.Utf8),
                first_column(f, "error.error_msg", dtype=pl.Utf8).str.slice(0, 300),
            ],
            separator=": ",
            ignore_nulls=True,
        )
        failed = first_column(f, "error.error_type", dtype=pl.Utf8).is_not_null()
        tokens = first_column(f, "info.response_metrics.output_tokens", dtype=pl.Int64)
        frame = f.select(
            (pl.col("_rec") - 1).cast(pl.Int64).alias("index"),
            first_column(f, "start_time", dtype=pl.Float64).alias("_start"),
            first_column(f, "end_time", dtype=pl.Float64).alias("_end"),
            pl.lit(None, dtype=pl.Float64).alias("latency_s"),
            pl.when(failed).then(False).when(tokens.is_not_null()).then(True).alias("ok"),
            pl.when(failed).then(error).alias("error"),
            tokens.alias("output_tokens"),
            first_column(f, "response", dtype=pl.Utf8)
            .str.extract(RESPONSE_ID_RE, 1)
            .alias("request_id"),
            model.source_id(f"{source.display}:record ", pl.col("_rec")),
        )
        result.notes.append(
            "records name no stage: the stages are told apart by time (their "
            "stage_N_lifecycle_metrics.json files hold the configured rate and concurrency)"
        )
        frame = place_on_clock(
            frame, ctx, result.notes, clock="time.perf_counter() seconds (start_time / end_time)"
        )
        finish_requests(result, frame, source.display)
        return result


@register_file_format
class InferencePerfSummary(FileFormat):
    """inference-perf's lifecycle summaries: the tool's own figures, no requests."""

    name = "inference_perf_summary"
    role = "client"
    priority = 9
    samples = (
        Sample(
            "kubernetes-sigs/inference-perf demos/kubecon-na-2025/vllm+batch_size/results/"
            "stage_0_lifecycle_metrics.json @ 7de5ef2e (real output)",
            file="inference_perf_stage_0_lifecycle_metrics.json",
        ),
    )

    def sniff(self, head: list[str]) -> bool:
        text = "\n".join(head[:4])
        return (
            text.lstrip().startswith("{")
            and re.search(r'^\s*\{?\s*"load_summary"\s*:', text) is not None
            and '"successes"' in "\n".join(head)
        )

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        result = ParseResult(formats=[self.name])
        text = source.text
        try:
            doc = json.loads(text)
        except ValueError as exc:
            account_document(result, source, 0)
            result.notes.append(f"not valid JSON ({exc}): nothing read")
            return result
        account_document(result, source, len(text))
        load = doc.get("load_summary") or {}
        ok = (doc.get("successes") or {}).get("count")
        failures = doc.get("failures") or {}
        if not load or "latency" not in (doc.get("successes") or {}):
            result.notes.append(
                "inference-perf's summary of the server's Prometheus metrics (means a stage): "
                "not read; give the engines' metrics themselves (--prometheus, scrapes, logs)"
            )
            return result
        stage = re.search(STAGE_RE, source.path.name)
        latency = ((doc.get("successes") or {}).get("latency") or {}).get("request_latency") or {}
        result.tester_summaries.append(
            {
                "tester": "inference-perf",
                "step": int(stage.group(1)) + 1 if stage else None,
                "concurrency": load.get("concurrency"),
                "rate": load.get("requested_rate"),
                "sent": load.get("count"),
                "ok": ok,
                "failed": failures.get("count"),
                "failures_by_label": {
                    label: (entry or {}).get("count")
                    for label, entry in (failures.get("by_label") or {}).items()
                },
                "latency_s": {k: latency.get(k) for k in ("min", "median", "p90", "p99", "max")},
            }
        )
        result.notes.append(
            "the tester's own figures; its requests are counted from "
            "per_request_lifecycle_metrics.json, not here"
        )
        return result
