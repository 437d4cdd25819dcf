"""Load testers' own result files → `client_requests`.

Each format reads what the tool writes, as its source code writes it
(docs/formats.md §6 records the shapes and where they were read):

* `guidellm_report` — GuideLLM ``benchmarks.json`` (v0.2/0.3 records
  ``GenerativeTextResponseStats``/``GenerativeTextErrorStats``; v0.4+
  ``GenerativeRequestStats`` with ``info.timings``), and ``benchmarks.yaml``
  when PyYAML is importable. Records may be a sample: the totals then come
  from the benchmark's aggregate counts.
* `vllm_bench` — ``vllm bench serve`` / ``benchmark_serving.py --save-result``
  (per-request arrays only with ``--save-detailed``; one object per line with
  ``--append-result``). ``start_times`` are ``time.perf_counter()`` readings.
* `aiperf_jsonl` — NVIDIA AIPerf ``profile_export.jsonl`` (epoch ns).
* `genai_perf_json` — genai-perf / perf_analyzer ``profile_export.json``
  (``system_clock`` ns).
* `llmperf_responses` — LLMPerf ``*_individual_responses.json`` (upstream
  records carry no timestamps).
* `locust_csv` — Locust ``--csv`` files: aggregates only.
* `k6_json` — k6 ``--out json`` points, stamped at each request's end.

Clocks. Every format's times are first read as seconds on the file's own
clock (`_start`, `_end`). Seconds ≥ 1e9 are epoch time; smaller values are a
counter with an arbitrary zero (``perf_counter``, "seconds since the test
began") and need an anchor: the file's own (vLLM's ``date``), else
``ParseContext.client_anchor`` (``--started-at``, taken as the first
request's start), else the requests keep no time, still count in the totals,
and a note says they cannot be placed on the servers' clock. Every file's
notes say how its absolute times were obtained.

Whole-document JSON is loaded once with ``json.loads``; a document cut short
is read as far as it goes (complete records are salvaged) and the rest of its
lines are reported unparsed. JSON-lines formats are decoded by polars; a bad
line is counted, never fatal.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from http import HTTPStatus
from zoneinfo import ZoneInfo

import polars as pl

from logforensics import model, timeparse
from logforensics.ingest import register_file_format
from logforensics.ingest.base import (
    UNPARSED_EXAMPLES,
    FileFormat,
    ParseContext,
    ParseResult,
    SourceFile,
    decode_json_objects,
)

EPOCH_MIN_S = 1e9  # 2001-09-09: smaller "times" are a counter, not wall time
PER_SECOND = {"ns": 1e9, "us": 1e6, "µs": 1e6, "ms": 1e3, "s": 1.0, "sec": 1.0}  # value / this
PHRASE_STATUS = {s.phrase.lower(): s.value for s in HTTPStatus}
STATUS_IN_TEXT_RE = (
    r"(?i)(?:status(?:[ _]?code)?\s*[:=]?\s*|HTTP(?:/[\d.]+)?\s+|HTTP Error\s+|'|\()([1-5]\d{2})\b"
)
REQUESTS_ERROR_RE = r"(?:^|\s)([1-5]\d{2})\s+(?:Server|Client)\s+Error"  # python-requests
NOTE_EXAMPLES = 3
_DECODER = json.JSONDecoder()


# ---------------------------------------------------------------- shared helpers


def _status_from_text(text: pl.Expr) -> pl.Expr:
    """An HTTP status named in an error text: `... 503 ...` forms, or a bare reason phrase."""
    return pl.coalesce(
        text.str.extract(STATUS_IN_TEXT_RE, 1).cast(pl.Int64, strict=False),
        text.str.extract(REQUESTS_ERROR_RE, 1).cast(pl.Int64, strict=False),
        text.str.strip_chars()
        .str.to_lowercase()
        .replace_strict(PHRASE_STATUS, default=None, return_dtype=pl.Int64),
    )


def _seconds(value: pl.Expr) -> pl.Expr:
    """A number on any clock to seconds: epoch ns/µs/ms told apart by magnitude."""
    v = value.cast(pl.Float64, strict=False)
    return (
        pl.when(v.abs() >= 1e17)
        .then(v / 1e9)
        .when(v.abs() >= 1e14)
        .then(v / 1e6)
        .when(v.abs() >= 1e11)
        .then(v / 1e3)
        .otherwise(v)
    )


def _to_utc(seconds: pl.Expr) -> pl.Expr:
    micros = (seconds * 1e6).round(0).cast(pl.Int64, strict=False)
    return pl.from_epoch(micros, time_unit="us").dt.replace_time_zone("UTC")


def _get(frame: pl.DataFrame, *path: str, dtype: pl.DataType | None = None) -> pl.Expr:
    """A nested struct field (``_get(f, "metadata", "x_request_id")``), or null if absent."""
    missing = pl.lit(None, dtype=dtype or pl.Null)
    if path[0] not in frame.columns:
        return missing
    expr, dtype_now = pl.col(path[0]), frame.schema[path[0]]
    for name in path[1:]:
        fields = (
            {f.name: f.dtype for f in dtype_now.fields} if isinstance(dtype_now, pl.Struct) else {}
        )
        if name not in fields:
            return missing
        expr, dtype_now = expr.struct.field(name), fields[name]
    return expr.cast(dtype, strict=False) if dtype is not None else expr


def _col(frame: pl.DataFrame, *names: str, dtype: pl.DataType | None = None) -> pl.Expr:
    """The first of several column spellings present in a flat frame, or null."""
    for name in names:
        if name in frame.columns:
            return pl.col(name).cast(dtype, strict=False) if dtype is not None else pl.col(name)
    return pl.lit(None, dtype=dtype or pl.Null)


def _frame(records: list[dict]) -> pl.DataFrame:
    """Records (dicts, possibly nested) to a flat frame with dotted column names."""
    if not records:
        return pl.DataFrame()
    try:
        return pl.json_normalize(records, separator=".", infer_schema_length=None)
    except Exception:  # mixed value types in one field: read everything as text
        flat = [
            {
                k: (None if v is None else json.dumps(v) if isinstance(v, dict | list) else str(v))
                for k, v in r.items()
            }
            for r in records
        ]
        return pl.DataFrame(flat, infer_schema_length=None)


def _examples(lines: pl.DataFrame) -> list[tuple[int, str]]:
    return [
        (n, t[:300]) for n, t in lines.select("line_no", "text").head(UNPARSED_EXAMPLES).iter_rows()
    ]


def _account_document(result: ParseResult, source: SourceFile, readable_to: int) -> None:
    """Whole-document accounting: lines ending before `readable_to` (a character
    offset: the end of the last record read) are parsed, blank ones noise, the
    rest (a document cut short) unparsed."""
    lines = source.lines
    parts = source.text.split("\n")
    if parts and parts[-1] == "":
        parts.pop()
    ends = pl.Series("end", parts, dtype=pl.Utf8).str.len_chars().cast(pl.Int64) + 1
    frame = lines.with_columns(ends.cum_sum().alias("end") - 1)
    blank = pl.col("text").str.strip_chars() == ""
    readable = pl.col("end") <= readable_to
    result.lines = lines.height
    result.noise = frame.filter(blank).height
    result.parsed = frame.filter(~blank & readable).height
    result.unparsed_examples = _examples(frame.filter(~blank & ~readable))


def _salvage_array(text: str, start: int) -> tuple[list, int]:
    """The complete elements of the JSON array opening at ``text[start]``, and where they end."""
    items, pos, end_good = [], start + 1, start + 1
    gap = re.compile(r"[\s,]*")
    while True:
        pos = gap.match(text, pos).end()
        if pos >= len(text) or text[pos] == "]":
            return items, (pos + 1 if pos < len(text) else end_good)
        try:
            item, pos = _DECODER.raw_decode(text, pos)
        except ValueError:
            return items, end_good
        items.append(item)
        end_good = pos


def _salvage_objects(text: str, start_re: str) -> list[tuple[int, int, dict]]:
    """Complete JSON objects opening where `start_re` matches, in document order."""
    out, pos = [], 0
    for m in re.finditer(start_re, text):
        if m.start() < pos:
            continue  # inside the previous object
        try:
            obj, end = _DECODER.raw_decode(text, m.start())
        except ValueError:
            continue
        if isinstance(obj, dict):
            out.append((m.start(), end, obj))
            pos = end
    return out


def _anchor_utc(anchor: dt.datetime) -> dt.datetime:
    return anchor if anchor.tzinfo else anchor.replace(tzinfo=dt.timezone.utc)


def _iso(seconds: float) -> str:
    return (
        dt.datetime.fromtimestamp(seconds, dt.timezone.utc)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


def _place(
    frame: pl.DataFrame,
    ctx: ParseContext,
    notes: list[str],
    *,
    clock: str,
    file_zero: float | None = None,
    file_zero_how: str | None = None,
    prefix: str = "",
) -> pl.DataFrame:
    """`_start`/`_end` (seconds on the file's clock) → UTC `started_at`/`ended_at`.

    `clock` names the file's clock for the notes. Per row, seconds ≥ 1e9 are
    epoch time; smaller ones are shifted by the anchor (the file's own, else
    --started-at taken as the first request's start) or left null.
    """
    start = pl.col("_start").cast(pl.Float64)
    end = pl.col("_end").cast(pl.Float64)
    first = pl.coalesce(start, end)
    kinds = frame.select(
        (first >= EPOCH_MIN_S).sum().alias("epoch"),
        (first < EPOCH_MIN_S).sum().alias("relative"),
        first.is_null().sum().alias("untimed"),
        first.filter(first < EPOCH_MIN_S).min().alias("rel_first"),
    ).row(0, named=True)
    offset = None
    if kinds["epoch"]:
        notes.append(f"{prefix}absolute times: {clock}, from the file ({kinds['epoch']} requests)")
    if kinds["relative"]:
        what = f"{prefix}{kinds['relative']} requests timed on a counter ({clock}), not wall time"
        if file_zero is not None:
            offset = file_zero
            notes.append(f"{what}: anchored by {file_zero_how}")
            if ctx.client_anchor is not None:
                other = _anchor_utc(ctx.client_anchor).timestamp() - kinds["rel_first"]
                notes.append(
                    f"{prefix}--started-at not used for this file: it carries its own anchor "
                    f"(the two differ by {other - file_zero:+.1f} s)"
                )
        elif ctx.client_anchor is not None:
            anchor = _anchor_utc(ctx.client_anchor).timestamp()
            offset = anchor - kinds["rel_first"]
            notes.append(
                f"{what}: anchored at --started-at {_iso(anchor)} "
                "(taken as the first request's start)"
            )
        else:
            notes.append(
                f"{what}, and no anchor (none in the file, no --started-at): they are not "
                "placeable on the servers' clock; they still count in the totals"
            )
    if kinds["untimed"]:
        notes.append(
            f"{prefix}{kinds['untimed']} requests have no per-request time in the file: not "
            "placeable on the servers' clock one by one; they still count in the totals"
        )
    shift = pl.lit(offset, dtype=pl.Float64)
    epochish = first >= EPOCH_MIN_S

    def wall(seconds: pl.Expr) -> pl.Expr:
        return _to_utc(pl.when(epochish).then(seconds).otherwise(seconds + shift))

    latency = pl.coalesce(pl.col("latency_s").cast(pl.Float64), (end - start).round(6))
    span = pl.duration(microseconds=(pl.col("latency_s") * 1e6).round(0).cast(pl.Int64))
    frame = frame.with_columns(latency.alias("latency_s"))
    frame = frame.with_columns(pl.coalesce(wall(start), wall(end) - span).alias("started_at"))
    return frame.with_columns(pl.coalesce(wall(end), pl.col("started_at") + span).alias("ended_at"))


def _note_duplicates(frame: pl.DataFrame, notes: list[str]) -> None:
    if "request_id" not in frame.columns:
        return
    dupes = (
        frame.filter(pl.col("request_id").is_not_null())
        .group_by("request_id", maintain_order=True)
        .agg(pl.col("source"))
        .filter(pl.col("source").list.len() > 1)
        .with_columns(pl.col("source").list.eval(model.source_label("")))
    )
    if dupes.height:
        shown = "; ".join(
            f"{rid} at {', '.join(src[:3])}" for rid, src in dupes.head(NOTE_EXAMPLES).iter_rows()
        )
        notes.append(
            f"{dupes.height} request id(s) appear more than once; every copy is kept as its "
            f"own request: {shown}"
        )


def _placeholders(
    n: int, ok: bool, source: str, step: int | None, error: str | None = None
) -> pl.DataFrame:
    """Requests an aggregate counts but no per-request record describes."""
    return pl.DataFrame(
        {
            "step": pl.Series([step] * n, dtype=pl.Int64),
            "ok": pl.Series([ok] * n, dtype=pl.Boolean),
            "error": pl.Series([error] * n, dtype=pl.Utf8),
            "source": pl.Series(
                [model.source_prefix(source) * model.LINE_SPAN] * n, dtype=model.SOURCE
            ),
            "_start": pl.Series([None] * n, dtype=pl.Float64),
            "_end": pl.Series([None] * n, dtype=pl.Float64),
            "latency_s": pl.Series([None] * n, dtype=pl.Float64),
        }
    )


def _finish(result: ParseResult, frame: pl.DataFrame, display: str) -> None:
    frame = frame.with_columns(
        pl.lit(display).alias("run"),
        pl.col("warmup").fill_null(False)
        if "warmup" in frame.columns
        else pl.lit(False).alias("warmup"),
    )
    _note_duplicates(frame, result.notes)
    result.add("client_requests", frame)


def _concat(frames: list[pl.DataFrame]) -> pl.DataFrame:
    return (
        pl.concat([f for f in frames if f.width], how="diagonal_relaxed")
        if frames
        else pl.DataFrame()
    )


# ---------------------------------------------------------------- GuideLLM

GUIDELLM_RECORD_RE = r'\{\s*"type_"\s*:\s*"generative_(?:request_stats|text_response|text_error)"'
GUIDELLM_STATUSES = ("successful", "incomplete", "errored")


@register_file_format
class GuideLLMReport(FileFormat):
    """GuideLLM ``benchmarks.json`` / ``.yaml``: benchmarks → requests by status."""

    name = "guidellm_report"
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
        if not text.lstrip().startswith("{"):
            doc, readable_to = self._yaml(source, result)
            if doc is None:
                return result
        else:
            try:
                doc, readable_to = json.loads(text), len(text)
            except ValueError as exc:
                doc = None
                salvaged = _salvage_objects(text, GUIDELLM_RECORD_RE)
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
                _account_document(result, source, 0)
                return result
            for b, bench in enumerate(doc["benchmarks"]):
                requests = (bench or {}).get("requests") or {}
                for status in GUIDELLM_STATUSES:
                    records.extend((b, status, r) for r in requests.get(status) or [])
                totals[b] = self._totals(bench or {})
            version = (doc.get("metadata") or {}).get("guidellm_version")
            if version:
                result.notes.append(f"GuideLLM {version}")
        _account_document(result, source, readable_to)
        n_bench = max([b for b, _, _ in records] + list(totals) + [0]) + 1
        frame = self._rows(records, source.display, n_bench)
        frames = [frame]
        for b, total in totals.items():
            frames.extend(
                self._sampled_out(b, total, records, source.display, n_bench, result.notes)
            )
        frame = _place(
            _concat(frames),
            ctx,
            result.notes,
            clock="epoch seconds (GuideLLM request_start / request_end)",
        )
        _finish(result, frame, source.display)
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
            _account_document(result, source, 0)
            return None, 0
        try:
            return yaml.safe_load(source.text), len(source.text)
        except yaml.YAMLError as exc:
            result.notes.append(f"YAML not readable ({exc}); nothing read")
            _account_document(result, source, 0)
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
    def _rows(records: list[tuple[int, str, dict]], display: str, n_bench: int) -> pl.DataFrame:
        if not records:
            return pl.DataFrame()
        frame = _frame([r for _, _, r in records]).with_columns(
            pl.Series("_bench", [b for b, _, _ in records], dtype=pl.Int64),
            pl.Series("_status", [s for _, s, _ in records], dtype=pl.Utf8),
            pl.int_range(1, len(records) + 1, dtype=pl.Int64).alias("_rec"),
        )
        f = frame
        start = pl.coalesce(
            _col(f, "request_start_time", dtype=pl.Float64),
            _col(f, "info.timings.request_start", dtype=pl.Float64),
            _col(f, "info.timings.resolve_start", dtype=pl.Float64),
            _col(f, "start_time", dtype=pl.Float64),
        )
        end = pl.coalesce(
            _col(f, "request_end_time", dtype=pl.Float64),
            _col(f, "info.timings.request_end", dtype=pl.Float64),
            _col(f, "info.timings.resolve_end", dtype=pl.Float64),
            _col(f, "end_time", dtype=pl.Float64),
        )
        error = pl.coalesce(_col(f, "info.error", dtype=pl.Utf8), _col(f, "error", dtype=pl.Utf8))
        status = pl.col("_status")
        return f.select(
            (pl.col("_bench") + 1 if n_bench > 1 else pl.lit(None, dtype=pl.Int64)).alias("step"),
            _seconds(start).alias("_start"),
            _seconds(end).alias("_end"),
            _col(f, "request_latency", dtype=pl.Float64).alias("latency_s"),
            (status == "successful").alias("ok"),
            _status_from_text(error).alias("http_status"),
            pl.when(status == "successful")
            .then(pl.lit(None, dtype=pl.Utf8))
            .otherwise(pl.coalesce(error, pl.format("{} (no error text)", status)))
            .alias("error"),
            pl.coalesce(
                _col(f, "output_tokens", dtype=pl.Int64),
                _col(f, "output_metrics.total_tokens", dtype=pl.Int64),
            ).alias("output_tokens"),
            # v0.4+ response_id is the server's own id (chatcmpl-…): the join key with vLLM
            pl.coalesce(
                _col(f, "response_id", dtype=pl.Utf8),
                _col(f, "request_id", dtype=pl.Utf8),
                _col(f, "info.request_id", dtype=pl.Utf8),
            ).alias("request_id"),
            model.source_id(f"{display}:record ", pl.col("_rec")),
        )

    @staticmethod
    def _sampled_out(b, total, records, display, n_bench, notes) -> list[pl.DataFrame]:
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
                    _placeholders(
                        want - have,
                        status == "successful",
                        f"{display}:benchmark {b + 1} {status} (aggregate count)",
                        step,
                        None if status == "successful" else f"{status} (sampled out: no record)",
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


# ---------------------------------------------------------------- vLLM bench serve

VLLM_ARRAYS = (
    "input_lens",
    "output_lens",
    "ttfts",
    "itls",
    "latencies",
    "start_times",
    "queue_times",
    "errors",
    "generated_texts",
)
VLLM_SCALARS = (
    "date",
    "backend",
    "endpoint_type",
    "num_prompts",
    "duration",
    "completed",
    "failed",
)
VLLM_DATE_RE = r'"date"\s*:\s*"\d{8}-\d{6}"'


@register_file_format
class VllmBench(FileFormat):
    """``vllm bench serve`` / ``benchmark_serving.py`` ``--save-result`` JSON."""

    name = "vllm_bench"
    role = "client"

    def sniff(self, head: list[str]) -> bool:
        text = "\n".join(head[:3])
        return (
            head[0].lstrip().startswith("{")
            and bool(re.match(r"\s*\{?\s*" + VLLM_DATE_RE, text))
            and any(k in text for k in ('"backend"', '"endpoint_type"', '"num_prompts"'))
        )

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        result = ParseResult(formats=[self.name])
        docs = self._documents(source, result)
        frames = []
        for i, (doc, origin) in enumerate(docs):
            prefix = f"run {i + 1} ({origin}): " if len(docs) > 1 else ""
            frames.append(self._run(doc, i, len(docs), origin, source.display, ctx, result, prefix))
        if frames:
            _finish(result, _concat(frames), source.display)
        return result

    @staticmethod
    def _documents(source: SourceFile, result: ParseResult) -> list[tuple[dict, str]]:
        """The result objects: one, or one per line (--append-result); broken ones salvaged."""
        text = source.text
        try:
            doc = json.loads(text)
        except ValueError:
            doc = None
        if doc is not None:
            _account_document(result, source, len(text) if isinstance(doc, dict) else 0)
            if not isinstance(doc, dict):
                result.notes.append("the document is not a JSON object: nothing read")
                return []
            return [(doc, "document")]
        lines = source.lines
        nonblank = lines.filter(pl.col("text").str.strip_chars() != "")
        one_per_line = nonblank.height > 0 and nonblank["text"].str.starts_with("{").all()
        if not one_per_line:  # a pretty-printed document, cut short
            doc, cut = VllmBench._salvage(text, result, "the document")
            _account_document(result, source, cut)
            return [(doc, "document")]
        docs, bad = [], []
        for line_no, line in nonblank.select("line_no", "text").iter_rows():
            try:
                docs.append((json.loads(line), f"line {line_no}"))
            except ValueError:
                doc, _ = VllmBench._salvage(line, result, f"line {line_no}")
                docs.append((doc, f"line {line_no}"))
                bad.append(line_no)
        result.lines = lines.height
        result.noise = lines.height - nonblank.height
        result.parsed = nonblank.height - len(bad)
        result.unparsed_examples = _examples(lines.filter(pl.col("line_no").is_in(bad)))
        return docs

    @staticmethod
    def _salvage(text: str, result: ParseResult, where: str) -> tuple[dict, int]:
        doc, cut, partial = {}, len(text), []
        for key in VLLM_SCALARS + VLLM_ARRAYS:
            m = re.search(r'(?<![\\\w])"' + key + r'"\s*:\s*', text)
            if not m:
                continue
            try:
                doc[key], _ = _DECODER.raw_decode(text, m.end())
            except ValueError:
                cut = min(cut, m.start())
                if text[m.end() : m.end() + 1] == "[":
                    doc[key], _ = _salvage_array(text, m.end())
                    partial.append(f"{key} ({len(doc[key])} complete values)")
        result.notes.append(
            f"{where} is cut short or broken: read its fields as far as they go"
            + (f"; partial arrays: {', '.join(partial)}" if partial else "")
        )
        return doc, cut

    @staticmethod
    def _run(doc, i, n_docs, origin, display, ctx, result, prefix) -> pl.DataFrame:
        notes = result.notes
        step = i + 1 if n_docs > 1 else None
        where = "" if origin == "document" else f"{origin} "
        aggregate = f"{display}:{where}aggregate count"
        arrays = {k: doc[k] for k in VLLM_ARRAYS if isinstance(doc.get(k), list)}
        n = max((len(v) for v in arrays.values()), default=0)
        lengths = {k: len(v) for k, v in arrays.items() if k != "generated_texts"}
        if len(set(lengths.values())) > 1:
            notes.append(
                f"{prefix}per-request arrays differ in length ({', '.join(f'{k} {v}' for k, v in lengths.items())}): "
                "values past an array's end are unknown"
            )
        completed, failed = doc.get("completed"), doc.get("failed")
        if failed is None and completed is not None and doc.get("num_prompts") is not None:
            failed = max(0, int(doc["num_prompts"]) - int(completed))
            notes.append(
                f"{prefix}no `failed` count (older script): taken as num_prompts − completed = {failed}"
            )
        frames = []
        if n:
            cols = {
                k: pl.Series(k, list(arrays.get(k, [])) + [None] * (n - len(arrays.get(k, []))))
                for k in ("ttfts", "latencies", "start_times", "output_lens", "errors", "itls")
                if k in arrays
            }
            f = pl.DataFrame(list(cols.values())).with_row_index("_i")
            err = _col(f, "errors", dtype=pl.Utf8)
            ttft = _col(f, "ttfts", dtype=pl.Float64)
            lat = _col(f, "latencies", dtype=pl.Float64)
            # the errors array decides; past its end (or without it) ttft, then latency
            ok = pl.coalesce(err == "", ttft > 0, lat > 0)
            if "errors" in arrays:
                pass
            elif "ttfts" in arrays:
                notes.append(
                    f"{prefix}no `errors` array (saved only with --save-detailed): outcome taken from ttft > 0"
                )
            else:
                notes.append(
                    f"{prefix}no `errors` array (saved only with --save-detailed): outcome taken "
                    "from latency > 0 (vLLM leaves a failed request's latency at 0)"
                )
            itl_sum = (
                pl.col("itls").cast(pl.List(pl.Float64), strict=False).list.sum()
                if "itls" in f.columns
                else pl.lit(None, dtype=pl.Float64)
            )
            latency = (
                pl.when(lat > 0).then(lat).when(ok & (ttft > 0)).then(ttft + itl_sum.fill_null(0.0))
            )
            if "latencies" not in arrays and "ttfts" in arrays:
                notes.append(f"{prefix}no `latencies` array (older script): latency = ttft + Σ itl")
            error = (
                pl.when(err != "").then(err).when(ok.is_null()).then(pl.lit("outcome not recorded"))
            )
            ok = ok.fill_null(False)
            f = f.select(
                pl.lit(step, dtype=pl.Int64).alias("step"),
                pl.col("_i").cast(pl.Int64).alias("index"),
                _col(f, "start_times", dtype=pl.Float64).alias("_start"),
                latency.alias("latency_s"),
                ok.alias("ok"),
                _status_from_text(error).alias("http_status"),
                error.alias("error"),
                _col(f, "output_lens", dtype=pl.Int64).alias("output_tokens"),
                model.source_id(f"{display}:{where}record ", pl.col("_i") + 1),
            ).with_columns((pl.col("_start") + pl.col("latency_s")).alias("_end"))
            frames.append(f)
            have_ok = f.filter(pl.col("ok").fill_null(False)).height
            have_failed = f.filter(~pl.col("ok").fill_null(True)).height
            if completed is not None and (have_ok, have_failed) != (completed, failed or 0):
                short_ok = max(0, int(completed) - have_ok)
                short_failed = max(0, int(failed or 0) - have_failed)
                if short_ok or short_failed:
                    frames.append(_placeholders(short_ok, True, aggregate, step))
                    frames.append(
                        _placeholders(
                            short_failed,
                            False,
                            aggregate,
                            step,
                            "failed (counted by the aggregate only)",
                        )
                    )
                notes.append(
                    f"{prefix}{have_ok} ok / {have_failed} failed per-request records but the "
                    f"aggregates say completed={completed}, failed={failed}: totals come from the "
                    f"aggregates ({short_ok + short_failed} requests have no per-request record)"
                )
            if "start_times" not in arrays:
                notes.append(
                    f"{prefix}no `start_times` (saved only with --save-detailed by newer "
                    "scripts): requests cannot be placed on the servers' clock one by one"
                )
        elif completed is not None:
            frames.append(_placeholders(int(completed), True, aggregate, step))
            frames.append(
                _placeholders(
                    int(failed or 0),
                    False,
                    aggregate,
                    step,
                    "failed (counted by the aggregate only)",
                )
            )
            notes.append(
                f"{prefix}aggregates only (saved without --save-detailed): completed={completed}, "
                f"failed={failed or 0}; requests cannot be matched one by one"
            )
        else:
            notes.append(f"{prefix}neither per-request arrays nor counts: nothing read")
            return pl.DataFrame()
        frame = _concat(frames)
        zero, how = VllmBench._date_anchor(doc, frame, ctx)
        return _place(
            frame,
            ctx,
            notes,
            clock="time.perf_counter() seconds of `start_times`",
            file_zero=zero,
            file_zero_how=how,
            prefix=prefix,
        )

    @staticmethod
    def _date_anchor(doc: dict, frame: pl.DataFrame, ctx: ParseContext):
        """The `date` field is local wall time, whole seconds, written as the run ended."""
        date = doc.get("date")
        if not isinstance(date, str) or "_start" not in frame.columns:
            return None, None
        try:
            wall = dt.datetime.strptime(date, "%Y%m%d-%H%M%S").replace(
                tzinfo=ZoneInfo(ctx.client_tz)
            )
        except ValueError:
            return None, None
        last = frame.select(pl.max_horizontal(pl.col("_end").max(), pl.col("_start").max())).item()
        if last is None:
            return None, None
        return (
            wall.timestamp() - last,
            f"the file's `date` {date} (local time read in {ctx.client_tz}, whole seconds, written "
            "when the run ended: the last request's end is put there, ±1 s)",
        )


# ---------------------------------------------------------------- AIPerf profile_export.jsonl


@register_file_format
class AIPerfJsonl(FileFormat):
    """NVIDIA AIPerf ``profile_export.jsonl``: one MetricRecordInfo per line."""

    name = "aiperf_jsonl"
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
        return False

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        lines = source.lines
        result = ParseResult(lines=lines.height, formats=[self.name])
        decoded, bad = decode_json_objects(lines)
        is_record = (
            _get(decoded, "metadata").is_not_null()
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
        result.parsed = records.height
        result.noise = lines.filter(pl.col("text").str.strip_chars() == "").height
        result.unparsed_examples = _examples(not_records)
        if not_records.height:
            result.notes.append(
                f"{not_records.height} line(s) are not AIPerf records (cut short or not JSON), "
                f"first at {source.display}:{not_records['line_no'][0]}; the other lines are read"
            )
        if records.is_empty():
            return result
        r = records
        latency_unit = _get(r, "metrics", "request_latency", "unit", dtype=pl.Utf8)
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
        error = _get(r, "error")
        error_text = pl.when(error.is_not_null()).then(
            pl.concat_str(
                [
                    _get(r, "error", "type", dtype=pl.Utf8),
                    _get(r, "error", "message", dtype=pl.Utf8),
                ],
                separator=": ",
                ignore_nulls=True,
            )
        )
        code = _get(r, "error", "code", dtype=pl.Int64)
        cancelled = _get(r, "metadata", "was_cancelled", dtype=pl.Boolean).fill_null(False)
        frame = r.select(
            pl.coalesce(
                _get(r, "metadata", "session_num", dtype=pl.Int64),
                _get(r, "metadata", "request_num", dtype=pl.Int64),
            ).alias("index"),
            (_get(r, "metadata", "request_start_ns", dtype=pl.Float64) / 1e9).alias("_start"),
            (_get(r, "metadata", "request_end_ns", dtype=pl.Float64) / 1e9).alias("_end"),
            (_get(r, "metrics", "request_latency", "value", dtype=pl.Float64) / per_second).alias(
                "latency_s"
            ),
            (error.is_null() & ~cancelled).alias("ok"),
            pl.when(code.is_between(100, 599)).then(code).alias("http_status"),
            pl.when(error.is_not_null())
            .then(pl.coalesce(error_text, pl.lit("error")))
            .when(cancelled)
            .then(pl.lit("cancelled"))
            .alias("error"),
            pl.coalesce(
                _get(r, "metrics", "output_sequence_length", "value", dtype=pl.Int64),
                _get(r, "metrics", "output_token_count", "value", dtype=pl.Int64),
            ).alias("output_tokens"),
            _get(r, "metadata", "x_request_id", dtype=pl.Utf8).alias("request_id"),
            (_get(r, "metadata", "benchmark_phase", dtype=pl.Utf8) == "warmup")
            .fill_null(False)
            .alias("warmup"),
            model.source_id(f"{source.display}:", pl.col("line_no")),
        )
        frame = _place(
            frame, ctx, result.notes, clock="epoch ns (request_start_ns / request_end_ns)"
        )
        _finish(result, frame, source.display)
        return result


# ---------------------------------------------------------------- genai-perf profile_export.json

GENAI_REQUEST_RE = r'\{\s*"timestamp"\s*:'


@register_file_format
class GenAIPerfJson(FileFormat):
    """genai-perf / perf_analyzer ``profile_export.json``: experiments → requests (ns)."""

    name = "genai_perf_json"
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
            salvaged = _salvage_objects(text, GENAI_REQUEST_RE)
            readable_to = salvaged[-1][1] if salvaged else 0
            exp_at = [m.start() for m in re.finditer(r'"experiment"\s*:\s*\{', text)]
            rows = [(max(0, sum(p < pos for p in exp_at) - 1), 0, r) for pos, _, r in salvaged]
            result.notes.append(
                f"the document is cut short or broken ({exc.msg} at character {exc.pos}): "
                f"{len(salvaged)} complete request records read; the rest is unparsed"
            )
        _account_document(result, source, readable_to)
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
        frame = _place(
            frame, ctx, result.notes, clock="system_clock ns (timestamp / response_timestamps)"
        )
        _finish(result, frame, source.display)
        return result


# ---------------------------------------------------------------- LLMPerf individual responses

LLMPERF_START = (
    "start_time",
    "request_start_time",
    "req_start_time",
    "sample_time",
    "start_timestamp",
)
LLMPERF_END = ("end_time", "request_end_time", "end_timestamp")


@register_file_format
class LLMPerfResponses(FileFormat):
    """LLMPerf ``*_individual_responses.json``: a list of per-request metric dicts."""

    name = "llmperf_responses"
    role = "client"

    def sniff(self, head: list[str]) -> bool:
        text = "\n".join(head)
        return text.lstrip().startswith("[") and (
            '"end_to_end_latency_s"' in text or ('"error_code"' in text and '"ttft_s"' in text)
        )

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        result = ParseResult(formats=[self.name])
        text = source.text
        try:
            items, readable_to = json.loads(text), len(text)
        except ValueError as exc:
            items, readable_to = _salvage_array(text, text.index("["))
            result.notes.append(
                f"the document is cut short or broken ({exc.msg} at character {exc.pos}): "
                f"{len(items)} complete records read; the rest is unparsed"
            )
        _account_document(result, source, readable_to)
        records = [r for r in items if isinstance(r, dict)] if isinstance(items, list) else []
        if len(records) != (len(items) if isinstance(items, list) else 0):
            result.notes.append(
                "array elements that are not objects were skipped (counted unparsed)"
            )
        if not records:
            return result
        f = _frame(records).with_row_index("_rec", offset=1)
        code_text = _col(f, "error_code", dtype=pl.Utf8).str.strip_chars()
        code = code_text.cast(pl.Float64, strict=False).cast(pl.Int64, strict=False)
        msg = _col(f, "error_msg", dtype=pl.Utf8)
        # upstream sets error_code only on failure (an HTTP status, or -1)
        ok = code_text.is_null() | (code_text == "")
        start, end, notes = self._times(f, ctx)
        result.notes.extend(notes)
        latency = _col(f, "end_to_end_latency_s", dtype=pl.Float64)
        frame = f.select(
            (pl.col("_rec") - 1).cast(pl.Int64).alias("index"),
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
            _col(f, "number_output_tokens", dtype=pl.Int64).alias("output_tokens"),
            _col(f, "request_id", "x_request_id", "id", dtype=pl.Utf8).alias("request_id"),
            model.source_id(f"{source.display}:record ", pl.col("_rec")),
        )
        frame = _place(frame, ctx, result.notes, clock="the record's start/end fields")
        _finish(result, frame, source.display)
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
                return pl.coalesce(_seconds(numeric), iso), name
            return _seconds(pl.col(name)), name

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


# ---------------------------------------------------------------- Locust --csv

LOCUST_HEADERS = {
    "stats": ("Type,Name,Request Count,Failure Count", "Method,Name,# requests,# failures"),
    "history": ("Timestamp,User Count,",),
    "failures": ("Method,Name,Error,Occurrences", "Method,Name,Error,Occurences"),
    "exceptions": ("Count,Message,Traceback,Nodes",),
}


def _locust_kind(header: str) -> str | None:
    plain = header.replace('"', "").strip()
    for kind, starts in LOCUST_HEADERS.items():
        if any(plain.startswith(s) for s in starts):
            return kind
    return None


@register_file_format
class LocustCsv(FileFormat):
    """Locust ``--csv PREFIX`` files: per-endpoint and per-second aggregates, no requests."""

    name = "locust_csv"
    role = "client"

    def sniff(self, head: list[str]) -> bool:
        return _locust_kind(head[0]) is not None

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        lines = source.lines
        result = ParseResult(lines=lines.height, formats=[self.name])
        kind = _locust_kind(source.head(1)[0])
        try:
            table = pl.read_csv(
                source.raw, infer_schema_length=0, truncate_ragged_lines=True, ignore_errors=True
            )
        except Exception as exc:  # an empty or hopeless CSV
            result.notes.append(f"CSV not readable ({exc}); nothing read")
            result.unparsed_examples = _examples(lines)
            return result
        table.columns = [c.strip() for c in table.columns]
        blank = lines.filter(pl.col("text").str.strip_chars() == "").height
        result.noise = 1 + blank  # the header
        if kind == "exceptions":  # tracebacks span lines: every line is part of a row
            result.parsed = lines.height - result.noise
            result.notes.append(f"{table.height} distinct exception(s) recorded by Locust")
            return result
        result.parsed = min(table.height, lines.height - result.noise)
        if result.unparsed:
            result.unparsed_examples = _examples(lines.tail(result.unparsed))
        getattr(self, f"_{kind}")(table, source, result, ctx)
        return result

    @staticmethod
    def _num(table: pl.DataFrame, *names: str) -> pl.Expr:
        return _col(table, *names, dtype=pl.Utf8).cast(pl.Float64, strict=False)

    def _stats(
        self, table: pl.DataFrame, source: SourceFile, result: ParseResult, ctx: ParseContext
    ) -> None:
        name = _col(table, "Name", dtype=pl.Utf8)
        count = self._num(table, "Request Count", "# requests")
        fails = self._num(table, "Failure Count", "# failures")
        median = self._num(table, "Median Response Time", "Median response time")
        avg = self._num(table, "Average Response Time", "Average response time")
        rows = table.select(
            _col(table, "Type", "Method", dtype=pl.Utf8).fill_null("").alias("type"),
            name.alias("name"),
            count.alias("count"),
            fails.alias("fails"),
            median.alias("median"),
            avg.alias("avg"),
        )
        total = rows.filter(pl.col("name").is_in(["Aggregated", "Total"]))
        endpoints = rows.filter(~pl.col("name").is_in(["Aggregated", "Total"]))
        for r in endpoints.head(NOTE_EXAMPLES + 2).iter_rows(named=True):
            result.notes.append(
                f"{r['type']} {r['name']}: {r['count'] or 0:.0f} requests, {r['fails'] or 0:.0f} failures, "
                f"median {r['median']} ms, mean {r['avg']} ms"
            )
        if total.height:
            sent, failed = total["count"][0], total["fails"][0]
        else:
            sent, failed = endpoints["count"].sum(), endpoints["fails"].sum()
        sent, failed = int(sent or 0), int(failed or 0)
        frame = pl.concat(
            [
                _placeholders(sent - failed, True, f"{source.display}:Aggregated", None),
                _placeholders(
                    failed,
                    False,
                    f"{source.display}:Aggregated",
                    None,
                    "failed (Locust counts only; see the *_failures.csv file)",
                ),
            ]
        )
        result.notes.append(
            f"aggregates only: {sent} requests, {failed} failures; requests cannot be matched "
            "one by one (Locust's --csv keeps no per-request rows); response times are in ms"
        )
        frame = _place(frame, ctx, result.notes, clock="none")
        _finish(result, frame, source.display)

    def _history(
        self, table: pl.DataFrame, source: SourceFile, result: ParseResult, ctx: ParseContext
    ) -> None:
        rows = table.select(
            self._num(table, "Timestamp").alias("t"),
            self._num(table, "User Count").alias("users"),
            _col(table, "Name", dtype=pl.Utf8).alias("name"),
            self._num(table, "Total Request Count").alias("total"),
            self._num(table, "Total Failure Count").alias("failures"),
        ).filter(pl.col("t").is_not_null())
        if rows.is_empty():
            return
        times = rows.select(_to_utc(_seconds(pl.col("t"))).alias("at"))["at"]
        result.span = (times.min(), times.max())
        users = rows.select(pl.col("users").unique(maintain_order=True))["users"].to_list()
        agg = rows.filter(pl.col("name") == "Aggregated")
        last = (agg if agg.height else rows).tail(1).row(0, named=True)
        result.notes.append(
            f"per-second history from {_iso(rows['t'].min())} to {_iso(rows['t'].max())} "
            "(epoch seconds from the file); user count "
            + " → ".join(f"{u:.0f}" for u in users if u is not None)
            + f"; final totals {last['total']:.0f} requests, {last['failures']:.0f} failures "
            "(aggregates: requests are counted from *_stats.csv, not here)"
        )

    def _failures(
        self, table: pl.DataFrame, source: SourceFile, result: ParseResult, ctx: ParseContext
    ) -> None:
        rows = table.select(
            _col(table, "Method", dtype=pl.Utf8).alias("method"),
            _col(table, "Name", dtype=pl.Utf8).alias("name"),
            _col(table, "Error", dtype=pl.Utf8).alias("error"),
            self._num(table, "Occurrences", "Occurences").alias("n"),
        )
        for r in rows.head(NOTE_EXAMPLES + 2).iter_rows(named=True):
            result.notes.append(f"{r['method']} {r['name']}: {r['n'] or 0:.0f}× {r['error']}")
        result.notes.append(
            f"failure kinds only ({rows['n'].sum():.0f} occurrences): no per-request rows; "
            "the counts are taken from *_stats.csv"
        )


# ---------------------------------------------------------------- k6 --out json


@register_file_format
class K6Json(FileFormat):
    """k6 ``--out json``: Metric declarations and Points; one http_req_duration point per request."""

    name = "k6_json"
    role = "client"

    def sniff(self, head: list[str]) -> bool:
        for line in head[:5]:
            if re.match(r'\s*\{\s*"type"\s*:\s*"(?:Point|Metric)"\s*,', line):
                return True
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if (
                isinstance(record, dict)
                and record.get("type") in ("Point", "Metric")
                and "metric" in record
                and isinstance(record.get("data"), dict)
            ):
                return True
        return False

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        lines = source.lines
        result = ParseResult(lines=lines.height, formats=[self.name])
        decoded, bad = decode_json_objects(lines)
        kind = _col(decoded, "type", dtype=pl.Utf8)
        metric = _col(decoded, "metric", dtype=pl.Utf8)
        classified = (
            decoded.select(
                "line_no",
                ((kind == "Point") & metric.str.starts_with("http_req"))
                .fill_null(False)
                .alias("req"),
                kind.is_in(["Point", "Metric"]).fill_null(False).alias("known"),
            )
            if decoded.height
            else pl.DataFrame(schema={"line_no": pl.Int64, "req": pl.Boolean, "known": pl.Boolean})
        )
        blank = lines.filter(pl.col("text").str.strip_chars() == "").height
        result.parsed = classified.filter(pl.col("req")).height
        result.noise = blank + classified.filter(~pl.col("req") & pl.col("known")).height
        unknown = lines.filter(
            pl.col("line_no").is_in(bad["line_no"].implode())
            | pl.col("line_no").is_in(classified.filter(~pl.col("known"))["line_no"].implode())
        )
        result.unparsed_examples = _examples(unknown)
        if unknown.height:
            result.notes.append(
                f"{unknown.height} line(s) are not k6 JSON output (cut short or foreign), first "
                f"at {source.display}:{unknown['line_no'][0]}; the other lines are read"
            )
        result.notes.append(
            "per-request data from the http_req_duration points; http_reqs, http_req_failed and "
            "the other http_req_* points of the same request are counted parsed, other metrics noise"
        )
        if decoded.is_empty():
            return result
        points = decoded.filter((kind == "Point") & (metric == "http_req_duration"))
        if points.is_empty():
            return result
        p = points

        def tag(name: str) -> pl.Expr:
            return _get(p, "data", "tags", name, dtype=pl.Utf8)

        status = tag("status").cast(pl.Int64, strict=False)
        expected = tag("expected_response")
        ok = pl.coalesce(
            expected.replace_strict(
                {"true": True, "false": False}, default=None, return_dtype=pl.Boolean
            ),
            status.is_between(200, 399),
        )
        end = timeparse.iso_to_utc(_get(p, "data", "time", dtype=pl.Utf8), ctx.client_tz)
        duration_s = _get(p, "data", "value", dtype=pl.Float64) / 1000
        frame = p.select(
            ((end.dt.epoch("us") / 1e6) - duration_s).alias("_start"),
            (end.dt.epoch("us") / 1e6).alias("_end"),
            duration_s.alias("latency_s"),
            ok.fill_null(False).alias("ok"),
            pl.when(status > 0).then(status).alias("http_status"),
            pl.when(~ok.fill_null(False))
            .then(
                pl.coalesce(
                    tag("error"),
                    pl.format("k6 error_code {}", tag("error_code")),
                    pl.when(status > 0)
                    .then(pl.format("HTTP {}", status))
                    .otherwise(pl.lit("no response (status 0)")),
                )
            )
            .alias("error"),
            pl.coalesce(tag("request_id"), tag("x_request_id")).alias("request_id"),
            model.source_id(f"{source.display}:", pl.col("line_no")),
        )
        frame = _place(
            frame,
            ctx,
            result.notes,
            clock="RFC 3339 stamps with the runner's offset, taken at each request's end "
            "(start = end − http_req_duration, which leaves out connection set-up)",
        )
        _finish(result, frame, source.display)
        return result
