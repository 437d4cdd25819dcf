"""`make validate`: the scoreboard on incidents recorded from real programs.

Each folder under the corpus (default ``../shared/corpus``, or
``$LOGFORENSICS_CORPUS``) and under the repository's own ``recordings/``
holds one incident's files and a ``TRUTH.json``
counted from the raw logs by hand-written scripts, never by this tool. Every
folder is analysed the way a user would run it — the folder itself, through
the command line — with the files that are not evidence a user would have
(TRUTH.json, GROUND_TRUTH.md, the lab's notes) left out, and the JSON report
is compared with the truth: verdict (and its qualifiers where the truth has a
`qualifier`: that one, or none where it is null), totals, steps, per-instance counts,
the successes each instance served and the retries where the truth counts them,
contamination and the client clock offset (the truth's `client_offset_s` is the
client's clock minus the servers', the report's `offset_s` what to add to a client
time: the one is minus the other), which must lie in the interval the report
states (within 1.5 s where it states none); an instance the truth says runs its
own clock (`instance_offsets_s`, its clock minus the true one) must be found
within 0.5 s of it and moved, and no other instance moved. One line per incident, then the
scoreboard and each clock with its interval; the exit status is 1 on any miss. Where the
shared corpus is absent (a user's clone) it says so and scores the recordings.

A comparison pair (a folder with a ``COMPARE.json`` naming its baseline and candidate run
folders, each an incident as above) is scored after its runs: `logforensics compare` over
the runs' JSON reports must name each side's bottleneck and the change, sum every step's
counts as the runs' truths do, name the instances one side has alone, and flag exactly the
conditions the truth says differ (`conditions`, none where it says nothing).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import promserve  # tools/, beside this script

NOT_EVIDENCE = {
    "TRUTH.json",
    "GROUND_TRUTH.md",
    "lab-timeline.log",
    "kill-time.txt",
    "count_truth.py",
    "record.sh",  # the script that recorded it
}
COMPARE_TRUTH = "COMPARE.json"  # a comparison pair's truth: its runs, bottlenecks, change
RECORDINGS = Path(__file__).resolve().parents[1] / "recordings"
OFFSET_TOLERANCE_S = 1.5  # where a report states no interval
INSTANCE_TOLERANCE_S = 0.5  # an instance's own offset (fitted on its records, no interval)
ROUNDING_S = 0.001  # the report rounds an interval's ends to the millisecond
CHECKS = ("verdict", "totals", "steps", "per-instance", "contamination", "offset")
TOTALS = {"sent": "sent", "ok": "succeeded", "failed": "failed", "unreached": "unreached"}
STEP_COUNTS = {"concurrency": "concurrency", **TOTALS}


def corpus_root() -> Path:
    default = Path(__file__).resolve().parents[1] / ".." / "shared" / "corpus"
    return Path(os.environ.get("LOGFORENSICS_CORPUS", default)).resolve()


def incidents(root: Path) -> list[Path]:
    """Folders with a TRUTH.json, and the runs of a comparison pair (a folder with a
    COMPARE.json whose run folders each hold one)."""
    found = []
    for d in sorted(p for p in root.iterdir() if p.is_dir()):
        if (d / "TRUTH.json").is_file():
            found.append(d)
        elif (d / COMPARE_TRUTH).is_file():
            found += sorted(r for r in d.iterdir() if r.is_dir() and (r / "TRUTH.json").is_file())
    return found


def pairs(root: Path) -> list[Path]:
    return sorted(d for d in root.iterdir() if d.is_dir() and (d / COMPARE_TRUTH).is_file())


def label(incident: Path) -> str:
    """The incident's name on the scoreboard: a pair's runs as pair/run."""
    if (incident.parent / COMPARE_TRUTH).is_file():
        return f"{incident.parent.name}/{incident.name}"
    return incident.name


def report_path(incident: Path, workdir: Path) -> Path:
    return workdir / f"{label(incident).replace('/', '+')}.json"


def analyse(incident: Path, workdir: Path) -> tuple[dict | None, str]:
    """Run `logforensics analyze` on the incident's evidence; (report, stderr). A recorded
    Prometheus storage is served by a real Prometheus and read with --prometheus."""
    evidence = workdir / label(incident)
    for item in incident.rglob("*"):
        inside_storage = promserve.DATA_DIR in item.relative_to(incident).parts
        if item.is_file() and item.name not in NOT_EVIDENCE and not inside_storage:
            link = evidence / item.relative_to(incident)
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(item.resolve())
    out = report_path(incident, workdir)
    cli = Path(sys.executable).with_name("logforensics")
    command = [str(cli), "analyze", str(evidence), "--json", str(out)]
    storage = incident / promserve.DATA_DIR
    with contextlib.ExitStack() as stack:
        if storage.is_dir():
            try:
                command += ["--prometheus", stack.enter_context(promserve.serving(storage))]
            except promserve.PrometheusUnavailable as exc:
                return None, f"{promserve.DATA_DIR}/ could not be served: {exc}"
        run = subprocess.run(command, capture_output=True, text=True)
    if not out.is_file():
        return None, run.stderr.strip().splitlines()[-1] if run.stderr.strip() else "no report"
    return json.loads(out.read_text()), run.stderr


def compare(truth: dict, got: dict) -> dict[str, list[str]]:
    """Per check, the misses (an empty list is a pass)."""
    misses: dict[str, list[str]] = {check: [] for check in CHECKS}
    verdict = got["verdict"]["bottleneck"]
    if verdict != truth["verdict"]:
        misses["verdict"].append(f"{verdict} ≠ {truth['verdict']}")
    if "qualifier" in truth:  # the sub-cause that changes the fix, where the truth names one
        named = set(got["verdict"].get("qualifiers", []))
        wanted = {truth["qualifier"]} if truth["qualifier"] else set()
        if named != wanted:
            misses["verdict"].append(f"qualifiers {sorted(named)} ≠ {sorted(wanted)}")
    for want_key, got_key in TOTALS.items():
        want, have = truth["totals"].get(want_key), got["totals"].get(got_key)
        if want is not None and want != have:
            misses["totals"].append(f"{want_key} {have}≠{want}")
    if "retried" in truth and truth["retried"] != got["totals"].get("retried"):
        misses["totals"].append(f"retried {got['totals'].get('retried')}≠{truth['retried']}")
    if "unknown" in truth["totals"] and truth["totals"]["unknown"] != got["totals"]["unknown"]:
        misses["totals"].append(f"unknown {got['totals']['unknown']}≠{truth['totals']['unknown']}")
    # an instance whose log the recording lacks is named by the lab alone: not checked
    names = sorted(i["name"] for i in truth["instances"] if i.get("log_present", True))
    served = sorted(i["name"] for i in got["instances"])
    if served != names:
        misses["per-instance"].append(f"instances {served} ≠ {names}")
    steps = [r for r in got["runs"] if not r["warmup"]]
    if len(steps) != len(truth["steps"]):
        misses["steps"].append(f"{len(steps)} steps ≠ {len(truth['steps'])}")
    for want, have in zip(truth["steps"], steps, strict=False):
        label = f"step {want['concurrency']}"
        for want_key, got_key in STEP_COUNTS.items():
            if want[want_key] != have[got_key]:
                misses["steps"].append(f"{label} {want_key} {have[got_key]}≠{want[want_key]}")
        for name, count in want["per_instance"].items():
            if name not in names:
                continue
            have_count = have["per_instance"].get(name)
            if have_count != count:
                misses["per-instance"].append(f"{label} {name} {have_count}≠{count}")
        for name, count in want.get("served_by", {}).items():
            have_count = have.get("served_by", {}).get(name)
            if name in names and have_count != count:
                misses["per-instance"].append(f"{label} {name} served {have_count}≠{count}")
        if want["contaminated"] != have["contaminated"]:
            misses["contamination"].append(f"{label} {have['contaminated']}≠{want['contaminated']}")
    want_offset = -truth["clock"]["client_offset_s"]
    have_offset = got["clock"]["offset_s"]
    lo, hi = got["clock"].get("interval") or (
        have_offset - OFFSET_TOLERANCE_S,
        have_offset + OFFSET_TOLERANCE_S,
    )
    if have_offset is None or not lo - ROUNDING_S <= want_offset <= hi + ROUNDING_S:
        misses["offset"].append(f"{want_offset:+.3f} outside {clock_text(got['clock'])}")
    misses["offset"] += instance_clock_misses(truth["clock"], got["clock"])
    return misses


PAIR_CHECKS = ("bottleneck", "steps", "instances", "conditions")


def compare_pair(pair: Path, workdir: Path) -> dict[str, list[str]] | str:
    """`logforensics compare` over the pair's runs, read back from the reports written above
    (the JSON a user keeps), against COMPARE.json and the runs' TRUTH.json: each side's
    verdict and the change, every step's counts summed over a side's runs, the instances one
    side has alone. The misses per check, or why no comparison was written."""
    truth = json.loads((pair / COMPARE_TRUTH).read_text())
    reports = {
        side: [report_path(pair / run, workdir) for run in truth[side]]
        for side in ("baseline", "candidate")
    }
    missing = [str(r) for rs in reports.values() for r in rs if not r.is_file()]
    if missing:
        return f"no report for {', '.join(missing)}"
    out = workdir / f"{pair.name}.compare.json"
    cli = Path(sys.executable).with_name("logforensics")
    command = [str(cli), "compare", "--json", str(out)]
    for side, paths in reports.items():
        command += [a for path in paths for a in (f"--{side}", str(path))]
    run = subprocess.run(command, capture_output=True, text=True)
    if not out.is_file():
        return run.stderr.strip().splitlines()[-1] if run.stderr.strip() else "no comparison"
    got = json.loads(out.read_text())
    misses: dict[str, list[str]] = {check: [] for check in PAIR_CHECKS}
    want = truth["bottleneck"]
    have = {
        "baseline": got["baseline"]["bottleneck"],
        "candidate": got["candidate"]["bottleneck"],
        "change": got["bottleneck_change"],
    }
    misses["bottleneck"] += [f"{k} {have[k]}≠{want[k]}" for k in want if have[k] != want[k]]
    if got["steps_by"] != truth["steps_by"]:
        misses["steps"].append(f"matched by {got['steps_by']}≠{truth['steps_by']}")
    for side in ("baseline", "candidate"):
        sums: dict[int, dict[str, int]] = {}
        for run_name in truth[side]:
            for step in json.loads((pair / run_name / "TRUTH.json").read_text())["steps"]:
                into = sums.setdefault(step["concurrency"], dict.fromkeys(TOTALS, 0))
                for key in TOTALS:
                    into[key] += step[key]
        for step in got["steps"]:
            counts = step[side]
            if counts is None:
                continue
            for key, got_key in TOTALS.items():
                want_n = sums.get(step["key"], {}).get(key)
                if want_n != counts[got_key]:
                    misses["steps"].append(
                        f"{side} step {step['key']} {key} {counts[got_key]}≠{want_n}"
                    )
    alone = {
        side: sorted(row["name"] for row in got["instances"] if row[other] is None)
        for side, other in (("baseline", "candidate"), ("candidate", "baseline"))
    }
    for side in ("baseline", "candidate"):
        want_alone = sorted(truth["instances_only_in"].get(side, []))
        if alone[side] != want_alone:
            misses["instances"].append(f"only in the {side} {alone[side]}≠{want_alone}")
    flagged = [d["what"] for d in got["conditions"]]
    if flagged != truth.get("conditions", []):
        misses["conditions"].append(f"flagged {flagged}≠{truth.get('conditions', [])}")
    return misses


def instance_clock_misses(truth: dict, clock: dict) -> list[str]:
    """An instance whose own clock the truth says is off must be found off by that much (the
    report's `offset_s` is its clock minus the client's) and moved; any other must stay put."""
    skewed = truth.get("instance_offsets_s", {})
    misses = []
    for name, fit in clock.get("instances", {}).items():
        if name not in skewed:
            if fit.get("moved_s"):
                misses.append(f"{name} moved {fit['moved_s']:+.3f} s, its clock is the servers'")
            continue
        want = skewed[name] - truth["client_offset_s"]
        if not fit.get("moved_s") or abs(fit["offset_s"] - want) > INSTANCE_TOLERANCE_S:
            misses.append(
                f"{name} {fit['offset_s']:+.3f} s (moved {fit.get('moved_s') or 0:+.3f}),"
                f" truth {want:+.3f} s"
            )
    misses += [
        f"{name} absent from the report"
        for name in skewed
        if name not in clock.get("instances", {})
    ]
    return misses


def clock_text(clock: dict) -> str:
    """The report's clock as a scoreboard states it: estimate, interval, basis."""
    interval = clock.get("interval")
    span = f" [{interval[0]:+.3f}, {interval[1]:+.3f}]" if interval else ""
    ambiguous = " ambiguous" if clock.get("ambiguous") else ""
    basis = clock.get("basis") or clock["method"]
    moved = "".join(
        f"; {name} moved {fit['moved_s']:+.3f} s"
        for name, fit in clock.get("instances", {}).items()
        if fit.get("moved_s")
    )
    return f"{clock['offset_s']:+.3f} s{span}{ambiguous} ({basis}){moved}"


