"""The hop ledger and the cited lines' text: what each witness saw of each request, with its lines.

Inputs: `tests/data/incidents/nginx-client-timeouts` (real vLLM, nginx and
`logforensics loadtest` output: 13 client timeouts that nginx logged as 499 and
the engines as received, then aborted), and the corpus of real recordings where
it is present.
"""

from __future__ import annotations

import csv
import gzip
import json
import re

import polars as pl
import pytest
from click.testing import CliRunner

from logforensics import model
from logforensics.analysis import analyze
from logforensics.cli import cli
from logforensics.report import build_report, jsonout, render_html, render_markdown
from logforensics.report import lines as cited
from logforensics.report.data import LEDGER_ALL_ROWS, LEDGER_JSON_ROWS
from logforensics.report.ledger import NOT_OK, build_ledger
from tests.conftest import DATA, corpus_incidents, incident_inputs, write

TIMEOUTS = DATA / "incidents" / "nginx-client-timeouts"


def timeout_inputs():
    return [p for p in incident_inputs(TIMEOUTS) if p.suffix != ".md"]


@pytest.fixture(scope="module")
def timeouts():
    return analyze(timeout_inputs())


# ------------------------------------------------------------------ cited lines


def test_cited_lines_are_read_once_per_file_gz_too_and_cut(tmp_path, monkeypatch):
    plain = write(tmp_path / "a.log", "one\ntwo\n" + "x" * 1000 + "\nfour\n")
    packed = tmp_path / "b.log.gz"
    packed.write_bytes(gzip.compress(b"alpha\r\nbeta\r\n"))
    reads = []

    class Counting(cited.SourceFile):
        def pick_lines(self, numbers):
            reads.append(self.display)
            return super().pick_lines(numbers)

    monkeypatch.setattr(cited, "SourceFile", Counting)
    sources = [
        f"{plain}:2",
        f"{plain}:3",
        f"{packed}:2",
        f"{plain}:4",
        f"{plain}:9",
        "r.json:record 4",
    ]
    got = cited.read_cited_lines(sources, {str(plain), str(packed)})
    assert sorted(reads) == [str(plain), str(packed)]  # each file once
    assert got[f"{plain}:2"].text == "two" and got[f"{plain}:4"].line == 4
    assert got[f"{packed}:2"].text == "beta"  # gzip undone, CR stripped
    assert (
        got[f"{plain}:3"].text
        == "x" * cited.MAX_LINE_CHARS + f" … (+{1000 - cited.MAX_LINE_CHARS:,} characters)"
    )
    assert f"{plain}:9" not in got and "r.json:record 4" not in got  # past the end; not a line


def test_picked_lines_are_numbered_as_the_parsers_number_them(tmp_path):
    raw = b"a\r\n\n\xff\xfe bad bytes\nlast without newline"
    for name, data in (("p.log", raw), ("p.log.gz", gzip.compress(raw))):
        path = tmp_path / name
        path.write_bytes(data)
        whole = dict(cited.SourceFile(path, str(path), "").lines.iter_rows())
        picked = cited.SourceFile(path, str(path), "").pick_lines({1, 2, 3, 4})
        assert picked == whole and picked[1] == "a" and picked[2] == ""


def test_cited_lines_only_from_inputs_and_redacted_before_the_cut(tmp_path):
    secret = write(tmp_path / "s.log", "x" * (cited.MAX_LINE_CHARS - 4) + " 10.9.8.7 tail\n")
    other = write(tmp_path / "other.log", "not an input\n")
    got = cited.read_cited_lines(
        [f"{secret}:1", f"{other}:1", f"{tmp_path / 'gone.log'}:1"],
        {str(secret), str(tmp_path / "gone.log")},
        lambda text: text.replace("10.9.8.7", "host-1"),
    )
    assert list(got) == [f"{secret}:1"]  # the other file is not an input; the gone one is gone
    assert "10.9" not in got[f"{secret}:1"].text and "host-1"[:2] in got[f"{secret}:1"].text


# ------------------------------------------------------------------ the ledger


