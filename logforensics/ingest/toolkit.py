"""Helpers the formats share, public so that no format imports another's private names.

Sections: reading lines and JSON (`decode_json_objects`, `source_expr`), line
formats (`RegexLineFormat`, `first_kind`, `msg_number`), proxies
(`ProxyLineFormat`, `proxy_rows`, `proxy_failures`, `dash_null`), and load
testers' records (`status_from_text`, `to_seconds`, `place_on_clock`,
`finish_requests`, `placeholders`). Timestamp styles live in `timeparse`.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import re
from functools import cached_property
from http import HTTPStatus
from typing import ClassVar

import polars as pl

from logforensics import model, timeparse
from logforensics.ingest import outcome
from logforensics.ingest.base import (
    LineFormat,
    ParseContext,
    ParseResult,
    SourceFile,
)
from logforensics.ingest.openings import first_characters

# ---------------------------------------------------------------- lines and JSON


def decode_json_objects(lines: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """JSON-object lines decoded by polars (one pass); the lines that are not JSON objects.

    Returns the decoded records (``line_no`` plus one column per top-level key)
    and the bad lines (``line_no``, ``text``). Lines are inspected one by one
    only when the vectorised pass fails.
    """
    candidates = lines.filter(pl.col("text").str.strip_chars() != "")
    empty = pl.DataFrame(schema={"line_no": pl.Int64})
    if candidates.is_empty():
        return empty, candidates

    def decode(frame: pl.DataFrame) -> pl.DataFrame:
        # read_ndjson infers one schema over every line (str.json_decode needs one up front)
        data = frame.select(pl.col("text").str.join("\n")).item().encode()
        out = pl.read_ndjson(io.BytesIO(data), infer_schema_length=None)
        if out.height != frame.height:
            raise ValueError("line count changed while decoding")
        return out.with_columns(frame["line_no"])

    try:
        return decode(candidates), candidates.clear()
    except (pl.exceptions.PolarsError, ValueError):  # some line is not a JSON object: find them
        pass
    good = []
    for text in candidates["text"]:
        try:
            good.append(isinstance(json.loads(text), dict))
        except ValueError:
            good.append(False)
    mask = pl.Series(good, dtype=pl.Boolean)
    ok, bad = candidates.filter(mask), candidates.filter(~mask)
    return (decode(ok) if ok.height else empty), bad


def source_expr(display: str) -> pl.Expr:
    """Each row's `source` (``file:line`` when rendered), from its `line_no`."""
    return model.source_id(f"{display}:", pl.col("line_no"))


# ---------------------------------------------------------------- line formats


class RegexLineFormat(LineFormat):
    """A line format recognised by one regex over the message text."""

    pattern: ClassVar[str]
    decisive: ClassVar[bool] = True  # may its lines alone make a file a server log?
    proxy: ClassVar[bool] = False  # a proxy's or gateway's own line (see ProxyLog)

    def sniff(self, bodies: list[str]) -> bool:
        rx = re.compile(self.pattern)
        return any(rx.search(b) for b in bodies if b)

    @cached_property
    def openings(self) -> frozenset[str] | None:
        """What a match of its pattern can begin with (`openings.first_characters`), for a
        format that reads each line alone: such a format claims only lines its pattern
        matches (tests/test_openings.py holds every gated format to that on real lines)."""
        return first_characters(self.pattern) if self.per_line else None

    def matching(self, lines: pl.DataFrame) -> pl.DataFrame:
        return lines.filter(pl.col("msg").str.contains(self.pattern))


PART_ROWS = 200_000  # below this a frame is read in one piece


