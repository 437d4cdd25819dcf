"""Put client and servers on one clock and say, for every request, who served it.

Keys, strongest first (the `match_key` column says which decided):
1. a request id both sides logged (vLLM adopts the client's X-Request-Id);
2. the prompt marker seen in vLLM's ``Received request`` line;
3. time: an access line is written when the response headers go out, so a
   non-streamed request's record sits at its end, a streamed one's near its
   start. A record matches the unmatched request of the right outcome whose end
   (else start) lies within the tolerance; ties are marked ambiguous.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass

import numpy as np
import polars as pl

from logforensics import model

INFERENCE_PATH_RE = r"^/(?:v1/)?(?:chat/completions|completions|generate|responses)\b"
MATCH_TOLERANCE_S = 1.0  # client/server stamps of the same moment, after the offset
MAX_OFFSET_S = 26 * 3600  # the widest time-zone error worth considering
OFFSET_SAMPLE = 400
SCORE_SAMPLE = 100_000


@dataclass
class ClockFit:
    offset_s: float  # add to a client time to get the servers' time
    method: str  # forced | estimated | assumed
    matched: int = 0  # server records that fit a client request at this offset
    considered: int = 0
    residual_s: float | None = None  # median |server - client| of the matched pairs
    zone_hint: str | None = None
    moved_s: float = 0.0  # an instance's records were moved this far onto the common clock

    @property
    def fit(self) -> float | None:
        return self.matched / self.considered if self.considered else None


def _seconds(col: str) -> pl.Expr:
    return pl.col(col).dt.epoch("us") / 1e6


def inference_records(server: pl.DataFrame) -> pl.DataFrame:
    """Access lines of inference calls: the records a client request can produce."""
    return server.filter(
        (pl.col("event") == "access") & pl.col("path").str.contains(INFERENCE_PATH_RE)
    ).sort("at")


def zone_hint(offset_s: float) -> str | None:
    """Name the time-zone mistake an offset near whole (or half) hours suggests."""
    if abs(offset_s) < 1800:
        return None
    quarter_hours = round(offset_s / 900)
    if abs(offset_s - quarter_hours * 900) > 120:
        return None
    hours = quarter_hours / 4
    sign = "+" if hours > 0 else "-"
    zones = {
        9: "Asia/Seoul or Asia/Tokyo",
        8: "Asia/Shanghai or Asia/Singapore",
        5.5: "Asia/Kolkata",
        1: "Europe/Berlin (winter)",
        2: "Europe/Berlin (summer)",
        -5: "America/New_York (winter)",
        -4: "America/New_York (summer)",
        -8: "America/Los_Angeles (winter)",
        -7: "America/Los_Angeles (summer)",
    }
    named = zones.get(hours if hours % 1 else int(hours))
    explain = f"{sign}{abs(hours):g} h: one side's local time read as UTC"
    return explain + (f" (e.g. {named})" if named else "")


def estimate_offset(
    client: pl.DataFrame, records: pl.DataFrame, forced: float | None, prefer: float = 0.0
) -> ClockFit:
    """The client→server clock offset that lets the most server records fit a request end.

    Records with precise times (a runtime prefix) decide when there are
    enough. Otherwise each record is an interval — it happened somewhere
    between its borrowed stamp and the next — and many offsets may fit as
    well: then the one nearest `prefer` (clocks agree) is kept, which is all
    such logs can support.
    """
    points, widths = _record_points(records)
    return _fit(points, widths, _end_times(client), forced, prefer)


def _end_times(client: pl.DataFrame) -> np.ndarray:
    """Sorted ends of the successful requests: sorted once, reused by every fit."""
    ends = client.filter(pl.col("ok") & pl.col("ended_at").is_not_null()).select(
        _seconds("ended_at")
    )
    return np.sort(ends.to_series().to_numpy()) if ends.height else np.array([])


def _record_points(records: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Times (sorted) and precisions of the 2xx records an offset is judged on."""
    ok_records = records.filter(pl.col("http_status").is_between(200, 299))
    precise = ok_records.filter(pl.col("at_precision_s").fill_null(0.0) <= MATCH_TOLERANCE_S)
    if precise.height >= INSTANCE_MIN_MATCHES or precise.height == ok_records.height:
        ok_records = precise
    points = ok_records.select(_seconds("at"), pl.col("at_precision_s").fill_null(0.0)).sort("at")
    if not points.height:
        return np.array([]), np.array([])
    return points["at"].to_numpy(), points["at_precision_s"].to_numpy()