def test_each_failed_request_has_its_client_proxy_and_engine_hops(timeouts):
    ledger = build_ledger(timeouts)
    assert ledger.height == timeouts.requests.height  # one row per request, warm-up included
    failed = build_ledger(timeouts, NOT_OK)
    assert failed.height == 13
    assert failed["client_source"].is_not_null().all()
    assert failed["proxy_source"].is_not_null().all() and (failed["proxy_status"] == 499).all()
    assert (failed["proxy_delivery"] == "reached").all()
    assert failed["instance_source"].is_not_null().all()
    assert (failed["engine_sources"].list.len() >= 2).all()
    assert set(failed["engine_events"]) == {"received, aborted"}
    assert (failed["reach"] == "reached").all() and (failed["failed_at"] == "instance").all()
    assert set(failed["reached_instance"]) == {"instance-1", "instance-2"}
    assert failed["reach_witness"].is_not_null().all()
    ok = ledger.filter(pl.col("client_ok"))
    assert ok["failed_at"].is_null().all() and (ok["client_outcome"] == "ok").all()


def test_the_analysis_keeps_of_the_proxy_table_what_the_ledger_cites(timeouts):
    """Past the correlation the proxy table holds only `READ_AFTER_CORRELATION`'s columns;
    the ledger's proxy times still come from it (its peers, upstreams and deliveries are
    the requests' own columns by then)."""
    kept = model.READ_AFTER_CORRELATION["proxy_requests"]
    assert timeouts.tables["proxy_requests"].columns == list(kept)
    assert set(kept) < set(model.PROXY_REQUESTS)
    failed = build_ledger(timeouts, NOT_OK)
    assert failed["proxy_at"].is_not_null().all()
    assert (failed["proxy_request_time_s"] > 0).all()


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def test_ledger_parquet_round_trips(tmp_path, timeouts):
    out = tmp_path / "out.parquet"
    result = run("analyze", *timeout_inputs(), "--ledger", out)
    assert result.exit_code == 0, result.output
    back = pl.read_parquet(out)
    assert back.height == timeouts.requests.height
    for witness in ("client", "proxy", "instance"):
        assert f"{witness}_source" in back.columns
    failed = back.filter(~pl.col("client_ok") & ~pl.col("warmup"))
    assert failed["proxy_source"].str.contains(r"nginx-access\.log:\d+$").all()
    assert failed["instance_source"].str.contains(r"instance-[12]\.log:\d+$").all()
    assert back.schema["engine_sources"] == pl.List(pl.Utf8)
    assert (
        failed["engine_sources"]
        .list.eval(pl.element().str.contains(r"\.log:\d+$"))
        .list.all()
        .all()
    )
    assert back.schema["client_sent_at"] == pl.Datetime("us", "UTC")


def test_ledger_csv_is_flat_for_a_spreadsheet(tmp_path, timeouts):
    out = tmp_path / "out.csv"
    assert run("analyze", *timeout_inputs(), "--ledger", out).exit_code == 0
    with out.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == timeouts.requests.height
    back = pl.read_csv(out)
    assert not any(isinstance(t, pl.List | pl.Struct | pl.Array) for t in back.dtypes)
    failed = [r for r in rows if r["client_ok"] == "false"]
    assert all(re.fullmatch(r"\S+\.log:\d+(; \S+\.log:\d+)+", r["engine_sources"]) for r in failed)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", failed[0]["client_sent_at"])


def test_ledger_beside_the_reports_is_built_once_and_named_in_them(tmp_path):
    ledger, js, html = tmp_path / "l.parquet", tmp_path / "r.json", tmp_path / "r.html"
    result = run("analyze", *timeout_inputs(), "--ledger", ledger, "--json", js, "-o", html)
    assert result.exit_code == 0, result.output
    contract = json.loads(js.read_text())
    assert contract["ledger"]["file"] == str(ledger) and contract["ledger"]["total"] == 13
    assert f"Every request's ledger: <code>{ledger}</code>" in html.read_text()
    assert pl.read_parquet(ledger).height == 28


def test_ledger_jsonl_and_a_bad_extension(tmp_path, timeouts):
    out = tmp_path / "out.jsonl"
    assert run("analyze", *timeout_inputs(), "--ledger", out).exit_code == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == timeouts.requests.height
    assert isinstance(records[0]["engine_sources"], list)
    result = CliRunner().invoke(
        cli, ["analyze", str(TIMEOUTS), "--ledger", str(tmp_path / "x.txt")]
    )
    assert result.exit_code == 2 and "--ledger" in result.output


# ------------------------------------------------------------------ the report data


