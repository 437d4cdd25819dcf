"""Proxies, load balancers and LLM gateways, as line formats.

They write only `proxy_requests` (one row per request the proxy logged) and
`proxy_events` (one row per failure it reports): never `server_requests` or
engine tables, so a proxy's log creates no instance. `proxy` is the file's
(or kubectl pod's) name; `instance` in `proxy_events` is unknown (None): the
`upstream` column names the backend as the proxy logged it.

Every row says who produced `http_status` (`status_origin`: ``upstream`` — the
backend's own answer passed through; ``proxy`` — the proxy answered itself,
e.g. nginx's 502/504 when the upstream failed; ``unknown``) and whether the
log proves the request reached a backend (`delivery`: ``reached``,
``refused`` — it never got to one, ``unknown``).

`at` is always the END of the request as the proxy saw it (when it logged
it): nginx's ``$time_local`` is already that; for Envoy, HAProxy and Traefik,
which stamp the start, `at` = start + total duration. Subtract
`request_time_s` for the start.

Exact text, from the projects' source (see tests/test_ingest_proxy.py):

* nginx ``src/http/modules/ngx_http_log_module.c`` (``combined``), the
  upstream variables' list syntax (``, `` between attempts, `` : `` between
  internal redirects, the upstream group's name when no server was live) from
  nginx's ``ngx_http_upstream.c`` / docs; ingress-nginx's default
  ``log-format-upstream`` (``kubernetes/ingress-nginx`` docs); nginx
  ``src/core/ngx_log.c`` error.log prefix and ``ngx_http_upstream.c`` /
  ``src/event/ngx_event_connect.c`` messages;
* Envoy ``source/common/formatter/substitution_formatter.cc`` default format,
  ``source/common/access_log/access_log_formatter.cc`` START_TIME default
  ``%Y-%m-%dT%H:%M:%E3SZ``, ``source/common/stream_info/utility.h`` flags;
* HAProxy ``doc/configuration.txt`` §8.2.3 (HTTP log format) and §8.5
  (termination states);
* Traefik ``pkg/middlewares/accesslog/logger_formatters.go`` (CLF) and
  ``logdata.go`` (JSON field names);
* LiteLLM ``litellm/_logging.py`` (``%(asctime)s - %(name)s:%(levelname)s:
  %(filename)s:%(lineno)s - %(message)s``, time only) and
  ``litellm/router.py`` (``litellm.acompletion(model=…) 200 OK`` /
  ``… Exception …``);
* vLLM production-stack ``src/vllm_router/log.py`` and
  ``services/request_service/request.py`` (``Routing request %s [with session
  id %s] to %s at %f, process time = %.4f``).
"""

from __future__ import annotations

import polars as pl

from logforensics import timeparse
from logforensics.ingest import register_line_format
from logforensics.ingest.base import Claim, SourceFile, source_expr
from logforensics.ingest.lineformats import RegexLineFormat, first_kind, no_lines

UTC_US = pl.Datetime("us", "UTC")


def _tz(lines: pl.DataFrame) -> str:
    if "file_tz" in lines.columns and lines.height:
        return lines["file_tz"][0] or "UTC"
    return "UTC"


def _src(source: SourceFile) -> pl.Expr:
    return source_expr(source.display).alias("source")


def _requests(frame: pl.DataFrame, source: SourceFile) -> pl.DataFrame:
    """`proxy_requests` rows: the canonical columns are picked when the result is added."""
    return frame.with_columns(pl.col("instance").alias("proxy"), _src(source))


def _dash_null(col: str) -> pl.Expr:
    """The value, with nginx/Envoy/Traefik's `-` (and empty) as null."""
    c = pl.col(col).str.strip_chars('"')
    return pl.when(c.is_in(["-", ""])).then(None).otherwise(c)


def _ms(expr: pl.Expr) -> pl.Expr:
    return pl.duration(microseconds=(expr.cast(pl.Float64) * 1000).round(0).cast(pl.Int64))


