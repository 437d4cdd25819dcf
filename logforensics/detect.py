"""What each input file is, before any analysis: the `detect` command's data.

`detect_paths` reads the inputs once, through `logforensics.inputs.load`
(the very parse `analyze` does), and reports per file its formats, the
account of its lines, the records it gave, the time it covers and the
instance it names. `render_detect_table` prints that as a plain-text table.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from logforensics.ingest import ParseContext
from logforensics.ingest.inputs import InputFile, load


def _iso(value) -> str | None:
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.timezone.utc)
        return value.isoformat().replace("+00:00", "Z")
    return None


def _row(f: InputFile) -> dict:
    formats = list(f.formats) or ([f.format] if f.format else [])
    return {
        "path": f.path,
        "format": f.format,
        "formats": formats,
        "role": f.role,
        "lines": f.lines,
        "parsed": f.parsed,
        "unparsed": f.unparsed,
        "noise": f.noise,
        "records": dict(f.records),
        "span": [_iso(f.span[0]), _iso(f.span[1])] if f.span else None,
        "instance": f.instance,
        "unparsed_examples": [{"line": n, "text": t} for n, t in f.unparsed_examples],
        "notes": list(f.notes),
        "skipped": f.skipped,
    }


def detect_paths(
    paths: list[Path],
    ctx: ParseContext,
    instance_names: dict[Path, str] | None = None,
) -> list[dict]:
    """One dict per file found under `paths` (and one per path that could not be used).

    Keys: path, format, formats, role, lines, parsed, unparsed, noise,
    records ({table: rows}), span ([start, end] ISO 8601 UTC, or None),
    instance, unparsed_examples ([{line, text}]), notes, skipped.
    """
    inputs = load([Path(p) for p in paths], ctx, instance_names)
    rows = [_row(f) for f in inputs.files]
    seen = {r["path"] for r in rows}
    for message in inputs.errors:
        # errors for paths that yielded no file (missing path, empty folder)
        path, _, reason = message.partition(": ")
        if path not in seen:
            rows.append(_row(InputFile(path, None, None, None, skipped=reason or message)))
    return rows


COLUMNS = ("path", "formats", "instance", "lines", "parsed", "noise", "unparsed", "records", "span")


def _cell(row: dict, column: str) -> str:
    value = row.get(column)
    if column == "formats":
        return ",".join(value) if value else "-"
    if column == "records":
        return " ".join(f"{k}={v}" for k, v in sorted(value.items())) if value else "-"
    if column == "span":
        return f"{value[0]} .. {value[1]}" if value else "-"
    if value is None:
        return "-"
    return str(value)


def render_detect_table(rows: list[dict]) -> str:
    """A plain-text table: one line per file, then its notes and first unparsed lines."""
    header = [c.upper() for c in COLUMNS]
    cells = [[_cell(r, c) for c in COLUMNS] for r in rows]
    widths = [
        max(len(h), *(len(c[i]) for c in cells)) if cells else len(h) for i, h in enumerate(header)
    ]
    numeric = {"lines", "parsed", "noise", "unparsed"}

    def fmt(values: list[str]) -> str:
        parts = [
            v.rjust(w) if COLUMNS[i] in numeric else v.ljust(w)
            for i, (v, w) in enumerate(zip(values, widths, strict=True))
        ]
        return "  ".join(parts).rstrip()

    out = [fmt(header), fmt(["-" * w for w in widths])]
    for row, values in zip(rows, cells, strict=True):
        out.append(fmt(values))
        if row.get("skipped"):
            out.append(f"    skipped: {row['skipped']}")
        for note in row.get("notes") or []:
            out.append(f"    note: {note}")
        for example in row.get("unparsed_examples") or []:
            text = example["text"].replace("\t", " ")
            text = "".join(ch if ch.isprintable() else "?" for ch in text)
            out.append(f"    unparsed line {example['line']}: {text[:100]}")
    total = {k: sum(r[k] for r in rows) for k in ("lines", "parsed", "noise", "unparsed")}
    out.append(
        f"{len(rows)} file(s): {total['lines']} lines, {total['parsed']} parsed, "
        f"{total['noise']} noise, {total['unparsed']} unparsed"
    )
    return "\n".join(out) + "\n"
