"""Duplicate client evidence counted once, and a tester's own figures kept beside it."""

import shutil
from pathlib import Path

import polars as pl

from logforensics.analysis import analyze
from logforensics.ingest import ParseContext
from logforensics.ingest.inputs import load
from tests.conftest import FIXTURES, corpus, incident_inputs, report_json

CTX = ParseContext(year=2026)
DATA = Path(__file__).parent / "data" / "loadtesters"


def test_seed_rows_beside_their_timed_jsonl_count_once():
    inputs = load([FIXTURES / "seed-two-instances" / "client"], CTX)
    (same,) = inputs.same_run
    assert same.file.endswith("rows.txt") and same.same_as.endswith("results.jsonl")
    assert same.requests == 43
    client = inputs.tables["client_requests"]
    assert client.height == 44  # the JSONL's 43 + the warm-up row only the printout has
    rows = next(a for a in inputs.files if a.path.endswith("rows.txt"))
    assert any(n.startswith("same run, not re-counted: 43") for n in rows.notes)


def test_a_file_whose_request_ids_are_all_in_another_is_its_copy(tmp_path):
    shutil.copy(DATA / "aiperf_profile_export.jsonl", tmp_path)
    shutil.copy(DATA / "generic_same_requests.jsonl", tmp_path)
    inputs = load([tmp_path], CTX)
    assert inputs.tables["client_requests"].height == 3
    (same,) = inputs.same_run
    assert same.reason.startswith("carry only request ids found in")


def test_consoles_give_the_testers_own_figures_not_requests():
    inputs = load(
        [corpus("kv-tiny") / "client-stdout.log", corpus("kv-tiny") / "client.jsonl"], CTX
    )
    assert inputs.tables["client_requests"].height == 48  # from client.jsonl only
    figures = [(s["concurrency"], s["sent"], s["ok"], s["failed"]) for s in inputs.tester_summaries]
    assert figures == [(5, 5, 5, 0), (9, 9, 9, 0), (13, 13, 13, 0), (20, 20, 15, 5)]
    console = next(a for a in inputs.files if a.path.endswith("client-stdout.log"))
    assert console.format == "tester_console" and console.unparsed == 0
    lf = load([corpus("compute-loadtest") / "client-stdout.log"], CTX).tester_summaries
    assert [(s["step"], s["concurrency"], s["sent"], s["failed"]) for s in lf] == [
        (1, 5, 5, 0), (2, 9, 9, 0), (3, 13, 13, 13), (4, 20, 20, 20),
    ]  # fmt: skip


def measured_steps(paths: list[Path]) -> list[tuple]:
    """(concurrency, sent, ok, failed) of each measured step `analyze` finds."""
    runs = analyze(paths).runs
    return [(r.concurrency, r.sent, r.succeeded, r.failed) for r in runs if not r.warmup]


def test_the_seed_clients_printed_rows_and_its_jsonl_are_one_run():
    """corpus pyproxy-seed: the seed script's printout (stamped step headers, a warm-up row,
    per-step summary lines) beside the JSONL of the same 48 requests."""
    folder = corpus("pyproxy-seed")
    inputs = load([folder / "client-stdout.log", folder / "client.jsonl"], CTX)
    client = inputs.tables["client_requests"]
    assert client.height == 48
    (same,) = inputs.same_run
    assert same.file.endswith("client-stdout.log") and same.requests == 48
    # the JSONL decides: its rows keep the concurrency it gave them (none), the printout's
    # blocks do not fill it
    assert client["concurrency"].null_count() == 48
    assert client.filter(pl.col("outcome") == "http_503").height == 20
    printout = next(a for a in inputs.files if a.path.endswith("client-stdout.log"))
    assert printout.unparsed == 0
    assert [(s["concurrency"], s["ok"]) for s in inputs.tester_summaries] == [
        (5, 5), (9, 6), (13, 8), (20, 8),
    ]  # fmt: skip


def test_a_console_beside_the_per_request_file_never_changes_the_steps():
    """corpus standby-backup: seed_client3.py's printout ("step 2: indexes 1..2", a stamped
    warm-up row, "step 8: 5/8 OK, total 60.11s, 1.3 tok/s") beside its JSONL; the steps are
    the JSONL's alone, the printout's tallies kept as the tester's own and compared."""
    folder = corpus("standby-backup")
    logs = [p for p in incident_inputs(folder) if p.name != "client-stdout.log"]
    alone = measured_steps(logs)
    assert alone == [(2, 2, 2, 0), (4, 4, 4, 0), (6, 6, 6, 0), (8, 8, 5, 3)]
    assert measured_steps(incident_inputs(folder)) == alone
    inputs = load([folder / "client-stdout.log", folder / "client.jsonl"], CTX)
    printout = next(a for a in inputs.files if a.path.endswith("client-stdout.log"))
    assert (printout.parsed, printout.noise, printout.unparsed) == (
        21,
        9,
        0,
    )  # 20 rows and the warm-up; 4 headers, 4 tallies, "done"
    figures = [
        (s["concurrency"], s["sent"], s["ok"], s["duration_s"]) for s in inputs.tester_summaries
    ]
    assert figures == [(2, 2, 2, 16.58), (4, 4, 4, 33.24), (6, 6, 6, 50.72), (8, 8, 5, 60.11)]
    agree = [f["agree"] for f in analyze(incident_inputs(folder)).tester_figures]
    assert agree == [True, True, True, True]


