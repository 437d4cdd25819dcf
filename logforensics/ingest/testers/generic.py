"""The generic client form (JSON lines or CSV), as the README documents it and
``logforensics loadtest`` writes it: one record per request, common column spellings accepted."""

from __future__ import annotations

import io
import json

import polars as pl

from logforensics import model, timeparse
from logforensics.ingest import outcome, register_file_format
from logforensics.ingest.base import (
    BATCH_BYTES,
    BATCHED_ABOVE,
    ByteFacts,
    FileFormat,
    ParseContext,
    ParseResult,
    Sample,
    SourceFile,
)
from logforensics.ingest.toolkit import (
    decode_json_objects,
    source_expr,
)

FIELD_SPELLINGS = {
    "request_id": [
        "request_id",
        "requestId",
        "x_request_id",
        "x-request-id",
        "id",
        # the answer's own id: vLLM answers with its request id (chatcmpl-…), which its logs carry
        "response_id",
        "responseId",
    ],
    "marker": ["marker", "prompt_marker"],
    "step": ["step", "stage", "run_step"],
    "concurrency": ["concurrency", "concurrent", "n"],
    "rate": ["rate", "request_rate"],  # the rate the step was set to, not one measured
    "index": ["index", "i", "idx", "seq"],
    "warmup": ["warmup", "is_warmup", "warm_up"],
    "started_at": ["started_at", "start", "start_time", "t_start", "sent_at", "request_start"],
    "ended_at": ["ended_at", "end", "end_time", "t_end", "finished_at", "request_end"],
    "latency_s": ["latency_s", "latency", "elapsed", "elapsed_s", "duration", "duration_s"],
    "latency_ms": ["latency_ms", "elapsed_ms", "duration_ms"],
    "ok": ["ok", "success", "succeeded"],
    "status": ["status", "outcome", "result"],
    "http_status": ["http_status", "status_code", "code", "http_code"],
    "error": ["error", "error_text", "err", "exception"],
    "error_type": ["error_type", "error_class", "exception_type", "exc_type"],
    "output_tokens": ["output_tokens", "completion_tokens", "tokens", "output_len"],
    "ttft_s": ["ttft_s", "ttft", "time_to_first_token_s"],
    "ttft_ms": ["ttft_ms", "time_to_first_token_ms"],
    "timeout_s": ["timeout_s", "timeout"],
    "rest_before_s": ["rest_before_s", "rest_s"],
    "server_address": ["server_address"],  # the host:port the client connected to
}
TIME_FIELDS = ("started_at", "latency_s", "latency_ms")
OUTCOME_FIELDS = ("ok", "status", "http_status", "error")


def _pick(frame: pl.DataFrame, field: str) -> str | None:
    lowered = {c.lower(): c for c in frame.columns}
    for spelling in FIELD_SPELLINGS[field]:
        if spelling.lower() in lowered:
            return lowered[spelling.lower()]
    return None


def _log_entry(record: dict) -> bool:
    """A structured logger's entry (zap, zerolog, logrus, structlog: a level and a message),
    such as Caddy's JSON access log, whose `duration` and `status` are no client record's."""
    keys = {k.lower() for k in record}
    return "level" in keys and bool(keys & {"msg", "message"})


def _looks_generic(keys: list[str]) -> bool:
    keys = {k.lower() for k in keys}

    def has(fields):
        return any(s.lower() in keys for f in fields for s in FIELD_SPELLINGS[f])

    return has(TIME_FIELDS) and has(OUTCOME_FIELDS)


def _time(frame: pl.DataFrame, column: str | None, client_tz: str) -> pl.Expr:
    if column is None:
        return pl.lit(None, dtype=pl.Datetime("us", "UTC"))
    dtype = frame.schema[column]
    if dtype.is_numeric():
        return timeparse.epoch_to_utc(pl.col(column))
    if isinstance(dtype, pl.Datetime):
        c = pl.col(column)
        return (
            c.dt.replace_time_zone(client_tz) if dtype.time_zone is None else c
        ).dt.convert_time_zone("UTC")
    return timeparse.iso_to_utc(pl.col(column).cast(pl.Utf8), client_tz)


def _time_column(frame: pl.DataFrame) -> str | None:
    return _pick(frame, "started_at") or _pick(frame, "ended_at")


def naive_times(frame: pl.DataFrame) -> int:
    """How many of the time column's text values carry no zone (read in --client-tz)."""
    column = _time_column(frame)
    if column is None or frame.schema[column].is_numeric():
        return 0
    text = frame[column].cast(pl.Utf8).drop_nulls()
    return text.filter(~text.str.contains(r"(?:[Zz]|[+-]\d{2}:?\d{2})\s*$")).len()


