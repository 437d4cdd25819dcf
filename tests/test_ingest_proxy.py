"""Proxy, load-balancer and gateway logs → proxy_requests / proxy_events.

Where each excerpt's exact text comes from (values invented, layout exact):

* nginx ``combined``: nginx/nginx ``src/http/modules/ngx_http_log_module.c``
  (``ngx_http_combined_fmt``); the upstream variables' list syntax (``, ``
  between attempts, `` : `` between internal redirects, the upstream group's
  name when no server was live, ``-`` when none was used): nginx's
  ``ngx_http_upstream.c`` / ngx_http_upstream_module docs (docs/formats.md §4).
* ingress-nginx default ``log-format-upstream``: kubernetes/ingress-nginx
  ``docs/user-guide/nginx-configuration/configmap.md``.
* nginx error.log: prefix from nginx/nginx ``src/core/ngx_log.c``
  (``ngx_log_error_core``) and ``ngx_http_log_error_handler``; messages from
  ``src/http/ngx_http_upstream.c`` (``upstream timed out``, ``no live
  upstreams``, ``upstream prematurely closed connection``,
  ``connect() failed``) and ``src/event/ngx_event_connect.c``
  (``connect() to %V failed``).
* Envoy: envoyproxy/envoy ``source/common/formatter/substitution_formatter.cc``
  (DEFAULT_FORMAT), ``source/common/access_log/access_log_formatter.cc``
  (START_TIME ``%Y-%m-%dT%H:%M:%E3SZ``), ``source/common/stream_info/utility.h``
  (response flags).
* HAProxy: haproxy/haproxy ``doc/configuration.txt`` §8.2.3 (the documented
  example line, ``haproxy[14389]: 10.0.1.2:33317 [06/Feb/2009:12:14:14.655]
  http-in static/srv1 10/0/30/69/109 200 2750 - - ---- 1/1/1/1/0 0/0
  {1wt.eu} {} "GET /index.html HTTP/1.1"``) and §8.5 (termination states).
* Traefik: traefik/traefik ``pkg/middlewares/accesslog/logger_formatters.go``
  (CLF) and ``logdata.go`` (JSON keys).
* LiteLLM: BerriAI/litellm ``litellm/_logging.py`` (formatter, ``%H:%M:%S``)
  and ``litellm/router.py`` (``litellm.acompletion(model=…)\\033[32m 200
  OK\\033[0m`` / ``\\033[31m Exception …\\033[0m``).
* vLLM production-stack: vllm-project/production-stack ``src/vllm_router/log.py``
  (``[%(asctime)s] %(levelname)s: %(message)s (%(filename)s:%(lineno)d:%(name)s)``
  with colours) and ``src/vllm_router/services/request_service/request.py``.
"""

import datetime as dt
import math
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from logforensics import model
from logforensics.ingest import (
    FILE_FORMATS,
    LINE_FORMATS,
    ParseContext,
    SourceFile,
    detect,
)
from logforensics.ingest.inputs import load
from logforensics.ingest.proxies import nginx as proxylogs
from logforensics.model import source_id
from logforensics.model import source_labels as labels

UTC = dt.timezone.utc
CTX = ParseContext(year=2026)
DATA = Path(__file__).parent / "data" / "serverlogs"
ESC = "\x1b"


def parse(tmp_path: Path, text: str, name: str = "lb.log", ctx: ParseContext = CTX):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    source = SourceFile(path, name, path.stem)
    fmt = detect(source)
    assert fmt is not None, "not sniffed"
    return fmt, fmt.parse(source, ctx)


def by_line(frame: pl.DataFrame) -> pl.DataFrame:
    """Rows in file order (each line format adds its rows in turn)."""
    return frame.sort("source")


def t(*args) -> dt.datetime:
    return dt.datetime(*args, tzinfo=UTC)


# ------------------------------------------------------------------- nginx


def test_nginx_access_with_upstream_variables():
    fmt, result = None, None
    source = SourceFile(DATA / "nginx-access.log", "nginx-access.log", "nginx-access")
    fmt = detect(source)
    assert fmt is FILE_FORMATS["proxy_log"]
    result = fmt.parse(source, CTX)
    assert (result.lines, result.parsed, result.noise, result.unparsed) == (6, 6, 0, 0)
    rows = result.table("proxy_requests")
    assert rows["proxy"].to_list() == ["nginx-access"] * 6
    # $time_local is the END of the request
    assert rows["at"][0] == t(2026, 2, 24, 6, 16, 3)
    assert rows["http_status"].to_list() == [200, 504, 200, 502, 404, 499]
    assert rows["upstream"].to_list() == [
        "10.0.0.21:8000",
        "10.0.0.22:8000",
        "10.0.0.22:8000, 10.0.0.21:8000",
        "vllm_backend",
        None,
        "10.0.0.21:8000",
    ]
    assert rows["upstream_status"].to_list() == [200, 504, 200, 502, None, None]
    assert rows["status_origin"].to_list() == [
        "upstream",  # the backend's own 200
        "proxy",  # nginx's 504 after the upstream timed out
        "upstream",  # retry: the second backend answered
        "proxy",  # no live upstreams: nginx's 502
        "proxy",  # nginx answered without an upstream
        "proxy",  # 499: the client went away, nginx logged its own code
    ]
    assert rows["delivery"].to_list() == [
        "reached",
        "unknown",  # a timeout may be in connect or in reading: cannot tell
        "reached",
        "refused",
        "refused",
        "unknown",
    ]
    assert rows["request_time_s"].to_list() == [1.532, 60.002, 1.24, 0.0, 0.0, 30.001]
    assert rows["upstream_time_s"].to_list() == [1.531, 60.001, 1.238, 0.0, None, 30.0]
    assert rows["method"][0] == "POST" and rows["path"][4] == "/favicon.ico"
    assert rows["client"][0] == "10.0.3.7"
    events = result.table("proxy_events")
    assert events["kind"].to_list() == ["timeout", "no_live_upstream"]
    assert events["instance"].to_list() == [None, None]
    assert events["upstream"].to_list() == ["10.0.0.22:8000", "vllm_backend"]
    assert labels(events["source"]) == ["nginx-access.log:2", "nginx-access.log:4"]
    assert result.table("server_requests").is_empty()