def _fit(
    points_arr: np.ndarray,
    widths: np.ndarray,
    ends_arr: np.ndarray,
    forced: float | None,
    prefer: float = 0.0,
    subset: bool = False,
) -> ClockFit:
    """`estimate_offset` on prepared arrays: `ends_arr` sorted, `points_arr` sorted.

    `subset`: the points are one instance's, the ends every request's. Then a
    one-to-one pairing is biased (the earliest free end within the tolerance
    is usually another instance's request, about a second early, and three
    refinements drifted 3 s), so the offset is refined on nearest ends instead.
    """
    if forced is not None:
        matched, residual = _score(points_arr, widths, ends_arr, forced)
        return ClockFit(forced, "forced", matched, len(points_arr), residual, zone_hint(forced))
    if not len(ends_arr) or not len(points_arr):
        return ClockFit(0.0, "assumed", 0, len(points_arr))
    sample_p = points_arr[
        np.linspace(0, len(points_arr) - 1, min(OFFSET_SAMPLE, len(points_arr))).astype(int)
    ]
    sample_e = ends_arr[
        np.linspace(0, len(ends_arr) - 1, min(OFFSET_SAMPLE, len(ends_arr))).astype(int)
    ]
    diffs = (sample_p[:, None] - sample_e[None, :]).ravel()
    diffs = diffs[np.abs(diffs) <= MAX_OFFSET_S]
    bins, counts = np.unique(np.round(diffs), return_counts=True)
    # load steps repeat, so several offsets can fit as well: prefer the one nearest `prefer`
    candidates = set(bins[np.argsort(counts)[-12:]].tolist()) | {0.0, prefer}
    # candidates are scored on an even sample of the records: ranks, not totals, decide
    pick = np.linspace(0, len(points_arr) - 1, min(SCORE_SAMPLE, len(points_arr))).astype(int)
    sample_points, sample_widths = points_arr[pick], widths[pick]

    def rank(c: float) -> tuple[int, float]:
        return int(_fitting(sample_points, sample_widths, ends_arr, c).sum()), -abs(c - prefer)

    # where the preferred offset fits every sampled record, no candidate can outrank it
    at_prefer = rank(prefer)
    best = prefer if at_prefer[0] == len(pick) else max(candidates, key=rank)
    if widths.max() <= MATCH_TOLERANCE_S:
        window_p, window_e = head_window(points_arr, ends_arr, best)
        for _ in range(3):  # refine on one-to-one pairs, not on nearest neighbours
            if subset:
                best += float(np.median(_nearest(window_p, window_e, best)))
            else:
                best += _paired_shift(window_p, window_e, best)
    matched, residual = _score(points_arr, widths, ends_arr, best)
    if matched == 0:
        return ClockFit(0.0, "assumed", 0, len(points_arr))
    return ClockFit(
        round(best, 3), "estimated", matched, len(points_arr), residual, zone_hint(best)
    )


def _fitting(points: np.ndarray, widths: np.ndarray, ends: np.ndarray, offset: float) -> np.ndarray:
    """Per record: does its interval [at - tol, at + precision + tol] hold a shifted request end?"""
    if not len(points) or not len(ends):
        return np.zeros(len(points), bool)
    shifted = ends + offset
    lo = points - MATCH_TOLERANCE_S
    hi = points + widths + MATCH_TOLERANCE_S
    idx = np.searchsorted(shifted, lo)
    ok = idx < len(shifted)
    ok[ok] &= shifted[idx[ok]] <= hi[ok]
    return ok


def _score(
    points: np.ndarray, widths: np.ndarray, ends: np.ndarray, offset: float
) -> tuple[int, float | None]:
    """Records that fit a shifted request end, and their median distance to the nearest end."""
    if not len(points) or not len(ends):
        return 0, None
    ok = _fitting(points, widths, ends, offset)
    if not ok.any():
        return 0, None
    d = _nearest(points[ok], ends, offset)
    return int(ok.sum()), float(np.median(np.abs(d)))


INSTANCE_MIN_MATCHES = 5
INSTANCE_DISAGREEMENT_S = MATCH_TOLERANCE_S


