"""Line formats of other model servers: SGLang and text-generation-inference.

Exact text, from the projects' source:

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
* text-generation-inference (``huggingface/text-generation-inference``
  ``router/src/server.rs``: ``tracing::info!("Success")`` inside the
  ``generate`` / ``generate_stream`` / ``chat_completions`` span; errors such as
  ``Model is overloaded``, ``Request failed during generation: …``, ``Input
  validation error``), printed by ``tracing_subscriber``'s default text
  layer: ``<RFC 3339 stamp>  INFO generate{parameters=… total_time="…"}:
  text_generation_router::server: router/src/server.rs:305: Success``.
"""

from __future__ import annotations

import polars as pl

from logforensics.ingest import register_line_format
from logforensics.ingest.base import Claim, SourceFile, source_expr
from logforensics.ingest.lineformats import RegexLineFormat, first_kind

SGLANG_RE = r"^(?:Decode|Prefill) batch\b[^#]*#"


def _num(label_re: str, kind=pl.Float64) -> pl.Expr:
    return pl.col("msg").str.extract(label_re, 1).cast(kind, strict=False)


@register_line_format
class SglangStats(RegexLineFormat):
    """SGLang's per-batch scheduler stats lines → `engine_stats`."""

    name = "sglang_stats"
    order = 20
    pattern = SGLANG_RE

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        hits = self.matching(lines)
        usage = pl.coalesce(
            _num(r"(?:^|[,.] )token usage: ([\d.]+)"),
            _num(r"full token usage: ([\d.]+)"),
        )
        stats = hits.select(
            "instance",
            "at",
            _num(r"#running-req: (\d+)", pl.Int64).alias("running"),
            _num(r"#queue-req: (\d+)", pl.Int64).alias("waiting"),
            (usage * 100).round(6).alias("gpu_kv_pct"),
            _num(r"input throughput \(token/s\): ([\d.]+)").alias("prompt_tps"),
            _num(r"gen throughput \(token/s\): ([\d.]+)").alias("gen_tps"),
            source_expr(source.display).alias("source"),
        )
        return Claim(records=hits["line_no"], tables={"engine_stats": stats})


TGI_RE = (
    r"^\s*(?P<lvl>TRACE|DEBUG|INFO|WARN|ERROR) (?:(?P<spans>.*?): )?"
    r"(?P<target>text_generation_\w+(?:::\w+)*): (?:(?P<file>[\w/.-]+\.rs):(?P<line>\d+): )?"
    r"(?P<message>.*)$"
)
TGI_ENDPOINTS = {
    "chat_completions": "/v1/chat/completions",
    "completions": "/v1/completions",
    "generate_stream": "/generate_stream",
    "generate": "/generate",
}
TGI_ERRORS = {
    "oom": r"CUDA out of memory|OutOfMemoryError",
    "overloaded": r"Model is overloaded",
    "kv_full": r"[Oo]ut of available cache blocks|[Nn]o available (?:KV cache )?blocks",
    "validation_error": r"Input validation error|[Vv]alidation",
    "generation_failed": r"Request failed during generation|[Ss]erver error|[Ee]rror",
}


@register_line_format
class TgiRouter(RegexLineFormat):
    """text-generation-inference router/launcher lines.

    ``Success`` inside an endpoint's span → a `server_requests` access record
    (status 200; the endpoint from the span name; time = the line's stamp,
    i.e. the end of the request); ERROR lines → `engine_events` (``oom``,
    ``overloaded``, ``validation_error``, ``generation_failed``). Every other
    TGI line is noise.
    """

    name = "tgi_router"
    order = 21
    pattern = r"^\s*(?:TRACE|DEBUG|INFO|WARN|ERROR) .*?text_generation_\w+(?:::\w+)*: "

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        hits = (
            self.matching(lines)
            .with_columns(pl.col("msg").str.extract_groups(TGI_RE).alias("_g"))
            .unnest("_g")
            .filter(pl.col("lvl").is_not_null())
        )
        span = pl.col("spans").str.extract(
            r"\b(chat_completions|completions|generate_stream|generate)\{", 1
        )
        success = hits.filter((pl.col("message") == "Success") & span.is_not_null())
        access = success.select(
            "instance",
            "at",
            "at_precision_s",
            pl.lit("access").alias("event"),
            pl.lit("POST").alias("method"),
            span.replace_strict(TGI_ENDPOINTS, default=None).alias("path"),
            pl.lit(200, dtype=pl.Int64).alias("http_status"),
            source_expr(source.display).alias("source"),
        )
        errors = hits.filter(pl.col("lvl") == "ERROR")
        events = errors.select(
            "instance",
            "at",
            first_kind(TGI_ERRORS, pl.col("message")).alias("kind"),
            pl.col("message").str.slice(0, 300).alias("detail"),
            source_expr(source.display).alias("source"),
        ).with_columns(pl.col("kind").fill_null("generation_failed"))
        used = pl.concat([success["line_no"], errors["line_no"]])
        noise = hits.filter(~pl.col("line_no").is_in(used.implode()))["line_no"]
        return Claim(
            records=used,
            noise=noise,
            tables={"server_requests": access, "engine_events": events},
        )