def _clf_time(col: str) -> pl.Expr:
    """``24/Feb/2026:06:16:03 +0000`` (nginx ``$time_local``, Traefik CLF) to UTC."""
    return (
        pl.col(col)
        .str.to_datetime("%d/%b/%Y:%H:%M:%S %z", time_unit="us", strict=False)
        .dt.convert_time_zone("UTC")
    )


def _naive_time(col: str, fmt: str, tz: str) -> pl.Expr:
    return (
        pl.col(col)
        .str.to_datetime(fmt, time_unit="us", strict=False)
        .dt.replace_time_zone(tz, ambiguous="earliest", non_existent="null")
        .dt.convert_time_zone("UTC")
    )


class ProxyLineFormat(RegexLineFormat):
    proxy = True
    order = 30

    def parsed(self, lines: pl.DataFrame, regex: str, needs: pl.Expr | None = None) -> pl.DataFrame:
        """The lines `regex` matches, with its groups.

        `needs` is a cheap literal test every such line passes: run first, it
        spares the regex the lines of another format (serverlog offers every
        format the whole file, an nginx log to Traefik before nginx).
        """
        if needs is not None:
            candidates = lines.select(needs).to_series()
            if not candidates.all():
                lines = lines.filter(candidates)
        return (
            lines.filter(pl.col("msg").str.contains(regex))
            .with_columns(pl.col("msg").str.extract_groups(regex).alias("_g"))
            .unnest("_g")
        )


def _format(template: str, *args: pl.Expr) -> pl.Expr:
    """`pl.format(template, *args)` (null if an argument is), built with `concat_str`.

    polars 2.1's `pl.format` panics on a text column whose first chunk is
    empty, which filtering lines that polars read in parallel chunks leaves.
    """
    texts = template.split("{}")
    pieces = [pl.lit(texts[0])]
    for arg, text in zip(args, texts[1:], strict=True):
        pieces += [arg, pl.lit(text)]
    return pl.concat_str(pieces)


def _events(
    frame: pl.DataFrame, kind: pl.Expr, detail: pl.Expr, source: SourceFile
) -> pl.DataFrame:
    """`proxy_events` for the rows whose `kind` is not null (`detail` is written for those only)."""
    return (
        frame.with_columns(kind.alias("_kind"))
        .filter(pl.col("_kind").is_not_null())
        .with_columns(detail.alias("_detail"))
        .select(
            "at",
            pl.lit(None, dtype=pl.Utf8).alias("instance"),
            pl.col("_kind").alias("kind"),
            "http_status",
            "upstream",
            pl.col("_detail").str.slice(0, 300).alias("detail"),
            _src(source),
        )
    )


# ---------------------------------------------------------------- nginx access

QUOTED = r'"(?:[^"\\]|\\.)*"'
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
}
# The fields every layout is read into, in one order (its pieces are concatenated).
NGINX_FIELDS = (
    "line_no", "instance", "at", "client", "time", "request", "method", "path", "status",
    "ua", "us", "rt", "urt", "uct", "rid",
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
    groups = lines.select(pl.col("msg").str.extract_groups(regex)).unnest("msg")
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
    )
    plain = hits.filter(~has_pairs).with_columns(pl.lit(None, dtype=pl.Utf8).alias("uct"))
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
    ]


