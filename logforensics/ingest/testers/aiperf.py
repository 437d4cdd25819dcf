"""NVIDIA AIPerf ``profile_export.jsonl`` (epoch ns)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

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
    account_document,
    decode_json_objects,
    finish_requests,
    nested,
    place_on_clock,
)

# ---------------------------------------------------------------- AIPerf profile_export.jsonl


# a record's first lines pretty-printed: '{', '"metadata": {', then its keys one a line
PRETTY_RECORD_RE = (
    r'\s*\{\s*\n\s*"metadata"\s*:\s*\{\s*\n\s*"(?:session_num|x_request_id|request_start_ns)"'
)
SWEEP_FOLDER_RE = r"(?:^|_)concurrency_?(\d+)(?:_|$)"  # AIPerf 0.13's "concurrency_8__requests_16"


# AIPerf's phase types that send at a rate (``--request-rate``, ``--arrival-pattern``); a
# ``concurrency`` phase keeps that many requests in flight (0.13's config schema README)
RATE_PHASES = ("poisson", "gamma", "constant", "user_centric")


def run_phases(folder: Path) -> dict[str, dict]:
    """Phase name → {concurrency, rate} AIPerf ran it at, from the run's own config beside
    the records: ``run_config.json`` (0.13: ``cfg.phases[] {name, kind, type, concurrency,
    rate}``), else the summary's ``input_config.phases`` (``profile_export_aiperf.json``,
    written by every run). A rate phase's concurrency is only its cap."""
    for name, path in (
        ("run_config.json", ("cfg",)),
        ("profile_export_aiperf.json", ("input_config",)),
    ):
        try:
            config = json.loads((folder / name).read_text())
        except (OSError, ValueError):
            continue
        for key in path:
            config = (config or {}).get(key) if isinstance(config, dict) else None
        phases = (config or {}).get("phases") if isinstance(config, dict) else None
        found = {
            p["name"]: {
                "concurrency": p.get("concurrency")
                if isinstance(p.get("concurrency"), int)
                else None,
                "rate": float(p["rate"])
                if p.get("type") in RATE_PHASES
                and isinstance(p.get("rate"), int | float)
                and p["rate"] > 0
                else None,
                "file": name,
            }
            for p in phases or []
            if isinstance(p, dict) and p.get("name")
        }
        if found:
            return found
    return {}


def asked_tokens(folder: Path) -> pl.DataFrame | None:
    """(conversation_id, turn_index) → the tokens each request asked for and whether it
    set ``ignore_eos``, from the payloads AIPerf sent (``inputs.json`` beside the records:
    ``data[] {session_id, payloads[] {max_completion_tokens | max_tokens, ignore_eos}}``),
    or None where that file is absent or holds neither."""
    try:
        sessions = json.loads((folder / "inputs.json").read_text()).get("data") or []
    except (OSError, ValueError, AttributeError):
        return None
    rows = [
        (
            session.get("session_id"),
            turn,
            payload.get("max_completion_tokens", payload.get("max_tokens")),
            payload.get("ignore_eos") is True,
        )
        for session in sessions
        if isinstance(session, dict)
        for turn, payload in enumerate(session.get("payloads") or [])
        if isinstance(payload, dict)
    ]
    asked = pl.DataFrame(
        rows,
        schema={"_conv": pl.Utf8, "_turn": pl.Int64, "_asked": pl.Int64, "_ignore_eos": pl.Boolean},
        orient="row",
    )
    asked = asked.filter(pl.col("_asked").is_not_null() & pl.col("_ignore_eos"))
    return asked.unique(["_conv", "_turn"], keep="first") if asked.height else None


def cut_short(records: pl.DataFrame, folder: Path, result: ParseResult) -> pl.DataFrame:
    """`_cut`: the number of tokens a request AIPerf recorded as answered got, where the
    server's own count (``usage_completion_tokens``) is below the tokens it asked with
    ``ignore_eos`` set — the engine could not have stopped early, so the stream was cut
    (vLLM aborts what is in flight when it stops; AIPerf records those 200, not cancelled).
    Null elsewhere; without ``inputs.json`` nothing is claimed."""
    got = nested(records, "metrics", "usage_completion_tokens", "value", dtype=pl.Int64)
    keys = records.select(
        nested(records, "metadata", "conversation_id", dtype=pl.Utf8).alias("_conv"),
        nested(records, "metadata", "turn_index", dtype=pl.Int64).fill_null(0).alias("_turn"),
        got.alias("_got"),
    )
    asked = asked_tokens(folder)
    if asked is None:
        return keys.with_columns(
            pl.lit(None, dtype=pl.Int64).alias("_cut"), pl.lit(None, dtype=pl.Int64).alias("_asked")
        ).select("_cut", "_asked")
    joined = keys.join(asked, on=["_conv", "_turn"], how="left", maintain_order="left")
    cut = joined.select(
        pl.when(pl.col("_got") < pl.col("_asked")).then(pl.col("_got")).alias("_cut"), "_asked"
    )
    n = cut["_cut"].is_not_null().sum()
    if n:
        result.notes.append(
            f"{n} answer(s) AIPerf recorded as successes stopped short of the tokens asked with "
            "ignore_eos (inputs.json; the server's usage_completion_tokens): cut short, failed"
        )
    return cut


