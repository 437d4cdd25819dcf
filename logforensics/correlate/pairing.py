"""One pairing of time-ordered points with time-ordered windows, behind clock
refinement, instance attribution and proxy matching.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import polars as pl

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
# Targets `first_reaching` corrects at a time: its temporaries (a few int64 and float
# arrays a target) stay this size instead of the targets' (6.6M at 20M: ~50 MB each).
SEARCH_CHUNK = 1 << 20
INT32_BELOW = 1 << 28  # arrays shorter than this are indexed by int32 (`index_dtype`)


def index_dtype(length: int) -> type[np.signedinteger]:
    """The positions into an array of `length` items: int32 below INT32_BELOW (half an
    int64's memory: at 20M, each array of positions as long as the records is 27 MB, not
    53, and the attribution's passes hold several), else int64. Signed, so a position
    minus one is -1, never a wrap; a quarter of int32's range stays free for the
    clamps of `pair_in_order`."""
    return np.int32 if length < INT32_BELOW else np.int64


def parts(length: int, size: int) -> Iterator[slice]:
    """`length` items `size` at a time: what bounds a vectorised step's temporaries to one
    part's instead of the whole array's."""
    for start in range(0, length, size):
        yield slice(start, start + size)


MERGE_MIN_KEYS = 4096  # below this many keys numpy's search is as quick as a merge


def search_sorted(
    values: np.ndarray, keys: np.ndarray, side: str = "left", merge_from: int = MERGE_MIN_KEYS
) -> np.ndarray:
    """`np.searchsorted(values, keys, side)` for sorted `values`, as a merge where the keys
    are sorted too: numpy searches each key from the top (at 20M, 100k keys among 6.6M
    values took 40 ms; polars' as-of join walks both in 8 ms, 6.6M keys in half numpy's time).
    Keys out of order, or with NaN, take numpy's search; so do fewer than `merge_from`."""
    dtype = index_dtype(len(values) + 1)
    if len(keys) < merge_from or not len(values) or not (keys[1:] >= keys[:-1]).all():
        return np.searchsorted(values, keys, side=side).astype(dtype, copy=False)
    # only the stretch of values the keys' answers lie in (numpy finds its two ends): a part
    # of the keys (the clock fit scores 1M records at a time against 6.6M request ends at
    # 20M) indexes its own stretch, not every value once more
    lo, hi = (int(end) for end in np.searchsorted(values, keys[[0, -1]], side=side))
    # the keys and values under one name: the join then gives each key the index alone (with
    # two names it also gathered each key's value: 53 MB more at 20M)
    right = (  # (a slice, not a copy)
        pl.DataFrame({"k": values}).slice(lo, hi - lo).with_row_index("i").set_sorted("k")
    )
    left = pl.DataFrame({"k": keys}).set_sorted("k")
    # forward: the first value >= the key ("left"), or > it ("right"), as numpy counts them
    joined = left.join_asof(right, on="k", strategy="forward", allow_exact_matches=side == "left")
    found = joined["i"].fill_null(hi - lo).to_numpy().astype(dtype)  # (u32: always a copy)
    found += lo
    return found


def pair_in_order(first: np.ndarray, stop: np.ndarray) -> np.ndarray:
    """Per point, the window the order-preserving greedy gives it, or -1.

    Exact for any input; vectorised when `stop` never decreases and no
    point's `first` lies past its `stop` (sorted points and windows), else
    the walk itself.
    """
    stop = np.asarray(stop)
    dtype = index_dtype(max(len(first), int(stop.max(initial=0)) + 1))
    first = np.asarray(first, dtype=dtype)
    stop = stop.astype(dtype, copy=False)
    if not len(first):
        return np.zeros(0, dtype=dtype)
    if (first > stop).any() or (stop[1:] < stop[:-1]).any():
        return _pair_by_walk(first, stop)
    # (in place where it can: at 20M each of these arrays is 27 MB)
    step = np.arange(len(first), dtype=dtype)
    unbounded = np.iinfo(dtype).max // 4
    place = first - step
    np.maximum.accumulate(place, out=place)
    place += step
    if (place < stop).all():  # every point took a window: the pointer only counted them
        return place
    del place
    high = stop - step - 1
    low = first - step
    np.minimum(low, high, out=low)
    pad = -len(first) % SCAN_BLOCK
    low = np.concatenate([low, np.full(pad, -unbounded, dtype)]).reshape(-1, SCAN_BLOCK)
    high = np.concatenate([high, np.full(pad, unbounded, dtype)]).reshape(-1, SCAN_BLOCK)
    _compose_clamps(low, high)
    block_low, block_high = low[:, -1].copy(), high[:, -1].copy()
    _compose_clamps(block_low, block_high)
    entering = np.concatenate(([0], np.clip(0, block_low[:-1], block_high[:-1]))).astype(dtype)
    after = np.clip(entering[:, None], low, high).ravel()[: len(first)]
    del low, high
    after += step
    after += 1
    place = np.empty_like(first)
    place[0], place[1:] = 0, after[:-1]
    del after
    np.maximum(place, first, out=place)
    place[place >= stop] = -1
    return place


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


def first_reaching(
    values: np.ndarray, shift: np.ndarray, targets: np.ndarray, strict: bool
) -> np.ndarray:
    """Per target, the first index of sorted `values` with values + shift >= target (> if strict).

    The sum is tested exactly as written, rounding included. With one shift
    for all, the stretch of shifted values the targets fall among is searched;
    otherwise (no shifted copy of many values) searching for target - shift
    can land next to the answer, so the search is corrected across runs of
    equal values until the test holds there and fails before.
    """
    one_shift = bool(len(shift)) and (shift.strides == (0,) or bool((shift == shift[0]).all()))
    if len(targets) <= SEARCH_CHUNK:
        return _first_reaching_part(values, shift, targets, strict, one_shift)
    found = np.empty(len(targets), dtype=index_dtype(len(values) + 1))
    for part in parts(len(targets), SEARCH_CHUNK):  # each target is found on its own
        found[part] = _first_reaching_part(values, shift[part], targets[part], strict, one_shift)
    return found


def _first_reaching_part(
    values: np.ndarray, shift: np.ndarray, targets: np.ndarray, strict: bool, one_shift: bool
) -> np.ndarray:
    """One part's answer: the stretch searched where one shift serves all, else the search
    corrected across equal values."""
    if one_shift:
        found = _first_reaching_shifted(values, float(shift[0]), targets, strict)
        if found is not None:
            return found
    return _first_reaching_corrected(values, shift, targets, strict)


def _first_reaching_shifted(
    values: np.ndarray, shift: float, targets: np.ndarray, strict: bool
) -> np.ndarray | None:
    """`first_reaching` with one shift for all: the shifted values are sorted too (adding a
    number keeps their order, rounding included), so the stretch of them that can hold the
    answers is shifted and searched. None where a target or the shift is not finite, or
    where the stretch is longer than both the targets and SEARCH_CHUNK (its shifted copy
    would then be the largest temporary: one instance's records among every request's).

    Below the stretch every value + shift is under the least target, above it over the
    greatest: its ends lie a margin past them, 1024 times the sum's rounding. (The
    clock fits score 1M records a part against 6.6M request ends at 20M: a search
    corrected across equal ends took 1 s of the fits.)
    """
    dtype = index_dtype(len(values) + 1)
    if not len(targets) or not len(values):
        return np.full(len(targets), len(values), dtype=dtype)
    least, greatest = float(targets.min()), float(targets.max())
    if not (np.isfinite(least) and np.isfinite(greatest) and np.isfinite(shift)):
        return None
    margin = 1024 * float(np.spacing(abs(least) + abs(greatest) + abs(shift)))
    start = int(np.searchsorted(values, least - shift - margin, side="left"))
    end = int(np.searchsorted(values, greatest - shift + margin, side="right"))
    if end - start > max(len(targets), SEARCH_CHUNK):
        return None
    stretch = values[start:end] + shift
    found = search_sorted(stretch, targets, side="right" if strict else "left")
    found = found.astype(dtype, copy=False)
    found += start
    return found


def _first_reaching_corrected(
    values: np.ndarray, shift: np.ndarray, targets: np.ndarray, strict: bool
) -> np.ndarray:
    """`first_reaching` by searching for target - shift and correcting across equal values."""
    found = search_sorted(values, targets - shift, side="right" if strict else "left")

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


def pair_windows(
    points: np.ndarray, tols: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> np.ndarray:
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
        return _pair_windows_walk(points, tols, lo, hi)
    missing = np.isnan(points)  # a missing time takes nothing and moves nothing
    if missing.any():
        picks = np.full(len(points), -1, dtype=np.int64)
        known = np.flatnonzero(~missing)
        picks[known] = pair_windows(points[known], tols[known], lo, hi)
        return picks
    first = first_reaching(hi, tols, points, strict=False)
    # (a tolerance shared by all, a broadcast number, stays one: negated, it was a copy)
    negated = np.broadcast_to(-tols[:1], tols.shape) if tols.strides == (0,) else -tols
    stop = first_reaching(lo, negated, points, strict=True)
    return pair_in_order(first, stop)


def _pair_windows_walk(
    points: np.ndarray, tols: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> np.ndarray:
    """`pair_windows` step by step, for windows whose ends are out of order (no closed form then).

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
