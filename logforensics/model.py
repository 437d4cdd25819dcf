"""The canonical tables every parser produces and every later stage reads.

All times are UTC with microsecond resolution. Every row keeps `source`, so
that any number in a report can be traced back to text: an Int64 that packs
the file (or file and record style) with the line number, rendered as
``file:line`` by `source_labels` where a report shows it. A string per row
would be 60–90 bytes (the path repeated on every row); at 20M lines that was
over a gigabyte of the canonical tables.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import threading
import types
import typing

import polars as pl

UTC_US = pl.Datetime("us", "UTC")
SOURCE = pl.Int64  # see `source_id`
# A label: a column of few distinct values (an instance's name, a method, a path, an
# event's kind, an outcome). Held as polars' Categorical: 4 bytes a row against a
# string's 16 and its text (on the 5M-short bench the tables after parsing are 259 MB
# instead of 617). Parquet holds it as a dictionary-encoded string; a plain string
# column is read back as one (`conform`).
LABEL = pl.Categorical()


def text(column: str) -> pl.Expr:
    """A column as text for `str` expressions, whether it is held as a label or a string."""
    return pl.col(column).cast(pl.Utf8)


def label(text: str | None) -> pl.Expr:
    """`text` as a LABEL literal: a `when` chain of these yields labels directly (over 6.6M
    requests at 20M 0.005 s, against 0.2 s for a chain of strings cast afterwards)."""
    return pl.lit(text, dtype=LABEL)


# An HTTP status (a proxy's own 499, 444 or 460 besides): 2 bytes a row against 8. Four
# such columns of 6.6M rows each at 20M, 150 MB of the tables (and of their copies).
STATUS = pl.Int16
# A client's step, concurrency, request index or token count: 4 bytes a row against 8
# (100 MB of the 20M client table). Only compared, grouped and joined, never summed.
COUNT = pl.Int32

CLIENT_REQUESTS = {
    "run": LABEL,  # the file or block the request came from (one value a file)
    "step": COUNT,  # load step as the client recorded it (None if unknown)
    # what the tester configured for this request's step (None where no metadata says)
    "concurrency": COUNT,
    # the request rate (requests/s) the tester was set to send this step at, where it fixed
    # one (GuideLLM's constant/poisson, `vllm bench serve --request-rate`); None: unbounded
    "rate": pl.Float64,
    "index": COUNT,  # request number within its step
    "started_at": UTC_US,
    "ended_at": UTC_US,
    "latency_s": pl.Float64,
    "ok": pl.Boolean,  # True only for outcome ok; null when the outcome is unknown
    "outcome": LABEL,  # ingest.outcome's vocabulary: ok | timeout | refused | reset | ...
    "http_status": STATUS,
    # the tester's error text, a LABEL (`text` reads it): failures' texts repeat, and a
    # string column costs 16 bytes a row even where it is null (at 20M lines, with 1% of
    # the requests failed: 103 MiB as text, 25 as a label)
    "error": LABEL,
    "output_tokens": COUNT,
    # time to first token as the tester measured it (streamed answers), seconds
    "ttft_s": pl.Float64,
    "marker": pl.Utf8,
    "request_id": pl.Utf8,
    "warmup": pl.Boolean,
    "timeout_s": pl.Float64,  # the client's timeout, where it recorded one
    "rest_before_s": pl.Float64,  # rest the client took before this request's step
    # the host:port the client's own trace says it connected to (AIPerf's trace_data)
    "server_address": LABEL,
    "source": SOURCE,
}

SERVER_REQUESTS = {
    "instance": LABEL,
    "at": UTC_US,
    "at_precision_s": pl.Float64,  # how far the true time may be from `at`
    "event": LABEL,  # access | received | finished | aborted
    "method": LABEL,
    "path": LABEL,
    "http_status": STATUS,
    "request_id": pl.Utf8,
    "prompt_marker": pl.Utf8,
    "source": SOURCE,
}

ENGINE_STATS = {
    "instance": LABEL,
    "at": UTC_US,
    "running": pl.Int64,
    "waiting": pl.Int64,
    "swapped": pl.Int64,
    "gpu_kv_pct": pl.Float64,
    "cpu_kv_pct": pl.Float64,
    "prompt_tps": pl.Float64,
    "gen_tps": pl.Float64,
    "prefix_hit_pct": pl.Float64,
    "source": SOURCE,
}

ENGINE_EVENTS = {
    "instance": LABEL,
    "at": UTC_US,
    "kind": LABEL,  # preempted | kv_full | oom | engine_dead | ...
    "detail": pl.Utf8,
    "source": SOURCE,
}

# What an engine measured of each request, where it exported per-request traces
# (OpenTelemetry spans: vLLM's `llm_request`, SGLang's `Req` spans); absent otherwise.
REQUEST_TIMINGS = {
    "instance": LABEL,
    "at": UTC_US,  # when the engine received the request (the span's start)
    "request_id": pl.Utf8,  # the engine's id for it (vLLM gen_ai.request.id, SGLang rid)
    "queue_s": pl.Float64,  # waited in the engine's queue before it was first scheduled
    "ttft_s": pl.Float64,  # arrival to first token, as the engine saw it
    "prefill_s": pl.Float64,  # scheduled to first token
    "decode_s": pl.Float64,  # first token to last
    "e2e_s": pl.Float64,  # arrival to finish, as the engine saw it
    "source": SOURCE,
}

PROXY_EVENTS = {
    "at": UTC_US,
    "instance": LABEL,  # where the event was logged, if known
    "kind": LABEL,  # timeout | broken_pipe | conn_refused | upstream_5xx | ...
    "http_status": STATUS,
    "upstream": LABEL,
    "detail": pl.Utf8,
    "source": SOURCE,
}

PROXY_REQUESTS = {
    "at": UTC_US,  # when the proxy logged the request (nginx: its end)
    "proxy": LABEL,  # the log it came from
    "client": LABEL,  # the peer that called the proxy
    "method": LABEL,
    "path": LABEL,
    "http_status": STATUS,  # what the proxy answered
    "upstream": LABEL,  # address (or group name) the proxy tried, as logged
    "upstream_status": STATUS,  # what the upstream answered, if it did
    "status_origin": LABEL,  # upstream | proxy | unknown: who produced http_status
    "delivery": LABEL,  # reached | refused | unknown: did the request reach a backend
    "request_time_s": pl.Float64,
    "upstream_time_s": pl.Float64,
    "request_id": pl.Utf8,
    # upstream attempts logged (a retry is one more; nginx's lists); null: not logged
    "attempts": COUNT,
    # earlier attempts' upstreams that the request reached before it was retried, `, `-joined
    "also_reached": LABEL,
    "source": SOURCE,
}

# The correlated requests table `analyze` hands on (`Analysis.requests`): the client's
# records with what every witness says of each. Built by the correlate stage, column by
# column; `analyze` conforms it to this at the end, and a test holds every recording to it.
REQUESTS = {
    **CLIENT_REQUESTS,
    # the instance log that holds the request (attribute), and how it was tied
    "instance": LABEL,
    "match_key": LABEL,  # request_id | marker | time_window | engine_lifecycle | ...
    "ambiguous": pl.Boolean,  # tied by time where more than one instance fits
    "server_source": SOURCE,  # the instance line that places it
    "engine_sources": pl.List(SOURCE),  # the engine's own lines about it
    "arrived_at": UTC_US,  # when the instance logged it (the servers' clock)
    "served_until": UTC_US,  # when the instance finished it
    "late": pl.Boolean,  # the instance finished it after the client gave up
    "unclaimed_arrival": pl.Boolean,  # an arrival no request claimed may be this one's
    # an ambiguous clock: the two offsets place it at different instances
    "clock_disputed": pl.Boolean,
    "instance_at_offset": LABEL,
    "instance_at_rival": LABEL,
    # what the proxy's log says of it (proxy.attribute)
    "proxy_upstream": LABEL,
    "proxy_instance": LABEL,
    "proxy_delivery": LABEL,  # reached | refused | unknown
    "proxy_status": STATUS,
    "proxy_source": SOURCE,
    "proxy_attempts": COUNT,
    "proxy_also_reached": LABEL,  # another instance a retried attempt reached
    # the reach decision (reach.decide_reach)
    "reach": LABEL,  # reached | unreached | unknown
    "reach_witness": LABEL,
    "reached_instance": LABEL,
    # a request that never connected: the instance whose announced address it was refused
    # at (records.connect_target; it stays unreached)
    "connect_target": LABEL,
}

SCHEMAS: dict[str, dict[str, pl.DataType]] = {
    "client_requests": CLIENT_REQUESTS,
    "server_requests": SERVER_REQUESTS,
    "engine_stats": ENGINE_STATS,
    "engine_events": ENGINE_EVENTS,
    "request_timings": REQUEST_TIMINGS,
    "proxy_events": PROXY_EVENTS,
    "proxy_requests": PROXY_REQUESTS,
}

# The columns of a parsed table read once the requests are correlated (by the diagnosis,
# the findings and the report: the ledger's cited proxy lines); `analyze` lets go of the
# rest (`narrowed`). The proxy's peer, upstream, delivery and attempts are in the requests
# table by then: 0.1 GB at 20M, ~1 GB at 150M not held through the diagnosis and report.
READ_AFTER_CORRELATION: dict[str, tuple[str, ...]] = {
    "proxy_requests": ("at", "upstream_status", "request_time_s", "upstream_time_s", "source"),
}


LINE_SPAN = 1 << 32  # source = prefix id × LINE_SPAN + line number
_PREFIXES: list[str] = []  # prefix id → text, e.g. "gpu-0.log:" or "report.json:record "
_PREFIX_IDS: dict[str, int] = {}
_PREFIX_LOCK = threading.Lock()


def source_prefix(prefix: str) -> int:
    """The id of a label prefix, registered on first use (process-wide, so frames from
    any file or analysis can be concatenated and still render; files parse in threads)."""
    with _PREFIX_LOCK:
        if prefix not in _PREFIX_IDS:
            _PREFIX_IDS[prefix] = len(_PREFIXES)
            _PREFIXES.append(prefix)
        return _PREFIX_IDS[prefix]


def source_id(prefix: str, number: pl.Expr | int = 0) -> pl.Expr:
    """`source` for rows labelled prefix + number ("gpu-0.log:" + 123); 0 is the prefix alone."""
    return (
        pl.lit(source_prefix(prefix) * LINE_SPAN, dtype=SOURCE)
        + (number if isinstance(number, pl.Expr) else pl.lit(number)).cast(SOURCE)
    ).alias("source")


def _prefixes() -> list[str]:
    with _PREFIX_LOCK:
        return list(_PREFIXES)


def source_label(column: str = "source") -> pl.Expr:
    """`file:line` text of a source column (null stays null)."""
    ids = pl.col(column)
    prefixes = _prefixes()
    prefix = (ids // LINE_SPAN).replace_strict(
        list(range(len(prefixes))), prefixes, return_dtype=pl.Utf8, default=None
    )
    number = ids % LINE_SPAN
    return (
        pl.when(number == 0).then(prefix).otherwise(pl.concat_str(prefix, number.cast(pl.Utf8)))
    ).alias(column)


def source_file(column: str = "source") -> pl.Expr:
    """The file part of a source column's labels (`gpu-0.log`), for grouping by file."""
    ids = pl.col(column)
    # "gpu-0.log:" → gpu-0.log; "report.json:record " or "stats.csv:Aggregated" → the file
    files = [p[:-1] if p.endswith(":") else p.rsplit(":", 1)[0] for p in _prefixes()]
    return (ids // LINE_SPAN).replace_strict(
        list(range(len(files))), files, return_dtype=pl.Utf8, default=None
    )


