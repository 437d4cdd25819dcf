"""The canonical tables as a versioned Parquet dataset, one entry per input file.

`logforensics ingest PATHS --tables DIR` parses each file on its own and writes
this; `logforensics analyze --tables DIR…` reads one or several such datasets
(written by any number of machines over parts of the files) and makes every
decision that looks across files only then (`ingest.inputs.combine`); `--cache`
keeps the same entries, keyed by file and options. The layout (README "Tables
any engine can produce"):

    DIR/plan.json                   {format, version, inputs, context}: written first
    DIR/dataset.json                {format, version, context, year_note, entries,
                                     duplicates, errors}: written last
    DIR/files/NNNNN/file.json       one input file: identity, account, what it found
    DIR/files/NNNNN/TABLE.parquet   its rows of each canonical table (model.SCHEMAS)

A table's `source` column packs a prefix id and a line number (`model.source_id`);
`file.json`'s `source_prefixes` says which text each id stands for.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from logforensics.ingest import ParseContext
from logforensics.ingest.base import Parsed
from logforensics.ingest.entries import (
    ENTRY_FILE,
    entry_meta,
    read_entry,
    register_prefixes,
    write_entry,
)
from logforensics.ingest.inputs import Read
from logforensics.ingest.sources import Duplicate

TABLES_FORMAT = "logforensics-tables"
PLAN_FILE = "plan.json"  # written first: the files a dataset is of, for a rerun to finish it
# 2: label columns are categoricals (`model.LABEL`); 3: `server_requests` has no `peer`,
# HTTP statuses are Int16 (`model.STATUS`), a client's step, concurrency, index and
# output tokens Int32 (`model.COUNT`); 4: `proxy_requests` has `attempts` and
# `also_reached` (a proxy's retries); 5: `client_requests` has `ttft_s` (the tester's time
# to first token); 6: `client_requests`' `error` is a label (a dictionary-encoded string)
TABLES_VERSION = 6
# A dataset of version 2 holds every column of 3 (`peer` besides; statuses and counts as
# Int64), one of 3 every column of 4 but the retries (read as not logged): their entries
# are read as they are (conformed to the model); one of 4 every column of 5 but `ttft_s`
# (read as not recorded); one of 5 every column of 6 (its `error` text read as a label).
READABLE_VERSIONS = {2, 3, 4, 5, TABLES_VERSION}


class TablesError(Exception):
    """A folder that is not a dataset of this version; the message names it."""


class EntryWriter:
    """A dataset written file by file as `inputs.read` parses them (its `Sink`): each
    file's entry as soon as its parse completes, and its tables let go of then, so an
    archive of many files holds the ones being parsed, not all of them. (The 150M bench
    bundle peaks at ~11 GB either way: its two biggest files, parsed at once, set it.)"""

    def __init__(self, folder: Path, ctx: ParseContext) -> None:
        self.folder, self.ctx = folder, ctx
        self.plan: Plan | None = None
        self.files: list[tuple[Path, bool]] = []
        self.given: set[Path] = set()
        self.written = 0

    def planned(self, files: list[tuple[Path, bool]], given: set[Path]) -> None:
        """The dataset's plan, written before any file is parsed (a rerun keeps its entries)."""
        self.plan = plan_dataset(self.folder, files, self.ctx)
        self.files, self.given = files, given

    def take(self, index: int, parsed: Parsed) -> Parsed:
        """Write the file's entry (unless a run before this one did); keep its account."""
        assert self.plan is not None, "planned() comes first"
        if index in self.plan.todo:
            path, named = self.files[index]
            write_entry(self.plan.entry(index), parsed, named, path in self.given)
            self.written += 1
        if parsed.result is None:
            return parsed
        return parsed._replace(result=dataclasses.replace(parsed.result, tables={}))

    def finish(self, read: Read, year_note: str | None) -> int:
        """`dataset.json`, last; how many entries this run wrote."""
        assert self.plan is not None, "planned() comes first"
        finish_dataset(self.plan, self.ctx, year_note, read.duplicates, read.errors)
        return self.written


@dataclasses.dataclass
class Plan:
    """The entries a dataset will hold, one per file in input order, and which of them
    are still to write (a rerun after a failure writes only those)."""

    folder: Path
    inputs: list[str]  # each file's path as given
    todo: list[int]  # indices into `inputs`

    def entry(self, i: int) -> Path:
        return self.folder / "files" / f"{i:05d}"

    def done(self) -> list[int]:
        """The files whose entry is complete, in input order."""
        return [i for i in range(len(self.inputs)) if _complete(self.entry(i), self.inputs[i])]


