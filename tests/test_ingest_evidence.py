"""Duplicate client evidence counted once, and a tester's own figures kept beside it."""

import shutil
from pathlib import Path

from logforensics.ingest import ParseContext
from logforensics.ingest.inputs import load
from tests.conftest import FIXTURES, corpus

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