def align_instances(
    client: pl.DataFrame,
    tables: dict[str, pl.DataFrame],
    coverage: dict,
    clock: ClockFit,
    records: pl.DataFrame | None = None,
) -> tuple[dict[str, pl.DataFrame], dict, dict[str, ClockFit]]:
    """Estimate each instance's own offset; move an instance whose clock disagrees onto the common one.

    Only an instance with enough well-fitting records is moved; the others
    keep the common offset. Returns shifted tables, shifted coverage and the
    per-instance fits (for the report); `tables` itself when nothing moved.
    `records`: `inference_records` of the server requests, if already at hand.
    """
    if records is None:
        records = inference_records(tables["server_requests"])
    ends = _end_times(client)
    fits: dict[str, ClockFit] = {}
    shifts: dict[str, float] = {}
    for name in sorted(records["instance"].drop_nulls().unique().to_list()):
        points, widths = _record_points(records.filter(pl.col("instance") == name))
        if clock.method == "forced":
            fits[name] = _fit(points, widths, ends, clock.offset_s)
            continue
        fit = _fit(points, widths, ends, None, prefer=clock.offset_s, subset=True)
        fits[name] = fit
        at_common = int(_fitting(points, widths, ends, clock.offset_s).sum())
        # move an instance only when its own clock explains more of its records
        better = fit.matched >= INSTANCE_MIN_MATCHES and fit.matched > at_common
        if better and abs(fit.offset_s - clock.offset_s) > INSTANCE_DISAGREEMENT_S:
            shifts[name] = fit.offset_s - clock.offset_s
            fit.moved_s = round(shifts[name], 3)
    if not shifts:
        return tables, coverage, fits
    delta = pl.col("instance").replace_strict(shifts, default=0.0, return_dtype=pl.Float64)
    moved = {}
    for table, frame in tables.items():
        if "instance" in frame.columns and "at" in frame.columns:
            frame = frame.with_columns(
                (
                    pl.col("at") - pl.duration(microseconds=(delta * 1e6).round(0).cast(pl.Int64))
                ).alias("at")
            )
        moved[table] = frame
    coverage = {
        name: tuple(t - dt.timedelta(seconds=shifts.get(name, 0.0)) for t in span)
        for name, span in coverage.items()
    }
    return moved, coverage, fits


def _nearest(points: np.ndarray, ends: np.ndarray, offset: float) -> np.ndarray:
    shifted = ends + offset
    idx = (
        np.clip(np.searchsorted(shifted, points), 1, len(shifted) - 1)
        if len(shifted) > 1
        else np.zeros(len(points), int)
    )
    left = shifted[np.maximum(idx - 1, 0)]
    right = shifted[idx]
    return np.where(np.abs(points - left) <= np.abs(points - right), points - left, points - right)


REFINE_POINTS = 20_000  # a contiguous stretch this long pins the offset as well as all of it


def head_window(
    points: np.ndarray, ends: np.ndarray, offset: float
) -> tuple[np.ndarray, np.ndarray]:
    """The first REFINE_POINTS points (sorted) and the ends that could pair with them.

    One-to-one pairing must see every candidate in a stretch of time, so the
    stretch is contiguous rather than sampled.
    """
    if len(points) <= REFINE_POINTS:
        return points, ends
    head = points[:REFINE_POINTS]
    margin = 10 * MATCH_TOLERANCE_S
    keep = (ends + offset >= head[0] - margin) & (ends + offset <= head[-1] + margin)
    return head, ends[keep]


def _paired_shift(
    points: np.ndarray, ends: np.ndarray, offset: float, tol: float = MATCH_TOLERANCE_S
) -> float:
    """Median residual over an order-preserving one-to-one pairing of points and ends.

    Concurrent requests end within a fraction of a second of each other, so a
    point's nearest end is often another request's: nearest-neighbour
    residuals are biased. Pairing each point (in time order) with the earliest
    unused end within the tolerance keeps ranks, which is right while access
    lines lag their responses by a similar amount.
    """
    shifted = ends + offset
    picks = pair_within(points, shifted, tol)
    paired = picks >= 0
    return float(np.median(points[paired] - shifted[picks[paired]])) if paired.any() else 0.0


