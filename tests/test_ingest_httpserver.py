"""The seed's own proxy: Python http.server relaying with urllib, as one proxy log.

tests/data/serverlogs/pyproxy.log is the stderr of such a proxy (CPython 3.11.7,
http.server + urllib, send_error(502, f"Bad Gateway: {exc}")) run here in front of a
stub: one 200, an upstream 503, an upstream timeout, a client that left before the 502
(BrokenPipeError traceback), a GET it does not implement (501), a garbage request (400).
"""

from pathlib import Path

from logforensics.ingest import FILE_FORMATS, ParseContext, SourceFile, detect

LOG = Path(__file__).parent / "data" / "serverlogs" / "pyproxy.log"


def test_the_relaying_proxy_log_is_one_proxy_log_every_line_understood():
    source = SourceFile(LOG, "pyproxy.log", "pyproxy")
    fmt = detect(source)
    assert fmt is FILE_FORMATS["proxy_log"]
    result = fmt.parse(source, ParseContext(year=2026))
    assert (result.lines, result.unparsed) == (71, 0)
    rows = result.table("proxy_requests")
    assert rows["http_status"].to_list() == [200, 502, 502, 502, 501, 400]
    assert rows["upstream_status"].to_list() == [None, 503, None, None, None, None]
    assert rows["delivery"].to_list() == [
        "unknown",
        "reached",
        "unknown",
        "unknown",
        "unknown",
        "unknown",
    ]
    assert rows["proxy"].unique().to_list() == ["pyproxy"]
    events = result.table("proxy_events").sort("source")
    assert events["kind"].to_list() == ["upstream_5xx", "timeout", "timeout", "timeout"]
    assert "BrokenPipeError" in events["detail"][3]
    assert result.table("server_requests").is_empty()  # a proxy's log creates no instance


def test_the_recorded_seed_proxy():
    """corpus pyproxy-seed proxy.log: the hand-written relay (http.server, a queue with a 17 s
    timeout) in front of two real vLLM instances: 48 access lines, its 503s as events."""
    from tests.conftest import corpus

    path = corpus("pyproxy-seed") / "proxy.log"
    source = SourceFile(path, "proxy.log", "proxy")
    result = detect(source).parse(source, ParseContext(year=2026))
    rows = result.table("proxy_requests")
    assert rows.height == 48
    assert rows.filter(rows["http_status"] == 503).height == 20
    assert result.unparsed <= 1  # its start-up print, shown as it is


def test_a_threaded_proxys_interleaved_tracebacks():
    """corpus pyproxy-overlap: ThreadingHTTPServer threads interleave, so a traceback's
    banner and first line stand apart from its frames; both are read, nothing is lost."""
    from tests.conftest import corpus

    path = corpus("pyproxy-overlap") / "proxy.log"
    source = SourceFile(path, "proxy.log", "proxy")
    result = detect(source).parse(source, ParseContext(year=2026))
    assert result.table("proxy_requests").height == 48
    assert result.unparsed == 0  # its start-up print, "relay proxy on … -> …", is a banner
    assert result.noise == result.lines - result.parsed
