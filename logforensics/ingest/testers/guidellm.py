"""GuideLLM ``benchmarks.json`` (v0.2/0.3 records
``GenerativeTextResponseStats``/``GenerativeTextErrorStats``; v0.4+
``GenerativeRequestStats`` with ``info.timings``; 0.8.1 as recorded in the corpus
incident guidellm-kv) and the same report as ``benchmarks.yaml``. Records may be a
sample: the totals then come from the benchmark's aggregate counts. Each
benchmark's own figures (counts, latency percentiles, rates) are kept as a
tester summary.
"""

from __future__ import annotations

import csv
import io
import json
import re

import polars as pl
import yaml

from logforensics import model
from logforensics.ingest import register_file_format
from logforensics.ingest.base import (
    FileFormat,
    ParseContext,
    ParseResult,
    Sample,
    SourceFile,
)
from logforensics.ingest.noise import CHATTER
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


def warmup_folder(path) -> bool:
    """A tester's separate warm-up run, kept in a folder named for it (``guidellm-warmup/``)."""
    return any(re.search(r"(?i)warm-?up", part) for part in path.parts[-3:-1])


def strategy_label(strategy) -> str | None:
    """GuideLLM's own name for a strategy, as its csv and console print it: ``concurrent@8``."""
    if not isinstance(strategy, dict):
        return None
    kind = strategy.get("type_") or strategy.get("type")
    if kind == "concurrent" and strategy.get("streams") is not None:
        return f"concurrent@{strategy['streams']}"
    return kind


def label_concurrency(label: str) -> int | None:
    """The concurrency a strategy's label names: ``synchronous`` 1, ``concurrent@8`` 8."""
    if label == "synchronous":
        return 1
    found = re.fullmatch(r"concurrent@(\d+)", label or "")
    return int(found.group(1)) if found else None


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


def strategy_rate(bench: dict) -> float | None:
    """The request rate a benchmark's strategy fixed (``constant`` and ``poisson``: their
    ``rate``, requests/s); the others fix a concurrency or none: None."""
    strategy = (bench.get("config") or {}).get("strategy") or (bench.get("args") or {}).get(
        "strategy"
    )
    if not isinstance(strategy, dict):
        return None
    kind = strategy.get("type_") or strategy.get("type")
    value = strategy.get("rate") if kind in ("constant", "poisson") else None
    return float(value) if isinstance(value, int | float) and value > 0 else None


