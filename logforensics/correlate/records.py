"""The server-side records a client request can leave, and how far their stamps may stray."""

from __future__ import annotations

import polars as pl

INFERENCE_PATH_RE = r"^/(?:v1/)?(?:chat/completions|completions|generate|responses)\b"
MATCH_TOLERANCE_S = 1.0  # client/server stamps of the same moment, after the offset


def seconds(col: str) -> pl.Expr:
    return pl.col(col).dt.epoch("us") / 1e6


def inference_records(server: pl.DataFrame) -> pl.DataFrame:
    """Access lines of inference calls: the records a client request can produce."""
    return server.filter(
        (pl.col("event") == "access") & pl.col("path").str.contains(INFERENCE_PATH_RE)
    ).sort("at")
