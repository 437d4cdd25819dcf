"""nginx access and error logs. Exact text, from the project's source:

* nginx ``src/http/modules/ngx_http_log_module.c`` (``combined``), the
  upstream variables' list syntax (``, `` between attempts, `` : `` between
  internal redirects, the upstream group's name when no server was live) from
  nginx's ``ngx_http_upstream.c`` / docs; ingress-nginx's default
  ``log-format-upstream`` (``kubernetes/ingress-nginx`` docs); nginx
  ``src/core/ngx_log.c`` error.log prefix and ``ngx_http_upstream.c`` /
  ``src/event/ngx_event_connect.c`` messages;
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
from logforensics.ingest.proxies.traefik import TRAEFIK_CLF_RE
from logforensics.ingest.toolkit import (
    QUOTED,
    ProxyLineFormat,
    dash_null,
    file_tz,
    first_kind,
    format_text,
    in_parts,
    no_lines,
    proxy_failures,
    source_column,
)

# ---------------------------------------------------------------- nginx access

NGINX_CLF_RE = (
    r"^(?P<client>\S+) - \S+ \[(?P<time>\d{2}/\w{3}/\d{4}:\d{2}:\d{2}:\d{2} [+-]\d{4})\] "
    r'"(?P<request>(?:[^"\\]|\\.)*)" (?P<status>\d{3}) (?:\d+|-)'
    rf"(?: {QUOTED} {QUOTED})?(?P<rest>.*)$"
)
# One upstream variable: values between attempts ", ", between redirects " : ".
LIST = r"[^\s,]+(?:(?:, | : )[^\s,]+)*"
INGRESS_REST_RE = (
    rf"^ (?P<reqlen>\d+) (?P<rt>[\d.]+) \[(?P<pun>[^\]]*)\] \[(?P<paun>[^\]]*)\] "
    rf"(?P<ua>{LIST}) (?P<url>{LIST}) (?P<urt>{LIST}) (?P<us>{LIST}) (?P<rid>\S+)"
)
POSITIONAL_REST_RE = rf"^ (?P<ua>{LIST}) (?P<us>{LIST}) (?P<rt>\d+\.\d+) (?P<urt>{LIST})\s*$"
# The common layout in one regex: combined with referer and agent, a request
# ``METHOD path …`` (the path printable ASCII, no `"` or `\`), then one value (no
# retry list, no `=`) in each positional upstream variable. Its ASCII classes are
# subsets of the general regexes' Unicode ones, which keeps the regex engine on its
# fast path; a line it matches is read by the general regexes (and REQUEST_RE) into
# the same fields.
VISIBLE = r"[!-~]+"
ONE_VALUE = r"[!-+\--<>-~]+"  # printable ASCII but `,` and `=`
PATH = r"[!#-\[\]-~]+"  # printable ASCII but `"` and `\`
NGINX_COMMON_RE = (
    rf"^(?P<client>{VISIBLE}) - {VISIBLE} "
    r"\[(?P<time>[0-9]{2}/[A-Za-z]{3}/[0-9]{4}:[0-9]{2}:[0-9]{2}:[0-9]{2} [+-][0-9]{4})\] "
    rf'"(?P<request>(?P<method>[A-Z]+) (?P<path>{PATH})(?: (?:[^"\\]|\\.)*)?)" '
    r"(?P<status>[0-9]{3}) (?:[0-9]+|-) "
    rf"{QUOTED} {QUOTED} (?P<ua>{ONE_VALUE}) (?P<us>{ONE_VALUE}) "
    rf"(?P<rt>[0-9]+\.[0-9]+) (?P<urt>{ONE_VALUE})$"
)
REQUEST_RE = r"^(?P<method>[A-Z]+) (?P<path>\S+)?"
KV_NAMES = {
    "rt": r"(?:rt|request_time)",
    "ua": r"(?:ua|upstream_addr|upstream|upstream_address)",
    "us": r"(?:us|upstream_status)",
    "urt": r"(?:urt|upstream_response_time)",
    "uct": r"(?:uct|upstream_connect_time)",
    "rid": r"(?:rid|request_id|req_id|x_request_id|xrid)",
    "msec": r"(?:msec)",
}
# The fields every layout is read into, in one order (its pieces are concatenated).
NGINX_FIELDS = (
    "line_no", "instance", "at", "client", "time", "request", "method", "path", "status",
    "ua", "us", "rt", "urt", "uct", "rid", "msec",
)  # fmt: skip


def _kv(name: str) -> pl.Expr:
    key = KV_NAMES[name]
    rest = pl.col("rest")
    return pl.coalesce(
        rest.str.extract(rf'(?:^|\s){key}="([^"]*)"', 1),
        rest.str.extract(rf"(?:^|\s){key}=([^\s\"]+)", 1),
    )


def _items(col: str) -> pl.Expr:
    """An upstream variable's values in attempt order (redirect groups flattened)."""
    return pl.col(col).str.replace_all(" : ", ", ", literal=True).str.split(", ")