def time_notes(frame: pl.DataFrame, client_tz: str, naive: int | None = None) -> list[str]:
    """Say how the file's times were read: zoned, naive in --client-tz, epoch, or absent.

    `naive` is `naive_times` of the whole file where `frame` is only a part of it."""
    column = _time_column(frame)
    if column is None:
        return [
            "no absolute per-request times: requests are counted but not placed on the servers' clock"
        ]
    dtype = frame.schema[column]
    if dtype.is_numeric():
        return [f"absolute times from epoch numbers in '{column}'"]
    naive = naive_times(frame) if naive is None else naive
    if naive:
        return [
            f"{naive} naive time(s) in '{column}' read in {client_tz} (set --client-tz if the client ran elsewhere)"
        ]
    return [f"absolute times with zone offsets in '{column}'"]


TRUE_WORDS = ["true", "yes", "y", "1", "ok"]
FALSE_WORDS = ["false", "no", "n", "0"]


def _text_boolean(text: pl.Expr) -> pl.Expr:
    """A flag written as text ("true", "no"), as when a column mixes JSON booleans and strings."""
    word = text.str.strip_chars().str.to_lowercase()
    return pl.when(word.is_in(TRUE_WORDS)).then(True).when(word.is_in(FALSE_WORDS)).then(False)


def normalise_generic(frame: pl.DataFrame, display: str, client_tz: str) -> pl.DataFrame:
    """Map a generic record frame (any common spelling) to `client_requests`."""
    col = {f: _pick(frame, f) for f in FIELD_SPELLINGS}
    for field in ("started_at", "ended_at"):  # text times: the format is sniffed once per column
        if col[field] and frame.schema[col[field]] == pl.Utf8:
            frame = frame.with_columns(timeparse.parse_iso(frame[col[field]], client_tz))

    def get(field, dtype):
        if not col[field]:
            return pl.lit(None, dtype=dtype)
        if dtype == pl.Boolean and frame.schema[col[field]] == pl.Utf8:
            return _text_boolean(pl.col(col[field]))
        return pl.col(col[field]).cast(dtype, strict=False)

    started = _time(frame, col["started_at"], client_tz)
    ended = _time(frame, col["ended_at"], client_tz)
    latency = pl.coalesce(
        get("latency_s", pl.Float64),
        get("latency_ms", pl.Float64) / 1000,
        (ended - started).dt.total_microseconds() / 1e6,
    )
    status_text = get("status", pl.Utf8)
    word = pl.when(get("status", pl.Int64).is_null()).then(status_text.str.to_lowercase())
    http_status = pl.coalesce(get("http_status", pl.Int64), get("status", pl.Int64))
    # a status/result field holding free text ("HTTP Error 503: …") is the error's text
    error = (
        pl.coalesce(
            get("error", pl.Utf8),
            pl.when(word.is_not_null() & ~word.is_in(outcome.WORDS)).then(status_text),
        )
        if col["status"]
        else get("error", pl.Utf8)
    )
    if not col["status"]:
        word = pl.lit(None, dtype=pl.Utf8)
    typed_error = (
        pl.concat_str([get("error_type", pl.Utf8), error], separator=": ", ignore_nulls=True)
        if col["error_type"]
        else error
    )
    frame = outcome.with_outcome(
        frame,
        ok=get("ok", pl.Boolean),
        http_status=http_status,
        error=typed_error,
        status_word=word,
        output_tokens=get("output_tokens", pl.Int64),
    )
    return frame.select(
        pl.lit(display).alias("run"),
        get("step", pl.Int64).alias("step"),
        get("concurrency", pl.Int64).alias("concurrency"),
        get("rate", pl.Float64).alias("rate"),
        get("index", pl.Int64).alias("index"),
        started.alias("started_at"),
        pl.coalesce(
            ended, started + pl.duration(microseconds=(latency * 1e6).cast(pl.Int64))
        ).alias("ended_at"),
        latency.alias("latency_s"),
        outcome.ok_of(pl.col("outcome")),
        "outcome",
        http_status.alias("http_status"),
        error.alias("error"),
        get("output_tokens", pl.Int64).alias("output_tokens"),
        pl.coalesce(get("ttft_s", pl.Float64), get("ttft_ms", pl.Float64) / 1000).alias("ttft_s"),
        get("marker", pl.Utf8).alias("marker"),
        get("request_id", pl.Utf8).alias("request_id"),
        get("warmup", pl.Boolean).fill_null(False).alias("warmup"),
        get("timeout_s", pl.Float64).alias("timeout_s"),
        get("rest_before_s", pl.Float64).alias("rest_before_s"),
        get("server_address", pl.Utf8).alias("server_address"),
        source_expr(display).alias("source"),
    )


