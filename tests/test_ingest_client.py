"""Client result files: the seed script's rows and the generic JSONL/CSV form."""

import datetime as dt
import json

import polars as pl
import pytest

from logforensics.ingest import FILE_FORMATS, ParseContext, SourceFile, detect
from logforensics.model import source_labels as labels

UTC = dt.timezone.utc


DEFAULT_CTX = ParseContext(year=2026)


def parse(path, ctx=DEFAULT_CTX):
    source = SourceFile(path, path.name, path.stem)
    fmt = detect(source)
    assert fmt is not None, f"{path.name} not recognised"
    return fmt, fmt.parse(source, ctx)


SEED_ROWS = """\
# N=3
(1, 3.57, 300, 'OK')
(2, 120.31, 0, 'HTTP Error 503: Service Unavailable')
(3, 3.61, 300, 'OK')
total 120.33s

(1, 3.44, 300, 'OK')
(2, 300.0, 0, "<urlopen error timed out>")
"""


def test_seed_rows_split_into_steps_where_numbering_restarts(tmp_path):
    path = tmp_path / "rows.txt"
    path.write_text(SEED_ROWS)
    fmt, result = parse(path)
    assert fmt is FILE_FORMATS["seed_rows"]
    rows = result.table("client_requests")
    assert rows["step"].to_list() == [1, 1, 1, 2, 2]
    assert rows["index"].to_list() == [1, 2, 3, 1, 2]
    assert rows["ok"].to_list() == [True, False, True, True, False]
    assert rows["http_status"].to_list() == [None, 503, None, None, None]
    assert rows["error"][1] == "HTTP Error 503: Service Unavailable"
    assert rows["error"][4] == "<urlopen error timed out>"
    assert rows["latency_s"][1] == 120.31
    assert rows["started_at"].null_count() == 5  # this format has no absolute time
    assert (result.parsed, result.noise, result.unparsed) == (5, 3, 0)


def test_seed_rows_printed_as_one_list(tmp_path):
    path = tmp_path / "rows.txt"
    path.write_text(
        "[(1, 3.52, 300, 'OK'), (2, 3.55, 300, 'OK'), (3, 120.2, 0, 'HTTP Error 503: Service Unavailable')]\n"
    )
    _, result = parse(path)
    assert result.table("client_requests")["index"].to_list() == [1, 2, 3]


def records():
    start = dt.datetime(2026, 2, 24, 6, 16, 2, 214000, tzinfo=UTC)
    return [
        {
            "request_id": "r1",
            "step": 1,
            "index": 1,
            "start": start,
            "latency": 3.5,
            "status_code": 200,
            "error": None,
            "completion_tokens": 300,
            "marker": "(1)",
        },
        {
            "request_id": "r2",
            "step": 1,
            "index": 2,
            "start": start,
            "latency": 120.2,
            "status_code": 503,
            "error": "HTTP Error 503: Service Unavailable",
            "completion_tokens": 0,
            "marker": "(2)",
        },
    ]


