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

import bisect
import datetime as dt
import math
from dataclasses import dataclass

import numpy as np
import polars as pl

INFERENCE_PATH_RE = r"^/(?:v1/)?(?:chat/completions|completions|generate|responses)\b"
MATCH_TOLERANCE_S = 1.0  # client/server stamps of the same moment, after the offset
MAX_OFFSET_S = 26 * 3600  # the widest time-zone error worth considering
OFFSET_SAMPLE = 400


@dataclass
class ClockFit:
    offset_s: float  # add to a client time to get the servers' time
    method: str  # forced | estimated | assumed
    matched: int = 0  # server records that fit a client request at this offset
    considered: int = 0
    residual_s: float | None = None  # median |server - client| of the matched pairs
    zone_hint: str | None = None

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
    ends = client.filter(pl.col("ok") & pl.col("ended_at").is_not_null()).select(
        _seconds("ended_at")
    )
    ok_records = records.filter(pl.col("http_status").is_between(200, 299))
    precise = ok_records.filter(pl.col("at_precision_s").fill_null(0.0) <= MATCH_TOLERANCE_S)
    if precise.height >= INSTANCE_MIN_MATCHES or precise.height == ok_records.height:
        ok_records = precise
    points = ok_records.select(_seconds("at"), pl.col("at_precision_s").fill_null(0.0)).sort("at")
    ends_arr = np.sort(ends.to_series().to_numpy()) if ends.height else np.array([])
    points_arr = points["at"].to_numpy() if points.height else np.array([])
    widths = points["at_precision_s"].to_numpy() if points.height else np.array([])
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
    best = max(
        candidates, key=lambda c: (_score(points_arr, widths, ends_arr, c)[0], -abs(c - prefer))
    )
    if widths.max() <= MATCH_TOLERANCE_S:
        for _ in range(3):  # refine on one-to-one pairs, not on nearest neighbours
            best += _paired_shift(points_arr, ends_arr, best)
    matched, residual = _score(points_arr, widths, ends_arr, best)
    if matched == 0:
        return ClockFit(0.0, "assumed", 0, len(points_arr))
    return ClockFit(
        round(best, 3), "estimated", matched, len(points_arr), residual, zone_hint(best)
    )


def _score(
    points: np.ndarray, widths: np.ndarray, ends: np.ndarray, offset: float
) -> tuple[int, float | None]:
    """Records whose interval [at - tol, at + precision + tol] holds a shifted request end."""
    if not len(points) or not len(ends):
        return 0, None
    shifted = ends + offset
    lo = points - MATCH_TOLERANCE_S
    hi = points + widths + MATCH_TOLERANCE_S
    idx = np.searchsorted(shifted, lo)
    ok = idx < len(shifted)
    ok[ok] &= shifted[idx[ok]] <= hi[ok]
    d = _nearest(points, ends, offset)
    return int(ok.sum()), (float(np.median(np.abs(d[ok]))) if ok.any() else None)


INSTANCE_MIN_MATCHES = 5
INSTANCE_DISAGREEMENT_S = MATCH_TOLERANCE_S


