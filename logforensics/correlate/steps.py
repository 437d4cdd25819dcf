"""Load steps: which requests belong together, what each step measured.

A step is the client's own step number where it logged one; otherwise a
burst of requests whose starts lie close together. A lone request before the
first burst is the warm-up. A step that starts while an earlier step's
requests are still pending is contaminated (the seed's first, garbage
measurement): its numbers mix two loads.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from logforensics import model
from logforensics.correlate.balance import balance
from logforensics.correlate.pairing import parts
from logforensics.correlate.reach import FAILED_AT, client_outcome, failed_at
from logforensics.correlate.records import MATCH_TOLERANCE_S, step_label_key
from logforensics.model import BusyAtStart, Capacity, Failures, Latency, Step, source_label

if TYPE_CHECKING:  # a record passed in: the diagnosis package imports this module
    from logforensics.diagnose.thresholds import Thresholds

BURST_GAP_S = 2.0  # starts further apart than this begin a new step
REST_S = 5.0  # nothing of a step label in flight this long, then a burst: the label ran again


def assign_steps(client: pl.DataFrame) -> pl.DataFrame:
    """Give every request a `step` (warm-ups keep their own flag).

    The tester's own word first: the step it recorded, else the concurrency
    it ran (an AIPerf sweep writes one file per level, each record carrying
    none). Only requests with neither are split into bursts by their start
    times, per file, and a lone request before a file's first burst is its
    warm-up.
    """
    if client.is_empty():
        return client
    if "concurrency" in client.columns:
        client = client.with_columns(pl.coalesce("step", "concurrency").alias("step"))
    if client.select(pl.col("step").filter(~pl.col("warmup")).is_not_null().all()).item():
        return _split_repeats(client)
    ordered = client.sort("run", "started_at", nulls_last=True)
    starts = pl.col("started_at")
    gap = ((starts.diff().over("run").dt.total_microseconds() / 1e6) > BURST_GAP_S).fill_null(False)
    ordered = ordered.with_columns((gap.cum_sum().over("run") + 1).alias("_burst"))
    sizes = ordered.group_by("run", "_burst").len()
    lone = sizes.filter((pl.col("_burst") == 1) & (pl.col("len") == 1)).join(
        sizes.group_by("run").len("bursts").filter(pl.col("bursts") > 1), on="run"
    )
    lone_first = pl.col("run").is_in(lone["run"].implode())
    first_burst = pl.col("_burst") == 1
    ordered = ordered.with_columns(
        (pl.col("warmup") | (first_burst & lone_first)).alias("warmup"),
        pl.coalesce(
            pl.col("step"), pl.col("_burst") - pl.when(lone_first).then(1).otherwise(0)
        ).alias("step"),
    )
    return ordered.drop("_burst")


def _split_repeats(client: pl.DataFrame) -> pl.DataFrame:
    """Steps numbered afresh, in order, in a file where one step label ran twice.

    The lab's client labels a step by its concurrency, so two steps of 8 share a
    label; a rest with nothing of the label in flight, then a burst of starts,
    is the label running again. A constant-rate step at a low rate has idle gaps
    but no burst after them, and keeps its label; a step the tester ran at a rate
    it names (`rate`: Poisson arrivals bunch by chance) is never split.
    """
    starts, ends = pl.col("started_at"), pl.col("ended_at").fill_null(pl.col("started_at"))
    label = "_label"
    # a label runs again only after a rest, and a rest needs two of its starts REST_S apart
    # (what is in flight ended after it started) or a request that ends before it starts:
    # a label with neither is not looked at again (at 20M, 0.5 s and 0.24 GB for this
    # test against 0.7 s and 0.5 GB for the windows below, which no label there needs)
    gap = starts.sort().diff().max().dt.total_microseconds() > REST_S * 1e6
    rests = client.group_by(step_label_key().alias(label)).agg(
        (gap | (pl.col("ended_at") < starts).any()).alias("_rested")
    )
    if not rests["_rested"].any():
        return client
    # the columns it reads (not the whole table: 2 GB less at 20M lines) in start order; the
    # windows below keep that order within each label (at 20M: 0.7 s against 1.5 s for a
    # sort on run, step and start and windows over two keys); which requests may start a
    # label again as one flag (the run, step, warm-up flag and rate sorted as well: 0.1 GB)
    rate_unnamed = pl.col("rate").is_null() if "rate" in client.columns else pl.lit(True)
    ordered = (
        client.select(
            "started_at",
            "ended_at",
            (~pl.col("warmup") & rate_unnamed).alias("_may_start"),
            step_label_key().alias(label),
        )
        .with_row_index("_i")
        .sort("started_at", nulls_last=True, maintain_order=True)
    )
    before = ends.cum_max().shift(1).over(label)
    idle = ((starts - before).dt.total_microseconds() > REST_S * 1e6).fill_null(False)
    burst = (
        (starts.shift(-1).over(label) - starts).dt.total_microseconds() <= BURST_GAP_S * 1e6
    ).fill_null(False)
    again = idle & burst & pl.col("_may_start")
    ordered = ordered.with_columns(again.cast(pl.Int32).cum_sum().over(label).alias("_again"))
    if not (ordered["_again"] > 0).any():
        return client
    ordered = ordered.with_columns(client.select("run", "step", "warmup")[ordered["_i"]])
    runs = ordered.filter(pl.col("_again") > 0)["run"].unique().implode()
    first = pl.col("started_at").min().over("run", "step", "_again")
    renumbered = (
        pl.when(~pl.col("warmup"))
        .then(pl.struct(first.alias("a"), pl.col("step").alias("b"), pl.col("_again").alias("c")))
        .rank("dense")
        .over("run")
    )
    steps = (
        ordered.select(
            "_i",
            pl.when(pl.col("run").is_in(runs) & ~pl.col("warmup"))
            .then(renumbered.cast(ordered.schema["step"]))
            .otherwise(pl.col("step"))
            .alias("step"),
        )
        .sort("_i")
        .get_column("step")
    )
    return client.with_columns(steps)


def _percentile(col: str, q: float) -> pl.Expr:
    return pl.col(col).filter(pl.col("ok")).quantile(q, "linear")


def reached_pairs(client: pl.DataFrame) -> pl.DataFrame:
    """(`run`, `step`, `_row`, `name`) for each instance a request reached: the one that
    served it, and any an attempt the proxy then retried elsewhere got to
    (`proxy_also_reached`). `client` carries `_row`."""
    served = (
        client.lazy()  # (the filter then copies only the four columns)
        .select("run", "step", "_row", pl.col("reached_instance").alias("name"))
        .filter(pl.col("name").is_not_null())
        .collect()
    )
    if "proxy_also_reached" not in client.columns:
        return served
    also = (
        client.lazy()
        .filter(pl.col("proxy_also_reached").is_not_null())
        .select(
            "run",
            "step",
            "_row",
            pl.col("proxy_also_reached").cast(pl.Utf8).str.split(", ").alias("name"),
            pl.col("reached_instance").cast(pl.Utf8).alias("_served"),
        )
        .explode("name")
        # (an instance counts once a request: the one that served it is in `served`)
        .filter(pl.col("_served").is_null() | (pl.col("name") != pl.col("_served")))
        .unique(["_row", "name"], maintain_order=True)
        .select("run", "step", "_row", pl.col("name").cast(served.schema["name"]))
        .collect()
    )
    return pl.concat([served, also])


def either_clock_pairs(client: pl.DataFrame) -> pl.DataFrame:
    """(`run`, `step`, `_row`, `name`) for a request left unattributed because an ambiguous
    clock's two offsets disagree, one of them placing it at instance `name` (and no other
    witness naming where it went)."""
    if "clock_disputed" not in client.columns:
        return pl.DataFrame(
            schema={
                "run": client.schema["run"],
                "step": client.schema["step"],
                "_row": pl.UInt32,
                "name": model.LABEL,
            }
        )
    disputed = client.filter(pl.col("clock_disputed") & pl.col("reached_instance").is_null())
    return pl.concat(
        disputed.select("run", "step", "_row", pl.col(c).cast(model.LABEL).alias("name"))
        for c in ("instance_at_offset", "instance_at_rival")
    ).filter(pl.col("name").is_not_null())


class Tally:
    """Per (run, step), how many requests name each value of a label column: bincounts over
    integer codes, one pass for all the instances (comparing 6.6M labels with each of eight
    names took 0.6-1.1 s a count at 20M; a polars grouping on three keys 1.5 s)."""

    def __init__(self, client: pl.DataFrame) -> None:
        low, high = client.select(pl.col("step").min().alias("lo"), pl.col("step").max()).row(0)
        self.low = int(low or 0)
        self.span = int(high or 0) - self.low + 2  # the last slot: no step
        distinct = client["run"].unique()
        self.runs = dict(
            zip(
                distinct.to_physical().cast(pl.Int64).fill_null(-1).to_list(),
                distinct.to_list(),
                strict=True,
            )
        )
        self.run_codes = sorted(self.runs)
        self.groups = len(self.run_codes) * self.span
        # one expression, in 32 bits where every slot of the counts fits (in numpy, seven
        # arrays of 64 bits as long as the requests: 0.2 GB at 20M)
        wide = pl.Int32 if self.groups < 2**31 else pl.Int64
        run = (
            pl.col("run")
            .to_physical()
            .cast(pl.Int64)
            .fill_null(-1)
            .replace_strict(self.run_codes, range(len(self.run_codes)), return_dtype=wide)
        )
        step = (pl.col("step").cast(wide) - self.low).fill_null(self.span - 1)
        self.group = client.select((run * self.span + step).alias("g")).to_series().to_numpy()

    def count(
        self, labels: pl.Series, rows: np.ndarray | None = None
    ) -> dict[tuple, dict[str, int]]:
        """`labels`: one per request (nulls not counted), or per entry of `rows` (positions
        of requests, a request counted once per distinct label; or a mask of requests)."""
        labels = labels.cast(pl.Categorical) if labels.dtype == pl.Utf8 else labels
        distinct = labels.drop_nulls().unique()
        code_of = distinct.to_physical().cast(pl.Int64).to_numpy()
        names = distinct.cast(pl.Utf8).to_list()
        width = max(len(names), 1)
        compact = np.zeros(int(code_of.max()) + 1 if len(code_of) else 1, dtype=np.int64)
        compact[code_of] = np.arange(len(code_of))
        codes = labels.to_physical().cast(pl.Int32).fill_null(-1).to_numpy()
        known = codes >= 0
        # each counted entry's slot, built in place (the expression held five arrays as long
        # as the requests at once: 0.3 GB at 20M)
        slot = (self.group if rows is None else self.group[rows])[known].astype(np.int64)
        slot *= width
        slot += compact[codes[known]]
        del codes, known
        counts = np.bincount(slot, minlength=self.groups * width).reshape(self.groups, width)
        del slot
        out: dict[tuple, dict[str, int]] = {}
        for g, k in zip(*np.nonzero(counts), strict=True):
            run = self.runs[self.run_codes[g // self.span]]
            step = None if g % self.span == self.span - 1 else int(g % self.span) + self.low
            out.setdefault((run, step), {})[names[k]] = int(counts[g, k])
        return out

    def count_where(self, labels: pl.Series, where: pl.Series) -> dict[tuple, dict[str, int]]:
        """`count` of the requests `where` holds (a boolean a request, null as false)."""
        where = where.fill_null(False)
        return self.count(labels.filter(where), where.to_numpy())


def retried(client: pl.DataFrame) -> pl.Expr:
    """The proxy logged more than one upstream attempt for the request."""
    if "proxy_attempts" not in client.columns:
        return pl.lit(False)
    return (pl.col("proxy_attempts") > 1).fill_null(False)


def upstream_name() -> pl.Expr:
    """The proxy's view of where a request went: the mapped instance, else the raw address."""
    return pl.coalesce(pl.col("proxy_instance"), pl.col("proxy_upstream"))


