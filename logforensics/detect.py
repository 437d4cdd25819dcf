"""What each input file is, before any analysis: the `detect` command's data.

`detect_paths` reads the inputs once, through `logforensics.ingest.inputs.load`
(the very parse `analyze` does), and reports per file its formats, the
account of its lines, the records it gave, the time it covers and the
instance it names. `render_detect_table` prints that as a plain-text table.
"""

from __future__ import annotations

import datetime as dt
import os
import textwrap
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
        "unparsed_shapes": [dict(shape) for shape in f.unparsed_shapes],
        "tester_summaries": [dict(summary) for summary in f.tester_summaries],
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
    instance, unparsed_examples ([{line, text}]), unparsed_shapes ([{shape, count,
    first_line, example}], most frequent first), tester_summaries (the tester's own
    figures), notes, skipped.
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


WIDTH = 100
SHAPES_SHOWN = 10  # a file's shapes printed; the rest are counted


def _printable(text: str) -> str:
    return "".join(ch if ch.isprintable() else "?" for ch in text.replace("\t", " "))


def _fit(text: str, width: int = WIDTH) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _wrapped(text: str) -> list[str]:
    """A note in 100 columns, continued under its first word."""
    return textwrap.wrap(text, WIDTH, subsequent_indent=" " * 10, break_on_hyphens=False)


def _common_folder(paths: list[str]) -> Path | None:
    """The deepest folder holding every input (None if they share only the root)."""
    parents = [os.path.abspath(Path(p).parent) for p in paths]
    if not parents:
        return None
    common = Path(os.path.commonpath(parents))
    return None if common == Path(common.anchor) else common


def _relative(path: str, common: Path | None) -> str:
    return os.path.relpath(os.path.abspath(path), common) if common else path


def _span(span) -> str:
    if not span:
        return ""
    start, end = span
    if start[:10] == end[:10]:
        end = end[11:]
    return f"; span {start} .. {end}"


def _figures(summary: dict) -> str:
    where = f"step {summary['step']}" if summary.get("step") is not None else "run"
    if summary.get("concurrency") is not None:
        where += f" (concurrency {summary['concurrency']})"
    counts = ", ".join(f"{summary[k]} {k}" for k in ("sent", "ok", "failed") if k in summary)
    return f"{where}: {counts}"


def render_detect_table(rows: list[dict]) -> str:
    """A plain-text account in 100 columns: one line per file (path relative to the folder
    all inputs share), then its records, notes and the shapes of its unparsed lines."""
    common = _common_folder([r["path"] for r in rows])
    names = [_relative(r["path"], common) for r in rows]
    formats = [r.get("format") or "-" for r in rows]
    fmt_w = min(20, max([6, *map(len, formats)]))
    inst_w = 12
    # the rest of the row takes 1 + fmt + 1 + inst + 33 columns; a longer name gets its own line
    name_w = min(WIDTH - fmt_w - inst_w - 35, max([4, *map(len, names)]))

    def line(name, fmt, inst, *numbers) -> str:
        cells = [_fit(name, name_w).ljust(name_w), _fit(fmt, fmt_w).ljust(fmt_w)]
        cells.append(_fit(inst, inst_w).ljust(inst_w))
        cells += [str(n).rjust(w) for n, w in zip(numbers, (7, 7, 7, 8), strict=True)]
        return " ".join(cells).rstrip()

    out = []
    if common:
        out.append(_fit(f"files under {common}/"))
    out.append(line("FILE", "FORMAT", "INSTANCE", "LINES", "PARSED", "NOISE", "UNPARSED"))
    for row, name, fmt in zip(rows, names, formats, strict=True):
        if len(name) > name_w:
            out.append(_fit(name))
            name = ""
        instance = row.get("instance") or "-"
        several = len(instance) > inst_w
        out.append(
            line(name, fmt, f"{instance.count(',') + 1} pods" if several else instance,
                 row["lines"], row["parsed"], row["noise"], row["unparsed"])
        )  # fmt: skip
        if several:
            out.append(_fit(f"    instances: {instance}"))
        if row.get("skipped"):
            out += _wrapped(f"    skipped: {_printable(row['skipped'])}")
        if row.get("formats") and row["formats"] != [row.get("format")]:
            out.append(_fit(f"    lines: {', '.join(row['formats'])}"))
        if row.get("records"):
            records = " ".join(f"{k}={v}" for k, v in sorted(row["records"].items()))
            out.append(_fit(f"    records: {records}{_span(row.get('span'))}"))
        for note in row.get("notes") or []:
            out += _wrapped(f"    note: {_printable(note)}")
        figures = [_figures(s) for s in row.get("tester_summaries") or []]
        if figures:
            out += _wrapped(f"    tester's own figures: {'; '.join(figures)}")
        shapes = row.get("unparsed_shapes") or []
        for shape in shapes[:SHAPES_SHOWN]:
            out.append(
                _fit(
                    f"    unparsed {shape['count']}× from line {shape['first_line']}: "
                    f"{_printable(shape['example'])}"
                )
            )
        rest = row["unparsed"] - sum(s["count"] for s in shapes[:SHAPES_SHOWN])
        if shapes and rest > 0:
            out.append(f"    unparsed: {rest} more line(s) in other shapes")
    total = {k: sum(r[k] for r in rows) for k in ("lines", "parsed", "noise", "unparsed")}
    skipped = sum(1 for r in rows if r.get("skipped"))
    out.append(
        f"{len(rows)} file(s), {skipped} skipped: {total['lines']} lines, {total['parsed']} "
        f"parsed, {total['noise']} noise, {total['unparsed']} unparsed"
    )
    return "\n".join(out) + "\n"
