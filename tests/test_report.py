"""The rendered reports: self-contained, escaped, showing the right numbers."""

import re

import pytest

from logforensics.analysis import analyze
from logforensics.report import build_report, render_html, render_markdown
from tests.conftest import outside_fences, write

HOSTILE = '<script>alert("x")</script>'


@pytest.fixture(scope="module")
def seed_html():
    from tests.conftest import FIXTURES

    return render_html(build_report(analyze([FIXTURES / "seed-two-instances"])))


def test_html_is_self_contained(seed_html):
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", seed_html)
    assert "<link" not in seed_html and "@import" not in seed_html
    images = re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', seed_html)
    assert len(images) == 4


def test_html_step_table_shows_the_counts(seed_html):
    rows = re.findall(
        r"<tr><td>(\d+)</td><td[^>]*>[^<]+</td><td>(\d+)</td><td>(\d+)</td>\s*<td[^>]*>(\d+)</td><td[^>]*>(\d+)</td>\s*<td>(\d+)</td><td>(\d+)</td>",
        seed_html,
    )
    assert rows == [
        ("1", "10", "7", "3", "3", "5", "2"),
        ("2", "13", "8", "5", "5", "5", "3"),
        ("3", "20", "15", "5", "5", "5", "10"),
    ]
    failed = seed_html[seed_html.index('id="failed"') : seed_html.index('id="instances"')]
    rows = re.findall(r'<details class="req"[^>]*>\s*<summary>(.*?)</summary>', failed, re.S)
    assert len(rows) == 13
    assert all("HTTP Error 503: Service Unavailable" in row for row in rows)


def test_hostile_log_text_is_escaped(tmp_path, seed_bundle):
    import shutil

    folder = tmp_path / "b"
    shutil.copytree(seed_bundle, folder)
    log = folder / "instance-1.log"
    log.write_text(log.read_text() + f"2026-02-24T06:29:59.000000001Z {HOSTILE}\n")
    client = folder / "client" / "results.jsonl"
    client.write_text(client.read_text().replace("HTTP Error 503: Service Unavailable", HOSTILE, 1))
    write(folder / f"{HOSTILE}.log", "junk\n")
    html = render_html(build_report(analyze([folder])))
    assert HOSTILE not in html
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in html
    assert html.count("<script") == 1  # the page's own filter script, nothing from a log


def test_markdown_table_escapes_pipes(tmp_path, seed_bundle):
    import shutil

    folder = tmp_path / "b"
    shutil.copytree(seed_bundle, folder)
    write(
        folder / "gpu|3.log",
        "INFO 02-24 05:50:00 [loggers.py:1] Engine 000: Running: 0 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%\n"
        'INFO:     10.0.0.2:5000 - "GET /health HTTP/1.1" 200 OK\n'
        "garbage | with a pipe\n"
        "INFO 02-24 06:35:00 [loggers.py:1] Engine 000: Running: 0 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%\n",
    )
    md = render_markdown(build_report(analyze([folder])))
    assert md.startswith("### Bottleneck: the front proxy (confidence 90%)")
    assert (
        "| step | sent | ok | failed | unreached | gpu\\|3 | instance-1 | instance-2 | P50 s | P95 s |"
        in md
    )
    finding = next(line for line in md.splitlines() if line.startswith("- unparsed lines"))
    assert "gpu\\|3.log: 1 of 4 lines not understood" in finding


def test_html_reads_top_down(seed_html):
    """Verdict, confidence, evidence and what to do come before the step table and the charts."""
    order = [
        "<h1>Bottleneck: the front proxy</h1>",
        "Confidence 90%",
        'id="evidence"',
        "Failed requests that never reached any instance",
        'id="recommendations"',
        'id="steps"',
        'id="chart-timeline"',
        'id="chart-engine"',
        'id="chart-capacity"',
        'id="chart-balance"',
        'id="findings"',
        'id="failed"',
        'id="clock"',
        'id="inputs"',
    ]
    positions = [seed_html.index(marker) for marker in order]
    assert positions == sorted(positions)
    evidence = seed_html[seed_html.index('id="evidence"') : seed_html.index('id="recommendations"')]
    assert evidence.count('<li id="evidence-') == 3
    # sources grouped per file, relative to the bundle
    assert "client/results.jsonl</span> lines 2, 4, 11, 15, 17, 19, 20, 22 and 5 more" in evidence