SERVER_LAG = dt.timedelta(seconds=MATCH_TOLERANCE_S)
BUSY_LOOKAHEAD_S = 12.0  # a stats line this soon after a step began shows what it began on


def busy_at_start(
    client: pl.DataFrame, stats: pl.DataFrame | None, offset_s: float
) -> dict[tuple, BusyAtStart]:
    """Steps that began while an engine was still busy with earlier work.

    The client may have given up on the previous step while a proxy's queue
    still fed its requests to the engines (the seed's first, garbage
    measurement). Where an instance logs each request's arrival, a stats line
    soon after the step began, before any of the step's own requests arrived
    there, that counts requests running or waiting shows it. Returns
    (run, step) → the first such line.
    """
    if stats is None or stats.is_empty() or "arrived_at" not in client.columns:
        return {}
    logging = client.select(
        pl.col("reached_instance").filter(pl.col("arrived_at").is_not_null()).unique()
    ).to_series()
    if logging.is_empty():
        return {}
    shift = pl.duration(microseconds=int(round(offset_s * 1e6)))
    measured = client.select("run", "step", "started_at", "arrived_at", "reached_instance").filter(
        ~client["warmup"] & client["started_at"].is_not_null()
    )
    starts = measured.group_by("run", "step").agg((pl.col("started_at").min() + shift).alias("at"))
    first_arrival = (
        measured.filter(pl.col("arrived_at").is_not_null())
        .group_by("run", "step", pl.col("reached_instance").alias("instance"))
        .agg(pl.col("arrived_at").min().alias("_own"))
    )
    looked = (
        starts.join(pl.DataFrame({"instance": logging}), how="cross")
        .sort("instance", "at")
        .join_asof(
            stats.select(
                "instance",
                pl.col("at").alias("_stats_at"),
                "running",
                "waiting",
                source_label(),
                pl.col("at"),
            ).sort("instance", "at"),
            on="at",
            by="instance",
            strategy="forward",
            tolerance=dt.timedelta(seconds=BUSY_LOOKAHEAD_S),
            check_sortedness=False,
        )
        .join(first_arrival, on=["run", "step", "instance"], how="left")
        .filter(
            (pl.col("running").fill_null(0) + pl.col("waiting").fill_null(0) > 0)
            & (pl.col("_own").is_null() | (pl.col("_stats_at") < pl.col("_own")))
        )
        .sort("_stats_at")
    )
    return {
        (row["run"], row["step"]): BusyAtStart(
            row["instance"], row["_stats_at"], row["running"], row["waiting"], row["source"]
        )
        for row in looked.unique(["run", "step"], keep="first", maintain_order=True).iter_rows(
            named=True
        )
    }


