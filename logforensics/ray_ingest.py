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
from logforensics.ingest import ParseContext
from logforensics.ingest.entries import write_entry
from logforensics.ingest.inputs import expand, read_one
from logforensics.ingest.sources import distinct_files

INSTALL_HINT = "--ray needs Ray: pip install 'logforensics[ray]'"


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


def write_one(path: str, display: str, instance: str | None, named: bool, ctx, entry: str) -> int:
    """The task: parse one file (`path` absolute: a worker's working folder is its own,
    `display` as the user named it) and write its entry; returns the lines it read."""
    names = {Path(path): instance} if instance else {}
    parsed = read_one(Path(path), ctx, names, display=display)
    write_entry(Path(entry), parsed, named, instance is not None)
    return parsed.result.lines if parsed.result else 0


def ingest(
    paths: list[Path],
    folder: Path,
    ctx: ParseContext,
    instance_names: dict[Path, str] | None = None,
    address: str | None = None,
    year_note: str | None = None,
    progress: Callable[[int, int, int], None] | None = None,
) -> Outcome:
    """Parse every file of `paths` as a Ray task into the dataset in `folder`.

    `address` is Ray's own (`auto`, `ray://head:10001`); None starts a local cluster
    (or joins the one `RAY_ADDRESS` names). A Ray session already started in this process
    is used as it is. A task that fails is an error naming its file; the others land.
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
        task = ray.remote(max_retries=1)(write_one)
        pending = {}
        for i in plan.todo:
            path, named = files[i]
            resolved = path.resolve()
            entry = plan.entry(i).resolve()
            ref = task.remote(str(resolved), str(path), names.get(resolved), named, ctx, str(entry))
            pending[ref] = path
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                path = pending.pop(ref)
                try:
                    outcome.lines += ray.get(ref)
                except ray.exceptions.RayError as exc:
                    outcome.errors.append(f"{path}: not ingested: its task failed: {_cause(exc)}")
            if progress:
                progress(len(plan.todo) - len(pending), len(plan.todo), outcome.lines)
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
