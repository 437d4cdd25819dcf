"""One input file as parsed, kept on disk: its canonical tables as Parquet and a
`file.json` with its account and what it found. A `--tables` dataset holds one
entry per file (`logforensics.tables`); the `--cache` holds the same entries,
keyed by file and options.
"""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import json
from pathlib import Path

import polars as pl

from logforensics import model
from logforensics.ingest import FILE_FORMATS, ParseResult, SourceFile
from logforensics.ingest.base import Parsed

ENTRY_FILE = "file.json"  # written last: it marks an entry complete
DIGEST_CHUNK = 8 << 20


def write_entry(
    folder: Path, parsed: Parsed, named: bool = False, given: bool = False, identify: bool = True
) -> None:
    """One file's entry: its tables as Parquet, then `file.json`.

    `named`: the file was named on the command line; `given`: its instance was
    (--instance); `identify`: record its content's size and digest, by which
    another dataset's copy of it is told (a cache entry is keyed by the file).
    """
    folder.mkdir(parents=True, exist_ok=True)
    source, fmt, result, failure = parsed
    meta: dict = {
        "path": source.display,
        "named": named,
        "instance": source.instance,
        "instance_given": given,
        "format": fmt.name if fmt else None,
        "failure": failure,
        **(identity(source.path) if identify else {"resolved": None, "size": None, "digest": None}),
    }
    if result is not None:
        prefixes: dict[int, str] = {}
        for name, frame in result.tables.items():
            # one row group: read back in one piece, nothing to rechunk (row groups of polars'
            # default 262k rows came back in 54 pieces at 20M, and their copy into one touched
            # 1.5 GB of fresh memory: 0.4 s of reading and 1 s of the kernel's page faults)
            frame.write_parquet(folder / f"{name}.parquet", row_group_size=max(frame.height, 1))
            prefixes |= model.prefixes_of(frame)
        meta["result"] = {
            "tables": list(result.tables),
            # ids are this process's: a reader maps them to its own by their text
            "source_prefixes": prefixes,
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
            "run_config": result.run_config,
        }
    (folder / ENTRY_FILE).write_text(json.dumps(meta, default=str), encoding="utf-8")


def _read_table(folder: Path, name: str, prefixes: dict[int, str]) -> pl.DataFrame:
    """An entry's table as the analysis holds it: a column of nulls as one null, each other
    column in one piece (a row group is a piece as read; a `with_columns` beside a column in
    one piece copies every column of many into one, at every step); its sources this
    process's; conformed (another engine may write a label as a plain string); then a
    column of one value held as that value, as the parse holds it, before the next table is
    read (Parquet gives it in full: the read's peak at 20M 1,526 -> 1,393 MiB, live)."""
    frame = model.nulls_as_literals(pl.read_parquet(folder / f"{name}.parquet")).rechunk()
    frame = model.conform(name, model.source_remap(frame, prefixes))
    return model.constants_as_literals(frame)


def entry_meta(folder: Path) -> dict | None:
    """An entry's `file.json`; None if the entry is incomplete or damaged."""
    try:
        meta = json.loads((folder / ENTRY_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) and meta.keys() >= ENTRY_KEYS else None


# what every `file.json` says of its file (`write_entry`), read before its tables are
ENTRY_KEYS = frozenset(
    {
        "path",
        "named",
        "instance",
        "instance_given",
        "format",
        "failure",
        "resolved",
        "size",
        "digest",
    }
)


def register_prefixes(meta: dict) -> None:
    """Give an entry's source prefixes this process's ids now, in the order entries are
    listed: entries read in threads would race to them, and ids break ties in sorts."""
    kept = meta.get("result")
    for text in (kept.get("source_prefixes") or {}).values() if isinstance(kept, dict) else ():
        model.source_prefix(str(text))


def read_entry(folder: Path, meta: dict | None = None) -> tuple[dict, Parsed] | None:
    """An entry's `file.json` (`meta`, if already read) and the file as parsed; None if the
    entry is incomplete or damaged."""
    meta = entry_meta(folder) if meta is None else meta
    if meta is None:
        return None
    try:
        source = SourceFile(Path(meta["path"]), meta["path"], meta["instance"])
        fmt = FILE_FORMATS[meta["format"]] if meta["format"] else None
        result = None
        if (kept := meta.get("result")) is not None:
            prefixes = {int(k): v for k, v in kept["source_prefixes"].items()}
            result = ParseResult(
                tables={name: _read_table(folder, name, prefixes) for name in kept["tables"]},
                lines=kept["lines"],
                parsed=kept["parsed"],
                noise=kept["noise"],
                unparsed_examples=[tuple(x) for x in kept["unparsed_examples"]],
                unparsed_shapes=kept["unparsed_shapes"],
                notes=kept["notes"],
                formats=kept["formats"],
                span=_times(kept["span"]),
                instance_spans={k: _times(v) for k, v in kept["instance_spans"].items()},
                addresses=kept["addresses"],
                tester_summaries=kept["tester_summaries"],
                run_config=kept.get("run_config"),  # entries before it have none
            )
    except (OSError, ValueError, KeyError, TypeError, pl.exceptions.PolarsError):
        return None
    return meta, Parsed(source, fmt, result, meta["failure"])


def identity(path: Path) -> dict:
    """What tells one file from another across machines: its resolved path, and its
    uncompressed size and SHA-256 (a copy elsewhere has the same content)."""
    out = {"resolved": str(path.resolve()), "size": None, "digest": None}
    try:
        with path.open("rb") as handle:
            compressed = handle.read(2) == b"\x1f\x8b"
        opener = gzip.open if compressed else open
        digest, size = hashlib.sha256(), 0
        with opener(path, "rb") as handle:
            while chunk := handle.read(DIGEST_CHUNK):
                digest.update(chunk)
                size += len(chunk)
        out["size"], out["digest"] = size, digest.hexdigest()
    except (OSError, EOFError):
        pass
    return out


def _iso(span):
    return None if span is None else [t.isoformat() for t in span]


def _times(span):
    if span is None:
        return None
    return tuple(dt.datetime.fromisoformat(t) for t in span)