def phase_settings(source: SourceFile, phase: pl.Expr, result: ParseResult) -> list[pl.Expr]:
    """Each record's concurrency and rate: its phase's in the run's config, else the
    concurrency of the sweep folder's name."""
    phases = run_phases(source.path.parent)
    if phases:
        result.notes.append(
            f"load from {next(iter(phases.values()))['file']}: "
            + ", ".join(
                f"{name} "
                + (
                    f"rate {p['rate']:g}/s (at most {p['concurrency']} in flight)"
                    if p["rate"]
                    else f"concurrency {p['concurrency']}"
                )
                for name, p in phases.items()
            )
        )
        return [
            phase.replace_strict(
                {n: p[key] for n, p in phases.items()}, default=None, return_dtype=dtype
            ).alias(key)
            for key, dtype in (("concurrency", pl.Int64), ("rate", pl.Float64))
        ]
    found = re.search(SWEEP_FOLDER_RE, source.path.parent.name)
    if found:
        result.notes.append(f"concurrency {found.group(1)} from the run's folder name")
    level = int(found.group(1)) if found else None
    return [
        pl.lit(level, dtype=pl.Int64).alias("concurrency"),
        pl.lit(None, dtype=pl.Float64).alias("rate"),
    ]


@register_file_format
class AIPerfJsonl(FileFormat):
    """NVIDIA AIPerf ``profile_export.jsonl``: one MetricRecordInfo per line."""

    name = "aiperf_jsonl"
    priority = 13
    samples = (
        Sample(
            "ai-dynamo/aiperf docs/tutorials/working-with-profile-exports.md record shape",
            file="aiperf_profile_export.jsonl",
        ),
        Sample(
            "corpus aiperf-haproxy concurrency_4__requests_8/profile_export.jsonl line 4 (AIPerf "
            "0.13.0), pretty-printed as one record (json.dumps(indent=2))",
            file="aiperf_one_record.json",
            tables=(("client_requests", 1),),
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
        # one record pretty-printed (as the docs show it, or json.dump(indent=2) of one)
        return bool(re.match(PRETTY_RECORD_RE, "\n".join(head[:6])))

    @staticmethod
    def _one_pretty_record(source: SourceFile, result: ParseResult):
        """A whole file that is one record over many lines: (that record, no bad lines)."""
        if not re.match(PRETTY_RECORD_RE, "\n".join(source.head(6))):
            return None
        try:
            record = json.loads(source.text)
        except ValueError:
            return None
        if not isinstance(record, dict):
            return None
        account_document(result, source, len(source.text))
        decoded = pl.read_ndjson(io.BytesIO(json.dumps(record).encode()))
        bad = pl.DataFrame(schema={"line_no": pl.Int64, "text": pl.Utf8})
        return decoded.with_columns(pl.lit(1, dtype=pl.Int64).alias("line_no")), bad

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        lines = source.lines
        result = ParseResult(lines=lines.height, formats=[self.name])
        pretty = self._one_pretty_record(source, result)
        decoded, bad = pretty or decode_json_objects(lines)
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
        if pretty is None:  # (one pretty-printed record's lines were counted as a document)
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
        r = pl.concat([r, cut_short(r, source.path.parent, result)], how="horizontal")
        error = nested(r, "error")
        cut = error.is_null() & ~cancelled & pl.col("_cut").is_not_null()
        error_text = (
            pl.when(cut)
            .then(
                pl.format(
                    "cut short: the server counted {} of the {} tokens asked with ignore_eos",
                    pl.col("_cut"),
                    pl.col("_asked"),
                )
            )
            .otherwise(error_text)
        )
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
            (error.is_null() & ~cancelled & ~cut).alias("ok"),
            pl.when(code.is_between(100, 599)).then(code).alias("http_status"),
            pl.when(error.is_not_null() | cut)
            .then(pl.coalesce(error_text, pl.lit("error")))
            .when(cancelled)
            .then(pl.lit("cancelled"))
            .alias("error"),
            pl.coalesce(
                nested(r, "metrics", "output_sequence_length", "value", dtype=pl.Int64),
                nested(r, "metrics", "output_token_count", "value", dtype=pl.Int64),
            ).alias("output_tokens"),
            (
                nested(r, "metrics", "time_to_first_token", "value", dtype=pl.Float64) / per_second
            ).alias("ttft_s"),
            nested(r, "metadata", "x_request_id", dtype=pl.Utf8).alias("request_id"),
            # the peer of its connection, as AIPerf's HTTP trace recorded it
            pl.concat_str(
                [
                    nested(r, "trace_data", "remote_ip", dtype=pl.Utf8),
                    nested(r, "trace_data", "remote_port", dtype=pl.Utf8),
                ],
                separator=":",
            ).alias("server_address"),
            (nested(r, "metadata", "benchmark_phase", dtype=pl.Utf8) == "warmup")
            .fill_null(False)
            .alias("warmup"),
            *phase_settings(source, nested(r, "metadata", "phase_name", dtype=pl.Utf8), result),
            model.source_id(f"{source.display}:", pl.col("line_no")),
        )
        frame = place_on_clock(
            frame, ctx, result.notes, clock="epoch ns (request_start_ns / request_end_ns)"
        )
        finish_requests(result, frame, source.display)
        return result


# ------------------------------------------------- AIPerf's other files of one run

# AIPerf 0.13.0's artifact folder as recorded (corpus aiperf-haproxy): kind → a pattern
# its first lines match. None of them holds per-request records; profile_export.jsonl is
# the record of a run.
ARTIFACT_KINDS = {
    "aggregate": r'"aggregation_type"\s*:\s*"\w+"',
    "server metrics export": r'"endpoints_configured"\s*:',
    "summary": r'"aiperf_version"\s*:\s*"[^"]*",\s*"benchmark_id"',
    "run config": r'"benchmark_id"\s*:\s*"\w+",\s*"sweep_id"\s*:',
    "phase manifest": r'^\{\s*"phases"\s*:\s*\[\s*\{\s*"end_ns"',
    "phase server metrics": r'^\{\s*"data"\s*:\s*\{\s*"benchmark_id"',
    "inputs": r'^\{\s*"data"\s*:\s*\[\s*\{\s*"session_id"',
    "server metrics csv": r"^# AIPerf Server Metrics Export",
    "metrics csv": r"^Metric,avg,min,max,sum,p1,",
    "aggregate csv": r"^metric,mean,std,min,max,cv,",
    "sweep csv": r"^concurrency,requests,\w+_mean,",
    "log": r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3} - \S+ - (?:DEBUG|INFO|WARNING|ERROR|CRITICAL) - ",
    "console": r"^\d{2}:\d{2}:\d{2}\.\d{3} (?:DEBUG|INFO|NOTICE|WARNING|ERROR|SUCCESS)\s+.*\(\w+\.py:\d+\)$"
    r"|NVIDIA AIPerf \|",
}
# vLLM gauges in AIPerf's server-metrics export, as its notes name them
GAUGES = {
    "vllm:num_requests_running": "running",
    "vllm:num_requests_waiting": "waiting",
    "vllm:kv_cache_usage_perc": "KV cache",
}
# Lines of AIPerf's text files that say nothing new: its log and console lines, rich
# boxes and tables, blank lines, and a wrapper's stamped lines ("… aiperf profile: …").
ARTIFACT_LINES = (
    r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3} - \S+ - [A-Z]+ - "
    r"|^\d{2}:\d{2}:\d{2}\.\d{3} [A-Z]+\s"
    r"|^\s*[│┃┏┡└╭╰╞╘┌├┗┣━─═╔╚║|]"
    r"|^\s*$"
    r"|^\S+Z aiperf "
    r"|^\s+NVIDIA AIPerf \|"
    r"|^\s{2,}\S"
    # the console's epilogue (its command, where it wrote what) and advice between panels
    r"|^(?:CLI Command|Benchmark Duration|CSV Export|JSON Export|Server Metrics (?:CSV|JSON) "
    r"Export|Log File):|^'[^']*' --|^--[a-z]|^/\S+$"
    r"|^[A-Za-z][\w/-]*,?(?: +[^\s│┃|]+){5,}\s*$"
)