def test_html_sections_hold_the_details(seed_html):
    assert "Failed requests (13)" in seed_html
    facets = seed_html[seed_html.index('<dl class="kv facets">') :]
    assert "<dt>where it died</dt><dd>before any instance × 13</dd>" in facets
    assert "generation throughput" in seed_html  # the engine chart's caption names it
    for caption in ("Timeline of requests per instance.", "Capacity curve across steps."):
        assert f"<strong>{caption}</strong>" in seed_html
    clock = seed_html[seed_html.index('id="clock"') : seed_html.index('id="inputs"')]
    assert "estimated" in clock and "server records fit a request at this offset" in clock
    inputs = seed_html[seed_html.index('id="inputs"') :]
    assert (
        "client_jsonl" in inputs and "seed_rows" in inputs and "skipped: no known format" in inputs
    )
    # every chart twice: page width and a phone layout
    assert seed_html.count('<source media="(max-width: 600px)" srcset="data:image/png;base64,') == 4


def test_hostile_marker_and_prompt_are_escaped(tmp_path, seed_bundle):
    import json
    import shutil

    folder = tmp_path / "b"
    shutil.copytree(seed_bundle, folder)
    client = folder / "client" / "results.jsonl"
    records = [json.loads(line) for line in client.read_text().splitlines()]
    for rec in records:
        if not rec["ok"]:
            rec["request_id"] = HOSTILE
            rec["error"] = f"{HOSTILE} | broken"
    client.write_text("".join(json.dumps(r) + "\n" for r in records))
    analysis = analyze([folder])
    html = render_html(build_report(analysis))
    assert HOSTILE not in html and html.count("<script") == 1  # the page's own
    assert html.count("&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;") >= 13
    md = render_markdown(build_report(analysis))
    assert "<script" not in outside_fences(md).replace("\\<script", "")