# witnesses that place a request by its time alone (an id or a prompt marker pins it)
PLACED_BY_TIME = ("access_line", "engine_lifecycle", "proxy")


OWN_SPAN_CHUNK = 1 << 20  # requests `could_be_another_steps` tests against their own span at once


def could_be_another_steps(client: pl.DataFrame, window_s: float) -> pl.Series:
    """Per request: placed by time alone, ending within `window_s` of another step's ends.

    A record placed by time may belong to any request whose end lies that near
    it; swaps inside one step leave its per-instance counts as they are, but a
    record that could be another step's request moves one count between steps.
    The count of such requests bounds how far a step's per-instance count may be
    off (`per_instance_uncertain`).
    """
    if client.is_empty() or "reach_witness" not in client.columns:
        return pl.Series("uncertain", [False] * client.height)
    ends = client.select(
        step_label_key().alias("_label"),
        "run",
        "step",
        "warmup",
        pl.col("ended_at").dt.epoch("us") / 1e6,
    )
    spans = (  # (a step known by its run and number: a warm-up without one has no span)
        ends.filter(~pl.col("warmup") & pl.col("run").is_not_null() & pl.col("step").is_not_null())
        .group_by("_label")
        .agg(
            pl.col("run").first(),
            pl.col("step").first(),
            pl.col("ended_at").min().alias("lo"),
            pl.col("ended_at").max().alias("hi"),
        )
        .drop_nulls()
    )
    at = ends["ended_at"].to_numpy()  # (a missing end as NaN: held by no span)

    def holding(which: pl.DataFrame, rows: np.ndarray | slice = slice(None)) -> np.ndarray:
        """How many of `which` spans, widened, hold each end of `rows` (sorted edges: two
        searches, not a pass a step)."""
        lo = np.sort(which["lo"].to_numpy() - window_s)
        hi = np.sort(which["hi"].to_numpy() + window_s)
        held = np.searchsorted(lo, at[rows], side="right")
        held -= np.searchsorted(hi, at[rows], "left")
        return held

    # every span holding the end, less those not another step's: its own step's; for a
    # request whose run or step is unknown, every span that could be its own (a warm-up
    # without a step: its run's)
    count = holding(spans)
    # each request's own span by its label, a part of the requests at a time (a join copied
    # every column of `ends`, 0.25 GB at 20M; each span's edges per request, 0.1 GB)
    index = (
        ends.select(
            pl.col("_label").replace_strict(
                spans["_label"], range(spans.height), default=-1, return_dtype=pl.Int32
            )
        )
        .to_series()
        .to_numpy()
    )
    own_lo = np.append(spans["lo"].to_numpy() - window_s, np.nan)  # (-1: no span, NaN)
    own_hi = np.append(spans["hi"].to_numpy() + window_s, np.nan)
    for part in parts(len(at), OWN_SPAN_CHUNK):
        end, own = at[part], index[part]
        count[part] -= (end >= own_lo[own]) & (end <= own_hi[own])
    del index
    for known, unknown in (("run", "step"), ("step", "run")):
        partial = ends.select(pl.col(unknown).is_null() & pl.col(known).is_not_null()).to_series()
        if not partial.any():
            continue
        for (value,), rows in ends.with_row_index("_i").filter(partial).group_by(known):
            rows = rows["_i"].to_numpy()
            count[rows] -= holding(spans.filter(pl.col(known) == value), rows)
    unknown = ends.select(pl.col("run").is_null() & pl.col("step").is_null()).to_series()
    near = (pl.Series(count) > 0) & ends["ended_at"].is_not_null() & ~unknown
    by_time = client["reach_witness"].is_in(list(PLACED_BY_TIME)).fill_null(False)
    return (near & by_time).alias("uncertain")


