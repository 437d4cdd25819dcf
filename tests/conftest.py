from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

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
CORPUS_ANSWERS = {"TRUTH.json", "GROUND_TRUTH.md", "lab-timeline.log"}  # not inputs


def corpus(name: str) -> Path:
    """A recorded incident's folder (the test is skipped, saying why, where none is beside)."""
    if CORPUS is None or not (CORPUS / name).is_dir():
        pytest.skip(f"the recorded corpus incident {name} is not beside this checkout")
    return CORPUS / name


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
    """The corpus' incident folders, [] where there is no corpus."""
    return sorted(p for p in CORPUS.iterdir() if p.is_dir()) if CORPUS else []


def incident_inputs(folder: Path) -> list[Path]:
    """What a user would give `analyze`: the folder's files and folders (a tester's artifact
    tree), minus the recording's answers."""
    return sorted(p for p in folder.iterdir() if p.name not in CORPUS_ANSWERS)
