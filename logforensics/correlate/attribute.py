"""Say, for every request, which instance served it.

Keys, strongest first (the `match_key` column says which decided):
1. `request_id`: an id both sides logged (vLLM adopts the client's
   X-Request-Id; a client may keep the response's ``chatcmpl-`` id);
2. `marker`: the prompt marker seen in vLLM's ``Received request`` line;
3. `engine_lifecycle`: the engine's own arrival and abort lines, by time
   (`match_lifecycle`): how a failed request the client holds no id for is
   known to have reached an instance;
4. `time_window`: an access line, written when the response headers go out —
   at a plain request's end, near a streamed one's start (`match_by_time`).
Ties are marked ambiguous, not guessed. When the clock itself is ambiguous,
only what both offsets agree on is attributed (`attribute_on_both_clocks`).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import polars as pl

from logforensics import model
from logforensics.correlate.clock import ClockFit
from logforensics.correlate.pairing import pair_windows
from logforensics.correlate.records import (
    MATCH_TOLERANCE_S,
    by_row,
    engine_requests,
    in_time_order,
    inference_records,
    seconds,
    step_label_key,
    timed_requests,
    with_request_keys,
)

CHOICE_SUFFIX_RE = r"-\d+$"


def identity_matches(client: pl.DataFrame, server: pl.DataFrame, offset_s: float) -> pl.DataFrame:
    """Requests tied to server records by request id, else by prompt marker.

    Ids: vLLM logs ``chatcmpl-<X-Request-Id>``, and a client may record the
    response's own ``chatcmpl-…`` id: both sides are compared without the
    prefix and vLLM's engine-side suffix (`with_request_keys`), and a server
    id no client id equals is tried without a completions prompt's ``-<n>``
    (vLLM logs and traces ``cmpl-<id>-0``; the client knows ``<id>``). Markers (the
    seed's ``(i)``) repeat across steps, so a marker match must also fit in time.
    Returns `_row`, `instance`, `match_key`, `engine_key`, `server_source`,
    `last_server_at` (the last line that is not an abort).
    """
    out = []
    server_ids = with_request_keys(server.filter(pl.col("request_id").is_not_null()))
    # (the client's ids copied only where a server logs ids: 220 MB of text at 20M)
    left = (
        client.select("_row", "request_id").filter(pl.col("request_id").is_not_null())
        if server_ids.height
        else None
    )
    if left is not None and left.height:
        left = with_request_keys(left).select("_row", "_key")
        # vLLM's completions API runs prompt n as engine request `<id>-<n>`; its log
        # lines and spans name only that, the client `<id>` (the response's or its own)
        # (only `cmpl-` ids: a chat request's id ends in the client's own digits, lf-s1-10)
        numbered = (
            server_ids.filter(pl.col("request_id").str.starts_with("cmpl-"))
            .join(left, on="_key", how="anti")
            .with_columns(pl.col("_key").str.replace(CHOICE_SUFFIX_RE, "").alias("_base"))
            .filter(pl.col("_base") != pl.col("_key"))
        )
        for tied in (
            left.join(server_ids, on="_key"),
            left.rename({"_key": "_base"}).join(numbered, on="_base"),
        ):
            out.append(
                tied.select(
                    "_row", "instance", "source", "at", "event", pl.col("_key").alias("engine_key")
                ).with_columns(pl.lit("request_id").alias("match_key"))
            )
    markers = server.filter(pl.col("prompt_marker").is_not_null())
    with_marker = client.filter(pl.col("marker").is_not_null() & pl.col("started_at").is_not_null())
    if markers.height and with_marker.height:
        shift = pl.duration(microseconds=int(round(offset_s * 1e6)))
        tol = pl.duration(microseconds=int(MATCH_TOLERANCE_S * 1e6))
        joined = (
            with_marker.select("_row", "marker", "started_at", "ended_at")
            .join(
                with_request_keys(markers).select(
                    "prompt_marker", "instance", "source", "at", "event", "_key"
                ),
                left_on="marker",
                right_on="prompt_marker",
            )
            .filter(
                (pl.col("at") >= pl.col("started_at") + shift - tol)
                & (pl.col("at") <= pl.col("ended_at") + shift + tol)
            )
        )
        out.append(
            joined.select(
                "_row", "instance", "source", "at", "event", pl.col("_key").alias("engine_key")
            ).with_columns(pl.lit("marker").alias("match_key"))
        )
    if not out:
        return pl.DataFrame(schema=IDENTITY_MATCHES)
    both = pl.concat(out).sort("at", "source")
    return (
        both.group_by("_row", maintain_order=True)
        .agg(
            pl.col("instance").first(),
            pl.col("match_key").first(),
            pl.col("engine_key").drop_nulls().first(),
            pl.col("source").first().alias("server_source"),
            pl.col("at").filter(pl.col("event") != "aborted").max().alias("last_server_at"),
        )
        .cast(IDENTITY_MATCHES)
    )


IDENTITY_MATCHES = {
    "_row": pl.UInt32,
    "instance": model.LABEL,
    "match_key": pl.Utf8,
    "engine_key": pl.Utf8,
    "server_source": model.SOURCE,
    "last_server_at": pl.Datetime("us", "UTC"),
}


# A proxy's queue may deliver a request this long after the client left, and a
# server finish one this long after; later, it is another request.
LATE_ARRIVAL_S = 300.0


def match_lifecycle(
    engine: pl.DataFrame,
    server: pl.DataFrame,
    timed: pl.DataFrame,
    offset: float,
    claimed: pl.DataFrame,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Requests the engines logged that share no id with the client.

    With request logging the engine writes every request down: ``Received``
    when it arrives, ``Aborted`` when the connection closed. Order-preserving
    passes over the engine requests no id claimed (`claimed`: `instance`,
    `engine_key`), most specific first:

    1. a failure: an abort at its end (the client or proxy hung up, the engine
       aborted at once), received no earlier than the request was sent;
    2. a failure: received during its window and aborted after its end — a
       streamed request is aborted only when the engine next writes to it,
       which a preempted or waiting one may not do for a minute — or never
       ended, after its instance's last answered access line: it was running
       when the instance's log stopped (the process died mid-request);
    3. a success: received during its window;
    4. a failure: received during its window or after the client gave up, not
       aborted, until its run's next step began (at most LATE_ARRIVAL_S): a
       proxy that queued it delivered it after the client had left, and the
       engine served it.

    `timed`: `_row`, `ok`, `s`, `e`, `next_s` (client clock, epoch seconds;
    `next_s` the start of the request's run's next step) of the requests not
    tied by id. Returns (`_row`, `instance`, `engine_key`, `ambiguous`), and the
    engine requests left unclaimed (`instance`, `received_at`).
    """
    free = engine.join(claimed, on=["instance", "engine_key"], how="anti")
    requests = timed.filter(pl.col("e").is_not_null()).with_columns(
        pl.col("s") + offset, pl.col("e") + offset, pl.col("next_s") + offset
    )
    empty = pl.DataFrame(schema=LIFECYCLE_MATCHES)
    left_over = ["instance", "engine_key", "received_at", "aborted_at"]
    if free.is_empty() or requests.is_empty():
        return empty, free.select(left_over)
    answered = (
        server.filter((pl.col("event") == "access") & pl.col("http_status").is_between(200, 299))
        .group_by("instance")
        .agg(pl.col("at").max().alias("_last_answer"))
    )
    free = free.join(answered, on="instance", how="left").with_columns(
        seconds("received_at").alias("_recv"),
        seconds("aborted_at").alias("_abort"),
        (pl.col("at_precision_s") + MATCH_TOLERANCE_S).alias("_tol"),
        (
            pl.col("aborted_at").is_null()
            & pl.col("finished_at").is_null()
            & (pl.col("_last_answer").is_null() | (pl.col("received_at") > pl.col("_last_answer")))
        ).alias("_open"),
    )
    failed = ~pl.col("ok").fill_null(True)
    received = pl.col("_recv").is_not_null()
    aborted = pl.col("_abort").is_not_null()
    late_end = pl.min_horizontal(pl.col("e") + LATE_ARRIVAL_S, pl.col("next_s")).alias("_late")
    requests = requests.with_columns(late_end)
    passes = (  # (requests, candidates, point, window start, window end)
        (failed, aborted, "_abort", "e", "e"),
        (failed, received & (aborted | pl.col("_open")), "_recv", "s", "e"),
        (pl.col("ok").fill_null(False), received & ~aborted, "_recv", "s", "e"),
        (failed, received & ~aborted, "_recv", "s", "_late"),
    )
    picked = []
    for who, fits, point, lo, hi in passes:
        # a request whose id would be in these lines, had the engine served it, is not here
        # ties broken by row and key, never by a join's order: the same logs, the same answer
        windows = requests.filter(who & ~pl.col("has_id")).sort(lo, "_row")
        candidates = free.filter(fits).sort(point, "instance", "engine_key")
        if windows.is_empty() or candidates.is_empty():
            continue
        picks = pair_windows(
            candidates[point].to_numpy(),
            candidates["_tol"].to_numpy(),
            windows[lo].to_numpy(),
            windows[hi].to_numpy(),
        )
        got = np.flatnonzero(picks >= 0)
        pairs = (
            candidates[got]
            .with_columns(windows["_row"].gather(picks[got]).alias("_row"))
            .join(windows.select("_row", "s", pl.col("e").alias("_end")), on="_row")
        )
        # an engine request received before the client sent anything is another request's,
        # and so is one aborted before the client saw its failure
        pairs = pairs.filter(
            (pl.col("_recv").is_null() | (pl.col("_recv") >= pl.col("s") - pl.col("_tol")))
            & (pl.col("_abort").is_null() | (pl.col("_abort") >= pl.col("_end") - pl.col("_tol")))
        )
        following = np.minimum(got + 1, len(candidates) - 1)
        rivals = (
            candidates[following]
            .select(pl.col("instance").alias("_next_instance"), pl.col(point).alias("_next_at"))
            .with_row_index("_i")
        )
        pairs = pairs.with_row_index("_i").join(rivals, on="_i", how="left")
        window_end = windows.select("_row", pl.col(hi).alias("_hi"))
        pairs = pairs.join(window_end, on="_row").with_columns(
            (
                (pl.col("_next_instance") != pl.col("instance"))
                & (pl.col("_next_at") <= pl.col("_hi") + pl.col("_tol"))
            )
            .fill_null(False)
            .alias("ambiguous")
        )
        requests = requests.join(pairs.select("_row"), on="_row", how="anti")
        free = free.join(
            pairs.select("instance", "engine_key"), on=["instance", "engine_key"], how="anti"
        )
        picked.append(pairs.select(*LIFECYCLE_MATCHES))
    matched = pl.concat(picked) if picked else empty
    return matched, free.select(left_over)


LIFECYCLE_MATCHES = {
    "_row": pl.UInt32,
    "instance": model.LABEL,
    "engine_key": pl.Utf8,
    "ambiguous": pl.Boolean,
}


IDS_JOIN_SHARE = 0.5  # ids that join this often are the same ids on both sides


def ids_join(client: pl.DataFrame, ids: pl.DataFrame) -> bool:
    """Do the client's request ids and the engines' join? Then an id-bearing request no
    engine logged was not served by an engine that logs ids. (A gateway that rewrites
    the id joins none, and the absence proves nothing.)"""
    bearing = client.filter(pl.col("request_id").is_not_null()).height
    joined = ids.filter(pl.col("match_key") == "request_id").height
    return bool(bearing) and joined >= IDS_JOIN_SHARE * bearing


def next_step_starts(client: pl.DataFrame) -> pl.Series:
    """Per request (in `client`'s order), when its run's next step began (epoch s; +inf if none)."""
    starts = (
        client.lazy()
        .filter(~pl.col("warmup") & pl.col("started_at").is_not_null())
        .group_by(step_label_key().alias("_label"))
        .agg(pl.col("run", "step").first(), seconds("started_at").min().alias("_first"))
        .sort("run", "_first", "step", nulls_last=True)  # (steps begun at once: by number)
        .with_columns(pl.col("_first").shift(-1).over("run").alias("next_s"))
        .collect()
    )
    return (
        client.select(  # (a request of no known run and step belongs to no step: none)
            pl.when(pl.col("run").is_not_null() & pl.col("step").is_not_null()).then(
                step_label_key().replace_strict(
                    starts["_label"], starts["next_s"], default=None, return_dtype=pl.Float64
                )
            )
        )
        .to_series()
        .fill_null(float("inf"))
        .alias("next_s")
    )


def attribute(
    client: pl.DataFrame,
    server: pl.DataFrame,
    clock: ClockFit,
    records: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Add instance, match_key, ambiguous, server_source, engine_sources and late to each request.

    `match_key` says what tied the request to its instance: `request_id`,
    `marker`, `engine_lifecycle` (the engine logged a failed request the
    client holds no id for) or `time_window` (an access line at the right
    time). `late` marks a failed request whose server finished it after the
    client had given up.
    """
    client = client.with_row_index("_row")
    shift_s = clock.offset_s
    ids = identity_matches(client, server, shift_s).join(
        client.select("_row", "ended_at"), on="_row", how="left"
    )
    by_identity = ids.select(
        "_row",
        pl.col("instance").cast(model.LABEL),
        pl.col("match_key").cast(model.LABEL),
        pl.lit(False).alias("ambiguous"),
        pl.col("server_source").cast(model.SOURCE),
        "engine_key",
        (
            (pl.col("last_server_at") - pl.col("ended_at")).dt.total_microseconds() / 1e6 - shift_s
            > MATCH_TOLERANCE_S
        )
        .fill_null(False)
        .alias("late"),
    )
    records = inference_records(server) if records is None else records
    engine = engine_requests(server)
    next_s = next_step_starts(client)  # a 6.6M-row join at 20M: once, for both readers
    timed = timed_requests(
        client.with_columns(next_s.alias("next_s")),
        "next_s",
        (pl.col("request_id").is_not_null() & pl.lit(ids_join(client, ids))).alias("has_id"),
    )
    by_lifecycle, unclaimed = match_lifecycle(
        engine,
        server,
        timed.filter(~pl.col("_row").is_in(ids["_row"].implode())),  # (a copy: not kept)
        shift_s,
        ids.select("instance", "engine_key").drop_nulls(),
    )
    by_lifecycle = by_lifecycle.select(
        "_row",
        "instance",
        model.label("engine_lifecycle").alias("match_key"),
        "ambiguous",
        pl.lit(None, dtype=model.SOURCE).alias("server_source"),
        "engine_key",
        pl.lit(False).alias("late"),
    )
    pinned = pl.concat([ids.select("_row", "instance"), by_lifecycle.select("_row", "instance")])
    by_time = match_by_time(
        records,
        timed,
        shift_s,
        pinned,
        frozenset(engine.filter(pl.col("received_at").is_not_null())["instance"].unique()),
    )
    # a request tied beforehand keeps its own instance's access line as its record
    access_of_pinned = by_time.filter("pinned").select(
        "_row", pl.col("server_source").alias("_access")
    )
    if access_of_pinned.height:  # (a filter copies every match: 0.25 GB at 20M)
        by_time = by_time.filter(~pl.col("pinned"))
    by_time = by_time.select(
        "_row",
        "instance",
        model.label("time_window").alias("match_key"),
        "ambiguous",
        "server_source",
        pl.lit(None, dtype=pl.Utf8).alias("engine_key"),
        "late",
        pl.col("answer_at").alias("_answer"),
    )
    unrecorded = place_unrecorded(client, unclaimed, server, shift_s)
    unclaimed = unclaimed.join(unrecorded, on=["instance", "engine_key"], how="anti")
    tied = (
        pl.concat([by_identity, by_lifecycle, unrecorded.select(by_lifecycle.columns)])
        .join(access_of_pinned, on="_row", how="left")
        .with_columns(pl.coalesce("_access", "server_source").alias("server_source"))
        .drop("_access")
    )
    engine_lines = engine.select(
        "instance",
        "engine_key",
        "engine_sources",
        pl.col("received_at").alias("arrived_at"),
        pl.coalesce("aborted_at", "finished_at").alias("_engine_end"),
    )
    # what the engines and the access records say of each decided request: joined for the
    # requests tied by id or lifecycle, brought along by the time matching for the rest
    tied = tied.join(
        engine_lines, on=["instance", "engine_key"], how="left", maintain_order="left"
    ).join(
        # (the records the tied requests name first: a join hashes all 6.5M at 20M)
        records.filter(pl.col("source").is_in(tied["server_source"].drop_nulls().implode())).select(
            pl.col("source").alias("server_source"), pl.col("at").alias("_answer")
        ),
        on="server_source",
        how="left",
        maintain_order="left",
    )
    by_time = by_time.with_columns(
        pl.lit(None, dtype=engine_lines.schema[c]).alias(c)
        for c in ("engine_sources", "arrived_at", "_engine_end")
    )
    decided = by_row(pl.concat([tied, by_time.select(tied.columns)]), client.height)
    shift = pl.duration(microseconds=int(round(shift_s * 1e6)))
    # the last moment the servers show the request still being served, on the client's clock
    served_until = pl.max_horizontal("arrived_at", "_engine_end", "_answer") - shift
    # a request the tester sent but did not record, which its engine finished: a success
    completed = np.zeros(client.height, dtype=bool)
    completed[unrecorded["_row"].to_numpy()] = unrecorded["completed"].fill_null(False).to_numpy()
    completed = pl.Series(completed)
    client = client.with_columns(
        pl.when(pl.lit(completed)).then(pl.lit("ok")).otherwise("outcome").alias("outcome"),
        pl.when(pl.lit(completed)).then(True).otherwise("ok").alias("ok"),
    )
    out = client.with_columns(
        decided["instance"],
        decided["match_key"].cast(model.LABEL),
        decided["ambiguous"].fill_null(False),
        decided["server_source"],
        decided["engine_sources"],
        decided["arrived_at"],
        decided.select(served_until.alias("served_until"))["served_until"],
        decided["late"].fill_null(False),
        unclaimed_arrival_near(client, unclaimed, shift_s, next_s).alias("unclaimed_arrival"),
    )
    return model.nulls_as_literals(out.drop("_row"))


def attribute_on_both_clocks(
    client: pl.DataFrame, server: pl.DataFrame, clock: ClockFit, records: pl.DataFrame
) -> pl.DataFrame:
    """`attribute` at the clock's offset, and where the clock is ambiguous at its rival's
    too, keeping what both agree on (`agreed_by_both`)."""
    first = attribute(client, server, clock, records)
    if not clock.ambiguous or clock.second_offset_s is None:
        return first.with_columns(
            pl.lit(False).alias("clock_disputed"),
            pl.lit(None, dtype=model.LABEL).alias("instance_at_offset"),
            pl.lit(None, dtype=model.LABEL).alias("instance_at_rival"),
        )
    rival = dataclasses.replace(clock, offset_s=clock.second_offset_s)
    return agreed_by_both(first, attribute(client, server, rival, records))


def clock_disputed(frame: pl.DataFrame) -> pl.Expr:
    """`clock_disputed` (see `agreed_by_both`), False for rows built without it (by hand)."""
    return pl.col("clock_disputed") if "clock_disputed" in frame.columns else pl.lit(False)


CLOCK_DISPUTE_COLUMNS = ("instance", "match_key", "server_source", "engine_sources", "arrived_at")


def agreed_by_both(first: pl.DataFrame, second: pl.DataFrame) -> pl.DataFrame:
    """`first` (the requests attributed at the best offset) keeping only the instances
    `second` (the same requests attributed at the rival offset) agrees on.

    When two clocks explain the logs about equally, a request they place at different
    instances (or one at none) could be either's: it is left unattributed, marked
    `clock_disputed`, with both candidates kept (`instance_at_offset`, `instance_at_rival`)
    so a step's count can state them as its uncertainty. An id or a prompt marker ties a
    request whatever the clock, so those always agree.
    """
    disputed = ~first["instance"].cast(pl.Utf8).eq_missing(second["instance"].cast(pl.Utf8))
    keep = pl.lit(~disputed)
    return first.with_columns(
        *[pl.when(keep).then(pl.col(c)).alias(c) for c in CLOCK_DISPUTE_COLUMNS],
        pl.col("ambiguous") | pl.lit(disputed),
        pl.col("late") & keep,
        pl.lit(disputed).alias("clock_disputed"),
        pl.when(~keep).then(pl.col("instance")).alias("instance_at_offset"),
        pl.when(~keep).then(pl.lit(second["instance"])).alias("instance_at_rival"),
    )


def place_unrecorded(
    client: pl.DataFrame, unclaimed: pl.DataFrame, server: pl.DataFrame, offset_s: float
) -> pl.DataFrame:
    """Requests a tester counted but did not record (no times), tied to engine requests
    no recorded request claimed, received while their step ran.

    GuideLLM 0.8 closes a benchmark with one more request created than it lists;
    the engine logged it. Per step, the unrecorded requests take the unclaimed
    arrivals inside the step's span in order (ambiguous unless the numbers
    agree). `completed`: the engine logged no abort for it and its log went on
    past the step, so the request finished. Returns `_row`, `instance`,
    `match_key`, `ambiguous`, `server_source`, `engine_key`, `late`, `completed`.
    """
    schema = {
        "_row": pl.UInt32,
        "instance": model.LABEL,
        "match_key": model.LABEL,
        "ambiguous": pl.Boolean,
        "server_source": model.SOURCE,
        "engine_key": pl.Utf8,
        "late": pl.Boolean,
        "completed": pl.Boolean,
    }
    untimed = client.filter(pl.col("started_at").is_null() & pl.col("step").is_not_null())
    if untimed.is_empty() or unclaimed.is_empty():
        return pl.DataFrame(schema=schema)
    shift = pl.duration(microseconds=int(round(offset_s * 1e6)))
    tol = pl.duration(microseconds=int(2 * MATCH_TOLERANCE_S * 1e6))
    spans = (
        client.filter(pl.col("started_at").is_not_null())
        .group_by("run", "step")
        .agg(
            (pl.col("started_at").min() + shift - tol).alias("_lo"),
            (pl.col("ended_at").max() + shift + tol).alias("_hi"),
        )
    )
    log_ends = server.group_by("instance").agg(pl.col("at").max().alias("_log_end"))
    arrivals = unclaimed.filter(pl.col("received_at").is_not_null()).sort(
        "received_at", "instance", "engine_key"
    )
    placed = []
    for (run, step), rows in untimed.partition_by("run", "step", as_dict=True).items():
        span = spans.filter((pl.col("run") == run) & (pl.col("step") == step))
        if span.is_empty():
            continue
        lo, hi = span["_lo"][0], span["_hi"][0]
        inside = arrivals.filter(pl.col("received_at").is_between(lo, hi))
        taken = inside.head(rows.height)
        if taken.is_empty():
            continue
        placed.append(
            taken.join(log_ends, on="instance", how="left").select(
                rows["_row"].head(taken.height).alias("_row"),
                "instance",
                pl.lit("engine_lifecycle").alias("match_key"),
                pl.lit(inside.height != rows.height).alias("ambiguous"),
                pl.lit(None, dtype=model.SOURCE).alias("server_source"),
                "engine_key",
                pl.lit(False).alias("late"),
                (pl.col("aborted_at").is_null() & (pl.col("_log_end") > hi)).alias("completed"),
            )
        )
    return pl.concat(placed).cast(schema) if placed else pl.DataFrame(schema=schema)


def unclaimed_arrival_near(
    client: pl.DataFrame, unclaimed: pl.DataFrame, offset_s: float, next_s: pl.Series
) -> pl.Series:
    """Per request: did an engine log an arrival no request claimed, during its window or
    while a proxy could still have delivered it? Then "never reached" is not proven.
    (`next_s`: `next_step_starts(client)`.)"""
    times = np.sort(
        unclaimed.filter(pl.col("received_at").is_not_null())
        .select(seconds("received_at"))
        .to_series()
        .to_numpy()
    )
    if not len(times):  # (every arrival claimed, or no engine logs arrivals)
        return pl.Series(np.zeros(client.height, dtype=bool))
    bounds = client.with_columns(next_s.alias("_next")).select(
        (seconds("started_at") + offset_s - 2 * MATCH_TOLERANCE_S).alias("lo"),
        pl.min_horizontal(
            seconds("ended_at") + offset_s + LATE_ARRIVAL_S, pl.col("_next") + offset_s
        ).alias("hi"),
    )
    lo = bounds["lo"].fill_null(np.inf).to_numpy()
    hi = bounds["hi"].fill_null(-np.inf).to_numpy()
    inside = np.searchsorted(times, hi, side="right") - np.searchsorted(times, lo, side="left")
    return pl.Series(inside > 0)


def match_by_time(
    records: pl.DataFrame,
    timed: pl.DataFrame,
    offset: float,
    pinned: pl.DataFrame,
    arrivals_logged_by: frozenset[str] = frozenset(),
) -> pl.DataFrame:
    """Give access records to requests, in linear, order-preserving passes.

    1. "end": a non-streamed response's line sits at the request's end; a
       request tied by id/marker (`pinned`: `_row`, `instance`) first takes a
       line of its own instance;
    2. "window": a streamed one's sits near its start, anywhere in the window;
    3. "late": a success the server logged after the client had already given up: first
       the lines at a failed request's end (the answer left as it gave up), then within
       LATE_ARRIVAL_S and before its run's next step began (`next_s` in `timed`, where given).
    Outcomes must agree in passes 1-2 (a 2xx line belongs to a success).
    A record is marked ambiguous when the next request's end was as close.
    Returns `_row`, `instance`, `server_source`, `answer_at` (the record's stamp),
    `ambiguous`, `late` and `pinned` (the request was tied beforehand) for the requests
    that got a record.
    """
    return _laid_out(*_passes(records, timed, offset, pinned, arrivals_logged_by))


def _passes(
    records: pl.DataFrame,
    timed: pl.DataFrame,
    offset: float,
    pinned: pl.DataFrame,
    arrivals_logged_by: frozenset[str],
) -> tuple[pl.Series, pl.DataFrame, list[tuple]]:
    """`match_by_time`'s passes: the requests' `_row`s, the records' instance, source and
    stamp, and each pass's picks (request positions, record positions, ambiguous, late,
    pinned)."""
    # one tolerance for every record (a log's stamps share a precision) stays one number
    # (as an array, 50 MB at 20M, and again in each pass's negated and gathered copies)
    spread = records.select(
        pl.col("at_precision_s").fill_null(0.0).min().alias("lo"),
        pl.col("at_precision_s").fill_null(0.0).max().alias("hi"),
    ).row(0)
    shared = spread[0] + MATCH_TOLERANCE_S if records.height and spread[0] == spread[1] else None
    recs = records.select(
        seconds("at").alias("at"),
        pl.col("at").alias("_stamp"),
        (pl.col("at_precision_s").fill_null(0.0) + MATCH_TOLERANCE_S).alias("tol")
        if shared is None
        else pl.lit(shared, dtype=pl.Float64).alias("tol"),
        pl.col("http_status").is_between(200, 299).fill_null(False).alias("ok"),
        "instance",
        "source",
    )
    # records come sorted (`inference_records`, the proxy's lines): then a sort would only
    # copy them (0.2 GB at 20M)
    if not in_time_order(recs["at"], recs["source"]):
        recs = recs.filter(  # an unstamped record cannot be placed in time
            pl.col("at").is_not_null()
        ).sort("at", "source")
    if timed["e"].null_count():  # nor can a request without an end
        timed = timed.filter(pl.col("e").is_not_null())
    reqs = timed
    if pinned.is_empty():  # (a join would copy every column of 6.6M requests for nothing)
        reqs = reqs.with_columns(
            pl.lit(None, dtype=pinned.schema["instance"]).alias("_inst"),
            pl.lit(False).alias("_pinned"),
        )
    else:
        reqs = reqs.join(
            pinned.select("_row", pl.col("instance").alias("_inst"), pl.lit(True).alias("_pinned")),
            on="_row",
            how="left",
            maintain_order="left",
        ).with_columns(pl.col("_pinned").fill_null(False))
    reqs = reqs.with_row_index("_pos")
    rec_at = recs["at"].to_numpy()
    rec_tol = recs["tol"].to_numpy() if shared is None else None

    def tol_at(pos: np.ndarray | None) -> np.ndarray:
        """The records' tolerances at `pos` (None: all)."""
        if shared is not None:
            return np.broadcast_to(np.float64(shared), recs.height if pos is None else len(pos))
        return rec_tol if pos is None else rec_tol[pos]

    rec_ok = recs["ok"].to_numpy()
    rec_free = np.ones(recs.height, dtype=bool)
    req_pinned = reqs["_pinned"].to_numpy()
    req_ok = {ok: (reqs["ok"] == ok).fill_null(False).to_numpy() for ok in (True, False)}
    req_free = np.ones(reqs.height, dtype=bool)
    picked: list[tuple[np.ndarray, np.ndarray, np.ndarray, bool]] = []

    # the requests' times as arrays (views: none is null here), each pass taking them in the
    # order a sort of its anchor and position alone gives (a filter and a sort of all four
    # columns copied them twice a pass: 0.4 GB at 20M), and onto the servers' clock as it
    # takes them (shifted copies of all were 0.1 GB)
    req_times = {c: reqs[c].rechunk().to_numpy() for c in ("s", "e")}
    # (the client's clock, as `s`; a request of no step has none: +inf)
    next_s = reqs["next_s"].rechunk().to_numpy() if "next_s" in reqs.columns else None

    def on_server_clock(times: np.ndarray, order: np.ndarray) -> np.ndarray:
        moved = times[order]
        moved += offset
        return moved

    # every request's position by each anchor, ties in request order, sorted once (polars
    # sorts the anchor and position alone, on two cores faster than numpy): a pass takes
    # its own requests from it in that order (a filter and a sort a pass copied them
    # twice: 0.17 GB at 20M, the attribution's largest moment)
    by_anchor: dict[str, np.ndarray] = {}

    def in_order(anchor: str, req_mask: np.ndarray) -> np.ndarray:
        if anchor not in by_anchor:
            by_anchor[anchor] = (
                reqs.select(anchor, "_pos").sort(anchor, maintain_order=True)["_pos"].to_numpy()
            )
        every = by_anchor[anchor]
        return every[req_mask[every]]

    def assign(rec_mask: np.ndarray, req_mask: np.ndarray, anchor: str, how: str) -> None:
        if not rec_mask.any() or not req_mask.any():
            return
        order = in_order(anchor, req_mask)  # the other times follow
        anchors = on_server_clock(req_times[anchor], order)
        if how == "late":  # the window opens at the client's end and stays open a while,
            # no later than the run's next step (a line then would be that step's)
            lo = anchors if anchor == "e" else on_server_clock(req_times["e"], order)
            hi = lo + LATE_ARRIVAL_S
            if next_s is not None:
                np.fmin(hi, on_server_clock(next_s, order), out=hi)
        elif how == "window":
            lo = anchors if anchor == "s" else on_server_clock(req_times["s"], order)
            hi = on_server_clock(req_times["e"], order)
        else:
            lo = hi = anchors
        every = bool(rec_mask.all())  # every record (often the first pass): no copies
        rec_pos = None if every else np.flatnonzero(rec_mask)
        points, tols = (rec_at, tol_at(None)) if every else (rec_at[rec_pos], tol_at(rec_pos))
        picks = pair_windows(points, tols, lo, hi)
        del points, tols, lo, hi  # (each as long as the pass: 50 MB at 20M)
        got = np.flatnonzero(picks >= 0)
        windows = picks[got]
        del picks
        rec_got = got if every else rec_pos[got]
        del rec_pos, got
        rec_free[rec_got] = False
        req_pos = order[windows]
        del order
        req_free[req_pos] = False
        # another request finished about as close: which of the two got this line is a guess
        # (in place: at 20M each array as long as the pass is 50 MB, and the expression
        # held five at once)
        last = len(anchors) - 1
        following = windows + 1
        np.minimum(following, last, out=following)
        gap = anchors[following]
        del anchors, following
        gap -= rec_at[rec_got]
        np.abs(gap, out=gap)
        ambiguous = gap <= tol_at(rec_got)
        del gap
        ambiguous &= (windows < last) & (how != "pinned")
        picked.append((req_pos, rec_got, ambiguous, how.startswith("late"), how == "pinned"))

    def free_records(ok: bool) -> np.ndarray:
        return rec_free & (rec_ok == ok)

    def free_requests(ok: bool) -> np.ndarray:
        return req_free & ~req_pinned & req_ok[ok]

    # instances whose engines log each request's arrival (and so its id)
    blind = (~recs["instance"].is_in(list(arrivals_logged_by))).to_numpy()

    # 1a. requests tied by id or marker take a line of their own instance
    pinned_names = reqs.filter("_pinned")["_inst"].drop_nulls().unique()
    with_records = recs.filter(pl.col("instance").is_in(pinned_names.implode()))
    for name in with_records["instance"].unique().to_list():
        rec_own = (recs["instance"] == name).fill_null(False).to_numpy()
        req_own = req_pinned & (reqs["_inst"] == name).fill_null(False).to_numpy()
        for ok in (True, False):
            assign(free_records(ok) & rec_own, req_own & req_ok[ok], "e", "pinned")
    # 1b-2. the rest by end, then by window; a request whose id the clients and the
    # engines both log takes no line of an instance that logs ids: it would be there
    req_has_id = (
        reqs["has_id"].fill_null(False).to_numpy()
        if "has_id" in reqs.columns
        else np.zeros(reqs.height, dtype=bool)
    )
    for how, anchor in (("end", "e"), ("window", "s")):
        for ok in (True, False):
            assign(free_records(ok), free_requests(ok) & ~req_has_id, anchor, how)
            assign(free_records(ok) & blind, free_requests(ok) & req_has_id, anchor, how)
    # 3. successes logged after the client gave up — only on instances that log no
    # arrivals: where they do, the engine's own lines placed such a request already
    # first those whose answer left as the client gave up (at its end): a long window
    # first would hand each such line to the earliest failure still open, and the next
    # line to it, each a step later (a closed-loop client's timeouts, ~40 requests/s)
    assign(free_records(True) & blind, free_requests(False), "e", "late_at_end")
    assign(free_records(True) & blind, free_requests(False), "e", "late")

    return reqs["_row"], recs.select("instance", "source", "_stamp"), picked


def _laid_out(rows: pl.Series, recs: pl.DataFrame, picked: list[tuple]) -> pl.DataFrame:
    """`match_by_time`'s matches as one table, built once the passes' times and flags are
    let go (at 20M the attribution's largest moment: 0.2 GB less)."""
    req_pos = np.concatenate([p[0] for p in picked] + [np.zeros(0, np.int64)])
    rec_pos = np.concatenate([p[1] for p in picked] + [np.zeros(0, np.int64)])
    flags = {
        "ambiguous": np.concatenate([p[2] for p in picked] + [np.zeros(0, bool)]),
        "late": np.concatenate([np.full(len(p[0]), p[3]) for p in picked] + [np.zeros(0, bool)]),
        "pinned": np.concatenate([np.full(len(p[0]), p[4]) for p in picked] + [np.zeros(0, bool)]),
    }
    picked.clear()
    return pl.DataFrame(
        {
            "_row": rows.gather(req_pos),
            "instance": recs["instance"].gather(rec_pos),
            "server_source": recs["source"].gather(rec_pos).cast(model.SOURCE),
            "answer_at": recs["_stamp"].gather(rec_pos),
            **flags,
        }
    )