def test_generic_jsonl_with_common_spellings_and_epoch_times(tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_text(
        "".join(json.dumps({**r, "start": r["start"].timestamp()}) + "\n" for r in records())
    )
    fmt, result = parse(path)
    assert fmt is FILE_FORMATS["client_jsonl"]
    rows = result.table("client_requests")
    assert rows["ok"].to_list() == [True, False]
    assert rows["started_at"][0] == dt.datetime(2026, 2, 24, 6, 16, 2, 214000, tzinfo=UTC)
    assert rows["ended_at"][1] == dt.datetime(2026, 2, 24, 6, 18, 2, 414000, tzinfo=UTC)
    assert rows["output_tokens"].to_list() == [300, 0]
    assert rows["request_id"].to_list() == ["r1", "r2"]


def test_same_requests_as_jsonl_and_csv_give_the_same_rows(tmp_path):
    jsonl = tmp_path / "run.jsonl"
    jsonl.write_text(
        "".join(json.dumps({**r, "start": r["start"].isoformat()}) + "\n" for r in records())
    )
    csv = tmp_path / "run.csv"
    pl.DataFrame([{**r, "start": r["start"].isoformat()} for r in records()]).write_csv(csv)
    _, a = parse(jsonl)
    fmt, b = parse(csv)
    assert fmt is FILE_FORMATS["client_csv"]
    cols = [c for c in a.table("client_requests").columns if c not in ("run", "source")]
    assert a.table("client_requests").select(cols).equals(b.table("client_requests").select(cols))


def test_naive_client_times_take_the_client_zone(tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_text(
        json.dumps({"started_at": "2026-02-24T15:16:02", "latency_s": 1.0, "ok": True}) + "\n"
    )
    _, result = parse(path, ParseContext(year=2026, client_tz="Asia/Seoul"))
    assert result.table("client_requests")["started_at"][0] == dt.datetime(
        2026, 2, 24, 6, 16, 2, tzinfo=UTC
    )


def test_truncated_and_garbage_jsonl_lines_are_counted_not_dropped(tmp_path):
    path = tmp_path / "run.jsonl"
    good = json.dumps({"started_at": "2026-02-24T06:16:02Z", "latency_s": 1.0, "ok": True})
    path.write_text(
        good
        + "\n"
        + good
        + '\nnot json at all\n{"started_at": "2026-02-24T06:16:0\n'
        + good[:-1]
        + ', "x": }\n'
    )
    _, result = parse(path)
    assert result.parsed == 2
    assert result.unparsed == 3
    assert [n for n, _ in result.unparsed_examples] == [3, 4, 5]


@pytest.mark.parametrize("status, ok", [("ok", True), ("error", False), ("timeout", False)])
def test_status_words_decide_success(tmp_path, status, ok):
    path = tmp_path / "run.jsonl"
    path.write_text(
        json.dumps({"start_time": "2026-02-24T06:16:02Z", "latency_ms": 1500, "status": status})
        + "\n"
    )
    rows = parse(path)[1].table("client_requests")
    assert rows["ok"].to_list() == [ok]
    assert rows["latency_s"].to_list() == [1.5]


def test_each_file_says_how_its_times_were_read(tmp_path):
    naive = tmp_path / "naive.jsonl"
    naive.write_text(
        json.dumps({"started_at": "2026-02-24T15:16:02", "latency_s": 1.0, "ok": True}) + "\n"
    )
    zoned = tmp_path / "zoned.jsonl"
    zoned.write_text(
        json.dumps({"started_at": "2026-02-24T06:16:02Z", "latency_s": 1.0, "ok": True}) + "\n"
    )
    assert parse(naive, ParseContext(year=2026, client_tz="Asia/Seoul"))[1].notes == [
        "1 naive time(s) in 'started_at' read in Asia/Seoul (set --client-tz if the client ran elsewhere)"
    ]
    assert parse(zoned)[1].notes == ["absolute times with zone offsets in 'started_at'"]


def test_clean_jsonl_read_in_one_pass_equals_the_line_by_line_reading(tmp_path):
    """A blank line sends the file down the line-by-line path; the rows must not change."""
    lines = [
        json.dumps(
            {
                "request_id": f"r{i}",
                "started_at": f"2026-02-24T06:16:{i:02d}.5Z",
                "latency_s": 1.0 + i,
                "ok": i % 3 != 0,
                "error": None if i % 3 else "HTTP Error 502: Bad Gateway",
            }
        )
        for i in range(40)
    ]
    clean = tmp_path / "clean.jsonl"
    clean.write_text("\n".join(lines) + "\n")
    with_blank = tmp_path / "with_blank.jsonl"
    with_blank.write_text("\n".join(lines[:20]) + "\n\n" + "\n".join(lines[20:]) + "\n")
    _, fast = parse(clean)
    _, slow = parse(with_blank)
    assert (fast.lines, fast.parsed, fast.noise) == (40, 40, 0)
    assert (slow.lines, slow.parsed, slow.noise) == (41, 40, 1)
    a, b = fast.table("client_requests"), slow.table("client_requests")
    assert a.drop("run", "source").equals(b.drop("run", "source"))
    assert labels(a["source"])[25] == "clean.jsonl:26"
    assert labels(b["source"])[25] == "with_blank.jsonl:27"
    assert a.filter(~pl.col("ok"))["error"].to_list() == ["HTTP Error 502: Bad Gateway"] * 14


def test_a_field_whose_type_changes_late_is_still_read(tmp_path):
    """Type inference covers every line, not a head sample: a late float or text survives."""
    rows = [{"started_at": "2026-02-24T06:16:02Z", "latency_s": 1, "ok": True}] * 300
    rows += [{"started_at": "2026-02-24T06:17:02Z", "latency_s": 2.5, "ok": "no", "error": "x"}]
    path = tmp_path / "late.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = parse(path)[1]
    table = result.table("client_requests")
    assert result.parsed == 301
    assert table["latency_s"][-1] == 2.5
    assert table["error"][-1] == "x"
    assert table["ok"].to_list() == [True] * 300 + [False]


def _big_jsonl(path, change=None, lines=40_000):
    """~5 MB of JSON lines: the schema sample (start, middle, end) misses lines 12000-12009."""
    rows = []
    for i in range(lines):
        row = {
            "request_id": f"r{i}",
            "started_at": f"2026-02-24T06:{i // 1000 % 60:02d}:{i % 60:02d}.25Z",
            "latency_s": 1,
            "ok": True,
            "marker": None,
        }
        if change and 12_000 <= i < 12_010:
            row = change(row)
        rows.append(json.dumps(row))
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda r: {**r, "ok": False, "error": "HTTP Error 502"}, id="key-only-later"),
        pytest.param(lambda r: {**r, "marker": "(7)"}, id="null-in-sample-set-later"),
        pytest.param(lambda r: {**r, "latency_s": 2.5}, id="type-widens-later"),
    ],
)
@pytest.mark.parametrize("batched", [False, True], ids=["whole", "batches"])
def test_what_the_schema_sample_misses_is_still_read(tmp_path, monkeypatch, change, batched):
    """The fast read takes its schema from a sample; whatever the sample cannot see must
    come out exactly as reading every line with full inference gives it, in batches too."""
    from logforensics.ingest.testers import generic
    from logforensics.ingest.testers.generic import normalise_generic

    if batched:
        monkeypatch.setattr(generic, "BATCHED_ABOVE", 0)
        monkeypatch.setattr(generic, "BATCH_BYTES", 100_000)
    path = _big_jsonl(tmp_path / "big.jsonl", change)
    rows = parse(path)[1].table("client_requests")
    full = pl.read_ndjson(path, infer_schema_length=None).with_row_index("line_no", offset=1)
    expected = normalise_generic(
        full.with_columns(pl.col("line_no").cast(pl.Int64)), "big.jsonl", "UTC"
    )
    assert rows.height == 40_000
    assert rows.drop("run", "source").equals(expected.drop("run", "source"))
    changed = rows.slice(12_000, 10)
    assert (
        changed.select("ok", "error", "marker", "latency_s").rows()
        != rows.slice(0, 10).select("ok", "error", "marker", "latency_s").rows()
    )


