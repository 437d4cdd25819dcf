"""LLMPerf ``*_individual_responses.json`` (upstream
records carry no timestamps).
"""

from __future__ import annotations

import json
from pathlib import Path

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
    finish_requests,
    first_column,
    json_records,
    place_on_clock,
    records_frame,
    to_seconds,
)

# ---------------------------------------------------------------- LLMPerf individual responses

LLMPERF_START = (
    "start_time",
    "request_start_time",
    "req_start_time",
    "sample_time",
    "start_timestamp",
)
LLMPERF_END = ("end_time", "request_end_time", "end_timestamp")


def summary_concurrency(path: Path, result: ParseResult) -> int | None:
    """The run's ``num_concurrent_requests``, from the ``*_summary.json`` LLMPerf writes
    beside ``*_individual_responses.json`` (token_benchmark_ray.py's two files)."""
    sibling = path.with_name(path.name.replace("_individual_responses.json", "_summary.json"))
    if sibling == path:
        return None
    try:
        level = json.loads(sibling.read_text()).get("num_concurrent_requests")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(level, int):
        return None
    result.notes.append(f"concurrency {level} from {sibling.name} (num_concurrent_requests)")
    return level


@register_file_format
class LLMPerfResponses(FileFormat):
    """LLMPerf ``*_individual_responses.json``: a list of per-request metric dicts."""

    name = "llmperf_responses"
    priority = 15
    samples = (
        Sample(
            "ray-project/llmperf token_benchmark_ray.py output; values invented",
            file="llmperf_individual_responses.json",
        ),
    )
    role = "client"

    def sniff(self, head: list[str]) -> bool:
        text = "\n".join(head)
        return text.lstrip().startswith("[") and (
            '"end_to_end_latency_s"' in text or ('"error_code"' in text and '"ttft_s"' in text)
        )

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        result = ParseResult(formats=[self.name])
        _, records = json_records(source, result)
        if not records:
            return result
        f = records_frame(records).with_row_index("_rec", offset=1)
        code_text = first_column(f, "error_code", dtype=pl.Utf8).str.strip_chars()
        code = code_text.cast(pl.Float64, strict=False).cast(pl.Int64, strict=False)
        msg = first_column(f, "error_msg", dtype=pl.Utf8)
        # upstream sets error_code only on failure (an HTTP status, or -1)
        ok = code_text.is_null() | (code_text == "")
        start, end, notes = self._times(f, ctx)
        result.notes.extend(notes)
        latency = first_column(f, "end_to_end_latency_s", dtype=pl.Float64)
        level = summary_concurrency(source.path, result)
        frame = f.select(
            (pl.col("_rec") - 1).cast(pl.Int64).alias("index"),
            pl.lit(level, dtype=pl.Int64).alias("concurrency"),
            start.alias("_start"),
            end.alias("_end"),
            pl.when(ok | (latency > 0)).then(latency).alias("latency_s"),
            ok.alias("ok"),
            pl.when(code.is_between(100, 599)).then(code).alias("http_status"),
            pl.when(~ok)
            .then(
                pl.when(msg.is_not_null() & (msg != ""))
                .then(msg)
                .otherwise(pl.format("error_code {}", code_text))
            )
            .alias("error"),
            first_column(f, "number_output_tokens", dtype=pl.Int64).alias("output_tokens"),
            pl.when(ok).then(first_column(f, "ttft_s", dtype=pl.Float64)).alias("ttft_s"),
            first_column(f, "request_id", "x_request_id", "id", dtype=pl.Utf8).alias("request_id"),
            model.source_id(f"{source.display}:record ", pl.col("_rec")),
        )
        frame = place_on_clock(frame, ctx, result.notes, clock="the record's start/end fields")
        finish_requests(result, frame, source.display)
        return result

    @staticmethod
    def _times(f: pl.DataFrame, ctx: ParseContext) -> tuple[pl.Expr, pl.Expr, list[str]]:
        """Upstream records have no times; forks add start/end (epoch, ISO, or seconds since start)."""

        def seconds(names):
            name = next((n for n in names if n in f.columns), None)
            if name is None:
                return pl.lit(None, dtype=pl.Float64), None
            if f.schema[name] == pl.Utf8:
                numeric = pl.col(name).cast(pl.Float64, strict=False)
                iso = timeparse.iso_to_utc(pl.col(name), ctx.client_tz).dt.epoch("us") / 1e6
                return pl.coalesce(to_seconds(numeric), iso), name
            return to_seconds(pl.col(name)), name

        start, start_name = seconds(LLMPERF_START)
        end, end_name = seconds(LLMPERF_END)
        if start_name is None and end_name is None:
            return (
                start,
                end,
                [
                    "no per-request timestamps (upstream LLMPerf records none): the requests "
                    "count in the totals but cannot be matched to server records one by one"
                ],
            )
        used = ", ".join(n for n in (start_name, end_name) if n)
        return start, end, [f"per-request times from `{used}` (a fork's addition)"]


SUMMARY_KEYS = ("results_num_completed_requests", "results_error_rate", "num_concurrent_requests")


@register_file_format
class LLMPerfSummary(FileFormat):
    """LLMPerf ``*_summary.json``: the run's own figures (requests started, completed,
    errors, end-to-end latency quantiles, throughput, concurrency); no requests, the same
    run as its ``*_individual_responses.json``. Key names from ray-project/llmperf
    ``token_benchmark_ray.py`` (``results_`` + metric + ``_quantiles_pNN`` / ``_mean``)."""

    name = "llmperf_summary"
    role = "client"
    priority = 10
    samples = (
        Sample(
            "ray-project/llmperf token_benchmark_ray.py summary (keys as written with "
            "json.dump(indent=4)); values invented",
            file="llmperf_summary.json",
        ),
    )

    def sniff(self, head: list[str]) -> bool:
        text = "\n".join(head)
        return (
            text.lstrip().startswith("{")
            and sum(k in text for k in SUMMARY_KEYS) >= 1
            and ('"results_' in text)
        )

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        lines, _ = source.stream_facts()
        result = ParseResult(lines=lines, noise=lines, formats=[self.name])
        try:
            doc = json.loads(source.text)
        except ValueError as exc:
            result.noise = 0
            result.set_unparsed(source.lines)
            result.notes.append(f"not readable JSON ({exc}): nothing read")
            return result

        def number(key: str):
            value = doc.get(key)
            return value if isinstance(value, int | float) else None

        started, done = (
            number("results_num_requests_started"),
            number("results_num_completed_requests"),
        )
        errors = number("results_number_errors")
        result.tester_summaries.append(
            {
                "tester": "LLMPerf",
                "concurrency": number("num_concurrent_requests"),
                "sent": started,
                "ok": (started - errors) if started is not None and errors is not None else done,
                "failed": errors,
                "latency_s": {
                    "mean": number("results_end_to_end_latency_s_mean"),
                    "p50": number("results_end_to_end_latency_s_quantiles_p50"),
                    "p95": number("results_end_to_end_latency_s_quantiles_p95"),
                    "p99": number("results_end_to_end_latency_s_quantiles_p99"),
                },
                "output_tokens_per_s": number("results_mean_output_throughput_token_per_s"),
            }
        )
        result.parsed, result.noise = 1, lines - 1
        result.notes.append(
            "LLMPerf's run summary: same run as its individual responses, not re-counted"
        )
        return result