def big_bundle(folder, n: int, fail_share: float = 0.67, seed: int = 3):
    """`n` requests in ten steps behind one instance; two in three fail unreached
    (the engine's stats read Running 0 while they hang)."""
    import datetime as dt
    import json
    import random

    rng = random.Random(seed)
    t0 = dt.datetime(2026, 3, 1, 10, 0, 0, tzinfo=dt.timezone.utc)
    client, lines = [], []
    for step in range(10):
        for i in range(n // 10):
            start = t0 + dt.timedelta(seconds=200 * step + rng.uniform(0, 60))
            ok = rng.random() > fail_share
            latency = rng.uniform(2, 6) if ok else 120.0
            end = start + dt.timedelta(seconds=latency)
            client.append(
                {
                    "step": step + 1,
                    "index": i + 1,
                    "started_at": start.isoformat(),
                    "ended_at": end.isoformat(),
                    "latency_s": round(latency, 3),
                    "ok": ok,
                    "http_status": 200 if ok else 503,
                    "error": None if ok else "HTTP Error 503: Service Unavailable",
                    "output_tokens": 300 if ok else 0,
                }
            )
            if ok:
                peer = f"10.0.0.2:{40000 + len(lines) % 20000}"
                lines.append(
                    (end, f'INFO:     {peer} - "POST /v1/chat/completions HTTP/1.1" 200 OK')
                )
    at = t0 - dt.timedelta(seconds=60)
    while at < t0 + dt.timedelta(seconds=2200):
        # successes are done 66 s into each step; the failures hang on elsewhere
        busy = (at - t0).total_seconds() % 200 < 70
        lines.append(
            (
                at,
                f"(APIServer pid=1) INFO {at:%m-%d %H:%M:%S} [loggers.py:123] Engine 000: "
                f"Avg prompt throughput: 10.0 tokens/s, Avg generation throughput: "
                f"{rng.uniform(100, 900):.1f} tokens/s, Running: {rng.randint(0, 40) if busy else 0} reqs, "
                f"Waiting: 0 reqs, GPU KV cache usage: {rng.uniform(0, 30):.1f}%, "
                "Prefix cache hit rate: 0.0%",
            )
        )
        at += dt.timedelta(seconds=10)
    log = "".join(f"{t:%Y-%m-%dT%H:%M:%S.%f}000Z {text}\n" for t, text in sorted(lines))
    write(folder / "gpu-0.log", log)
    write(folder / "client.jsonl", "".join(json.dumps(r) + "\n" for r in client))
    return folder


def test_large_input_is_aggregated_and_truncated(tmp_path):
    analysis = analyze([big_bundle(tmp_path / "big", 20_000)])
    totals = analysis.totals()
    assert totals["sent"] == 20_000 and totals["unreached"] > 13_000
    html = render_html(build_report(analysis))
    assert len(html.encode()) < 5_000_000
    assert "20,000 requests: drawn as requests started per 5 s" in html
    failed = html[html.index('id="failed"') : html.index('id="instances"')]
    assert f"Failed requests ({totals['failed']:,})" in failed
    # past LEDGER_ALL_ROWS the rows come in groups, the first of each shown, the rest counted
    assert failed.count('<details class="req"') == 300
    assert "Before any instance · HTTP 503: 13,337" in failed
    assert "Showing the first 300 of 13,337." in failed
    assert "write it with <code>--ledger FILE</code>" in failed
    # timeline, engine state, capacity; no balance chart for a single instance
    assert len(re.findall(r'<img src="data:image/png;base64,', html)) == 3
    md = render_markdown(build_report(analysis))
    assert len(md) < 10_000 and md.count("\n| ") == 11  # header + ten steps


def test_markdown_summary_reads_as_a_comment(tmp_path, seed_bundle):
    md = render_markdown(build_report(analyze([seed_bundle])))
    lines = md.splitlines()
    assert lines[0] == "### Bottleneck: the front proxy (confidence 90%)"
    assert "**43** sent · **30** ok · **13** failed · **13** never reached an instance" in md
    assert (
        "1. Failed requests that never reached any instance (the proxy refused them, or no log "
        "saw them inside every log's span): **13/13** (threshold > 0) — "
        "`client/results.jsonl` lines 2, 4, 11, 15, 17 (+8 more)"
    ) in lines
    assert "| 3 | 20 | 15 | 5 | 5 | 5 | 10 | 3.61 | 3.69 | 1,210 |" in lines
    assert "**Findings**" in md and "- instance capped: instance-1 served exactly 5" in md
    assert "warm-up request" not in md  # info-level notes stay in the HTML report
    assert "**Next steps**" in md


def test_markdown_quotes_each_evidence_items_lines_in_a_fence(seed_bundle):
    md = render_markdown(build_report(analyze([seed_bundle])))
    lines = md.splitlines()
    first = lines.index("   ```text")
    assert lines[first + 1].startswith('   client/results.jsonl:2  {"step": 1,')
    assert "HTTP Error 503: Service Unavailable" in lines[first + 1]
    assert lines[first + 4] == "   ```" and lines[first + 5] == "   _… and 10 more cited line(s)._"
    assert md.count("   ```text") == 3  # one block under each of the three items


def test_autoescape_stays_on_and_nothing_is_marked_safe():
    from pathlib import Path

    from logforensics.report import html

    assert html.ENV.autoescape is True
    templates = sorted((Path(html.__file__).parent / "templates").glob("*.html.j2"))
    # the report and the comparison page share the environment
    assert {t.name for t in templates} >= {"report.html.j2", "compare.html.j2"}
    for template in templates:
        assert not re.search(r"\|\s*safe\b", template.read_text()), template.name


def test_many_proxy_errors_are_counted_per_bin():
    """Thousands of proxy errors become one shaded mesh: its series is the count per bin."""
    import datetime as dt

    import polars as pl

    from logforensics.report.series import count_bins

    start = dt.datetime(2026, 2, 24, 6, 0, tzinfo=dt.timezone.utc)
    # 10 s bins: 1 error in the first, none in the second, 4 in the third
    offsets = [1.0, 21.0, 22.0, 23.0, 29.0]
    bins, counts = count_bins(pl.Series([start + dt.timedelta(seconds=s) for s in offsets]), 10)
    assert counts.tolist() == [1.0, 0.0, 4.0]
    assert bins.step_s == 10 and len(bins.edges) == 4


def test_time_axes_of_a_two_minute_test_need_no_fallback():
    """matplotlib warns (on the user's stderr) when no tick interval fits a short test."""
    import datetime as dt
    import warnings

    import matplotlib.pyplot as plt

    from logforensics.report import charts

    lo = dt.datetime(2026, 12, 1, 14, 51, 56, tzinfo=dt.timezone.utc)
    for seconds in (20, 128, 300, 1800):
        for narrow in (True, False):
            fig, ax = plt.subplots()
            hi = lo + dt.timedelta(seconds=seconds)
            ax.set_xlim(charts.mdates.date2num(lo), charts.mdates.date2num(hi))
            charts.time_axis(ax, lo, hi, narrow=narrow)
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                fig.canvas.draw()
            plt.close(fig)


def test_analyze_and_compare_write_from_one_shape_of_renderer_table(seed_bundle):
    """`analyze` and `compare` both write their outputs from a `RENDERERS` table, one kind a
    row in the same order; each renders its own data to its own text."""
    import dataclasses
    import json

    from logforensics import compare, report
    from logforensics.report import charts
    from logforensics.report.series import ChartSeries

    assert (
        [k for k, _ in report.RENDERERS]
        == [k for k, _ in compare.RENDERERS]
        == [
            "html",
            "json",
            "md",
        ]
    )
    data = build_report(analyze([seed_bundle]))
    out = {kind: render(data) for kind, render in report.RENDERERS}
    assert out["html"].startswith("<!doctype html>")
    assert json.loads(out["json"])["verdict"]["bottleneck"] == data.summary.verdict.bottleneck
    assert out["md"].startswith("##")
    # the charts table names every series the report prepares, in page order
    assert [key for key, _ in charts.CHARTS] == [f.name for f in dataclasses.fields(ChartSeries)]
