"""Where `logforensics analyze` spends its time: cProfile over the CLI on one bundle.

    .venv/bin/python bench/profile.py [--size 1M] [--scratch DIR] [--ref REV] [--no-html]

Runs ``python -m cProfile -o PROF -m logforensics.cli analyze BUNDLE -o HTML
--json JSON`` (the bundle comes from bench/generate.py, reused when current),
then prints the stages (cumulative time of the functions that implement them)
and the top functions by cumulative and by own time. cProfile's clock is wall
time, so polars' multi-threaded work is charged to the Python call that waits
for it; the per-line Python loops are slowed by the profiler itself (roughly 1.5-2×).
"""

from __future__ import annotations

import argparse
import io
import os
import pstats
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import generate  # noqa: E402
import run  # noqa: E402

# (stage, file suffix, function name); nested entries are indented in the output
STAGES = [
    ("whole run", "cli.py", "analyze_command", 0),
    ("analysis (no rendering)", "analysis.py", "analyze", 1),
    ("infer_year (a full load at 1c40285; file heads later)", "analysis.py", "infer_year", 2),
    ("ingest: inputs.load (all calls)", "inputs.py", "load", 2),
    ("read: SourceFile.lines (split text)", "base.py", "lines", 3),
    ("read: SourceFile.text (decode)", "base.py", "text", 4),
    ("read: SourceFile.raw (read bytes)", "base.py", "raw", 5),
    ("server/proxy logs: ServerLog/ProxyLog.parse", "serverlog.py", "parse", 3),
    ("prefix split: split_prefixes", "serverlog.py", "split_prefixes", 4),
    ("line formats: *.extract", "ingest/", "extract", 4),
    ("client: ClientJsonl.parse", "generic.py", "parse", 3),
    ("client: normalise_generic", "generic.py", "normalise_generic", 4),
    ("correlate: estimate_offset", "clock.py", "estimate_offset", 2),
    ("correlate: paired_shift", "clock.py", "paired_shift", 3),
    ("correlate: align_instances", "clock.py", "align_instances", 2),
    ("correlate: attribute", "attribute.py", "attribute", 2),
    ("correlate: match_by_time", "attribute.py", "match_by_time", 3),
    ("proxy: map_upstreams", "proxy.py", "map_upstreams", 2),
    ("proxy: echoed", "proxy.py", "echoed", 3),
    ("proxy: attribute", "proxy.py", "attribute", 2),
    ("steps: summarise", "steps.py", "summarise", 2),
    ("diagnose", "diagnose.py", "diagnose", 2),
    ("report: build_report", "data.py", "build_report", 1),
    ("report: build_ledger", "ledger.py", "build_ledger", 1),
    ("report: read_cited_lines", "lines.py", "read_cited_lines", 1),
    ("report: chart_series", "series.py", "chart_series", 1),
    ("report: render_html", "html.py", "render_html", 1),
    ("charts: timeline", "charts.py", "timeline", 2),
    ("charts: engine_state", "charts.py", "engine_state", 2),
    ("charts: capacity", "charts.py", "capacity", 2),
    ("charts: balance", "charts.py", "balance", 2),
    ("charts: PNG encoding (_data_uri)", "charts.py", "_data_uri", 2),
    ("report: render_json", "jsonout.py", "render_json", 1),
    ("report: render_markdown", "markdown.py", "render_markdown", 1),
]


def stage_rows(stats: pstats.Stats) -> list[tuple[str, int, int, float]]:
    """(label, depth, calls, cumulative seconds) per stage; functions of one name summed."""
    rows = []
    for label, suffix, func, depth in STAGES:
        calls, cum = 0, 0.0
        for (path, _line, name), (_cc, nc, _tt, ct, _callers) in stats.stats.items():
            if name == func and path.endswith(os.sep + suffix):
                calls += nc
                cum += ct
        if calls:
            rows.append((label, depth, calls, cum))
    return rows


def top(prof: Path, key: str, n: int) -> str:
    buf = io.StringIO()
    pstats.Stats(str(prof), stream=buf).strip_dirs().sort_stats(key).print_stats(n)
    text = buf.getvalue()
    return text[text.index("   ncalls") :] if "   ncalls" in text else text


def main() -> int:
    ap = argparse.ArgumentParser(description="cProfile logforensics analyze on a bench bundle.")
    ap.add_argument("--size", default="1M")
    ap.add_argument("--scratch", type=Path, default=generate.DEFAULT_SCRATCH)
    ap.add_argument("--seed", type=int, default=generate.DEFAULT_SEED)
    ap.add_argument("--ref", help="profile logforensics as committed at this revision")
    ap.add_argument("--no-html", action="store_true", help="JSON only (no charts)")
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args()
    target, kind = generate.parse_spec(args.size)
    bundle, truth, _ = generate.ensure(target, args.scratch.resolve(), args.seed, kind)
    out = bundle.parent / "profile"
    out.mkdir(exist_ok=True)
    env = dict(os.environ)
    if args.ref:
        env["PYTHONPATH"] = str(run.export_ref(args.ref, args.scratch.resolve()))
    prof = out / ("analyze-json.prof" if args.no_html else "analyze-html.prof")
    cmd = [str(run.PYTHON), "-m", "cProfile", "-o", str(prof), "-m", "logforensics.cli"]
    cmd += ["analyze", str(bundle), "--json", str(out / "analysis.json")]
    if not args.no_html:
        cmd += ["-o", str(out / "report.html")]
    print("$", " ".join(cmd), flush=True)
    start = time.perf_counter()
    # not from the repository: `-m` puts the working folder first on sys.path, which
    # would shadow --ref's export with the working tree
    done = subprocess.run(cmd, env=env, cwd=out)
    import_check = subprocess.run(
        [str(run.PYTHON), "-c", "import logforensics; print(logforensics.__file__)"],
        env=env,
        cwd=out,
        capture_output=True,
        text=True,
    )
    print(f"profiled logforensics from {import_check.stdout.strip()}")
    wall = time.perf_counter() - start
    print(f"exit {done.returncode} after {wall:.1f} s (under the profiler)")
    stats = pstats.Stats(str(prof))
    total = stats.total_tt
    print(f"\n{truth['lines']:,} lines; profile total {total:.1f} s\n")
    print(f"{'stage':<58} {'calls':>7} {'cum s':>8} {'share':>6}")
    for label, depth, calls, cum in stage_rows(stats):
        print(f"{'  ' * depth + label:<58} {calls:>7} {cum:>8.2f} {cum / total:>6.1%}")
    print(f"\nTop {args.top} by cumulative time:\n")
    print(top(prof, "cumulative", args.top))
    print(f"Top {args.top} by own time:\n")
    print(top(prof, "tottime", args.top))
    print(f"profile: {prof}")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
