"""Line formats found in vLLM instance logs. Registration order is claim order.

Each format's text was taken from the real software's source:

* stats: vLLM ``vllm/engine/metrics.py`` (V0 ``LoggingStatLogger``: ``Running: %d
  reqs, Swapped: %d reqs, Pending: %d reqs, GPU KV cache usage: %.1f%%, CPU KV
  cache usage: %.1f%%``) and ``vllm/v1/metrics/loggers.py`` (V1: ``Engine %03d:
  Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f
  tokens/s, Running: %d reqs, Waiting: %d reqs, GPU KV cache usage: %.1f%%,
  Prefix cache hit rate: %.1f%%``). Fields are read one by one, so inserted
  or dropped fields in other versions do not break the line.
* access: uvicorn's ``AccessFormatter`` default ``%(levelprefix)s
  %(client_addr)s - "%(request_line)s" %(status_code)s`` (status rendered as
  ``200 OK``; level prefix padded to ``INFO:     ``).
* lifecycle: vLLM ``vllm/entrypoints/logger.py`` (``Received request %s:
  prompt: %r, params: ...``) and the engines' ``Finished request`` /
  ``Aborted request`` lines.
"""

from __future__ import annotations

import re
from typing import ClassVar

import polars as pl

from logforensics.ingest import register_line_format
from logforensics.ingest.base import Claim, LineFormat, SourceFile, source_expr


class RegexLineFormat(LineFormat):
    """A line format recognised by one regex over the message text."""

    pattern: ClassVar[str]
    decisive: ClassVar[bool] = True  # may its lines alone make a file a server log?

    def sniff(self, bodies: list[str]) -> bool:
        rx = re.compile(self.pattern)
        return any(rx.search(b) for b in bodies if b)

    def matching(self, lines: pl.DataFrame) -> pl.DataFrame:
        return lines.filter(pl.col("msg").str.contains(self.pattern))


def _field(label_re: str, kind=pl.Float64) -> pl.Expr:
    return pl.col("msg").str.extract(label_re, 1).cast(kind, strict=False)


@register_line_format
class VllmStats(RegexLineFormat):
    name = "vllm_stats"
    pattern = r"Running: \d+ reqs"

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        hits = self.matching(lines)
        gpu_kv = _field(r"GPU KV cache usage: ([\d.]+)%")
        cpu_kv = _field(r"CPU KV cache usage: ([\d.]+)%")
        v0_layout = pl.col("msg").str.contains(r"Swapped: \d+ reqs")
        stats = hits.select(
            "instance",
            "at",
            _field(r"Running: (\d+) reqs", pl.Int64).alias("running"),
            pl.coalesce(
                _field(r"Waiting: (\d+) reqs", pl.Int64), _field(r"Pending: (\d+) reqs", pl.Int64)
            ).alias("waiting"),
            _field(r"Swapped: (\d+) reqs", pl.Int64).alias("swapped"),
            # A CPU build's V1 line names its only KV cache "CPU KV cache usage":
            # that is the device cache, so it stands in for the GPU's.
            pl.when(gpu_kv.is_null() & ~v0_layout)
            .then(cpu_kv)
            .otherwise(gpu_kv)
            .alias("gpu_kv_pct"),
            pl.when(v0_layout).then(cpu_kv).alias("cpu_kv_pct"),
            _field(r"Avg prompt throughput: ([\d.]+) tokens/s").alias("prompt_tps"),
            _field(r"Avg generation throughput: ([\d.]+) tokens/s").alias("gen_tps"),
            _field(r"(?:^|[^\w ])\s*Prefix cache hit rate: ([\d.]+)%").alias("prefix_hit_pct"),
            source_expr(source.display).alias("source"),
        )
        return Claim(records=hits["line_no"], tables={"engine_stats": stats})


@register_line_format
class UvicornAccess(RegexLineFormat):
    name = "uvicorn_access"
    pattern = (
        r'^(?:INFO|WARNING|ERROR|DEBUG):\s+(?P<peer>\S+) - "(?P<method>[A-Z]+) (?P<path>\S+) '
        r'HTTP/[\d.]+" (?P<status>\d{3})\b'
    )

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        hits = (
            self.matching(lines)
            .with_columns(pl.col("msg").str.extract_groups(self.pattern).alias("_g"))
            .unnest("_g")
        )
        rows = hits.select(
            "instance",
            "at",
            "at_precision_s",
            pl.lit("access").alias("event"),
            "method",
            "path",
            pl.col("status").cast(pl.Int64).alias("http_status"),
            "peer",
            source_expr(source.display).alias("source"),
        )
        return Claim(records=hits["line_no"], tables={"server_requests": rows})


