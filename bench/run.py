"""`make bench`: how fast and how right `logforensics analyze` is on big bundles.

For each size (default 1M, 5M and 20M log lines):

1. generate the bundle with `bench/generate.py` (reused when one with the same
   seed and size is already in the scratch folder);
2. time `logforensics analyze BUNDLE --json OUT` in a subprocess — wall seconds,
   lines/s, MB/s, peak RSS — and check its totals and per-instance counts
   against the bundle's truth.json (PASS/FAIL);
3. time the same analysis writing the HTML report too (`-o`), for its size and
   how long headless Chromium takes to load it (`bench/render_time.py`);
4. time the dataset route (unless --no-tables): `ingest --tables` in one process,
   `analyze --tables --json` on it (its JSON must equal step 2's), and `ingest --tables
   --ray` on a local Ray cluster of this machine's CPUs when the `ray` extra is installed
   (its dataset's analysis must equal the one-process dataset's);
5. time reference commands on the same files, the same way: `wc -l`,
   `grep -c`, the seed author's `grep | cut | sort | uniq -c`, a per-line
   Python regex loop, polars' floor (`bench/floor.py`: the fields read, no
   analysis), lnav and GoAccess (installed with apt-get when missing;
   skipped with a note where that is impossible).

Prints a table per size and writes bench/RESULTS.md (everything below its
notes marker is kept, so hand-written analysis survives a re-run).

Exit status: 0 when every size PASSes, 1 when any FAILs (wrong counts, a
crash, or no report within the timeout).

    .venv/bin/python bench/run.py [--sizes 1M,5M,20M] [--scratch DIR] [--quick]
                                  [--skip-reference] [--no-html] [--no-tables] [--timeout S]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import generate  # noqa: E402
import render_time  # noqa: E402

VENV_BIN = ROOT / ".venv" / "bin"
LOGFORENSICS = VENV_BIN / "logforensics"
PYTHON = VENV_BIN / "python"
RESULTS = HERE / "RESULTS.md"
GNU_TIME = "/usr/bin/time" if os.access("/usr/bin/time", os.X_OK) else None
NOTES_MARKER = "<!-- everything below this line is kept by bench/run.py -->"
CHAT = "POST /v1/chat/completions"
GOACCESS_FORMAT = '%h %^[%d:%t %^] "%r" %s %b "%R" "%u" %^'
FLOOR = "polars floor (fields, no analysis)"  # bench/floor.py
TABLES_ANALYZE = "logforensics analyze --tables --json"
# issue #33's (the throughput targets of #17 were below polars' own floor on these machines)
TARGETS = {
    "after_parse_s": {"20M": 6.0},  # analyze --tables --json: the analysis after the parse
    "floor_share": {"20M": 1.6, "5M-short": 1.6},  # analyze --json wall / polars' floor's
    "rss_share": {"20M": 0.75, "5M-short": 0.75, "150M": 0.5},  # peak RSS / input bytes
    "scaling": 4.5,  # analyze wall 20M / 5M
    "html_bytes": 5_000_000,  # HTML report at 20M
    "html_load_ms": 2000,  # ... and its load in a browser
}


@dataclass
class Timing:
    name: str
    command: str
    lines: int
    bytes: int
    wall_s: float | None = None
    rss_kib: int | None = None
    exit_code: int | None = None
    timed_out: bool = False
    note: str = ""
    stdout: str = ""
    output: str = ""  # what the command found, in a few words

    @property
    def ok(self) -> bool:
        return self.exit_code is not None and not self.timed_out

    @property
    def lines_per_s(self) -> float | None:
        return self.lines / self.wall_s if self.wall_s else None

    @property
    def mb_per_s(self) -> float | None:
        return self.bytes / 1e6 / self.wall_s if self.wall_s else None

    def to_dict(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if k != "stdout"}
        d["stdout_tail"] = self.stdout[-2000:]
        return d


@dataclass
class SizeResult:
    label: str
    truth: dict
    reused: bool
    timings: list[Timing] = field(default_factory=list)
    check: str = "not run"  # PASS | FAIL: why
    check_detail: list[str] = field(default_factory=list)
    html_bytes: int | None = None
    html_load_ms: float | None = None  # headless Chromium, navigation start to load end
    verdict: str | None = None

    def timing(self, name: str) -> Timing | None:
        return next((t for t in self.timings if t.name == name), None)


# ------------------------------------------------------------ measuring


def measure(
    name: str,
    argv: list[str],
    lines: int,
    nbytes: int,
    out_dir: Path,
    timeout: float,
    env: dict | None = None,
    shown: str | None = None,
) -> Timing:
    """Run argv, wall-clocked, its peak RSS from wait4 (the largest process of its tree)."""
    t = Timing(name, shown or shlex.join(argv), lines, nbytes)
    out_dir.mkdir(parents=True, exist_ok=True)
    slug = "".join(c if c.isalnum() else "_" for c in name)[:40]
    out_path, err_path = out_dir / f"{slug}.stdout", out_dir / f"{slug}.stderr"
    rss_path = out_dir / f"{slug}.maxrss"
    rss_path.unlink(missing_ok=True)
    if GNU_TIME:
        # ru_maxrss survives exec: a child forked from this Python process would report
        # Python's size for a tiny command. GNU time forks from a small process instead.
        argv = [GNU_TIME, "-f", "%M", "-o", str(rss_path), *argv]
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            argv, stdout=out, stderr=err, env=env, start_new_session=True, cwd=out_dir
        )
        status, usage = None, None
        polled, next_poll = 0, start
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() >= next_poll:  # a floor for runs killed before they report
                polled = max(polled, group_hwm_kib(proc.pid))
                next_poll = time.perf_counter() + 0.5
            if time.perf_counter() - start > timeout:
                t.timed_out = True
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)  # the group we started, by its id
                _, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.02)
        t.wall_s = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
    t.exit_code = proc.returncode
    t.rss_kib = usage.ru_maxrss  # an upper bound (includes the launcher), if GNU time is absent
    with contextlib.suppress(OSError, ValueError, IndexError):
        t.rss_kib = int(rss_path.read_text().split()[-1])
    if t.timed_out:  # killed: GNU time wrote nothing; the polled high-water mark is a floor
        t.rss_kib = polled or None
    t.stdout = out_path.read_text(errors="replace")[-4000:]
    t.output = summarise_output(t.stdout, out_path)
    stderr = err_path.read_text(errors="replace")
    if t.timed_out:
        t.note = f"killed after {timeout:g} s"
    elif t.exit_code != 0:
        last = stderr.strip().splitlines()[-1:] or ["(no stderr)"]
        t.note = f"exit {t.exit_code}: {last[0][:160]}"
    return t


def group_hwm_kib(pgid: int) -> int:
    """Largest VmHWM (peak RSS) among the live processes of a process group, in KiB."""
    peak = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[2]) != pgid:
                continue
            for line in Path(entry.path, "status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak = max(peak, int(line.split()[1]))
        except (OSError, ValueError, IndexError):
            continue
    return peak


def summarise_output(stdout: str, out_path: Path) -> str:
    """A few words on what a command printed (a count, a verdict), for the table."""
    lines = [x for x in stdout.strip().splitlines() if x.strip()]
    if not lines:
        return ""
    last = lines[-1].strip()
    if last.startswith("verdict:"):
        return last.removeprefix("verdict: ")[:120]
    if last.endswith(" rows read") and last.split()[0].isdigit():  # bench/floor.py
        return f"{int(last.split()[0]):,} rows read"
    if last.endswith(" total"):  # wc -l over several files
        return f"{int(last.split()[0]):,} lines"
    if all(re.match(r"^\s*\d+ \S", x) for x in lines):  # uniq -c
        n = len(lines)
        with contextlib.suppress(OSError):
            n = out_path.read_bytes().count(b"\n")
        return f"{n:,} count lines (uniq -c)"
    if all(":" in x and x.rsplit(":", 1)[1].strip().isdigit() for x in lines):  # grep -c
        return f"{sum(int(x.rsplit(':', 1)[1]) for x in lines):,} matching lines"
    if last.isdigit() and len(lines) == 1:
        return f"{int(last):,} matching lines"
    if lines[0].startswith("count(*)"):
        return f"{int(last):,} access_log rows"
    with contextlib.suppress(OSError, ValueError):
        if out_path.stat().st_size > 4000:
            n = out_path.read_bytes().count(b"\n")
            return f"{n:,} output lines"
    return f"{len(lines):,} output lines"


def ensure_tools(skip: bool) -> tuple[dict[str, str | None], list[str]]:
    """lnav and goaccess: installed with apt-get at run time when missing."""
    notes = []
    tools = {"lnav": shutil.which("lnav"), "goaccess": shutil.which("goaccess")}
    missing = [k for k, v in tools.items() if not v]
    if skip or not missing:
        return tools, notes
    apt = shutil.which("apt-get")
    if not apt:
        notes.append(f"{', '.join(missing)}: not installed and no apt-get here; skipped")
        return tools, notes
    prefix = [] if os.geteuid() == 0 else (["sudo", "-n"] if shutil.which("sudo") else None)
    if prefix is None:
        notes.append(f"{', '.join(missing)}: not installed, not root and no sudo; skipped")
        return tools, notes
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    print(f"installing {' '.join(missing)} with apt-get …", flush=True)
    for attempt in ("install", "update+install"):
        if attempt == "update+install":
            subprocess.run([*prefix, apt, "update", "-qq"], env=env, capture_output=True)
        done = subprocess.run(
            [*prefix, apt, "install", "-y", "-qq", *missing],
            env=env,
            capture_output=True,
            text=True,
        )
        if done.returncode == 0:
            break
    tools = {"lnav": shutil.which("lnav"), "goaccess": shutil.which("goaccess")}
    for k in missing:
        if not tools[k]:
            notes.append(f"{k}: apt-get install failed; skipped")
    return tools, notes


def tool_version(path: str | None, flag: str = "-V") -> str | None:
    if not path:
        return None
    try:
        out = subprocess.run([path, flag], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (out.stdout or out.stderr).strip().splitlines()
    return text[0] if text else None


# ------------------------------------------------------------ one size


def check(result_json: Path, truth: dict) -> tuple[str, list[str], str | None]:
    """Totals and per-instance counts against the truth."""
    try:
        got = json.loads(result_json.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return "FAIL", [f"no readable JSON report: {exc}"], None
    detail = []
    for rel, want in truth.get("records", {}).items():  # a short-line bundle: per file
        have = next((f["records"] for f in got.get("inputs", []) if f["path"].endswith(rel)), None)
        if have != want:
            detail.append(f"records of {rel}: {have} ≠ {want}")
    for address, want in truth.get("upstreams", {}).items():
        fit = (got.get("proxy") or {}).get("upstreams", {}).get(address, {})
        have = {"instance": fit.get("instance"), "lines": fit.get("lines")}
        if have != want:
            detail.append(f"upstream {address}: {have} ≠ {want}")
    for key, want in truth["totals"].items():
        have = got.get("totals", {}).get(key)
        if have != want:
            detail.append(f"totals.{key}: {have} ≠ {want}")
    have_inst = {i["name"]: i["requests"] for i in got.get("instances", [])}
    for name, want in truth["instances"].items():
        if have_inst.get(name) != want:
            detail.append(f"instances.{name}: {have_inst.get(name)} ≠ {want}")
    for name in set(have_inst) - set(truth["instances"]):
        detail.append(f"instances.{name}: {have_inst[name]} (not an instance)")
    # per-step split: without request ids a request is placed by time alone, so two requests
    # that ended within milliseconds of each other near a step's edge can swap steps; each
    # count carries that bound (`per_instance_uncertain`), and a count outside it fails.
    want_steps = {r["index"]: r["per_instance"] for r in truth.get("runs", [])}
    off, cells, widest = 0, 0, 0
    for r in got.get("runs", []):
        want = want_steps.get(r["index"])
        if r.get("warmup") or want is None:
            continue
        have = r.get("per_instance", {})
        bound = r.get("per_instance_uncertain", {})
        for k, v in want.items():
            cells += 1
            off += abs(have.get(k, 0) - v) != 0
            widest = max(widest, bound.get(k, 0))
            if abs(have.get(k, 0) - v) > bound.get(k, 0):
                detail.append(
                    f"step {r['index']} {k}: {have.get(k, 0)} ≠ {v} beyond its ± {bound.get(k, 0)}"
                )
    info = (
        f"per-step splits: {off} of {cells} counts off, each within its stated ± "
        f"(widest ± {widest})"
        if off
        else None
    )
    verdict = got.get("verdict", {}).get("bottleneck")
    conf = got.get("verdict", {}).get("confidence")
    v = f"{verdict} ({conf:.2f})" if isinstance(conf, int | float) else verdict
    return ("PASS" if not detail else "FAIL"), detail + ([info] if info else []), v


def run_size(
    spec: tuple[int, str],
    args: argparse.Namespace,
    tools: dict[str, str | None],
) -> SizeResult:
    target, kind = spec
    label = generate.size_label(target, kind)
    print(f"\n== {label} ==", flush=True)
    t0 = time.perf_counter()
    bundle, truth, reused = generate.ensure(target, args.scratch, args.seed, kind)
    how = "reused" if reused else f"generated in {time.perf_counter() - t0:.1f} s"
    print(
        f"bundle {bundle}: {truth['lines']:,} lines, {truth['bytes'] / 2**20:,.0f} MiB, "
        f"{truth['totals']['sent']:,} requests ({how})",
        flush=True,
    )
    res = SizeResult(label, truth, reused)
    files = [bundle / rel for rel in sorted(truth["files"])]
    names = [str(f) for f in files]
    n_lines, n_bytes = truth["lines"], truth["bytes"]
    work = bundle.parent / "out"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir()
    # warm the page cache once, untimed, so no command pays for the first read
    for f in files:
        with open(f, "rb") as fh:
            while fh.read(1 << 24):
                pass

    def add(t: Timing) -> Timing:
        res.timings.append(t)
        rate = f"{t.lines_per_s:,.0f} lines/s" if t.lines_per_s else "-"
        state = "" if (t.ok and t.exit_code == 0) else f"  [{t.note}]"
        print(f"  {t.name:<34} {t.wall_s:8.2f} s  {rate:>18}{state}", flush=True)
        return t

    def best(*a, **kw) -> Timing:
        """A command run up to --repeat times (once past 60 s): the fastest run is kept,
        with the largest peak RSS of the runs."""
        runs = []
        for _ in range(max(1, args.repeat)):
            t = measure(*a, **kw)
            runs.append(t)
            if not (t.ok and t.exit_code == 0) or t.wall_s > 60:
                break
        fastest = min(runs, key=lambda t: t.wall_s)
        fastest.rss_kib = max(t.rss_kib or 0 for t in runs)
        return fastest

    # as the reference commands: on a shared machine one run says more of its neighbours
    # than of the program (the same 20M command took 57-81 s in one hour)
    json_out = work / "analysis.json"
    add(
        best(
            "logforensics analyze --json",
            [str(LOGFORENSICS), "analyze", str(bundle), "--json", str(json_out)],
            n_lines,
            n_bytes,
            work,
            args.timeout,
            env=args.analyze_env,
        )
    )
    res.check, res.check_detail, res.verdict = check(json_out, truth)
    t = res.timing("logforensics analyze --json")
    if t.timed_out:
        res.check, res.check_detail = "FAIL", [f"no report within {args.timeout:g} s"]
    elif t.exit_code not in (0,):
        res.check_detail.insert(0, f"analyze exited {t.exit_code}: {t.note}")
        if res.check == "PASS":
            res.check = "FAIL"
    print(f"  check: {res.check}" + "".join(f"\n    {d}" for d in res.check_detail), flush=True)
    if not args.no_html:
        html_out = work / "report.html"
        add(
            measure(
                "logforensics analyze -o html --json",
                [
                    str(LOGFORENSICS),
                    "analyze",
                    str(bundle),
                    "-o",
                    str(html_out),
                    "--json",
                    str(work / "analysis-html-run.json"),
                ],
                n_lines,
                n_bytes,
                work,
                args.timeout,
                env=args.analyze_env,
            )
        )
        if html_out.exists():
            res.html_bytes = html_out.stat().st_size
            res.html_load_ms = render_time.load_ms(html_out)
    if not args.no_tables:
        dataset_rows(res, bundle, json_out, work, args, add)
    if args.skip_reference:
        return res
    add(best("wc -l", ["wc", "-l", *names], n_lines, n_bytes, work, args.timeout))
    add(best("grep -c", ["grep", "-c", CHAT, *names], n_lines, n_bytes, work, args.timeout))
    pipeline = f"grep -h {shlex.quote(CHAT)} {shlex.join(names)} | cut -c1-16 | sort | uniq -c"
    add(
        best(
            "grep | cut | sort | uniq -c",
            ["bash", "-c", "set -o pipefail; " + pipeline],
            n_lines,
            n_bytes,
            work,
            args.timeout,
            shown=pipeline,
        )
    )
    add(
        best(
            "python per-line regex loop",
            [str(PYTHON), str(HERE / "pyloop.py"), *names],
            n_lines,
            n_bytes,
            work,
            args.timeout,
        )
    )
    add(
        best(
            FLOOR,
            [str(PYTHON), str(HERE / "floor.py"), *names],
            n_lines,
            n_bytes,
            work,
            args.timeout,
        )
    )
    if tools.get("lnav"):
        home = work / "lnav-home"  # keep lnav's config and index out of the real home
        home.mkdir(exist_ok=True)
        add(
            best(
                "lnav (SQL count over access_log)",
                [tools["lnav"], "-n", "-c", ";SELECT count(*) FROM access_log", *names],
                n_lines,
                n_bytes,
                work,
                args.timeout,
                env={**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home)},
            )
        )
    if tools.get("goaccess"):
        nginx = bundle / "proxy" / "nginx-access.log"
        meta = truth["files"]["proxy/nginx-access.log"]
        g = add(
            best(
                "goaccess (nginx log only)",
                [
                    tools["goaccess"],
                    str(nginx),
                    "--no-global-config",
                    f"--log-format={GOACCESS_FORMAT}",
                    "--date-format=%d/%b/%Y",
                    "--time-format=%T",
                    "-o",
                    str(work / "goaccess.json"),
                ],
                meta["lines"],
                meta["bytes"],
                work,
                args.timeout,
            )
        )
        with contextlib.suppress(OSError, ValueError, KeyError):
            general = json.loads((work / "goaccess.json").read_text())["general"]
            g.output = f"{general['total_requests']:,} requests parsed"
    return res


def dataset_rows(res: SizeResult, bundle: Path, direct: Path, work: Path, args, add) -> None:
    """The dataset route: `ingest --tables` in one process, the analysis after the parse
    (`analyze --tables`, checked against the truth), and `ingest --ray` on a local Ray
    cluster of this machine's CPUs (its analysis must equal the one-process dataset's)."""
    n_lines, n_bytes = res.truth["lines"], res.truth["bytes"]
    tables, via_ray = work / "tables", work / "tables-ray"
    for folder in (tables, via_ray):
        shutil.rmtree(folder, ignore_errors=True)
    lf = str(LOGFORENSICS)
    env = args.analyze_env
    add(
        measure(
            "logforensics ingest --tables",
            [lf, "ingest", str(bundle), "--tables", str(tables), "-q"],
            n_lines,
            n_bytes,
            work,
            args.timeout,
            env=env,
        )
    )
    from_tables = work / "analysis-tables.json"
    t = add(
        measure(
            TABLES_ANALYZE,
            [lf, "analyze", "--tables", str(tables), "--json", str(from_tables)],
            n_lines,
            n_bytes,
            work,
            args.timeout,
            env=env,
        )
    )
    t.output = same_analysis(from_tables, direct, "analyze on the files")
    has_ray = subprocess.run([str(PYTHON), "-c", "import ray"], capture_output=True).returncode
    if has_ray != 0:
        print("  ingest --ray: skipped (the `ray` extra is not installed)", flush=True)
        return
    ray_env = {k: v for k, v in (env or os.environ).items() if k != "RAY_ADDRESS"}
    t = add(
        measure(
            f"logforensics ingest --tables --ray ({os.cpu_count()} CPUs)",
            [lf, "ingest", str(bundle), "--tables", str(via_ray), "--ray", "-q"],
            n_lines,
            n_bytes,
            work,
            args.timeout,
            env=ray_env,
        )
    )
    from_ray = work / "analysis-ray.json"
    subprocess.run(
        [lf, "analyze", "--tables", str(via_ray), "--json", str(from_ray), "-q"],
        capture_output=True,
        env=env,
        timeout=args.timeout,
    )
    t.output = same_analysis(from_ray, from_tables, "the one-process dataset's")
    t.note = "peak RSS: the driver's process tree as wait4 sees it, not Ray's workers"


def same_analysis(got: Path, want: Path, what: str) -> str:
    """`same JSON as …` or what differs (the generation time aside)."""
    try:
        a, b = (json.loads(p.read_text(encoding="utf-8")) for p in (got, want))
    except (OSError, ValueError) as exc:
        return f"no JSON to compare: {exc}"
    a.pop("generated_at", None)
    b.pop("generated_at", None)
    if a == b:
        return f"same JSON as {what}"
    return f"JSON differs from {what} in: {', '.join(k for k in a if a.get(k) != b.get(k))}"


# ------------------------------------------------------------ reporting


def _f(x, fmt="{:,.0f}", none="–") -> str:
    return none if x is None else fmt.format(x)


def table(res: SizeResult) -> list[str]:
    grep = res.timing("grep -c")
    base = grep.lines_per_s if grep and grep.ok else None
    rows = [
        "| command | wall s | lines/s | MB/s | peak RSS MiB | × grep -c (per line) | output / note |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for t in res.timings:
        wall = _f(t.wall_s, "{:,.2f}")
        if t.timed_out:
            wall = f"> {t.wall_s:,.0f}"
        lps, mbs = t.lines_per_s, t.mb_per_s
        if t.timed_out:
            lps_s, mbs_s = f"< {lps:,.0f}", f"< {mbs:,.1f}"
        else:
            lps_s, mbs_s = _f(lps), _f(mbs, "{:,.1f}")
        ratio = _f(base / lps, "{:,.1f}×") if base and lps else "–"
        if t.timed_out and base and lps:
            ratio = f"> {base / lps:,.0f}×"
        rss = _f(t.rss_kib / 1024 if t.rss_kib else None, "{:,.0f}")
        if t.timed_out and t.rss_kib:
            rss = "≥ " + rss
        note = "; ".join(x for x in (t.output, t.note) if x)
        if t.lines != res.truth["lines"]:
            note = (
                note + "; " if note else ""
            ) + f"reads {t.lines:,} lines ({t.bytes / 2**20:,.0f} MiB)"
        name = t.name.replace("|", "\\|")
        rows.append(f"| `{name}` | {wall} | {lps_s} | {mbs_s} | {rss} | {ratio} | {note} |")
    return rows


def targets(results: dict[str, SizeResult]) -> list[str]:
    def analyze_t(label):
        r = results.get(label)
        return r.timing("logforensics analyze --json") if r else None

    rows = ["| target | measured | status |", "|---|---|---|"]
    for label, want in TARGETS["after_parse_s"].items():
        r = results.get(label)
        t = r.timing(TABLES_ANALYZE) if r else None
        if t is None or t.wall_s is None:
            rows.append(f"| the analysis after the parse ≤ {want:g} s on {label} | not run | – |")
            continue
        ok = t.ok and not t.timed_out and t.wall_s <= want
        rows.append(
            f"| the analysis after the parse ≤ {want:g} s on {label} (`analyze --tables`) | "
            f"{'> ' if t.timed_out else ''}{t.wall_s:,.2f} s | {'met' if ok else 'NOT met'} |"
        )
    for label, want in TARGETS["floor_share"].items():
        t = analyze_t(label)
        floor = results[label].timing(FLOOR) if label in results else None
        if t is None or t.wall_s is None:
            rows.append(f"| analyze ≤ {want:g}× polars' floor on {label} | not run | – |")
            continue
        if not (floor and floor.ok and floor.exit_code == 0 and floor.wall_s):
            rows.append(f"| analyze ≤ {want:g}× polars' floor on {label} | no floor measured | – |")
            continue
        share = t.wall_s / floor.wall_s
        ok = t.ok and not t.timed_out and share <= want
        rows.append(
            f"| analyze ≤ {want:g}× polars' floor on {label} | {'≥ ' if t.timed_out else ''}"
            f"{t.wall_s:,.2f} s = {share:.2f}× the floor's {floor.wall_s:,.2f} s | "
            f"{'met' if ok else 'NOT met'} |"
        )
    for label, want in TARGETS["rss_share"].items():
        t = analyze_t(label)
        if t is None or not t.rss_kib:
            rows.append(f"| peak RSS ≤ {want:g}× input on {label} | not run | – |")
            continue
        size = results[label].truth["bytes"]
        share = t.rss_kib * 1024 / size
        pre = "≥ " if t.timed_out else ""
        # (memory saved by a wrong answer is no saving: the counts must equal the truth)
        ok = not t.timed_out and share <= want and results[label].check == "PASS"
        rows.append(
            f"| peak RSS ≤ {want:g}× input on {label} | {pre}{t.rss_kib / 1024:,.0f} MiB = "
            f"{pre}{share:.2f}× of {size / 2**20:,.0f} MiB | {'met' if ok else 'NOT met'} |"
        )
    t20 = analyze_t("20M")
    t5 = analyze_t("5M")
    if t5 and t20:
        ratio = t20.wall_s / t5.wall_s
        pre = "≥ " if t20.timed_out else ""
        ok = t5.ok and t20.ok and ratio <= TARGETS["scaling"]
        rows.append(f"| 20M/5M time ≤ 4.5 | {pre}{ratio:.2f} | {'met' if ok else 'NOT met'} |")
    else:
        rows.append("| 20M/5M time ≤ 4.5 | not run | – |")
    r20 = results.get("20M")
    if r20 and r20.html_bytes is not None:
        ok = r20.html_bytes < TARGETS["html_bytes"]
        rows.append(
            f"| HTML report at 20M < 5 MB | {r20.html_bytes / 1e6:,.1f} MB | {'met' if ok else 'NOT met'} |"
        )
    elif r20 and r20.timing("logforensics analyze -o html --json"):
        rows.append("| HTML report at 20M < 5 MB | no report (see table) | NOT met |")
    else:
        rows.append("| HTML report at 20M < 5 MB | not run | – |")
    if r20 and r20.html_load_ms is not None:
        ok = r20.html_load_ms < TARGETS["html_load_ms"]
        rows.append(
            f"| HTML report at 20M loads in a browser in < 2 s | {r20.html_load_ms:,.0f} ms "
            f"(headless Chromium) | {'met' if ok else 'NOT met'} |"
        )
    else:
        rows.append(
            "| HTML report at 20M loads in a browser in < 2 s | not measured (no chromium, or it did not start) | – |"
        )
    return rows


def export_ref(ref: str, scratch: Path) -> Path:
    """`git archive REF logforensics` into SCRATCH/src-<sha>; returns the folder for PYTHONPATH."""
    sha = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", ref],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    dest = scratch / f"src-{sha}"
    if not (dest / "logforensics" / "cli.py").exists():
        dest.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", sha, "logforensics"],
            capture_output=True,
            check=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def machine(ref: str | None = None) -> dict:
    mem = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        import polars

        polars_version = polars.__version__
    except ImportError:  # run.py started by another interpreter
        polars_version = subprocess.run(
            [str(PYTHON), "-c", "import polars; print(polars.__version__)"],
            capture_output=True,
            text=True,
        ).stdout.strip()

    def git(*a):
        out = subprocess.run(["git", "-C", str(ROOT), *a], capture_output=True, text=True)
        return out.stdout.strip()

    dirty = "" if ref else git("status", "--short", "--", "logforensics")
    return {
        "cores": os.cpu_count(),
        "memory_gib": mem / 2**30 if mem else None,
        "cpu": _cpu_model(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "polars": polars_version,
        "commit": git("rev-parse", "--short", ref or "HEAD"),
        "ref": ref,
        "dirty": len(dirty.splitlines()) if dirty else 0,
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def write_results(
    results: dict[str, SizeResult], args, notes: list[str], tools: dict, env: dict
) -> None:
    lines = [
        "# `make bench` results",
        "",
        "Written by `bench/run.py`; regenerate with `make bench` "
        "(or `.venv/bin/python bench/run.py --sizes 1M,5M,20M`).",
        "",
        f"* date: {env['date']}",
        f"* machine: {env['cores']} cores ({env['cpu'] or 'unknown CPU'}), "
        f"{_f(env['memory_gib'], '{:.1f}')} GiB memory; {env['os']}",
        f"* python {env['python']}, polars {env['polars']}",
        f"* logforensics at commit {env['commit']}"
        + (" (exported with git archive; the working tree was not used)" if env["ref"] else "")
        + (
            f" with uncommitted changes in {env['dirty']} file(s) under logforensics/"
            if env["dirty"]
            else ""
        ),
        f"* lnav: {tool_version(tools.get('lnav')) or 'not available'}; "
        f"goaccess: {tool_version(tools.get('goaccess'), '--version') or 'not available'}",
        f"* bundles: seed {args.seed}, scratch `{args.scratch}`; {generate.INSTANCES} instances, "
        f"~{generate.RATE_PER_S:.0f} requests/s, {generate.STEPS} steps; page cache warm; "
        f"timeout {args.timeout:.0f} s per command",
        "* lines/s and MB/s are over the files a command reads; `× grep -c` is grep -c's "
        "lines/s over the command's (how many times slower per line); peak RSS is the "
        "largest single process of the command's tree ("
        + ("GNU time %M" if GNU_TIME else "wait4 ru_maxrss, which includes the launcher")
        + ")",
        f"* reference commands and `logforensics analyze --json`: fastest of up to "
        f"{args.repeat} runs (one past 60 s), peak RSS the largest of them; "
        "`analyze -o html --json`: one run",
        "* `analyze --json` is the measured run and the correctness check; "
        "`analyze -o html --json` is a second run that also renders the HTML report (charts)",
        "",
    ]
    for label, res in results.items():
        tr = res.truth
        lines += [
            f"## {label} lines",
            "",
            f"{tr['lines']:,} lines, {tr['bytes'] / 2**20:,.0f} MiB in {len(tr['files'])} files; "
            + (
                "no client file: two instances' kubectl-stamped uvicorn and stats lines, nginx; "
                if "records" in tr
                else f"{tr['totals']['sent']:,} requests ({tr['totals']['failed']:,} failed, "
                "never reached an instance); "
            )
            + f"generated in {tr.get('generate_s') or 0:.1f} s"
            + (" (reused)" if res.reused else ""),
            "",
            *table(res),
            "",
            f"Correctness (totals and per-instance counts vs truth.json): **{res.check}**"
            + (f"; verdict {res.verdict}" if res.verdict else ""),
        ]
        lines += [f"* {d}" for d in res.check_detail]
        if res.html_bytes is not None:
            load = (
                f"; loads in {res.html_load_ms:,.0f} ms in headless Chromium (1280×800, best of 3)"
                if res.html_load_ms is not None
                else ""
            )
            lines.append(f"\nHTML report: {res.html_bytes / 1e6:,.2f} MB{load}")
        lines.append("")
    lines += ["## Targets", "", *targets(results), ""]
    if notes:
        lines += ["## Notes", "", *[f"* {n}" for n in notes], ""]
    kept = ""
    if RESULTS.exists():
        old = RESULTS.read_text(encoding="utf-8")
        if NOTES_MARKER in old:
            kept = old.split(NOTES_MARKER, 1)[1]
    RESULTS.write_text("\n".join(lines) + "\n" + NOTES_MARKER + kept, encoding="utf-8")
    raw = args.scratch / "results.json"
    raw.write_text(
        json.dumps(
            {
                "machine": env,
                "notes": notes,
                "sizes": {
                    k: {
                        "check": r.check,
                        "detail": r.check_detail,
                        "verdict": r.verdict,
                        "reused": r.reused,
                        "html_bytes": r.html_bytes,
                        "html_load_ms": r.html_load_ms,
                        "truth": {x: r.truth[x] for x in ("lines", "bytes", "totals", "instances")},
                        "timings": [t.to_dict() for t in r.timings],
                    }
                    for k, r in results.items()
                },
            },
            indent=2,
        ),
        encoding="utf-8",
    )


def render_only(args) -> int:
    """Rewrite RESULTS.md from SCRATCH/results.json (and the bundles' truth and reports)."""
    saved = json.loads((args.scratch / "results.json").read_text(encoding="utf-8"))
    results: dict[str, SizeResult] = {}
    fields = set(Timing.__dataclass_fields__)
    for label, data in saved["sizes"].items():
        lines, kind = generate.parse_spec(label)
        bundle, truth_path = generate.bundle_paths(args.scratch, lines, args.seed, kind)
        truth = json.loads(truth_path.read_text(encoding="utf-8"))
        res = SizeResult(
            label,
            truth,
            data.get("reused", True),
            html_bytes=data.get("html_bytes"),
            html_load_ms=data.get("html_load_ms"),
        )
        for t in data["timings"]:
            timing = Timing(**{k: v for k, v in t.items() if k in fields})
            timing.stdout = t.get("stdout_tail", "")
            slug = "".join(c if c.isalnum() else "_" for c in timing.name)[:40]
            timing.output = summarise_output(
                timing.stdout, bundle.parent / "out" / f"{slug}.stdout"
            )
            if timing.name.startswith("goaccess"):
                with contextlib.suppress(OSError, ValueError, KeyError):
                    general = json.loads((bundle.parent / "out" / "goaccess.json").read_text())
                    timing.output = f"{general['general']['total_requests']:,} requests parsed"
            res.timings.append(timing)
        res.check, res.check_detail, res.verdict = check(
            bundle.parent / "out" / "analysis.json", truth
        )
        main_run = res.timing("logforensics analyze --json")
        if main_run and main_run.timed_out:
            res.check, res.check_detail = "FAIL", [f"no report within {args.timeout:g} s"]
        results[label] = res
    tools = {"lnav": shutil.which("lnav"), "goaccess": shutil.which("goaccess")}
    write_results(results, args, saved.get("notes", []), tools, saved["machine"])
    print(f"rewrote {RESULTS} from {args.scratch / 'results.json'}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description="Benchmark logforensics analyze on big bundles.")
    ap.add_argument(
        "--sizes",
        default="1M,5M,20M,5M-short",
        help="comma-separated line counts (5M-short: the short-line bundle, no client file)",
    )
    ap.add_argument("--scratch", type=Path, default=generate.DEFAULT_SCRATCH)
    ap.add_argument("--seed", type=int, default=generate.DEFAULT_SEED)
    ap.add_argument("--skip-reference", action="store_true", help="time only logforensics")
    ap.add_argument("--quick", action="store_true", help="1M only")
    ap.add_argument("--no-html", action="store_true", help="skip the run that renders HTML")
    ap.add_argument(
        "--no-tables",
        action="store_true",
        help="skip the dataset rows (ingest --tables, analyze --tables, ingest --ray)",
    )
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per command")
    ap.add_argument(
        "--repeat", type=int, default=3, help="runs of each timed command (fastest kept)"
    )
    ap.add_argument(
        "--ref",
        help="measure logforensics as committed at this git revision (exported to the scratch "
        "folder and put first on PYTHONPATH) instead of the working tree",
    )
    ap.add_argument(
        "--render-only",
        action="store_true",
        help="measure nothing: rewrite RESULTS.md from the last run's SCRATCH/results.json",
    )
    args = ap.parse_args()
    args.scratch = args.scratch.resolve()
    if args.render_only:
        return render_only(args)
    if ROOT in args.scratch.parents or args.scratch == ROOT:
        ap.error("--scratch must be outside the repository")
    sizes = ["1M"] if args.quick else [s for s in args.sizes.split(",") if s.strip()]
    targets_ = [generate.parse_spec(s) for s in sizes]
    args.scratch.mkdir(parents=True, exist_ok=True)
    need = sum(t * 160 for t, _ in targets_)  # ~150 bytes a line, bundles kept
    free = shutil.disk_usage(args.scratch).free
    if need > free:
        print(f"warning: bundles need ~{need / 2**30:.1f} GiB, {free / 2**30:.1f} GiB free")
    if not LOGFORENSICS.exists():
        print(f"{LOGFORENSICS} missing: run `make bench` (it installs the project)")
        return 1
    args.analyze_env = None
    if args.ref:
        src = export_ref(args.ref, args.scratch)
        args.analyze_env = {**os.environ, "PYTHONPATH": str(src)}
        print(f"logforensics from {args.ref} ({src})")
    tools, notes = ensure_tools(args.skip_reference)
    env = machine(args.ref)
    results: dict[str, SizeResult] = {}
    for target in targets_:
        res = run_size(target, args, tools)
        results[res.label] = res
        write_results(results, args, notes, tools, env)  # after every size: partial results
    print("\nTargets:\n" + "\n".join(targets(results)))
    print(f"\nwrote {RESULTS}")
    print("; ".join(f"{k}: {r.check}" for k, r in results.items()))
    return 0 if all(r.check == "PASS" for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
