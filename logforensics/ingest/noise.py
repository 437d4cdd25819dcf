"""Lines understood but carrying nothing to analyse."""

from __future__ import annotations

import polars as pl

from logforensics.ingest import register_line_format
from logforensics.ingest.base import (
    Claim,
    Sample,
    SourceFile,
)
from logforensics.ingest.toolkit import (
    RegexLineFormat,
    no_lines,
)


@register_line_format
class KnownNoise(RegexLineFormat):
    """Lines understood but carrying nothing to analyse.

    vLLM's other stamped lines (startup, config, the continuation lines of a
    multi-line message, which repeat the prefix), uvicorn's lifecycle lines
    (``Started server process``, ``Application startup complete.``), other
    Python-logging lines with a level and blank lines. Counted apart from
    unparsed lines so a report can say both.
    """

    name = "known_noise"
    priority = 100
    samples = (
        Sample(
            "corpus kv-tiny instance-1.log (vLLM 0.32.0 start-up and uvicorn shutdown)",
            "(APIServer pid=31372) INFO 11-29 16:07:48 [model.py:2152] Using max model len 1024\n"
            "INFO:     Application shutdown complete.",
            status="noise",
        ),
    )
    decisive = False
    fallback = True
    pattern = r"^$"

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        noise = lines.filter(
            pl.col("level").is_not_null()
            | pl.col("msg").str.contains(r"^(?:INFO|WARNING|ERROR|DEBUG|CRITICAL):\s{1,5}\S")
            | (pl.col("msg").str.strip_chars() == "")
        )
        return Claim(records=no_lines(), noise=noise["line_no"])