@register_file_format
class AIPerfArtifacts(FileFormat):
    """AIPerf's other files of a run: its summaries (``profile_export_aiperf.json/.csv``,
    per phase, aggregate and sweep files), ``run_config.json``, ``inputs.json``, the phase
    manifest, the server-metrics export, its log and console. Understood, not re-counted;
    a run's summary gives AIPerf's own figures (requests, errors, latency, throughput)."""

    name = "aiperf_artifacts"
    role = "client"
    priority = 24
    samples = (
        Sample(
            "corpus aiperf-haproxy aiperf/concurrency_4__requests_8/profile_export_aiperf.json "
            "(AIPerf 0.13.0), trimmed to the figures read",
            file="aiperf_profile_export_aiperf.json",
        ),
        Sample(
            "corpus aiperf-haproxy aiperf/concurrency_2__requests_6/logs/aiperf.log (AIPerf 0.13.0), head",
            file="aiperf_run.log",
        ),
    )

    @staticmethod
    def kind(head: list[str]) -> str | None:
        text = "\n".join(head)
        return next((k for k, rx in ARTIFACT_KINDS.items() if re.search(rx, text, re.M)), None)

    def sniff(self, head: list[str]) -> bool:
        return self.kind(head) is not None

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        kind = self.kind(source.head())
        result = ParseResult(formats=[self.name])
        if kind in ("log", "console"):
            lines = source.lines
            known = lines.filter(pl.col("text").str.contains(ARTIFACT_LINES))
            result.lines, result.noise = lines.height, known.height
            result.set_unparsed(lines.filter(~pl.col("text").str.contains(ARTIFACT_LINES)))
        else:
            result.lines, _ = source.stream_facts()
            result.noise = result.lines
        if kind == "summary":
            summary = self._summary(source)
            if summary:
                result.parsed, result.noise = 1, result.lines - 1
                result.tester_summaries.append(summary)
        if kind == "server metrics export":
            result.notes += self._engine_gauges(source)
        result.notes.append(
            f"AIPerf's {kind}: same run as its profile_export.jsonl, not re-counted"
        )
        return result

    @staticmethod
    def _engine_gauges(source: SourceFile) -> list[str]:
        """What the engines' own gauges reached per scraped endpoint, from a server-metrics
        export (statistics over the run, not a time series: shown, not turned into stats)."""
        try:
            doc = json.loads(source.text)
        except ValueError:
            return []
        metrics = doc.get("metrics") if isinstance(doc, dict) else None
        if not isinstance(metrics, dict):
            return []
        peaks: dict[str, list[str]] = {}
        for name, label in GAUGES.items():
            for series in (metrics.get(name) or {}).get("series") or []:
                peak = (series.get("stats") or {}).get("max")
                if isinstance(peak, int | float):
                    value = f"{peak * 100:.1f}%" if name.endswith("_perc") else f"{peak:g}"
                    peaks.setdefault(series.get("endpoint_url", "?"), []).append(f"{label} {value}")
        return [
            f"engine gauges at {endpoint} over the run (max): {', '.join(values)}"
            for endpoint, values in peaks.items()
        ]

    @staticmethod
    def _summary(source: SourceFile) -> dict | None:
        try:
            doc = json.loads(source.text)
        except ValueError:
            return None
        if not isinstance(doc, dict) or "request_count" not in doc:
            return None

        def avg(name: str):
            value = (doc.get(name) or {}).get("avg")
            return value if isinstance(value, int | float) else None

        latency = doc.get("request_latency") or {}
        scale = 1e-3 if latency.get("unit") == "ms" else 1.0
        phases = ((doc.get("input_config") or {}).get("phases")) or []
        folder = source.path.parent
        phase = folder.name if folder.parent.name == "phases" else "profiling"
        level = next(
            (
                p.get("concurrency")
                for p in phases
                if isinstance(p, dict) and p.get("name") == phase
            ),
            None,
        )
        ok, errors = avg("request_count"), avg("error_request_count") or 0
        return {
            "tester": "AIPerf",
            "run": doc.get("benchmark_id"),
            "phase": phase,
            "concurrency": level,
            "sent": int(ok + errors) if ok is not None else None,
            "ok": int(ok) if ok is not None else None,
            "failed": int(errors),
            "latency_s": {
                k: latency[k] * scale
                for k in ("avg", "p50", "p95", "p99")
                if isinstance(latency.get(k), int | float)
            },
            "requests_per_s": avg("request_throughput"),
            "output_tokens_per_s": avg("output_token_throughput"),
        }