def test_ingress_nginx_default_format_and_key_value_pairs(tmp_path):
    text = (
        '10.244.0.1 - - [25/Feb/2026:10:30:15 +0000] "POST /v1/completions HTTP/1.1" 200 1234 '
        '"-" "Mozilla/5.0" 456 0.032 [default-vllm-svc-8000] [] 10.244.1.7:8000 1234 0.031 200 '
        "abc123def456\n"
        '10.244.0.1 - - [25/Feb/2026:10:30:16 +0000] "POST /v1/completions HTTP/1.1" 502 150 '
        '"-" "Mozilla/5.0" 456 0.002 [default-vllm-svc-8000] [] 10.244.1.7:8000, 10.244.1.8:8000 '
        "0, 0 0.000, 0.001 502, 502 def456abc123\n"
        '10.0.3.7 - - [24/Feb/2026:06:16:09 +0000] "POST /v1/chat/completions HTTP/1.1" 500 33 '
        '"-" "ua" rt=0.020 ua="10.0.0.21:8000" us="500" urt="0.019" uct="0.001" rid=ab12\n'
        '10.0.3.7 - - [24/Feb/2026:06:16:10 +0000] "POST /v1/chat/completions HTTP/1.1" 502 33 '
        '"-" "ua" rt=0.003 ua="10.0.0.21:8000" us="502" urt="0.002" uct="-" rid=ab13\n'
    )
    _, result = parse(tmp_path, text, "ingress.log")
    rows = result.table("proxy_requests")
    assert rows["request_id"].to_list() == ["abc123def456", "def456abc123", "ab12", "ab13"]
    assert rows["upstream"].to_list() == [
        "10.244.1.7:8000",
        "10.244.1.7:8000, 10.244.1.8:8000",
        "10.0.0.21:8000",
        "10.0.0.21:8000",
    ]
    assert rows["upstream_status"].to_list() == [200, 502, 500, 502]
    assert rows["status_origin"].to_list() == ["upstream", "proxy", "upstream", "proxy"]
    # a logged connect time proves the connection; "-" for every attempt proves none was made
    assert rows["delivery"].to_list() == ["reached", "unknown", "reached", "refused"]
    assert rows["request_time_s"].to_list() == [0.032, 0.002, 0.02, 0.003]
    assert rows["upstream_time_s"].to_list() == [0.031, 0.001, 0.019, 0.002]
    assert result.table("proxy_events")["kind"].to_list() == [
        "bad_gateway",
        "upstream_5xx",
        "bad_gateway",
    ]


def test_nginx_msec_pair_gives_the_millisecond(tmp_path):
    """`msec=` (nginx's $msec) is the $time_local moment to the millisecond: the clock is
    judged on it (recordings/field-instance-skew logs both); a line without it keeps the second."""
    text = (
        '127.0.0.1 - - [05/Dec/2026:05:28:04 +0000] "POST /v1/chat/completions HTTP/1.1" 200 '
        '3762 "-" "python-requests/2.34.2" msec=1796448484.262 rt=14.161 uct="0.001" '
        'urt="14.161" ua="127.0.0.1:8001" us="200"\n'
        '127.0.0.1 - - [05/Dec/2026:05:28:28 +0000] "POST /v1/chat/completions HTTP/1.1" 200 '
        '3762 "-" "python-requests/2.34.2" rt=19.097 uct="0.000" urt="19.094" '
        'ua="127.0.0.1:8001" us="200"\n'
    )
    _, result = parse(tmp_path, text, "nginx-access.log")
    rows = result.table("proxy_requests")
    assert rows["at"].to_list() == [
        t(2026, 12, 5, 5, 28, 4, 262000),
        t(2026, 12, 5, 5, 28, 28),
    ]
    assert rows["request_time_s"].to_list() == [14.161, 19.097]


def test_nginx_internal_redirect_separator(tmp_path):
    text = (
        '10.0.3.7 - - [24/Feb/2026:06:16:03 +0000] "POST /v1/chat/completions HTTP/1.1" 200 10 '
        '"-" "ua" 10.0.0.1:8000, 10.0.0.2:8000 : 10.0.1.1:8000 502, 504 : 200 1.500 0.001, 0.500 : 0.900\n'
    )
    _, result = parse(tmp_path, text)
    row = result.table("proxy_requests").row(0, named=True)
    assert row["upstream"] == "10.0.0.1:8000, 10.0.0.2:8000 : 10.0.1.1:8000"
    assert row["upstream_status"] == 200
    assert row["status_origin"] == "upstream" and row["delivery"] == "reached"
    assert row["upstream_time_s"] == pytest.approx(1.401)


# Every nginx layout the parser reads: the common one (combined, then one value in each
# positional upstream variable) that a single regex reads first, and the lines just
# outside it, which the general regexes read.
NGINX_HEAD = '10.0.3.7 - - [24/Feb/2026:06:16:03 +0000] "POST /v1/chat/completions HTTP/1.1"'
NGINX_COMMON_LINES = [
    f'{NGINX_HEAD} 200 5123 "-" "python-requests/2.32.3" 10.0.0.21:8000 200 1.532 1.531',
    f'{NGINX_HEAD} 504 167 "-" "python-requests/2.32.3" 10.0.0.22:8000 504 60.002 60.001',
    f'{NGINX_HEAD} 502 157 "-" "python-requests/2.32.3" vllm_backend 502 0.000 0.000',
    '10.0.3.7 - - [24/Feb/2026:06:17:07 +0000] "GET /favicon.ico HTTP/1.1" 404 153 "-" '
    '"curl/8.5.0" - - 0.000 -',
    '10.0.3.7 - - [24/Feb/2026:15:17:08 +0900] "POST /v1/completions HTTP/1.1" 499 0 "-" '
    '"Mozilla/5.0 (X11)" 10.0.0.21:8000 - 30.001 30.000',
    f'{NGINX_HEAD} 502 157 "-" "python-requests/2.32.3" 10.0.0.21:8000 - 0.003 -',
    '10.0.3.7 - alice [24/Feb/2026:06:17:09 +0000] "POST /v1/chat/completions?x=1 HTTP/2.0" '
    '500 33 "https://a/b" "ua \\"quoted\\" é" 10.0.0.21:8000 500 0.020 0.019',
    'fe80::1%eth0 - - [24/Feb/2026:06:16:03 +0000] "GET /x  HTTP/1.1" 200 1 "-" "-" a 200 1.0 1.0',
]
NGINX_OTHER_LINES = [
    # retries and internal redirects
    f'{NGINX_HEAD} 200 10 "-" "ua" 10.0.0.22:8000, 10.0.0.21:8000 502, 200 1.240 0.000, 1.238',
    f'{NGINX_HEAD} 200 10 "-" "ua" 10.0.0.1:8000 : 10.0.1.1:8000 504 : 200 1.500 0.500 : 0.900',
    # ingress-nginx, key=value pairs, plain combined, no referer and agent
    f'{NGINX_HEAD} 502 150 "-" "Mozilla/5.0" 456 0.002 [default-vllm-svc-8000] [] '
    "10.244.1.7:8000, 10.244.1.8:8000 0, 0 0.000, 0.001 502, 502 def456abc123",
    f'{NGINX_HEAD} 502 33 "-" "ua" rt=0.003 ua="10.0.0.21:8000" us="502" urt="0.002" uct="-" rid=ab',
    f'{NGINX_HEAD} 500 33 "-" "ua" 10.0.0.21:8000 500 0.020 0.019 uct=0.001',
    f'{NGINX_HEAD} 200 33 "-" "ua" rt=0.010 ua="10.0.0.21:8000" us="200" urt="" rid=ab2',
    f'{NGINX_HEAD} 502 33 "-" "ua" ua="10.0.0.21:8000" us="502" urt="0.002" uct="0.001"',
    f'{NGINX_HEAD} 502 33 "-" "ua" ua="10.0.0.21:8000" us="502" urt="0.1, 0.2" uct="-, 0.001"',
    f'{NGINX_HEAD} 502 157 "-" "python-requests/2.32.3"',
    f"{NGINX_HEAD} 200 10 10.0.0.21:8000 200 1.0 0.9",
    # requests, clients and values the common regex leaves to the general ones
    '10.0.3.7 - - [24/Feb/2026:06:16:03 +0000] "GET /a\\"b HTTP/1.1" 404 0 "-" "ua" - - 0.000 -',
    '10.0.3.7 - - [24/Feb/2026:06:16:03 +0000] "-" 400 0 "-" "-" - - 0.001 -',
    '10.0.3.7 - - [24/Feb/2026:06:16:03 +0000] "\\x16\\x03\\x01" 400 157 "-" "-" - - 0.001 -',
    '10.0.3.7 - - [24/Feb/2026:06:16:03 +0000] "get /x\tHTTP/1.1" 400 0 "-" "-" - - 0.001 -',
    '10.0.3.7 - - [24/Feb/2026:06:16:03 +0000] "GET /é HTTP/1.1" 404 0 "-" "-" - - 0.001 -',
    f'{NGINX_HEAD} 200 10 "-" "ua" 10.0.0.21:8000 200 1.240 -0.000 ',
]


