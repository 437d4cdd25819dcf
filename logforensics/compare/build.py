"""Runs read into report summaries, their steps matched, the two sides measured against
each other: the Comparison every renderer shows."""

from __future__ import annotations

import datetime as dt
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from logforensics.compare import conclude, stats
from logforensics.compare.conditions import differing_conditions, not_checked
from logforensics.compare.model import (
    COMPARE_FORMAT_VERSION,
    Comparison,
    InstanceRow,
    InstanceSide,
    RunRef,
    Side,
    StepPair,
    StepSide,
    SuccessTest,
)
from logforensics.diagnose import Thresholds
from logforensics.model import Failures, Step
from logforensics.report.jsonout import NotAReport, read_report
from logforensics.report.summary import Summary


@dataclass(frozen=True)
class Run:
    """A run read: what it says, and where it came from."""

    ref: RunRef
    summary: Summary


def read_run(path: Path, analyse: Callable[[Path, bool], Summary]) -> Run:
    """A run given as a JSON report this tool wrote, a `--tables` dataset or a folder/file of
    evidence (`analyse(path, is_dataset)` reads the last two as `analyze` would)."""
    try:  # a JSON report this tool wrote; any other JSON file is evidence, analysed
        is_json = path.is_file() and path.suffix == ".json"
        summary, how = (read_report(path), "report") if is_json else (None, "")
    except NotAReport:
        summary = None
    if summary is None:
        dataset = path.is_dir() and (path / "dataset.json").is_file()
        summary, how = analyse(path, dataset), "tables" if dataset else "analysed"
    v = summary.verdict
    label = path.stem if how == "report" else path.name
    ref = RunRef(label, str(path), how, summary.format_version, v.bottleneck, v.confidence,
                 v.subject, v.summary)  # fmt: skip
    return Run(ref, summary)


def _side(name: str, runs: list[Run]) -> Side:
    verdicts = {r.ref.bottleneck for r in runs}
    instances = sorted({i.name for r in runs for i in r.summary.instances})
    return Side(name, [r.ref for r in runs], verdicts.pop() if len(verdicts) == 1 else "mixed",
                instances)  # fmt: skip


def _distinct(values: list) -> bool:
    return None not in values and len(set(values)) == len(values)


def match_key(runs: list[Run]) -> str:
    """How the runs' measured steps are matched: by what the tester varied. By rate where
    every step of every run names a rate the tester fixed, distinct within its run (a
    rate-driven tester's "concurrency" may be only the requests a step sent); else by
    concurrency where those are distinct within each run; else by position."""
    steps = [r.summary.measured for r in runs]
    if all(_distinct([s.rate for s in run]) for run in steps):
        return "rate"
    if all(_distinct([s.concurrency for s in run]) for run in steps):
        return "concurrency"
    return "order"


