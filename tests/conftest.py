from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
# Incidents recorded from real programs: ../shared/corpus beside a checkout (CI copies it
# there), ../../shared/corpus beside a worktree under wt/.
CORPUS = next(
    (p for p in (ROOT.parent / "shared" / "corpus", ROOT.parent.parent / "shared" / "corpus")
     if p.is_dir()),
    None,
)  # fmt: skip


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
