"""The ingest stage: paths in, canonical tables and an account of every file out."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import polars as pl

from logforensics import cache, model
from logforensics.ingest import FILE_FORMATS, InputError, ParseContext, SourceFile, detect, evidence
from logforensics.ingest.base import Parsed
from logforensics.ingest.sources import (
    Duplicate,
    Life,
    distinct_files,
    instance_name,
    later_lives,
    not_a_log,
    rotation_order,
    scrape_instance,
)

DEFAULT_JOBS = min(4, os.cpu_count() or 1)  # files parsed at once
# Names that say a file is a document, config or script (its content must agree).
DOCUMENT_SUFFIXES = {".md", ".markdown", ".rst", ".conf", ".cfg", ".ini", ".toml", ".py", ".sh"}


@dataclass
class InputFile:
    """One file as the report's inputs section shows it."""

    path: str
    format: str | None
    role: str | None
    instance: str | None
    lines: int = 0
    parsed: int = 0
    noise: int = 0
    formats: list[str] = field(default_factory=list)
    records: dict[str, int] = field(default_factory=dict)
    span: tuple[dt.datetime, dt.datetime] | None = None
    unparsed_examples: list[tuple[int, str]] = field(default_factory=list)
    unparsed_shapes: list[dict] = field(default_factory=list)  # see ingest.shapes
    tester_summaries: list[dict] = field(default_factory=list)  # the tester's own figures
    run_config: dict | None = None  # the run's configuration, as its tester wrote it
    notes: list[str] = field(default_factory=list)
    skipped: str | None = None  # why the file was not read, if it was not

    @property
    def unparsed(self) -> int:
        return self.lines - self.parsed - self.noise


@dataclass
class Inputs:
    tables: dict[str, pl.DataFrame]
    files: list[InputFile]
    errors: list[str]  # paths named on the command line that could not be used
    coverage: dict[str, tuple[dt.datetime, dt.datetime]]  # instance → span its logs cover
    notes: list[str] = field(default_factory=list)
    # instance → the host:port addresses its own start-up lines name, as printed
    # ("Starting vLLM server on http://127.0.0.1:8001" → "127.0.0.1:8001"; from
    # `non-default args` "host:port", or ":port" where no host was printed)
    addresses: dict[str, list[str]] = field(default_factory=dict)
    # client files (or rows) not re-counted: the same requests as another file's
    same_run: list[evidence.SameRun] = field(default_factory=list)
    # each load tester's own figures, with the file they came from: {file, tester, step,
    # concurrency, sent, ok, failed, latency_s: {min, p50, p95, p99, max}, ...}
    tester_summaries: list[dict] = field(default_factory=list)


def expand(paths: list[Path]) -> tuple[list[tuple[Path, bool]], list[str]]:
    """Files to read (and whether each was named explicitly), plus errors for missing paths."""
    files, errors = [], []
    for path in paths:
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
            if not found:
                errors.append(f"{path}: folder holds no files")
            files.extend((p, False) for p in found)
        elif path.is_file():
            files.append((path, True))
        else:
            errors.append(f"{path}: no such file or folder")
    return files, errors


def read_one(
    path: Path,
    ctx: ParseContext,
    instance_names: dict[Path, str],
    cache_dir: Path | None = None,
    display: str | None = None,
) -> Parsed:
    """Sniff and parse one file (or take it from the --cache); `display`: its path as the
    user gave it, where `path` is another name of it (another working folder's)."""
    instance = instance_names.get(path.resolve(), instance_name(Path(display or path)))
    source = SourceFile(path, display or str(path), instance)
    try:
        entry = cache.key(path, source.instance, ctx) if cache_dir else None
        if entry and (hit := cache.load(cache_dir, entry, source)):
            return hit
        one = _parse_one(source, path, ctx)
        if entry:
            cache.store(cache_dir, entry, one)
        return one
    except (InputError, OSError) as exc:
        message = str(exc) if isinstance(exc, InputError) else f"{path}: cannot read: {exc}"
        return Parsed(source, None, None, message)


