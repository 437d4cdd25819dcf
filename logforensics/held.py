"""A column no stage of the analysis reads, held compressed while the stages run.

A client's request ids join nothing where no server or proxy logs ids (vLLM's default
logging): they are then the report's, for the rows it shows. Kept as text they cost 16
bytes a row and their characters, in the client table and again in each copy a stage makes
(20M lines: 6.6M unique ids, 100 MB as read; held, the live peak fell by 199 MiB); as one
zstd Parquet column with their rows' sources, 17 MB.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import polars as pl

KEY = "source"  # every client row's own line: what puts a held value back on its row


@dataclass(frozen=True)
class Held:
    column: str
    dtype: pl.DataType
    parquet: bytes  # the key and the column, one row per held row, in the frame's order

    @classmethod
    def take(cls, frame: pl.DataFrame, column: str) -> tuple[pl.DataFrame, Held]:
        """`frame` with `column` as one typed null, and the values it held."""
        buffer = io.BytesIO()
        frame.select(KEY, column).write_parquet(buffer, compression="zstd")
        held = cls(column, frame.schema[column], buffer.getvalue())
        return frame.with_columns(pl.lit(None, dtype=held.dtype).alias(column)), held

    def values(self) -> pl.DataFrame:
        return pl.read_parquet(io.BytesIO(self.parquet))

    def restore(self, frame: pl.DataFrame, values: pl.DataFrame | None = None) -> pl.DataFrame:
        """`frame` (rows of the frame it was taken from, in any order) with the column back.

        In the same order (checked on the key, not assumed) the values are put back as
        they are; otherwise each row takes its key's value."""
        values = self.values() if values is None else values
        if frame.height == values.height and frame[KEY].equals(values[KEY]):
            column = values[self.column]
        else:
            column = (
                frame.select(KEY)
                .join(values, on=KEY, how="left", validate="m:1", maintain_order="left")
                .get_column(self.column)
            )
        return frame.with_columns(column.cast(self.dtype).alias(self.column))


def ids_joined(tables: dict[str, pl.DataFrame]) -> bool:
    """Does any witness but the client log request ids (then the analysis reads the
    client's: `attribute.identity_matches`, `proxy`'s ids)?"""
    return any(
        tables[name].select(pl.col("request_id").is_not_null().any()).item()
        for name in ("server_requests", "proxy_requests")
        if not tables[name].is_empty()
    )