def _nginx_tables(tmp_path: Path, lines: list[str]) -> dict[str, pl.DataFrame]:
    _, result = parse(tmp_path, "".join(f"{line}\n" for line in lines), "nginx.log")
    return {name: result.table(name) for name in ("proxy_requests", "proxy_events")}


def test_nginx_common_layout_regex_is_only_a_shortcut(tmp_path, monkeypatch):
    lines = NGINX_COMMON_LINES + NGINX_OTHER_LINES
    common = pl.Series(lines).str.contains(proxylogs.NGINX_COMMON_RE)
    assert common.to_list() == [True] * len(NGINX_COMMON_LINES) + [False] * len(NGINX_OTHER_LINES)
    shortcut = _nginx_tables(tmp_path, lines)
    monkeypatch.setattr(proxylogs, "NGINX_COMMON_RE", r"(?P<client>[^\s\S])")  # matches no line
    general = _nginx_tables(tmp_path, lines)
    for name, frame in shortcut.items():
        assert frame.height
        assert_frame_equal(frame, general[name], check_exact=True)


def test_nginx_single_upstream_values_read_as_lists_would(tmp_path, monkeypatch):
    lines = NGINX_COMMON_LINES + NGINX_OTHER_LINES
    shortcut = _nginx_tables(tmp_path, lines)
    # (a single value has no earlier attempt: `_earlier_reached` would give null)
    as_lists = [*proxylogs._listed_facts(), pl.lit(None, dtype=pl.Utf8).alias("_also")]
    monkeypatch.setattr(proxylogs, "_single_value_facts", lambda: as_lists)
    listed = _nginx_tables(tmp_path, lines)
    for name, frame in shortcut.items():
        assert_frame_equal(frame, listed[name], check_exact=True)
    assert math.copysign(1.0, shortcut["proxy_requests"]["upstream_time_s"][-1]) == 1.0  # 0.0


def test_nginx_mixed_layouts_give_each_line_its_own_row_in_file_order(tmp_path):
    lines = [
        line
        for pair in zip(NGINX_OTHER_LINES, NGINX_COMMON_LINES * 3, strict=False)
        for line in pair
    ]
    mixed = _nginx_tables(tmp_path, lines)
    alone = [_nginx_tables(tmp_path, [line]) for line in lines]
    for name, frame in mixed.items():
        expected = pl.concat(
            tables[name].with_columns(source_id("nginx.log:", number))
            for number, tables in enumerate(alone, start=1)
        )
        assert_frame_equal(frame, expected, check_exact=True)
    assert mixed["proxy_requests"].height == len(lines)


def test_traefik_and_nginx_lines_in_one_file(tmp_path):
    traefik = (
        '10.0.3.7 - - [24/Feb/2026:06:16:04 +0000] "POST /v1/chat/completions HTTP/1.1" 200 5000 '
        '"-" "curl/8.5.0" 4712 "vllm@kubernetescrd" "http://10.0.0.21:8000" 1532ms'
    )
    text = f"{traefik}\n{NGINX_COMMON_LINES[0]}\n{traefik}\n"
    _, result = parse(tmp_path, text, "edge.log")
    assert result.formats == ["traefik_clf", "nginx_access"]
    rows = by_line(result.table("proxy_requests"))
    assert rows["upstream"].to_list() == [
        "http://10.0.0.21:8000",
        "10.0.0.21:8000",
        "http://10.0.0.21:8000",
    ]


def test_lines_read_in_chunks_parse_as_in_one(tmp_path):
    """polars reads a big file in parallel chunks: a format's lines may all sit in a later one.

    (polars 2.1's `pl.format` panicked on a text column whose first chunk was
    empty, which filtering such lines leaves.)
    """
    later = [
        NGINX_COMMON_LINES[1],
        NGINX_OTHER_LINES[0],
        "10.0.3.7:40000 [24/Feb/2026:06:16:03.100] fe be/vllm1 0/0/1/-1/40 502 217 - - SH-- "
        '1/1/0/0/0 0/0 "POST /v1/chat/completions HTTP/1.1"',
        "2026/02/24 06:16:06 [error] 29#29: *4515 upstream timed out (110: Connection timed out) "
        'while reading response header from upstream, client: 10.0.3.7, server: _, request: "POST '
        '/v1/chat/completions HTTP/1.1", upstream: "http://10.0.0.22:8000/v1/chat/completions"',
        '[2026-02-24T06:16:03.000Z] "POST /v1/chat/completions HTTP/1.1" 503 UF 1234 0 7 - "-" '
        '"python-requests/2.32.3" "rid-1" "llm.internal" "10.0.0.21:8000"',
    ]
    texts = [
        'INFO:     10.0.3.7:5000 - "POST /v1/chat/completions HTTP/1.1" 200 OK'
    ] * 3 + later * 2

    # As polars reads a file: the text in chunks, beside a `line_no` counted in one.
    text = pl.Series("text", texts[:3]).append(pl.Series("text", texts[3:]))
    chunked = pl.DataFrame({"line_no": range(1, len(texts) + 1)}).with_columns(
        text,
        text.alias("body"),
        text.alias("msg"),
        pl.lit(None, dtype=pl.Utf8).alias("level"),
        pl.lit("lb").alias("instance"),
        pl.lit(None, dtype=pl.Datetime("us", "UTC")).alias("at"),
        pl.lit(None, dtype=pl.Float64).alias("at_precision_s"),
        pl.lit("proxy").alias("file_role"),
        pl.lit("UTC").alias("file_tz"),
    )
    assert (chunked["msg"].n_chunks(), chunked["line_no"].n_chunks()) == (2, 1)
    source = SourceFile(tmp_path / "lb.log", "lb.log", "lb")
    formats = ("nginx_access", "haproxy_http", "nginx_error", "envoy_access")
    for fmt in (LINE_FORMATS[name] for name in formats):
        claim, whole = fmt.extract(chunked, source), fmt.extract(chunked.rechunk(), source)
        assert claim.records.len() == 2 * (1 + (fmt.name == "nginx_access")), fmt.name
        assert claim.tables.keys() == whole.tables.keys()
        for name, frame in claim.tables.items():
            assert_frame_equal(frame, whole.tables[name], check_exact=True)


def test_plain_combined_cannot_tell_origin_or_delivery(tmp_path):
    text = (
        '10.0.3.7 - - [24/Feb/2026:15:16:03 +0900] "POST /v1/chat/completions HTTP/1.1" 502 157 '
        '"-" "python-requests/2.32.3"\n'
    )
    _, result = parse(tmp_path, text)
    row = result.table("proxy_requests").row(0, named=True)
    assert row["at"] == t(2026, 2, 24, 6, 16, 3)  # +0900 honoured
    assert (row["status_origin"], row["delivery"], row["upstream"]) == ("unknown", "unknown", None)
    assert result.table("proxy_events")["kind"].to_list() == ["bad_gateway"]