def _with_naive_times(path, every):
    """`path` rewritten with every `every`-th record's start time naive (no zone)."""
    lines = path.read_text().splitlines()
    for i in range(0, len(lines), every):
        lines[i] = lines[i].replace('.25Z"', '.25"')
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("size", [100_000, 1_000_000])
def test_a_big_file_read_in_batches_is_the_file_read_whole(tmp_path, monkeypatch, size):
    """Batches decoded and normalised one by one give the whole read's rows, line numbers,
    counts and notes (the naive times counted over all batches, not the last one's)."""
    from logforensics.ingest.testers import generic

    path = _with_naive_times(_big_jsonl(tmp_path / "big.jsonl"), every=7)
    whole = parse(path)[1]
    monkeypatch.setattr(generic, "BATCHED_ABOVE", 0)
    monkeypatch.setattr(generic, "BATCH_BYTES", size)
    read = {}
    real = generic.normalise_generic

    def counted(frame, *args):
        read[frame["line_no"][0]] = frame.height
        return real(frame, *args)

    monkeypatch.setattr(generic, "normalise_generic", counted)
    batched = parse(path)[1]
    assert len(read) == -(-path.stat().st_size // size)  # it did read in batches
    assert batched.table("client_requests").equals(whole.table("client_requests"))
    assert (batched.lines, batched.parsed, batched.noise) == (40_000, 40_000, 0)
    assert (whole.lines, whole.parsed, whole.noise) == (40_000, 40_000, 0)
    assert batched.notes == whole.notes
    assert any("5715 naive time(s) in 'started_at'" in n for n in batched.notes)


def test_a_blank_line_in_a_big_file_is_found_as_in_a_whole_read(tmp_path, monkeypatch):
    """A batch that does not decode line for line sends the file back to the line-by-line
    read, which counts the blank line and reads every record."""
    from logforensics.ingest.testers import generic

    path = _big_jsonl(tmp_path / "big.jsonl")
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:25_000] + [""] + lines[25_000:]) + "\n")
    whole = parse(path)[1]
    monkeypatch.setattr(generic, "BATCHED_ABOVE", 0)
    monkeypatch.setattr(generic, "BATCH_BYTES", 100_000)
    batched = parse(path)[1]
    assert (batched.lines, batched.parsed, batched.noise) == (40_001, 40_000, 1)
    assert batched.table("client_requests").equals(whole.table("client_requests"))
    assert batched.table("client_requests")["request_id"][25_000] == "r25000"


