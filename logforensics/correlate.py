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


def estimate_offset(client: pl.DataFrame, records: pl.DataFrame, forced: float | None) -> ClockFit:
    """The client→server clock offset that lets the most server records fit a request end."""
    ends = client.filter(pl.col("ok") & pl.col("ended_at").is_not_null()).select(
        _seconds("ended_at")
    )
    points = records.filter(pl.col("http_status").is_between(200, 299)).select(_seconds("at"))
    ends_arr = np.sort(ends.to_series().to_numpy()) if ends.height else np.array([])
    points_arr = points.to_series().to_numpy() if points.height else np.array([])
    if forced is not None:
        matched, residual = _score(points_arr, ends_arr, forced)
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
    candidates = set(bins[np.argsort(counts)[-12:]].tolist()) | {0.0}
    best = max(candidates, key=lambda c: (_score(points_arr, ends_arr, c)[0], -abs(c)))
    for _ in range(3):  # refine on one-to-one pairs, not on nearest neighbours
        best += _paired_shift(np.sort(points_arr), ends_arr, best)
    matched, residual = _score(points_arr, ends_arr, best)
    if matched == 0:
        return ClockFit(0.0, "assumed", 0, len(points_arr))
    return ClockFit(
        round(best, 3), "estimated", matched, len(points_arr), residual, zone_hint(best)
    )


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


def _score(points: np.ndarray, ends: np.ndarray, offset: float) -> tuple[int, float | None]:
    if not len(points) or not len(ends):
        return 0, None
    d = _nearest(points, ends, offset)
    ok = np.abs(d) <= MATCH_TOLERANCE_S
    return int(ok.sum()), (float(np.median(np.abs(d[ok]))) if ok.any() else None)


def _paired_shift(points: np.ndarray, ends: np.ndarray, offset: float) -> float:
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
        while j < len(shifted) and shifted[j] < p - MATCH_TOLERANCE_S:
            j += 1
        if j < len(shifted) and shifted[j] <= p + MATCH_TOLERANCE_S:
            residuals.append(p - shifted[j])
            j += 1
    return float(np.median(residuals)) if residuals else 0.0


def _normalised_id(col: pl.Expr) -> pl.Expr:
    """vLLM prefixes `chatcmpl-`/`cmpl-` and may suffix `-0`: compare the core."""
    return col.str.replace(r"^(?:chat)?cmpl-", "").str.replace(r"-\d+$", "")


def attribute(
    client: pl.DataFrame,
    server: pl.DataFrame,
    clock: ClockFit,
    coverage: dict,
) -> pl.DataFrame:
    """Add instance, match_key, ambiguous, server_source and reach to each client request.

    `reach` is "reached", "unreached" (a failure inside the span every
    instance's log covers, matching nothing) or "unknown".
    """
    client = client.with_row_index("_row")
    n = client.height
    instance = [None] * n
    key = [None] * n
    ambiguous = [False] * n
    witness = [None] * n

    # 1-2. identity keys: request id, then prompt marker
    for client_col, server_col, name in (
        ("request_id", "request_id", "request_id"),
        ("marker", "prompt_marker", "marker"),
    ):
        left = client.filter(pl.col(client_col).is_not_null()).select(
            "_row", _normalised_id(pl.col(client_col)).alias("_k")
        )
        right = (
            server.filter(pl.col(server_col).is_not_null())
            .select(_normalised_id(pl.col(server_col)).alias("_k"), "instance", "source")
            .unique("_k", keep="first", maintain_order=True)
        )
        if left.is_empty() or right.is_empty():
            continue
        for row, inst, src in (
            left.join(right, on="_k").select("_row", "instance", "source").iter_rows()
        ):
            if key[row] is None:
                instance[row], key[row], witness[row] = inst, name, src

    # 3. time windows, greedy in time order over the access records
    records = inference_records(server)
    timed = client.filter(pl.col("started_at").is_not_null()).select(
        "_row", "ok", _seconds("started_at").alias("s"), _seconds("ended_at").alias("e")
    )
    if records.height and timed.height:
        _match_by_time(records, timed, clock.offset_s, instance, key, ambiguous, witness)

    out = client.with_columns(
        pl.Series("instance", instance, dtype=pl.Utf8),
        pl.Series("match_key", key, dtype=pl.Utf8),
        pl.Series("ambiguous", ambiguous, dtype=pl.Boolean),
        pl.Series("server_source", witness, dtype=pl.Utf8),
    )
    return out.with_columns(_reach(coverage, clock.offset_s).alias("reach")).drop("_row")


def _match_by_time(records, timed, offset, instance, key, ambiguous, witness) -> None:
    by_outcome = {}
    for ok in (True, False):
        rows = timed.filter(pl.col("ok") == ok).sort("e")
        by_outcome[ok] = (
            rows["e"].to_numpy() + offset,
            rows["s"].to_numpy() + offset,
            rows["_row"].to_list(),
        )
    used_record: set[int] = set()
    taken: set[int] = set()  # requests that already own an access record

    def free(row: int, inst: str) -> bool:
        """Unmatched, or matched by id/marker to this record's instance and not yet given its line."""
        return row not in taken and (key[row] is None or instance[row] == inst)

    for pass_anchor in ("end", "window"):
        for r_idx, (at, precision, status, inst, src) in enumerate(
            records.select(
                _seconds("at"),
                pl.col("at_precision_s").fill_null(0.0),
                "http_status",
                "instance",
                "source",
            ).iter_rows()
        ):
            if r_idx in used_record:
                continue
            ok = status is not None and 200 <= status < 300
            ends, starts, rows = by_outcome[ok]
            tol = MATCH_TOLERANCE_S + precision
            if pass_anchor == "end":
                lo = bisect.bisect_left(ends, at - tol)
                hi = bisect.bisect_right(ends, at + tol)
                span = range(lo, hi)
                fits = [j for j in span if free(rows[j], inst)]
            else:
                fits = [
                    j
                    for j in range(len(rows))
                    if starts[j] - tol <= at <= ends[j] + tol and free(rows[j], inst)
                ]
            if not fits:
                continue
            anchor = ends if pass_anchor == "end" else starts
            best = min(fits, key=lambda j: abs(anchor[j] - at))
            row = rows[best]
            used_record.add(r_idx)
            taken.add(row)
            if key[row] is not None:  # an id/marker match: this record is its access line
                continue
            instance[row], key[row], witness[row] = inst, "time_window", src
            ambiguous[row] = len(fits) > 1 and any(
                abs(abs(anchor[j] - at) - abs(anchor[best] - at)) <= precision + 0.05
                for j in fits
                if j != best
            )


def _reach(coverage: dict, offset: float) -> pl.Expr:
    if not coverage:
        covered = pl.lit(False)
    else:
        lo = max(span[0] for span in coverage.values())
        hi = min(span[1] for span in coverage.values())
        shift = pl.duration(microseconds=int(round(offset * 1e6)))
        covered = ((pl.col("started_at") + shift) >= lo) & ((pl.col("ended_at") + shift) <= hi)
    return (
        pl.when(pl.col("instance").is_not_null())
        .then(pl.lit("reached"))
        .when(~pl.col("ok") & covered.fill_null(False))
        .then(pl.lit("unreached"))
        .otherwise(pl.lit("unknown"))
    )


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