# The one pairing behind clock refinement, upstream mapping and time attribution.
#
# A walk over the points in order keeps one pointer into sorted windows: point
# i takes window max(pointer, first[i]) when that is below stop[i], and the
# pointer moves one past the window taken, or onto it when the point took
# none. `first[i]` is the first window not closed before the point, `stop[i]`
# the first that opens after it. While `stop` never decreases, the pointer
# after point i is min(max(pointer, first[i]) + 1, stop[i]): with
# y = pointer - (i + 1) each step clamps y to [first[i] - i, stop[i] - i - 1],
# and clamps compose into clamps, so all pointers come from a prefix scan.

SCAN_BLOCK = 256  # points composed together before blocks are chained
_UNBOUNDED = np.iinfo(np.int64).max // 4


def pair_in_order(first: np.ndarray, stop: np.ndarray) -> np.ndarray:
    """Per point, the window the order-preserving greedy gives it, or -1.

    Exact for any input; vectorised when `stop` never decreases and no
    point's `first` lies past its `stop` (sorted points and windows), else
    the walk itself.
    """
    first = np.asarray(first, dtype=np.int64)
    stop = np.asarray(stop, dtype=np.int64)
    if not len(first):
        return np.zeros(0, dtype=np.int64)
    if (first > stop).any() or (stop[1:] < stop[:-1]).any():
        return _pair_by_walk(first, stop)
    step = np.arange(len(first))
    place = step + np.maximum.accumulate(first - step)
    if (place < stop).all():  # every point took a window: the pointer only counted them
        return place
    high = stop - step - 1
    low = np.minimum(first - step, high)
    pad = -len(first) % SCAN_BLOCK
    low = np.concatenate([low, np.full(pad, -_UNBOUNDED)]).reshape(-1, SCAN_BLOCK)
    high = np.concatenate([high, np.full(pad, _UNBOUNDED)]).reshape(-1, SCAN_BLOCK)
    _compose_clamps(low, high)
    block_low, block_high = low[:, -1].copy(), high[:, -1].copy()
    _compose_clamps(block_low, block_high)
    entering = np.concatenate(([0], np.clip(0, block_low[:-1], block_high[:-1])))
    after = np.clip(entering[:, None], low, high).ravel()[: len(first)] + step + 1
    place = np.maximum(np.concatenate(([0], after[:-1])), first)
    return np.where(place < stop, place, -1)


def _compose_clamps(low: np.ndarray, high: np.ndarray) -> None:
    """In place along the last axis: clamp i becomes clamps 0..i applied in turn (log-depth scan)."""
    shift, width = 1, low.shape[-1]
    while shift < width:
        own_low, own_high = low[..., shift:], high[..., shift:]
        new_low = np.minimum(np.maximum(low[..., :-shift], own_low), own_high)
        new_high = np.minimum(np.maximum(high[..., :-shift], own_low), own_high)
        low[..., shift:], high[..., shift:] = new_low, new_high
        shift *= 2


def _pair_by_walk(first: np.ndarray, stop: np.ndarray) -> np.ndarray:
    """`pair_in_order` step by step, for points out of order (varying tolerances)."""
    picks, pointer = [-1] * len(first), 0
    for i, (own_first, own_stop) in enumerate(zip(first.tolist(), stop.tolist(), strict=True)):
        pointer = max(pointer, own_first)
        if pointer < own_stop:
            picks[i] = pointer
            pointer += 1
    return np.array(picks, dtype=np.int64)


def pair_within(points: np.ndarray, times: np.ndarray, tol: float) -> np.ndarray:
    """Each point (in order) takes the earliest unused time (sorted) within ±`tol`; -1 if none."""
    picks = np.full(len(points), -1, dtype=np.int64)
    known = np.flatnonzero(~np.isnan(points))  # a missing time takes nothing and moves nothing
    first = np.searchsorted(times, points[known] - tol, side="left")
    stop = np.searchsorted(times, points[known] + tol, side="right")
    picks[known] = pair_in_order(first, stop)
    return picks


ID_PREFIX_RE = r"^(?:chat)?cmpl-"
# engine-side suffixes vLLM adds to the external id: "-0" per choice, "-1f2e3d4c" internally
ID_SUFFIX_RE = r"-(?:\d+|[0-9a-f]{8})$"
LATE_LIMIT_S = (
    3600.0  # a server finishing later than this after the client gave up is not that request
)


