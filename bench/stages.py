"""Wall time and memory high-water mark per stage of `analyze`, without a profiler.

    .venv/bin/python bench/stages.py [--size 5M] [--scratch DIR] [--ref REV] [--html]
                                     [--tables DATASET] [--also MODULE:FUNCTION,...]

Wraps the functions that implement each stage (ingest, prefix split, line
formats, client parsing, correlation, proxy attribution, runs, diagnosis,
rendering, charts) with a timer that also reads this process's VmRSS/VmHWM,
then runs the same work as `logforensics analyze BUNDLE --json OUT [-o HTML]`
in-process. A stage's "HWM +MiB" is how much it raised the process's peak RSS:
the stage that owns the 20M run's peak is the one to fix for memory. Stages
that do not exist at the measured revision are skipped.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import os
import subprocess
import sys
import time
from functools import cached_property
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
# first: importing logforensics sets jemalloc's options, which polars reads when it loads
# (generate imports polars); under --ref, the measured revision's own options
import logforensics  # noqa: E402, I001
import generate  # noqa: E402

SPECS = [
    "logforensics.analysis:analyze",
    "logforensics.analysis:infer_year",
    "logforensics.analysis:read_tables",
    "logforensics.tables:read_datasets",
    "logforensics.ingest.inputs:combine",
    "logforensics.analysis:fit_clocks",
    "logforensics.correlate.attribute:attribute_on_both_clocks",
    "logforensics.ingest.inputs:load",
    "logforensics.ingest.inputs:read_one",
    "logforensics.ingest:detect",
    "logforensics.ingest.base:SourceFile.raw",
    "logforensics.ingest.base:SourceFile.text",
    "logforensics.ingest.base:SourceFile.lines",
    "logforensics.ingest.serverlog:ServerLog.parse",
    "logforensics.ingest.serverlog:ProxyLog.parse",
    "logforensics.ingest.serverlog:split_prefixes",
    "logforensics.ingest.testers.generic:ClientJsonl.parse",
    "logforensics.ingest.testers.generic:normalise_generic",
    "logforensics.ingest.evidence:*",
    "logforensics.correlate.steps:assign_steps",
    "logforensics.held:Held.take",
    "logforensics.held:Held.restore",
    "logforensics.correlate.clock:estimate_offset",
    "logforensics.correlate.proxy:fit_clock",
    "logforensics.correlate.clock:align_instances",
    "logforensics.correlate.attribute:attribute",
    "logforensics.correlate.attribute:match_by_time",
    "logforensics.correlate.proxy:map_upstreams",
    "logforensics.correlate.proxy:attribute",
    "logforensics.correlate.reach:decide_reach",
    "logforensics.correlate.steps:summarise",
    "logforensics.diagnose:diagnose",
    "logforensics.analysis:_findings",
    "logforensics.report.data:build_report",
    "logforensics.report.ledger:build_ledger",
    "logforensics.report.lines:read_cited_lines",
    "logforensics.report.series:chart_series",
    "logforensics.report.jsonout:render_json",
    "logforensics.report.html:render_html",
    "logforensics.report.charts:*",
]


def _status_kib() -> tuple[int, int]:
    rss = hwm = 0
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
            elif line.startswith("VmHWM:"):
                hwm = int(line.split()[1])
    return rss, hwm


class Recorder:
    def __init__(self) -> None:
        self.order: list[str] = []
        self.stats: dict[str, dict] = {}
        self.depth = 0

    def wrap(self, name: str, func):
        @functools.wraps(func)
        def timed(*args, **kwargs):
            rec = self.stats.get(name)
            if rec is None:
                rec = self.stats[name] = {
                    "calls": 0,
                    "wall": 0.0,
                    "hwm_rise": 0,
                    "depth": self.depth,
                    "peak_rss": 0,
                }
                self.order.append(name)
            _, hwm0 = _status_kib()
            self.depth += 1
            t0 = time.perf_counter()
            try:
                return func(*args, **kwargs)
            finally:
                rec["wall"] += time.perf_counter() - t0
                self.depth -= 1
                rss1, hwm1 = _status_kib()
                rec["calls"] += 1
                rec["hwm_rise"] += hwm1 - hwm0
                rec["peak_rss"] = max(rec["peak_rss"], rss1)

        return timed


def install(rec: Recorder, also: list[str]) -> list[str]:
    """Replace each spec'd function (SPECS, then `also`) everywhere logforensics refers to it."""
    missing = []
    for spec in [*SPECS, *also]:
        mod_name, qual = spec.split(":")
        try:
            mod = importlib.import_module(mod_name)
        except ImportError:
            missing.append(spec)
            continue
        if qual == "*":
            names = [
                n
                for n, v in vars(mod).items()
                if callable(v)
                and getattr(v, "__module__", None) == mod_name
                and not isinstance(v, type)
            ]
            targets = [(mod, n) for n in names]
        elif "." in qual:
            cls_name, attr = qual.split(".")
            cls = getattr(mod, cls_name, None)
            if cls is None or attr not in vars(cls):
                missing.append(spec)
                continue
            raw = vars(cls)[attr]
            label = f"{mod_name.removeprefix('logforensics.')}:{qual}"
            if isinstance(raw, cached_property):
                prop = cached_property(rec.wrap(label, raw.func))
                prop.__set_name__(cls, attr)
                setattr(cls, attr, prop)
            elif isinstance(raw, classmethod | staticmethod):
                setattr(cls, attr, type(raw)(rec.wrap(label, raw.__func__)))
            else:
                setattr(cls, attr, rec.wrap(label, raw))
            continue
        else:
            if not hasattr(mod, qual):
                missing.append(spec)
                continue
            targets = [(mod, qual)]
        for owner, attr in targets:
            original = getattr(owner, attr)
            label = f"{mod_name.removeprefix('logforensics.')}:{attr}"
            wrapped = rec.wrap(label, original)
            for other in list(sys.modules.values()):
                if getattr(other, "__name__", "").startswith("logforensics"):
                    for k, v in list(vars(other).items()):
                        if v is original:
                            setattr(other, k, wrapped)
    return missing


