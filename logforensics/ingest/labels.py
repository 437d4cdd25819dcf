"""Instances named by labels (a pod, a scrape address, a host) rather than by a file.

Prometheus series and OpenTelemetry spans describe several instances in one
file or answer, each by its labels. Once every log is read, a label is mapped
to the log instance its evidence names: ``--instance NAME=LABEL``, a log of
that very name (``kubectl logs --prefix`` names pods), or a log whose start-up
lines announce that address; a label no evidence names keeps its own name.
"""

from __future__ import annotations

import polars as pl

from logforensics.ingest.base import ParseResult
from logforensics.ingest.sources import scrape_instance


def instance_names(
    pairs: list[tuple[str | None, str | None]], logs: dict[str, list[str]], given: dict[str, str]
) -> tuple[dict[str, str], list[str]]:
    """Label name → log instance, for the (name, address) label pairs evidence maps.

    A pair is an instance's name label (pod, host) and its address label, either
    may be None; its own name is the first present. `logs` is each log
    instance's announced addresses (every log instance a key), `given` label →
    name from ``--instance NAME=LABEL``. Returns the mapping and a note for each.
    """
    mapping, notes = {}, []
    for name, address in pairs:  # one pair an instance, not a row
        own = name or address
        if own is None or own in mapping:
            continue
        instance, why = _log_instance(name, address, logs, given)
        if instance is not None and instance != own:
            mapping[own] = instance
            notes.append(f"rows labelled {own} are instance {instance}: {why}")
    return mapping, notes


def _log_instance(
    name: str | None, address: str | None, logs: dict[str, list[str]], given: dict[str, str]
) -> tuple[str | None, str]:
    for label in (name, address):
        if label is not None and label in given:
            return given[label], f"--instance {given[label]}={label}"
    if name is not None and name in logs:
        return name, "a log of that name"
    if address is not None and logs:
        instance, why = scrape_instance(address, [address], logs)
        if instance is not None:
            return instance, f"its address: {why}"
    return None, ""


def label_pairs(addresses: dict[str, list[str]]) -> list[tuple[str | None, str | None]]:
    """(name, address) pairs back from `ParseResult.addresses` (own name → its address
    labels: none for a name alone, itself for an address alone)."""
    return [
        (own, None) if not found else (None, own) if own in found else (own, address)
        for own, found in sorted(addresses.items())
        for address in (found or [None])
    ]


def rename_instances(tables: dict[str, pl.DataFrame], mapping: dict[str, str]) -> None:
    """Rename label-named instances in place (`instance_names`' mapping)."""
    if not mapping:
        return
    for name, frame in tables.items():
        if "instance" in frame.columns:
            tables[name] = frame.with_columns(pl.col("instance").replace(mapping))


def name_by_labels(result: ParseResult, logs: dict[str, list[str]], given: dict[str, str]) -> None:
    """A parsed file whose rows are named by labels (`result.addresses`: own name → address
    labels): its instances renamed to the log instances evidence names, with notes."""
    mapping, notes = instance_names(label_pairs(result.addresses), logs, given)
    rename_instances(result.tables, mapping)
    result.notes.extend(notes)
