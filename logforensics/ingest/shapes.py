"""Unparsed lines grouped by shape, so one odd line among thousands of known ones is seen.

A shape is the line with what varies between lines of one kind masked: times,
addresses, ids, hex, numbers. Shapes are counted, most frequent first, each
with the first line number and one example.
"""

from __future__ import annotations

import polars as pl

SHAPE_LIMIT = 50  # shapes kept a file; the lines of the others are counted, not shown
SHAPE_CHARS = 160
EXAMPLE_CHARS = 300
# (pattern, token), applied in order: stamps before the numbers inside them.
MASKS = (
    (r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?", "<time>"),
    (r"\d{2}/\w{3}/\d{4}:\d{2}:\d{2}:\d{2}(?:\.\d+)?(?: [+-]\d{4})?", "<time>"),
    (r"\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b", "<time>"),
    (r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b", "<uuid>"),
    (r"\b(?:\d{1,3}\.){3}\d{1,3}(?::\d+)?\b|\[[0-9a-fA-F:]+\](?::\d+)?", "<addr>"),
    (r"\b0x[0-9a-fA-F]+\b", "<hex>"),
    (
        r"\b[A-Za-z]+[-_](?:[A-Za-z0-9]+[-_])*[A-Za-z0-9]*\d[A-Za-z0-9]*(?:[-_][A-Za-z0-9]+)*\b",
        "<id>",
    ),
    (r"\b[0-9a-fA-F]{12,}\b", "<hex>"),
    (r"\d+(?:\.\d+)?", "<n>"),
)


def shape_expr(text: pl.Expr) -> pl.Expr:
    """The shape of each line: variable parts masked, white space runs folded."""
    out = text.str.strip_chars()
    for pattern, token in MASKS:
        out = out.str.replace_all(pattern, token)
    return out.str.replace_all(r"\s+", " ").str.slice(0, SHAPE_CHARS)


def shapes_of(unparsed: pl.DataFrame) -> list[dict]:
    """`{shape, count, first_line, example}` for the lines of `unparsed` (`line_no`, `text`)."""
    if unparsed.is_empty():
        return []
    grouped = (
        unparsed.select("line_no", "text")
        .sort("line_no")
        .with_columns(shape_expr(pl.col("text")).alias("shape"))
        .group_by("shape", maintain_order=True)
        .agg(
            pl.len().alias("count"),
            pl.col("line_no").first().alias("first_line"),
            pl.col("text").first().str.slice(0, EXAMPLE_CHARS).alias("example"),
        )
        .sort(["count", "first_line"], descending=[True, False])
        .head(SHAPE_LIMIT)
    )
    return [
        {"shape": s, "count": int(c), "first_line": int(n), "example": e}
        for s, c, n, e in grouped.iter_rows()
    ]