def main() -> int:
    root = corpus_root()
    if not root.is_dir():
        print(
            f"validate: no shared corpus at {root} (set LOGFORENSICS_CORPUS): scoring recordings/"
        )
    found = sorted([*(incidents(root) if root.is_dir() else []), *incidents(RECORDINGS)], key=label)
    if not found:
        print("validate: no incident with a TRUTH.json: nothing to score, passing")
        return 0
    board = {check: 0 for check in CHECKS}
    clocks: list[str] = []  # each incident's clock beside its truth
    failed = 0
    width = max(len(label(d)) for d in found)
    with tempfile.TemporaryDirectory(prefix="lf-validate-") as tmp:
        for incident in found:
            name = label(incident)
            truth = json.loads((incident / "TRUTH.json").read_text())
            got, stderr = analyse(incident, Path(tmp))
            if got is None:
                failed += 1
                print(f"FAIL {name:<{width}}  analyze wrote no report: {stderr}")
                continue
            misses = compare(truth, got)
            for check, items in misses.items():
                board[check] += not items
            bad = {c: m for c, m in misses.items() if m}
            failed += bool(bad)
            marks = "  ".join(f"{c} {'✗' if misses[c] else '✓'}" for c in CHECKS)
            print(f"{'FAIL' if bad else 'PASS'} {name:<{width}}  {marks}")
            clocks.append(
                f"  {name:<{width}}  truth {-truth['clock']['client_offset_s']:+.3f} s,"
                f" report {clock_text(got['clock'])}"
            )
            for check, items in bad.items():
                print(f"       {check}: {'; '.join(items)}")
        compared = [p for r in (root, RECORDINGS) if r.is_dir() for p in pairs(r)]
        pairs_failed = 0
        for pair in compared:
            result = compare_pair(pair, Path(tmp))
            if isinstance(result, str):
                pairs_failed += 1
                print(f"FAIL compare {pair.name}: {result}")
                continue
            bad = {c: m for c, m in result.items() if m}
            pairs_failed += bool(bad)
            marks = "  ".join(f"{c} {'✗' if result[c] else '✓'}" for c in PAIR_CHECKS)
            print(f"{'FAIL' if bad else 'PASS'} compare {pair.name}  {marks}")
            for check, items in bad.items():
                print(f"       {check}: {'; '.join(items)}")
    n = len(found)
    print("scoreboard: " + ", ".join(f"{c} {board[c]}/{n}" for c in CHECKS))
    print("clocks (servers minus client, the interval the report states):")
    print("\n".join(clocks))
    sources = ", ".join(str(r) for r in (root, RECORDINGS) if r.is_dir())
    print(f"validate: {n - failed}/{n} incidents pass ({sources})")
    if compared:
        print(f"validate: {len(compared) - pairs_failed}/{len(compared)} comparisons pass")
    return 1 if failed or pairs_failed else 0


if __name__ == "__main__":
    sys.exit(main())