def source_labels(ids: pl.Series) -> list[str]:
    """Labels of source ids, in order, for evidence lists and tables."""
    return pl.DataFrame({"source": ids.cast(SOURCE)}).select(source_label())["source"].to_list()


def source_remap(frame: pl.DataFrame, prefixes: dict[int, str]) -> pl.DataFrame:
    """Source ids written by another process (the --cache) → this process's, via their prefixes."""
    if "source" not in frame.columns or not prefixes:
        return frame
    here = {old: source_prefix(text) for old, text in prefixes.items()}
    if len(here) == 1:  # one file's rows, all of one prefix: a shift (a lookup took 0.3 s at 20M)
        ((old, new),) = here.items()
        low, high = frame.select(pl.col("source").min().alias("low"), pl.col("source").max()).row(0)
        if low is None or low // LINE_SPAN == high // LINE_SPAN == old:
            if new == old:
                return frame
            return frame.with_columns(pl.col("source") + (new - old) * LINE_SPAN)
    return frame.with_columns(
        (
            (pl.col("source") // LINE_SPAN).replace_strict(here, return_dtype=SOURCE) * LINE_SPAN
            + pl.col("source") % LINE_SPAN
        ).alias("source")
    )


def prefixes_of(frame: pl.DataFrame) -> dict[int, str]:
    """The prefixes a frame's source ids use: id → text (for writing the --cache)."""
    if "source" not in frame.columns:
        return {}
    ids = (frame["source"].drop_nulls() // LINE_SPAN).unique().to_list()
    prefixes = _prefixes()
    return {i: prefixes[i] for i in sorted(ids)}


def empty(table: str) -> pl.DataFrame:
    return pl.DataFrame(schema=SCHEMAS[table])


def detached(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` with its strings copied out of the text they were cut from.

    polars cuts a string (`str.slice`, a regex's group) and filters rows without copying:
    the result points into the buffers of the text it came from. Ten rows kept of a
    24 MiB batch of log lines keep all 24 MiB alive, so the rows a parse keeps of each
    batch (its tables, its lines left for later) would hold the whole file. Labels
    (`LABEL`) own their strings already, and a column of nulls holds none.
    """
    nulls = null_counts(frame)
    text = [
        name
        for name, dtype in frame.schema.items()
        if dtype == pl.Utf8 and nulls[name] < frame.height
    ]
    if not text:  # (an empty frame has no column with a value)
        return frame
    return frame.with_columns(pl.concat_str(pl.col(name), pl.lit("")).alias(name) for name in text)


def null_counts(frame: pl.DataFrame) -> dict[str, int]:
    """Each column's nulls, counted by an expression: `frame[name]` would write a column
    held as one value (a literal) out in full, and the frame would keep that copy."""
    return frame.null_count().row(0, named=True) if frame.width else {}


def concatenated(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """`frames` one after another, in one chunk, `frames` emptied: the columns are copied
    into one chunk each in turn, each letting go of its pieces once copied, so that the
    table is held once and one column twice (`pl.concat(rechunk=True)`: twice whole)."""
    whole = pl.concat(frames, rechunk=False)
    frames.clear()
    for name, chunks in zip(whole.columns, whole.n_chunks("all"), strict=True):
        if chunks > 1:  # (a one-column frame's rechunk keeps a literal column a literal)
            whole = whole.with_columns(whole.select(name).rechunk().to_series())
    return whole


def nulls_as_literals(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` with each column that holds only nulls kept as one typed null.

    A join or a gather fills a column row by row (8 bytes a row and its validity for
    an Int64 or a datetime, 16 for a string, even when every row is null); a literal
    column is held as one value (20M: the engine columns of requests no engine logged,
    50 MB each).
    """
    nulls = null_counts(frame)
    empty = [name for name in frame.columns if frame.height and nulls[name] == frame.height]
    if not empty:
        return frame
    return frame.with_columns(pl.lit(None, dtype=frame.schema[name]).alias(name) for name in empty)


def constants_as_literals(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` with each column of one value (`one_valued`) kept as that one value.

    A table's method, path, precision or proxy is often one value in every row (20M: a
    quarter GB of such columns in the tables the analysis holds), held as a literal as a
    column of nulls is (`nulls_as_literals`).
    """
    frame = nulls_as_literals(frame)
    one = one_valued(frame)
    if not one:
        return frame
    first = frame.select(pl.col(one).first()).row(0)
    return frame.with_columns(
        pl.lit(value, dtype=frame.schema[name]).alias(name)
        for name, value in zip(one, first, strict=True)
    )


def one_valued(frame: pl.DataFrame) -> list[str]:
    """The columns of two rows or more holding one value and no null, compared by their
    extremes in one pass (labels by their codes; text is not compared)."""
    if frame.height < 2:
        return []
    nulls = null_counts(frame)
    full = [
        (name, dtype)
        for name, dtype in frame.schema.items()
        if (dtype.is_numeric() or dtype.is_temporal() or dtype in (pl.Boolean, LABEL))
        and not nulls[name]
    ]
    if not full:
        return []

    def code(name: str, dtype: pl.DataType) -> pl.Expr:
        return pl.col(name).to_physical() if dtype == LABEL else pl.col(name)

    ends = frame.select(
        expr
        for name, dtype in full
        for expr in (code(name, dtype).min().alias(f"{name}<"), code(name, dtype).max())
    ).row(0)
    return [name for i, (name, _) in enumerate(full) if ends[2 * i] == ends[2 * i + 1]]


def conform(table: str | dict[str, pl.DataType], frame: pl.DataFrame) -> pl.DataFrame:
    """Give a frame exactly a schema's columns, in order, with their dtypes: a parsed
    table's (by name, `SCHEMAS`) or another declared one (`REQUESTS`)."""
    schema = SCHEMAS[table] if isinstance(table, str) else table
    columns = []
    for name, dtype in schema.items():
        if name in frame.columns:
            # a "status" past Int16 (a client file's -1 is kept) is no HTTP status, a
            # count past Int32 no step, index or token count: unknown, not a failed parse
            columns.append(pl.col(name).cast(dtype, strict=dtype not in (STATUS, COUNT)))
        else:
            columns.append(pl.lit(None, dtype=dtype).alias(name))
    return frame.select(columns)


def without_warmup(requests: pl.DataFrame) -> pl.DataFrame:
    """The requests but the warm-up, not copied where there is none (a filter copies every
    column: 1.5 GB of requests at 20M)."""
    if not requests.select(pl.col("warmup").fill_null(False).any()).item():
        return requests
    return requests.filter(~pl.col("warmup"))


def narrowed(tables: dict[str, pl.DataFrame]) -> dict[str, pl.DataFrame]:
    """`tables` holding only what is read of them after the correlation
    (`READ_AFTER_CORRELATION`); the other tables whole."""
    return {
        name: frame.select(READ_AFTER_CORRELATION.get(name, frame.columns))
        for name, frame in tables.items()
    }


def declared(schema: dict[str, pl.DataType], frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` as the declared table `schema` (`REQUESTS`): its columns in order, its dtypes.
    A column the frame has and the schema lacks, or the other way round, is a bug of the
    stage that built it (a ValueError naming them), never silently dropped or filled."""
    extra = [c for c in frame.columns if c not in schema]
    missing = [c for c in schema if c not in frame.columns]
    if extra or missing:
        raise ValueError(f"not the declared table: undeclared {extra}, missing {missing}")
    return conform(schema, frame)


class Bottleneck(str, enum.Enum):
    """The verdict values scripts rely on (a contract: see README)."""

    FRONT_PROXY = "front_proxy"
    KV_CACHE = "kv_cache"
    GPU = "gpu"
    INSTANCE_FAILURE = "instance_failure"
    NONE = "none"
    INCONCLUSIVE = "inconclusive"


# ------------------------------------------------------------------ records
# What the stages after the tables hand on: frozen records, not dicts. Each is written
# to the JSON report field by field, in declaration order (`as_json`), and read back
# from it (`from_json`), so a report read from a file is the report analyze built.


OMIT_EMPTY = {"omit_empty": True}  # a field's metadata: left out of the JSON while empty


def as_json(value):
    """A record (or a list/dict of them) as JSON values: times as ISO 8601 with Z; a field
    marked `omit_empty` is left out while it is empty."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: as_json(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if getattr(value, f.name) or not f.metadata.get("omit_empty")
        }
    if isinstance(value, dict):
        return {k: as_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [as_json(v) for v in value]
    if isinstance(value, dt.datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, enum.Enum):
        return value.value
    return value


def from_json(kind, value):
    """`value` (parsed JSON) as `kind`: a record type, a list/dict of one, a time, a plain value.

    A record's fields are read by their declared types; a field the JSON lacks takes
    its default (a report written before the field existed), one it has in excess is
    ignored (a report written after, read for what this version knows)."""
    if value is None:
        return None
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        kinds = [a for a in args if a is not type(None)]
        return from_json(kinds[0], value) if len(kinds) == 1 else value
    if origin is list:
        return [from_json(args[0], v) for v in value] if args else list(value)
    if origin is dict:
        return {k: from_json(args[1], v) for k, v in value.items()} if args else dict(value)
    if kind is dt.datetime:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return kind(value)
    if dataclasses.is_dataclass(kind):
        hints = typing.get_type_hints(kind)
        known = {f.name for f in dataclasses.fields(kind)}
        return kind(**{k: from_json(hints[k], v) for k, v in value.items() if k in known})
    if kind is float and isinstance(value, int):
        return float(value)
    return value


@dataclasses.dataclass(frozen=True)
class Latency:
    """Client latency of a step's requests, seconds (the mean over successes)."""

    mean: float | None = None
    p50: float | None = None
    p95: float | None = None
    p99: float | None = None


@dataclasses.dataclass(frozen=True)
class Balance:
    """How evenly requests were spread, and whether the counts can tell (correlate.balance)."""

    shares: dict[str, float]
    max_min_ratio: float | None
    p_even: float | None
    verdict: str  # even | skewed | uneven, sample too small to prove skew | n/a


@dataclasses.dataclass(frozen=True)
class OverallBalance:
    """The balancer's split over every measured step, with the counts behind it."""

    counts: dict[str, int]
    shares: dict[str, float]
    max_min_ratio: float | None
    p_even: float | None
    verdict: str


@dataclasses.dataclass(frozen=True)
class BusyAtStart:
    """The stats line that shows an engine still busy when a step began."""

    instance: str
    at: dt.datetime
    running: int | None
    waiting: int | None
    source: str  # file:line


@dataclasses.dataclass(frozen=True)
class Failures:
    """Where a step's failed requests died (correlate.reach.failed_at), and how the client
    saw them end: what a comparison of two runs reads to say whether the bottleneck moved."""

    proxy: int = 0  # the proxy refused them (it logged so)
    before_instance: int = 0  # no instance received them
    instance: int = 0  # they reached an instance
    unknown: int = 0  # nothing decides
    at_instance: dict[str, int] = dataclasses.field(default_factory=dict)  # of `instance`
    outcomes: dict[str, int] = dataclasses.field(default_factory=dict)  # timeout, http_503, …


@dataclasses.dataclass(frozen=True)
class Step:
    """One load step as measured (the warm-up too, marked), every count by its witness.

    `per_instance` counts the step's requests that reached each instance, failed or
    not (a request the proxy retried counts for each it reached), `served_by` the
    successes each answered, `routed` the balancer's choice, `per_upstream` what the
    proxy's log alone says it delivered, `per_instance_uncertain` how far time alone
    may have a count off (correlate.steps.summarise)."""

    index: int | None
    run: str | None
    warmup: bool
    concurrency: int
    started_at: dt.datetime | None
    ended_at: dt.datetime | None
    sent: int
    succeeded: int
    failed: int
    unreached: int
    unknown: int
    reached_unseen: int
    outcome_unknown: int
    per_instance: dict[str, int]
    per_instance_uncertain: dict[str, int]
    served_by: dict[str, int]
    retried: int
    per_upstream: dict[str, int]
    routed: dict[str, int]
    contaminated: bool
    overlap_s: float | None
    busy_at_start: BusyAtStart | None
    timeout_s: float | None
    rest_before_s: float | None
    latency_s: Latency
    output_tokens_per_s: float | None
    balance: Balance
    failures: Failures = Failures()
    rate: float | None = None  # requests/s the tester was set to send at, where it fixed one


@dataclasses.dataclass(frozen=True)
class Capacity:
    """The seed's table read off: where the service stops coping as concurrency rises."""

    max_concurrency_all_ok: int | None
    failures_begin_at: int | None
    throughput_plateau_at: int | None