def test_nginx_error_log_upstream_failures():
    source = SourceFile(DATA / "nginx-error.log", "nginx-error.log", "nginx-error")
    fmt = detect(source)
    assert fmt is FILE_FORMATS["proxy_log"]
    result = fmt.parse(source, ParseContext(year=2026, server_tz="Asia/Seoul"))
    assert (result.parsed, result.noise, result.unparsed) == (3, 1, 0)
    events = result.table("proxy_events")
    assert events["kind"].to_list() == ["timeout", "conn_refused", "no_live_upstream"]
    assert events["upstream"].to_list() == ["10.0.0.22:8000", "10.0.0.22:8000", "vllm_backend"]
    # error.log stamps are local time without a zone: read in the server zone
    assert events["at"][0] == t(2026, 2, 23, 21, 17, 4)
    assert events["detail"][0] == (
        "upstream timed out (110: Connection timed out) while reading response header from "
        "upstream; client 10.0.3.7, request POST /v1/chat/completions HTTP/1.1"
    )
    assert events["http_status"].to_list() == [None] * 3
    assert events["instance"].to_list() == [None] * 3


def test_nginx_error_log_other_failures(tmp_path):
    text = (
        "2026/02/24 06:16:06 [error] 29#29: *4515 upstream prematurely closed connection while "
        'reading response header from upstream, client: 10.0.3.7, server: , request: "POST '
        '/v1/chat/completions HTTP/1.1", upstream: "http://10.0.0.21:8000/v1/chat/completions", '
        'host: "llm.internal"\n'
        "2026/02/24 06:16:08 [crit] 29#0: *4516 connect() to 10.0.0.22:8000 failed (113: No route "
        'to host) while connecting to upstream, client: 10.0.3.7, server: _, request: "POST '
        '/v1/completions HTTP/1.1", upstream: "http://10.0.0.22:8000/v1/completions"\n'
        "2026/02/24 06:16:09 [error] 29#29: *4517 recv() failed (104: Connection reset by peer) "
        "while reading response header from upstream, client: 10.0.3.7, server: _, request: "
        '"POST /v1/completions HTTP/1.1", upstream: "http://10.0.0.22:8000/v1/completions"\n'
        "2026/02/24 06:16:10 [info] 29#29: *4518 client prematurely closed connection while "
        "reading upstream, client: 10.0.3.7\n"
    )
    _, result = parse(tmp_path, text, "error.log")
    events = result.table("proxy_events")
    assert events["kind"].to_list() == ["upstream_closed", "conn_failed", "conn_reset"]
    assert events["upstream"].to_list() == ["10.0.0.21:8000", "10.0.0.22:8000", "10.0.0.22:8000"]
    assert (result.parsed, result.noise, result.unparsed) == (3, 1, 0)


# ------------------------------------------------------------------- Envoy


def test_envoy_default_access_log_and_flags():
    source = SourceFile(DATA / "envoy.log", "envoy.log", "envoy")
    result = detect(source).parse(source, CTX)
    rows = result.table("proxy_requests")
    assert rows["at"].to_list() == [
        t(2026, 2, 24, 6, 16, 5, 14000),  # START_TIME + 1532 ms
        t(2026, 2, 24, 6, 16, 4, 2000),
    ]
    assert rows["http_status"].to_list() == [200, 503]
    assert rows["upstream_status"].to_list() == [200, None]
    assert rows["status_origin"].to_list() == ["upstream", "proxy"]
    assert rows["delivery"].to_list() == ["reached", "refused"]
    assert rows["request_time_s"].to_list() == [1.532, 0.002]
    assert rows["upstream_time_s"].to_list() == [1.53, None]
    assert rows["request_id"][0] == "8d2c4f1a-0b6e-4c1e-9d33-1f7f5a0c2b11"
    assert rows["client"].to_list() == ["10.0.3.7", "10.0.3.7"]
    events = result.table("proxy_events")
    assert events["kind"].to_list() == ["conn_failed"]
    assert events["detail"][0] == (
        "envoy 503 POST /v1/chat/completions flags UF,URX upstream 10.0.0.22:8000"
    )


@pytest.mark.parametrize(
    ("code", "flags", "host", "kind", "origin", "delivery"),
    [
        ("503", "UH", "-", "no_live_upstream", "proxy", "refused"),
        ("504", "UT", "10.0.0.21:8000", "timeout", "proxy", "reached"),
        ("503", "UO", "-", "overflow", "proxy", "refused"),
        ("404", "NR", "-", "no_route", "proxy", "refused"),
        ("503", "UC", "10.0.0.21:8000", "upstream_closed", "proxy", "reached"),
        ("0", "DC", "10.0.0.21:8000", None, "unknown", "unknown"),
        ("500", "-", "10.0.0.21:8000", "upstream_5xx", "upstream", "reached"),
    ],
)
def test_envoy_response_flags(tmp_path, code, flags, host, kind, origin, delivery):
    line = (
        f'[2026-02-24T06:16:03.000Z] "POST /v1/chat/completions HTTP/1.1" {code} {flags} 1234 0 '
        f'7 - "-" "python-requests/2.32.3" "rid-1" "llm.internal" "{host}"\n'
    )
    _, result = parse(tmp_path, line, "envoy.log")
    row = result.table("proxy_requests").row(0, named=True)
    assert (row["status_origin"], row["delivery"]) == (origin, delivery)
    assert row["http_status"] == (None if code == "0" else int(code))
    kinds = result.table("proxy_events")["kind"].to_list()
    assert kinds == ([kind] if kind else [])


def test_istio_longer_default_format(tmp_path):
    line = (
        '[2026-02-24T06:16:03.000Z] "POST /v1/chat/completions HTTP/1.1" 503 UF '
        'upstream_reset_before_response_started{connection_failure} - "delayed connect error: 111" '
        '0 91 2 - "-" "python-requests/2.32.3" "rid-9" "llm.internal" "10.0.0.21:8000" '
        "outbound|8000||vllm.default.svc.cluster.local - 10.96.0.10:8000 10.0.3.7:51234 - default\n"
    )
    _, result = parse(tmp_path, line, "istio-proxy.log")
    row = result.table("proxy_requests").row(0, named=True)
    assert (row["http_status"], row["delivery"], row["request_id"]) == (503, "refused", "rid-9")


# ----------------------------------------------------------------- HAProxy


def test_haproxy_documented_example_line(tmp_path):
    line = (
        "haproxy[14389]: 10.0.1.2:33317 [06/Feb/2009:12:14:14.655] http-in static/srv1 "
        '10/0/30/69/109 200 2750 - - ---- 1/1/1/1/0 0/0 {1wt.eu} {} "GET /index.html HTTP/1.1"\n'
    )
    fmt, result = parse(tmp_path, line, "haproxy.log")
    assert fmt is FILE_FORMATS["proxy_log"]
    row = result.table("proxy_requests").row(0, named=True)
    assert row["at"] == t(2009, 2, 6, 12, 14, 14, 764000)  # accept date + Ta 109 ms
    assert (row["client"], row["method"], row["path"]) == ("10.0.1.2", "GET", "/index.html")
    assert (row["http_status"], row["upstream"], row["upstream_status"]) == (
        200,
        "static/srv1",
        200,
    )
    assert (row["status_origin"], row["delivery"]) == ("upstream", "reached")
    assert (row["request_time_s"], row["upstream_time_s"]) == (0.109, 0.069)
    assert row["attempts"] == 1  # retries 0
    assert result.table("proxy_events").is_empty()