def test_the_report_data_is_built_once_for_all_three(timeouts):
    report = build_report(timeouts, ledger_path="out.parquet")
    contract = jsonout.contract(report.summary)
    assert contract["format_version"] >= 4
    assert contract["ledger"]["total"] == 13 and len(contract["ledger"]["rows"]) == 13
    assert contract["ledger"]["outcome_unknown"] == 0
    assert contract["ledger"]["file"] == "out.parquet"
    row = contract["ledger"]["rows"][0]
    assert row["proxy_source"].endswith(tuple(f"nginx-access.log:{n}" for n in range(1, 40)))
    assert row["client_sent_at"].endswith("Z")
    assert report.failed.total == 13 and len(report.failed.rows) == 13
    hops = [h.witness for h in report.failed.rows[0].hops]
    assert hops == ["client", "proxy", "instance", "conclusion"]
    proxy, engine = report.failed.rows[0].hops[1], report.failed.rows[0].hops[2]
    assert proxy.lines[0].text.startswith("127.0.0.1 - - [01/Dec/2026:13:07:02 +0000]")
    assert any("Received request chatcmpl-" in q.text for q in engine.lines)
    assert any("aborted" in q.text.lower() for q in engine.lines)
    # rendering twice from one build gives the same page (nothing recomputed from the frames)
    assert render_html(report) == render_html(report)
    assert render_markdown(report).startswith("### ")


def test_evidence_quotes_the_lines_it_cites(timeouts):
    report = build_report(timeouts)
    quoted = [e for e in report.evidence if e.lines]
    assert quoted
    for item in quoted:
        assert len(item.lines) <= 3
        for q in item.lines:
            file, _, number = q.source.rpartition(":")
            path = next(p for p in timeout_inputs() if p.name == file)
            assert path.read_text().splitlines()[int(number) - 1].startswith(q.text[:60])
    json_items = jsonout.contract(report.summary)["verdict"]["evidence"]
    assert all("lines" in e and "more_lines" in e for e in json_items)


def test_a_finding_that_cites_lines_quotes_them(timeouts):
    import dataclasses

    from logforensics.diagnose import Finding

    client = next(p for p in timeout_inputs() if p.name == "client.jsonl")

    finding = Finding(
        "health_check_gap", "kept sending", sources=[f"{client}:{n}" for n in (2, 3, 4, 5)]
    )
    report = build_report(dataclasses.replace(timeouts, findings=[finding]))
    (item,) = report.findings
    assert [q.source for q in item.lines] == ["client.jsonl:2", "client.jsonl:3", "client.jsonl:4"]
    written = jsonout.contract(report.summary)["findings"][0]
    assert item.more_lines == 1 and written["lines"][0]["text"].startswith("{")
    assert len(written["sources"]) == 4
    assert "client.jsonl:2</span>" in render_html(report)


def test_the_json_ledger_is_capped_with_its_total(tmp_path):
    from tests.test_report import big_bundle

    analysis = analyze([big_bundle(tmp_path / "big", 3_000)])
    report = build_report(analysis)
    failed = analysis.totals()["failed"]
    assert failed > LEDGER_ALL_ROWS
    assert report.summary.ledger["total"] == failed
    assert len(report.summary.ledger["rows"]) == LEDGER_JSON_ROWS
    assert report.failed.groups and not report.failed.rows


CORPUS = corpus_incidents()


@pytest.mark.parametrize(
    "folder",
    CORPUS
    or [
        pytest.param(
            None,
            marks=pytest.mark.skip(
                reason="no corpus of real recordings beside this checkout (../shared/corpus, "
                "or set LOGFORENSICS_CORPUS): the report was not checked on real incidents"
            ),
        )
    ],
    ids=[f.name for f in CORPUS] or ["no-corpus"],
)
def test_every_failed_request_of_a_real_incident_shows_its_hops(folder):
    analysis = analyze(incident_inputs(folder))
    totals = analysis.totals()
    failed = totals["failed"] + totals["outcome_unknown"]
    report = build_report(analysis)
    html = render_html(report)
    section = html[html.index('id="failed"') : html.index('id="instances"')]
    rows = re.findall(r'<details class="req".*?</details>', section, re.S)
    assert len(rows) == failed if failed <= LEDGER_ALL_ROWS else len(rows) < failed
    witnesses = ["client", "conclusion"]
    witnesses += ["proxy"] if report.failed.has_proxy else []
    witnesses += ["instance"] if report.failed.has_instances else []
    for row in rows:
        for hop in witnesses:
            assert f'<li class="hop {hop}">' in row, (folder.name, hop)
        assert 'class="at">' in row or 'class="src">' in row  # a quoted line, or its source