def in_parts(frame: pl.DataFrame, *exprs: pl.Expr) -> pl.DataFrame:
    """`frame.select(*exprs)`, the rows cut into one piece per polars thread, run at once.

    For a costly expression over one column (a capture regex), which polars runs on one
    thread however many it has: the file that parses last (alone) uses every core.
    """
    threads = pl.thread_pool_size()
    if threads < 2 or frame.height < PART_ROWS:
        return frame.select(*exprs)
    step = -(-frame.height // threads)
    plans = [frame.slice(i, step).lazy().select(*exprs) for i in range(0, frame.height, step)]
    return pl.concat(pl.collect_all(plans), rechunk=True)


def no_lines() -> pl.Series:
    return pl.Series("line_no", [], dtype=pl.Int64)


def file_role(frame: pl.DataFrame) -> pl.Expr:
    return pl.col("file_role") if "file_role" in frame.columns else pl.lit("server")


def first_kind(kinds: dict[str, str], text: pl.Expr) -> pl.Expr:
    """The first kind (in dict order) whose pattern occurs in `text`."""
    out = pl.lit(None, dtype=pl.Utf8)
    for name, rx in reversed(kinds.items()):
        out = pl.when(text.str.contains(rx)).then(pl.lit(name)).otherwise(out)
    return out


def msg_number(label_re: str, kind=pl.Float64) -> pl.Expr:
    """The first group of `label_re` in the message, as a number (null where absent)."""
    return pl.col("msg").str.extract(label_re, 1).cast(kind, strict=False)


# ---------------------------------------------------------------- proxies

UTC_US = pl.Datetime("us", "UTC")
QUOTED = r'"(?:[^"\\]|\\.)*"'  # a double-quoted field, backslash escapes inside


def file_tz(lines: pl.DataFrame) -> str:
    if "file_tz" in lines.columns and lines.height:
        return lines["file_tz"][0] or "UTC"
    return "UTC"


def json_field(path: str, dtype=pl.Utf8) -> pl.Expr:
    """A field of a JSON line (`msg`), cast to `dtype` (null where absent or not one)."""
    return pl.col("msg").str.json_path_match(path).cast(dtype, strict=False)


def zap_time() -> pl.Expr:
    """A Go zap JSON line's `ts`: epoch seconds (zap's production encoder), else ISO 8601
    (controller-runtime's and Caddy's `time_format` ones)."""
    raw = json_field("$.ts")
    epoch = raw.cast(pl.Float64, strict=False)
    return pl.coalesce(
        (epoch * 1e6).round(0).cast(pl.Int64).cast(UTC_US),
        timeparse.iso_to_utc(raw),
    )


def source_column(source: SourceFile) -> pl.Expr:
    return source_expr(source.display).alias("source")


def proxy_rows(frame: pl.DataFrame, source: SourceFile) -> pl.DataFrame:
    """`proxy_requests` rows: the canonical columns are picked when the result is added."""
    return frame.with_columns(pl.col("instance").alias("proxy"), source_column(source))


def dash_null(col: str) -> pl.Expr:
    """The value, with nginx/Envoy/Traefik's `-` (and empty) as null."""
    c = pl.col(col).str.strip_chars('"')
    return pl.when(c.is_in(["-", ""])).then(None).otherwise(c)


def ms_duration(expr: pl.Expr) -> pl.Expr:
    return pl.duration(microseconds=(expr.cast(pl.Float64) * 1000).round(0).cast(pl.Int64))


class ProxyLineFormat(RegexLineFormat):
    """A proxy's or gateway's own line: it writes `proxy_requests` / `proxy_events` only."""

    proxy = True

    def parsed(self, lines: pl.DataFrame, regex: str, needs: pl.Expr | None = None) -> pl.DataFrame:
        """The lines `regex` matches, with its groups.

        `needs` is a cheap literal test every such line passes: run first, it
        spares the regex the lines of another format (serverlog offers every
        format the whole file, an nginx log to Traefik before nginx).
        """
        if needs is not None:
            candidates = lines.select(needs).to_series()
            if not candidates.all():
                lines = lines.filter(candidates)
        return (
            lines.filter(pl.col("msg").str.contains(regex))
            .with_columns(pl.col("msg").str.extract_groups(regex).alias("_g"))
            .unnest("_g")
        )


def format_text(template: str, *args: pl.Expr) -> pl.Expr:
    """`pl.format(template, *args)` (null if an argument is), built with `concat_str`.

    polars 2.1's `pl.format` panics on a text column whose first chunk is
    empty, which filtering lines that polars read in parallel chunks leaves.
    """
    texts = template.split("{}")
    pieces = [pl.lit(texts[0])]
    for arg, text in zip(args, texts[1:], strict=True):
        pieces += [arg, pl.lit(text)]
    return pl.concat_str(pieces)


def proxy_failures(
    frame: pl.DataFrame, kind: pl.Expr, detail: pl.Expr, source: SourceFile
) -> pl.DataFrame:
    """`proxy_events` for the rows whose `kind` is not null (`detail` is written for those only)."""
    return (
        frame.with_columns(kind.alias("_kind"))
        .filter(pl.col("_kind").is_not_null())
        .with_columns(detail.alias("_detail"))
        .select(
            "at",
            pl.lit(None, dtype=pl.Utf8).alias("instance"),
            pl.col("_kind").alias("kind"),
            "http_status",
            "upstream",
            pl.col("_detail").str.slice(0, 300).alias("detail"),
            source_column(source),
        )
    )


def status_kind(status: pl.Expr, no_backend: pl.Expr) -> pl.Expr:
    return (
        pl.when(status.is_null() | (status < 500))
        .then(None)
        .when(no_backend)
        .then(pl.lit("no_live_upstream"))
        .when(status == 504)
        .then(pl.lit("timeout"))
        .when(status == 502)
        .then(pl.lit("bad_gateway"))
        .when(status == 503)
        .then(pl.lit("unavailable"))
        .otherwise(pl.lit("http_5xx"))
    )


# ---------------------------------------------------------------- load testers' records

EPOCH_MIN_S = 1e9  # 2001-09-09: smaller "times" are a counter, not wall time
PER_SECOND = {"ns": 1e9, "us": 1e6, "µs": 1e6, "ms": 1e3, "s": 1.0, "sec": 1.0}  # value / this
PHRASE_STATUS = {s.phrase.lower(): s.value for s in HTTPStatus}
STATUS_IN_TEXT_RE = (
    r"(?i)(?:status(?:[ _]?code)?\s*[:=]?\s*|HTTP(?:/[\d.]+)?\s+|HTTP Error\s+|'|\()([1-5]\d{2})\b"
)
REQUESTS_ERROR_RE = r"(?:^|\s)([1-5]\d{2})\s+(?:Server|Client)\s+Error"  # python-requests
NOTE_EXAMPLES = 3
JSON_DECODER = json.JSONDecoder()


# ---------------------------------------------------------------- shared helpers


def status_from_text(text: pl.Expr) -> pl.Expr:
    """An HTTP status named in an error text: `... 503 ...` forms, or a bare reason phrase."""
    return pl.coalesce(
        text.str.extract(STATUS_IN_TEXT_RE, 1).cast(pl.Int64, strict=False),
        text.str.extract(REQUESTS_ERROR_RE, 1).cast(pl.Int64, strict=False),
        text.str.strip_chars()
        .str.to_lowercase()
        .replace_strict(PHRASE_STATUS, default=None, return_dtype=pl.Int64),
    )


def to_seconds(value: pl.Expr) -> pl.Expr:
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


def seconds_to_utc(seconds: pl.Expr) -> pl.Expr:
    micros = (seconds * 1e6).round(0).cast(pl.Int64, strict=False)
    return pl.from_epoch(micros, time_unit="us").dt.replace_time_zone("UTC")


def nested(frame: pl.DataFrame, *path: str, dtype: pl.DataType | None = None) -> pl.Expr:
    """A nested struct field (``nested(f, "metadata", "x_request_id")``), or null if absent."""
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


def first_column(frame: pl.DataFrame, *names: str, dtype: pl.DataType | None = None) -> pl.Expr:
    """The first of several column spellings present in a flat frame, or null."""
    for name in names:
        if name in frame.columns:
            return pl.col(name).cast(dtype, strict=False) if dtype is not None else pl.col(name)
    return pl.lit(None, dtype=dtype or pl.Null)


def records_frame(records: list[dict]) -> pl.DataFrame:
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


def read_json_document(result: ParseResult, source: SourceFile, decode=json.loads):
    """A whole-file JSON document decoded and accounted for (`account_document`); None, with a
    note and every line unparsed, when it is not valid JSON."""
    text = source.text
    try:
        doc = decode(text)
    except ValueError as exc:
        account_document(result, source, 0)
        result.notes.append(f"not valid JSON ({exc}): nothing read")
        return None
    account_document(result, source, len(text))
    return doc


def account_document(result: ParseResult, source: SourceFile, readable_to: int) -> None:
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
    result.set_unparsed(frame.filter(~blank & ~readable))


def json_records(
    source: SourceFile, result: ParseResult, under: str | None = None
) -> tuple[object, list[dict]]:
    """A JSON document and its array of records (the document itself, or its `under` key).

    A document cut short (a run killed mid-write) keeps the complete records
    before the cut, with a note; lines are accounted as parsed up to the last
    record read, the rest unparsed. Elements that are not objects are left out.
    """
    text = source.text
    try:
        doc, readable_to = json.loads(text), len(text)
    except ValueError as exc:
        opening = text.find("[", text.find(f'"{under}"') if under else 0)
        items, readable_to = salvage_array(text, opening) if opening >= 0 else ([], 0)
        doc = {under: items} if under else items
        result.notes.append(
            f"the document is cut short or broken ({exc.msg} at character {exc.pos}): "
            f"{len(items)} complete records read; the rest is unparsed"
        )
    account_document(result, source, readable_to)
    items = (doc.get(under) if isinstance(doc, dict) else None) if under else doc
    items = items if isinstance(items, list) else []
    records = [r for r in items if isinstance(r, dict)]
    if len(records) != len(items):
        result.notes.append("array elements that are not objects were skipped")
    return doc, records


def salvage_array(text: str, start: int) -> tuple[list, int]:
    """The complete elements of the JSON array opening at ``text[start]``, and where they end."""
    items, pos, end_good = [], start + 1, start + 1
    gap = re.compile(r"[\s,]*")
    while True:
        pos = gap.match(text, pos).end()
        if pos >= len(text) or text[pos] == "]":
            return items, (pos + 1 if pos < len(text) else end_good)
        try:
            item, pos = JSON_DECODER.raw_decode(text, pos)
        except ValueError:
            return items, end_good
        items.append(item)
        end_good = pos


def salvage_objects(text: str, start_re: str) -> list[tuple[int, int, dict]]:
    """Complete JSON objects opening where `start_re` matches, in document order."""
    out, pos = [], 0
    for m in re.finditer(start_re, text):
        if m.start() < pos:
            continue  # inside the previous object
        try:
            obj, end = JSON_DECODER.raw_decode(text, m.start())
        except ValueError:
            continue
        if isinstance(obj, dict):
            out.append((m.start(), end, obj))
            pos = end
    return out


def anchor_utc(anchor: dt.datetime) -> dt.datetime:
    return anchor if anchor.tzinfo else anchor.replace(tzinfo=dt.timezone.utc)


def iso_text(seconds: float) -> str:
    return (
        dt.datetime.fromtimestamp(seconds, dt.timezone.utc)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


def place_on_clock(
    frame: pl.DataFrame,
    ctx: ParseContext,
    notes: list[str],
    *,
    clock: str,
    file_zero: float | None = None,
    file_zero_how: str | None = None,
    prefix: str = "",
    counter_zero: bool = False,
) -> pl.DataFrame:
    """`_start`/`_end` (seconds on the file's clock) → UTC `started_at`/`ended_at`.

    `clock` names the file's clock for the notes. Per row, seconds ≥ 1e9 are
    epoch time; smaller ones are shifted by the anchor (the file's own, else
    --started-at taken as the first request's start) or left null. With
    `counter_zero` the tool sent its first request at 0 on its counter, and a
    file may leave that request out (hey writes no row for a request that got
    no answer): --started-at is then 0, not the file's earliest start.
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
                other = anchor_utc(ctx.client_anchor).timestamp() - kinds["rel_first"]
                notes.append(
                    f"{prefix}--started-at not used for this file: it carries its own anchor "
                    f"(the two differ by {other - file_zero:+.1f} s)"
                )
        elif ctx.client_anchor is not None:
            anchor = anchor_utc(ctx.client_anchor).timestamp()
            offset = anchor - (0.0 if counter_zero else kinds["rel_first"])
            notes.append(
                f"{what}: anchored at --started-at {iso_text(anchor)} (taken as "
                + (
                    "the counter's 0, when the first request was sent)"
                    if counter_zero
                    else "the first request's start)"
                )
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
        return seconds_to_utc(pl.when(epochish).then(seconds).otherwise(seconds + shift))

    latency = pl.coalesce(pl.col("latency_s").cast(pl.Float64), (end - start).round(6))
    span = pl.duration(microseconds=(pl.col("latency_s") * 1e6).round(0).cast(pl.Int64))
    frame = frame.with_columns(latency.alias("latency_s"))
    frame = frame.with_columns(pl.coalesce(wall(start), wall(end) - span).alias("started_at"))
    return frame.with_columns(pl.coalesce(wall(end), pl.col("started_at") + span).alias("ended_at"))


def note_duplicate_ids(frame: pl.DataFrame, notes: list[str]) -> None:
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


def placeholders(
    n: int,
    ok: bool,
    source: str,
    step: int | None,
    error: str | None = None,
    concurrency: int | None = None,
) -> pl.DataFrame:
    """Requests an aggregate counts but no per-request record describes."""
    return pl.DataFrame(
        {
            "step": pl.Series([step] * n, dtype=pl.Int64),
            "concurrency": pl.Series([concurrency] * n, dtype=pl.Int64),
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


def finish_requests(result: ParseResult, frame: pl.DataFrame, display: str) -> None:
    """Add a tester's requests: outcome from their evidence (`ok`, `http_status`, `error`,
    and the tester's own `_word` / `_cancelled` where it has them), run, warm-up."""

    def column(name: str) -> pl.Expr | None:
        return pl.col(name) if name in frame.columns else None

    if frame.width:
        frame = outcome.with_outcome(
            frame,
            ok=column("ok"),
            http_status=column("http_status"),
            error=column("error"),
            status_word=column("_word"),
            cancelled=column("_cancelled"),
        ).with_columns(outcome.ok_of(pl.col("outcome")))
    frame = frame.with_columns(
        pl.lit(display).alias("run"),
        pl.col("warmup").fill_null(False)
        if "warmup" in frame.columns
        else pl.lit(False).alias("warmup"),
    )
    note_duplicate_ids(frame, result.notes)
    result.add("client_requests", frame)


def concat_frames(frames: list[pl.DataFrame]) -> pl.DataFrame:
    return (
        pl.concat([f for f in frames if f.width], how="diagonal_relaxed")
        if frames
        else pl.DataFrame()
    )