# The seed's prompts end in "({i})"; `logforensics loadtest` writes "[lf-...]".
PROMPT_MARKER_RE = r"(\[lf-[\w.-]+\]|\(\d+\))"


@register_line_format
class VllmLifecycle(RegexLineFormat):
    name = "vllm_lifecycle"
    pattern = r"\b(?:Received|Added|Finished|Aborted) request (\S+?)[:.,]?(?:\s|$)"

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        hits = self.matching(lines)
        verb = pl.col("msg").str.extract(r"\b(Received|Added|Finished|Aborted) request", 1)
        prompt = pl.col("msg").str.extract(r"prompt: (.*?), params:", 1)
        rows = hits.select(
            "instance",
            "at",
            "at_precision_s",
            verb.replace_strict(
                {
                    "Received": "received",
                    "Added": "received",
                    "Finished": "finished",
                    "Aborted": "aborted",
                },
                default=None,
            ).alias("event"),
            pl.col("msg").str.extract(self.pattern, 1).alias("request_id"),
            prompt.str.extract(PROMPT_MARKER_RE, 1).alias("prompt_marker"),
            source_expr(source.display).alias("source"),
        )
        return Claim(records=hits["line_no"], tables={"server_requests": rows})


EXCEPTION_RE = r"^(?:[A-Za-z_][\w]*\.)*(?P<exc>[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Timeout|timeout))(?::\s?(?P<message>.*))?$"
FRAME_RE = r'^\s*File "(?P<file>[^"]+)", line (?P<lineno>\d+), in (?P<func>\S+)'
# Some write-ups (and log shippers) drop the quotes and "File": keep those frames too.
BARE_FRAME_RE = r"^\s*(?P<file>[\w./-]+\.py), line (?P<lineno>\d+), in (?P<func>\S+)"
# http.server's handle_error frames a traceback with a banner naming the client.
CHAIN_TEXT = (
    r"^Traceback \(most recent call last\):$|^During handling of the above exception"
    r"|^The above exception was the direct cause|^-{40}$"
    r"|^Exception occurred during processing of request from"
)
NETWORK_KINDS = {
    "timeout": r"Timeout|timed out|ReadTimeout|socket\.timeout",
    "broken_pipe": r"BrokenPipeError|Broken pipe",
    "conn_refused": r"ConnectionRefusedError|Connection refused",
    "conn_reset": r"ConnectionResetError|Connection reset",
    "remote_disconnected": r"RemoteDisconnected|IncompleteRead",
}
ENGINE_KINDS = {
    "oom": r"OutOfMemoryError|CUDA out of memory",
    "engine_dead": r"EngineDeadError|AsyncEngineDeadError",
}


