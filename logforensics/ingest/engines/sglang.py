"""SGLang's scheduler stats lines, from the project's source:

* SGLang (``sgl-project/sglang`` ``python/sglang/srt/managers/scheduler.py`` and,
  newer, ``scheduler_metrics_mixin.py``; ``PoolStats.get_*_usage_msg_parts``):
  ``Decode batch. #running-req: %d, #token: %d, token usage: %.2f, [cuda graph:
  %s, ]gen throughput (token/s): %.2f, #queue-req: %d`` (newer: ``Decode batch,``
  and ``Decode batch [N],``; hybrid models ``full token usage: %.2f, swa token
  usage: %.2f``), ``Prefill batch. #new-seq: %d, #new-token: %d, #cached-token:
  %d, token usage: %.2f, #running-req: %d, #queue-req: %d[, …, input throughput
  (token/s): %.2f]``. The logger's format (``configure_logger`` in
  ``srt/utils``) is ``[%(asctime)s{prefix}] %(message)s`` with
  ``%Y-%m-%d %H:%M:%S`` (some builds ``%m-%d %H:%M:%S``) and a prefix such as
  `` TP0`` / `` DP0 TP0``; the server log splitter strips that stamp. ``token
  usage`` is a fraction (0..1): ×100 gives `gpu_kv_pct`.
"""

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
    msg_number,
    source_expr,
)

SGLANG_RE = r"^(?:Decode|Prefill) batch\b[^#]*#"


@register_line_format
class SglangStats(RegexLineFormat):
    """SGLang's per-batch scheduler stats lines → `engine_stats`."""

    name = "sglang_stats"
    priority = 20
    per_line = True
    samples = (
        Sample(
            "layout of sglang srt/managers/scheduler.py + configure_logger; values invented",
            "[2026-02-24 06:16:40 TP0] Decode batch. #running-req: 12, #token: 8000, token usage: "
            "0.93, cuda graph: True, gen throughput (token/s): 512.33, #queue-req: 4",
            tables=(("engine_stats", 1),),
        ),
        Sample(
            "SGLang's logger with a time-only datefmt (``[%(asctime)s TP0]``, ``%H:%M:%S``), "
            "two TP ranks; layout of scheduler.py's stats lines, values invented",
            "[16:43:29 TP0] Decode batch. #running-req: 12, #token: 8000, token usage: 0.93, "
            "gen throughput (token/s): 512.33, #queue-req: 4\n"
            "[16:43:28 TP1] Prefill batch. #new-seq: 1, #new-token: 7, #cached-token: 0, token "
            "usage: 0.95, #running-req: 12, #queue-req: 3",
            tables=(("engine_stats", 2),),
        ),
    )
    pattern = SGLANG_RE

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        hits = self.matching(lines)
        usage = pl.coalesce(
            msg_number(r"(?:^|[,.] )token usage: ([\d.]+)"),
            msg_number(r"full token usage: ([\d.]+)"),
        )
        stats = hits.select(
            "instance",
            "at",
            msg_number(r"#running-req: (\d+)", pl.Int64).alias("running"),
            msg_number(r"#queue-req: (\d+)", pl.Int64).alias("waiting"),
            (usage * 100).round(6).alias("gpu_kv_pct"),
            msg_number(r"input throughput \(token/s\): ([\d.]+)").alias("prompt_tps"),
            msg_number(r"gen throughput \(token/s\): ([\d.]+)").alias("gen_tps"),
            source_expr(source.display).alias("source"),
        )
        return Claim(records=hits["line_no"], tables={"engine_stats": stats})
