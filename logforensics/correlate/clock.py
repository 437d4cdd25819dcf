"""Put client and servers on one clock.

The offset is estimated from the data: the one that lets the most server
records fit a request end. Records with precise times (a runtime prefix)
decide when there are enough; coarse ones are intervals. Each instance's own
offset is estimated too, and an instance whose clock disagrees is moved.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import polars as pl

from logforensics.correlate.pairing import first_reaching, pair_windows, pair_within, parts
from logforensics.correlate.records import (
    MATCH_TOLERANCE_S,
    engine_requests,
    inference_records,
    seconds,
)

MAX_OFFSET_S = 26 * 3600  # the widest time-zone error worth considering
OFFSET_SAMPLE = 400
SCORE_SAMPLE = 100_000
AMBIGUOUS_SHARE = 0.9  # a rival fitting this share of the best's records makes the clock ambiguous
# The offsets the evidence allows: those within this share of the best's support, next to it.
PLATEAU_SHARE = 0.98
SCAN_STEP_S = 0.5  # the support is walked out from the best in these steps, edges then bisected
DIP_STEP_S = 1.0  # and between the best and a rival in these, looking for a dip
EDGE_S = 0.05  # to this resolution
SCAN_LIMIT_S = 60.0  # past this, a rival is a separate explanation without looking for the dip
PRECISE_QUANTILES = (0.05, 0.95)  # the records a precise fit's interval may leave out: 5 % a side
# How late the quickest records may lie behind what they echo: a response is logged before the
# client has it, a request sent before the engine logs it, by up to this much (a network hop).
LAG_S = 0.1


@dataclass
class ClockFit:
    offset_s: float  # add to a client time to get the servers' time
    method: str  # forced | estimated | assumed
    matched: int = 0  # server records that fit a client request at this offset
    considered: int = 0
    residual_s: float | None = None  # median |server - client| of the matched pairs
    zone_hint: str | None = None
    moved_s: float = 0.0  # an instance's records were moved this far onto the common clock
    # records that agree one-to-one with the offset; the best other offset and
    # its agreeing records: when it has about as many, the logs cannot tell
    # the two clocks apart
    paired: int = 0
    second_offset_s: float | None = None
    second_paired: int = 0
    # the offsets the evidence allows (lo, hi), and what decided the estimate
    interval: tuple[float, float] | None = None
    basis: str | None = None

    @property
    def ambiguous(self) -> bool:
        return bool(self.paired) and self.second_paired >= AMBIGUOUS_SHARE * self.paired

    @property
    def fit(self) -> float | None:
        return self.matched / self.considered if self.considered else None


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
    client: pl.DataFrame | RequestTimes,
    records: pl.DataFrame,
    forced: float | None,
    prefer: float = 0.0,
    server: pl.DataFrame | None = None,
    rivals: bool = True,
) -> ClockFit:
    """The client→server clock offset that lets the most server records fit a request end.

    Records with precise times (a runtime prefix) decide when there are
    enough. Otherwise each record is an interval — it happened somewhere
    between its borrowed stamp and the next — and many offsets may fit as
    well: then the one nearest `prefer` (clocks agree) is kept, which is all
    such logs can support. Where no instance wrote an answered access line
    (uvicorn's access log off), the engines' ``Received request`` lines are
    fitted to the requests' starts instead (`server`: the server requests).
    """
    return fit_echoes([clock_evidence(client, records, server)], forced, prefer, rivals=rivals)


@dataclass
class RequestTimes:
    """The client's request times every fit compares against, each sorted once.

    `starts`: every request's start (failed ones too); `ends`: the successes' ends.
    """

    starts: np.ndarray
    ends: np.ndarray

    @classmethod
    def of(cls, client: pl.DataFrame | RequestTimes) -> RequestTimes:
        """The times of `client`'s requests (sorting 6.6M times twice takes 0.4 s at 20M:
        the clock's three fits share one)."""
        if isinstance(client, RequestTimes):
            return client
        times = client.select(
            seconds("started_at").alias("s"),
            pl.when(pl.col("ok")).then(seconds("ended_at")).alias("e"),
        )
        # (polars sorts on every core: numpy's sort of the starts was 0.3 s at 20M)
        starts, ends = (times[c].drop_nulls().sort().to_numpy() for c in ("s", "e"))
        return cls(starts, ends)


def clock_evidence(
    client: pl.DataFrame | RequestTimes, records: pl.DataFrame, server: pl.DataFrame | None
) -> Echoes:
    """What the clock is judged on: the engines' arrival lines where there are enough.

    ``Received request`` is written when a request arrives, streamed or not;
    uvicorn's access line when the response headers go out — at the end of a
    plain request but at the start of a streamed one, so fitted to request
    ends it pulls the offset a whole latency off. Access lines decide only
    where the engines log no arrivals.
    """
    times = RequestTimes.of(client)
    if server is not None:
        arrivals = _arrival_echoes(times, server)
        if len(arrivals.points) >= INSTANCE_MIN_MATCHES and len(arrivals.anchors):
            return arrivals
    points, widths = _record_points(records)
    return Echoes(points, widths, times.ends)


def _arrival_echoes(times: RequestTimes, server: pl.DataFrame) -> Echoes:
    """The engines' ``Received request`` stamps against the requests' starts, failed ones too."""
    arrivals = (
        engine_requests(server)
        .filter(pl.col("received_at").is_not_null())
        .select(seconds("received_at").alias("at"), "at_precision_s")
        .sort("at")
    )
    return Echoes(
        arrivals["at"].to_numpy(), arrivals["at_precision_s"].to_numpy(), times.starts, True
    )


def _record_points(records: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Times (sorted) and precisions of the 2xx records an offset is judged on."""
    ok_records = records.filter(pl.col("http_status").is_between(200, 299))
    precise = ok_records.filter(pl.col("at_precision_s").fill_null(0.0) <= MATCH_TOLERANCE_S)
    if precise.height >= INSTANCE_MIN_MATCHES or precise.height == ok_records.height:
        ok_records = precise
    points = ok_records.select(seconds("at"), pl.col("at_precision_s").fill_null(0.0)).sort("at")
    if not points.height:
        return np.array([]), np.array([])
    return points["at"].to_numpy(), points["at_precision_s"].to_numpy()


@dataclass
class Echoes:
    """Server stamps and the client times they should echo: one kind of evidence for the clock.

    `points`: server stamps, sorted; `widths`: how far past its stamp each
    record's true time may lie (a borrowed or whole-second stamp); `anchors`:
    the client times the records sit at (request ends for access lines,
    starts for the engine's arrival lines), sorted. `arrivals`: the records
    follow their anchors (a request arrives after it was sent) rather than
    precede them (a response is logged before the client has it).
    """

    points: np.ndarray
    widths: np.ndarray
    anchors: np.ndarray
    arrivals: bool = False
    # per offset scored, how many records fit it (`_score` counts all of them: kept, the
    # same count is not searched for again, 0.8M records an instance at 20M)
    fitting_at: dict[float, int] = dataclasses.field(default_factory=dict)

    def fitting(self, offset: float) -> int:
        """How many records hold a request's time shifted by `offset` (`_fitting`)."""
        if offset not in self.fitting_at:
            fits = _fitting(self.points, self.widths, self.anchors, offset)
            self.fitting_at[offset] = int(np.count_nonzero(fits))
        return self.fitting_at[offset]

    def candidates(self) -> set[float]:
        """Offsets the most sampled differences point at (load steps repeat, so several do)."""
        sample_p = self.points[
            np.linspace(0, len(self.points) - 1, min(OFFSET_SAMPLE, len(self.points))).astype(int)
        ]
        sample_a = self.anchors[
            np.linspace(0, len(self.anchors) - 1, min(OFFSET_SAMPLE, len(self.anchors))).astype(int)
        ]
        diffs = (sample_p[:, None] - sample_a[None, :]).ravel()
        diffs = diffs[np.abs(diffs) <= MAX_OFFSET_S]
        bins, counts = np.unique(np.round(diffs), return_counts=True)
        return set(bins[np.argsort(counts)[-12:]].tolist())

    def agreeing(self, offset: float) -> float:
        """How many records agree with `offset`: one-to-one pairs where that is affordable.

        Counting records that merely hold *some* shifted anchor favours offsets
        that put anchors where coarse records crowd; pairs count each anchor
        once. Past PAIRED_SCORE_MAX records, an even sample's fitting records,
        scaled to the whole (ranks, not totals, decide).
        """
        if len(self.points) <= PAIRED_SCORE_MAX:
            tol = np.zeros(len(self.anchors))
            lo = self.points - MATCH_TOLERANCE_S
            hi = self.points + self.widths + MATCH_TOLERANCE_S
            return float((pair_windows(self.anchors + offset, tol, lo, hi) >= 0).sum())
        pick = np.linspace(0, len(self.points) - 1, SCORE_SAMPLE).astype(int)
        hits = _fitting(self.points[pick], self.widths[pick], self.anchors, offset).sum()
        return float(hits) * len(self.points) / SCORE_SAMPLE

    def most(self) -> float:
        """The most records that can agree with any offset."""
        if len(self.points) <= PAIRED_SCORE_MAX:
            return float(min(len(self.points), len(self.anchors)))
        return float(len(self.points))


PAIRED_SCORE_MAX = 20_000


def fit_echoes(
    evidence: list[Echoes],
    forced: float | None,
    prefer: float = 0.0,
    subset: bool = False,
    rivals: bool = True,
) -> ClockFit:
    """The offset most of the evidence agrees with, refined on its most precise kind.

    `subset`: the points are one instance's, the anchors every request's. Then a
    one-to-one pairing is biased (the earliest free end within the tolerance
    is usually another instance's request, about a second early, and three
    refinements drifted 3 s), so the offset is refined on nearest ends instead.
    `rivals`: also score the agreement of the best offset and of its best rival
    (`paired`, `second_*`), which only the common clock reports.
    """
    considered = sum(len(e.points) for e in evidence)
    if forced is not None:
        matched, residual = _score(evidence, forced)
        return ClockFit(forced, "forced", matched, considered, residual, zone_hint(forced))
    usable = [e for e in evidence if len(e.points) and len(e.anchors)]
    if not usable:
        return ClockFit(0.0, "assumed", 0, considered)
    candidates = {0.0, prefer}.union(*(e.candidates() for e in usable))

    ranks: dict[float, tuple[float, float]] = {}

    def rank(c: float) -> tuple[float, float]:
        if c not in ranks:
            ranks[c] = sum(e.agreeing(c) for e in usable), -abs(c - prefer)
        return ranks[c]

    def support(c: float) -> float:
        return rank(c)[0]

    # where the preferred offset is agreed by all the evidence, no candidate can outrank it
    at_prefer = rank(prefer)
    best = prefer if at_prefer[0] >= sum(e.most() for e in usable) else max(candidates, key=rank)
    precise = [e for e in usable if e.widths.max() <= MATCH_TOLERANCE_S]
    # the offsets about as well supported as the best, next to it: what the evidence allows
    # (precise records: the matching window around the best; their interval comes later)
    if subset:
        plateau = None
    elif precise:
        plateau = (best - 2 * MATCH_TOLERANCE_S, best + 2 * MATCH_TOLERANCE_S)
    else:
        plateau = _plateau(support, best)
    second = None
    # a rival is another explanation: a hill of its own, not the best's shoulder
    outside = [c for c in candidates if plateau is None or not _within(c, plateau)]
    if rivals:
        for c in sorted(outside, key=rank, reverse=True):
            if _separated(support, plateau or (best, best), c):
                second = c
                break
    basis = "coarse stamps"
    if precise:
        finest = min(precise, key=lambda e: float(np.median(e.widths)))
        # a record's true time is anywhere in [stamp, stamp + width]: pair on the middle
        middles = finest.points + finest.widths / 2
        window_p, window_a = head_window(middles, finest.anchors, best)
        for _ in range(3):  # refine on one-to-one pairs, not on nearest neighbours
            if subset:
                best += float(np.median(_nearest(window_p, window_a, best)))
            else:
                best += paired_shift(window_p, window_a, best)
        basis = (
            "precise stamps" if float(np.median(finest.widths)) <= EDGE_S else "whole-second stamps"
        )
        if plateau is not None:
            plateau = _spread(finest, window_p, window_a, best)
    elif plateau is not None:
        # every offset in the plateau fits as well: clocks that agree if they may, else its middle
        lo, hi = plateau
        best = prefer if lo <= prefer <= hi else (lo + hi) / 2
    matched, residual = _score(usable, best)
    if matched == 0:
        return ClockFit(0.0, "assumed", 0, considered)
    paired = round(rank(best)[0]) if rivals else 0
    second_paired = round(rank(second)[0]) if second is not None else 0
    if rivals and basis == "precise stamps":
        sharp = sharp_rival(finest, best, outside, paired)
        if sharp is not None:  # the stamps pile up at the best: they decide its rival
            second, second_paired = sharp
    return ClockFit(
        round(best, 3),
        "estimated",
        matched,
        considered,
        residual,
        zone_hint(best),
        paired=paired,
        second_offset_s=round(second, 3) if second_paired else None,
        second_paired=second_paired,
        interval=None
        if plateau is None
        else (round(float(plateau[0]), 3), round(float(plateau[1]), 3)),
        basis=basis,
    )


# Agreement at the stamps' own precision (`Sharp`): differences binned this finely, sought
# this far either side of an offset; a peak as wide as the records' own spread (the width
# of these that stands highest above chance at the best).
SHARP_BIN_S = 0.001
SHARP_REACH_S = 1.0
SHARP_WIDTHS_S = (0.002, 0.005, 0.01, 0.02, 0.05, 0.1)
SHARP_POINTS = 20_000  # records sampled (evenly) ...
SHARP_PAIRS = 4_000_000  # ... fewer where requests are so dense their differences would pass this
# The best's peak must stand this many pairs a record above the chance level for the
# precise reading to decide; a rival's must stand this many standard deviations of the
# chance level above it, and hold this share of the best's, to be named at all.
SHARP_MIN_EXCESS = 0.5
SHARP_MIN_Z = 5.0
SHARP_NOISE_SHARE = 0.5


@dataclass
class Sharp:
    """Record-minus-request differences near one offset, histogrammed from an even sample.

    Where requests are dense in time (the 20M bench: 1,000 a second), every
    offset finds some request within the 1-s matching tolerance, and within a
    few milliseconds too: counts of fitting records cannot tell the true clock
    from one minutes off (6,567,315 against 6,552,210 at -164 s). The
    differences can: at the true offset each record adds its own request to a
    background of chance pairs as high at every offset, so the tallest window
    of the histogram stands above the typical one (the chance level) by about a
    pair a record; at another offset only by noise. The same measure ranks
    bursts sent at once fairly: a burst's records pair with each of its
    requests at the true offset, and with another burst's, if one is timed
    alike, at a rival (the two series' cross-correlation).
    """

    offset: float
    binned: np.ndarray
    sampled: int

    @classmethod
    def near(cls, echoes: Echoes, offset: float) -> Sharp:
        anchors = echoes.anchors
        count = min(SHARP_POINTS, len(echoes.points))
        # the sampled records' middles (each as a middle of all of them would be: the same
        # sum), not every record's: 6.6M at 20M, for each offset looked near
        at = np.linspace(0, len(echoes.points) - 1, count).astype(np.int64)
        pick = echoes.points[at] + echoes.widths[at] / 2
        span = SHARP_REACH_S + max(SHARP_WIDTHS_S)
        lo = np.searchsorted(anchors, pick - offset - span, side="left")
        hi = np.searchsorted(anchors, pick - offset + span, side="right")
        every = int((hi - lo).sum()) // SHARP_PAIRS + 1  # thinner where pairs would be too many
        pick, lo, per_point = pick[::every], lo[::every], (hi - lo)[::every]
        total = int(per_point.sum())
        first = np.repeat(lo - np.cumsum(per_point) + per_point, per_point) + np.arange(total)
        diffs = np.repeat(pick, per_point) - anchors[first]
        diffs -= offset - span
        diffs /= SHARP_BIN_S
        bins = round(2 * span / SHARP_BIN_S)
        inside = diffs[(diffs >= 0) & (diffs < bins)].astype(np.int64)
        del diffs
        binned = np.bincount(inside, minlength=bins)[:bins]
        return cls(offset, binned, len(pick))

    def peak(self, width_s: float) -> tuple[float, float, float]:
        """(pairs a record above chance, standard deviations above it, where) of the tallest
        `width_s` window whose middle lies within SHARP_REACH_S."""
        if not self.sampled:
            return 0.0, 0.0, self.offset
        width = max(1, round(width_s / SHARP_BIN_S))
        windows = np.convolve(self.binned, np.ones(width, dtype=np.int64), mode="valid")
        span = (len(self.binned) * SHARP_BIN_S) / 2
        middles = -span + (np.arange(len(windows)) + width / 2) * SHARP_BIN_S
        inside = np.flatnonzero(np.abs(middles) <= SHARP_REACH_S)
        top = int(inside[np.argmax(windows[inside])])
        chance = float(np.median(windows[inside]))
        excess = float(windows[top]) - chance
        z = excess / np.sqrt(max(chance, 1.0))
        return excess / self.sampled, z, self.offset + float(middles[top])


def sharp_rival(
    echoes: Echoes, best: float, candidates: list[float], paired: int
) -> tuple[float | None, int] | None:
    """The rival of `best` (`paired` records agreeing) at the stamps' precision and the records
    it explains (in proportion to its peak), or None where the best's own records do not
    pile up (queued arrivals, stamps jittering past SHARP_WIDTHS_S): then the precise
    reading proves nothing and the tolerance counts stand."""
    at_best = Sharp.near(echoes, best)
    # the records' own spread: the window that stands highest above chance at the best
    support, width = max((at_best.peak(w)[0], w) for w in SHARP_WIDTHS_S)
    if support < SHARP_MIN_EXCESS:
        return None
    rivals = []
    for c in candidates:
        excess, z, at = Sharp.near(echoes, c).peak(width)
        named = excess >= SHARP_NOISE_SHARE * support and z >= SHARP_MIN_Z
        if named and abs(at - best) > 2 * MATCH_TOLERANCE_S:  # not the best's own hill
            rivals.append((excess, at))
    if not rivals:
        return None, 0
    top, at = max(rivals)
    return at, round(paired * min(top / support, 1.0))


def sharpen(fit: ClockFit, proxy: ClockFit | None) -> ClockFit:
    """The instances' fit narrowed by the proxy's, where the proxy's is the narrower and the
    two agree.

    Without the engines' arrival lines (vLLM's default logging), an instance's
    access lines borrow the stats lines' stamps and allow seconds of offsets;
    the proxy stamps each request to the millisecond or the second. Where the
    proxy's interval overlaps the instances', the proxy is taken to share their
    clock (all the instances' evidence can tell) and the overlap is kept; where
    they are disjoint, the clocks differ and the instances' interval stands.
    With no instance record to fit at all (their logs gone, Prometheus kept the
    engines' numbers), the proxy's clock is the servers' clock.
    """
    if fit.method == "assumed" and proxy is not None and proxy.method == "estimated":
        return dataclasses.replace(proxy, basis=f"the proxy's {proxy.basis} (no instance record)")
    if (
        proxy is None
        or fit.method != "estimated"
        or proxy.method != "estimated"
        or fit.interval is None
        or proxy.interval is None
        or _width(proxy.interval) >= _width(fit.interval)
    ):
        return fit
    lo = max(fit.interval[0], proxy.interval[0])
    hi = min(fit.interval[1], proxy.interval[1])
    if lo > hi:
        return fit
    point = min(max(proxy.offset_s, lo), hi)
    return dataclasses.replace(
        fit,
        offset_s=round(point, 3),
        interval=(round(lo, 3), round(hi, 3)),
        basis=f"the proxy's {proxy.basis}, within the instances' {_span(fit.interval)}",
        zone_hint=zone_hint(point),
    )


def _width(interval: tuple[float, float]) -> float:
    return interval[1] - interval[0]


def _span(interval: tuple[float, float]) -> str:
    return f"{interval[0]:+.2f} … {interval[1]:+.2f} s"


def _within(c: float, interval: tuple[float, float]) -> bool:
    return interval[0] - EDGE_S <= c <= interval[1] + EDGE_S


def _plateau(support, best: float) -> tuple[float, float]:
    """The stretch of offsets around `best` whose support stays within PLATEAU_SHARE of the
    highest seen: walked out in SCAN_STEP_S steps, each edge then bisected to EDGE_S."""
    top = support(best)

    def edge(direction: float) -> float:
        nonlocal top
        inside = best
        while abs(inside - best) < SCAN_LIMIT_S:
            probe = inside + direction * SCAN_STEP_S
            level = support(probe)
            if level < PLATEAU_SHARE * top:
                break
            top = max(top, level)
            inside = probe
        else:
            return inside
        outside = inside + direction * SCAN_STEP_S
        while abs(outside - inside) > EDGE_S:
            middle = (inside + outside) / 2
            if support(middle) >= PLATEAU_SHARE * top:
                inside = middle
            else:
                outside = middle
        return inside

    return edge(-1.0), edge(1.0)


def _separated(support, plateau: tuple[float, float], c: float) -> bool:
    """Whether the support dips between the plateau and `c` (a hill of its own)."""
    near = plateau[0] if c < plateau[0] else plateau[1]
    if abs(c - near) > SCAN_LIMIT_S:
        return True
    floor = AMBIGUOUS_SHARE * support(c)
    steps = np.arange(near, c, DIP_STEP_S if c > near else -DIP_STEP_S)[1:]
    return any(support(float(x)) < floor for x in steps)


def _spread(
    echoes: Echoes, points: np.ndarray, anchors: np.ndarray, best: float
) -> tuple[float, float]:
    """A precise fit's interval, by interval arithmetic on its records.

    A record stamped to `width` (a whole second, a millisecond) happened in
    [stamp, stamp + width]. A response is logged before the client receives it
    (by a network hop, LAG_S at most, for nearly every record): the offset is at
    least each record's stamp minus its client end, and at most that plus the
    width and the hop; most records together narrow it to the overlap of theirs.
    A request reaches the engine after it was sent, late by any queue in front of
    it: the offset is at most each arrival's stamp plus width minus its start, and
    the quickest arrivals (within LAG_S of their sending) bound it from below.
    5 % of the records a side may disagree (another request's anchor nearby).
    """
    width = float(np.median(echoes.widths))
    residuals = _nearest(points, anchors, best)
    residuals = residuals[np.abs(residuals) <= MATCH_TOLERANCE_S]
    if not len(residuals):
        return best - max(width / 2, EDGE_S), best + max(width / 2, EDGE_S)
    # each record's own offset as stamped (points are the stamps' middles)
    low, high = best - width / 2 + np.quantile(residuals, PRECISE_QUANTILES)
    if echoes.arrivals:
        lo, hi = low - LAG_S, low + width
    else:
        lo, hi = high, low + width + LAG_S
        if lo > hi:  # the records' own jitter is wider than their stamps
            lo, hi = low, high + width + LAG_S
    return min(lo, best), max(hi, best)


def _fitting(points: np.ndarray, widths: np.ndarray, ends: np.ndarray, offset: float) -> np.ndarray:
    """Per record: does its interval [at - tol, at + precision + tol] hold a shifted request end?"""
    if not len(points) or not len(ends):
        return np.zeros(len(points), bool)
    lo = points - MATCH_TOLERANCE_S
    hi = points + widths + MATCH_TOLERANCE_S
    idx = first_reaching(ends, np.full(len(points), offset), lo, strict=False)
    ok = idx < len(ends)
    ok[ok] &= ends[idx[ok]] + offset <= hi[ok]
    return ok


def _score(evidence: list[Echoes], offset: float) -> tuple[int, float | None]:
    """Records that fit a shifted anchor (as `_fitting`), and their median distance to the
    nearest one (as `_nearest`), from one search of the records among the anchors."""
    matched, distances = 0, []
    for e in evidence:
        if not len(e.points) or not len(e.anchors):
            continue
        # the records a part at a time: each part's arrays, not eight as long as the records
        # (6.5M at 20M: 0.4 GB, in each of the two fits run at once); the anchors searched
        # as shifted without a shifted copy of them (50 MB in each fit)
        fitting = 0
        for part in parts(len(e.points), SCORE_CHUNK):
            count, near = _score_part(e.anchors, offset, e.points[part], e.widths[part])
            fitting += count
            if count:
                distances.append(near)
        e.fitting_at[offset] = fitting  # (`_fitting`'s test: an anchor within either edge)
        matched += fitting
    if not matched:
        return 0, None
    return matched, float(np.median(np.concatenate(distances)))


SCORE_CHUNK = 1 << 20  # records `_score` scores at a time


def _score_part(
    anchors: np.ndarray, offset: float, points: np.ndarray, widths: np.ndarray
) -> tuple[int, np.ndarray]:
    """`_score` of some records (sorted, as `points`) against all the anchors shifted by
    `offset`: how many fit, and the distance of each that fits to its nearer neighbour."""
    last = len(anchors) - 1
    # the first at or after (anchor + offset, rounded as it is added: `first_reaching`)
    found = first_reaching(anchors, np.broadcast_to(offset, len(points)), points, strict=False)
    at = np.minimum(found, last)
    after = anchors[at]
    after += offset
    np.subtract(found, 1, out=at)
    np.maximum(at, 0, out=at)
    before = anchors[at]
    before += offset
    del at
    # an anchor in [point - tol, point) or in [point, point + width + tol]
    edge = points - MATCH_TOLERANCE_S
    ok = before >= edge
    ok &= found > 0
    np.add(points, widths, out=edge)
    edge += MATCH_TOLERANCE_S
    reach = after <= edge
    reach &= found <= last
    ok |= reach
    del edge, reach, found
    count = int(np.count_nonzero(ok))
    if not count:
        return 0, np.zeros(0)
    # the nearer of the two neighbours (at either end of the anchors both are the end one:
    # `_nearest`'s pair, searched once)
    points = points[ok]
    before, after = before[ok], after[ok]
    np.subtract(points, before, out=before)
    np.abs(before, out=before)
    np.subtract(points, after, out=after)
    np.abs(after, out=after)
    return count, np.minimum(before, after, out=before)


INSTANCE_MIN_MATCHES = 5
FITS_AT_ONCE = 2  # instances' clocks fitted at once: each more holds one more instance's evidence
INSTANCE_DISAGREEMENT_S = MATCH_TOLERANCE_S


def without_explained_rival(common: ClockFit, instances: dict[str, ClockFit]) -> ClockFit:
    """The common fit, its rival dropped when that rival is one instance's own clock.

    An instance whose host clock runs apart makes its own offset a rival of the
    common one; once `align_instances` has moved it onto the common clock, the
    rival explains nothing the move did not, and the clock is not ambiguous."""
    if common.second_offset_s is None or common.method != "estimated":
        return common
    apart = common.second_offset_s - common.offset_s
    width = common.interval[1] - common.interval[0] if common.interval else 0.0
    tolerance = max(MATCH_TOLERANCE_S, width)
    if any(fit.moved_s and abs(fit.moved_s - apart) <= tolerance for fit in instances.values()):
        return dataclasses.replace(common, second_offset_s=None, second_paired=0)
    return common


def align_instances(
    client: pl.DataFrame | RequestTimes,
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
    server = tables["server_requests"]
    fits: dict[str, ClockFit] = {}
    shifts: dict[str, float] = {}
    times = RequestTimes.of(client)
    # an access record's clock evidence is its time, precision and status (`_record_points`)
    own_records = records.select("instance", "at", "at_precision_s", "http_status").partition_by(
        "instance", as_dict=True
    )
    own_lines = server.filter(pl.col("event") != "access").partition_by("instance", as_dict=True)
    names = sorted({k[0] for k in own_records} | set(server["instance"].drop_nulls().unique()))

    def own_fit(name: str) -> tuple[ClockFit, int | None]:
        """The instance's own fit, and how many of its records the common offset fits."""
        own = clock_evidence(
            times,
            own_records.get((name,), records.clear().select("at", "at_precision_s", "http_status")),
            own_lines.get((name,), server.clear()),
        )
        if clock.method == "forced":
            return fit_echoes([own], clock.offset_s), None
        fit = fit_echoes([own], None, prefer=clock.offset_s, subset=True, rivals=False)
        return fit, own.fitting(clock.offset_s)

    # each instance's fit is its own (numpy searches, which release the GIL): two at once
    with ThreadPoolExecutor(max_workers=FITS_AT_ONCE) as pool:
        for name, (fit, at_common) in zip(names, pool.map(own_fit, names), strict=True):
            fits[name] = fit
            if at_common is None:
                continue
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
    """Each point's difference to the nearest shifted end (the earlier one on a tie)."""
    if len(ends) > 1:
        found = first_reaching(ends, np.full(len(points), offset), points, strict=False)
        idx = np.clip(found, 1, len(ends) - 1)
    else:
        idx = np.zeros(len(points), int)
    left = ends[np.maximum(idx - 1, 0)] + offset
    right = ends[idx] + offset
    return np.where(np.abs(points - left) <= np.abs(points - right), points - left, points - right)


REFINE_POINTS = 20_000  # a contiguous stretch this long pins the offset as well as all of it


def head_window(
    points: np.ndarray, ends: np.ndarray, offset: float
) -> tuple[np.ndarray, np.ndarray]:
    """The first REFINE_POINTS points (sorted) and the ends that could pair with them."""
    head, keep = head_span(points, ends, offset)
    return head, ends[keep]


def head_span(points: np.ndarray, ends: np.ndarray, offset: float) -> tuple[np.ndarray, slice]:
    """The first REFINE_POINTS points (sorted) and the stretch of the (sorted) ends that
    could pair with them.

    One-to-one pairing must see every candidate in a stretch of time, so the
    stretch is contiguous rather than sampled.
    """
    if len(points) <= REFINE_POINTS:
        return points, slice(None)
    head = points[:REFINE_POINTS]
    margin = 10 * MATCH_TOLERANCE_S
    bounds = np.array([head[0] - margin, head[-1] + margin])
    first = first_reaching(ends, np.full(1, offset), bounds[:1], strict=False)[0]
    stop = first_reaching(ends, np.full(1, offset), bounds[1:], strict=True)[0]
    return head, slice(first, stop)


def paired_shift(
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
