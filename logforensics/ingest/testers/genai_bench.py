"""sgl-project/genai-bench's run file: ``{aggregated_metrics, individual_request_metrics, _time_unit}``.

Written by ``AggregatedMetricsCollector.save`` (``genai_bench/metrics``), one
file a scenario and concurrency (``…_concurrency_{N}_time_{T}s.json``). Its
per-request records (``RequestLevelMetrics``) carry latencies, token counts,
``error_code`` and ``error_message``, and no time at all: the requests are
counted (and their latencies used), never placed on the servers' clock one by
one, and the notes say so. A record is a success when it has no error code
and its metrics are filled in (the model refuses a record without them
otherwise). Times are in ``_time_unit`` (``s`` or ``ms``); the concurrency is
``aggregated_metrics.num_concurrency``; requests the aggregate counts beyond
the records are added as counted-only requests.
"""

from __future__ import annotations

import polars as pl

from logforensics import model
from logforensics.ingest import register_file_format
from logforensics.ingest.base import FileFormat, ParseContext, ParseResult, Sample, SourceFile
from logforensics.ingest.toolkit import (
    concat_frames,
    finish_requests,
    first_column,
    place_on_clock,
    placeholders,
    read_json_document,
    records_frame,
)

PER_SECOND = {"s": 1.0, "ms": 1e3}


@register_file_format
class GenaiBench(FileFormat):
    """genai-bench's per-run metrics file."""

    name = "genai_bench"
    role = "client"
    priority = 7
    samples = (
        Sample(
            "sgl-project/genai-bench tests/analysis/mock_run_data.json @ 7fd04d8c (the shape "
            "AggregatedMetricsCollector.save writes; 2 of the 32 records kept)",
            file="genai_bench_run.json",
            tables=(("client_requests", 32),),
        ),
    )

    def sniff(self, head: list[str]) -> bool:
        text = "\n".join(head[:6])
        return (
            text.lstrip().startswith("{")
            and '"aggregated_metrics"' in text
            and ('"num_concurrency"' in text or '"scenario"' in text)
        )

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        result = ParseResult(formats=[self.name])
        doc = read_json_document(result, source)
        if doc is None:
            return result
        aggregate = doc.get("aggregated_metrics") or {}
        records = [r for r in doc.get("individual_request_metrics") or [] if isinstance(r, dict)]
        unit = doc.get("_time_unit", "s")
        per_second = PER_SECOND.get(unit)
        if per_second is None:
            result.notes.append(f"unknown _time_unit {unit!r}: latencies left empty")
        level = aggregate.get("num_concurrency")
        level = int(level) if isinstance(level, int | float) else None
        frames = []
        if records:
            f = records_frame(records).with_row_index("_rec", offset=1)
            code = first_column(f, "error_code", dtype=pl.Int64)
            latency = first_column(f, "e2e_latency", dtype=pl.Float64) / (
                per_second or float("nan")
            )
            message = first_column(f, "error_message", dtype=pl.Utf8)
            frames.append(
                f.select(
                    pl.lit(level, dtype=pl.Int64).alias("concurrency"),
                    (pl.col("_rec") - 1).cast(pl.Int64).alias("index"),
                    pl.lit(None, dtype=pl.Float64).alias("_start"),
                    pl.lit(None, dtype=pl.Float64).alias("_end"),
                    latency.alias("latency_s"),
                    pl.when(code.is_null() & latency.is_not_null())
                    .then(True)
                    .when(code.is_not_null())
                    .then(False)
                    .alias("ok"),
                    pl.when(code.is_between(100, 599)).then(code).alias("http_status"),
                    # "HTTP 500: Internal Server Error": the answer's status first
                    pl.when(code.is_not_null())
                    .then(
                        pl.concat_str(
                            [
                                pl.when(code.is_between(100, 599))
                                .then(pl.format("HTTP {}", code))
                                .otherwise(pl.format("error_code {}", code)),
                                message,
                            ],
                            separator=": ",
                            ignore_nulls=True,
                        )
                    )
                    .alias("error"),
                    first_column(f, "num_output_tokens", dtype=pl.Int64).alias("output_tokens"),
                    model.source_id(f"{source.display}:record ", pl.col("_rec")),
                )
            )
        counted = aggregate.get("num_requests")
        failed = int(aggregate.get("num_error_requests") or 0)
        have_failed = sum(1 for r in records if r.get("error_code") is not None)
        if isinstance(counted, int) and counted > len(records):
            short_failed = max(0, failed - have_failed)
            short_ok = counted - len(records) - short_failed
            where = f"{source.display}:aggregated_metrics"
            frames.append(placeholders(short_ok, True, where, None, concurrency=level))
            frames.append(
                placeholders(
                    short_failed,
                    False,
                    where,
                    None,
                    "failed (counted by the aggregate only)",
                    level,
                )
            )
            result.notes.append(
                f"{len(records)} per-request records, but the aggregate counts {counted} requests "
                f"({failed} failed): {counted - len(records)} are counted from the aggregate only"
            )
        if not frames:
            result.notes.append("no requests in the file")
            return result
        result.tester_summaries.append(
            {
                "tester": "genai-bench",
                "scenario": aggregate.get("scenario"),
                "concurrency": level,
                "sent": counted,
                "ok": aggregate.get("num_completed_requests"),
                "failed": failed,
                "errors": aggregate.get("error_codes_frequency") or {},
            }
        )
        frame = place_on_clock(concat_frames(frames), ctx, result.notes, clock="none")
        finish_requests(result, frame, source.display)
        return result


