"""`--cache DIR`: each file's parsed entry (`ingest.entries`, the `--tables` dataset's
entries), keyed by file and options.

A key covers the file's resolved path, size and mtime, the parse context
(year, zones, anchors) and the tool's version, so a changed file or option
parses again; re-running `analyze` with other thresholds or outputs skips
parsing.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

from logforensics import __version__
from logforensics.ingest import ParseContext, SourceFile
from logforensics.ingest.base import Parsed
from logforensics.ingest.entries import read_entry, write_entry


def key(path: Path, instance: str, ctx: ParseContext) -> str:
    stat = path.stat()
    parts = [
        str(path.resolve()),
        str(stat.st_size),
        str(stat.st_mtime_ns),
        instance,
        __version__,
        json.dumps(dataclasses.asdict(ctx), default=str, sort_keys=True),
    ]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


def load(folder: Path, entry: str, source: SourceFile | None = None) -> Parsed | None:
    """The cached parse of a file (as `source` names it), or None (absent or damaged)."""
    kept = read_entry(folder / entry)
    if kept is None or kept[1].fmt is None:
        return None
    parsed = kept[1]
    return parsed._replace(source=source) if source is not None else parsed


def store(folder: Path, entry: str, parsed: Parsed) -> None:
    """Keep a parsed file (a file no format read is parsed again next time: it is cheap)."""
    if parsed.fmt is not None:
        write_entry(folder / entry, parsed, identify=False)