def _parse_one(source: SourceFile, path: Path, ctx: ParseContext) -> Parsed:
    # a document or config that quotes log lines (a write-up, a GROUND_TRUTH.md)
    if path.suffix.lower() in DOCUMENT_SUFFIXES and (what := not_a_log(source.head(), path.suffix)):
        return Parsed(source, None, None, f"not a log: {what}")
    fmt = detect(source)
    if fmt is None:
        if source.is_blank():
            return Parsed(source, None, None, "empty file")
        what = not_a_log(source.head(), path.suffix)
        return Parsed(source, None, None, f"not a log: {what}" if what else "no known format")
    result = fmt.parse(source, ctx)
    source.release()
    # a column of one value held as that value from here on, while the other files parse
    result.tables = {name: model.constants_as_literals(t) for name, t in result.tables.items()}
    return Parsed(source, fmt, result, None)


def load(
    paths: list[Path],
    ctx: ParseContext,
    instance_names: dict[Path, str] | None = None,
    cache_dir: Path | None = None,
    progress: Callable[[int, int, int], None] | None = None,
    jobs: int = DEFAULT_JOBS,
    instance_labels: dict[str, str] | None = None,
) -> Inputs:
    """Read every file; a file that fails is reported, never hides the others.

    `progress(files_done, files_total, lines_so_far)` is called after each file;
    `instance_labels` names instances that metrics label otherwise (label → name).
    """
    return combine(read(paths, ctx, instance_names, cache_dir, progress, jobs), instance_labels)


class Sink(Protocol):
    """Takes each file's parse as `read` completes it; what it returns is kept in its place
    (`tables.EntryWriter` writes it to a dataset and keeps its account only)."""

    def planned(self, files: list[tuple[Path, bool]], given: set[Path]) -> None: ...

    def take(self, index: int, parsed: Parsed) -> Parsed: ...


@dataclass
class Read:
    """Every file of some paths parsed on its own, before any decision across files.

    `files`: (path, named on the command line) in input order, `parsed` beside
    them; `duplicates`: files left out as copies of others; `given`: the files
    whose instance the user named (--instance).
    """

    files: list[tuple[Path, bool]]
    parsed: list[Parsed]
    duplicates: list[Duplicate] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    given: set[Path] = field(default_factory=set)


def read(
    paths: list[Path],
    ctx: ParseContext,
    instance_names: dict[Path, str] | None = None,
    cache_dir: Path | None = None,
    progress: Callable[[int, int, int], None] | None = None,
    jobs: int = DEFAULT_JOBS,
    sink: Sink | None = None,
) -> Read:
    """Parse each file independently (a few at a time); nothing here looks across files
    but one file, once (`distinct_files`). `sink` takes each parse as it completes."""
    instance_names = {p.resolve(): n for p, n in (instance_names or {}).items()}
    files, errors = expand(paths)
    files, duplicates = distinct_files(files)
    given = {path for path, _ in files if path.resolve() in instance_names}
    if sink is not None:
        sink.planned(files, given)
    # polars reads and parses without the GIL, so files are parsed a few at a
    # time: 1.6× faster over the bench's eight instance logs on two cores, for
    # a second file's working memory. Largest first, so one big file does not
    # run alone at the end; results keep the input order.
    parsed: list = [None] * len(files)
    lines_so_far = 0
    # each file's `source` prefix registered in input order, before the threads race to it:
    # sorts that break ties by `source` then order files alike in every run
    for path, _ in files:
        model.source_prefix(f"{path}:")
    order = sorted(range(len(files)), key=lambda i: -file_size(files[i][0]))
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {
            pool.submit(read_one, files[i][0], ctx, instance_names, cache_dir): i for i in order
        }
        for done, future in enumerate(as_completed(futures), start=1):
            # (the future let go of: it holds the file's tables, which a sink lets go of)
            i, one = futures.pop(future), future.result()
            lines_so_far += one.result.lines if one.result else 0
            parsed[i] = one if sink is None else sink.take(i, one)
            del future, one
            if progress:
                progress(done, len(files), lines_so_far)
    return Read(files, parsed, duplicates, errors, given)


