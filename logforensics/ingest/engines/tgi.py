"""text-generation-inference router lines, from the project's source:

* text-generation-inference (``huggingface/text-generation-inference``
  ``router/src/server.rs``: ``tracing::info!("Success")`` inside the
  ``generate`` / ``generate_stream`` / ``chat_completions`` span; errors such as
  ``Model is overloaded``, ``Request failed during generation: …``, ``Input
  validation error``), printed by ``tracing_subscriber``'s default text
  layer: ``<RFC 3339 stamp>  INFO generate{parameters=… total_time="…"}:
  text_generation_router::server: router/src/server.rs:305: Success``.
* text-embeddings-inference (``huggingface/text-embeddings-inference``
  ``router/src/http/server.rs``): the same tracing layout, target
  ``text_embeddings_router``, ``embed`` / ``rerank`` spans; durations print
  ``µs`` with U+00B5.
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
    first_kind,
    source_expr,
)

TGI_RE = (
    r"^\s*(?P<lvl>TRACE|DEBUG|INFO|WARN|ERROR) (?:(?P<spans>.*?): )?"
    r"(?P<target>text_(?:generation|embeddings)_\w+(?:::\w+)*): "
    r"(?:(?P<file>[\w/.-]+\.rs):(?P<line>\d+): )?"
    r"(?P<message>.*)$"
)
TGI_ENDPOINTS = {
    "chat_completions": "/v1/chat/completions",
    "completions": "/v1/completions",
    "generate_stream": "/generate_stream",
    "generate": "/generate",
    # text-embeddings-inference's spans (router/src/http/server.rs)
    "embed": "/embed",
    "openai_embed": "/v1/embeddings",
    "rerank": "/rerank",
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
    priority = 21
    per_line = True
    samples = (
        Sample(
            "layout of text-generation-inference router/src/server.rs via tracing-subscriber; values invented",
            "2026-02-24T06:16:44.123456Z  INFO generate{parameters=GenerateParameters { best_of: "
            'None, max_new_tokens: Some(20) } total_time="1.2s" validation_time="1ms" '
            'queue_time="50us" inference_time="1.1s" time_per_token="55ms" seed="None"}: '
            "text_generation_router::server: router/src/server.rs:305: Success",
            tables=(("server_requests", 1),),
        ),
        Sample(
            "layout of text-embeddings-inference router/src/http/server.rs (the embed span's "
            "timings, µ as tracing prints a Duration) behind a docker compose prefix; values "
            "invented",
            'tei-1  | 2026-02-24T06:16:45.001234Z  INFO embed{total_time="8.2ms" '
            'tokenization_time="1.2ms" queue_time="530.1µs" inference_time="6.3ms"}: '
            "text_embeddings_router::http::server: router/src/http/server.rs:706: Success",
            tables=(("server_requests", 1),),
        ),
    )
    pattern = (
        r"^\s*(?:TRACE|DEBUG|INFO|WARN|ERROR) .*?text_(?:generation|embeddings)_\w+(?:::\w+)*: "
    )

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        hits = (
            self.matching(lines)
            .with_columns(pl.col("msg").str.extract_groups(TGI_RE).alias("_g"))
            .unnest("_g")
            .filter(pl.col("lvl").is_not_null())
        )
        span = pl.col("spans").str.extract(
            r"\b(chat_completions|completions|generate_stream|generate|openai_embed|embed|rerank)\{",
            1,
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
