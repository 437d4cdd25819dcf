"""The corpus of incidents recorded from real programs (../shared/corpus), for tests.

It is not part of the repository: where it is absent (a user's clone), the
tests that read it skip and say why. `variant` copies an incident's evidence
into a scratch folder, optionally rewriting files, so a test can remove a
witness or shift a clock and see what the analysis then claims.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(
    os.environ.get(
        "LOGFORENSICS_CORPUS", Path(__file__).resolve().parents[1] / ".." / "shared" / "corpus"
    )
).resolve()
NOT_EVIDENCE = {"TRUTH.json", "GROUND_TRUTH.md", "lab-timeline.log"}


def incident(name: str) -> Path:
    folder = ROOT / name
    if not (folder / "TRUTH.json").is_file():
        pytest.skip(f"the recorded corpus is not here ({folder}): nothing real to test against")
    return folder


def truth(name: str) -> dict:
    return json.loads((incident(name) / "TRUTH.json").read_text())


def variant(
    name: str,
    into: Path,
    drop: set[str] = frozenset(),
    rewrite: dict[str, Callable[[str], str]] | None = None,
) -> Path:
    """The incident's evidence copied to `into`, without `drop`, with `rewrite`[file](text) applied."""
    source = incident(name)
    into.mkdir(parents=True, exist_ok=True)
    for item in source.iterdir():
        if item.name in NOT_EVIDENCE or item.name in drop:
            continue
        target = into / item.name
        if rewrite and item.name in rewrite:
            target.write_text(rewrite[item.name](item.read_text()))
        elif item.is_dir():
            shutil.copytree(item, target)
        else:
            shutil.copy(item, target)
    return into