def combine(read: Read, instance_labels: dict[str, str] | None = None) -> Inputs:
    """The decisions across files, then the canonical tables and every file's account.

    Scrapes mapped to the instance whose start-up addresses they name, rows
    named by labels given their instances, rotated parts ordered, duplicates
    listed, client files that copy another's requests (or rows repeated)
    counted once, each tester's figures once, each instance's coverage.
    """
    files, parsed, errors = read.files, read.parsed, list(read.errors)
    duplicates = read.duplicates
    collected: dict[str, list[pl.DataFrame]] = {name: [] for name in model.SCHEMAS}
    accounts: list[InputFile] = []
    instance_spans: list[tuple[str, tuple]] = []
    _join_lives(files, parsed, read.given)
    _attribute_scrapes(files, parsed, read.given)
    logs = log_addresses(parsed)
    for _, fmt, result, _ in parsed:
        if fmt is not None:
            fmt.name_instances(result, logs, instance_labels or {})
    rotated = rotation_order([path for path, _ in files])
    addresses: dict[str, list[str]] = {}
    for (path, named), (source, fmt, result, failure) in zip(files, parsed, strict=True):
        display = str(path)
        if path in rotated:
            place, parts = rotated[path]
            note = f"rotated part {place} of {parts} of {source.instance}'s log (oldest first)"
            (result.notes if result else []).append(note)
        if failure is not None:
            accounts.append(InputFile(display, None, None, None, skipped=failure))
            if named or not failure.startswith(("empty file", "no known format", "not a log")):
                errors.append(failure if failure.startswith(display) else f"{display}: {failure}")
            continue
        records = {name: frame.height for name, frame in result.tables.items() if frame.height}
        if fmt.role == "server":
            instance_spans += list(result.instance_spans.items())
            if not (fmt.metrics_source or fmt.labelled_rows):
                for instance, own in result.addresses.items():
                    known = addresses.setdefault(instance, [])
                    known += [a for a in own if a not in known]
        served = sorted(set(result.instance_spans) or {source.instance})
        if fmt.metrics_source or fmt.labelled_rows:
            own = [source.instance] if source.instance and not fmt.labelled_rows else []
            served = described(result) or own
        for name, frame in result.tables.items():
            collected[name].append(frame)
        accounts.append(
            InputFile(
                path=display,
                format=fmt.name,
                role=fmt.role,
                instance=(", ".join(served) or None) if fmt.role == "server" else None,
                lines=result.lines,
                parsed=result.parsed,
                noise=result.noise,
                formats=result.formats,
                records=records,
                span=result.span or _span(result.tables),
                unparsed_examples=result.unparsed_examples,
                unparsed_shapes=result.unparsed_shapes,
                tester_summaries=result.tester_summaries,
                run_config=result.run_config,
                notes=result.notes,
            )
        )
    formats = {a.path: a.format for a in accounts}
    for dup in duplicates:
        if dup.path == dup.same_as:
            account = next(a for a in accounts if a.path == str(dup.path))
            account.notes.append(f"reached twice, read once: {dup.reason}")
            continue
        accounts.append(
            InputFile(
                str(dup.path),
                formats.get(str(dup.same_as)),
                None,
                None,
                skipped=f"read once: {dup.reason} as {dup.same_as}",
            )
        )
    collected["client_requests"], copies = evidence.drop_copied_files(
        [f for f in collected["client_requests"] if f.height]
    )
    tables = {  # (a column no file filled as one null: a dataset's 20M client table, 270 MB)
        name: model.constants_as_literals(pl.concat(frames)) if frames else model.empty(name)
        for name, frames in collected.items()
    }
    tables["client_requests"], repeats = evidence.drop_repeated_rows(tables["client_requests"])
    by_path = {a.path: a for a in accounts}
    for same in copies + repeats:
        if same.file in by_path:
            by_path[same.file].notes.append(same.note())
    summaries = _distinct_summaries(accounts, {same.file for same in copies})
    coverage: dict[str, tuple[dt.datetime, dt.datetime]] = {}
    for name, (first, last) in instance_spans:
        lo, hi = coverage.get(name, (first, last))
        coverage[name] = (min(lo, first), max(hi, last))
    return Inputs(
        tables=tables,
        files=accounts,
        errors=errors,
        coverage=coverage,
        addresses=addresses,
        same_run=copies + repeats,
        tester_summaries=summaries,
    )