def summarise(
    client: pl.DataFrame,
    instances: list[str],
    engine_stats: pl.DataFrame | None = None,
    offset_s: float = 0.0,
    window_s: float = MATCH_TOLERANCE_S,
) -> list[Step]:
    """One record per step (warm-up first, marked).

    `per_instance` counts every request of the step that reached the instance,
    failed or not, by the strongest witness (`reach.decide_reach`; a request the
    proxy retried counts for each instance it reached, `reached`), `served_by`
    the successes each answered, `retried` the requests the proxy retried, and
    `per_instance_uncertain` how many of those a record placed by time alone
    could have given another step (`could_be_another_steps`, within `window_s`:
    the matching tolerance and the clock's interval), and those an ambiguous clock's
    two offsets place at it and elsewhere (`either_clock`); `per_upstream` what the
    proxy's log alone says it delivered to each upstream — a second witness.
    """
    if client.is_empty():
        return []
    client = client.with_columns(could_be_another_steps(client, window_s)).with_row_index("_row")
    upstreams = (
        sorted(
            client.select(upstream_name().filter(pl.col("proxy_delivery") == "reached"))
            .to_series()
            .drop_nulls()
            .unique()
            .to_list()
        )
        if "proxy_delivery" in client.columns
        else []
    )
    if "proxy_delivery" not in client.columns:
        client = client.with_columns(pl.lit(None, dtype=pl.Utf8).alias("proxy_delivery"))
    client = client.with_columns(
        pl.when(pl.col("warmup")).then(0).otherwise(pl.col("step")).alias("step"),
        failed_at().alias("_failed_at"),
    )
    failed = pl.col("ok") == False  # noqa: E712 (an unknown outcome is no failure)
    # per instance (and upstream), each count in one pass over the requests it names
    pairs = reached_pairs(client)
    uncertain = pl.concat(
        [
            pairs.filter(pl.col("_row").is_in(client.filter("uncertain")["_row"].implode())),
            either_clock_pairs(client),
        ]
    ).unique(["_row", "name"])
    by_step = Tally(client)
    failed_here = client.select(failed & (pl.col("_failed_at") == "instance")).to_series()
    by_name = {
        "@": by_step.count(pairs["name"], pairs["_row"].to_numpy()),
        "~": by_step.count(uncertain["name"], uncertain["_row"].to_numpy()),
        "$": by_step.count_where(client["reached_instance"], client["ok"]),
        "&": by_step.count(
            client.select(pl.coalesce("reached_instance", "proxy_instance")).to_series()
        ),
        "^": by_step.count(
            client.select(
                pl.when(pl.col("proxy_delivery") == "reached").then(upstream_name())
            ).to_series()
        ),
        "!@": by_step.count_where(client["reached_instance"], failed_here),
    }
    del pairs, uncertain, by_step, failed_here  # (counted: 0.14 GB at 20M, not held on)
    outcomes: dict[tuple, dict[str, int]] = {}
    for run, step, outcome, n in (
        client.filter(failed)
        .group_by("run", "step", client_outcome(client.columns).cast(pl.Utf8))
        .len()
        .sort("run", "step", "client_outcome")
        .iter_rows()
    ):
        outcomes.setdefault((run, step), {})[outcome] = n
    configured = (
        pl.col("concurrency").max() if "concurrency" in client.columns else pl.lit(None)
    ).alias("configured")
    stats = (
        # (by one integer key, not two: at 20M the grouping held 0.24 GB, not 0.39)
        client.with_columns(step_label_key().alias("_step_key"))
        .group_by("_step_key")
        .agg(
            pl.col("run").first(),
            pl.col("step").first(),
            pl.col("warmup").all().alias("warmup"),
            configured,
            pl.len().alias("sent"),
            pl.col("ok").sum().alias("succeeded"),
            (~pl.col("ok")).sum().alias("failed"),
            pl.col("ok").is_null().sum().alias("outcome_unknown"),
            (pl.col("reach") == "unreached").sum().alias("unreached"),
            (pl.col("reach") == "unknown").sum().alias("unknown"),
            (pl.col("reach_witness") == "success").sum().alias("reached_unseen"),
            pl.col("started_at").min().alias("started_at"),
            pl.col("ended_at").max().alias("ended_at"),
            # the servers may go on serving what the client gave up on (a proxy's queue)
            # (beyond what a server stamp and a client stamp of one moment may differ by)
            (
                pl.max_horizontal("ended_at", pl.col("served_until") - SERVER_LAG).max()
                if "served_until" in client.columns
                else pl.col("ended_at").max()
            ).alias("busy_until"),
            pl.col("latency_s").filter(pl.col("ok")).mean().alias("latency_mean_s"),
            _percentile("latency_s", 0.5).alias("latency_p50_s"),
            _percentile("latency_s", 0.95).alias("latency_p95_s"),
            _percentile("latency_s", 0.99).alias("latency_p99_s"),
            pl.col("output_tokens").filter(pl.col("ok")).sum().alias("output_tokens"),
            pl.col("latency_s").filter(pl.col("ok")).max().alias("ok_span_s"),
            pl.col("timeout_s").max().alias("timeout_s"),
            pl.col("rate").max().alias("rate"),
            pl.col("rest_before_s").min().alias("rest_before_s"),
            retried(client).sum().alias("retried"),
            *[(failed & (pl.col("_failed_at") == w)).sum().alias(f"!{w}") for w in FAILED_AT],
        )
        .drop("_step_key")
        .sort("started_at", "step", nulls_last=True)
    )
    busy = busy_at_start(client, engine_stats, offset_s)
    runs = []
    pending_until: dict = {}  # per tester's run: when its last request so far ended
    for row in stats.iter_rows(named=True):
        key = (row["run"], row["step"])

        def named(kind: str, names: list[str]) -> dict[str, int]:
            counts = by_name[kind].get(key, {})  # noqa: B023 (used at once, in this pass)
            return {name: counts.get(name, 0) for name in names}

        per_instance = named("@", instances)
        uncertain = named("~", instances)
        served_by = named("$", instances)
        # the balancer's choice: where it reached, else where the proxy sent it
        routed = named("&", instances)
        per_upstream = named("^", upstreams)
        failures = Failures(
            **{w: row.pop(f"!{w}") for w in FAILED_AT},
            at_instance=named("!@", instances),
            outcomes=outcomes.get((row["run"], row["step"]), {}),
        )
        started, ended = row["started_at"], row.pop("busy_until")
        overlap = None
        pending = pending_until.get(row["run"])
        if pending is not None and started is not None and started < pending:
            overlap = round((pending - started).total_seconds(), 3)
        if ended is not None:
            pending_until[row["run"]] = max(pending, ended) if pending else ended
        span = row.pop("ok_span_s")
        tokens = row.pop("output_tokens")
        runs.append(
            Step(
                index=row["step"],
                run=row["run"],
                warmup=row["warmup"],
                # what the tester ran where it says so, else the requests the step sent together
                concurrency=row["configured"] if row["configured"] is not None else row["sent"],
                started_at=row["started_at"],
                ended_at=row["ended_at"],
                sent=row["sent"],
                succeeded=row["succeeded"],
                failed=row["failed"],
                unreached=row["unreached"],
                unknown=row["unknown"],
                reached_unseen=row["reached_unseen"],
                outcome_unknown=row["outcome_unknown"],
                per_instance=per_instance,
                per_instance_uncertain=uncertain,
                served_by=served_by,
                retried=row["retried"],
                per_upstream=per_upstream,
                routed=routed,
                contaminated=(overlap is not None or (row["run"], row["step"]) in busy)
                and not row["warmup"],
                overlap_s=overlap,
                busy_at_start=busy.get((row["run"], row["step"])),
                timeout_s=row["timeout_s"],
                rest_before_s=row["rest_before_s"],
                latency_s=Latency(
                    row["latency_mean_s"],
                    row["latency_p50_s"],
                    row["latency_p95_s"],
                    row["latency_p99_s"],
                ),
                # tokens of the successes over the time the successes took (the seed's tok/s)
                output_tokens_per_s=(tokens / span) if span and tokens else None,
                # the balancer is judged on what it chose, not on what survived the choice: a
                # request sent to an instance that was down is still the balancer's pick of it
                balance=balance(routed),
                failures=failures,
                rate=row["rate"],
            )
        )
    return runs