def test_haproxy_retries_and_redispatch_are_attempts(tmp_path):
    """`…/3` (HAProxy 2.6.12 run here, s2's port closed: three connection retries, then 503)
    is four attempts on s2; `+2` (configuration.txt §8.2.3) a redispatch after two, the
    server logged the last one; `<NOSRV>` none. An earlier attempt's server is not logged."""
    text = (
        "<134>Dec  1 14:18:12 localhost haproxy[17325]: 127.0.0.1:33806 "
        "[01/Dec/2026:14:18:09.211] fe be/s2 0/0/-1/-1/3005 503 217 - - SC-- 1/1/0/0/3 0/0 "
        '"POST /v1/chat/completions HTTP/1.1"\n'
        "<134>Dec  1 14:18:20 localhost haproxy[17325]: 127.0.0.1:33810 "
        "[01/Dec/2026:14:18:19.100] fe be/s1 0/0/2003/640/2645 200 1426 - - ---- 1/1/0/0/+2 0/0 "
        '"POST /v1/chat/completions HTTP/1.1"\n'
        "<134>Dec  1 14:18:25 localhost haproxy[17325]: 127.0.0.1:33812 "
        "[01/Dec/2026:14:18:25.000] fe be/<NOSRV> 0/-1/-1/-1/0 503 217 - - SC-- 1/1/0/0/0 0/0 "
        '"POST /v1/chat/completions HTTP/1.1"\n'
    )
    _, result = parse(tmp_path, text, "haproxy.log")
    rows = result.table("proxy_requests")
    assert rows["attempts"].to_list() == [4, 3, 0]
    assert rows["upstream"].to_list() == ["be/s2", "be/s1", "be"]
    assert rows["also_reached"].to_list() == [None, None, None]
    assert rows["delivery"].to_list() == ["refused", "reached", "refused"]


def test_haproxy_termination_states_through_syslog():
    source = SourceFile(DATA / "haproxy.log", "haproxy.log", "lb-1")
    result = detect(source).parse(source, CTX)
    rows = result.table("proxy_requests")
    assert rows["status_origin"].to_list() == ["upstream", "proxy"]
    assert rows["delivery"].to_list() == ["reached", "reached"]
    assert rows["upstream_time_s"].to_list() == [1.53, None]
    assert rows["at"][1] == t(2026, 2, 24, 6, 17, 4, 1000)
    assert result.table("proxy_events")["kind"].to_list() == ["timeout"]


@pytest.mark.parametrize(
    ("server", "timers", "status", "state", "kind", "origin", "delivery"),
    [
        ("be/<NOSRV>", "0/-1/-1/-1/0", "503", "SC--", "no_live_upstream", "proxy", "refused"),
        ("be/vllm1", "0/0/-1/-1/3", "503", "SC--", "conn_refused", "proxy", "refused"),
        ("be/vllm1", "0/0/1/-1/40", "502", "SH--", "upstream_closed", "proxy", "reached"),
        ("be/vllm1", "0/0/-1/-1/5000", "503", "sC--", "timeout", "proxy", "refused"),
        ("be/vllm1", "0/30000/-1/-1/30000", "503", "sQ--", "queue_timeout", "proxy", "refused"),
        ("be/vllm1", "0/0/1/20/900", "200", "CD--", None, "upstream", "reached"),
        ("be/vllm1", "0/0/1/20/21", "500", "----", "upstream_5xx", "upstream", "reached"),
    ],
)
def test_haproxy_states(tmp_path, server, timers, status, state, kind, origin, delivery):
    line = (
        f"10.0.3.7:40000 [24/Feb/2026:06:16:03.100] fe {server} {timers} {status} 217 - - "
        f'{state} 1/1/0/0/0 0/0 "POST /v1/chat/completions HTTP/1.1"\n'
    )
    _, result = parse(tmp_path, line, "haproxy.log")
    row = result.table("proxy_requests").row(0, named=True)
    assert (row["status_origin"], row["delivery"]) == (origin, delivery)
    assert result.table("proxy_events")["kind"].to_list() == ([kind] if kind else [])


# ----------------------------------------------------------------- Traefik


def test_traefik_clf(tmp_path):
    text = (
        '10.0.3.7 - - [24/Feb/2026:06:16:03 +0000] "POST /v1/chat/completions HTTP/1.1" 502 11 '
        '"-" "curl/8.5.0" 4711 "vllm@kubernetescrd" "http://10.0.0.21:8000" 1ms\n'
        '10.0.3.7 - - [24/Feb/2026:06:16:04 +0000] "POST /v1/chat/completions HTTP/1.1" 200 5000 '
        '"-" "curl/8.5.0" 4712 "vllm@kubernetescrd" "http://10.0.0.21:8000" 1532ms\n'
        '10.0.3.7 - - [24/Feb/2026:06:16:05 +0000] "GET /x HTTP/1.1" 404 19 "-" "curl/8.5.0" '
        '4713 "-" "-" 0ms\n'
    )
    _, result = parse(tmp_path, text, "traefik.log")
    rows = result.table("proxy_requests")
    assert rows["at"].to_list() == [
        t(2026, 2, 24, 6, 16, 3, 1000),  # the stamp is the START; + duration
        t(2026, 2, 24, 6, 16, 5, 532000),
        t(2026, 2, 24, 6, 16, 5),
    ]
    assert rows["upstream"].to_list() == ["http://10.0.0.21:8000", "http://10.0.0.21:8000", None]
    assert rows["status_origin"].to_list() == ["unknown", "upstream", "proxy"]
    assert rows["delivery"].to_list() == ["unknown", "reached", "refused"]
    assert result.table("proxy_events")["kind"].to_list() == ["bad_gateway"]
    assert result.table("proxy_requests")["request_time_s"].to_list() == [0.001, 1.532, 0.0]


def test_traefik_json(tmp_path):
    text = (
        '{"ClientAddr":"10.0.3.7:51234","ClientHost":"10.0.3.7","DownstreamStatus":502,'
        '"Duration":1234567,"OriginStatus":0,"RequestMethod":"POST",'
        '"RequestPath":"/v1/chat/completions","RouterName":"vllm@file",'
        '"ServiceURL":"http://10.0.0.21:8000","StartUTC":"2026-02-24T06:16:03.123456789Z",'
        '"level":"info","msg":"","time":"2026-02-24T06:16:03Z"}\n'
        '{"ClientHost":"10.0.3.7","DownstreamStatus":200,"Duration":1500000000,'
        '"OriginDuration":1499000000,"OriginStatus":200,"RequestMethod":"POST",'
        '"RequestPath":"/v1/chat/completions","ServiceURL":"http://10.0.0.22:8000",'
        '"StartUTC":"2026-02-24T06:16:04Z","request_X-Request-Id":"rid-7","level":"info"}\n'
    )
    _, result = parse(tmp_path, text, "traefik.json")
    rows = result.table("proxy_requests")
    assert rows["at"].to_list() == [
        t(2026, 2, 24, 6, 16, 3, 124691),
        t(2026, 2, 24, 6, 16, 5, 500000),
    ]
    assert rows["upstream_status"].to_list() == [None, 200]
    assert rows["status_origin"].to_list() == ["proxy", "upstream"]
    assert rows["delivery"].to_list() == ["unknown", "reached"]
    assert rows["upstream_time_s"].to_list() == [None, 1.499]
    assert rows["request_id"].to_list() == [None, "rid-7"]
    assert result.table("proxy_events")["kind"].to_list() == ["bad_gateway"]


