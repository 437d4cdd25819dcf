"""Envoy's (and Istio's) default access log. Exact text, from the project's source:

* Envoy ``source/common/formatter/substitution_formatter.cc`` default format,
  ``source/common/access_log/access_log_formatter.cc`` START_TIME default
  ``%Y-%m-%dT%H:%M:%E3SZ``, ``source/common/stream_info/utility.h`` flags;
"""

from __future__ import annotations

import polars as pl

from logforensics import timeparse
from logforensics.ingest import register_line_format
from logforensics.ingest.base import (
    Claim,
    Sample,
    SourceFile,
)
from logforensics.ingest.toolkit import (
    ProxyLineFormat,
    dash_null,
    first_kind,
    format_text,
    ms_duration,
    proxy_failures,
    source_column,
)

# ----------------------------------------------------------------------- Envoy

ENVOY_RE = (
    r"^\[(?P<start>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2}))\] "
    r'"(?P<method>\S+) (?P<path>\S+) (?P<proto>[^"]*)" (?P<code>\d+) (?P<flags>\S+) '
    # Istio's default inserts response code details, termination details and the
    # upstream transport failure reason here.
    r'(?:(?P<details>\S+) (?P<term>\S+) "(?P<utfr>[^"]*)" )?'
    r"(?P<rx>\d+|-) (?P<tx>\d+|-) (?P<dur>\d+|-) (?P<ust>\d+|-) "
    r'"(?P<xff>[^"]*)" "(?P<agent>[^"]*)" "(?P<rid>[^"]*)" "(?P<authority>[^"]*)" "(?P<uhost>[^"]*)"'
)
# Response flags (utility.h short strings) → event kind, in priority order.
ENVOY_KINDS = {
    "no_live_upstream": r"\bUH\b",
    "no_route": r"\b(?:NR|NC)\b",
    "overflow": r"\b(?:UO|OM|DO)\b",
    "rate_limited": r"\bRL\b",
    "timeout": r"\b(?:UT|SI|DT|UMSDR)\b",
    "conn_failed": r"\bUF\b",
    "upstream_closed": r"\bUC\b",
    "upstream_reset": r"\bUR\b",
    "retries_exhausted": r"\bURX\b",
    "local_reset": r"\bLR\b",
    "upstream_protocol_error": r"\bUPE\b",
}
# Flags proving the request never went to an upstream host.
ENVOY_REFUSED = r"\b(?:UH|NR|NC|UO|OM|DO|RL|LH|NFCF|UAEX|RLSE|IH|FI|DF|UF)\b"
ENVOY_REACHED = r"\b(?:UT|UC|UR|UPE|UMSDR)\b"
ENVOY_CLIENT = r"^(?:DC|DR|DPE)(?:,(?:DC|DR|DPE))*$"


@register_line_format
class EnvoyAccess(ProxyLineFormat):
    """Envoy's default access log (and Istio's longer default).

    ``%RESPONSE_FLAGS%`` says what Envoy did: UH (no healthy upstream), UF
    (connection failure), UT (upstream timeout), URX (retries exhausted), UO
    (overflow), NR (no route), UC/UR (upstream closed/reset), DC (client
    went away)… Any flag but the client's own (DC, DR, DPE) means Envoy
    produced the status (`status_origin` = proxy); ``-`` means the upstream's
    answer passed through. Code 0 (nothing sent downstream) becomes null.
    `at` = START_TIME + DURATION (ms).
    """

    name = "envoy_access"
    priority = 31
    per_line = True
    samples = (
        Sample(
            "envoy substitution_formatter.cc DEFAULT_FORMAT; values invented",
            '[2026-02-24T06:16:04.000Z] "POST /v1/chat/completions HTTP/1.1" 503 UF,URX 1234 91 2 '
            '- "10.0.3.7" "python-requests/2.32.3" "8d2c4f1a-0b6e-4c1e-9d33-1f7f5a0c2b12" '
            '"llm.internal" "10.0.0.22:8000"',
            role="proxy",
            tables=(("proxy_requests", 1), ("proxy_events", 1)),
        ),
    )
    pattern = ENVOY_RE

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        hits = self.parsed(lines, ENVOY_RE)
        flags = pl.col("flags")
        code = pl.col("code").cast(pl.Int64)
        upstream = dash_null("uhost")
        clean = (flags == "-") | flags.str.contains(ENVOY_CLIENT)
        frame = hits.with_columns(
            (
                timeparse_iso(pl.col("start")).fill_null(pl.col("at"))
                + ms_duration(pl.col("dur").cast(pl.Float64, strict=False).fill_null(0))
            ).alias("at"),
            pl.when(code > 0).then(code).alias("http_status"),
            upstream.alias("upstream"),
            pl.when(clean & upstream.is_not_null() & (code > 0))
            .then(code)
            .alias("upstream_status"),
            pl.when(code == 0)
            .then(pl.lit("unknown"))
            .when(clean & upstream.is_not_null())
            .then(pl.lit("upstream"))
            .when(~clean)
            .then(pl.lit("proxy"))
            .otherwise(pl.lit("unknown"))
            .alias("status_origin"),
            pl.when(flags.str.contains(ENVOY_REACHED))
            .then(pl.lit("reached"))
            .when(flags.str.contains(ENVOY_REFUSED))
            .then(pl.lit("refused"))
            .when((flags == "-") & upstream.is_not_null() & (code > 0))
            .then(pl.lit("reached"))
            .otherwise(pl.lit("unknown"))
            .alias("delivery"),
            (pl.col("dur").cast(pl.Float64, strict=False) / 1000).alias("request_time_s"),
            (pl.col("ust").cast(pl.Float64, strict=False) / 1000).alias("upstream_time_s"),
            dash_null("rid").alias("request_id"),
            pl.col("xff").str.split(",").list.first().str.strip_chars().alias("_xff"),
        )
        rows = frame.select(
            "at",
            pl.col("instance").alias("proxy"),
            pl.when(pl.col("_xff").is_in(["-", ""]))
            .then(None)
            .otherwise(pl.col("_xff"))
            .alias("client"),
            "method",
            "path",
            "http_status",
            "upstream",
            "upstream_status",
            "status_origin",
            "delivery",
            "request_time_s",
            "upstream_time_s",
            "request_id",
            source_column(source),
        )
        flag_kind = first_kind(ENVOY_KINDS, flags)
        kind = (
            pl.when(flag_kind.is_not_null())
            .then(flag_kind)
            .when(pl.col("http_status") >= 500)
            .then(pl.lit("upstream_5xx"))
        )
        detail = format_text(
            "envoy {} {} {} flags {} upstream {}",
            pl.coalesce(pl.col("http_status").cast(pl.Utf8), pl.lit("(no response)")),
            pl.col("method"),
            pl.col("path"),
            flags,
            pl.col("uhost"),
        )
        return Claim(
            records=hits["line_no"],
            tables={
                "proxy_requests": rows,
                "proxy_events": proxy_failures(frame, kind, detail, source),
            },
        )


def timeparse_iso(expr: pl.Expr) -> pl.Expr:
    return timeparse.iso_to_utc(expr)