def _is_group_name(value: pl.Expr) -> pl.Expr:
    """nginx writes the upstream block's name when no server could be selected."""
    return value.is_not_null() & (value != "-") & ~value.str.contains(r"[:/]")


def _read(lines: pl.DataFrame, regex: str) -> pl.DataFrame:
    """Every line with `regex`'s groups, in one regex pass; `client` is null where it fails.

    (Every layout's regex captures `client` in every match.)
    """
    groups = in_parts(lines, pl.col("msg").str.extract_groups(regex)).unnest("msg")
    return pl.concat([lines.select("line_no", "instance", "at"), groups], how="horizontal")


def _in_file_order(rows: pl.DataFrame) -> pl.DataFrame:
    """The rows some layout read (`client` set), by `line_no`: one gather of the narrow rows."""
    read = pl.col("client").is_not_null()
    order = rows.select(
        pl.int_range(pl.len(), dtype=pl.UInt32).filter(read).sort_by(pl.col("line_no").filter(read))
    ).to_series()
    return rows[order]


def _general_layouts(lines: pl.DataFrame) -> list[pl.DataFrame]:
    """Lines the common layout missed: ingress-nginx, ``key=value`` pairs, retry lists, plain."""
    hits = _read(lines, NGINX_CLF_RE).filter(pl.col("client").is_not_null())
    # Traefik's CLF line starts as combined does; its tail (count, router, service, ms) is Traefik's.
    traefik = pl.col("rest").str.ends_with("ms") & pl.col("msg").str.contains(TRAEFIK_CLF_RE)
    if hits.select(pl.col("rest").str.ends_with("ms").any()).item():
        hits = hits.join(lines.select("line_no", "msg"), on="line_no").filter(~traefik).drop("msg")
    hits = hits.with_columns(pl.col("request").str.extract_groups(REQUEST_RE).alias("_r")).unnest(
        "_r"
    )
    ingress = pl.col("rest").str.extract_groups(INGRESS_REST_RE).alias("_i")
    positional = pl.col("rest").str.extract_groups(POSITIONAL_REST_RE).alias("_p")
    hits = hits.with_columns(ingress, positional).with_columns(
        pl.coalesce(pl.col("_i").struct.field(name), pl.col("_p").struct.field(name)).alias(name)
        for name in ("ua", "us", "rt", "urt")
    )
    hits = hits.with_columns(pl.col("_i").struct.field("rid").alias("rid"))
    # A key=value pair needs an `=`: only lines holding one are searched for the six keys.
    has_pairs = hits["rest"].str.contains("=", literal=True)
    pairs = hits.filter(has_pairs).with_columns(
        *(pl.coalesce(name, _kv(name)).alias(name) for name in ("ua", "us", "rt", "urt", "rid")),
        _kv("uct").alias("uct"),
        _kv("msec").alias("msec"),
    )
    plain = hits.filter(~has_pairs).with_columns(
        pl.lit(None, dtype=pl.Utf8).alias("uct"), pl.lit(None, dtype=pl.Utf8).alias("msec")
    )
    return [pairs.select(NGINX_FIELDS), plain.select(NGINX_FIELDS)]