# ---------------------------------------------------------------- gateways


def test_litellm_router_calls(tmp_path):
    text = (
        f"2026-02-24T06:16:10.000000000Z {ESC}[92m06:16:10 - LiteLLM Router:INFO{ESC}[0m: "
        "router.py:2890 - litellm.acompletion(model=hosted_vllm/meta-llama/Llama-3.1-8B-Instruct)"
        f"{ESC}[32m 200 OK{ESC}[0m\n"
        f"2026-02-24T06:16:11.000000000Z {ESC}[92m06:16:11 - LiteLLM Router:INFO{ESC}[0m: "
        "router.py:2901 - litellm.acompletion(model=hosted_vllm/meta-llama/Llama-3.1-8B-Instruct)"
        f"{ESC}[31m Exception litellm.Timeout: APITimeoutError - Request timed out.{ESC}[0m\n"
        f"2026-02-24T06:16:12.000000000Z {ESC}[92m06:16:12 - LiteLLM Router:INFO{ESC}[0m: "
        "router.py:2901 - litellm.acompletion(model=hosted_vllm/m)"
        f"{ESC}[31m Exception litellm.InternalServerError: InternalServerError: Hosted_vllmException"
        f" - Internal Server Error{ESC}[0m\n"
        f"2026-02-24T06:16:13.000000000Z {ESC}[92m06:16:13 - LiteLLM Proxy:DEBUG{ESC}[0m: "
        "proxy_server.py:123 - Request received\n"
        '2026-02-24T06:16:14.000000000Z INFO:     10.0.3.7:50000 - "POST /chat/completions HTTP/1.1" 200 OK\n'
    )
    fmt, result = parse(tmp_path, text, "litellm.log")
    assert fmt is FILE_FORMATS["proxy_log"]  # a gateway's uvicorn lines do not make it an instance
    assert (result.parsed, result.noise, result.unparsed) == (4, 1, 0)
    rows = by_line(result.table("proxy_requests"))
    assert rows["upstream"].to_list()[:3] == [
        "hosted_vllm/meta-llama/Llama-3.1-8B-Instruct",
        "hosted_vllm/meta-llama/Llama-3.1-8B-Instruct",
        "hosted_vllm/m",
    ]
    assert rows["status_origin"].to_list() == ["upstream", "unknown", "upstream", "unknown"]
    assert rows["delivery"].to_list() == ["reached", "unknown", "reached", "unknown"]
    assert rows["http_status"].to_list() == [None, None, None, 200]  # the last: uvicorn's line
    assert result.table("proxy_events")["kind"].to_list() == ["timeout", "upstream_5xx"]
    assert result.table("server_requests").is_empty()


def test_production_stack_router(tmp_path):
    text = (
        f"{ESC}[32;20m[2026-02-24 06:16:13,123] INFO:{ESC}[0m Routing request 8d2c9a1b with "
        "session id None to http://10.0.0.21:8000 at 1771913773.123456, process time = 0.0012 "
        f"{ESC}[3m(request.py:350:vllm_router.services.request_service.request){ESC}[0m\n"
        f"{ESC}[32;20m[2026-02-24 06:16:14,001] INFO:{ESC}[0m Routing request 8d2c9a1c to "
        "http://10.0.0.22:8000 at 1771913774.0, process time = 0.0009 "
        f"{ESC}[3m(request.py:350:vllm_router.services.request_service.request){ESC}[0m\n"
        f"{ESC}[31;20m[2026-02-24 06:16:15,000] ERROR:{ESC}[0m HTTP error in decoder: 503, "
        "message='Service Unavailable' "
        f"{ESC}[3m(request.py:420:vllm_router.services.request_service.request){ESC}[0m\n"
        f"{ESC}[32;20m[2026-02-24 06:16:16,000] INFO:{ESC}[0m Scraping metrics from 2 serving "
        f"engine(s) {ESC}[3m(engine_stats.py:1:vllm_router.stats.engine_stats){ESC}[0m\n"
    )
    fmt, result = parse(tmp_path, text, "router.log")
    assert fmt is FILE_FORMATS["proxy_log"]
    rows = result.table("proxy_requests")
    assert rows["request_id"].to_list() == ["8d2c9a1b", "8d2c9a1c"]
    assert rows["upstream"].to_list() == ["http://10.0.0.21:8000", "http://10.0.0.22:8000"]
    assert rows["at"].to_list() == [t(2026, 2, 24, 6, 16, 13, 123456), t(2026, 2, 24, 6, 16, 14)]
    assert rows["delivery"].to_list() == ["unknown", "unknown"]
    events = result.table("proxy_events")
    assert events["kind"].to_list() == ["upstream_error"]
    assert events["at"][0] == t(2026, 2, 24, 6, 16, 15)
    assert (result.parsed, result.noise, result.unparsed) == (3, 1, 0)


def test_endpoint_picker_picks_and_drops(tmp_path):
    """llm-d's EPP: the v0.5 struct pick names the pod, the v1 pick its first ip:port; a
    drop logged twice (-v=3 "Request dropped" and -v=4 "Flow control outcome") is one
    request that never reached an instance and one refusal; a cancelled request is no
    refusal; a Dispatched outcome and the lifecycle lines are noise."""
    from logforensics.ingest.proxies import epp

    picked_v05, picked_v1, dropped = (s.text for s in epp.EndpointPicker.samples[:3])
    zap = '{{"level":"{}","ts":{},"caller":"{}","msg":"{}","x-request-id":"{}"{}}}'
    text = "\n".join(
        [
            zap.format("info", '"2026-02-20T22:24:39Z"', "handlers/server.go:217",
                       "EPP received request", "b43b7ccd-c87a-4f52-8ebe-717b5dcc48ad", ""),
            picked_v05,
            picked_v1,
            dropped,
            zap.format("debug", "1776910414.031", "requestcontrol/admission.go:178",
                       "Flow control outcome", "710a2ee7-fb67-4151-a3b9-56ad753fb55a",
                       ',"requestID":"710a2ee7-fb67-4151-a3b9-56ad753fb55a",'
                       '"outcome":"RejectedCapacity"'),
            zap.format("debug", "1776910415.5", "requestcontrol/admission.go:178",
                       "Flow control outcome", "c-2", ',"requestID":"c-2",'
                       '"outcome":"EvictedContextCancelled"'),
            zap.format("debug", "1776910415.6", "requestcontrol/admission.go:178",
                       "Flow control outcome", "d-3", ',"requestID":"d-3","outcome":"Dispatched"'),
        ]
    ) + "\n"  # fmt: skip
    fmt, result = parse(tmp_path, text, "epp.log")
    assert fmt is FILE_FORMATS["proxy_log"]
    rows = result.table("proxy_requests")
    assert rows["request_id"].to_list() == [
        "b43b7ccd-c87a-4f52-8ebe-717b5dcc48ad",
        "ebb9e80e-8cee-43f5-888f-2b6c7a155160",
        "710a2ee7-fb67-4151-a3b9-56ad753fb55a",
        "c-2",
    ]
    assert rows["upstream"].to_list() == [
        "demo-llm/qwen-kserve-c5d769949-p4tkg",
        "10.0.4.203:8000",
        None,
        None,
    ]
    assert rows["delivery"].to_list() == ["unknown", "unknown", "refused", "refused"]
    assert rows["at"].to_list()[:3] == [
        t(2025, 11, 21, 1, 46, 0),
        t(2026, 4, 23, 2, 13, 33, 512000),
        t(2026, 4, 23, 2, 13, 34, 27000),
    ]
    events = result.table("proxy_events")
    assert events["kind"].to_list() == ["refused"]
    assert events["detail"][0] == (
        "endpoint picker dropped request 710a2ee7-fb67-4151-a3b9-56ad753fb55a: RejectedCapacity "
        "(request rejected pre-queue: queue at capacity)"
    )
    assert (result.parsed, result.noise, result.unparsed) == (4, 3, 0)


