from __future__ import annotations

import os
import re
from pathlib import Path

import polars as pl
import pytest

from logforensics.ingest import ParseContext, SourceFile, detect
from logforensics.report import build_report
from logforensics.report.jsonout import contract

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
DATA = ROOT / "tests" / "data"


def _corpus() -> Path | None:
    """Incidents recorded from real programs: $LOGFORENSICS_CORPUS, else ../shared/corpus beside
    a checkout (CI copies it there) or ../../shared/corpus beside a worktree under wt/; None on
    a user's clone."""
    named = os.environ.get("LOGFORENSICS_CORPUS")
    beside = [ROOT.parent / "shared" / "corpus", ROOT.parent.parent / "shared" / "corpus"]
    return next((p for p in ([Path(named)] if named else beside) if p.is_dir()), None)


CORPUS = _corpus()
RECORDINGS = ROOT / "recordings"  # this project's own recordings, kept in the repository
CORPUS_ANSWERS = {
    "TRUTH.json",
    "GROUND_TRUTH.md",
    "lab-timeline.log",
    "kill-time.txt",
    "count_truth.py",
    "record.sh",
}
# a recording's Prometheus storage: served by a real Prometheus (tools/promserve.py), not read
PROMETHEUS_DATA = "prometheus-data"


def corpus(name: str) -> Path:
    """A recorded incident's folder, from the shared corpus or the repository's recordings (the
    test is skipped, saying why, where it is in neither)."""
    for root in (CORPUS, RECORDINGS):
        if root is not None and (root / name / "TRUTH.json").is_file():
            return root / name
    pytest.skip(f"the recorded corpus incident {name} is not beside this checkout")


@pytest.fixture
def seed_bundle() -> Path:
    return FIXTURES / "seed-two-instances"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def outside_fences(md: str) -> str:
    """Markdown without its fenced blocks (tickets show those as text, not markup)."""
    return re.sub(r"^ *(`{3,})text\n.*?^ *\1$", "", md, flags=re.S | re.M)


def corpus_incidents() -> list[Path]:
    """Every recorded incident: the shared corpus' (none on a user's clone) and the repository's."""
    roots = [r for r in (CORPUS, RECORDINGS) if r is not None]
    return sorted(
        (p for r in roots for p in r.iterdir() if (p / "TRUTH.json").is_file()),
        key=lambda p: p.name,
    )


def incident_inputs(folder: Path) -> list[Path]:
    """What a user would give `analyze`: the folder's files and folders (a tester's artifact
    tree), minus the recording's answers."""
    return sorted(
        p for p in folder.iterdir() if p.name not in CORPUS_ANSWERS and p.name != PROMETHEUS_DATA
    )


def read_client_file(path: Path, ctx: ParseContext | None = None):
    """A load tester's file read by the format it is sniffed as: (format name, result,
    client_requests), with every line accounted for."""
    source = SourceFile(path, path.name, "client")
    fmt = detect(source)
    result = fmt.parse(source, ctx or ParseContext(year=2026))
    assert result.parsed + result.noise + result.unparsed == result.lines
    return fmt.name, result, result.table("client_requests")


def outcomes(requests: pl.DataFrame) -> dict[str, int]:
    return dict(requests.group_by("outcome").len().iter_rows())


def real_line_logs() -> list[tuple[Path, str]]:
    """Every file of the real incidents and fixtures sniffed as a server or proxy log, with
    its role."""
    found = []
    for root in (r for r in (RECORDINGS, CORPUS, FIXTURES) if r is not None):
        files = (
            p
            for p in root.rglob("*")
            if p.is_file() and p.name not in CORPUS_ANSWERS and PROMETHEUS_DATA not in p.parts
        )
        for path in sorted(files):
            fmt = detect(SourceFile(path, path.name, path.stem))
            if fmt is not None and fmt.name in ("server_log", "proxy_log"):
                found.append((path, fmt.role))
    return found


def held_as_one_value(frame: pl.DataFrame, name: str) -> bool:
    """Whether `frame` (of 2,048 rows or more) holds `name` as one value (a literal), not a
    value a row (a bit a row at least): a one-column selection keeps a literal as it is,
    where `frame[name]` writes it out."""
    assert frame.height >= 2048
    return frame.select(name).estimated_size() * 64 < frame.height


def report_json(analysis) -> dict:
    """The JSON report of an analysis, as `analyze --json` writes it (parsed)."""
    return contract(build_report(analysis).summary)


def make_step(concurrency: int, sent: int = 0, succeeded: int | None = None, **fields):
    """A measured step record built by hand (a report's `runs[]`), every field but those given
    at a neutral value: what rule and comparison tests start from."""
    from logforensics.model import Balance, Failures, Latency, Step

    succeeded = sent if succeeded is None else succeeded
    base = dict(
        index=concurrency, run="client.jsonl", warmup=False, concurrency=concurrency,
        started_at=None, ended_at=None, sent=sent, succeeded=succeeded,
        failed=sent - succeeded, unreached=0, unknown=0, reached_unseen=0, outcome_unknown=0,
        per_instance={}, per_instance_uncertain={}, served_by={}, retried=0, per_upstream={},
        routed={}, contaminated=False, overlap_s=None, busy_at_start=None, timeout_s=None,
        rest_before_s=None, latency_s=Latency(), output_tokens_per_s=None,
        balance=Balance({}, None, None, "n/a"), failures=Failures(),
    )  # fmt: skip
    return Step(**{**base, **fields})
