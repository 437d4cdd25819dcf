"""A line format is not run on lines none of whose messages begin as its claims must.

The gate is sound when (1) every string its pattern matches begins with one of the
characters `first_characters` derives, and (2) the format claims only lines its pattern
matches. (1) is checked on the registry's own patterns with strings made to match them,
(2) on every real line this checkout holds.
"""

from __future__ import annotations

import re

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logforensics.ingest import LINE_FORMATS, ParseContext, SourceFile
from logforensics.ingest.openings import first_characters
from logforensics.ingest.serverlog import parse_lines, prepared_lines
from tests.conftest import real_line_logs, write

CTX = ParseContext(year=2026)
GATED = [fmt for fmt in LINE_FORMATS.values() if fmt.openings is not None]


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("^a", "a"),
        ("^(?:a|b)c", "ab"),
        ("^a?b", "ab"),
        ("^(?:x*|y)z", "xyz"),
        ("^[a-c]x", "abc"),
        (r"^\[x", "["),
        (r"^\bA", "A"),
        ("^(?P<lvl>TRC|DBG) |^{", "TD{"),
        ("^a*", None),  # can match nothing at the start: any line
        ("^(?:a|)", None),
        ("a", None),  # unanchored
        ("^a|b", None),  # one alternative unanchored
        ("(?i)^a", None),  # case-insensitive
        ("(?m)^a", None),  # ^ after any newline
        (r"^\s*T", None),  # a category
        (r"^\d", None),
        ("^[^a]", None),  # a negation
        ("^.", None),
        ("^[\x00-\uffff]", None),  # too wide to list
        ("^(?=a)a", None),  # a look-ahead
        ("^(", None),  # not a regex
        ("^[[:alpha:]]x", None),  # Rust's POSIX class: any letter, to Python "[:alph"
        ("^[a-z&&[^x]]", None),  # Rust's class intersection
    ],
)
def test_first_characters(pattern, expected):
    got = first_characters(pattern)
    assert (None if got is None else "".join(sorted(got))) == (
        None if expected is None else "".join(sorted(expected))
    )


def test_the_anchored_formats_are_gated():
    """Formats reading each line alone whose every alternative is anchored get a gate;
    formats that look across lines never do (they may claim lines their pattern misses)."""
    names = {fmt.name for fmt in GATED}
    assert {"uvicorn_access", "envoy_access", "caddy_json", "traefik3_log"} <= names
    assert all(fmt.per_line for fmt in GATED)
    assert not any(fmt.name in names for fmt in LINE_FORMATS.values() if not fmt.per_line)


@pytest.mark.parametrize("fmt", GATED, ids=lambda f: f.name)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_whatever_a_gated_pattern_matches_begins_with_its_openings(fmt, data):
    text = data.draw(st.from_regex(fmt.pattern).filter(lambda t: "\n" not in t))
    assert re.search(fmt.pattern, text)
    if pl.Series([text]).str.contains(fmt.pattern)[0]:  # as the format's extract tests it
        assert text[:1] in fmt.openings, (text, sorted(fmt.openings))


def _sample_logs(tmp_path):
    """Every line format's samples as files, for both roles."""
    out = []
    for fmt in LINE_FORMATS.values():
        for i, sample in enumerate(fmt.samples):
            for role in ("server", "proxy"):
                out.append(
                    (write(tmp_path / f"{fmt.name}-{i}-{role}.log", sample.read() + "\n"), role)
                )
    return out


def test_gated_formats_claim_only_lines_their_pattern_matches(tmp_path):
    """On every sample and every real server or proxy log of the checkout: each line a
    gated format claims (records or noise) has a message its pattern matches, so it
    begins with one of the format's openings."""
    logs = _sample_logs(tmp_path) + real_line_logs()
    examined = 0
    for path, role in logs:
        source = SourceFile(path, path.name, "x")
        frame = prepared_lines(source, CTX, role)
        examined += frame.height
        for fmt in GATED:
            claim = fmt.extract(frame, source)
            claimed = frame.filter(
                pl.col("line_no").is_in(pl.concat([claim.records, claim.noise]).implode())
            )
            outside = claimed.filter(~pl.col("msg").str.contains(fmt.pattern))
            assert outside.is_empty(), (fmt.name, path, outside["msg"].to_list()[:3])
            assert set(claimed["msg"].str.head(1)) <= fmt.openings, (fmt.name, path)
    assert examined > 5_000  # the repository holds 10.7k such lines, the corpus 2k


def test_a_format_is_not_run_on_lines_that_cannot_begin_as_its_own(tmp_path, monkeypatch):
    """An nginx access log is never offered to Envoy's format (its lines begin with "["),
    a log of Envoy's lines is, and every line of each is accounted for."""
    envoy = LINE_FORMATS["envoy_access"]
    nginx = LINE_FORMATS["nginx_access"]
    offered = []
    real = type(envoy).extract

    def extract(self, lines, source):
        offered.append(lines.height)
        return real(self, lines, source)

    monkeypatch.setattr(type(envoy), "extract", extract)
    nginx_log = write(tmp_path / "nginx.log", nginx.samples[0].read() + "\n")
    result = parse_lines(SourceFile(nginx_log, "nginx.log", "x"), CTX, "proxy")
    assert offered == [] and result.table("proxy_requests").height >= 1
    assert result.parsed + result.noise == result.lines
    envoy_log = write(tmp_path / "envoy.log", envoy.samples[0].read() + "\n")
    result = parse_lines(SourceFile(envoy_log, "envoy.log", "x"), CTX, "proxy")
    assert offered and result.parsed + result.noise == result.lines