def _unsigned_zero(seconds: pl.Expr) -> pl.Expr:
    """0.0 for ``-0.000``: polars' list sum keeps or drops that sign depending on other rows."""
    return pl.when(seconds == 0).then(0.0).otherwise(seconds)


def _single_value_facts() -> list[pl.Expr]:
    """What the upstream variables say, where each holds one value (or none).

    They equal `_listed_facts` on every such row where it matters: where a
    variable is null, these give false or 0.0 and the lists null, which every
    use below reads the same way.
    """
    last_status = pl.col("us").cast(pl.Int64, strict=False)
    return [
        last_status.alias("_last_us"),
        (last_status.is_not_null() & ~last_status.is_in([502, 504])).alias("_answer_ok"),
        pl.col("uct").cast(pl.Float64, strict=False).is_not_null().alias("_connected"),
        (_is_group_name(pl.col("ua")) & pl.col("ua").is_not_null()).alias("_group"),
        _unsigned_zero(pl.col("urt").cast(pl.Float64, strict=False).fill_null(0.0)).alias(
            "_urt_sum"
        ),
        pl.when(pl.col("ua") == "-")
        .then(0)
        .when(pl.col("ua").is_not_null())
        .then(1)
        .cast(pl.Int32)
        .alias("_attempts"),
        pl.lit(None, dtype=pl.Utf8).alias("_also"),
    ]


def _listed_facts() -> list[pl.Expr]:
    """What the upstream variables say, from lists of attempts (retries, internal redirects).

    `_last_us`: the last attempt's status; `_answer_ok`: an attempt got an
    answer nginx did not make up (not 502/504); `_connected`: an attempt logged
    a connect time; `_group`: every address is an upstream group's name;
    `_urt_sum`: the attempts' response times added up; `_attempts`: how many
    (`_also`, the earlier ones that reached their upstream, is `_earlier_reached`'s).
    """
    statuses = _items("us").list.eval(pl.element().cast(pl.Int64, strict=False))
    return [
        statuses.list.last().alias("_last_us"),
        statuses.list.eval(pl.element().is_not_null() & ~pl.element().is_in([502, 504]))
        .list.any()
        .alias("_answer_ok"),
        _items("uct")
        .list.eval(pl.element().cast(pl.Float64, strict=False).is_not_null())
        .list.any()
        .alias("_connected"),
        (
            _items("ua").list.eval(_is_group_name(pl.element())).list.all()
            & pl.col("ua").is_not_null()
        ).alias("_group"),
        _unsigned_zero(
            _items("urt").list.eval(pl.element().cast(pl.Float64, strict=False)).list.sum()
        ).alias("_urt_sum"),
        _items("ua")
        .list.eval((pl.element() != "-").sum())
        .list.first()
        .cast(pl.Int32)
        .alias("_attempts"),
    ]


def _earlier_reached(listed: pl.DataFrame) -> pl.Series:
    """Per row, the addresses of the attempts before the last that reached their upstream
    (``, ``-joined; null for none): a retried request was in those instances too.

    An attempt reached its upstream when it logged a connect time (``uct="0.000, 0.000"``:
    the first one connected, then the upstream closed or timed out) or an answer nginx did
    not make up (``us="500, 200"`` under ``proxy_next_upstream http_500``). ``uct="-"`` is a
    connect refused; a 502 with no connect time logged cannot tell, and is not counted.
    """
    rows = listed.select(
        pl.int_range(pl.len()).alias("_k"), *(_items(c).alias(c) for c in ("ua", "uct", "us"))
    )

    def attempts(col: str) -> pl.DataFrame:
        return rows.select(
            "_k", pl.col(col).list.eval(pl.int_range(pl.len())).alias("_n"), col
        ).explode("_n", col)

    status = pl.col("us").cast(pl.Int64, strict=False)
    earlier = (
        attempts("ua")
        .join(rows.select("_k", pl.col("ua").list.len().alias("_of")), on="_k")
        .filter(pl.col("_n") < pl.col("_of") - 1)
        .join(attempts("uct"), on=["_k", "_n"], how="left")
        .join(attempts("us"), on=["_k", "_n"], how="left")
        .filter(
            pl.col("uct").cast(pl.Float64, strict=False).is_not_null()
            | (status.is_not_null() & ~status.is_in([502, 504]))
        )
        .group_by("_k")
        .agg(pl.col("ua").sort_by("_n").str.join(", "))
    )
    return (
        rows.select("_k")
        .join(earlier, on="_k", how="left", maintain_order="left")["ua"]
        .alias("_also")
    )