@pytest.mark.parametrize("final_newline", [True, False])
def test_a_batched_read_learns_the_byte_facts_a_separate_pass_would(
    tmp_path, monkeypatch, final_newline
):
    """The batches say what `stream_facts` says of the whole file (a CR deep inside a
    record's text, the last line's newline), without reading the file a second time."""
    from logforensics.ingest.testers import generic

    path = _big_jsonl(tmp_path / "big.jsonl")
    lines = path.read_text().splitlines()
    lines[30_000] = lines[30_000].replace('"marker": null', '"marker": "a\\rb"')
    assert "\\r" in lines[30_000]
    path.write_bytes(("\n".join(lines) + ("\n" if final_newline else "")).encode())
    monkeypatch.setattr(generic, "BATCHED_ABOVE", 0)
    monkeypatch.setattr(generic, "BATCH_BYTES", 100_000)
    source = SourceFile(path, path.name, path.stem)
    result = generic.ClientJsonl().parse(source, DEFAULT_CTX)
    count, expected = SourceFile(path, path.name, path.stem).stream_facts()
    assert (result.lines, result.parsed) == (count, count) == (40_000, 40_000)
    assert source.facts == {**expected, "undecodable": False}
    assert source.facts["final_newline"] is final_newline


def test_a_big_file_with_crlf_ends_is_not_read_in_batches(tmp_path, monkeypatch):
    """What the first batch shows of the file's start (CRLF ends) sends it to the whole read,
    as the facts of a separate pass did."""
    from logforensics.ingest.testers import generic

    path = _big_jsonl(tmp_path / "big.jsonl")
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    monkeypatch.setattr(generic, "BATCHED_ABOVE", 0)
    monkeypatch.setattr(generic, "BATCH_BYTES", 100_000)
    normalised = []
    real = generic.normalise_generic

    def counted(frame, *args):
        normalised.append(frame.height)
        return real(frame, *args)

    monkeypatch.setattr(generic, "normalise_generic", counted)
    result = generic.ClientJsonl().parse(SourceFile(path, path.name, path.stem), DEFAULT_CTX)
    assert normalised == [40_000]  # in one piece, not batch by batch
    assert (result.lines, result.parsed, result.unparsed) == (40_000, 40_000, 0)