def throughput_by_load(step_runs: list[Step]) -> list[tuple[int, float]]:
    """(concurrency, output tokens/s) of the measured steps that have both, by concurrency."""
    steps = sorted((r for r in step_runs if not r.warmup), key=lambda r: r.concurrency)
    return [(r.concurrency, r.output_tokens_per_s) for r in steps if r.output_tokens_per_s]


def is_plateau(before: tuple[int, float], after: tuple[int, float], t: Thresholds) -> bool:
    """The one plateau rule (capacity's `throughput_plateau_at`, the diagnosis' PLATEAU
    signal): the load grew by `plateau_load_growth` or more, throughput by
    `throughput_plateau` or less."""
    (c1, t1), (c2, t2) = before, after
    return c2 >= (1 + t.plateau_load_growth) * c1 and t2 <= (1 + t.throughput_plateau) * t1


def capacity(step_runs: list[Step], t: Thresholds) -> Capacity:
    """The seed's table read off: where the service stops coping as concurrency rises."""
    steps = sorted((r for r in step_runs if not r.warmup), key=lambda r: r.concurrency)
    clean = [r.concurrency for r in steps if r.failed == 0 and not r.contaminated]
    failing = [r.concurrency for r in steps if r.failed > 0]
    tps = throughput_by_load(step_runs)
    plateau = next((a[0] for a, b in zip(tps, tps[1:], strict=False) if is_plateau(a, b, t)), None)
    return Capacity(max(clean) if clean else None, min(failing) if failing else None, plateau)


