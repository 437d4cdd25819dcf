"""The comparison's conclusion, built from its records by rules (never a template per case).

Each rule reads the Comparison and gives a sentence or nothing; `RULES` orders them. The
first says what the change did to the bottleneck and to capacity at the heaviest load both
runs ran, with the test that judged it and where the failures died on each side; then the
instances one side has alone, latency (reported, not judged), and conditions that differ.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from logforensics.compare import stats
from logforensics.compare.model import Comparison, StepPair
from logforensics.diagnose import Thresholds, cause_words
from logforensics.model import Failures

NOUNS = {"instance_failure": "a failing instance"}


def noun(bottleneck: str) -> str:
    return NOUNS.get(bottleneck) or cause_words(bottleneck)


def _subject(c: Comparison) -> str:
    if not c.change:
        return "The change"
    return c.change[0].upper() + c.change[1:]


def focus(c: Comparison) -> StepPair | None:
    """The heaviest load both sides ran where either failed, else the heaviest both ran."""
    both = [p for p in c.steps if p.baseline and p.candidate]
    failing = [p for p in both if p.baseline.failed or p.candidate.failed]
    return (failing or both or [None])[-1]


def _better(p: StepPair) -> bool:
    t = p.success
    return bool(t) and (t.decision == "higher" or (t.interval is not None and t.interval[0] > 0))


def _worse(p: StepPair) -> bool:
    t = p.success
    return bool(t) and (t.decision == "lower" or (t.interval is not None and t.interval[1] < 0))


def _served(p: StepPair) -> str:
    a, b = p.baseline, p.candidate
    if (a.succeeded, a.sent) == (b.succeeded, b.sent):
        both = "both runs" if a.runs == b.runs == 1 else "both sides"
        return f"{both} served {a.succeeded} of {a.sent}"
    return (
        f"the baseline served {a.succeeded} of {a.sent} and the candidate {b.succeeded} of {b.sent}"
    )


def _judged(p: StepPair) -> str:
    t = p.success
    if t is None or (p.baseline.succeeded, p.baseline.sent) == (
        p.candidate.succeeded,
        p.candidate.sent,
    ):
        return ""
    if t.test == stats.FISHER:
        chance = (
            "a difference chance alone can give"
            if t.decision == "could be chance"
            else "more than chance gives"
        )
        return f" ({chance}: {t.test}, p = {t.p_value:.2f})"
    lo, hi = t.interval
    every = len(t.fragile) == p.baseline.runs + p.candidate.runs
    fragile = (
        "; dropping any one run would change that"
        if t.fragile and every
        else f"; dropping {listed(t.fragile)} would change that"
        if t.fragile
        else ""
    )
    return (
        f" (the candidate's success rate {t.delta * 100:+.1f} points, 95 % interval "
        f"{lo * 100:+.1f} to {hi * 100:+.1f}: {t.decision} at a "
        f"{t.margin * 100:.0f}-point margin{fragile})"
    )


def died(f: Failures, peaks: dict[str, float | None], t: Thresholds) -> list[tuple[int, str, str]]:
    """Where a side's failures died: (count, where, the count in words), e.g. (5, "before any
    instance", "5 never reached an instance"), (2, "at instance-1", "2 client timeouts at
    instance-1 (KV cache peak 100 %)")."""
    out = []
    if f.proxy:
        out.append((f.proxy, "at the proxy", f"{f.proxy} refused at the proxy"))
    if f.before_instance:
        n = f.before_instance
        out.append((n, "before any instance", f"{n} never reached an instance"))
    only = next(iter(f.outcomes)) if len(f.outcomes) == 1 else None
    kind = {"timeout": " client timeouts"}.get(only, "")
    for name, n in f.at_instance.items():
        kv = peaks.get(name)
        full = f" (KV cache peak {kv:.0f} %)" if kv is not None and kv >= t.kv_full_pct else ""
        if n:
            out.append((n, f"at {name}", f"{n}{kind} at {name}{full}"))
            kind = ""  # named once, before the first instance
    rest = f.instance - sum(f.at_instance.values())
    if rest:
        out.append((rest, "at an instance", f"{rest} at an instance"))
    if f.unknown:
        out.append((f.unknown, "where no witness says", f"{f.unknown} where no witness says"))
    return out


def listed(words: list[str]) -> str:
    """ "a", "a and b", "a, b and c"."""
    return " and ".join(filter(None, [", ".join(words[:-1]), words[-1] if words else ""]))


def _peaks(c: Comparison, side: str) -> dict[str, float | None]:
    return {row.name: getattr(row, side).peak_kv_pct for row in c.instances if getattr(row, side)}


