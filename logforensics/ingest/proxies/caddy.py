"""Caddy 2's logs (JSON, zap). Exact text, from the project's real output:

* Caddy 2.6.2 (Debian bookworm ``caddy``) with a site ``log { output file …; format
  json }`` and ``reverse_proxy`` to two vLLM instances, one killed mid-test
  (recordings/caddy-crash): its access log (logger ``http.log.access.<name>``,
  message ``handled request``) and its own log on stderr (``http.log.error.<name>``
  for a request it answered with an error, ``http.handlers.reverse_proxy`` for a
  streamed answer cut off, start-up and shutdown notices).
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
    ProxyLineFormat,
    first_kind,
    format_text,
    json_field,
    no_lines,
    proxy_failures,
    proxy_rows,
    zap_time,
)

# zap's JSON encoder as Caddy configures it: "level", "ts" (epoch seconds, or an ISO
# string with `time_format`), "logger", "msg", then the entry's fields
CADDY_RE = r'^\{"level"\s*:\s*"(?:debug|info|warn|error|panic|fatal)"\s*,\s*"ts"\s*:'
ACCESS_LOGGER = r'"logger"\s*:\s*"http\.log\.access'
ERROR_LOGGER = r'"logger"\s*:\s*"http\.log\.error'
# the reverse proxy's own error when a backend's answer broke off mid-body (the status
# line was already sent): one "aborting with incomplete response" per request, after a
# "reading from backend" line for the same read error (noise: it would count it twice)
ABORT_RE = (
    r'"level"\s*:\s*"error".*"logger"\s*:\s*"http\.handlers\.reverse_proxy".*'
    r'"msg"\s*:\s*"aborting with incomplete response"'
)
CADDY_KINDS = {
    "timeout": r"[Tt]imeout|deadline exceeded",
    "conn_refused": r"connection refused",
    "conn_failed": r"dial tcp|no route to host|connection reset|EOF|broken pipe|no upstreams",
    "upstream_error": r".",
}


@register_line_format
class CaddyJson(ProxyLineFormat):
    """Caddy 2's JSON log lines.

    An access entry (``http.log.access…``, ``handled request``) → a
    `proxy_requests` row: `at` = ``ts`` (written when the request ended),
    `http_status` = ``status``, `request_time_s` = ``duration`` (seconds),
    method, path and client from ``request``, `request_id` from its
    ``X-Request-Id`` header. Caddy's access log names no upstream; its
    ``resp_headers`` tell who answered: a backend's headers copied through
    (``Date``, ``Content-Type``, its ``Server`` beside ``Caddy``) → the request
    reached a backend (`status_origin` upstream); a 5xx with Caddy's ``Server``
    header alone is Caddy's own answer (origin proxy; whether a backend was
    reached first is unknown). An error entry (``http.log.error…``: the
    request Caddy failed, its message the Go error, e.g. ``dial tcp
    127.0.0.1:8002: connect: connection refused`` with ``status`` 502) → a
    `proxy_event` with the dialled address; so is the reverse proxy's
    ``aborting with incomplete response`` (a backend that died mid-stream: its
    ``error`` ``unexpected EOF``; the access entry of that request says 200,
    the status already sent). Other entries (start-up, TLS, admin, shutdown,
    the ``reading from backend`` line before each abort) are noise.
    """

    name = "caddy_json"
    priority = 24
    per_line = True
    # Traefik v1's JSON own-log rule ("level" … "msg") matches zap's entries too: these are Caddy's
    supersedes = ("traefik_log",)
    samples = (
        Sample(
            "real output: Caddy 2.6.2 (Debian) access log, format json (recordings/caddy-crash)",
            '{"level":"info","ts":1796148776.3911011,"logger":"http.log.access.log0","msg":'
            '"handled request","request":{"remote_ip":"127.0.0.1","remote_port":"43220","proto":'
            '"HTTP/1.1","method":"POST","host":"127.0.0.1:8000","uri":"/v1/completions","headers":'
            '{"Content-Type":["application/json"],"Accept":["*/*"],"Accept-Encoding":["gzip, '
            'deflate"],"User-Agent":["Python/3.12 aiohttp/3.14.5"],"Content-Length":["582"]}},'
            '"user_id":"","duration":7.417851963,"size":48089,"status":200,"resp_headers":{"Vary":'
            '["Origin"],"Server":["Caddy","uvicorn"],"Date":["Tue, 01 Dec 2026 18:12:48 GMT"],'
            '"Content-Type":["text/event-stream; charset=utf-8"]}}',
            role="proxy",
            tables=(("proxy_requests", 1),),
        ),
        Sample(
            "real output: Caddy 2.6.2, its own log on stderr: a request to the killed instance "
            "(recordings/caddy-crash/caddy.log)",
            '{"level":"error","ts":1796148910.2515256,"logger":"http.log.error.log0","msg":"dial '
            'tcp 127.0.0.1:8002: connect: connection refused","request":{"remote_ip":"127.0.0.1",'
            '"remote_port":"54202","proto":"HTTP/1.1","method":"POST","host":"127.0.0.1:8000",'
            '"uri":"/v1/completions","headers":{"Accept":["*/*"],"Accept-Encoding":["gzip, '
            'deflate"],"User-Agent":["Python/3.12 aiohttp/3.14.5"],"Content-Length":["561"],'
            '"Content-Type":["application/json"]}},"duration":0.000181349,"status":502,"err_id":'
            '"e6xkyab4s","err_trace":"reverseproxy.statusError (reverseproxy.go:1272)"}',
            role="proxy",
            tables=(("proxy_events", 1),),
        ),
        Sample(
            "real output: Caddy 2.6.2, its own log: a streamed answer cut off when its instance "
            "was killed (recordings/caddy-crash/caddy.log)",
            '{"level":"error","ts":1796148847.9302285,"logger":"http.handlers.reverse_proxy",'
            '"msg":"aborting with incomplete response","error":"unexpected EOF"}',
            role="proxy",
            tables=(("proxy_events", 1),),
        ),
        Sample(
            "real output: Caddy 2.6.2, its own log: the read error before that abort",
            '{"level":"error","ts":1796148847.9300258,"logger":"http.handlers.reverse_proxy",'
            '"msg":"reading from backend","error":"unexpected EOF"}',
            role="proxy",
            status="noise",
        ),
        Sample(
            "real output: Caddy 2.6.2, its own log on stderr (recordings/caddy-crash/caddy.log)",
            '{"level":"info","ts":1796148759.6011784,"logger":"http.log","msg":"server running",'
            '"name":"srv0","protocols":["h1","h2","h3"]}',
            role="proxy",
            status="noise",
        ),
    )
    pattern = CADDY_RE

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        msg = pl.col("msg")
        gate = msg.str.starts_with('{"level"')
        if not lines.select(gate.any()).item():
            return Claim(records=no_lines())
        hits = lines.filter(gate).filter(msg.str.contains(CADDY_RE))
        access = hits.filter(msg.str.contains(ACCESS_LOGGER))
        errors = hits.filter(msg.str.contains(ERROR_LOGGER) | msg.str.contains(ABORT_RE))
        status = json_field("$.status", pl.Int64)
        # the answer's headers as logged: a backend's answer carries its own (copied
        # through: Date, Content-Type, its Server beside Caddy's); an answer Caddy made
        # itself (a failed dial's 502) carries Caddy's `Server` alone
        headers = msg.str.json_path_match("$.resp_headers")
        own_only = headers.str.contains(r'^\{\s*"Server"\s*:\s*\[\s*"Caddy"\s*\]\s*\}$')
        from_backend = headers.is_not_null() & ~own_only & (headers != "{}")
        frame = access.with_columns(
            pl.coalesce(zap_time(), pl.col("at")).alias("at"),
            json_field("$.request.remote_ip").alias("client"),
            json_field("$.request.method").alias("method"),
            json_field("$.request.uri").alias("path"),
            status.alias("http_status"),
            pl.lit(None, dtype=pl.Utf8).alias("upstream"),
            pl.when(from_backend).then(status).alias("upstream_status"),
            pl.when(from_backend)
            .then(pl.lit("upstream"))
            .when(own_only & (status >= 500))
            .then(pl.lit("proxy"))
            .otherwise(pl.lit("unknown"))
            .alias("status_origin"),
            pl.when(from_backend)
            .then(pl.lit("reached"))
            .otherwise(pl.lit("unknown"))
            .alias("delivery"),
            json_field("$.duration", pl.Float64).alias("request_time_s"),
            pl.coalesce(
                json_field("$.request.headers['X-Request-Id'][0]"),
                json_field("$.request.headers['X-Request-ID'][0]"),
            ).alias("request_id"),
        )
        rows = proxy_rows(frame, source)
        error_text = pl.coalesce(
            pl.when(msg.str.contains(ABORT_RE)).then(
                format_text(
                    "{}: {}", json_field("$.msg"), pl.coalesce(json_field("$.error"), pl.lit(""))
                )
            ),
            json_field("$.msg"),
        )
        failed = errors.with_columns(
            pl.coalesce(zap_time(), pl.col("at")).alias("at"),
            status.alias("http_status"),
            error_text.str.extract(r"dial tcp (\S+?):? ", 1).alias("upstream"),
            error_text.alias("_err"),
            json_field("$.request.method").alias("_method"),
            json_field("$.request.uri").alias("_uri"),
        )
        events = proxy_failures(
            failed,
            first_kind(CADDY_KINDS, pl.coalesce(pl.col("_err"), pl.lit(""))),
            format_text(
                "caddy failed {} {} with {}: {}",
                pl.coalesce(pl.col("_method"), pl.lit("?")),
                pl.coalesce(pl.col("_uri"), pl.lit("?")),
                pl.coalesce(pl.col("http_status").cast(pl.Utf8), pl.lit("no status")),
                pl.coalesce(pl.col("_err"), pl.lit("")),
            ),
            source,
        )
        used = pl.concat([access["line_no"], errors["line_no"]])
        noise = hits.filter(~pl.col("line_no").is_in(used.implode()))["line_no"]
        return Claim(
            records=used, noise=noise, tables={"proxy_requests": rows, "proxy_events": events}
        )