def tester_figures(summaries: list[dict], step_runs: list[Step]) -> list[dict]:
    """The tester's own figures for each step beside the ones the logs give.

    A summary (GuideLLM's report, AIPerf's aggregates, a tester's console)
    carries no per-request data; it names the step by its concurrency. Each
    measured one is paired with the measured step run at that concurrency (when
    exactly one is), and `agree` says whether sent, succeeded and failed match:
    a tester that counts fewer requests than it sent, or a log that lost some,
    shows here.
    """
    measured = [r for r in step_runs if not r.warmup]
    out = []
    for summary in summaries:
        if summary.get("phase") == "warmup" or summary.get("concurrency") is None:
            continue
        at_level = [r for r in measured if r.concurrency == summary["concurrency"]]
        run = at_level[0] if len(at_level) == 1 else None
        theirs = {k: summary.get(k) for k in ("sent", "ok", "failed")}
        ours = (
            None if run is None else {"sent": run.sent, "ok": run.succeeded, "failed": run.failed}
        )
        agree = None  # undecided: no step to set beside it, or no count of its own to compare
        if ours is not None and any(v is not None for v in theirs.values()):
            agree = all(theirs[k] is None or theirs[k] == ours[k] for k in theirs)
        out.append(
            {
                "file": summary.get("file"),
                "tester": summary.get("tester"),
                "strategy": summary.get("strategy"),
                "concurrency": summary["concurrency"],
                "step": None if run is None else run.index,
                "theirs": theirs,
                "ours": ours,
                "agree": agree,
            }
        )
    return out