def test_guidellms_side_files_are_the_same_run(tmp_path):
    folder = corpus("guidellm-kv")
    inputs = load(
        [
            folder / n
            for n in ("benchmarks.json", "benchmarks.csv", "benchmarks.html", "client-stdout.log")
        ],
        CTX,
    )
    assert inputs.tables["client_requests"].height == 60
    formats = {a.path.rsplit("/", 1)[-1]: (a.format, a.unparsed) for a in inputs.files}
    assert formats == {
        "benchmarks.json": ("guidellm_report", 0),
        "benchmarks.csv": ("guidellm_csv", 0),
        "benchmarks.html": ("guidellm_html", 0),
        "client-stdout.log": ("guidellm_console", 0),
    }
    # the report's figures once (the csv and console repeat them; the console adds the
    # warm-up run's own benchmark)
    steps = [
        (s["file"].rsplit("/", 1)[-1], s["concurrency"], s["sent"]) for s in inputs.tester_summaries
    ]
    assert steps[:4] == [("benchmarks.json", c, n) for c, n in ((2, 4), (4, 7), (8, 16), (16, 32))]
    assert steps[4:] == [("client-stdout.log", 1, 1)]


def test_llm_load_test_and_inference_perf_consoles_are_the_testers_own_figures(tmp_path):
    """recordings traefik-refuse (llm-load-test's console: 12,101 lines, 834 tracebacks, each
    run's pandas table) and vrouter-compute (inference-perf's: YAML config, printed reports,
    rich tables): every line understood, each run's own figures read, the steps the
    per-request files' with or without the console."""
    for name, fmt, figures in (
        ("traefik-refuse", "llm_load_test_console", [(2, 7, 0), (4, 12, 0), (6, 840, 834)]),
        ("vrouter-compute", "inference_perf_console", [(4, 4, 0), (8, 8, 0), (16, 16, 9)]),
    ):
        folder = corpus(name)
        inputs = load([folder / "client-stdout.log"], CTX)
        (console,) = inputs.files
        assert (console.format, console.unparsed) == (fmt, 0), name
        assert console.parsed == 3 and console.noise == console.lines - 3
        got = [(s["concurrency"], s["sent"], s["failed"]) for s in inputs.tester_summaries]
        assert got == figures, name
        without = [p for p in incident_inputs(folder) if p.name != "client-stdout.log"]
        with_console = analyze(incident_inputs(folder))
        assert measured_steps(without) == [
            (r.concurrency, r.sent, r.succeeded, r.failed)
            for r in with_console.runs
            if not r.warmup
        ]
        assert [f["agree"] for f in with_console.tester_figures] == [True, True, True]


def test_a_console_that_disagrees_is_named_and_an_odd_line_in_it_is_shown(tmp_path):
    """llm-load-test's console edited: run 2 claims 11 of 12 failed, and a line that is no
    part of a traceback follows one: the figure disagrees with the per-request file and the
    line is unparsed, not swallowed by the traceback before it."""
    folder = corpus("traefik-refuse")
    into = tmp_path / "t"
    shutil.copytree(folder, into)
    console = into / "client-stdout.log"
    text = console.read_text().replace(
        "Error count: 0 of 12 total requests", "Error count: 11 of 12 total requests"
    )
    anchor = "Too Many Requests for url: http://127.0.0.1:8000/v1/chat/completions\n"
    at = text.index(anchor) + len(anchor)
    console.write_text(text[:at] + "upstream said: slot 7 of 4 busy\n" + text[at:])
    analysis = analyze(incident_inputs(into))
    disagree = [f for f in analysis.tester_figures if f["agree"] is False]
    assert [(f["concurrency"], f["theirs"]["failed"], f["ours"]["failed"]) for f in disagree] == [
        (4, 11, 0)
    ]
    account = next(a for a in analysis.inputs if a.path.endswith("client-stdout.log"))
    assert account.unparsed == 1
    assert [text for _, text in account.unparsed_examples] == ["upstream said: slot 7 of 4 busy"]
    assert any(f["kind"] == "tester_figures_differ" for f in report_json(analysis)["findings"])
