"""How evenly the balancer spread the load, and whether that can be told from the counts."""

from __future__ import annotations

import math

from logforensics.model import Balance, OverallBalance, Step

SKEW_P_VALUE = 0.05
SKEW_RATIO = 1.5  # max/min share ratio that counts as uneven


def balance(per_instance: dict[str, int]) -> Balance:
    """How evenly a step's requests were spread, and whether that can be told."""
    counts = list(per_instance.values())
    total = sum(counts)
    if len(counts) < 2 or total == 0:
        return Balance({}, None, None, "n/a")
    shares = {k: v / total for k, v in per_instance.items()}
    lo, hi = min(counts), max(counts)
    p = chi_square_even(counts)
    ratio = (hi / lo) if lo else None
    uneven = lo == 0 or (ratio is not None and ratio >= SKEW_RATIO)
    if uneven and p is not None and p < SKEW_P_VALUE:
        verdict = "skewed"
    elif uneven:
        verdict = "uneven, sample too small to prove skew"
    else:
        verdict = "even"
    return Balance(shares, ratio, p, verdict)


def overall_balance(step_runs: list[Step], instances: list[str]) -> OverallBalance:
    """The balancer's split over all measured steps (`routed`), with the counts behind it."""
    totals = {
        name: sum(r.routed.get(name, 0) for r in step_runs if not r.warmup) for name in instances
    }
    b = balance(totals)
    return OverallBalance(totals, b.shares, b.max_min_ratio, b.p_even, b.verdict)


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