def _listed_facts() -> list[pl.Expr]:
    """What the upstream variables say, from lists of attempts (retries, internal redirects).

    `_last_us`: the last attempt's status; `_answer_ok`: an attempt got an
    answer nginx did not make up (not 502/504); `_connected`: an attempt logged
    a connect time; `_group`: every address is an upstream group's name;
    `_urt_sum`: the attempts' response times added up.
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
    ]


def _with_upstream_facts(frame: pl.DataFrame) -> list[pl.DataFrame]:
    """`frame` with the upstream facts; only rows logging several attempts are split into lists."""
    listed = pl.any_horizontal(
        pl.col(name).str.contains(", | : ") for name in ("ua", "us", "urt", "uct")
    ).fill_null(False)
    is_listed = frame.select(listed).to_series()
    if not is_listed.any():
        return [frame.with_columns(_single_value_facts())]
    return [
        frame.filter(~is_listed).with_columns(_single_value_facts()),
        frame.filter(is_listed).with_columns(_listed_facts()),
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
    order = 32
    pattern = NGINX_CLF_RE

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        common = _read(lines, NGINX_COMMON_RE)
        in_common = common["client"].is_not_null()
        parts = []
        if in_common.any():
            # A line in another layout stays an empty row (no `client`) until one gather
            # of the narrow rows drops it: cheaper than filtering the captured text here.
            common = common.with_columns(
                pl.lit(None, dtype=pl.Utf8).alias("uct"), pl.lit(None, dtype=pl.Utf8).alias("rid")
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
                "proxy_requests": rows.with_columns(_src(source)).drop("line_no"),
                "proxy_events": _events(failures, pl.col("_kind"), pl.col("_detail"), source),
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
        pl.coalesce(_clf_time("time"), pl.col("at")).alias("at"),
        pl.col("rt").cast(pl.Float64, strict=False).alias("request_time_s"),
        pl.when(pl.col("urt").is_null() | (pl.col("urt") == "-"))
        .then(None)
        .otherwise(pl.col("_urt_sum"))
        .alias("upstream_time_s"),
        _dash_null("rid").alias("request_id"),
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
    detail = _format(
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
    order = 31  # before nginx: its first half is combined
    pattern = TRAEFIK_CLF_RE

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        hits = self.parsed(lines, TRAEFIK_CLF_RE, needs=pl.col("msg").str.ends_with("ms"))
        service = _dash_null("service")
        status = pl.col("status").cast(pl.Int64, strict=False)
        gateway_error = status.is_in([502, 503, 504])
        frame = hits.with_columns(
            (pl.coalesce(_clf_time("time"), pl.col("at")) + _ms(pl.col("ms"))).alias("at"),
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
        rows = _requests(frame, source)
        return Claim(
            records=hits["line_no"],
            tables={
                "proxy_requests": rows,
                "proxy_events": _events(
                    frame,
                    _status_kind(pl.col("http_status"), service.is_null()),
                    _format(
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


def _status_kind(status: pl.Expr, no_backend: pl.Expr) -> pl.Expr:
    return (
        pl.when(status.is_null() | (status < 500))
        .then(None)
        .when(no_backend)
        .then(pl.lit("no_live_upstream"))
        .when(status == 504)
        .then(pl.lit("timeout"))
        .when(status == 502)
        .then(pl.lit("bad_gateway"))
        .when(status == 503)
        .then(pl.lit("unavailable"))
        .otherwise(pl.lit("http_5xx"))
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
    order = 30
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
        rows = _requests(frame, source)
        events = _events(
            frame,
            _status_kind(pl.col("http_status"), pl.col("upstream").is_null()),
            _format(
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
    order = 33
    pattern = NGINX_ERROR_RE

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        hits = self.parsed(lines, NGINX_ERROR_RE)
        text = pl.col("etext")
        message = text.str.extract(r"^(.*?)(?: while |, client: |$)", 1)
        kind = first_kind(NGINX_FAILURES, text)
        frame = hits.with_columns(
            pl.coalesce(_naive_time("ts", "%Y/%m/%d %H:%M:%S", _tz(lines)), pl.col("at")).alias(
                "at"
            ),
            pl.lit(None, dtype=pl.Int64).alias("http_status"),
            pl.coalesce(
                text.str.extract(r', upstream: "[a-z]+://([^/"]+)', 1),
                text.str.extract(r"^connect\(\) to (\S+) failed", 1),
            ).alias("upstream"),
            _format(
                "{}{}; client {}, request {}",
                message,
                pl.coalesce(
                    _format(" while {}", text.str.extract(r" while (.*?)(?:, client: |$)", 1)),
                    pl.lit(""),
                ),
                pl.coalesce(text.str.extract(r", client: ([^,]+)", 1), pl.lit("?")),
                pl.coalesce(text.str.extract(r', request: "([^"]*)"', 1), pl.lit("?")),
            ).alias("_detail_text"),
        )
        failing = pl.col("lvl").is_in(["error", "crit", "alert", "emerg"])
        events = _events(frame, pl.when(failing).then(kind), pl.col("_detail_text"), source)
        used = frame.filter(failing & kind.is_not_null())["line_no"]
        noise = frame.filter(~pl.col("line_no").is_in(used.implode()))["line_no"]
        return Claim(records=used, noise=noise, tables={"proxy_events": events})


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
    order = 30
    pattern = ENVOY_RE

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        hits = self.parsed(lines, ENVOY_RE)
        flags = pl.col("flags")
        code = pl.col("code").cast(pl.Int64)
        upstream = _dash_null("uhost")
        clean = (flags == "-") | flags.str.contains(ENVOY_CLIENT)
        frame = hits.with_columns(
            (
                timeparse_iso(pl.col("start")).fill_null(pl.col("at"))
                + _ms(pl.col("dur").cast(pl.Float64, strict=False).fill_null(0))
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
            _dash_null("rid").alias("request_id"),
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
            _src(source),
        )
        flag_kind = first_kind(ENVOY_KINDS, flags)
        kind = (
            pl.when(flag_kind.is_not_null())
            .then(flag_kind)
            .when(pl.col("http_status") >= 500)
            .then(pl.lit("upstream_5xx"))
        )
        detail = _format(
            "envoy {} {} {} flags {} upstream {}",
            pl.coalesce(pl.col("http_status").cast(pl.Utf8), pl.lit("(no response)")),
            pl.col("method"),
            pl.col("path"),
            flags,
            pl.col("uhost"),
        )
        return Claim(
            records=hits["line_no"],
            tables={"proxy_requests": rows, "proxy_events": _events(frame, kind, detail, source)},
        )


def timeparse_iso(expr: pl.Expr) -> pl.Expr:
    return timeparse.iso_to_utc(expr)


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
    """

    name = "haproxy_http"
    order = 30
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
                    _naive_time("_acc", "%d/%b/%Y:%H:%M:%S%.f", _tz(lines)),
                    _naive_time("_acc", "%d/%b/%Y:%H:%M:%S", _tz(lines)),
                    pl.col("at"),
                )
                + _ms(pl.when(ta >= 0).then(ta).otherwise(0.0))
            ).alias("at"),
            pl.when(status > 0).then(status).alias("http_status"),
            pl.when(nosrv)
            .then(pl.col("backend"))
            .otherwise(_format("{}/{}", pl.col("backend"), pl.col("server")))
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
            pl.col("request").str.extract(r"^([A-Z]+) ", 1).alias("method"),
            pl.col("request").str.extract(r"^[A-Z]+ (\S+)", 1).alias("path"),
        ).with_columns(
            pl.when(pl.col("status_origin") == "upstream")
            .then(pl.col("http_status"))
            .alias("upstream_status")
        )
        rows = _requests(frame, source)
        state_kind = first_kind(HAPROXY_KINDS, term)
        kind = (
            pl.when(nosrv & (pl.col("http_status") >= 500))
            .then(pl.lit("no_live_upstream"))
            .when(state_kind.is_not_null())
            .then(state_kind)
            .when((pl.col("status_origin") == "upstream") & (pl.col("http_status") >= 500))
            .then(pl.lit("upstream_5xx"))
        )
        detail = _format(
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
            tables={"proxy_requests": rows, "proxy_events": _events(frame, kind, detail, source)},
        )