def _with_upstream_facts(frame: pl.DataFrame) -> list[pl.DataFrame]:
    """`frame` with the upstream facts; only rows logging several attempts are split into lists."""
    listed = pl.any_horizontal(
        pl.col(name).str.contains(", | : ") for name in ("ua", "us", "urt", "uct")
    ).fill_null(False)
    is_listed = frame.select(listed).to_series()
    if not is_listed.any():
        return [frame.with_columns(_single_value_facts())]
    listed = frame.filter(is_listed).with_columns(_listed_facts())
    return [
        frame.filter(~is_listed).with_columns(_single_value_facts()),
        listed.with_columns(_earlier_reached(listed)),
    ]


@register_line_format
class NginxAccess(ProxyLineFormat):
    """nginx access lines: ``combined``, plus the upstream variables when logged.

    Three layouts of the upstream variables are read: ingress-nginx's default
    ``… $request_length $request_time [$proxy_upstream_name]
    [$proxy_alternative_upstream_name] $upstream_addr
    $upstream_response_length $upstream_response_time $upstream_status
    $req_id``; ``combined $upstream_addr $upstream_status $request_time
    $upstream_response_time``; and ``key=value`` pairs (``rt= ua="" us=""
    urt="" uct="" rid=``, or the variables' own names).

    `at` is ``$time_local``: nginx writes the access line when the request
    ENDS, so `at` is the end of the request (its start is `at` −
    `request_time_s`). `upstream` is ``$upstream_addr`` as logged (every
    attempt; the last one served the answer); `upstream_status` is the last
    attempt's status; `upstream_time_s` sums the attempts' times.

    Who answered: nginx records 502 (connect refused, reset, premature close)
    or 504 (timeout) as the *upstream* status of an attempt that failed, so a
    last upstream status of 502/504 means nginx produced the answer
    (`status_origin` = proxy; a backend that itself answers 502/504 is taken
    for the same). Any other upstream status equal to the answer is the
    backend's. ``-`` as the upstream address (nginx answered without one) or
    the group's name (``no live upstreams``) means the request never reached
    a backend (`delivery` = refused). A successful upstream answer in any
    attempt proves it reached one; a connect time logged for an attempt
    (``$upstream_connect_time``) proves the connection was made; else unknown.
    A plain ``combined`` line cannot tell either.

    Speed: most lines are in one layout (`NGINX_COMMON_RE`), read by one regex
    with no list of attempts to split; only the other lines go through the
    general regexes, and only lines logging several attempts are split.
    """

    name = "nginx_access"
    priority = 34
    per_line = True
    samples = (
        Sample(
            "corpus kv-tiny nginx-access.log (nginx 1.22.1, the lab's key=value log_format)",
            '127.0.0.1 - - [29/Nov/2026:16:09:24 +0000] "POST /v1/chat/completions HTTP/1.1" 200 '
            '7591 "-" "python-requests/2.34.2" rt=19.218 uct="0.000" urt="19.218" '
            'ua="127.0.0.1:8001" us="200" msec=1795968564.952',
            role="proxy",
            tables=(("proxy_requests", 1),),
        ),
        Sample(
            "nginx 1.22.1 run here, escape=default: a quote in the user agent is written \\x22",
            '127.0.0.1 - - [01/Dec/2026:15:03:47 +0000] "POST /v1/chat/completions?q=%22x%22 '
            'HTTP/1.1" 502 157 "-" "evil \\x22agent\\x22" ua="vllm" us="502" rt=0.000',
            role="proxy",
            tables=(("proxy_requests", 1), ("proxy_events", 1)),
        ),
    )
    pattern = NGINX_CLF_RE

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        common = _read(lines, NGINX_COMMON_RE)
        in_common = common["client"].is_not_null()
        parts = []
        if in_common.any():
            # A line in another layout stays an empty row (no `client`) until one gather
            # of the narrow rows drops it: cheaper than filtering the captured text here.
            common = common.with_columns(
                pl.lit(None, dtype=pl.Utf8).alias(name) for name in ("uct", "rid", "msec")
            ).select(NGINX_FIELDS)
            parts.append(_requests_and_failures(common.with_columns(_single_value_facts())))
        del common  # its captured text is done with: free it before the other layouts
        if not in_common.all():
            others = lines.select("line_no", "instance", "at", "msg")
            if in_common.any():
                others = others.filter(~in_common)
            for layout in _general_layouts(others):
                parts += [_requests_and_failures(piece) for piece in _with_upstream_facts(layout)]
        if not parts:
            return Claim(records=no_lines())
        rows = pl.concat([rows for rows, _ in parts])
        failures = pl.concat([failures for _, failures in parts])
        if not in_common.all():
            rows, failures = _in_file_order(rows), failures.sort("line_no")
        if rows.is_empty():
            return Claim(records=no_lines())
        return Claim(
            records=rows["line_no"],
            tables={
                "proxy_requests": rows.with_columns(source_column(source)).drop("line_no"),
                "proxy_events": proxy_failures(
                    failures, pl.col("_kind"), pl.col("_detail"), source
                ),
            },
        )