@register_file_format
class ClientJsonl(FileFormat):
    fallback = True
    name = "client_jsonl"
    priority = 22
    samples = (
        Sample("corpus kv-tiny client.jsonl (the lab's client.py)", file="lab_client.jsonl"),
    )
    role = "client"

    def sniff(self, head: list[str]) -> bool:
        for line in head[:5]:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and _looks_generic(list(record)):
                return not _log_entry(record)
        return False

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        batched = _normalised_in_batches(source, ctx.client_tz)
        if batched is not None:
            return batched
        whole = _decode_whole_file(source)
        if whole is not None:
            result = ParseResult(lines=whole.height, parsed=whole.height, formats=[self.name])
            result.add("client_requests", normalise_generic(whole, source.display, ctx.client_tz))
            result.notes += time_notes(whole, ctx.client_tz)
            return result
        lines = source.lines
        decoded, bad = decode_json_objects(lines)
        result = ParseResult(lines=lines.height, formats=[self.name])
        result.parsed = decoded.height
        result.noise = lines.height - decoded.height - bad.height  # blank lines
        result.set_unparsed(bad)
        if decoded.height:
            result.add("client_requests", normalise_generic(decoded, source.display, ctx.client_tz))
            result.notes += time_notes(decoded, ctx.client_tz)
        return result


def _decode_whole_file(source: SourceFile) -> pl.DataFrame | None:
    """The common case in one native pass: every line one JSON object, no blank lines.

    Line numbers are then the row numbers. Anything else (a blank line, a
    line that is not JSON, bytes that are not UTF-8) returns None, and the
    file is read line by line so that every bad line is found and counted.
    """
    lines, facts = source.stream_facts()
    if not _decodable_natively(lines, facts):
        return None
    # polars reads a plain file itself (and in parallel); a gzip one is undone first
    data = source.read_bytes() if source.compressed else None
    document = (lambda: io.BytesIO(data)) if data is not None else (lambda: source.path)
    try:
        decoded = _read_with_sampled_schema(document, _schema_sample(source, data))
        if decoded is None:
            decoded = pl.read_ndjson(document(), infer_schema_length=None)
    except pl.exceptions.PolarsError:
        return None
    if decoded.height != lines or not decoded.width:
        return None
    source.facts = {**facts, "undecodable": False}
    return _numbered(decoded, 1)


def _decodable_natively(lines: int, facts: dict) -> bool:
    """Whether polars' JSON reader can take the file: some lines, no CRLF, NUL or leading
    blank (`SourceFile.stream_facts`); a blank line further on shows as a row too few."""
    return bool(lines) and not (facts["crlf"] or facts["nul"] or facts["starts_blank"])


def _numbered(decoded: pl.DataFrame, first: int) -> pl.DataFrame:
    """Decoded records with their `line_no` (one record a line), from `first`."""
    return decoded.with_row_index("line_no", offset=first).with_columns(
        pl.col("line_no").cast(pl.Int64)
    )


def _normalised_in_batches(source: SourceFile, client_tz: str) -> ParseResult | None:
    """A big file as `_decode_whole_file` and `normalise_generic` give it, batch by batch.

    Each batch of the bytes is decoded with the sampled schema and normalised at once,
    so only one batch's decoded text is held beside the finished rows (the bench's 6.6M
    records, 1.5 GB: peak 3.05 → 1.93 GB, 0.95 GB with freed pages returned at once;
    polars' reader of the whole file also maps all of it). Where a batch does not
    decode as the sample said (a type or field the sample did not see), or holds a
    blank or bad line, None: the file is read whole instead, which infers from every
    line or finds each bad line.
    """
    if source.path.stat().st_size <= BATCHED_ABOVE:
        return None
    sampled = _sampled_schema(_schema_sample(source, None))
    if sampled is None:
        return None
    schema, unseen = sampled
    rows, naive, first, last = [], 0, 1, None
    seen = ByteFacts()  # the facts `stream_facts` would give, learnt from the batches
    for data in source.byte_batches(BATCH_BYTES):
        lines = seen.add(data)
        # a batch is at least the first MiB the facts look at
        if first == 1 and not _decodable_natively(seen.lines, seen.facts()):
            return None
        try:
            decoded = pl.read_ndjson(io.BytesIO(data), schema=schema).drop(unseen)
        except pl.exceptions.PolarsError:
            return None
        del data
        if decoded.height != lines or not decoded.width:
            return None
        decoded = _numbered(decoded, first)
        first += lines
        naive += naive_times(decoded)
        normalised = normalise_generic(decoded, source.display, client_tz)
        # its own strings: a decoded batch's text columns share buffers, the times' too
        rows.append(model.detached(model.conform("client_requests", normalised)))
        last = decoded.clear()
        del decoded
    count = first - 1
    source.facts = {**seen.facts(), "undecodable": False}
    result = ParseResult(lines=count, parsed=count, formats=[ClientJsonl.name])
    # in one piece: later stages copy columns of many pieces (20M: live peak 3.83 → 3.36 GB)
    result.add("client_requests", pl.concat(rows, rechunk=True))
    result.notes += time_notes(last, client_tz, naive)
    return result