# ---------------------------------------------------------------------- LiteLLM

LITELLM_RE = (
    r"^(?P<tod>\d{2}:\d{2}:\d{2}) - (?P<logger>LiteLLM(?: Router| Proxy)?):(?P<lvl>[A-Z]+): "
    r"(?P<file>[\w.]+):(?P<lno>\d+) - (?P<message>.*)$"
)
LITELLM_CALL_RE = r"^litellm\.a?(?:completion|text_completion|embedding)\(model=(?P<model>[^)]*)\)\s*(?P<outcome>.*)$"
LITELLM_KINDS = {
    "timeout": r"Timeout|timed out",
    "conn_refused": r"Connection refused|ConnectError|Cannot connect",
    "conn_error": r"APIConnectionError|Connection error|ServerDisconnected|RemoteProtocolError",
    "rate_limited": r"RateLimitError|429",
    "upstream_5xx": r"InternalServerError|ServiceUnavailableError|BadGatewayError|\b50[0-4]\b",
    "exception": r"Exception",
}


@register_line_format
class LitellmProxy(ProxyLineFormat):
    """LiteLLM proxy/router lines.

    The router logs each call to a deployment: ``litellm.acompletion(model=M)
    200 OK`` (the deployment answered) or ``… Exception E`` → a
    `proxy_requests` row (`upstream` = the deployment's model name, as
    logged) and, for an exception, a `proxy_event` (Timeout → timeout,
    APIConnectionError → conn_error, InternalServerError /
    ServiceUnavailable → upstream_5xx, RateLimitError → rate_limited; a
    client's BadRequest is not an event). LiteLLM's own stamp is a time of
    day only: the line's time comes from the container/journal stamp or its
    neighbours. Other LiteLLM lines are noise.
    """

    name = "litellm"
    order = 34
    pattern = LITELLM_RE

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        hits = self.parsed(lines, LITELLM_RE)
        hits = hits.with_columns(
            pl.col("message").str.extract_groups(LITELLM_CALL_RE).alias("_c")
        ).unnest("_c")
        calls = hits.filter(pl.col("model").is_not_null())
        outcome = pl.col("outcome").str.strip_chars()
        ok = outcome.str.starts_with("200 OK")
        exc_kind = first_kind(LITELLM_KINDS, outcome)
        client_error = outcome.str.contains(
            r"BadRequestError|AuthenticationError|NotFoundError|PermissionDenied|ContextWindowExceeded"
        )
        frame = calls.with_columns(
            pl.col("model").alias("upstream"),
            pl.when(ok).then(200).alias("upstream_status"),
            pl.lit(None, dtype=pl.Int64).alias("http_status"),
            pl.when(ok)
            .then(pl.lit("upstream"))
            .when(exc_kind == "upstream_5xx")
            .then(pl.lit("upstream"))
            .otherwise(pl.lit("unknown"))
            .alias("status_origin"),
            pl.when(ok | (exc_kind == "upstream_5xx") | client_error)
            .then(pl.lit("reached"))
            .otherwise(pl.lit("unknown"))
            .alias("delivery"),
        )
        rows = _requests(frame, source)
        kind = pl.when(~ok & ~client_error).then(exc_kind)
        detail = _format("litellm call to {}: {}", pl.col("model"), outcome)
        used = calls["line_no"]
        noise = hits.filter(pl.col("model").is_null())["line_no"]
        return Claim(
            records=used,
            noise=noise,
            tables={"proxy_requests": rows, "proxy_events": _events(frame, kind, detail, source)},
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
    order = 35
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
            _src(source),
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
        events = _events(failed, kind, pl.col("err"), source)
        return Claim(
            records=pl.concat([routed["line_no"], failed["line_no"]]),
            tables={"proxy_requests": rows, "proxy_events": events},
        )