def test_kserve_logger_events_as_the_message_dumper_prints_them(tmp_path):
    """The docs' request/response pair is one request that reached a model server and was
    answered 200; a request event with no response (the agent sends one for a 200 only) is
    one that reached it, its answer unknown; `kubectl logs --timestamps` stamps are peeled;
    which replica, the events never say."""
    from logforensics.ingest.base import SAMPLES_DIR

    pair = (SAMPLES_DIR / "kserve_logger_event_display.txt").read_text()
    alone = (
        pair.split("\n\n")[0]
        .replace("e58f1edd-43bc-42f6-a10a-d1adb5cab831", "9e4163ad-f543-427e-bfed-5a122cf41bab")
        .replace("2023-01-30T10:45:00.000Z", "2023-01-30T10:45:03.250Z")
    )
    stamped = "".join(f"2023-01-30T10:45:04.000000000Z {line}\n" for line in alone.splitlines())
    fmt, result = parse(tmp_path, pair + "\n" + stamped, "message-dumper.log")
    assert fmt is FILE_FORMATS["kserve_logger_events"]
    rows = result.table("proxy_requests")
    assert rows["request_id"].to_list() == [
        "e58f1edd-43bc-42f6-a10a-d1adb5cab831",
        "9e4163ad-f543-427e-bfed-5a122cf41bab",
    ]
    assert rows["upstream"].to_list() == ["sklearn-iris", "sklearn-iris"]
    assert rows["delivery"].to_list() == ["reached", "reached"]
    assert rows["upstream_status"].to_list() == [200, None]
    assert rows["status_origin"].to_list() == ["upstream", "unknown"]
    assert rows["at"].to_list() == [t(2023, 1, 30, 10, 45), t(2023, 1, 30, 10, 45, 3, 250000)]
    assert result.unparsed == 0 and result.parsed == 33
    assert any("never the pod" in n for n in result.notes)


RECORDINGS = Path(__file__).parents[1] / "recordings"
TRAEFIK3 = (
    Path(__file__).parent / "data" / "traefik3"
)  # real Traefik 3.7.15 output (tools/samples/README.md)


def test_vllm_router_rs_console_and_log_dir_file_as_recorded(tmp_path):
    """The Rust vllm-router 0.1.17's real output (recordings/vrouter-compute): its console
    (the launcher's ``DEBUG:`` prints, ANSI-coloured tracing lines) and its --log-dir file.
    It names no request: every line is the router's own, none unparsed, no row."""
    bundle = RECORDINGS / "vrouter-compute"
    for name in ("router.log", "vllm-router-logs/vllm-router.2026-12-01"):
        text = (bundle / name).read_text()
        fmt, result = parse(tmp_path, text, "router.log")
        assert fmt is FILE_FORMATS["proxy_log"], name
        assert result.unparsed == 0 and result.parsed == 0, result.unparsed_examples
        assert result.noise == result.lines == len(text.splitlines())
        assert result.table("proxy_requests").is_empty()
        # the shutdown warning ("Concurrency queue processor shutting down") is no failure
        assert result.table("proxy_events").is_empty()
        assert result.span[0] == t(2026, 12, 1, 17, 52, 53)


def test_vllm_router_rs_refusals_and_failures_are_events(tmp_path):
    """Messages as the 0.1.17 binary holds them (its middleware's 429s and queue timeout,
    the HTTP router's failed send), in the recorded line shape."""
    head = "2026-12-01 17:57:10  WARN vllm_router_rs::middleware: src/middleware.rs:540: "
    text = (
        head
        + "No tokens available and queuing is disabled, returning 429\n"
        + head
        + "Request queue is full, returning 429\n"
        + head
        + "Request already timed out in queue\n"
        "2026-12-01 17:57:11 ERROR vllm_router_rs::routers::http::router: "
        "src/routers/http/router.rs:700: Failed to send typed request "
        "worker_url=http://127.0.0.1:8002 error=error sending request\n"
        "2026-12-01 17:57:12 DEBUG vllm_router_rs::core::token_bucket: src/core/token_bucket.rs:75: "
        "Token bucket: acquired 1 tokens, 32767 remaining\n"
    )
    fmt, result = parse(tmp_path, text, "router.log")
    assert fmt is FILE_FORMATS["proxy_log"]
    events = result.table("proxy_events")
    assert events["kind"].to_list() == ["refused", "refused", "refused", "upstream_error"]
    assert events["upstream"].to_list() == [None, None, None, "http://127.0.0.1:8002"]
    assert (result.parsed, result.noise, result.unparsed) == (4, 1, 0)


def test_traefik3_own_log_as_recorded_is_all_its_own(tmp_path):
    """Traefik 3.7.15's console log at INFO (recordings/traefik-refuse): start-up notices,
    its multi-line data-collection notice, shutdown — no request, nothing unparsed."""
    text = (RECORDINGS / "traefik-refuse" / "traefik.log").read_text()
    fmt, result = parse(tmp_path, text, "traefik.log")
    assert fmt is FILE_FORMATS["proxy_log"]
    assert (result.parsed, result.unparsed) == (0, 0), result.unparsed_examples
    assert result.noise == result.lines == 20
    assert result.table("proxy_events").is_empty() and result.table("proxy_requests").is_empty()


@pytest.mark.parametrize("name", ["traefik3-debug-console.log", "traefik3-debug-json.log"])
def test_traefik3_debug_log_names_the_request_it_could_not_proxy(tmp_path, name):
    """Traefik 3.7.15 at --log.level=DEBUG (console, and --log.format=json), one request to
    a service whose only server is a closed port (tools/samples/README.md): its 502 line."""
    fmt, result = parse(tmp_path, (TRAEFIK3 / name).read_text(), name)
    assert fmt is FILE_FORMATS["proxy_log"]
    assert result.unparsed == 0, result.unparsed_examples
    assert result.parsed == 1 and result.noise == result.lines - 1
    events = result.table("proxy_events")
    assert events["kind"].to_list() == ["conn_refused"]
    assert events["http_status"].to_list() == [502]
    assert events["upstream"].to_list() == ["127.0.0.1:8009"]
    assert "dial tcp 127.0.0.1:8009: connect: connection refused" in events["detail"][0]
    assert events["at"][0] in (t(2026, 12, 1, 18, 7, 32), t(2026, 12, 1, 18, 7, 45))
    assert result.table("proxy_requests").is_empty()  # "Service selected by WRR" is noise


def test_traefik3_clf_answer_for_a_closed_port(tmp_path):
    fmt, result = parse(tmp_path, (TRAEFIK3 / "traefik3-closed-port-access.log").read_text())
    rows = result.table("proxy_requests")
    assert rows["http_status"].to_list() == [502]
    assert rows["upstream"].to_list() == ["http://127.0.0.1:8009"]