def worker(args) -> int:
    rec = Recorder()
    # import everything that registers formats before wrapping
    importlib.import_module("logforensics.cli")
    from logforensics.report import charts  # noqa: F401

    missing = install(rec, [s for s in args.also.split(",") if s])
    from logforensics import analysis as analysis_mod
    from logforensics.report import build_report, render_html, render_json

    t0 = time.perf_counter()
    if args.tables:  # the analysis after the parse: a dataset `ingest --tables` wrote
        out = args.tables.parent / "stages"
        a = analysis_mod.analyze([], analysis_mod.Options(tables=[args.tables]))
        measured = f"dataset {args.tables}"
    else:
        target, kind = generate.parse_spec(args.size)
        bundle, truth, _ = generate.ensure(target, args.scratch, args.seed, kind)
        out = bundle.parent / "stages"
        a = analysis_mod.analyze([bundle], analysis_mod.Options())
        measured = f"{truth['lines']:,} lines ({truth['bytes'] / 2**20:,.0f} MiB)"
    out.mkdir(exist_ok=True)
    report = build_report(a)
    (out / "analysis.json").write_text(render_json(report), encoding="utf-8")
    if args.html:
        (out / "report.html").write_text(render_html(report), encoding="utf-8")
    wall = time.perf_counter() - t0
    _, hwm = _status_kib()
    print(f"logforensics from {Path(logforensics.__file__).parent}")
    print(f"{measured}: {wall:.1f} s, peak RSS {hwm / 1024:,.0f} MiB\n")
    print(f"{'stage':<48} {'calls':>6} {'wall s':>8} {'share':>6} {'HWM +MiB':>9} {'RSS MiB':>8}")
    for name in rec.order:
        r = rec.stats[name]
        label = "  " * r["depth"] + name
        print(
            f"{label:<48} {r['calls']:>6} {r['wall']:>8.2f} {r['wall'] / wall:>6.1%} "
            f"{r['hwm_rise'] / 1024:>9,.0f} {r['peak_rss'] / 1024:>8,.0f}"
        )
    if missing:
        print("\nnot at this revision: " + ", ".join(missing))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description="Per-stage wall time and peak memory of analyze.")
    ap.add_argument("--size", default="5M")
    ap.add_argument("--scratch", type=Path, default=generate.DEFAULT_SCRATCH)
    ap.add_argument("--seed", type=int, default=generate.DEFAULT_SEED)
    ap.add_argument("--ref", help="measure logforensics as committed at this revision")
    ap.add_argument("--html", action="store_true", help="render the HTML report too")
    ap.add_argument(
        "--tables",
        type=Path,
        help="analyse this dataset (`logforensics ingest BUNDLE --tables DIR`) instead of "
        "the bundle's files: the analysis after the parse, by stage",
    )
    ap.add_argument(
        "--also",
        default="",
        help="more functions to time, comma-separated like SPECS (module:function, "
        "module:Class.method)",
    )
    args = ap.parse_args()
    if args.tables:
        args.tables = args.tables.resolve()
    args.scratch = args.scratch.resolve()
    if os.environ.get("LF_BENCH_WORKER") == "1":
        return worker(args)
    import run

    env = {**os.environ, "LF_BENCH_WORKER": "1"}
    if args.ref:
        env["PYTHONPATH"] = str(run.export_ref(args.ref, args.scratch))
    # from the scratch folder, so the repository's working tree cannot shadow --ref
    return subprocess.run(
        [str(run.PYTHON), str(Path(__file__).resolve()), *sys.argv[1:]], env=env, cwd=args.scratch
    ).returncode


if __name__ == "__main__":
    sys.exit(main())