def _join_lives(files, parsed, given: set[Path]) -> None:
    """A server log holding a later life of another log's instance (`later_lives`) is
    read as that instance, and the end of the life before is its `restart`: the earlier
    log's last shutdown line, else (killed: no line) its last row. A log named by the user
    (--instance) keeps that name."""
    logs, results = [], {}
    for (path, _), (source, fmt, result, _) in zip(files, parsed, strict=True):
        if fmt is None or fmt.role != "server" or fmt.metrics_source or fmt.labelled_rows:
            continue
        names = set(result.instance_spans) or {source.instance}
        name = source.instance if len(names) == 1 else None
        span = result.instance_spans.get(name) or result.span
        if name is None or span is None or path in given or not result.addresses.get(name):
            continue
        logs.append(Life(path, name, tuple(result.addresses[name]), *span))
        results[path] = (source, result)
    for path, (name, before) in later_lives(logs).items():
        source, result = results[path]
        old = source.instance
        source.instance = name
        result.tables = {
            table: frame.with_columns(
                pl.when(pl.col("instance") == old)
                .then(pl.lit(name))
                .otherwise(pl.col("instance"))
                .cast(frame.schema["instance"])
                .alias("instance")
            )
            if "instance" in frame.columns
            else frame
            for table, frame in result.tables.items()
        }
        result.instance_spans = {
            (name if k == old else k): v for k, v in result.instance_spans.items()
        }
        result.addresses = {(name if k == old else k): v for k, v in result.addresses.items()}
        earlier = results[before.path][1]
        shared = ", ".join(a for a in result.addresses.get(name, []) if a in before.addresses)
        result.notes.append(
            f"a later life of {name}: it announces {shared} as {before.path.name} did and "
            f"begins after that log ended; read as {name}, restarted"
        )
        earlier.add("engine_events", _restart_row(earlier, name, before, path, shared))


def _restart_row(earlier, name: str, before: Life, later: Path, address: str) -> pl.DataFrame:
    """The `restart` event where the life before ended: its last shutdown line, else its
    log's last row (a killed server prints none)."""
    events = earlier.table("engine_events").filter(pl.col("instance") == before.name)
    again = events.filter(pl.col("kind") == "restarted")["at"].max()
    stops = events.filter(pl.col("kind") == "shutdown")
    if again is not None:
        stops = stops.filter(pl.col("at") >= again)
    if stops.height:
        row = stops.sort("at", "source").tail(1).select("at", "source")
        how = "an orderly shutdown"
    else:
        rows = pl.concat(
            [
                f.select("at", "source")
                for f in earlier.tables.values()
                if {"at", "source"} <= set(f.columns)
            ]
        ).drop_nulls()
        row = rows.sort("at", "source").tail(1)
        how = "its last line, with no shutdown line: killed or crashed"
    return row.select(
        pl.lit(name).alias("instance"),
        "at",
        pl.lit("restart").alias("kind"),
        pl.lit(
            f"{before.path.name} ends ({how}); {later.name} starts {name} again on {address}"
        ).alias("detail"),
        "source",
    )