def _keyed(run: Run, by: str) -> dict[float, Step]:
    steps = run.summary.measured
    if by == "order":
        return {k: s for k, s in enumerate(steps, start=1)}
    return {getattr(s, by): s for s in steps}


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _add(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    return {k: a.get(k, 0) + b.get(k, 0) for k in dict.fromkeys([*a, *b])}


def _failures(steps: list[Step], versions: list[int]) -> Failures | None:
    """Where the step's failures died, summed over runs; None where a run's report (format 9)
    does not say and the step had failures."""
    if any(v < 10 and s.failed for s, v in zip(steps, versions, strict=True)):
        return None
    out = Failures()
    for s in steps:
        f = s.failures
        out = Failures(
            out.proxy + f.proxy,
            out.before_instance + f.before_instance,
            out.instance + f.instance,
            out.unknown + f.unknown,
            _add(out.at_instance, f.at_instance),
            _add(out.outcomes, f.outcomes),
        )
    return out


def _step_side(steps: list[Step], versions: list[int]) -> StepSide:
    per_instance: dict[str, int] = {}
    for s in steps:
        per_instance = _add(per_instance, s.per_instance)
    return StepSide(
        runs=len(steps),
        concurrency=steps[0].concurrency,
        sent=sum(s.sent for s in steps),
        succeeded=sum(s.succeeded for s in steps),
        failed=sum(s.failed for s in steps),
        unreached=sum(s.unreached for s in steps),
        success_rates=[s.succeeded / s.sent for s in steps if s.sent],
        p50_s=_median([s.latency_s.p50 for s in steps]),
        p95_s=_median([s.latency_s.p95 for s in steps]),
        output_tokens_per_s=_median([s.output_tokens_per_s for s in steps]),
        per_instance=per_instance,
        balance=" / ".join(dict.fromkeys(s.balance.verdict for s in steps)),
        failures=_failures(steps, versions),
    )


def _success_test(
    base: list[tuple[str, Step]], cand: list[tuple[str, Step]], margin: float
) -> SuccessTest | None:
    a = [(s.succeeded, s.sent) for _, s in base if s.sent]
    b = [(s.succeeded, s.sent) for _, s in cand if s.sent]
    if not a or not b:
        return None
    ok_a, n_a = sum(ok for ok, _ in a), sum(n for _, n in a)
    ok_b, n_b = sum(ok for ok, _ in b), sum(n for _, n in b)
    interval = stats.welch_interval(a, b)
    if interval is None:  # a single run on a side: its requests are the trials
        p = stats.fisher_exact(ok_a, n_a, ok_b, n_b)
        delta = ok_b / n_b - ok_a / n_a
        return SuccessTest(stats.FISHER, ok_a / n_a, ok_b / n_b, delta, p, None, None,
                           stats.single_run_decision(p, delta))  # fmt: skip
    decision = stats.non_inferiority(interval, margin)
    labels = {"baseline": [label for label, s in base if s.sent],
              "candidate": [label for label, s in cand if s.sent]}  # fmt: skip
    fragile = []
    for side, runs in (("baseline", a), ("candidate", b)):
        if len(runs) < 3:
            continue
        for k, label in enumerate(labels[side]):
            rest = runs[:k] + runs[k + 1 :]
            again = (
                stats.welch_interval(rest, b)
                if side == "baseline"
                else stats.welch_interval(a, rest)
            )
            if stats.non_inferiority(again, margin) != decision:
                fragile.append(f"{side} {label}")
    mean = statistics.fmean
    return SuccessTest(stats.WELCH, mean(ok / n for ok, n in a), mean(ok / n for ok, n in b), interval.delta, None,
                       [interval.low, interval.high], margin, decision, fragile)  # fmt: skip


def _ratio(a: float | None, b: float | None) -> float | None:
    return b / a if a and b is not None else None


def _steps(base: list[Run], cand: list[Run], by: str, margin: float) -> list[StepPair]:
    kb = [(r, _keyed(r, by)) for r in base]
    kc = [(r, _keyed(r, by)) for r in cand]
    keys = sorted({k for _, m in kb + kc for k in m})
    pairs = []
    for key in keys:
        b = [(r.ref.label, m[key]) for r, m in kb if key in m]
        c = [(r.ref.label, m[key]) for r, m in kc if key in m]
        sb = (
            _step_side([s for _, s in b], [r.ref.format_version for r, m in kb if key in m])
            if b
            else None
        )
        sc = (
            _step_side([s for _, s in c], [r.ref.format_version for r, m in kc if key in m])
            if c
            else None
        )
        pairs.append(
            StepPair(
                key,
                sb,
                sc,
                _success_test(b, c, margin) if b and c else None,
                _ratio(sb.p95_s, sc.p95_s) if sb and sc else None,
                _ratio(sb.output_tokens_per_s, sc.output_tokens_per_s) if sb and sc else None,
            )
        )
    return pairs


def _instance_side(runs: list[Run], name: str) -> InstanceSide | None:
    rows = [i for r in runs for i in r.summary.instances if i.name == name]
    if not rows:
        return None
    requests = sum(i.requests for i in rows)
    served = sum(i.requests for r in runs for i in r.summary.instances)

    def peak(values):
        known = [v for v in values if v is not None]
        return max(known) if known else None

    return InstanceSide(
        requests,
        requests / served if served else None,
        peak([i.peak_running for i in rows]),
        peak([i.peak_waiting for i in rows]),
        peak([i.peak_kv_pct for i in rows]),
    )


def bottleneck_change(base: str, cand: str) -> str:
    if "mixed" in (base, cand):
        return "mixed"  # a side's runs disagree: no single change to name
    if base == cand:
        return "none" if base == "none" else "unchanged"
    if cand == "none":
        return "removed"
    if base == "none":
        return "appeared"
    return "moved"


def build(
    baseline: list[Run],
    candidate: list[Run],
    change: str | None = None,
    margin: float = stats.NON_INFERIORITY_MARGIN,
    thresholds: Thresholds | None = None,
) -> Comparison:
    """`thresholds` as the runs were analysed with: the conclusion names a KV cache as full
    at their `kv_full_pct`."""
    by = match_key(baseline + candidate)
    base, cand = _side("baseline", baseline), _side("candidate", candidate)
    names = sorted(set(base.instances) | set(cand.instances))
    comparison = Comparison(
        format_version=COMPARE_FORMAT_VERSION,
        generated_at=dt.datetime.now(dt.timezone.utc).replace(microsecond=0),
        change=change,
        baseline=base,
        candidate=cand,
        bottleneck_change=bottleneck_change(base.bottleneck, cand.bottleneck),
        steps_by=by,
        steps=_steps(baseline, candidate, by, margin),
        instances=[
            InstanceRow(n, _instance_side(baseline, n), _instance_side(candidate, n)) for n in names
        ],
        conditions=differing_conditions(
            [r.summary for r in baseline], [r.summary for r in candidate]
        ),
        not_checked=not_checked([r.summary for r in baseline + candidate]),
        conclusion=[],
    )
    return conclude.with_conclusion(comparison, thresholds or Thresholds())


class ManifestError(ValueError):
    """A manifest that cannot be read: the message names the file and what is wrong."""


def read_manifest(path: Path) -> tuple[list[Path], list[Path], str | None]:
    """The runs a manifest names (YAML or JSON: `baseline` and `candidate`, each a path or a
    list of them, relative to the manifest; `change` optional), and the change."""
    import yaml  # JSON is YAML: one reader for both

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ManifestError(f"{path}: not a readable manifest ({exc})") from None
    if not isinstance(data, dict):
        raise ManifestError(f"{path}: a manifest is a mapping with baseline and candidate")
    sides = []
    for side in ("baseline", "candidate"):
        value = data.get(side)
        names = [value] if isinstance(value, str) else value
        if not names or not all(isinstance(n, str) for n in names):
            raise ManifestError(f"{path}: `{side}` must name a run or a list of runs")
        runs = [path.parent / n for n in names]
        missing = [str(r) for r in runs if not r.exists()]
        if missing:
            raise ManifestError(
                f"{path}: `{side}` names runs that do not exist: {', '.join(missing)}"
            )
        sides.append(runs)
    change = data.get("change")
    return sides[0], sides[1], change if isinstance(change, str) else None
