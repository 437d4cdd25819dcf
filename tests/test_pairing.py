"""Property: the vectorised order-preserving pairing gives exactly what the step-by-step
walks it replaced gave (the walks are kept here as the reference), ties, empty inputs,
unmatched points and float rounding at the tolerance's edge included."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logforensics.correlate import attribute, clock, pairing, proxy

EPOCH = 1_771_912_800.0  # epoch seconds of the bench bundles: where rounding at ±tol bites
TOLERANCES = [0.0, 0.5, 1.0, 1.000001, 2.0]


def reference_pairing(points: list[float], times: list[float], tol: float) -> list[int]:
    """The walk of `paired_shift`: earliest unused time within ±tol."""
    picks, j = [-1] * len(points), 0
    for i, p in enumerate(points):
        while j < len(times) and times[j] < p - tol:
            j += 1
        if j < len(times) and times[j] <= p + tol:
            picks[i] = j
            j += 1
    return picks


def reference_greedy(
    points: list[float], tols: list[float], lo: list[float], hi: list[float]
) -> list[int]:
    """The walk of `_greedy`: each point takes the earliest window still open."""
    picks, j = [-1] * len(points), 0
    for i, (p, tol) in enumerate(zip(points, tols, strict=True)):
        while j < len(lo) and hi[j] + tol < p:
            j += 1
        if j < len(lo) and lo[j] - tol <= p:
            picks[i] = j
            j += 1
    return picks


def reference_in_order(first: list[int], stop: list[int]) -> list[int]:
    picks, pointer = [-1] * len(first), 0
    for i, (f, s) in enumerate(zip(first, stop, strict=True)):
        pointer = max(pointer, f)
        if pointer < s:
            picks[i] = pointer
            pointer += 1
    return picks


# a coarse grid makes ties and exact ±tol distances common
ticks = st.integers(min_value=0, max_value=40)
grids = st.sampled_from([0.25, 0.5, 1.0, 0.1])
bases = st.sampled_from([0.0, EPOCH])


def times_from(raw: list[int], grid: float, base: float) -> np.ndarray:
    return np.sort(np.array([base + k * grid for k in raw], dtype=float))


@settings(max_examples=400, deadline=None)
@given(
    st.lists(ticks, max_size=60),
    st.lists(ticks, max_size=60),
    grids,
    bases,
    st.sampled_from(TOLERANCES),
)
def test_pair_within_is_the_walk(raw_points, raw_times, grid, base, tol):
    points, times = times_from(raw_points, grid, base), times_from(raw_times, grid, base)
    want = reference_pairing(points.tolist(), times.tolist(), tol)
    assert pairing.pair_within(points, times, tol).tolist() == want
    paired = [(p, times[k]) for p, k in zip(points, want, strict=True) if k >= 0]
    expected = float(np.median([p - t for p, t in paired])) if paired else 0.0
    assert clock.paired_shift(points, times, 0.0, tol) == expected


@settings(max_examples=400, deadline=None)
@given(
    st.lists(ticks, max_size=50),
    st.lists(st.tuples(ticks, st.integers(min_value=-2, max_value=12)), max_size=50),
    grids,
    bases,
    st.sampled_from(["same", "varied", "none"]),
    st.sampled_from(["end", "window", "late"]),
)
def test_greedy_is_the_walk(raw_points, raw_windows, grid, base, spread, how):
    points = times_from(raw_points, grid, base)
    rng = np.random.default_rng(len(raw_points) * 101 + len(raw_windows))
    if spread == "same":
        tols = np.full(len(points), 1.000001)
    elif spread == "varied":  # records stamped to a second next to precise ones
        tols = rng.choice([1.0, 1.001, 2.0, 1.000001, 3.7], size=len(points))
    else:
        tols = np.zeros(len(points))
    starts = [base + k * grid for k, _ in raw_windows]
    order = np.argsort(starts, kind="stable")
    lo = np.array(starts, dtype=float)[order]
    if how == "end":
        hi = lo
    elif how == "late":
        hi = lo + attribute.LATE_ARRIVAL_S
    else:  # a streamed request's window: ends out of order, some even before the start
        hi = lo + np.array([d * grid for _, d in raw_windows], dtype=float)[order]
    want = reference_greedy(points.tolist(), tols.tolist(), lo.tolist(), hi.tolist())
    assert pairing.pair_windows(points, tols, lo, hi).tolist() == want


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.floats(min_value=0.0, max_value=20.0), min_size=1, max_size=30),
    bases,
    st.lists(
        st.tuples(st.sampled_from([1.000001, 1.001, 2.0, 1.1, 3.7, 0.3]), st.integers(-2, 2)),
        min_size=1,
        max_size=30,
    ),
    st.booleans(),
    st.booleans(),
)
def test_greedy_at_the_tolerance_edge(raw_windows, base, raw_points, one_tol, at_start):
    """Points a few ulps either side of `hi + tol` (or `lo - tol`): the rounded sum decides,
    as it did in the walk, not `point - tol` (they differ where a sum crosses a power of two)."""
    ends = np.sort(base + np.array(raw_windows, dtype=float))
    tols = np.array([tol for tol, _ in raw_points])
    if one_tol:
        tols[:] = tols[0]
    edges = np.resize(ends, len(tols)) + np.where(at_start, -tols, tols)
    nudges = np.array([nudge for _, nudge in raw_points])
    order = np.argsort(edges + nudges * np.spacing(edges), kind="stable")
    points, tols = (edges + nudges * np.spacing(edges))[order], tols[order]
    want = reference_greedy(points.tolist(), tols.tolist(), ends.tolist(), ends.tolist())
    assert pairing.pair_windows(points, tols, ends, ends).tolist() == want


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 30)), max_size=80))
def test_pair_in_order_any_bounds(bounds):
    first = np.array([f for f, _ in bounds], dtype=np.int64)
    stop = np.array([s for _, s in bounds], dtype=np.int64)
    assert pairing.pair_in_order(first, stop).tolist() == reference_in_order(
        first.tolist(), stop.tolist()
    )


def test_pairing_across_many_scan_blocks():
    """Dense and sparse stretches over many blocks, at bench scale and precision."""
    rng = np.random.default_rng(7)
    for rate in (0.4, 1.0, 1.7):
        times = np.sort(EPOCH + rng.uniform(0, 600, 6000))
        points = np.sort(EPOCH + rng.uniform(0, 600, int(6000 * rate)))
        want = reference_pairing(points.tolist(), times.tolist(), 1.0)
        assert pairing.pair_within(points, times, 1.0).tolist() == want
        tols = np.full(len(points), 1.000001)
        want = reference_greedy(points.tolist(), tols.tolist(), times.tolist(), times.tolist())
        assert pairing.pair_windows(points, tols, times, times).tolist() == want


@pytest.mark.parametrize("int32_below", [pairing.INT32_BELOW, 8])
def test_positions_are_int32_into_short_arrays_and_int64_into_long(monkeypatch, int32_below):
    """Positions into arrays shorter than `INT32_BELOW` are int32, into longer ones int64
    (the limit set to 8 here): the same pairs and searches either way, over many scan
    blocks with points left unpaired."""
    monkeypatch.setattr(pairing, "INT32_BELOW", int32_below)
    want_dtype = np.int32 if int32_below > 6000 else np.int64
    rng = np.random.default_rng(5)
    times = np.sort(EPOCH + rng.uniform(0, 600, 6000))
    for rate in (0.4, 1.7):
        points = np.sort(EPOCH + rng.uniform(0, 600, int(6000 * rate)))
        tols = np.full(len(points), 0.05)
        picks = pairing.pair_windows(points, tols, times, times)
        assert picks.dtype == want_dtype
        assert (picks < 0).any()
        want = reference_greedy(points.tolist(), tols.tolist(), times.tolist(), times.tolist())
        assert picks.tolist() == want
        found = pairing.search_sorted(times, points, "right", merge_from=1)
        assert found.dtype == want_dtype
        assert found.tolist() == np.searchsorted(times, points, "right").tolist()


def test_missing_times_take_nothing_and_move_nothing():
    times = np.array([10.0, 11.0, 12.0])
    points = np.array([np.nan, 10.5, np.nan, 11.2])
    assert pairing.pair_within(points, times, 1.0).tolist() == [-1, 0, -1, 1]
    tols = np.full(4, 1.0)
    assert pairing.pair_windows(points, tols, times, times).tolist() == [-1, 0, -1, 1]


def test_empty_inputs():
    empty = np.array([])
    assert pairing.pair_within(empty, np.array([1.0]), 1.0).tolist() == []
    assert pairing.pair_within(np.array([1.0]), empty, 1.0).tolist() == [-1]
    assert pairing.pair_windows(np.array([1.0]), np.array([1.0]), empty, empty).tolist() == [-1]
    assert clock.paired_shift(empty, np.array([1.0]), 0.0) == 0.0
    assert proxy.echoed(empty, empty, empty, 1.0) == 0


def test_first_reaching_searched_in_chunks_is_searched_at_once(monkeypatch):
    """Targets are independent: searched a chunk at a time (with shifts varying, ties and
    sums at the rounding edge) they get the indexes a plain count would give them."""
    rng = np.random.default_rng(11)
    values = np.sort(EPOCH + np.round(rng.uniform(0, 50, 3000), 1))
    targets = EPOCH + np.round(rng.uniform(-1, 52, 2000), 1)
    shift = rng.choice([0.0, 1.000001, -0.5, 2.0], len(targets))
    monkeypatch.setattr(pairing, "SEARCH_CHUNK", 64)
    for strict in (False, True):
        reached = (
            (values[None, :] + shift[:, None] > targets[:, None])
            if strict
            else (values[None, :] + shift[:, None] >= targets[:, None])
        )
        want = np.where(reached.any(axis=1), reached.argmax(axis=1), len(values))
        assert pairing.first_reaching(values, shift, targets, strict).tolist() == want.tolist()


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(0, 40), max_size=50),
    st.lists(st.one_of(st.integers(-5, 45), st.just(None)), max_size=50),
    st.sampled_from([0.0, 0.1, -0.3, 1.000001, 2.0, 1e-9]),
    st.booleans(),
    st.booleans(),
    st.booleans(),
)
def test_first_reaching_with_one_shift_is_a_plain_count(
    raw_values, raw_targets, shift, broadcast, targets_sorted, strict
):
    """One shift for all (a number broadcast, or repeated): each target gets the index a
    plain count of `values + shift` against it gives, sums at the rounding edge of epoch
    seconds, ties, targets out of order and NaN included, searched in chunks or not."""
    values = np.sort(EPOCH + np.array(raw_values, dtype=float) / 10)
    targets = np.array([np.nan if t is None else EPOCH + t / 10 for t in raw_targets])
    if targets_sorted:
        targets = np.sort(targets[~np.isnan(targets)])
    shifts = np.broadcast_to(shift, len(targets)) if broadcast else np.full(len(targets), shift)
    reached = (
        values[None, :] + shifts[:, None] > targets[:, None]
        if strict
        else values[None, :] + shifts[:, None] >= targets[:, None]
    )
    want = [int(row.argmax()) if row.any() else len(values) for row in reached]
    for chunk in (pairing.SEARCH_CHUNK, 7):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(pairing, "SEARCH_CHUNK", chunk)
            found = pairing.first_reaching(values, shifts, targets, strict)
        assert found.tolist() == want


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(-3, 12), max_size=60),
    st.lists(st.one_of(st.integers(-5, 15), st.just(None)), max_size=60),
    st.booleans(),
)
def test_search_sorted_is_numpys_search(raw_values, raw_keys, keys_sorted):
    """Merged (sorted keys, ties among the values and the keys) or searched (keys out of
    order, NaN), every key gets numpy's index on either side."""
    values = np.sort(np.array(raw_values, dtype=float) / 2)
    if raw_values and raw_values[0] == 12:  # (NaN last, as numpy sorts it: the merge agrees)
        values = np.append(values, np.nan)
    keys = np.array([np.nan if k is None else k / 2 for k in raw_keys], dtype=float)
    if keys_sorted:
        keys = np.sort(keys[~np.isnan(keys)])
    for side in ("left", "right"):
        want = np.searchsorted(values, keys, side=side)
        assert pairing.search_sorted(values, keys, side, merge_from=1).tolist() == want.tolist()