SCHEMA_SAMPLE_BYTES = 1 << 20


def _schema_sample(source: SourceFile, data: bytes | None) -> bytes:
    """Whole lines from the start, the middle and the end of the file (1 MiB each)."""
    if data is not None:
        size = len(data)

        def read(at: int) -> bytes:
            return data[at : at + SCHEMA_SAMPLE_BYTES]
    else:
        size = source.path.stat().st_size
        handle = source.path.open("rb")

        def read(at: int) -> bytes:
            handle.seek(at)
            return handle.read(SCHEMA_SAMPLE_BYTES)

    pieces = []
    try:
        for at in sorted({0, max(0, size // 2), max(0, size - SCHEMA_SAMPLE_BYTES)}):
            chunk = read(at)
            if at:  # drop the partial first line
                chunk = chunk.partition(b"\n")[2]
            if at + SCHEMA_SAMPLE_BYTES < size:  # and the partial last one
                chunk = chunk.rpartition(b"\n")[0]
            pieces.append(chunk.strip(b"\n"))
    finally:
        if data is None:
            handle.close()
    return b"\n".join(p for p in pieces if p) + b"\n"


def _outranking_spellings(seen: set[str]) -> list[str]:
    """Per field, the spellings `_pick` would take before the first one in `seen` (lowercased)."""
    out = []
    for names in FIELD_SPELLINGS.values():
        for name in names:
            if name.lower() in seen:
                break
            out.append(name)
    return out


def _read_with_sampled_schema(document, sample: bytes) -> pl.DataFrame | None:
    """Read with the schema of a sample: 2.3× faster than inferring it from every line.

    What full inference gives for every column `normalise_generic` picks, or
    None. A spelling the sample never saw that would be picked before the
    sample's own (every spelling of a field the sample lacks) is declared Null,
    so a value for it later makes polars fail, as does a type that changes
    after the sample; the file is then read again with full inference. (Each
    declared column costs a null per row: only those that could be picked.)
    """
    sampled = _sampled_schema(sample)
    if sampled is None:
        return None
    schema, unseen = sampled
    try:
        decoded = pl.read_ndjson(document(), schema=schema)
    except pl.exceptions.PolarsError:
        return None
    return decoded.drop(unseen)


def _sampled_schema(sample: bytes) -> tuple[dict, list[str]] | None:
    """The sample's schema with the unseen spellings that could be picked declared Null
    (see `_read_with_sampled_schema`), and those spellings; None if the sample is not JSON."""
    try:
        seen = pl.read_ndjson(io.BytesIO(sample), infer_schema_length=None).schema
    except pl.exceptions.PolarsError:
        return None
    unseen = _outranking_spellings({k.lower() for k in seen})
    return {**seen, **dict.fromkeys(unseen, pl.Null)}, unseen


@register_file_format
class ClientCsv(FileFormat):
    fallback = True
    name = "client_csv"
    priority = 23
    samples = (
        Sample(
            "corpus kv-tiny client.jsonl's first records, written as CSV by polars",
            file="lab_client.csv",
        ),
    )
    role = "client"

    def sniff(self, head: list[str]) -> bool:
        if not head or "," not in head[0]:
            return False
        return _looks_generic([c.strip().strip('"') for c in head[0].split(",")])

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        frame = pl.read_csv(
            source.raw, infer_schema_length=None, truncate_ragged_lines=True, ignore_errors=True
        ).with_row_index("line_no", offset=2)
        frame = frame.with_columns(pl.col("line_no").cast(pl.Int64))
        result = ParseResult(lines=source.lines.height, formats=[self.name])
        result.parsed = frame.height
        result.noise = 1  # the header
        result.add("client_requests", normalise_generic(frame, source.display, ctx.client_tz))
        result.notes += time_notes(frame, ctx.client_tz)
        return result
