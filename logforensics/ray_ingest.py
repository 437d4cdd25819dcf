"""`logforensics ingest --ray`: one Ray task per input file, each writing its entry of
the dataset exactly as a local `ingest` does; every decision across files stays in
`analyze --tables`.

Ray is an optional extra (`pip install 'logforensics[ray]'`): only this module imports
it, and only when `--ray` is given. The dataset's folder and the input files must be at
the same paths on every worker (a shared volume: NFS, a PVC mounted in every pod).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from logforensics import tables
from logforensics.ingest import (
    FILE_FORMATS,
    InputError,
    ParseContext,
    SourceFile,
    detect,
    serverlog,
)
from logforensics.ingest.base import Parsed
from logforensics.ingest.entries import write_entry
from logforensics.ingest.inputs import DOCUMENT_SUFFIXES, expand, read_one
from logforensics.ingest.sources import distinct_files, instance_name

INSTALL_HINT = "--ray needs Ray: pip install 'logforensics[ray]'"
# a text log bigger than twice this is cut into pieces of about this size, a task each
PIECE_BYTES = 256 << 20


class RayMissing(Exception):
    """Ray is not installed (it is an optional extra)."""


@dataclass
class Outcome:
    """What a run of tasks did: files in the dataset, entries kept from an earlier run (a
    rerun writes only those missing), lines this run read, errors (each naming its file)."""

    files: int = 0
    kept: int = 0
    lines: int = 0
    errors: list[str] = field(default_factory=list)
    pieces: dict[str, int] = field(default_factory=dict)  # a file read in pieces → how many


def write_one(
    path: str, display: str, instance: str | None, named: bool, ctx, entry: str
) -> tuple[int, int]:
    """The task: parse one file (`path` absolute: a worker's working folder is its own,
    `display` as the user named it) and write its entry; returns the lines it read and
    the pieces it was read in (0: whole)."""
    names = {Path(path): instance} if instance else {}
    parsed = read_one(Path(path), ctx, names, display=display)
    write_entry(Path(entry), parsed, named, instance is not None)
    return (parsed.result.lines if parsed.result else 0), 0


def _source(path: str, display: str, instance: str | None) -> SourceFile:
    return SourceFile(Path(path), display, instance or instance_name(Path(display)))


def plan_one(
    path: str, display: str, instance: str | None, ctx, piece_bytes: int
) -> tuple[str, list[serverlog.PiecePlan]] | None:
    """The task that cuts a big log: its format and pieces, or None (read it whole: not
    a text log of lines, compressed, or no cut found)."""
    if Path(display).suffix.lower() in DOCUMENT_SUFFIXES:
        return None
    source = _source(path, display, instance)
    try:
        fmt = detect(source)
        if fmt is None or fmt.name not in serverlog.SPLIT_FORMATS:
            return None
        plans = serverlog.plan_pieces(source, ctx, piece_bytes)
    except (InputError, OSError):
        return None
    return (fmt.name, plans) if plans else None


def piece_one(
    path: str, display: str, instance: str | None, ctx, fmt: str, plan: serverlog.PiecePlan
) -> serverlog.Piece | None:
    """The task that reads one piece of a big log."""
    return serverlog.parse_piece(
        _source(path, display, instance), ctx, FILE_FORMATS[fmt].role, plan
    )


def merge_one(
    path: str, display: str, instance: str | None, named: bool, ctx, entry: str, fmt: str, *pieces
) -> tuple[int, int]:
    """The task that joins a big log's pieces into its entry (read whole where they
    cannot give a whole read's result); returns the lines it holds and the pieces it
    was read in (0: read whole after all)."""
    source = _source(path, display, instance)
    result = serverlog.parse_pieces(FILE_FORMATS[fmt], source, ctx, list(pieces))
    if result is None:
        parsed = read_one(
            Path(path), ctx, {Path(path): instance} if instance else {}, display=display
        )
    else:
        parsed = Parsed(source, FILE_FORMATS[fmt], result, None)
    write_entry(Path(entry), parsed, named, instance is not None)
    return (parsed.result.lines if parsed.result else 0), (len(pieces) if result else 0)


def ingest(
    paths: list[Path],
    folder: Path,
    ctx: ParseContext,
    instance_names: dict[Path, str] | None = None,
    address: str | None = None,
    year_note: str | None = None,
    progress: Callable[[int, int, int], None] | None = None,
    piece_bytes: int = PIECE_BYTES,
) -> Outcome:
    """Parse every file of `paths` as a Ray task into the dataset in `folder`.

    `address` is Ray's own (`auto`, `ray://head:10001`); None starts a local cluster
    (or joins the one `RAY_ADDRESS` names). A Ray session already started in this process
    is used as it is. A text log bigger than twice `piece_bytes` is cut into pieces, each
    read by a task and joined by another (`serverlog.plan_pieces`; the entry is what a
    whole read gives). A task that fails is an error naming its file; the others land.
    """
    try:
        import ray
    except ImportError:
        raise RayMissing(INSTALL_HINT) from None
    names = {p.resolve(): n for p, n in (instance_names or {}).items()}
    files, errors = expand(paths)
    files, duplicates = distinct_files(files)
    plan = tables.plan_dataset(folder, files, ctx)
    outcome = Outcome(files=len(files), kept=len(files) - len(plan.todo), errors=list(errors))
    started = not ray.is_initialized()
    if started:
        ray.init(
            address=address,
            log_to_driver=False,
            include_dashboard=False,
            logging_level=logging.WARNING,
        )
    try:
        whole, cut = (ray.remote(max_retries=1)(f) for f in (write_one, plan_one))
        piece, join = (ray.remote(max_retries=1)(f) for f in (piece_one, merge_one))
        pending: dict = {}  # ref → (file index, "entry" | "plan")
        for i in plan.todo:
            path, named = files[i]
            args = (str(path.resolve()), str(path), names.get(path.resolve()))
            if path.stat().st_size > 2 * piece_bytes:  # (compressed: planned whole)
                pending[cut.remote(*args, ctx, piece_bytes)] = (i, "plan")
            else:
                entry = str(plan.entry(i).resolve())
                pending[whole.remote(args[0], args[1], args[2], named, ctx, entry)] = (i, "entry")
        done_files = 0
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                i, kind = pending.pop(ref)
                path, named = files[i]
                args = (str(path.resolve()), str(path), names.get(path.resolve()))
                entry = str(plan.entry(i).resolve())
                try:
                    value = ray.get(ref)
                except ray.exceptions.RayError as exc:
                    outcome.errors.append(f"{path}: not ingested: its task failed: {_cause(exc)}")
                    done_files += 1
                    continue
                if kind == "plan":
                    if value is None:
                        later = whole.remote(args[0], args[1], args[2], named, ctx, entry)
                    else:
                        fmt, cuts = value
                        parts = [piece.remote(*args, ctx, fmt, c) for c in cuts]
                        later = join.remote(*args, named, ctx, entry, fmt, *parts)
                    pending[later] = (i, "entry")
                    continue
                lines, parts = value
                outcome.lines += lines
                if parts:
                    outcome.pieces[str(path)] = parts
                done_files += 1
            if progress:
                progress(done_files, len(plan.todo), outcome.lines)
    finally:
        if started:
            ray.shutdown()
    tables.finish_dataset(plan, ctx, year_note, duplicates, outcome.errors)
    return outcome


def _cause(exc: Exception) -> str:
    """The task's own exception, as one line (Ray wraps it with the remote traceback)."""
    cause = getattr(exc, "cause", None)
    if cause is not None:
        return f"{type(cause).__name__}: {cause}".splitlines()[0]
    return str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
