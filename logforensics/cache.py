"""`--cache DIR`: parsed canonical tables kept as Parquet, keyed by file and options.

A key covers the file's resolved path, size and mtime, the parse context
(year, zones, anchors) and the tool's version, so a changed file or option
parses again; re-running `analyze` with other thresholds or outputs skips
parsing.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
from pathlib import Path

import polars as pl

from logforensics import __version__, model
from logforensics.ingest import FILE_FORMATS, FileFormat, ParseContext, ParseResult


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


def load(folder: Path, entry: str) -> tuple[FileFormat, ParseResult] | None:
    meta_path = folder / entry / "meta.json"
    if not meta_path.exists():
        return None
    try:
        meta = json.loads(meta_path.read_text())
        prefixes = {int(k): v for k, v in meta["source_prefixes"].items()}
        tables = {
            name: model.source_remap(pl.read_parquet(folder / entry / f"{name}.parquet"), prefixes)
            for name in meta["tables"]
        }
    except (OSError, ValueError, KeyError, pl.exceptions.PolarsError):
        return None  # a damaged entry is parsed again, not trusted
    result = ParseResult(
        tables=tables,
        lines=meta["lines"],
        parsed=meta["parsed"],
        noise=meta["noise"],
        unparsed_examples=[tuple(x) for x in meta["unparsed_examples"]],
        unparsed_shapes=meta["unparsed_shapes"],
        notes=meta["notes"],
        formats=meta["formats"],
        span=_times(meta["span"]),
        instance_spans={k: _times(v) for k, v in meta["instance_spans"].items()},
        addresses=meta["addresses"],
        tester_summaries=meta["tester_summaries"],
    )
    return FILE_FORMATS[meta["format"]], result


def store(folder: Path, entry: str, fmt: FileFormat, result: ParseResult) -> None:
    target = folder / entry
    target.mkdir(parents=True, exist_ok=True)
    for name, frame in result.tables.items():
        frame.write_parquet(target / f"{name}.parquet")
    prefixes = {}
    for frame in result.tables.values():
        prefixes |= model.prefixes_of(frame)
    meta = {
        "format": fmt.name,
        "source_prefixes": prefixes,  # ids are this process's: a later run maps them anew
        "tables": list(result.tables),
        "lines": result.lines,
        "parsed": result.parsed,
        "noise": result.noise,
        "unparsed_examples": result.unparsed_examples,
        "unparsed_shapes": result.unparsed_shapes,
        "notes": result.notes,
        "formats": result.formats,
        "span": _iso(result.span),
        "instance_spans": {k: _iso(v) for k, v in result.instance_spans.items()},
        "addresses": result.addresses,
        "tester_summaries": result.tester_summaries,
    }
    (target / "meta.json").write_text(json.dumps(meta))  # written last: it marks the entry complete


def _iso(span):
    return None if span is None else [t.isoformat() for t in span]


def _times(span):
    if span is None:
        return None
    return tuple(dt.datetime.fromisoformat(t) for t in span)