def align_instances(
    client: pl.DataFrame, tables: dict[str, pl.DataFrame], coverage: dict, clock: ClockFit
) -> tuple[dict[str, pl.DataFrame], dict, dict[str, ClockFit]]:
    """Estimate each instance's own offset; move an instance whose clock disagrees onto the common one.

    Only an instance with enough well-fitting records is moved; the others
    keep the common offset. Returns shifted tables, shifted coverage and the
    per-instance fits (for the report).
    """
    records = inference_records(tables["server_requests"])
    fits: dict[str, ClockFit] = {}
    shifts: dict[str, float] = {}
    for name in sorted(records["instance"].drop_nulls().unique().to_list()):
        own = records.filter(pl.col("instance") == name)
        if clock.method == "forced":
            fits[name] = estimate_offset(client, own, clock.offset_s)
            continue
        fit = estimate_offset(client, own, None, prefer=clock.offset_s)
        fits[name] = fit
        at_common = estimate_offset(client, own, clock.offset_s).matched
        # move an instance only when its own clock explains more of its records
        better = fit.matched >= INSTANCE_MIN_MATCHES and fit.matched > at_common
        if better and abs(fit.offset_s - clock.offset_s) > INSTANCE_DISAGREEMENT_S:
            shifts[name] = fit.offset_s - clock.offset_s
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
    residuals = []
    j = 0
    for p in points:
        while j < len(shifted) and shifted[j] < p - tol:
            j += 1
        if j < len(shifted) and shifted[j] <= p + tol:
            residuals.append(p - shifted[j])
            j += 1
    return float(np.median(residuals)) if residuals else 0.0


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
                "server_source": pl.Utf8,
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
) -> pl.DataFrame:
    """Add instance, match_key, ambiguous, server_source, late and reach to each request.

    `reach` is "reached", "unreached" (a failure inside the span every
    instance's log covers, matching nothing, while every success is accounted
    for) or "unknown". `late` marks a failed request whose server finished it
    after the client had given up.
    """
    client = client.with_row_index("_row")
    n = client.height
    instance: list[str | None] = [None] * n
    key: list[str | None] = [None] * n
    ambiguous = [False] * n
    witness: list[str | None] = [None] * n
    late = [False] * n
    shift_s = clock.offset_s

    ids = identity_matches(client, server, shift_s)
    ends = dict(zip(client["_row"].to_list(), client["ended_at"].to_list(), strict=True))
    for row, inst, match_key, src, last_at in ids.iter_rows():
        instance[row], key[row], witness[row] = inst, match_key, src
        end = ends[row]
        if end is not None and last_at is not None:
            late[row] = (last_at - end).total_seconds() - shift_s > MATCH_TOLERANCE_S

    records = inference_records(server)
    timed = client.filter(pl.col("started_at").is_not_null()).select(
        "_row", "ok", _seconds("started_at").alias("s"), _seconds("ended_at").alias("e")
    )
    if records.height and timed.height:
        _match_by_time(records, timed, shift_s, instance, key, ambiguous, witness, late)

    out = client.with_columns(
        pl.Series("instance", instance, dtype=pl.Utf8),
        pl.Series("match_key", key, dtype=pl.Utf8),
        pl.Series("ambiguous", ambiguous, dtype=pl.Boolean),
        pl.Series("server_source", witness, dtype=pl.Utf8),
        pl.Series("late", late, dtype=pl.Boolean),
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


def _match_by_time(records, timed, offset, instance, key, ambiguous, witness, late) -> None:
    """Give each access record to one request, in three passes.

    1. "end": a non-streamed response's line sits at the request's end;
    2. "window": a streamed one's sits near its start, anywhere in the window;
    3. "late": a success the server logged after the client had already given up.
    Outcomes must agree in passes 1-2 (a 2xx line belongs to a success).
    """
    by_outcome = {}
    for ok in (True, False):
        rows = timed.filter(pl.col("ok") == ok).sort("e")
        by_outcome[ok] = (
            rows["e"].to_numpy() + offset,
            rows["s"].to_numpy() + offset,
            rows["_row"].to_list(),
        )
    record_rows = records.select(
        _seconds("at"), pl.col("at_precision_s").fill_null(0.0), "http_status", "instance", "source"
    ).rows()
    used_record: set[int] = set()
    taken: set[int] = set()  # requests that already own an access record

    def free(row: int, inst: str) -> bool:
        """Unmatched, or matched by id/marker to this record's instance and not yet given its line."""
        return row not in taken and (key[row] is None or instance[row] == inst)

    for pass_name in ("end", "window", "late"):
        for r_idx, (at, precision, status, inst, src) in enumerate(record_rows):
            if r_idx in used_record:
                continue
            ok = status is not None and 200 <= status < 300
            if pass_name == "late" and not ok:
                continue
            ends, starts, rows = by_outcome[ok if pass_name != "late" else False]
            tol = MATCH_TOLERANCE_S + precision
            if pass_name == "end":
                span = range(
                    bisect.bisect_left(ends, at - tol), bisect.bisect_right(ends, at + tol)
                )
                fits = [j for j in span if free(rows[j], inst)]
                anchor = ends
            elif pass_name == "window":
                fits = [
                    j
                    for j in range(len(rows))
                    if starts[j] - tol <= at <= ends[j] + tol and free(rows[j], inst)
                ]
                anchor = starts
            else:
                fits = [
                    j
                    for j in range(len(rows))
                    if starts[j] - tol <= at
                    and ends[j] < at <= ends[j] + LATE_LIMIT_S
                    and free(rows[j], inst)
                ]
                anchor = ends
            if not fits:
                continue
            best = min(fits, key=lambda j: abs(anchor[j] - at))
            row = rows[best]
            used_record.add(r_idx)
            taken.add(row)
            if pass_name == "late":
                late[row] = True
            if key[row] is not None:  # an id/marker match: this record is its access line
                continue
            instance[row], key[row], witness[row] = inst, "time_window", src
            ambiguous[row] = len(fits) > 1 and any(
                abs(abs(anchor[j] - at) - abs(anchor[best] - at)) <= precision + 0.05
                for j in fits
                if j != best
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
