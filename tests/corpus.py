"""Incidents recorded from real programs (found by `conftest.corpus`), changed for a test.

`variant` copies an incident's evidence into a scratch folder, optionally
rewriting files, so a test can remove a witness or shift a clock and see what
the analysis then claims.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

from tests.conftest import CORPUS_ANSWERS, corpus


def truth(name: str) -> dict:
    return json.loads((corpus(name) / "TRUTH.json").read_text())


def variant(
    name: str,
    into: Path,
    drop: set[str] = frozenset(),
    rewrite: dict[str, Callable[[str], str]] | None = None,
) -> Path:
    """The incident's evidence copied to `into`, without `drop`, with `rewrite`[file](text) applied."""
    source = corpus(name)
    into.mkdir(parents=True, exist_ok=True)
    for item in source.iterdir():
        if item.name in CORPUS_ANSWERS or item.name in drop:
            continue
        target = into / item.name
        if rewrite and item.name in rewrite:
            target.write_text(rewrite[item.name](item.read_text()))
        elif item.is_dir():
            shutil.copytree(item, target)
        else:
            shutil.copy(item, target)
    return into