def test_caddy_json_access_and_error_logs_as_recorded(tmp_path):
    """Caddy 2.6.2's real logs (recordings/caddy-crash): the JSON access log is Caddy's (not a
    client's JSONL, though it has `duration` and `status`), its own log names the failures."""
    bundle = RECORDINGS / "caddy-crash"
    fmt, result = parse(tmp_path, (bundle / "caddy-access.log").read_text(), "caddy-access.log")
    assert fmt is FILE_FORMATS["proxy_log"] and result.formats == ["caddy_json"]
    rows = result.table("proxy_requests")
    assert rows.height == result.lines == result.parsed and result.unparsed == 0
    assert sorted(set(rows["http_status"].to_list())) == [200, 502]
    assert rows["upstream"].is_null().all()  # Caddy's access log names no upstream
    # its resp_headers tell who answered: vLLM's headers copied through (Server: Caddy,
    # uvicorn; Date; Content-Type) on the 200s, Caddy's Server header alone on its 502s
    who = rows.group_by("http_status", "status_origin", "delivery").len().sort("http_status")
    assert who.rows() == [(200, "upstream", "reached", 18), (502, "proxy", "unknown", 6)]
    first = rows.row(0, named=True)
    assert first["at"] == dt.datetime(2026, 12, 1, 18, 12, 56, 391101, tzinfo=UTC)  # ts: its end
    assert first["request_time_s"] == 7.417851963
    assert (first["method"], first["path"], first["client"]) == (
        "POST",
        "/v1/completions",
        "127.0.0.1",
    )

    _, result = parse(tmp_path, (bundle / "caddy.log").read_text(), "caddy.log")
    assert result.unparsed == 0
    events = result.table("proxy_events")
    kinds = events.group_by("kind").len().sort("kind").rows()
    assert kinds == [("conn_failed", 4), ("conn_refused", 6)]
    refused = events.filter(pl.col("kind") == "conn_refused")
    assert refused["upstream"].unique().to_list() == ["127.0.0.1:8002"]
    assert refused["http_status"].unique().to_list() == [502]
    cut = events.filter(pl.col("kind") == "conn_failed")
    assert cut["detail"][0].endswith("aborting with incomplete response: unexpected EOF")
    # one event per request: the "reading from backend" line before each abort is noise
    assert result.noise == result.lines - 10


# ------------------------------------------------------------ no instances


def test_a_proxy_only_log_creates_no_instance(tmp_path):
    for name in ("nginx-access.log", "nginx-error.log", "envoy.log", "haproxy.log"):
        (tmp_path / name).write_bytes((DATA / name).read_bytes())
    inputs = load([tmp_path], CTX)
    assert {f.role for f in inputs.files} == {"proxy"}
    assert {f.instance for f in inputs.files} == {None}
    assert inputs.coverage == {}
    for table in ("server_requests", "engine_stats", "engine_events"):
        assert inputs.tables[table].is_empty(), table
    assert inputs.tables["proxy_requests"]["proxy"].unique().sort().to_list() == [
        "envoy",
        "haproxy",
        "nginx-access",
    ]


def test_container_stdout_mixing_vllm_and_a_sidecar_proxy_splits_line_by_line(tmp_path):
    text = (
        "2026-02-24T06:16:00.000000000Z (APIServer pid=1) INFO 02-24 06:16:00 [loggers.py:123] "
        "Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 10.0 tokens/s, "
        "Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%, Prefix cache hit rate: 0.0%\n"
        '2026-02-24T06:16:01.000000000Z 127.0.0.1 - - [24/Feb/2026:06:16:01 +0000] "POST '
        '/v1/chat/completions HTTP/1.1" 504 167 "-" "python-requests/2.32.3" 127.0.0.1:8000 504 '
        "60.001 60.000\n"
        '2026-02-24T06:16:02.000000000Z INFO:     127.0.0.1:5000 - "POST /v1/chat/completions '
        'HTTP/1.1" 200 OK\n'
    )
    fmt, result = parse(tmp_path, text, "pod-0.log")
    assert fmt is FILE_FORMATS["server_log"]
    assert result.table("engine_stats").height == 1
    assert result.table("server_requests")["instance"].to_list() == ["pod-0"]
    assert result.table("proxy_requests")["proxy"].to_list() == ["pod-0"]
    assert result.table("proxy_events")["kind"].to_list() == ["timeout"]
    assert (result.parsed, result.unparsed) == (3, 0)


def test_proxy_frames_have_the_canonical_schema():
    source = SourceFile(DATA / "nginx-access.log", "nginx-access.log", "nginx-access")
    result = detect(source).parse(source, CTX)
    for name, frame in result.tables.items():
        assert frame.schema == pl.Schema(model.SCHEMAS[name]), name


def test_traefik_debug_forwarding_lines_name_the_backend(tmp_path):
    """Traefik's own --log.level=DEBUG lines, as quoted in traefik/traefik#6290 (logrus text
    behind a compose prefix) and #5017 (JSON): the backend each request was forwarded to."""
    text = (
        'traefik_1  | time="2020-02-07T11:20:48Z" level=debug msg="vulcand/oxy/roundrobin/rr: '
        'Forwarding this request to URL" ForwardURL="http://172.29.0.4:80" Request="{\\"Method\\":'
        '\\"GET\\",\\"RequestURI\\":\\"/v1/models\\"}"\n'
        'traefik_1  | time="2020-02-07T11:20:48Z" level=debug msg="vulcand/oxy/roundrobin/rr: '
        'completed ServeHttp on request" Request="{}"\n'
        '{"ForwardURL":{"Scheme":"http","Opaque":"","User":null,"Host":"10.244.2.56:80"},'
        '"Request":"{}","level":"debug","msg":"vulcand/oxy/roundrobin/rr: Forwarding this request '
        'to URL","time":"2019-06-25T11:25:05Z"}\n'
    )
    fmt, result = parse(tmp_path, text, "traefik.log")
    assert fmt is FILE_FORMATS["proxy_log"]
    assert (result.parsed, result.noise, result.unparsed) == (2, 1, 0)
    rows = result.table("proxy_requests")
    assert rows["upstream"].to_list() == ["http://172.29.0.4:80", "http://10.244.2.56:80"]
    assert rows["method"].to_list() == ["GET", None]
    assert rows["path"].to_list() == ["/v1/models", None]
    assert rows["at"].to_list() == [t(2020, 2, 7, 11, 20, 48), t(2019, 6, 25, 11, 25, 5)]


def test_nginx_json_lines_of_a_real_crash(tmp_path):
    """corpus crash-failover: nginx 1.22.1 writing one JSON object per request."""
    from tests.conftest import corpus

    path = corpus("crash-failover") / "nginx-access.log"
    src = SourceFile(path, path.name, "nginx")
    result = detect(src).parse(src, CTX)
    assert result.formats == ["nginx_json"] and result.unparsed == 0
    rows = result.table("proxy_requests")
    assert rows.height == 41 and rows["request_id"].is_not_null().all()
    # a retry (proxy_next_upstream) lists both attempts, as nginx wrote them
    tried = set(rows["upstream"].drop_nulls().cast(pl.Utf8).str.split(", ").explode())
    assert tried == {"127.0.0.1:8001", "127.0.0.1:8002"}
