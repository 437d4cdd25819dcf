"""The vLLM production-stack router. Exact text, from the project's source:

* vLLM production-stack ``src/vllm_router/log.py`` and
  ``services/request_service/request.py`` (``Routing request %s [with session
  id %s] to %s at %f, process time = %.4f``).
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
    UTC_US,
    ProxyLineFormat,
    first_kind,
    proxy_failures,
    source_column,
)

# ------------------------------------------------------- vLLM production-stack

ROUTER_RE = (
    r"Routing request (?P<rid>\S+)(?: with session id \S+)? to (?P<url>\S+) "
    r"at (?P<epoch>\d+(?:\.\d+)?), process time = (?P<pt>[\d.]+)"
)
ROUTER_ERROR_RE = (
    r"^(?:ERROR|WARNING): (?P<err>(?:HTTP|Unexpected) error in (?:prefiller|decoder): .*?"
    r"|Failed to connect to backend.*?)(?: \([\w.]+:\d+:[\w.]+\))?$"
)


@register_line_format
class ProductionStackRouter(ProxyLineFormat):
    """The vLLM production-stack router (``vllm_router``).

    ``Routing request ID [with session id S] to URL at EPOCH, process time =
    T`` → a `proxy_requests` row: `at` = EPOCH (the router's own clock, to
    the microsecond), `upstream` = URL, `request_id` = ID (the client's
    X-Request-Id when it sent one). It records the routing decision only:
    status and delivery are unknown. Prefill/decode errors →
    `proxy_events`.
    """

    name = "vllm_router"
    priority = 37
    samples = (
        Sample(
            "production-stack src/vllm_router log.py + request.py; values invented",
            "[2026-02-24 06:16:14,001] INFO: Routing request 8d2c9a1c to http://10.0.0.22:8000 at "
            "1771913774.0, process time = 0.0009 "
            "(request.py:350:vllm_router.services.request_service.request)",
            role="proxy",
            tables=(("proxy_requests", 1),),
        ),
    )
    pattern = ROUTER_RE + "|" + ROUTER_ERROR_RE

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        routed = self.parsed(lines, ROUTER_RE)
        rows = routed.select(
            (pl.col("epoch").cast(pl.Float64) * 1e6)
            .round(0)
            .cast(pl.Int64)
            .cast(UTC_US)
            .alias("at"),
            pl.col("instance").alias("proxy"),
            pl.col("url").alias("upstream"),
            pl.lit("unknown").alias("status_origin"),
            pl.lit("unknown").alias("delivery"),
            pl.col("rid").alias("request_id"),
            source_column(source),
        )
        failed = self.parsed(
            lines.filter(~pl.col("line_no").is_in(routed["line_no"].implode())), ROUTER_ERROR_RE
        ).with_columns(
            pl.lit(None, dtype=pl.Int64).alias("http_status"),
            pl.lit(None, dtype=pl.Utf8).alias("upstream"),
        )
        kind = first_kind(
            {"timeout": r"[Tt]imeout", "conn_failed": r"[Cc]onnect", "upstream_error": r"."},
            pl.col("err"),
        )
        events = proxy_failures(failed, kind, pl.col("err"), source)
        return Claim(
            records=pl.concat([routed["line_no"], failed["line_no"]]),
            tables={"proxy_requests": rows, "proxy_events": events},
        )