def _where(c: Comparison, p: StepPair, t: Thresholds) -> str:
    a, b = p.baseline, p.candidate
    if (a.failed and a.failures is None) or (b.failed and b.failures is None):
        return "; where the failures died is not in a report of format 9"
    da = died(a.failures, _peaks(c, "baseline"), t) if a.failed else []
    db = died(b.failures, _peaks(c, "candidate"), t) if b.failed else []
    words_a, words_b = listed([w for *_, w in da]), listed([w for *_, w in db])
    if da and [x[:2] for x in da] == [x[:2] for x in db]:
        if len(da) == 1:
            return f", and the {da[0][0]} failures died {da[0][1]} in both"
        return f", and the failures died alike in both ({words_a})"
    if len(da) == len(db) == 1 and da[0][1] == db[0][1]:
        return f", and the failures died {da[0][1]} in both ({da[0][0]}, then {db[0][0]})"
    if da and db:
        return f", and the failures went from {words_a} to {words_b}"
    if da:
        return f"; the baseline's failures ({words_a}) are gone"
    if db:
        return f"; the candidate's failures: {words_b}"
    return ""


def _verdicts(c: Comparison) -> str:
    """Each run's verdict, by side: "baseline a1 the KV cache, a2 none; candidate b1 none"."""
    return "; ".join(
        f"{side.name} " + ", ".join(f"{r.label} {noun(r.bottleneck)}" for r in side.runs)
        for side in (c.baseline, c.candidate)
    )


def headline(c: Comparison, t: Thresholds) -> str | None:
    """What the change did: to the bottleneck and to capacity at the heaviest common load."""
    p = focus(c)
    s = _subject(c)
    steps = [q for q in c.steps if q.success]
    better, worse = any(map(_better, steps)), any(map(_worse, steps))
    base, cand = c.baseline.bottleneck, c.candidate.bottleneck
    if c.bottleneck_change == "mixed":
        what = f"The runs' verdicts differ ({_verdicts(c)}): no one change of bottleneck to name"
    elif c.bottleneck_change == "moved":
        what = f"{s} moved the bottleneck from {noun(base)} to {noun(cand)}"
    elif c.bottleneck_change == "removed":
        what = f"{s} removed the bottleneck ({noun(base)})"
    elif c.bottleneck_change == "appeared":
        what = f"{s} brought a bottleneck: {noun(cand)}"
    elif c.bottleneck_change == "none":
        what = "Neither run found a bottleneck"
    elif better and not worse:
        what = f"{s} raised capacity, but the bottleneck is still {noun(base)}"
    elif worse and not better:
        what = f"{s} lowered capacity, and the bottleneck is still {noun(base)}"
    elif p is not None and p.success and p.success.delta > 0 and p.success.interval:
        what = (
            f"{s} raised the success rate on average, not beyond what chance gives with "
            f"{p.baseline.runs} and {p.candidate.runs} runs, and the bottleneck is still "
            f"{noun(base)}"
        )
    elif p is not None and p.success and p.success.delta > 0:
        what = f"{s} did not measurably raise capacity, and the bottleneck is still {noun(base)}"
    elif p is not None and p.success and p.success.delta < 0:
        what = f"{s} did not measurably lower capacity, and the bottleneck is still {noun(base)}"
    else:
        what = f"{s} did not raise capacity, and the bottleneck is still {noun(base)}"
    if p is None:
        return what + "; the runs share no step to compare."
    return f"{what}: {c.load(p)} {_served(p)}{_judged(p)}{_where(c, p, t)}."


def instances_alone(c: Comparison, t: Thresholds) -> str | None:
    """An instance one side has alone: the new one's share, or that it took none."""
    out = []
    for row in c.instances:
        if row.candidate and not row.baseline:
            if row.candidate.requests == 0:
                out.append(
                    f"{row.name}, new in the candidate, took none of the load: it is not in "
                    "the balancer's pool, or the balancer treats it as standby"
                )
            else:
                share = row.candidate.share or 0
                out.append(
                    f"{row.name}, new in the candidate, took {row.candidate.requests} requests, "
                    f"{share:.0%} of those the candidate's instances served"
                )
        elif row.baseline and not row.candidate:
            out.append(f"{row.name} served in the baseline and is absent from the candidate")
    return "; ".join(out) + "." if out else None


def latency(c: Comparison, t: Thresholds) -> str | None:
    p = focus(c)
    if p is None or p.p95_ratio is None:
        return None
    return (
        f"P95 latency {c.load(p)}: {p.baseline.p95_s:.1f} s → {p.candidate.p95_s:.1f} s "
        f"(×{p.p95_ratio:.2f}), reported, not judged: latencies of one step are one sample."
    )


def conditions(c: Comparison, t: Thresholds) -> str | None:
    if not c.conditions:
        return None
    listed = "; ".join(f"{d.what}: {d.baseline} against {d.candidate}" for d in c.conditions)
    return f"The runs' conditions differ ({listed}): their numbers may not compare."


RULES: tuple[Callable[[Comparison, Thresholds], str | None], ...] = (
    conditions,
    headline,
    instances_alone,
    latency,
)


def with_conclusion(c: Comparison, t: Thresholds) -> Comparison:
    return dataclasses.replace(c, conclusion=[s for rule in RULES if (s := rule(c, t))])