def identity_matches(client: pl.DataFrame, server: pl.DataFrame, offset_s: float) -> pl.DataFrame:
    """Requests tied to server records by request id, else by prompt marker.

    Ids: vLLM logs ``chatcmpl-<X-Request-Id>``, sometimes with an engine-side
    suffix; the bare id is tried first, then with one suffix removed, so a
    client id that itself ends in digits is never cut. Markers (the seed's
    ``(i)``) repeat across steps, so a marker match must also fit in time.
    Returns `_row`, `instance`, `match_key`, `server_source`, `last_server_at`.
    """
    out = []
    server_ids = (
        server.filter(pl.col("request_id").is_not_null())
        .with_columns(pl.col("request_id").str.replace(ID_PREFIX_RE, "").alias("_k0"))
        .with_columns(pl.col("_k0").str.replace(ID_SUFFIX_RE, "").alias("_k1"))
    )
    left = client.filter(pl.col("request_id").is_not_null()).select(
        "_row", pl.col("request_id").alias("_k")
    )
    if left.height and server_ids.height:
        exact = left.join(server_ids, left_on="_k", right_on="_k0")
        rest = left.join(exact.select("_row"), on="_row", how="anti")
        trimmed = rest.join(
            server_ids.filter(pl.col("_k0") != pl.col("_k1")), left_on="_k", right_on="_k1"
        )
        for frame in (exact, trimmed):
            out.append(
                frame.select("_row", "instance", "source", "at").with_columns(
                    pl.lit("request_id").alias("match_key")
                )
            )
    markers = server.filter(pl.col("prompt_marker").is_not_null())
    with_marker = client.filter(pl.col("marker").is_not_null() & pl.col("started_at").is_not_null())
    if markers.height and with_marker.height:
        shift = pl.duration(microseconds=int(round(offset_s * 1e6)))
        tol = pl.duration(microseconds=int(MATCH_TOLERANCE_S * 1e6))
        joined = (
            with_marker.select("_row", "marker", "started_at", "ended_at")
            .join(
                markers.select("prompt_marker", "instance", "source", "at"),
                left_on="marker",
                right_on="prompt_marker",
            )
            .filter(
                (pl.col("at") >= pl.col("started_at") + shift - tol)
                & (pl.col("at") <= pl.col("ended_at") + shift + tol)
            )
        )
        out.append(
            joined.select("_row", "instance", "source", "at").with_columns(
                pl.lit("marker").alias("match_key")
            )
        )
    if not out:
        return pl.DataFrame(
            schema={
                "_row": pl.UInt32,
                "instance": pl.Utf8,
                "match_key": pl.Utf8,
                "server_source": model.SOURCE,
                "last_server_at": pl.Datetime("us", "UTC"),
            }
        )
    both = pl.concat(out).sort("at")
    return both.group_by("_row", maintain_order=True).agg(
        pl.col("instance").first(),
        pl.col("match_key").first(),
        pl.col("source").first().alias("server_source"),
        pl.col("at").max().alias("last_server_at"),
    )