# ---------------------------------------------------------------- experiment_metadata.json

METADATA_KEYS = ('"num_concurrency"', '"traffic_scenario"', '"iteration_type"')


@register_file_format
class GenaiBenchMetadata(FileFormat):
    """genai-bench's ``experiment_metadata.json``, written once an experiment folder: the
    command, backend, model, task, the concurrencies (or batch sizes) and traffic scenarios
    it iterates over and each run's limits. Configuration, not figures: recognised and
    kept in a note, never turned into requests."""

    name = "genai_bench_metadata"
    role = "client"
    priority = 32
    samples = (
        Sample(
            "sgl-project/genai-bench regression_main_50req/experiment_metadata.json @ c6e313d8 "
            "(genai-bench 0.0.2 against baseten GLM-4.6)",
            file="genai_bench_experiment_metadata.json",
        ),
    )

    def sniff(self, head: list[str]) -> bool:
        text = "\n".join(head)
        return (
            text.lstrip().startswith("{")
            and '"benchmark_version"' in text
            and '"api_backend"' in text
            and any(k in text for k in METADATA_KEYS)
        )

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        result = ParseResult(formats=[self.name])
        doc = read_json_document(result, source)
        if not isinstance(doc, dict):
            return result
        # configuration: one record read, the rest of its lines say nothing more
        result.parsed, result.noise = 1, result.lines - 1

        def listed(key: str) -> str:
            value = doc.get(key)
            return ", ".join(map(str, value)) if isinstance(value, list) else str(value)

        iteration = doc.get("iteration_type") or "num_concurrency"
        said = [
            f"genai-bench {doc.get('benchmark_version')} experiment metadata (configuration, "
            "no requests)",
            f"backend {doc.get('api_backend')}, model {doc.get('api_model_name')}",
            f"task {doc.get('task')}",
            f"iterates {iteration} over [{listed(iteration)}]",
            f"traffic scenarios [{listed('traffic_scenario')}]",
        ]
        limits = [
            f"{doc[k]} {unit}"
            for k, unit in (("max_requests_per_run", "requests"), ("max_time_per_run_s", "s"))
            if doc.get(k) is not None
        ]
        if limits:
            said.append(f"each run stops at {' or '.join(limits)}")
        if doc.get("metrics_time_unit"):
            said.append(f"its run files' times in {doc['metrics_time_unit']}")
        result.notes.append("; ".join(said))
        return result
