"""HAProxy ``option httplog`` lines. Exact text, from the project's source:

* HAProxy ``doc/configuration.txt`` §8.2.3 (HTTP log format) and §8.5
  (termination states); the same line behind a syslog header (RFC 3164 or
  5424, ``log stdout format rfc3164|rfc5424``) loses that header first;
* its own notices on stderr, ``[NOTICE|WARNING|ALERT] (pid) : text`` (older
  releases put ``DDD/HHMMSS`` before the pid), and the same text sent to the
  log target: HAProxy 2.6.12 run here (``Server be/s1 is DOWN, reason: …``,
  ``Proxy fe stopped (cumulated conns: …)``).
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
    file_tz,
    first_kind,
    format_text,
    ms_duration,
    no_lines,
    proxy_failures,
    proxy_rows,
)

# ---------------------------------------------------------------------- HAProxy

HAPROXY_RE = (
    r"^(?:[\w.-]+\[\d+\]: )?(?P<client>\S+):(?P<cport>\d+) "
    r"\[(?P<accept>\d{2}/\w{3}/\d{4}:\d{2}:\d{2}:\d{2}(?:\.\d{3})?)\] "
    r"(?P<frontend>\S+) (?P<backend>[^/\s]+)/(?P<server>\S+) "
    r"(?P<TR>-?\d+)/(?P<Tw>-?\d+)/(?P<Tc>-?\d+)/(?P<Tr>-?\d+)/(?P<Ta>\+?-?\d+) +"
    r"(?P<status>-?\d+) (?P<bytes>\+?\d+) (?P<reqcookie>\S+) (?P<rescookie>\S+) (?P<term>\S{4}) "
    r"(?P<ac>\d+)/(?P<fc>\d+)/(?P<bc>\d+)/(?P<sc>\d+)/(?P<retries>\+?\d+) (?P<sq>\d+)/(?P<bq>\d+)"
    r'(?: \{[^}]*\})*(?: "(?P<request>[^"]*)")?'
)
# Termination state, first two characters (configuration.txt §8.5).
HAPROXY_KINDS = {
    "timeout": r"^s[CHD]",
    "queue_timeout": r"^sQ",
    "conn_refused": r"^SC",
    "upstream_closed": r"^S[HD]",
    "proxy_rejected": r"^P",
    "resource": r"^R",
    "internal": r"^I",
    "server_down": r"^D",
}


@register_line_format
class HaproxyHttp(ProxyLineFormat):
    """HAProxy's ``option httplog`` line (syslog or ``log stdout``).

    `at` = accept date (local time, no zone: the server zone) + Ta (ms).
    ``<NOSRV>`` or a session that ended while waiting for the request, in the
    queue, or while connecting (state ``?R``, ``?Q``, ``?C``; Tc = -1) never
    reached a server; ended in the headers or data phase (``?H``, ``?D``,
    ``?L``) or normally, it did. A normal end with a server, or any end in
    the data phase, passes the server's status; otherwise HAProxy produced
    it (`status_origin` = proxy). Events: ``sH``/``sC``/``sD`` timeout,
    ``SC`` refused, ``SH``/``SD`` upstream closed, ``sQ`` queue timeout,
    ``<NOSRV>`` 503 no live upstream, ``P?`` rejected by the proxy.

    `attempts` is the retries count plus one (§8.2.3: connection retries; a
    ``+`` before it means the session was redispatched and the logged server
    is the last one, not the first), 0 for ``<NOSRV>``. Which server an
    earlier attempt went to, and whether it got there (a ``retry-on`` of a
    layer-7 error did), the line does not say: `also_reached` stays null.
    """

    name = "haproxy_http"
    priority = 32
    per_line = True
    samples = (
        Sample(
            "corpus haproxy-queue haproxy.log (HAProxy 2.6, log stdout)",
            "127.0.0.1:49714 [01/Dec/2026:12:46:34.836] vllm_front vllm_backend/vllm1 "
            '0/0/0/9197/9199 200 1426 - - ---- 1/1/0/0/0 0/0 "POST /v1/chat/completions HTTP/1.1"',
            role="proxy",
            tables=(("proxy_requests", 1),),
        ),
        Sample(
            "HAProxy 2.6.12 run here with log stdout format rfc5424, then rfc3164 (sC-- after a "
            "closed server port)",
            "<134>1 2026-12-01T14:18:01.223808+00:00 - haproxy 17157 - - 127.0.0.1:47326 "
            "[01/Dec/2026:14:17:58.219] fe be/s2 0/0/-1/-1/3004 503 217 - - SC-- 1/1/0/0/3 0/0 "
            '"POST /v1/chat/completions HTTP/1.1"\n'
            "<134>Dec  1 14:18:12 localhost haproxy[17325]: 127.0.0.1:33806 "
            "[01/Dec/2026:14:18:09.211] fe be/s2 0/0/-1/-1/3005 503 217 - - SC-- 1/1/0/0/3 0/0 "
            '"POST /v1/chat/completions HTTP/1.1"',
            role="proxy",
            tables=(("proxy_requests", 2), ("proxy_events", 2)),
        ),
    )
    pattern = HAPROXY_RE

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        hits = self.parsed(lines, HAPROXY_RE)
        term = pl.col("term")
        cause, phase = term.str.slice(0, 1), term.str.slice(1, 1)
        nosrv = pl.col("server") == "<NOSRV>"
        status = pl.col("status").cast(pl.Int64, strict=False)
        ta = pl.col("Ta").str.strip_prefix("+").cast(pl.Float64, strict=False)
        tr = pl.col("Tr").cast(pl.Float64, strict=False)
        tc = pl.col("Tc").cast(pl.Int64, strict=False)
        accept = pl.col("accept")
        frame = hits.with_columns(accept.alias("_acc"))
        frame = frame.with_columns(
            (
                pl.coalesce(
                    timeparse.naive_to_utc(pl.col("_acc"), "%d/%b/%Y:%H:%M:%S%.f", file_tz(lines)),
                    timeparse.naive_to_utc(pl.col("_acc"), "%d/%b/%Y:%H:%M:%S", file_tz(lines)),
                    pl.col("at"),
                )
                + ms_duration(pl.when(ta >= 0).then(ta).otherwise(0.0))
            ).alias("at"),
            pl.when(status > 0).then(status).alias("http_status"),
            pl.when(nosrv)
            .then(pl.col("backend"))
            .otherwise(format_text("{}/{}", pl.col("backend"), pl.col("server")))
            .alias("upstream"),
            pl.when(phase.is_in(["D", "L"]) | ((cause == "-") & ~nosrv))
            .then(pl.lit("upstream"))
            .when(cause.is_in(["C", "c"]) & ~nosrv)
            .then(pl.lit("unknown"))
            .otherwise(pl.lit("proxy"))
            .alias("status_origin"),
            pl.when(nosrv | phase.is_in(["R", "Q", "C", "T"]) | (tc == -1))
            .then(pl.lit("refused"))
            .when(phase.is_in(["H", "D", "L", "-"]))
            .then(pl.lit("reached"))
            .otherwise(pl.lit("unknown"))
            .alias("delivery"),
            (ta / 1000).alias("request_time_s"),
            pl.when(tr >= 0).then(tr / 1000).alias("upstream_time_s"),
            pl.when(nosrv)
            .then(0)
            .otherwise(pl.col("retries").str.strip_prefix("+").cast(pl.Int64, strict=False) + 1)
            .alias("attempts"),
            pl.col("request").str.extract(r"^([A-Z]+) ", 1).alias("method"),
            pl.col("request").str.extract(r"^[A-Z]+ (\S+)", 1).alias("path"),
        ).with_columns(
            pl.when(pl.col("status_origin") == "upstream")
            .then(pl.col("http_status"))
            .alias("upstream_status")
        )
        rows = proxy_rows(frame, source)
        state_kind = first_kind(HAPROXY_KINDS, term)
        kind = (
            pl.when(nosrv & (pl.col("http_status") >= 500))
            .then(pl.lit("no_live_upstream"))
            .when(state_kind.is_not_null())
            .then(state_kind)
            .when((pl.col("status_origin") == "upstream") & (pl.col("http_status") >= 500))
            .then(pl.lit("upstream_5xx"))
        )
        detail = format_text(
            "haproxy {} {} state {} via {}/{} timers {}/{}/{}/{}/{}",
            pl.coalesce(pl.col("http_status").cast(pl.Utf8), pl.lit("-1")),
            pl.coalesce(pl.col("request"), pl.lit("?")),
            term,
            pl.col("backend"),
            pl.col("server"),
            pl.col("TR"),
            pl.col("Tw"),
            pl.col("Tc"),
            pl.col("Tr"),
            pl.col("Ta"),
        )
        return Claim(
            records=hits["line_no"],
            tables={
                "proxy_requests": rows,
                "proxy_events": proxy_failures(frame, kind, detail, source),
            },
        )


HAPROXY_NOTICE_RE = r"^\[(?:NOTICE|WARNING|ALERT)\]\s+(?:\d{3}/\d{6} )?\(\d+\) : (?P<note>.*)$"
# The notices HAProxy also sends to its log target, without the "[LEVEL] (pid) : " part.
HAPROXY_STATE_RE = (
    r"^(?:Server (?P<server>\S+/\S+) is (?P<state>DOWN|UP|going DOWN for maintenance)\b"
    r"|(?:backend|proxy) (?P<nobackend>\S+) has no server available!"
    r"|Proxy \S+ (?:stopped|started)|Stopping (?:proxy|frontend|backend) \S+ in \d+ ms"
    r"|Loading success|haproxy version is |path to executable is |New worker \(\d+\) forked"
    r"|Exiting (?:Master|master) process|Current worker \(\d+\) exited)"
)


@register_line_format
class HaproxyNotices(ProxyLineFormat):
    """HAProxy's start-up, stop and health-check notices.

    ``Server B/S is DOWN`` → a `proxy_events` row (``server_down``, `upstream`
    = ``B/S`` as the access lines name it), ``… has no server available!`` →
    ``no_live_upstream``; ``is UP`` and the start/stop notices are noise. The
    stderr copy and the log-target copy of one notice are both read: an event
    may appear twice, once without a time.
    """

    name = "haproxy_notices"
    priority = 38
    per_line = True
    samples = (
        Sample(
            "HAProxy 2.6.12 (Debian) run here: a health check on a closed port, stderr and rfc5424",
            "[WARNING]  (17157) : Server be/s1 is DOWN, reason: Layer4 connection problem, info: "
            '"Connection refused", check duration: 0ms. 1 active and 0 backup servers left. 0 '
            "sessions active, 0 requeued, 0 remaining in queue.\n"
            "<129>1 2026-12-01T14:17:56.375427+00:00 - haproxy 17157 - - Server be/s1 is DOWN, "
            'reason: Layer4 connection problem, info: "Connection refused", check duration: 0ms. '
            "1 active and 0 backup servers left. 0 sessions active, 0 requeued, 0 remaining in "
            "queue.",
            role="proxy",
            tables=(("proxy_events", 2),),
        ),
        Sample(
            "corpus haproxy-queue haproxy.log:42-43 (HAProxy 2.6 soft stop, stderr and log copy)",
            "[WARNING]  (26116) : Proxy vllm_front stopped (cumulated conns: FE: 41, BE: 0).\n"
            "Proxy vllm_front stopped (cumulated conns: FE: 41, BE: 0).",
            role="proxy",
            status="noise",
        ),
    )
    pattern = HAPROXY_NOTICE_RE + "|" + HAPROXY_STATE_RE

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        msg = pl.col("msg")
        gate = msg.str.starts_with("[") | msg.str.contains(
            r"^(?:Server|Proxy|backend|proxy|Stopping|Loading|haproxy|path|New|Exiting|Current) "
        )
        candidates = lines.filter(gate)
        if candidates.is_empty():
            return Claim(records=no_lines())
        hits = candidates.with_columns(
            pl.coalesce(msg.str.extract(HAPROXY_NOTICE_RE, 1), msg).alias("_note")
        ).filter(msg.str.contains(HAPROXY_NOTICE_RE) | msg.str.contains(HAPROXY_STATE_RE))
        state = hits.with_columns(
            pl.col("_note").str.extract_groups(HAPROXY_STATE_RE).alias("_s")
        ).unnest("_s")
        kind = (
            pl.when(pl.col("state") == "DOWN")
            .then(pl.lit("server_down"))
            .when(pl.col("nobackend").is_not_null())
            .then(pl.lit("no_live_upstream"))
        )
        frame = state.with_columns(
            pl.lit(None, dtype=pl.Int64).alias("http_status"),
            pl.coalesce(pl.col("server"), pl.col("nobackend")).alias("upstream"),
        )
        events = proxy_failures(frame, kind, pl.col("_note"), source)
        used = frame.filter(kind.is_not_null())["line_no"]
        noise = frame.filter(kind.is_null())["line_no"]
        return Claim(records=used, noise=noise, tables={"proxy_events": events})