def attribute(
    client: pl.DataFrame,
    server: pl.DataFrame,
    clock: ClockFit,
    coverage: dict,
    records: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Add instance, match_key, ambiguous, server_source, late and reach to each request.

    `reach` is "reached", "unreached" (a failure inside the span every
    instance's log covers, matching nothing, while every success is accounted
    for) or "unknown". `late` marks a failed request whose server finished it
    after the client had given up.
    """
    client = client.with_row_index("_row")
    shift_s = clock.offset_s
    ids = identity_matches(client, server, shift_s).join(
        client.select("_row", "ended_at"), on="_row", how="left"
    )
    by_identity = ids.select(
        "_row",
        pl.col("instance").cast(pl.Utf8),
        pl.col("match_key").cast(pl.Utf8),
        pl.lit(False).alias("ambiguous"),
        pl.col("server_source").cast(model.SOURCE),
        (
            (pl.col("last_server_at") - pl.col("ended_at")).dt.total_microseconds() / 1e6 - shift_s
            > MATCH_TOLERANCE_S
        )
        .fill_null(False)
        .alias("late"),
    )
    records = inference_records(server) if records is None else records
    timed = client.filter(pl.col("started_at").is_not_null()).select(
        "_row", "ok", _seconds("started_at").alias("s"), _seconds("ended_at").alias("e")
    )
    by_time = _match_by_time(records, timed, shift_s, ids.select("_row", "instance")).select(
        "_row",
        "instance",
        pl.lit("time_window").alias("match_key"),
        "ambiguous",
        "server_source",
        "late",
    )
    decided = client.select("_row").join(
        pl.concat([by_identity, by_time]), on="_row", how="left", maintain_order="left"
    )
    out = client.with_columns(
        decided["instance"],
        decided["match_key"],
        decided["ambiguous"].fill_null(False),
        decided["server_source"],
        decided["late"].fill_null(False),
    )
    return out.drop("_row")


def decide_reach(requests: pl.DataFrame, coverage: dict, offset_s: float) -> pl.DataFrame:
    """`reach` and the witness behind it, from the instance logs and the proxy's log.

    reached   — an instance log holds it (witness "instance"), or the proxy's log
                shows it delivered to an upstream whose own log is missing or
                silent (witness "proxy": the instance side is unverified);
    unreached — the proxy says it refused it before any upstream (witness
                "proxy", the strongest proof), or it failed inside the span every
                instance's log covers and matched nothing while every success is
                accounted for (witness "coverage");
    unknown   — anything else.
    """
    if "proxy_delivery" not in requests.columns:
        requests = requests.with_columns(pl.lit(None, dtype=pl.Utf8).alias("proxy_delivery"))
    out = requests.with_columns(covered_expr(coverage, offset_s).alias("_covered"))
    # a success no log saw was served by an instance whose log is missing: a
    # failure may have reached that instance too, so "never reached" is unproven
    provable = not unaccounted_successes(out)
    by_proxy = pl.col("proxy_delivery")
    reach = (
        pl.when(pl.col("instance").is_not_null())
        .then(pl.lit("reached"))
        .when(by_proxy == "reached")
        .then(pl.lit("reached"))
        .when(by_proxy == "refused")
        .then(pl.lit("unreached"))
        .when(~pl.col("ok") & pl.col("_covered") & pl.lit(provable))
        .then(pl.lit("unreached"))
        .otherwise(pl.lit("unknown"))
    )
    witness = (
        pl.when(pl.col("instance").is_not_null())
        .then(pl.lit("instance"))
        .when(by_proxy.is_in(["reached", "refused"]))
        .then(pl.lit("proxy"))
        .when(reach == "unreached")
        .then(pl.lit("coverage"))
    )
    return out.with_columns(reach.alias("reach"), witness.alias("reach_witness")).drop("_covered")


MISSING_LOG_SHARE = 0.02  # successes no instance log saw, beyond which a log is missing


def unaccounted_successes(requests: pl.DataFrame) -> int:
    """Successful, timed requests inside every log's span that no instance log saw."""
    lost = requests.filter(
        pl.col("ok")
        & pl.col("started_at").is_not_null()
        & pl.col("instance").is_null()
        & (pl.col("proxy_delivery").fill_null("") != "reached")
        & pl.col("_covered")
    ).height
    timed_ok = requests.filter(pl.col("ok") & pl.col("started_at").is_not_null()).height
    return lost if lost >= max(1, MISSING_LOG_SHARE * timed_ok) else 0


def _first_reaching(
    values: np.ndarray, shift: np.ndarray, targets: np.ndarray, strict: bool
) -> np.ndarray:
    """Per target, the first index of sorted `values` with values + shift >= target (> if strict).

    The sum is tested exactly as written, rounding included. With one shift
    for all, the shifted values are searched; otherwise searching for
    target - shift can land next to the answer, so the search is corrected
    across runs of equal values until the test holds there and fails before.
    """
    side = "right" if strict else "left"
    if len(shift) and (shift == shift[0]).all():  # one shift: the sums themselves are sorted
        return np.searchsorted(values + shift[0], targets, side=side)
    found = np.searchsorted(values, targets - shift, side=side)

    def holds(at: np.ndarray, which: np.ndarray) -> np.ndarray:
        total = values[at] + shift[which]
        return total > targets[which] if strict else total >= targets[which]

    while True:
        back = np.flatnonzero(found > 0)
        back = back[holds(found[back] - 1, back)]
        ahead = np.flatnonzero(found < len(values))
        ahead = ahead[~holds(found[ahead], ahead)]
        if not len(back) and not len(ahead):
            return found
        found[back] = np.searchsorted(values, values[found[back] - 1], side="left")
        found[ahead] = np.searchsorted(values, values[found[ahead]], side="right")


def _greedy(points: np.ndarray, tols: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Order-preserving one-to-one pairing of sorted points with sorted windows.

    Point i may take window j when lo[j] - tol_i <= point_i <= hi[j] + tol_i.
    Windows are sorted by `lo` (and, being of similar length, roughly by
    `hi`); each point takes the earliest window still open. For windows of
    equal length this greedy is a maximum matching, and it keeps ranks: the
    k-th line of a burst goes to the k-th request to finish, which is right
    while lines lag their responses by similar amounts. Returns, per point,
    the window's index or -1.
    """
    if len(hi) > 1 and not (hi[1:] >= hi[:-1]).all():
        return _greedy_walk(points, tols, lo, hi)
    picks = np.full(len(points), -1, dtype=np.int64)
    known = np.flatnonzero(~np.isnan(points))  # a missing time takes nothing and moves nothing
    points, tols = points[known], tols[known]
    first = _first_reaching(hi, tols, points, strict=False)
    stop = _first_reaching(lo, -tols, points, strict=True)
    picks[known] = pair_in_order(first, stop)
    return picks


def _greedy_walk(
    points: np.ndarray, tols: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> np.ndarray:
    """`_greedy` step by step, for windows whose ends are out of order (no closed form then).

    Only the streamed-request pass can meet such windows, and it sees the
    few records the passes before it left.
    """
    out = [-1] * len(points)
    lo_list, hi_list = lo.tolist(), hi.tolist()
    j, n = 0, len(lo_list)
    for i, (p, tol) in enumerate(zip(points.tolist(), tols.tolist(), strict=True)):
        while j < n and hi_list[j] + tol < p:
            j += 1  # this window closed before the point: nobody later can take it
        if j < n and lo_list[j] - tol <= p:
            out[i] = j
            j += 1
    return np.array(out, dtype=np.int64)


def _match_by_time(
    records: pl.DataFrame, timed: pl.DataFrame, offset: float, pinned: pl.DataFrame
) -> pl.DataFrame:
    """Give access records to requests, in linear, order-preserving passes.

    1. "end": a non-streamed response's line sits at the request's end; a
       request tied by id/marker (`pinned`: `_row`, `instance`) first takes a
       line of its own instance;
    2. "window": a streamed one's sits near its start, anywhere in the window;
    3. "late": a success the server logged after the client had already given up.
    Outcomes must agree in passes 1-2 (a 2xx line belongs to a success).
    A record is marked ambiguous when the next request's end was as close.
    Returns `_row`, `instance`, `server_source`, `ambiguous`, `late` for the
    requests that were not pinned and got a record.
    """
    recs = (
        records.select(
            _seconds("at").alias("at"),
            (pl.col("at_precision_s").fill_null(0.0) + MATCH_TOLERANCE_S).alias("tol"),
            pl.col("http_status").is_between(200, 299).fill_null(False).alias("ok"),
            "instance",
            "source",
        )
        .sort("at")
        .filter(pl.col("at").is_not_null())  # an unstamped record cannot be placed in time
    )
    reqs = (
        timed.filter(pl.col("e").is_not_null())  # nor can a request without an end
        .with_columns((pl.col("s") + offset).alias("s"), (pl.col("e") + offset).alias("e"))
        .join(
            pinned.select("_row", pl.col("instance").alias("_inst"), pl.lit(True).alias("_pinned")),
            on="_row",
            how="left",
            maintain_order="left",
        )
        .with_columns(pl.col("_pinned").fill_null(False))
        .with_row_index("_pos")
    )
    rec_at, rec_tol = recs["at"].to_numpy(), recs["tol"].to_numpy()
    rec_ok = recs["ok"].to_numpy()
    rec_free = np.ones(recs.height, dtype=bool)
    req_pinned = reqs["_pinned"].to_numpy()
    req_ok = {ok: (reqs["ok"] == ok).fill_null(False).to_numpy() for ok in (True, False)}
    req_free = np.ones(reqs.height, dtype=bool)
    picked: list[tuple[np.ndarray, np.ndarray, np.ndarray, bool]] = []

    def assign(rec_mask: np.ndarray, req_mask: np.ndarray, anchor: str, how: str) -> None:
        if not rec_mask.any() or not req_mask.any():
            return
        req_frame = reqs.filter(pl.Series(req_mask)).sort(anchor)
        anchors = req_frame[anchor].to_numpy()
        if how == "late":  # the window opens at the client's end and stays open a while
            lo, hi = req_frame["e"].to_numpy(), (req_frame["e"] + LATE_LIMIT_S).to_numpy()
        elif how == "window":
            lo, hi = req_frame["s"].to_numpy(), req_frame["e"].to_numpy()
        else:
            lo = hi = anchors
        rec_pos = np.flatnonzero(rec_mask)
        points, tols = rec_at[rec_pos], rec_tol[rec_pos]
        picks = _greedy(points, tols, lo, hi)
        got = np.flatnonzero(picks >= 0)
        windows = picks[got]
        rec_free[rec_pos[got]] = False
        req_pos = req_frame["_pos"].to_numpy()[windows]
        req_free[req_pos] = False
        if how == "pinned":
            return
        # another request finished about as close: which of the two got this line is a guess
        following = np.minimum(windows + 1, len(anchors) - 1)
        ambiguous = (windows + 1 < len(anchors)) & (
            np.abs(anchors[following] - points[got]) <= tols[got]
        )
        picked.append((req_pos, rec_pos[got], ambiguous, how == "late"))

    def free_records(ok: bool) -> np.ndarray:
        return rec_free & (rec_ok == ok)

    def free_requests(ok: bool) -> np.ndarray:
        return req_free & ~req_pinned & req_ok[ok]

    # 1a. requests tied by id or marker take a line of their own instance
    pinned_names = reqs.filter("_pinned")["_inst"].drop_nulls().unique()
    with_records = recs.filter(pl.col("instance").is_in(pinned_names.implode()))
    for name in with_records["instance"].unique().to_list():
        rec_own = (recs["instance"] == name).fill_null(False).to_numpy()
        req_own = req_pinned & (reqs["_inst"] == name).fill_null(False).to_numpy()
        for ok in (True, False):
            assign(free_records(ok) & rec_own, req_own & req_ok[ok], "e", "pinned")
    # 1b-2. the rest by end, then by window
    for how, anchor in (("end", "e"), ("window", "s")):
        for ok in (True, False):
            assign(free_records(ok), free_requests(ok), anchor, how)
    # 3. successes logged after the client gave up
    assign(free_records(True), free_requests(False), "e", "late")

    req_pos = np.concatenate([p[0] for p in picked] + [np.zeros(0, np.int64)])
    rec_pos = np.concatenate([p[1] for p in picked] + [np.zeros(0, np.int64)])
    return pl.DataFrame(
        {
            "_row": reqs["_row"].gather(req_pos),
            "instance": recs["instance"].gather(rec_pos),
            "server_source": recs["source"].gather(rec_pos).cast(model.SOURCE),
            "ambiguous": np.concatenate([p[2] for p in picked] + [np.zeros(0, bool)]),
            "late": np.concatenate(
                [np.full(len(p[0]), p[3]) for p in picked] + [np.zeros(0, bool)]
            ),
        }
    )


def covered_expr(coverage: dict, offset: float) -> pl.Expr:
    """Whether a request's whole window lies inside the span every instance's log covers."""
    if not coverage:
        return pl.lit(False)
    lo = max(span[0] for span in coverage.values())
    hi = min(span[1] for span in coverage.values())
    shift = pl.duration(microseconds=int(round(offset * 1e6)))
    return (
        ((pl.col("started_at") + shift) >= lo) & ((pl.col("ended_at") + shift) <= hi)
    ).fill_null(False)


def chi_square_even(counts: list[int]) -> float | None:
    """p-value of the counts under an even split (chi-square, k-1 degrees of freedom)."""
    total, k = sum(counts), len(counts)
    if k < 2 or total == 0:
        return None
    expected = total / k
    stat = sum((c - expected) ** 2 / expected for c in counts)
    return _chi2_sf(stat, k - 1)


def _chi2_sf(x: float, dof: int) -> float:
    """Survival function of chi-square with integer dof, in closed form."""
    if x <= 0:
        return 1.0
    if dof % 2 == 0:
        term, total = 1.0, 1.0
        for i in range(1, dof // 2):
            term *= (x / 2) / i
            total += term
        return min(1.0, math.exp(-x / 2) * total)
    p = math.erfc(math.sqrt(x / 2))
    term = math.sqrt(x / 2) * math.exp(-x / 2) / math.sqrt(math.pi) * 2
    for i in range(1, (dof - 1) // 2 + 1):
        p += term
        term *= x / (2 * i + 1)
    return min(1.0, p)
