"""Server-side logs: a container's stdout, split line by line among line formats.

A vLLM instance's log interleaves vLLM's own lines, uvicorn's access lines
and whatever else runs in the container (here: a relaying proxy whose
tracebacks land in the same stream). Each line first loses its runtime
prefix (``docker logs -t`` / ``kubectl logs --timestamps`` stamps,
``kubectl logs --prefix`` pod names, ANSI colours), then every registered
line format takes the lines it recognises. Whatever none takes is counted as
unparsed and shown in the report.
"""

from __future__ import annotations

import polars as pl

from logforensics import timeparse
from logforensics.ingest import LINE_FORMATS, register_file_format
from logforensics.ingest.base import (
    UNPARSED_EXAMPLES,
    FileFormat,
    ParseContext,
    ParseResult,
    SourceFile,
)

ANSI_RE = r"\x1b\[[0-9;]*[A-Za-z]"
KUBECTL_PREFIX_RE = r"^\[pod/(?P<pod>[^/\]\s]+)/(?P<container>[^\]\s]+)\] "
RUNTIME_STAMP_RE = (
    r"^(?P<stamp>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:\d{2})) "
)
# vLLM: "INFO 02-24 06:16:03 [loggers.py:123] msg", optionally behind a
# process tag "(APIServer pid=12) ", with or without the [file:line] brackets.
VLLM_STAMP_RE = (
    r"^(?:\((?P<proc>[^)]*)\) )?(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) "
    r"(?P<md>\d{2}-\d{2} \d{2}:\d{2}:\d{2})(?:\.\d+)? (?:\[?[\w./-]+\.py:\d+\]? )?(?P<msg>.*)$"
)
RUNTIME_PRECISION_S = 1e-6
VLLM_STAMP_PRECISION_S = 1.0


def split_prefixes(
    lines: pl.DataFrame, instance: str, year: int, server_tz: str = "UTC"
) -> pl.DataFrame:
    """Strip runtime prefixes; give every line its best-known time and precision.

    Adds `body`, `msg` (body after vLLM's own stamp, else body), `level`,
    `instance`, `at`, `at_precision_s`. A line with no stamp of its own takes
    the nearest earlier stamped line's time; its precision is the gap to the
    next stamped line (unknown at the end of the file).
    """
    text = pl.col("text").str.replace_all(ANSI_RE, "")
    pod = text.str.extract(KUBECTL_PREFIX_RE, 1)
    after_pod = text.str.replace(KUBECTL_PREFIX_RE, "")
    stamp = after_pod.str.extract(RUNTIME_STAMP_RE, 1)
    body = after_pod.str.replace(RUNTIME_STAMP_RE, "")
    frame = (
        lines.with_columns(pod.alias("pod"), stamp.alias("runtime_stamp"), body.alias("body"))
        .with_columns(pl.col("body").str.extract_groups(VLLM_STAMP_RE).alias("_v"))
        .unnest("_v")
    )
    runtime_at = timeparse.iso_to_utc(pl.col("runtime_stamp"))
    vllm_at = timeparse.roll_years(timeparse.yearless_to_utc(pl.col("md"), year, server_tz))
    own_at = pl.coalesce(runtime_at, vllm_at)
    own_precision = (
        pl.when(runtime_at.is_not_null())
        .then(pl.lit(RUNTIME_PRECISION_S))
        .when(pl.col("md").is_not_null())
        .then(pl.lit(VLLM_STAMP_PRECISION_S))
    )
    frame = frame.with_columns(
        own_at.alias("own_at"),
        own_precision.alias("own_precision"),
        pl.coalesce(pl.col("msg"), pl.col("body")).alias("msg"),
        pl.coalesce(pl.col("pod"), pl.lit(instance)).alias("instance"),
    )
    prev_at = pl.col("own_at").forward_fill()
    next_at = pl.col("own_at").backward_fill()
    gap = (next_at - prev_at).dt.total_microseconds() / 1e6
    return frame.with_columns(
        pl.coalesce(pl.col("own_at"), prev_at, next_at).alias("at"),
        pl.when(pl.col("own_at").is_not_null())
        .then(pl.col("own_precision"))
        .otherwise(gap + pl.col("own_precision").forward_fill())
        .alias("at_precision_s"),
    ).drop("own_at", "own_precision", "runtime_stamp", "md", "pod")


@register_file_format
class ServerLog(FileFormat):
    """Any text log in which at least one registered line format recognises lines."""

    name = "server_log"
    role = "server"

    def sniff(self, head: list[str]) -> bool:
        frame = split_prefixes(
            pl.DataFrame({"line_no": range(1, len(head) + 1), "text": head}),
            "?",
            2000,
        )
        if frame["level"].is_not_null().any():  # vLLM's own stamped lines
            return True
        bodies = frame["msg"].to_list()
        return any(fmt.sniff(bodies) for fmt in LINE_FORMATS.values() if fmt.decisive)

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        lines = split_prefixes(source.lines, source.instance, ctx.year, ctx.server_tz)
        result = ParseResult(lines=lines.height)
        if lines["at"].is_not_null().any():
            result.span = (lines["at"].min(), lines["at"].max())
        unclaimed = lines
        for fmt in LINE_FORMATS.values():
            if unclaimed.is_empty():
                break
            claim = fmt.extract(unclaimed, source)
            claimed = pl.concat([claim.records, claim.noise])
            if claim.records.len():
                result.formats.append(fmt.name)
            result.parsed += claim.records.len()
            result.noise += claim.noise.len()
            for table, frame in claim.tables.items():
                result.add(table, frame)
            unclaimed = unclaimed.filter(~pl.col("line_no").is_in(claimed.implode()))
        result.unparsed_examples = [
            (row["line_no"], row["text"][:300])
            for row in unclaimed.head(UNPARSED_EXAMPLES).iter_rows(named=True)
        ]
        if source.undecodable_bytes:
            result.notes.append("file holds bytes that are not UTF-8; they were replaced")
        return result


from logforensics.ingest import lineformats  # noqa: E402,F401  (registers line formats)