def _attribute_scrapes(files, parsed, given: set[Path]) -> None:
    """Give each saved /metrics scrape the instance its evidence names (or none).

    A scrape named by the user (--instance) keeps that name. Without any
    instance log there is nothing to map to, and a scrape keeps its own name.
    """
    addresses = log_addresses(parsed)
    if not addresses:
        return
    for (path, _), (source, fmt, result, _) in zip(files, parsed, strict=True):
        if fmt is None or fmt.name != "prometheus_scrape" or path in given:
            continue
        if not any(frame.height for frame in result.tables.values()):
            continue  # no engine's metrics (a router's or proxy's own): no instance to name
        own_name = source.instance
        labelled = result.addresses.get(own_name, [])
        instance, why = scrape_instance(own_name, labelled, addresses)
        if instance == own_name:
            continue
        source.instance = instance
        result.tables = {
            name: frame.with_columns(pl.lit(instance, dtype=model.LABEL).alias("instance"))
            if "instance" in frame.columns
            else frame
            for name, frame in result.tables.items()
        }
        result.notes.append(
            f"a /metrics scrape mapped to {instance}: {why}"
            if instance
            else f"metrics of an unknown instance: {why}; its rows count for no instance "
            "(name it with --instance NAME=PATH)"
        )


def log_addresses(parsed) -> dict[str, list[str]]:
    """Every instance a server log names, with the addresses its start-up lines announce."""
    addresses: dict[str, list[str]] = {}
    for source, fmt, result, _ in parsed:
        if fmt is None or fmt.role != "server" or fmt.metrics_source:
            continue
        if fmt.labelled_rows:  # its instances are its rows' (label) names, addresses unknown
            for instance in described(result):
                addresses.setdefault(instance, [])
            continue
        for instance in set(result.instance_spans) or {source.instance}:
            addresses.setdefault(instance, [])
        for instance, own in result.addresses.items():
            addresses.setdefault(instance, []).extend(own)
    return addresses


def described(result) -> list[str]:
    """The instances a metrics source's rows describe."""
    names = {
        name
        for frame in result.tables.values()
        if "instance" in frame.columns
        for name in frame["instance"].drop_nulls().unique().to_list()
    }
    return sorted(names)


def file_size(path: Path) -> int:
    """A file's size on disk; 0 where it cannot be read (its reader says why)."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _span(tables: dict[str, pl.DataFrame]) -> tuple[dt.datetime, dt.datetime] | None:
    times = [
        frame.select(pl.col(c).min().alias("lo"), pl.col(c).max().alias("hi"))
        for frame in tables.values()
        for c in ("at", "started_at", "ended_at")
        if c in frame.columns and frame.height
    ]
    if not times:
        return None
    both = pl.concat(times).select(pl.col("lo").min(), pl.col("hi").max()).row(0)
    return both if both[0] is not None else None


def _distinct_summaries(accounts: list[InputFile], copies: set[str]) -> list[dict]:
    """Every tester's own figures once: one run's json, csv and console repeat them.

    A copy's figures are its record's; among files of one tester, the same step with
    the same counts is kept from the file sniffed first (the report before its
    summary table and console).
    """
    rank = {name: fmt.priority for name, fmt in FILE_FORMATS.items()}
    ordered = sorted(
        (a for a in accounts if a.path not in copies and a.tester_summaries),
        key=lambda a: rank.get(a.format, 99),
    )
    kept: dict[tuple, list] = {}  # figures → the runs they were kept for
    out = []
    for account in ordered:
        for summary in account.tester_summaries:
            key = (
                summary.get("tester", "").split(" (")[0],
                summary.get("phase"),
                summary.get("step"),
                summary.get("concurrency"),
                summary.get("sent"),
                summary.get("ok"),
                summary.get("failed"),
            )
            run = summary.get("run")
            runs = kept.setdefault(key, [])
            if any(r is None or run is None or r == run for r in runs):
                continue  # the same figures of the same run (a file that names none agrees)
            runs.append(run)
            out.append({"file": account.path, **summary})
    return out