@register_line_format
class PythonTraceback(LineFormat):
    """A Python traceback: the whole block becomes one event.

    A traceback from a relaying proxy (network errors while forwarding) is a
    proxy event; one that names vLLM's engine or CUDA is an engine event.
    The event's time is that of the nearest stamped line.
    """

    name = "python_traceback"
    decisive = True

    def sniff(self, bodies: list[str]) -> bool:
        return any(b.startswith("Traceback (most recent call last)") for b in bodies)

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        msg = pl.col("msg")
        is_frame = msg.str.contains(FRAME_RE) | msg.str.contains(BARE_FRAME_RE)
        is_exc = msg.str.contains(EXCEPTION_RE)
        is_chain = msg.str.contains(CHAIN_TEXT)
        marked = lines.with_columns(
            is_frame.alias("is_frame"),
            is_exc.alias("is_exc"),
            is_chain.alias("is_chain"),
            # code lines follow a frame line, indented
            (msg.str.starts_with(" ") & is_frame.shift(1).fill_null(False)).alias("is_code"),
        )
        # A block: a run of frame/code/exception/chain lines (blank lines between
        # chained tracebacks included) that holds at least one frame.
        part = (
            pl.col("is_frame")
            | pl.col("is_exc")
            | pl.col("is_chain")
            | pl.col("is_code")
            | ((msg.str.strip_chars() == "") & pl.col("is_chain").shift(-1).fill_null(False))
        )
        contiguous = pl.col("line_no").diff().fill_null(1) != 1
        marked = (
            marked.with_columns(part.alias("part"))
            .with_columns((~pl.col("part") | contiguous).cum_sum().alias("block"))
            .filter(pl.col("part"))
        )
        if marked.is_empty():
            return Claim(records=pl.Series("line_no", [], dtype=pl.Int64))
        frames = pl.coalesce(
            msg.str.extract_groups(FRAME_RE), msg.str.extract_groups(BARE_FRAME_RE)
        )
        blocks = (
            marked.with_columns(frames.alias("_f"), msg.str.extract(EXCEPTION_RE, 1).alias("exc"))
            .group_by("block", maintain_order=True)
            .agg(
                pl.col("line_no").first().alias("line_no"),
                pl.col("line_no").alias("members"),
                pl.col("is_frame").sum().alias("frames"),
                pl.col("instance").first(),
                pl.col("at").first(),
                pl.col("msg").filter(pl.col("is_exc")).alias("chain"),
                pl.col("_f").filter(pl.col("is_frame")).last().alias("innermost"),
                pl.col("msg").str.join("\n").alias("text"),
            )
            .filter((pl.col("frames") > 0) & (pl.col("chain").list.len() > 0))
        )
        chain_text = pl.col("chain").list.join(" → ")
        innermost = pl.format(
            "{}:{} in {}",
            pl.col("innermost").struct.field("file"),
            pl.col("innermost").struct.field("lineno"),
            pl.col("innermost").struct.field("func"),
        )
        network_kind = _first_kind(NETWORK_KINDS, pl.col("text"))
        engine_kind = _first_kind(ENGINE_KINDS, pl.col("text"))
        blocks = blocks.with_columns(
            pl.format("{} (innermost frame {})", chain_text, innermost).alias("detail"),
            network_kind.alias("network_kind"),
            engine_kind.alias("engine_kind"),
            pl.col("text")
            .str.extract(r"send_error\((\d{3})", 1)
            .cast(pl.Int64)
            .alias("http_status"),
            source_expr(source.display).alias("source"),
        )
        proxy = blocks.filter(pl.col("engine_kind").is_null()).select(
            "at",
            "instance",
            pl.coalesce("network_kind", pl.lit("exception")).alias("kind"),
            "http_status",
            "detail",
            "source",
        )
        engine = blocks.filter(pl.col("engine_kind").is_not_null()).select(
            "instance", "at", pl.col("engine_kind").alias("kind"), "detail", "source"
        )
        used = blocks["members"].explode()
        return Claim(
            records=used,
            tables={"proxy_events": proxy, "engine_events": engine},
        )


def _first_kind(kinds: dict[str, str], text: pl.Expr) -> pl.Expr:
    """The first kind (in dict order) whose pattern occurs in `text`."""
    out = pl.lit(None, dtype=pl.Utf8)
    for name, rx in reversed(kinds.items()):
        out = pl.when(text.str.contains(rx)).then(pl.lit(name)).otherwise(out)
    return out


ENGINE_PRESSURE = {
    "preempted": r"preempted by PreemptionMode|[Pp]reempt(?:ed|ing) request",
    "kv_full": r"All KV cache blocks are full|KV cache exhausted|No available (?:KV cache )?blocks",
    "oom": r"CUDA out of memory|OutOfMemoryError",
    "engine_dead": r"EngineDeadError|Engine loop is not running|engine core .*died|EngineCore .*failed",
    "queue_timeout": r"Request timeout after \d+s",
}


@register_line_format
class VllmPressure(RegexLineFormat):
    """Lines that say the engine ran short of memory, preempted, or died."""

    name = "vllm_pressure"
    pattern = "|".join(f"(?:{rx})" for rx in ENGINE_PRESSURE.values())

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        hits = self.matching(lines)
        kind = pl.lit(None, dtype=pl.Utf8)
        for name, rx in reversed(ENGINE_PRESSURE.items()):
            kind = pl.when(pl.col("msg").str.contains(rx)).then(pl.lit(name)).otherwise(kind)
        rows = hits.select(
            "instance",
            "at",
            kind.alias("kind"),
            pl.col("msg").str.slice(0, 300).alias("detail"),
            source_expr(source.display).alias("source"),
        )
        return Claim(records=hits["line_no"], tables={"engine_events": rows})


@register_line_format
class KnownNoise(RegexLineFormat):
    """Lines understood but carrying nothing to analyse.

    vLLM's other stamped lines (startup, config), uvicorn's lifecycle lines
    (``Started server process``, ``Application startup complete.``) and blank
    lines. Counted apart from unparsed lines so a report can say both.
    """

    name = "known_noise"
    decisive = False
    pattern = r"^$"

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        noise = lines.filter(
            pl.col("level").is_not_null()
            | pl.col("msg").str.contains(r"^(?:INFO|WARNING|ERROR|DEBUG|CRITICAL):\s{1,5}\S")
            | (pl.col("msg").str.strip_chars() == "")
        )
        return Claim(records=pl.Series("line_no", [], dtype=pl.Int64), noise=noise["line_no"])
