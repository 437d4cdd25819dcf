"""The canonical tables as a versioned Parquet dataset, one entry per input file.

`logforensics ingest PATHS --tables DIR` parses each file on its own and writes
this; `logforensics analyze --tables DIR…` reads one or several such datasets
(written by any number of machines over parts of the files) and makes every
decision that looks across files only then (`ingest.inputs.combine`); `--cache`
keeps the same entries, keyed by file and options. The layout (README "Tables
any engine can produce"):

    DIR/dataset.json                {format, version, context, year_note, entries,
                                     duplicates, errors}
    DIR/files/NNNNN/file.json       one input file: identity, account, what it found
    DIR/files/NNNNN/TABLE.parquet   its rows of each canonical table (model.SCHEMAS)

A table's `source` column packs a prefix id and a line number (`model.source_id`);
`file.json`'s `source_prefixes` says which text each id stands for.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from pathlib import Path

from logforensics.ingest import ParseContext
from logforensics.ingest.entries import read_entry, write_entry
from logforensics.ingest.inputs import Read
from logforensics.ingest.sources import Duplicate

TABLES_FORMAT = "logforensics-tables"
# 2: label columns are categoricals (`model.LABEL`); 3: `server_requests` has no `peer`,
# HTTP statuses are Int16 (`model.STATUS`), a client's step, concurrency, index and
# output tokens Int32 (`model.COUNT`); 4: `proxy_requests` has `attempts` and
# `also_reached` (a proxy's retries)
TABLES_VERSION = 4
# A dataset of version 2 holds every column of 3 (`peer` besides; statuses and counts as
# Int64), one of 3 every column of 4 but the retries (read as not logged): their entries
# are read as they are (conformed to the model).
READABLE_VERSIONS = {2, 3, TABLES_VERSION}


class TablesError(Exception):
    """A folder that is not a dataset of this version; the message names it."""


def write_dataset(
    folder: Path, read: Read, ctx: ParseContext, year_note: str | None = None
) -> None:
    """Every file of `read` as an entry of a new dataset in `folder` (which must be empty)."""
    if folder.exists() and any(folder.iterdir()):
        raise TablesError(f"{folder}: not empty (a dataset is written into a new folder)")
    entries = []
    for i, ((path, named), parsed) in enumerate(zip(read.files, read.parsed, strict=True)):
        name = f"{i:05d}"
        write_entry(folder / "files" / name, parsed, named, path in read.given)
        entries.append(name)
    manifest = {
        "format": TABLES_FORMAT,
        "version": TABLES_VERSION,
        "context": dataclasses.asdict(ctx),
        "year_note": year_note,
        "entries": entries,
        "duplicates": [
            {"path": str(d.path), "same_as": str(d.same_as), "reason": d.reason}
            for d in read.duplicates
        ],
        "errors": read.errors,
    }
    (folder / "dataset.json").write_text(json.dumps(manifest, default=str), encoding="utf-8")


@dataclasses.dataclass
class Datasets:
    """Datasets read back: their files as one `Read`, and the contexts they were parsed in."""

    read: Read
    contexts: list[dict]
    year_notes: list[str]


def read_datasets(folders: list[Path]) -> Datasets:
    """Several datasets as one: the same file in two of them (by path or content) once."""
    out = Read([], [], [], [], set())
    contexts, year_notes = [], []
    seen_paths: dict[str, Path] = {}
    seen_content: dict[tuple, Path] = {}
    for folder in folders:
        manifest = _manifest(folder)
        contexts.append(manifest["context"])
        if manifest.get("year_note"):
            year_notes.append(manifest["year_note"])
        out.errors += manifest["errors"]
        out.duplicates += [
            Duplicate(Path(d["path"]), Path(d["same_as"]), d["reason"])
            for d in manifest["duplicates"]
        ]
        for name in manifest["entries"]:
            entry = read_entry(folder / "files" / name)
            if entry is None:
                raise TablesError(f"{folder / 'files' / name}: a damaged or incomplete entry")
            meta, parsed = entry
            path = Path(meta["path"])
            content = (meta["size"], meta["digest"])
            earlier = seen_paths.get(meta["resolved"]) or seen_content.get(content)
            if earlier is not None:
                how = (
                    "the same file (in two datasets)"
                    if meta["resolved"] in seen_paths
                    else "identical content"
                )
                out.duplicates.append(Duplicate(path, earlier, how))
                continue
            seen_paths[meta["resolved"]] = path
            if meta["digest"]:
                seen_content[content] = path
            out.files.append((path, meta["named"]))
            out.parsed.append(parsed)
            if meta["instance_given"]:
                out.given.add(path)
    return Datasets(out, contexts, year_notes)


def context_of(datasets: Datasets) -> ParseContext | None:
    """The parse context all the datasets share; None when they were parsed in different ones."""
    first = datasets.contexts[0] if datasets.contexts else None
    if first is None or any(c != first for c in datasets.contexts[1:]):
        return None
    fields = {f.name for f in dataclasses.fields(ParseContext)}
    values = {k: v for k, v in first.items() if k in fields}
    for k in ("client_anchor", "scraped_at"):
        if values.get(k):
            values[k] = dt.datetime.fromisoformat(values[k])
    return ParseContext(**values)


def _one_of(versions: list[int]) -> str:
    """`2, 3 or 4`: the versions this reader takes, as the refusal names them."""
    *rest, last = map(str, versions)
    return f"{', '.join(rest)} or {last}" if rest else last


def _manifest(folder: Path) -> dict:
    try:
        manifest = json.loads((folder / "dataset.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TablesError(f"{folder}: no readable dataset.json ({exc})") from exc
    if manifest.get("format") != TABLES_FORMAT or manifest.get("version") not in READABLE_VERSIONS:
        raise TablesError(
            f"{folder}: not a {TABLES_FORMAT} dataset of version "
            f"{_one_of(sorted(READABLE_VERSIONS))} "
            f"(found {manifest.get('format')} {manifest.get('version')})"
        )
    return manifest