@register_file_format
class GuideLLMReport(FileFormat):
    """GuideLLM ``benchmarks.json`` / ``.yaml``: benchmarks → requests by status."""

    name = "guidellm_report"
    priority = 11
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
        rates: dict[int, float | None] = {}  # benchmark → the rate its strategy fixed
        created: dict[int, int | None] = {}  # benchmark → requests its scheduler created
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
                rates[b] = strategy_rate(bench or {})
                created[b] = self._created(bench or {})
                result.tester_summaries.append(self._summary(b, bench or {}, levels[b]))
            version = (doc.get("metadata") or {}).get("guidellm_version")
            if version:
                result.notes.append(f"GuideLLM {version}")
        account_document(result, source, readable_to)
        n_bench = max([b for b, _, _ in records] + list(totals) + [0]) + 1
        frame = self._rows(records, source.display, n_bench, levels, rates)
        frames = [frame]
        for b, total in totals.items():
            frames.extend(
                self._sampled_out(
                    b, total, records, source.display, n_bench, result.notes, levels.get(b)
                )
            )
            frames.extend(
                self._unlisted(
                    b, total, created.get(b), source.display, n_bench, levels.get(b), result.notes
                )
            )
        if warmup_folder(source.path):
            frames = [f.with_columns(pl.lit(True).alias("warmup")) for f in frames if f.width]
            result.notes.append(
                "a warm-up run (its folder is named so): its requests are warm-up, not measured"
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
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's, where built
        try:
            return yaml.load(source.text, Loader=loader), len(source.text)
        except yaml.YAMLError as exc:
            result.notes.append(f"YAML not readable ({exc}); nothing read")
            account_document(result, source, 0)
            return None, 0

    @staticmethod
    def _created(bench: dict) -> int | None:
        """How many requests the scheduler created (0.8: `scheduler_state.scheduler_constraints
        .max_requests.metadata.created_requests`)."""
        constraints = (bench.get("scheduler_state") or {}).get("scheduler_constraints") or {}
        meta = (constraints.get("max_requests") or {}).get("metadata") or {}
        value = meta.get("created_requests")
        return int(value) if isinstance(value, int | float) else None

    @staticmethod
    def _unlisted(b, total, created, display, n_bench, level, notes) -> list[pl.DataFrame]:
        """Requests the scheduler created that the report neither lists nor counts
        (GuideLLM 0.8.1 closes a benchmark before its last request is recorded)."""
        counted = sum(int((total or {}).get(s) or 0) for s in GUIDELLM_STATUSES)
        if created is None or not total or created <= counted:
            return []
        missing = created - counted
        notes.append(
            f"benchmark {b + 1}: the scheduler created {created} requests but the report "
            f"records {counted}; {missing} sent request(s) have no record: outcome unknown"
        )
        return [
            placeholders(
                missing,
                None,
                f"{display}:benchmark {b + 1} created, not recorded",
                b + 1 if n_bench > 1 else None,
                None,
                level,
            )
        ]

    @staticmethod
    def _summary(b: int, bench: dict, level: int | None) -> dict:
        """GuideLLM's own figures for one benchmark: counts, latency percentiles, rates."""
        metrics = bench.get("metrics") or {}

        def stat(name: str, key: str, status: str = "successful"):
            value = ((metrics.get(name) or {}).get(status) or {}).get(key)
            return value if isinstance(value, int | float) else None

        def pct(name: str, key: str):
            value = (
                ((metrics.get(name) or {}).get("successful") or {}).get("percentiles") or {}
            ).get(key)
            return value if isinstance(value, int | float) else None

        totals = GuideLLMReport._totals(bench) or {}
        strategy = (
            (bench.get("config") or {}).get("strategy")
            or (bench.get("args") or {}).get("strategy")
            or {}
        )
        return {
            "tester": "GuideLLM",
            "run": bench.get("run_id") or (bench.get("config") or {}).get("run_id"),
            "step": b + 1,
            "strategy": strategy_label(strategy),
            "concurrency": level,
            "sent": totals.get("total") or sum(int(totals.get(s) or 0) for s in GUIDELLM_STATUSES),
            "ok": totals.get("successful"),
            "failed": totals.get("errored"),
            "incomplete": totals.get("incomplete"),
            "latency_s": {
                "mean": stat("request_latency", "mean"),
                "p50": pct("request_latency", "p50"),
                "p95": pct("request_latency", "p95"),
                "p99": pct("request_latency", "p99"),
            },
            "requests_per_s": stat("requests_per_second", "mean"),
            "output_tokens_per_s": stat("output_tokens_per_second", "mean"),
        }

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
        records: list[tuple[int, str, dict]],
        display: str,
        n_bench: int,
        levels: dict,
        rates: dict,
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
            pl.col("_bench")
            .replace_strict(rates, default=None, return_dtype=pl.Float64)
            .alias("rate"),
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
            (first_column(f, "time_to_first_token_ms", dtype=pl.Float64) / 1000).alias("ttft_s"),
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


# ------------------------------------------------ GuideLLM's other files of one run

SAME_RUN = "same run as GuideLLM's JSON/YAML report, not re-counted"


@register_file_format
class GuideLLMCsv(FileFormat):
    """GuideLLM ``benchmarks.csv``: one row per benchmark under three header rows (group,
    column, unit), as 0.8.1 wrote it (corpus guidellm-kv). The benchmark's own figures
    (strategy, request counts, latency) become tester summaries; no requests."""

    name = "guidellm_csv"
    role = "client"
    priority = 18
    samples = (
        Sample(
            "corpus guidellm-kv benchmarks.csv (GuideLLM 0.8.1)", file="guidellm_benchmarks.csv"
        ),
    )

    def sniff(self, head: list[str]) -> bool:
        return (
            head[0].startswith("Run Info,Run Info,")
            and len(head) > 1
            and "Run ID,Run Index" in head[1]
        )

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        rows = list(csv.reader(io.StringIO(source.text)))
        result = ParseResult(lines=source.lines.height, formats=[self.name])
        if len(rows) < 3:
            result.set_unparsed(source.lines)
            return result
        columns = [" / ".join(p for p in parts if p) for parts in zip(*rows[:3], strict=False)]
        for i, row in enumerate(rows[3:]):
            record = dict(zip(columns, row, strict=False))

            def number(key: str, record=record) -> float | None:
                try:
                    return float(record.get(key) or "")
                except ValueError:
                    return None

            strategy = record.get("Benchmark / Strategy") or ""  # "concurrent@2"
            counts = {
                k: int(v) if (v := number(f"Request Counts / {k}")) is not None else None
                for k in ("Successful", "Errored", "Incomplete", "Total")
            }
            result.tester_summaries.append(
                {
                    "tester": "GuideLLM",
                    "run": record.get("Run Info / Run ID"),
                    "step": i + 1,
                    "strategy": strategy,
                    "concurrency": label_concurrency(strategy),
                    "sent": counts["Total"],
                    "ok": counts["Successful"],
                    "failed": counts["Errored"],
                    "incomplete": counts["Incomplete"],
                    "latency_s": {
                        "mean": number("Request Latency / Successful Sec / Mean"),
                        "p50": number("Request Latency / Successful Sec / Median"),
                    },
                }
            )
        result.parsed = len(rows) - 3
        result.noise = result.lines - result.parsed
        result.notes.append(f"GuideLLM's per-benchmark summary table: {SAME_RUN}")
        return result


@register_file_format
class GuideLLMHtml(FileFormat):
    """GuideLLM ``benchmarks.html``: a self-contained page of the same report (0.8.1,
    corpus guidellm-kv); understood, not re-counted."""

    name = "guidellm_html"
    role = "client"
    priority = 19
    samples = (
        Sample(
            "corpus guidellm-kv benchmarks.html (GuideLLM 0.8.1), head",
            file="guidellm_report_head.html",
        ),
    )

    def sniff(self, head: list[str]) -> bool:
        text = "\n".join(head[:12])
        return "<html" in text.lower() and "<title>GuideLLM" in text

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        lines, _ = source.stream_facts()
        result = ParseResult(lines=lines, noise=lines, formats=[self.name])
        result.notes.append(f"GuideLLM's HTML report: {SAME_RUN}")
        return result


# GuideLLM's console as printed with --disable-console-interactive (0.8.1, corpus
# guidellm-kv): loguru lines "YY-MM-DD HH:MM:SS|LEVEL |module:func:line - text", rich
# tables, "✔/ℹ/⚠/…" status lines with indented dict dumps, and a wrapper's stamped lines.
CONSOLE_LINES = {
    "loguru": r"^\d{2}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\|[A-Z]+ *\|guidellm\.",
    "table": r"^\|[-=| ]*\||^\|.*\|\s*$",
    "status": r"^[✔ℹ⚠…✘×]\s",
    "continuation": r"^ {2}\S|^ {4,}\S|^\s*\[✔",
    "wrapper": r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z? guidellm ",
    "footnote": r"^\* confidence interval|^Warnings \(|^\s*This means that",
    "python_warning": CHATTER["python_warning"],
}
PROGRESS_RE = (
    r"Benchmark (?P<bench>\d+) \((?P<strategy>[^)]*)\): completed \| elapsed=(?P<elapsed>[\d.]+)s \| "
    r"successful=(?P<ok>\d+) errored=(?P<err>\d+) incomplete=(?P<inc>\d+) \| "
    r"requests/s=(?P<rps>[\d.]+) output_tokens/s=(?P<tps>[\d.]+)"
)


@register_file_format
class GuideLLMConsole(FileFormat):
    """GuideLLM's console output: understood (noise), its ``completed`` progress lines give
    each benchmark's own counts as tester summaries."""

    name = "guidellm_console"
    role = "client"
    priority = 20
    samples = (
        Sample(
            "corpus guidellm-kv client-stdout.log (GuideLLM 0.8.1 console), excerpt",
            file="guidellm_console.log",
        ),
    )

    def sniff(self, head: list[str]) -> bool:
        text = "\n".join(head)
        return bool(
            re.search(r"\|guidellm\.|✔ \w+HTTPBackend backend validated|^\S+ guidellm ", text, re.M)
        )

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        lines = source.lines
        text = pl.col("text")
        known = pl.any_horizontal(text.str.contains(rx) for rx in CONSOLE_LINES.values())
        frame = lines.with_columns(
            (known | (text.str.strip_chars() == "")).alias("known"),
            text.str.extract_groups(PROGRESS_RE).alias("_p"),
        ).unnest("_p")
        result = ParseResult(lines=lines.height, formats=[self.name])
        done = frame.filter(pl.col("bench").is_not_null())
        for row in done.iter_rows(named=True):
            strategy = row["strategy"]
            result.tester_summaries.append(
                {
                    "tester": "GuideLLM (console)",
                    "step": int(row["bench"]),
                    "strategy": strategy,
                    "concurrency": label_concurrency(strategy),
                    "sent": int(row["ok"]) + int(row["err"]) + int(row["inc"]),
                    "ok": int(row["ok"]),
                    "failed": int(row["err"]),
                    "incomplete": int(row["inc"]),
                    "requests_per_s": float(row["rps"]),
                    "output_tokens_per_s": float(row["tps"]),
                    "line": row["line_no"],
                }
            )
        result.parsed = done.height
        result.noise = frame.filter(pl.col("known")).height - done.height
        result.set_unparsed(frame.filter(~pl.col("known")))
        result.notes.append(
            f"GuideLLM's console: its own figures per benchmark are kept; {SAME_RUN}"
        )
        return result


# ------------------------------------------------ GuideLLM scenario files (--scenario)

# The load kinds GuideLLM's profiles take (0.3 `rate_type`, 0.4+ `profile`, 0.7 `kind`)
GUIDELLM_PROFILES = r"(?:synchronous|concurrent|throughput|async|constant|poisson|sweep|replay)"
SCENARIO_JSON_RES = (
    # 0.7+: {"spec": {"profile": {"kind": …}, "data": [...], "constraints": [...]}}
    r'"spec"\s*:\s*\{\s*"(?:profile|data|backend|constraints)"\s*:',
    # 0.3 `rate_type`, 0.4-0.6 `profile` as a word
    r'^\s*\{\s*"(?:rate_type|profile)"\s*:\s*"' + GUIDELLM_PROFILES + '"',
)
SCENARIO_YAML_RES = (
    r"^(?:rate_type|profile):\s*['\"]?" + GUIDELLM_PROFILES + r"['\"]?\s*$",
    r"^spec:\s*$\n^\s+(?:profile|data|backend|constraints):",
)
SCENARIO_TOKENS = ("prompt_tokens", "output_tokens")


def _scenario_json(text: str) -> bool:
    return any(re.search(rx, text, re.M) for rx in SCENARIO_JSON_RES)


def _scenario_yaml(text: str) -> bool:
    return any(re.search(rx, text, re.M) for rx in SCENARIO_YAML_RES)


def _listing(value) -> str:
    return ", ".join(map(str, value)) if isinstance(value, list) else str(value)


def scenario_settings(doc: dict) -> dict:
    """What a GuideLLM scenario says about the load: profile, rates or streams, limits,
    target, model and the synthetic data's token counts (0.3: rate_type/max_seconds,
    0.4-0.6: profile/rate/max_seconds, 0.7+: spec.profile/spec.constraints)."""
    spec = doc.get("spec") if isinstance(doc.get("spec"), dict) else doc
    said: dict = {}
    profile = spec.get("profile", spec.get("rate_type"))
    if isinstance(profile, dict):
        said["profile"] = profile.get("kind")
        for key in ("streams", "rate", "max_concurrency", "sweep_size"):
            if profile.get(key) is not None:
                said[key] = profile[key]
    elif profile is not None:
        said["profile"] = profile
    if spec.get("rate") is not None:
        said["rate"] = spec["rate"]
    for key in ("max_seconds", "max_requests"):
        value = spec.get(key, spec.get(key.replace("_", "-")))
        if value is not None:
            said[key] = value
    for constraint in spec.get("constraints") or []:
        if not isinstance(constraint, dict):
            continue
        kind = constraint.get("kind")
        value = next(
            (constraint[k] for k in ("count", "seconds", "value") if k in constraint), None
        )
        if kind == "max_duration":
            said["max_seconds"] = value
        elif kind:
            said[kind] = value
    backend = spec.get("backend") if isinstance(spec.get("backend"), dict) else {}
    for key in ("target", "model"):
        value = spec.get(key, backend.get(key))
        if value is not None:
            said[key] = value
    data = spec.get("data")
    for item in data if isinstance(data, list) else [data]:
        if isinstance(item, str) and "prompt_tokens" in item:  # "prompt_tokens=512,…"
            item = dict(p.split("=", 1) for p in item.split(",") if "=" in p)
        if isinstance(item, dict):
            for key in SCENARIO_TOKENS:
                if item.get(key) is not None:
                    said.setdefault(key, item[key])
    return said


@register_file_format
class GuideLLMScenario(FileFormat):
    """A GuideLLM scenario (``guidellm benchmark --scenario FILE``, JSON or YAML): the
    run's configuration, as the user wrote it or as GuideLLM ships it. No figures and no
    requests: what it says about the load (profile, rates or streams, time and request
    limits, target, model, prompt and output tokens) is kept in a note."""

    name = "guidellm_scenario"
    role = "client"
    priority = 33
    samples = (
        Sample(
            "vllm-project/guidellm src/guidellm/benchmark/scenarios/chat.json @ e2a4066e "
            "(GuideLLM 0.3.0's built-in scenario)",
            file="guidellm_scenario_chat_v03.json",
        ),
        Sample(
            "vllm-project/guidellm src/guidellm/benchmark/scenarios/chat.json @ 69150f76 "
            "(GuideLLM 0.7.0's built-in scenario)",
            file="guidellm_scenario_chat_v07.json",
        ),
        Sample(
            "vllm-project/guidellm pull request #432 description (a user's YAML scenario)",
            file="guidellm_scenario_pr432.yaml",
        ),
    )

    def sniff(self, head: list[str]) -> bool:
        text = "\n".join(head)
        if text.lstrip().startswith("{"):
            return _scenario_json(text)
        return _scenario_yaml(text)

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        result = ParseResult(formats=[self.name])
        text = source.text
        if text.lstrip().startswith("{"):
            try:
                doc = json.loads(text)
            except ValueError as exc:
                account_document(result, source, 0)
                result.notes.append(f"not valid JSON ({exc}): nothing read")
                return result
        else:
            doc, _ = GuideLLMReport._yaml(source, result)  # unreadable: noted, lines unparsed
            if doc is None and result.notes:
                return result
        if not isinstance(doc, dict):
            account_document(result, source, 0)
            result.notes.append("the scenario is not a mapping: nothing read")
            return result
        account_document(result, source, len(text))
        # configuration: one record read, the rest of its lines say nothing more
        result.parsed, result.noise = 1, result.lines - 1
        said = scenario_settings(doc)
        if said.get("profile") == "concurrent" and "rate" in said:  # 0.4-0.6: rate = streams
            said = {("rate (streams)" if k == "rate" else k): v for k, v in said.items()}
        shown = "; ".join(f"{k.replace('_', ' ')} {_listing(v)}" for k, v in said.items())
        result.notes.append(
            "GuideLLM scenario (the run's configuration, no requests)"
            + (f": {shown}" if shown else "")
        )
        return result