def _requests_and_failures(hits: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(`proxy_requests` rows, failures for `proxy_events`) of one layout's lines, with `line_no`."""
    last_us = pl.col("_last_us")
    group = pl.col("_group")
    no_upstream = pl.col("ua") == "-"
    logged = pl.col("ua").is_not_null()
    status = pl.col("status").cast(pl.Int64)
    frame = hits.with_columns(
        status.alias("http_status"),
        pl.when(no_upstream).then(None).otherwise(pl.col("ua")).alias("upstream"),
        last_us.alias("upstream_status"),
        pl.when(~logged)
        .then(pl.lit("unknown"))
        .when(no_upstream | group)
        .then(pl.lit("proxy"))
        .when(last_us.is_in([502, 504]))
        .then(pl.lit("proxy"))
        .when(last_us == status)
        .then(pl.lit("upstream"))
        .otherwise(pl.lit("proxy"))
        .alias("status_origin"),
        pl.when(~logged)
        .then(pl.lit("unknown"))
        .when(pl.col("_answer_ok"))
        .then(pl.lit("reached"))
        .when(no_upstream | group)
        .then(pl.lit("refused"))
        .when(pl.col("uct").is_not_null() & pl.col("_connected"))
        .then(pl.lit("reached"))
        .when(pl.col("uct").is_not_null())
        .then(pl.lit("refused"))
        .otherwise(pl.lit("unknown"))
        .alias("delivery"),
        # $msec (the same moment as $time_local, to the millisecond) where it was logged
        pl.coalesce(
            timeparse.epoch_to_utc(pl.col("msec").cast(pl.Float64, strict=False)),
            timeparse.clf_to_utc(pl.col("time")),
            pl.col("at"),
        ).alias("at"),
        pl.col("rt").cast(pl.Float64, strict=False).alias("request_time_s"),
        pl.when(pl.col("urt").is_null() | (pl.col("urt") == "-"))
        .then(None)
        .otherwise(pl.col("_urt_sum"))
        .alias("upstream_time_s"),
        dash_null("rid").alias("request_id"),
        pl.col("_attempts").alias("attempts"),
        pl.col("_also").alias("also_reached"),
    )
    rows = frame.select(
        "line_no",
        "at",
        pl.col("instance").alias("proxy"),
        "client",
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
        "attempts",
        "also_reached",
    )
    st = pl.col("http_status")
    kind = (
        pl.when(st < 500)
        .then(None)
        .when(group)
        .then(pl.lit("no_live_upstream"))
        .when(pl.col("status_origin") == "upstream")
        .then(pl.lit("upstream_5xx"))
        .when(st == 504)
        .then(pl.lit("timeout"))
        .when(st == 502)
        .then(pl.lit("bad_gateway"))
        .when(st == 503)
        .then(pl.lit("unavailable"))
        .otherwise(pl.lit("http_5xx"))
    )
    detail = format_text(
        "nginx answered {} to {} (upstream {}, upstream status {})",
        pl.col("http_status"),
        pl.col("request"),
        pl.coalesce(pl.col("ua"), pl.lit("not logged")),
        pl.coalesce(pl.col("us"), pl.lit("not logged")),
    )
    failures = (
        frame.with_columns(kind.alias("_kind"))
        .filter(pl.col("_kind").is_not_null() & pl.col("client").is_not_null())
        .select("line_no", "at", "_kind", "http_status", "upstream", detail.alias("_detail"))
    )
    return rows, failures


# ---------------------------------------------------------------- nginx error

NGINX_ERROR_RE = (
    r"^(?P<ts>\d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}) \[(?P<lvl>debug|info|notice|warn|error|crit|alert|emerg)\] "
    r"(?P<pid>\d+)#(?P<tid>\d+): (?:\*(?P<conn>\d+) )?(?P<etext>.*)$"
)
NGINX_FAILURES = {
    "timeout": r"^upstream timed out",
    "conn_refused": r"^connect\(\) (?:to \S+ )?failed \(111: ",
    "conn_failed": r"^connect\(\) (?:to \S+ )?failed",
    "no_live_upstream": r"^no live upstreams",
    "upstream_closed": r"^upstream prematurely closed connection",
    "conn_reset": r"^(?:recv|readv|read)\(\) failed \(104: [^)]*\) while (?:reading|sending)[^,]*upstream",
    "broken_pipe": r"^(?:send|writev|write|sendfile)\(\) failed \(32: Broken pipe\) while [^,]*upstream",
    "upstream_error": r"^upstream sent |^upstream \w+ (?:error|invalid)",
}


@register_line_format
class NginxError(ProxyLineFormat):
    """nginx's error.log. Upstream failures → `proxy_events`; other lines are noise.

    ``YYYY/MM/DD HH:MM:SS`` is the server's local time (no zone: read in the
    server zone). The context suffix gives ``client``, ``server``,
    ``request`` and ``upstream`` (``http://10.0.0.21:8000/v1/…`` → `upstream`
    ``10.0.0.21:8000``; with ``no live upstreams`` it is the group's name).
    nginx answers 504 after a timeout and 502 after the other failures
    unless a retry (``proxy_next_upstream``) succeeds, so `http_status` is
    left to the access line.
    """

    name = "nginx_error"
    priority = 35
    per_line = True
    samples = (
        Sample(
            "corpus crash-midtest nginx-error.log (nginx 1.22.1)",
            "2026/12/01 13:14:52 [error] 30461#30461: *47 upstream prematurely closed connection "
            "while reading response header from upstream, client: 127.0.0.1, server: vllm-front, "
            'request: "POST /v1/chat/completions HTTP/1.1", upstream: '
            '"http://127.0.0.1:8002/v1/chat/completions", host: "127.0.0.1:8000"',
            role="proxy",
            tables=(("proxy_events", 1),),
        ),
    )
    pattern = NGINX_ERROR_RE

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        hits = self.parsed(lines, NGINX_ERROR_RE)
        text = pl.col("etext")
        message = text.str.extract(r"^(.*?)(?: while |, client: |$)", 1)
        kind = first_kind(NGINX_FAILURES, text)
        frame = hits.with_columns(
            pl.coalesce(
                timeparse.naive_to_utc(pl.col("ts"), "%Y/%m/%d %H:%M:%S", file_tz(lines)),
                pl.col("at"),
            ).alias("at"),
            pl.lit(None, dtype=pl.Int64).alias("http_status"),
            pl.coalesce(
                text.str.extract(r', upstream: "[a-z]+://([^/"]+)', 1),
                text.str.extract(r"^connect\(\) to (\S+) failed", 1),
            ).alias("upstream"),
            format_text(
                "{}{}; client {}, request {}",
                message,
                pl.coalesce(
                    format_text(" while {}", text.str.extract(r" while (.*?)(?:, client: |$)", 1)),
                    pl.lit(""),
                ),
                pl.coalesce(text.str.extract(r", client: ([^,]+)", 1), pl.lit("?")),
                pl.coalesce(text.str.extract(r', request: "([^"]*)"', 1), pl.lit("?")),
            ).alias("_detail_text"),
        )
        failing = pl.col("lvl").is_in(["error", "crit", "alert", "emerg"])
        events = proxy_failures(frame, pl.when(failing).then(kind), pl.col("_detail_text"), source)
        used = frame.filter(failing & kind.is_not_null())["line_no"]
        noise = frame.filter(~pl.col("line_no").is_in(used.implode()))["line_no"]
        return Claim(records=used, noise=noise, tables={"proxy_events": events})


# ------------------------------------------------------- nginx escape=json

# Keys people give `log_format … escape=json '{…}'`: nginx's own variable names (and the
# short forms of the key=value layout); the first present is read.
JSON_KEYS = {
    "time": ("time_local",),
    "iso": ("time_iso8601", "@timestamp", "timestamp", "time"),
    "msec": ("msec",),
    "client": ("remote_addr", "client", "client_ip", "ip"),
    "request": ("request",),
    "method": ("request_method", "method"),
    "path": ("request_uri", "uri", "path"),
    "status": ("status",),
    "ua": ("upstream_addr", "upstream", "ua"),
    "us": ("upstream_status", "us"),
    "rt": ("request_time", "rt"),
    "urt": ("upstream_response_time", "urt"),
    "uct": ("upstream_connect_time", "uct"),
    "rid": ("request_id", "req_id", "x_request_id", "rid"),
}
NGINX_JSON_RE = r'^\{.*"(?:upstream_addr|request_time|remote_addr)"\s*:'


def _json_field(names: tuple[str, ...]) -> pl.Expr:
    return pl.coalesce(pl.col("msg").str.json_path_match(f"$['{name}']") for name in names)


@register_line_format
class NginxJson(ProxyLineFormat):
    """nginx access lines written with ``log_format NAME escape=json '{…}'``: the same
    variables as the text layouts, read by key (`JSON_KEYS`), with the same semantics.
    `at` is ``$msec`` / ``$time_local`` / ``$time_iso8601``: the end of the request."""

    name = "nginx_json"
    priority = 29
    per_line = True
    samples = (
        Sample(
            "nginx 1.22.1 run here with an escape=json log_format: a 200, a 502 (the second "
            "upstream's port closed), a 504 (proxy_read_timeout 2s), a 502 with the group name "
            "(no live upstreams) and a quoted user agent",
            '{"time_local":"01/Dec/2026:15:03:45 +0000","time_iso8601":"2026-12-01T15:03:45+00:00",'
            '"remote_addr":"127.0.0.1","request":"POST /v1/chat/completions HTTP/1.1","status":200,'
            '"body_bytes_sent":12,"request_time":0.001,"upstream_addr":"127.0.0.1:18591",'
            '"upstream_status":"200","upstream_response_time":"0.001","upstream_connect_time":'
            '"0.000","request_id":"787004574dd9651a850c6000bc7b0574","http_user_agent":'
            '"python-requests/2.32.3"}\n'
            '{"time_local":"01/Dec/2026:15:03:45 +0000","time_iso8601":"2026-12-01T15:03:45+00:00",'
            '"remote_addr":"127.0.0.1","request":"POST /v1/chat/completions HTTP/1.1","status":502,'
            '"body_bytes_sent":157,"request_time":0.000,"upstream_addr":"127.0.0.1:18599",'
            '"upstream_status":"502","upstream_response_time":"0.000","upstream_connect_time":"-",'
            '"request_id":"ed954880aa7cf613ce5071c8a5c66e74","http_user_agent":'
            '"python-requests/2.32.3"}\n'
            '{"time_local":"01/Dec/2026:15:03:47 +0000","time_iso8601":"2026-12-01T15:03:47+00:00",'
            '"remote_addr":"127.0.0.1","request":"POST /v1/chat/completions HTTP/1.1","status":504,'
            '"body_bytes_sent":167,"request_time":2.002,"upstream_addr":"127.0.0.1:18591",'
            '"upstream_status":"504","upstream_response_time":"2.002","upstream_connect_time":'
            '"0.000","request_id":"44388321d7919b2ff0ba9db44ff0b74e","http_user_agent":'
            '"curl/7.88.1"}\n'
            '{"time_local":"01/Dec/2026:15:03:47 +0000","time_iso8601":"2026-12-01T15:03:47+00:00",'
            '"remote_addr":"127.0.0.1","request":"POST /v1/chat/completions?q=%22x%22 HTTP/1.1",'
            '"status":502,"body_bytes_sent":157,"request_time":0.000,"upstream_addr":"vllm",'
            '"upstream_status":"502","upstream_response_time":"0.000","upstream_connect_time":"-",'
            '"request_id":"110bc489ff03accedff90b8ca8580f3f","http_user_agent":"evil \\"agent\\""}',
            role="proxy",
            tables=(("proxy_requests", 4), ("proxy_events", 3)),
        ),
    )
    pattern = NGINX_JSON_RE

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        msg = pl.col("msg")
        if not lines.select(msg.str.starts_with("{").any()).item():
            return Claim(records=no_lines())
        hits = lines.filter(msg.str.starts_with("{") & msg.str.contains(NGINX_JSON_RE))
        fields = {name: _json_field(keys).alias(name) for name, keys in JSON_KEYS.items()}
        frame = hits.with_columns(**fields).with_columns(
            pl.coalesce(
                pl.col("request"), pl.concat_str([pl.col("method"), pl.col("path")], separator=" ")
            ).alias("request"),
        )
        frame = frame.with_columns(
            pl.coalesce(pl.col("method"), pl.col("request").str.extract(r"^([A-Z]+) ", 1)).alias(
                "method"
            ),
            pl.coalesce(pl.col("path"), pl.col("request").str.extract(r"^[A-Z]+ (\S+)", 1)).alias(
                "path"
            ),
            pl.coalesce(
                timeparse.clf_to_utc(pl.col("time")),
                timeparse.iso_to_utc(pl.col("iso")),
                pl.col("at"),
            ).alias("at"),
            pl.col("client").fill_null("-"),  # the rows builder needs one (a layout's match)
        )
        frame = frame.select(NGINX_FIELDS)
        parts = [_requests_and_failures(piece) for piece in _with_upstream_facts(frame)]
        if not parts:
            return Claim(records=no_lines())
        rows = _in_file_order(pl.concat([rows for rows, _ in parts]))
        failures = pl.concat([failures for _, failures in parts]).sort("line_no")
        return Claim(
            records=rows["line_no"],
            tables={
                "proxy_requests": rows.with_columns(source_column(source)).drop("line_no"),
                "proxy_events": proxy_failures(
                    failures, pl.col("_kind"), pl.col("_detail"), source
                ),
            },
        )
