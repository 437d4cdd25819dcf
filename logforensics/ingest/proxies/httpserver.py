"""Python's ``http.server`` as a relaying proxy (the seed write-up's ``proxy.py``).

Exact text, from CPython ``Lib/http/server.py`` (``BaseHTTPRequestHandler``):
``log_message`` writes ``"%s - - [%s] %s\\n" % (address_string(),
log_date_time_string(), format % args)`` to stderr; ``log_date_time_string`` is
``%02d/%3s/%04d %02d:%02d:%02d`` in local time (no zone, whole seconds);
``log_request`` is ``'"%s" %s %s' % (requestline, code, size)`` with ``-`` for an
unknown size; ``send_error`` first calls ``log_error("code %d, message %s")``.
A handler's exception is printed by ``socketserver.BaseServer.handle_error``
between dashed lines (read by the traceback format). Sample lines were made by
running such a proxy (http.server + urllib, ``send_error(502, f"Bad Gateway:
{exc}")``) in front of a stub here, CPython 3.11.7.
"""

from __future__ import annotations

import polars as pl

from logforensics import timeparse
from logforensics.ingest import register_line_format
from logforensics.ingest.base import Claim, Sample, SourceFile
from logforensics.ingest.toolkit import (
    ProxyLineFormat,
    file_tz,
    first_kind,
    format_text,
    no_lines,
    proxy_failures,
    proxy_rows,
)

HTTP_SERVER_RE = (
    r"^(?P<client>\S+) - - \[(?P<time>\d{2}/[A-Z][a-z]{2}/\d{4} \d{2}:\d{2}:\d{2})\] (?P<said>.*)$"
)
REQUEST_LOG_RE = r'^"(?P<request>(?:[^"\\]|\\.)*)" (?P<status>\d{3}|-) (?P<size>\d+|-)$'
ERROR_LOG_RE = r"^code (?P<code>\d{3}), message (?P<message>.*)$"
# What the proxy's own message says went wrong upstream (its text is the exception's).
UPSTREAM_KINDS = {
    "timeout": r"timed out|[Tt]imeout",
    "conn_refused": r"[Rr]efused|Errno 111",
    "conn_reset": r"reset by peer|Errno 104|Remote end closed|RemoteDisconnected",
    "upstream_5xx": r"HTTP Error 5\d\d",
}


@register_line_format
class PythonHttpServer(ProxyLineFormat):
    """``http.server`` access lines → `proxy_requests`; its ``code N, message M`` lines →
    `proxy_events` for 5xx (kind from the message: the upstream's failure as the proxy
    caught it), noise for 4xx; its other ``log_message`` lines are noise.

    The access line is written when the status line is sent (``send_response``), so a
    502 may be logged although the client had already left (a ``BrokenPipeError``
    traceback follows). The proxy names no upstream: `upstream` and `delivery` are
    unknown unless the message shows the upstream answered (``HTTP Error 503``: reached).
    """

    name = "python_http_server"
    priority = 39
    samples = (
        Sample(
            "CPython 3.11.7 http.server relaying proxy run here (seed write-up's proxy.py shape)",
            '127.0.0.1 - - [01/Dec/2026 14:33:36] "POST /v1/chat/completions HTTP/1.1" 200 -\n'
            "127.0.0.1 - - [01/Dec/2026 14:33:36] code 502, message Bad Gateway: HTTP Error "
            "503: Service Unavailable\n"
            '127.0.0.1 - - [01/Dec/2026 14:33:36] "POST /v1/chat/completions HTTP/1.1" 502 -\n'
            "127.0.0.1 - - [01/Dec/2026 14:33:38] code 502, message Bad Gateway: timed out\n"
            '127.0.0.1 - - [01/Dec/2026 14:33:38] "POST /v1/chat/completions HTTP/1.1" 502 -',
            role="proxy",
            tables=(("proxy_requests", 3), ("proxy_events", 2)),
        ),
        Sample(
            "the same proxy: 501 / 400 it answered itself (send_error before any upstream)",
            "127.0.0.1 - - [01/Dec/2026 14:33:42] code 501, message Unsupported method ('GET')\n"
            "127.0.0.1 - - [01/Dec/2026 14:33:42] code 400, message Bad request syntax "
            "('NONSENSE')",
            role="proxy",
            status="noise",
        ),
    )
    pattern = HTTP_SERVER_RE

    # every such line holds "] " after a " - - [" prefix: one literal scan decides
    woken_by = pl.col("msg").str.contains(" - - [", literal=True)

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        msg = pl.col("msg")
        if not lines.select(self.woken_by.any()).item():
            return Claim(records=no_lines())
        hits = self.parsed(lines, HTTP_SERVER_RE, needs=msg.str.contains(" - - [", literal=True))
        hits = hits.with_columns(
            pl.col("said").str.extract_groups(REQUEST_LOG_RE).alias("_r"),
            pl.col("said").str.extract_groups(ERROR_LOG_RE).alias("_e"),
        ).unnest("_r", "_e")
        at = pl.coalesce(
            timeparse.naive_to_utc(pl.col("time"), "%d/%b/%Y %H:%M:%S", file_tz(lines)),
            pl.col("at"),
        )
        # the message of a `code N` line belongs to the client's next access line
        message = (
            pl.col("message").forward_fill().over("client")
            if hits.height
            else pl.lit(None, dtype=pl.Utf8)
        )
        status = pl.col("status").cast(pl.Int64, strict=False)
        frame = hits.with_columns(at.alias("at"), message.alias("_why")).with_columns(
            pl.when(pl.col("request").is_not_null() & (status >= 500))
            .then(pl.col("_why"))
            .alias("_why")
        )
        access = frame.filter(pl.col("request").is_not_null())
        upstream_answered = pl.col("_why").str.contains(r"HTTP Error \d{3}").fill_null(False)
        rows = proxy_rows(
            access.with_columns(
                pl.col("request").str.extract(r"^([A-Z]+) ", 1).alias("method"),
                pl.col("request").str.extract(r"^[A-Z]+ (\S+)", 1).alias("path"),
                status.alias("http_status"),
                pl.when(upstream_answered)
                .then(pl.col("_why").str.extract(r"HTTP Error (\d{3})", 1).cast(pl.Int64))
                .alias("upstream_status"),
                pl.when(status < 500)
                .then(pl.lit("unknown"))
                .otherwise(pl.lit("proxy"))
                .alias("status_origin"),
                pl.when(upstream_answered)
                .then(pl.lit("reached"))
                .otherwise(pl.lit("unknown"))
                .alias("delivery"),
            ),
            source,
        )
        code = pl.col("code").cast(pl.Int64, strict=False)
        # 501 / 505: a method or version it does not implement, its own refusal, not a failure
        failures = frame.filter((code >= 500) & ~code.is_in([501, 505])).with_columns(
            pl.col("code").cast(pl.Int64).alias("http_status"),
            pl.lit(None, dtype=pl.Utf8).alias("upstream"),
        )
        kind = pl.coalesce(first_kind(UPSTREAM_KINDS, pl.col("message")), pl.lit("bad_gateway"))
        events = proxy_failures(
            failures,
            kind,
            format_text("http.server answered {}: {}", pl.col("http_status"), pl.col("message")),
            source,
        )
        used = pl.concat([access["line_no"], failures["line_no"]])
        noise = frame.filter(~pl.col("line_no").is_in(used.implode()))["line_no"]
        return Claim(
            records=used,
            noise=noise,
            tables={"proxy_requests": rows, "proxy_events": events},
        )
