"""The facts every rule reads, computed once.

Failed requests are put on the servers' clock, and each is paired with the
instances it could have met: the one it reached when that is known, else
every instance (a request that reached none, or an unknown one, could have
been turned away while any of them was busy). The engine's stats lines and
events inside each request's window are joined to those pairs, so a rule
reads the state of the instance where a failure happened, not the fleet's.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field

import polars as pl

from logforensics import model

# Columns of the request frame the rules read, with their type when a frame lacks them
# (a frame built by hand, or before the correlation stage adds them).
REQUEST_COLUMNS = {
    "step": pl.Int64,
    "warmup": pl.Boolean,
    "instance": model.LABEL,
    "proxy_instance": model.LABEL,
    "proxy_upstream": model.LABEL,
    "proxy_delivery": model.LABEL,
    "proxy_status": model.STATUS,
    "proxy_source": model.SOURCE,
    "proxy_attempts": model.COUNT,  # upstream attempts the proxy logged (a retry: > 1)
    "proxy_also_reached": model.LABEL,  # instances an attempt reached before a retry
    "latency_s": pl.Float64,
    "ttft_s": pl.Float64,  # the tester's time to first token
    "output_tokens": model.COUNT,
    "concurrency": model.COUNT,
    "reach": pl.Utf8,
    "outcome": model.LABEL,
    "error": model.LABEL,
    "http_status": model.STATUS,
    "arrived_at": pl.Datetime("us", "UTC"),  # when its engine logged its arrival
    "connect_target": model.LABEL,  # refused at connect: the instance it was sent to
}
GAVE_UP_STATUSES = [499, 504]  # a proxy's "client left" / "upstream timed out": a slow answer
TIMEOUT_TEXT = r"(?i)timed? ?out|timeout|deadline exceeded"


def failure_class() -> pl.Expr:
    """The failure's class: the correlation stage's `outcome` where it gives one, else a
    rough class from the status and error text (`timeout`, `http_NNN`, else `error`)."""
    fallback = (
        pl.when(pl.col("http_status").is_not_null())
        .then(pl.format("http_{}", pl.col("http_status")))
        .when(model.text("error").str.contains(TIMEOUT_TEXT))
        .then(pl.lit("timeout"))
        .otherwise(pl.lit("error"))
    )
    return pl.coalesce(pl.col("outcome").cast(pl.Utf8), fallback)


def client_error() -> pl.Expr:
    """A 4xx answer (not 408 or 429): the server rejected the request itself, which no
    capacity limit explains (a rule reading engine lines may still, e.g. KV-too-small)."""
    named = pl.col("failure_class").str.extract(r"^http_(4\d\d)$", 1).cast(pl.Int64)
    code = pl.coalesce(named, pl.col("http_status"))
    return ((code >= 400) & (code < 500) & ~code.is_in([408, 429])).fill_null(False)


def slow_failure() -> pl.Expr:
    """A failure that says the answer took too long: a client or proxy timeout."""
    return (
        (pl.col("failure_class") == "timeout")
        | (pl.col("failure_class") == "http_504")
        | pl.col("proxy_status").is_in(GAVE_UP_STATUSES).fill_null(False)
    )


def waited_in_front(t) -> pl.Expr:
    """A failure whose engine received it late: it spent most of its time before the engine
    (a proxy's queue), so its instance's state does not explain it."""
    wait = (pl.col("arrived_at") - pl.col("w_start")).dt.total_microseconds() / 1e6
    window = (pl.col("w_end") - pl.col("w_start")).dt.total_microseconds() / 1e6
    return ((wait >= t.front_wait_s) & (wait >= 0.5 * window)).fill_null(False)


# engine events that say the KV cache ran short (a priority preemption does not)
PRESSURE_KINDS = ["preempted", "kv_full", "oom"]


def preemption_sign(t) -> pl.Expr:
    """A stats line where Running fell while Waiting rose right after a full KV cache:
    vLLM preempted (0.32 prints no `Preemptions:` although it preempts)."""
    return (
        (pl.col("prev_kv_pct") >= t.kv_full_pct)
        & (pl.col("running") < pl.col("prev_running"))
        & (pl.col("waiting") > pl.col("prev_waiting"))
    ).fill_null(False)


def kv_columns(stats: pl.DataFrame) -> pl.DataFrame:
    """KV usage as the engine reports it (the GPU's, else the CPU build's) and which it is;
    each line's predecessor on the same instance, for rules that read changes."""
    ordered = stats.sort("instance", "at", nulls_last=True)
    kv = pl.coalesce(pl.col("gpu_kv_pct"), pl.col("cpu_kv_pct"))
    return ordered.with_columns(
        kv.alias("kv_pct"),
        pl.when(pl.col("gpu_kv_pct").is_not_null())
        .then(pl.lit("GPU"))
        .when(pl.col("cpu_kv_pct").is_not_null())
        .then(pl.lit("CPU"))
        .alias("kv_device"),
    ).with_columns(
        pl.col("kv_pct").shift(1).over("instance").alias("prev_kv_pct"),
        pl.col("running").shift(1).over("instance").alias("prev_running"),
        pl.col("waiting").shift(1).over("instance").alias("prev_waiting"),
    )


@dataclass
class Facts:
    measured: pl.DataFrame  # measured requests, with w_start/w_end (servers' clock), target
    failures: pl.DataFrame  # the failed ones (ok is False), `fid` = row number, classed
    server: pl.DataFrame  # server_requests (the instances' request lines)
    stats: pl.DataFrame  # engine_stats + kv_pct, kv_device, prev_* (see kv_columns)
    events: pl.DataFrame  # engine_events
    proxy_events: pl.DataFrame
    window_stats: pl.DataFrame  # (fid, instance it could have met) × its stats lines in the window
    window_events: pl.DataFrame  # the same pairs × the engine events in the window
    # the same pairs × the requests that instance's spans show arriving in the window
    # (request_timings: queue, prefill and decode time as the engine measured them)
    window_timings: pl.DataFrame
    instances: list[str]
    coverage: dict[str, tuple[dt.datetime, dt.datetime]]
    upstream_instances: dict[str, str]  # proxy upstream address → instance
    runs: list[model.Step]
    # what several rules derive alike from these facts, derived once (`once`)
    derived: dict = field(default_factory=dict, repr=False, compare=False)

    def once(self, key: tuple, derive: Callable[[], pl.DataFrame]) -> pl.DataFrame:
        """`derive()`, kept under `key` for the next rule that asks (three rules read the
        shedding states: each a group-by of every window's stats lines)."""
        if key not in self.derived:
            self.derived[key] = derive()
        return self.derived[key]

    @property
    def sent(self) -> int:
        return self.measured.height

    @property
    def failed(self) -> int:
        return self.failures.height

    def test_end(self) -> dt.datetime | None:
        """When the test's last measured request ended, on the servers' clock."""
        return self.measured["w_end"].max()

    def no_claims(self) -> pl.Series:
        """A rule's claims when it explains no failure."""
        return self.failures.select(pl.repeat(False, pl.len()).alias("c"))["c"]


def with_request_columns(requests: pl.DataFrame) -> pl.DataFrame:
    """The request frame with every column the rules read (absent ones null, labels
    as labels: a frame built of strings joins the tables' instances)."""
    given = requests.schema
    fixed = [
        pl.lit(None, dtype=dtype).alias(name) if name not in given else pl.col(name).cast(dtype)
        for name, dtype in REQUEST_COLUMNS.items()
        if name not in given or (dtype == model.LABEL and given[name] != dtype)
    ]
    frame = requests.with_columns(fixed) if fixed else requests
    return frame.with_columns(
        pl.col("warmup").fill_null(False), pl.col("reach").fill_null("unknown")
    )


def build(
    requests: pl.DataFrame,
    tables: dict[str, pl.DataFrame],
    offset_s: float,
    instances: list[str],
    pad_s: float,
    coverage: dict[str, tuple[dt.datetime, dt.datetime]] | None = None,
    runs: list[model.Step] | None = None,
    upstreams: dict[str, str | None] | None = None,
) -> Facts:
    shift = pl.duration(microseconds=int(round(offset_s * 1e6)))
    ended = pl.coalesce(
        pl.col("ended_at"),
        pl.col("started_at") + pl.duration(microseconds=(pl.col("latency_s") * 1e6).cast(pl.Int64)),
    )
    measured = model.without_warmup(with_request_columns(requests)).with_columns(
        (pl.col("started_at") + shift).alias("w_start"),
        (ended + shift).alias("w_end"),
        # (a refused connect: the instance it was sent straight to, not listening)
        pl.coalesce(pl.col("instance"), pl.col("proxy_instance"), pl.col("connect_target")).alias(
            "target"
        ),
    )
    # (classed once a failure: on every request it formatted 6.6M statuses at 20M)
    failures = (
        measured.filter(pl.col("ok").eq(False))
        .with_columns(failure_class().alias("failure_class"))
        .with_columns(slow_failure().alias("slow"), client_error().alias("client_error"))
        .with_row_index("fid")
    )
    stats = kv_columns(tables["engine_stats"])
    mapping = {a: i for a, i in (upstreams or {}).items() if i}
    # (lazy: 2 MB for the distinct pairs of 6.6M requests at 20M, 0.34 GB eager)
    pairs = (
        measured.lazy().select("proxy_upstream", "proxy_instance").drop_nulls().unique().collect()
    )
    for address, name in pairs.sort(pl.all()).iter_rows():
        mapping.setdefault(address, name)
    candidates = _candidates(failures, instances, pad_s)
    return Facts(
        measured=measured,
        failures=failures,
        server=tables["server_requests"],
        stats=stats,
        events=tables["engine_events"],
        proxy_events=tables["proxy_events"],
        window_stats=_inside(candidates, stats),
        window_events=_inside(candidates, tables["engine_events"]),
        window_timings=_inside(
            candidates, tables.get("request_timings", model.empty("request_timings"))
        ),
        instances=instances,
        coverage=coverage if coverage is not None else _coverage(tables, instances),
        upstream_instances=mapping,
        runs=runs or [],
    )


def _candidates(failures: pl.DataFrame, instances: list[str], pad_s: float) -> pl.DataFrame:
    """(fid, instance) for each failure: the instance it reached, else every instance."""
    timed = failures.filter(pl.col("w_start").is_not_null() & pl.col("w_end").is_not_null())
    pad = dt.timedelta(seconds=pad_s)
    window = [pl.col("w_start"), (pl.col("w_end") + pad).alias("w_until")]
    known = (pl.col("reach") == "reached") & pl.col("target").is_not_null()
    own = timed.filter(known).select("fid", pl.col("target").alias("instance"), *window)
    fleet = timed.filter(~known).select("fid", *window)
    if instances and fleet.height:
        fleet = fleet.join(
            pl.DataFrame({"instance": instances}, schema={"instance": model.LABEL}), how="cross"
        ).select("fid", "instance", "w_start", "w_until")
    else:
        fleet = own.clear()
    return pl.concat([own, fleet])


def _inside(candidates: pl.DataFrame, frame: pl.DataFrame) -> pl.DataFrame:
    """Rows of an instance table inside each candidate pair's window (one join an instance)."""
    parts = []
    for name in candidates["instance"].unique().sort().to_list():  # instances, not rows
        rows = frame.filter((pl.col("instance") == name) & pl.col("at").is_not_null())
        pairs = candidates.filter(pl.col("instance") == name)
        if rows.is_empty():
            continue
        parts.append(
            pairs.join_where(
                rows.drop("instance"),
                pl.col("at") >= pl.col("w_start"),
                pl.col("at") <= pl.col("w_until"),
            )
        )
    if not parts:
        return candidates.join(frame.drop("instance").clear(), how="cross")
    return pl.concat(parts, how="vertical_relaxed")


def _coverage(tables: dict[str, pl.DataFrame], instances: list[str]) -> dict:
    """Each instance's first and last timed row, when the caller has no file spans."""
    times = pl.concat(
        [
            tables[t].select("instance", "at")
            for t in ("server_requests", "engine_stats", "engine_events")
        ]
    ).filter(pl.col("instance").is_in(instances) & pl.col("at").is_not_null())
    spans = times.group_by("instance").agg(
        pl.col("at").min().alias("a"), pl.col("at").max().alias("b")
    )
    return {name: (a, b) for name, a, b in spans.iter_rows()}


def span_text(start: dt.datetime | None, end: dt.datetime | None) -> str:
    """A time span as a reader wants it: 16:19:34–16:21:44 UTC (dates only when needed)."""
    if start is None or end is None:
        return "the failure times"
    same_day = start.date() == end.date()
    a = start.strftime("%H:%M:%S" if same_day else "%Y-%m-%d %H:%M:%S")
    b = end.strftime("%H:%M:%S" if same_day else "%Y-%m-%d %H:%M:%S")
    day = f" on {start.date().isoformat()}" if same_day else ""
    return f"{a}–{b} UTC{day}"


def at_text(moment: dt.datetime | None) -> str:
    return moment.strftime("%H:%M:%S UTC") if moment is not None else "an unknown time"


def names(frame: pl.DataFrame) -> str:
    """The instances a frame's rows are on, for evidence text."""
    return ", ".join(frame["instance"].drop_nulls().unique().sort().to_list())


def labels(frame: pl.DataFrame, column: str = "source") -> list[str]:
    """file:line of a frame's sources, each once, in time order where the frame has one."""
    if frame.is_empty():
        return []
    ordered = frame.sort("at", nulls_last=True) if "at" in frame.columns else frame
    ids = ordered[column].drop_nulls().unique(maintain_order=True)
    return model.source_labels(ids)


def claims(facts: Facts, pairs: pl.DataFrame, where: pl.Expr) -> pl.Series:
    """One Boolean a failure: `where` holds for it and one of its (fid, instance) pairs
    is in `pairs`."""
    hit = pairs["fid"].unique()
    return facts.failures.select((pl.col("fid").is_in(hit.implode()) & where).alias("c"))["c"]


def merged_windows(failures: pl.DataFrame, pad_s: float) -> pl.DataFrame:
    """The failures' windows, padded, merged where they overlap: few intervals to join
    proxy events on, however many failures share a burst."""
    pad = dt.timedelta(seconds=pad_s)
    spans = (
        failures.filter(pl.col("w_start").is_not_null() & pl.col("w_end").is_not_null())
        .select((pl.col("w_start") - pad).alias("a"), (pl.col("w_end") + pad).alias("b"))
        .sort("a")
    )
    if spans.is_empty():
        return spans
    starts_new = pl.col("a") > pl.col("b").cum_max().shift(1)
    return (
        spans.with_columns(starts_new.fill_null(True).cum_sum().alias("g"))
        .group_by("g")
        .agg(pl.col("a").min(), pl.col("b").max())
        .drop("g")
        .sort("a")
    )


def inside_spans(frame: pl.DataFrame, spans: pl.DataFrame) -> pl.DataFrame:
    """Rows of `frame` whose `at` falls in one of the (disjoint) spans."""
    if frame.is_empty() or spans.is_empty():
        return frame.clear()
    return (
        frame.filter(pl.col("at").is_not_null())
        .join_where(spans, pl.col("at") >= pl.col("a"), pl.col("at") <= pl.col("b"))
        .drop("a", "b")
    )