def plan_dataset(folder: Path, files: list[tuple[Path, bool]], ctx: ParseContext) -> Plan:
    """A new dataset's plan (written to `plan.json` first), or the plan of an unfinished
    one over the same files in the same context, whose complete entries are kept."""
    planned = json.loads(
        json.dumps(
            {
                "format": TABLES_FORMAT,
                "version": TABLES_VERSION,
                "inputs": [str(path) for path, _ in files],
                "context": dataclasses.asdict(ctx),
            },
            default=str,
        )
    )
    if folder.exists() and any(folder.iterdir()):
        try:
            earlier = json.loads((folder / PLAN_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raise TablesError(
                f"{folder}: not empty (a dataset is written into a new folder)"
            ) from None
        if earlier != planned:
            raise TablesError(
                f"{folder}: a dataset of other files or options (a rerun that completes "
                "one names the same paths with the same options)"
            )
    else:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / PLAN_FILE).write_text(json.dumps(planned), encoding="utf-8")
    plan = Plan(folder, planned["inputs"], [])
    complete = set(plan.done())
    plan.todo = [i for i in range(len(files)) if i not in complete]
    return plan


def finish_dataset(
    plan: Plan,
    ctx: ParseContext,
    year_note: str | None,
    duplicates: list[Duplicate],
    errors: list[str],
) -> None:
    """`dataset.json`, written last: the complete entries, and why any file has none."""
    manifest = {
        "format": TABLES_FORMAT,
        "version": TABLES_VERSION,
        "context": dataclasses.asdict(ctx),
        "year_note": year_note,
        "entries": [plan.entry(i).name for i in plan.done()],
        "duplicates": [
            {"path": str(d.path), "same_as": str(d.same_as), "reason": d.reason} for d in duplicates
        ],
        "errors": errors,
    }
    (plan.folder / "dataset.json").write_text(json.dumps(manifest, default=str), encoding="utf-8")


def _complete(entry: Path, path: str) -> bool:
    """An entry whose `file.json` (written last) is there and names the file."""
    try:
        meta = json.loads((entry / ENTRY_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    tables = (meta.get("result") or {}).get("tables", [])
    return meta.get("path") == path and all((entry / f"{t}.parquet").is_file() for t in tables)


@dataclasses.dataclass
class Datasets:
    """Datasets read back: their files as one `Read`, and the contexts they were parsed in."""

    read: Read
    contexts: list[dict]
    year_notes: list[str]


ENTRIES_AT_ONCE = 2  # entries read at once (`read_datasets`)


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
        kept: list[tuple[Path, dict]] = []
        for name in manifest["entries"]:
            entry_folder = folder / "files" / name
            meta = entry_meta(entry_folder)
            if meta is None:
                raise TablesError(f"{entry_folder}: a damaged or incomplete entry")
            path = Path(meta["path"])
            content = (meta["size"], meta["digest"])
            earlier = seen_paths.get(meta["resolved"]) or seen_content.get(content)
            if earlier is not None:  # (told by its file.json: its tables are never read)
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
            register_prefixes(meta)  # in the listed order, before the threads race to them
            kept.append((entry_folder, meta))
        # polars reads without the GIL: two entries at once read the 20M dataset in 0.7 s, not 1.1
        with ThreadPoolExecutor(max_workers=ENTRIES_AT_ONCE) as pool:
            entries = list(pool.map(read_entry, *zip(*kept, strict=True))) if kept else []
        for (entry_folder, _), entry in zip(kept, entries, strict=True):
            if entry is None:
                raise TablesError(f"{entry_folder}: a damaged or incomplete entry")
            meta, parsed = entry
            out.files.append((Path(meta["path"]), meta["named"]))
            out.parsed.append(parsed)
            if meta["instance_given"]:
                out.given.add(Path(meta["path"]))
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
    except FileNotFoundError:
        if (folder / PLAN_FILE).is_file():
            raise TablesError(
                f"{folder}: an unfinished dataset (its ingest stopped before the end: "
                "run it again with the same paths and options to finish it)"
            ) from None
        raise TablesError(f"{folder}: no readable dataset.json (no dataset.json)") from None
    except (OSError, ValueError) as exc:
        raise TablesError(f"{folder}: no readable dataset.json ({exc})") from exc
    if manifest.get("format") != TABLES_FORMAT or manifest.get("version") not in READABLE_VERSIONS:
        raise TablesError(
            f"{folder}: not a {TABLES_FORMAT} dataset of version "
            f"{_one_of(sorted(READABLE_VERSIONS))} "
            f"(found {manifest.get('format')} {manifest.get('version')})"
        )
    return manifest
