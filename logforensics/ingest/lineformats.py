"""Line formats found in vLLM instance logs. A format's `order` is its claim order.

Each format's text was taken from the real software's source:

* stats: vLLM ``vllm/engine/metrics.py`` (V0 ``LoggingStatLogger``: ``Running: %d
  reqs, Swapped: %d reqs, Pending: %d reqs, GPU KV cache usage: %.1f%%, CPU KV
  cache usage: %.1f%%``), ``vllm/v1/metrics/loggers.py`` @ 005a810b (V1: ``Engine
  %03d: Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f
  tokens/s, Running: %d reqs, Waiting: %d reqs, GPU KV cache usage: %.1f%%,
  Prefix cache hit rate: %.1f%%``) and the newest ``log_parts`` form (optional
  ``Deferred: %d reqs``, ``Preemptions: %d``, ``Corrupted: %d reqs``,
  ``External prefix cache hit rate: %.1f%%``, ``MM cache hit rate: %.1f%%``;
  ``N Engines Aggregated:`` prefix). Fields are read one by one, so inserted
  or dropped fields in other versions do not break the line. ``SpecDecoding
  metrics:`` lines (``vllm/v1/spec_decode/metrics.py``) and V0's second
  ``Prefix cache hit rate: GPU: …, CPU: …`` line are noise, not stats.
* access: uvicorn's ``AccessFormatter`` default ``%(levelprefix)s
  %(client_addr)s - "%(request_line)s" %(status_code)s`` (status rendered as
  ``200 OK``; level prefix padded to ``INFO:     ``).
* lifecycle: vLLM ``vllm/entrypoints/logger.py`` (old ``Received request %s:
  prompt: %r, params: ...``; new ``Received request %s: params: %s,
  lora_request: %s.``), ``Added request %s.``, ``Finished request %s.``,
  ``Aborted request %s.`` and the newer V1 ``Aborted request(s) %s.`` with the
  ids comma-joined (one row per id).
* pressure: V0 ``vllm/core/scheduler.py`` (``Sequence group %s is preempted by
  %s mode because there is not enough KV cache space``), PyTorch's CUDA OOM
  message (both wordings, ``capacty`` misspelling too), vLLM's engine-death
  messages (``EngineDeadError``, ``EngineCore encountered a fatal error``,
  ``Background loop is not running``, ``Engine loop is not running``), SGLang's
  ``KV cache pool is full. Retract requests.`` (``scheduler.py``).
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
    order: ClassVar[int] = 50  # claim order: lower claims first
    decisive: ClassVar[bool] = True  # may its lines alone make a file a server log?
    proxy: ClassVar[bool] = False  # a proxy's or gateway's own line (see ProxyLog)

    def sniff(self, bodies: list[str]) -> bool:
        rx = re.compile(self.pattern)
        return any(rx.search(b) for b in bodies if b)

    def matching(self, lines: pl.DataFrame) -> pl.DataFrame:
        return lines.filter(pl.col("msg").str.contains(self.pattern))


def no_lines() -> pl.Series:
    return pl.Series("line_no", [], dtype=pl.Int64)


def _field(label_re: str, kind=pl.Float64) -> pl.Expr:
    return pl.col("msg").str.extract(label_re, 1).cast(kind, strict=False)


SPEC_DECODE_RE = r"SpecDecoding metrics: |^Prefix cache hit rate: GPU: "


@register_line_format
class VllmStats(RegexLineFormat):
    name = "vllm_stats"
    order = 10
    pattern = r"Running: \d+ reqs"

    def sniff(self, bodies: list[str]) -> bool:
        return super().sniff(bodies) or any(re.search(SPEC_DECODE_RE, b) for b in bodies if b)

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        hits = self.matching(lines)
        gpu_kv = _field(r"GPU KV cache usage: ([\d.]+)%")
        cpu_kv = _field(r"CPU KV cache usage: ([\d.]+)%")
        v0_layout = pl.col("msg").str.contains(r"Swapped: \d+ reqs")
        src = source_expr(source.display).alias("source")
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
            # not "External prefix cache hit rate" (a KV connector's), not V0's "GPU: …" line
            _field(r"(?:^|[^\w ])\s*Prefix cache hit rate: ([\d.]+)%").alias("prefix_hit_pct"),
            src,
        )
        # "Preemptions: N" is printed only when N > 0: N requests preempted this interval.
        preempted = hits.with_columns(_field(r"Preemptions: (\d+)", pl.Int64).alias("_n")).filter(
            pl.col("_n") > 0
        )
        events = preempted.select(
            "instance",
            "at",
            pl.lit("preempted").alias("kind"),
            pl.format("{} preemption(s) in the stats interval (stats line)", pl.col("_n")).alias(
                "detail"
            ),
            src,
        )
        noise = lines.filter(pl.col("msg").str.contains(SPEC_DECODE_RE))["line_no"]
        return Claim(
            records=hits["line_no"],
            noise=noise,
            tables={"engine_stats": stats, "engine_events": events},
        )


UVICORN_ACCESS_RE = (
    r'^(?:INFO|WARNING|ERROR|DEBUG):\s+(?P<peer>\S+) - "(?P<method>[A-Z]+) (?P<path>\S+) '
    r'HTTP/[\d.]+" (?P<status>\d{3})\b'
)


@register_line_format
class UvicornAccess(RegexLineFormat):
    """uvicorn's access line. In a proxy's log (a LiteLLM or router container) it is the proxy's."""

    name = "uvicorn_access"
    order = 11
    pattern = UVICORN_ACCESS_RE

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        hits = (
            self.matching(lines)
            .with_columns(pl.col("msg").str.extract_groups(self.pattern).alias("_g"))
            .unnest("_g")
        )
        in_proxy = _file_role(hits) == "proxy"
        server = hits.filter(~in_proxy)
        rows = server.select(
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
        proxied = hits.filter(in_proxy).select(
            "at",
            pl.col("instance").alias("proxy"),
            pl.col("peer").alias("client"),
            "method",
            "path",
            pl.col("status").cast(pl.Int64).alias("http_status"),
            pl.lit("unknown").alias("status_origin"),
            pl.lit("unknown").alias("delivery"),
            source_expr(source.display).alias("source"),
        )
        return Claim(
            records=hits["line_no"],
            tables={"server_requests": rows, "proxy_requests": proxied},
        )


def _file_role(frame: pl.DataFrame) -> pl.Expr:
    return pl.col("file_role") if "file_role" in frame.columns else pl.lit("server")


# The seed's prompts end in "({i})"; `logforensics loadtest` writes "[lf-...]".
PROMPT_MARKER_RE = r"(\[lf-[\w.-]+\]|\(\d+\))"
LIFECYCLE_RE = r"\b(?:Received|Added|Finished|Aborted) request(?:\(s\))? (\S+?)[:.,]?(?:\s|$)"


@register_line_format
class VllmLifecycle(RegexLineFormat):
    name = "vllm_lifecycle"
    order = 12
    pattern = LIFECYCLE_RE

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        hits = self.matching(lines)
        msg = pl.col("msg")
        verb = msg.str.extract(r"\b(Received|Added|Finished|Aborted) request", 1)
        prompt = msg.str.extract(r"prompt: (.*?), params:", 1)
        # "Aborted request(s) a,b,c." names several (external) ids: one row each.
        many = msg.str.extract(r"\bAborted request\(s\) (\S+)", 1).str.strip_suffix(".")
        one = msg.str.extract(self.pattern, 1)
        rows = (
            hits.select(
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
                pl.when(many.is_not_null())
                .then(many.str.split(","))
                .otherwise(pl.concat_list(one))
                .alias("request_id"),
                prompt.str.extract(PROMPT_MARKER_RE, 1).alias("prompt_marker"),
                source_expr(source.display).alias("source"),
            )
            .explode("request_id")
            .filter(pl.col("request_id").str.len_chars() > 0)
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
    The event's time is that of the nearest stamped line. In a proxy's own
    log the event's `instance` is unknown (None).
    """

    name = "python_traceback"
    order = 13
    decisive = True
    proxy = False

    def sniff(self, bodies: list[str]) -> bool:
        return any(b.startswith("Traceback (most recent call last)") for b in bodies)

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        msg = pl.col("msg")
        # Every frame line holds ", line " and a block needs a frame: one literal scan decides.
        if not lines.select(msg.str.contains(", line ", literal=True).any()).item():
            return Claim(records=no_lines())
        is_frame = msg.str.contains(FRAME_RE) | msg.str.contains(BARE_FRAME_RE)
        is_exc = msg.str.contains(EXCEPTION_RE)
        is_chain = msg.str.contains(CHAIN_TEXT)
        marked = lines.with_columns(
            is_frame.alias("is_frame"),
            is_exc.alias("is_exc"),
            is_chain.alias("is_chain"),
            # code lines follow a frame line, indented
            (msg.str.starts_with(" ") & is_frame.shift(1).fill_null(False)).alias("is_code"),
            _file_role(lines).alias("_role"),
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
            return Claim(records=no_lines())
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
                pl.col("_role").first(),
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
        network_kind = first_kind(NETWORK_KINDS, pl.col("text"))
        engine_kind = first_kind(ENGINE_KINDS, pl.col("text"))
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
            pl.when(pl.col("_role") == "proxy")
            .then(None)
            .otherwise(pl.col("instance"))
            .alias("instance"),
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


def first_kind(kinds: dict[str, str], text: pl.Expr) -> pl.Expr:
    """The first kind (in dict order) whose pattern occurs in `text`."""
    out = pl.lit(None, dtype=pl.Utf8)
    for name, rx in reversed(kinds.items()):
        out = pl.when(text.str.contains(rx)).then(pl.lit(name)).otherwise(out)
    return out


_first_kind = first_kind  # the old private name

ENGINE_PRESSURE = {
    "preempted": (
        r"preempted by PreemptionMode|[Pp]reempt(?:ed|ing) request"
        r"|KV cache pool is full\. Retract requests"
    ),
    "kv_full": (
        r"All KV cache blocks are full|KV cache exhausted|No available (?:KV cache )?blocks"
        r"|No available memory for the cache blocks"
        r"|larger than the maximum number of tokens that can be stored in KV cache"
    ),
    "oom": r"CUDA out of memory|OutOfMemoryError|total capac(?:i)?ty of [\d.]+ [KMGT]iB",
    "engine_dead": (
        r"EngineDeadError|Engine loop is not running|Background loop is not running"
        r"|engine core .*died|EngineCore .*failed|EngineCore encountered"
    ),
    "queue_timeout": r"Request timeout after \d+s",
}


@register_line_format
class VllmPressure(RegexLineFormat):
    """Lines that say the engine ran short of memory, preempted, or died."""

    name = "vllm_pressure"
    order = 14
    pattern = "|".join(f"(?:{rx})" for rx in ENGINE_PRESSURE.values())

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        hits = self.matching(lines)
        rows = hits.select(
            "instance",
            "at",
            first_kind(ENGINE_PRESSURE, pl.col("msg")).alias("kind"),
            pl.col("msg").str.slice(0, 300).alias("detail"),
            source_expr(source.display).alias("source"),
        )
        return Claim(records=hits["line_no"], tables={"engine_events": rows})


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
    order = 100
    decisive = False
    pattern = r"^$"

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        noise = lines.filter(
            pl.col("level").is_not_null()
            | pl.col("msg").str.contains(r"^(?:INFO|WARNING|ERROR|DEBUG|CRITICAL):\s{1,5}\S")
            | (pl.col("msg").str.strip_chars() == "")
        )
        return Claim(records=no_lines(), noise=noise["line_no"])
