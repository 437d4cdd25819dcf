"""Incidents recorded from real programs (found by `conftest.corpus`), changed for a test.

`variant` copies an incident's evidence into a scratch folder, optionally
rewriting files, so a test can remove a witness or shift a clock and see what
the analysis then claims.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

from tests.conftest import CORPUS_ANSWERS, PROMETHEUS_DATA, corpus


def truth(name: str) -> dict:
    return json.loads((corpus(name) / "TRUTH.json").read_text())


def variant(
    name: str,
    into: Path,
    drop: set[str] = frozenset(),
    rewrite: dict[str, Callable[[str], str]] | None = None,
) -> Path:
    """The incident's evidence copied to `into`, without `drop`, with `rewrite`[file](text)
    applied (a recorded Prometheus storage is served, not copied: tools/promserve.py)."""
    source = corpus(name)
    into.mkdir(parents=True, exist_ok=True)
    for item in source.iterdir():
        if item.name in CORPUS_ANSWERS or item.name in drop or item.name == PROMETHEUS_DATA:
            continue
        target = into / item.name
        if rewrite and item.name in rewrite:
            target.write_text(rewrite[item.name](item.read_text()))
        elif item.is_dir():
            shutil.copytree(item, target)
        else:
            shutil.copy(item, target)
    return into


def shift_client(seconds: float, keep: set[int] | None = None) -> Callable[[str], str]:
    """client.jsonl with every time moved by `seconds` (and only the `keep` indexes), its
    response ids dropped: no id to join on, the clock alone places the requests."""

    def rewrite(text: str) -> str:
        out = []
        for line in text.splitlines():
            record = json.loads(line)
            if keep is not None and record["index"] not in keep:
                continue
            for key in ("start", "end"):
                moved = dt.datetime.fromisoformat(record[key]) + dt.timedelta(seconds=seconds)
                record[key] = moved.isoformat(timespec="milliseconds")
            record.pop("response_id")
            out.append(json.dumps(record))
        return "\n".join(out) + "\n"

    return rewrite


# the lines only `--enable-log-requests` makes vLLM write (its arrival, scheduling and abort
# lines); production's default logging leaves the untimed uvicorn access and stats lines
PER_REQUEST_LINE_RE = re.compile(
    r"\] (?:Received request|Added request|Aborted request|Request \S+ aborted)"
)


def default_logging(text: str) -> str:
    """An instance log as vLLM's default logging would have written it."""
    return "".join(line for line in text.splitlines(True) if not PER_REQUEST_LINE_RE.search(line))


MSEC_PAIR_RE = re.compile(r" msec=\S+")


def time_local_only(text: str) -> str:
    """An nginx access log as a `log_format` without `$msec` would have written it: each
    request stamped to the whole second by `$time_local` alone."""
    return MSEC_PAIR_RE.sub("", text)
