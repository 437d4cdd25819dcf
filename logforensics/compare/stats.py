"""How far a difference between two runs can be chance.

A step of a run is one sample of the service at that load. With one run a side, the
requests of the step are the trials: a difference in successes is judged against what
chance gives two equal services (Fisher's exact test, two-sided). With repetitions the
run is the unit: the difference of the mean success rates with a 95 % Welch interval, and
a non-inferiority decision against a stated margin; a decision that dropping one run
would flip is named fragile.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

SIGNIFICANCE = 0.05  # a two-sided p below this: more than chance would give
NON_INFERIORITY_MARGIN = 0.05  # the candidate may lose this much success rate and still pass
# Student's t, 97.5th percentile, by degrees of freedom 1..30 (beyond: the normal's 1.96)
T_975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip

FISHER = "Fisher's exact test, two-sided"
WELCH = "difference of mean success rates over runs, 95 % Welch interval"


def fisher_exact(ok_a: int, n_a: int, ok_b: int, n_b: int) -> float:
    """Two-sided p of Fisher's exact test on the 2×2 table (successes, failures) × (a, b):
    the chance, with the margins fixed, of a split at most as likely as the one seen."""
    total_ok, total = ok_a + ok_b, n_a + n_b
    if n_a == 0 or n_b == 0 or total_ok in (0, total):
        return 1.0
    denom = math.comb(total, n_a)

    def prob(k: int) -> float:
        return math.comb(total_ok, k) * math.comb(total - total_ok, n_a - k) / denom

    seen = prob(ok_a)
    lo, hi = max(0, n_a - (total - total_ok)), min(n_a, total_ok)
    p = sum(q for k in range(lo, hi + 1) if (q := prob(k)) <= seen * (1 + 1e-9))
    return min(1.0, p)


def t_975(dof: float) -> float:
    k = math.floor(dof)  # fewer degrees: a wider, safer interval
    return T_975[k - 1] if 1 <= k <= len(T_975) else 1.96


@dataclass(frozen=True)
class Interval:
    delta: float  # candidate minus baseline
    low: float
    high: float


def _spread(runs: list[tuple[int, int]]) -> tuple[float, float]:
    """Mean success rate of the runs and the variance of one run's rate: the runs' own
    variance, but never below the binomial noise of one run at the side's pooled rate
    (Agresti–Coull adjusted), so three identical runs do not claim a certain rate."""
    rates = [ok / n for ok, n in runs]
    ok, n = sum(o for o, _ in runs), sum(m for _, m in runs)
    p = (ok + 2) / (n + 4)
    floor = p * (1 - p) / (n / len(runs))
    return statistics.fmean(rates), max(statistics.variance(rates), floor)


def welch_interval(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> Interval | None:
    """95 % interval of b's mean success rate minus a's, each run (successes, sent) one
    sample; None below two runs a side."""
    if len(a) < 2 or len(b) < 2:
        return None
    (ma, va), (mb, vb) = _spread(a), _spread(b)
    sa, sb = va / len(a), vb / len(b)
    dof = (sa + sb) ** 2 / (sa**2 / (len(a) - 1) + sb**2 / (len(b) - 1))
    half = t_975(dof) * math.sqrt(sa + sb)
    delta = mb - ma
    return Interval(delta, delta - half, delta + half)


def non_inferiority(interval: Interval, margin: float) -> str:
    """non-inferior: the candidate loses less than `margin` even at the interval's worst;
    inferior: it loses more even at its best; else inconclusive."""
    if interval.low > -margin:
        return "non-inferior"
    if interval.high < -margin:
        return "inferior"
    return "inconclusive"


def single_run_decision(p: float, delta: float) -> str:
    if p >= SIGNIFICANCE or delta == 0:
        return "could be chance"
    return "higher" if delta > 0 else "lower"
