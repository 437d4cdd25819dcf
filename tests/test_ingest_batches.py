"""A big log read in batches gives exactly what a whole read gives, or is read whole.

`serverlog.parse_in_batches` is checked against the whole read on every real server and
proxy log this checkout holds (the recordings, the shared corpus where present, the
fixtures), with batch sizes that put the boundaries everywhere, and on the cases where a
batch cannot know enough (it must then say so, and `parse_lines` read the file whole).
"""

from __future__ import annotations

import datetime as dt
import gzip
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from logforensics.ingest import ParseContext, SourceFile, serverlog
from tests.conftest import held_as_one_value, real_line_logs, write

CTX = ParseContext(year=2026)
ACCOUNT = (
    "lines",
    "parsed",
    "noise",
    "unparsed_examples",
    "unparsed_shapes",
    "notes",
    "formats",
    "span",
    "instance_spans",
    "addresses",
)


LINE_LOGS = real_line_logs()


def _whole(path: Path, role: str, instance: str = "x"):
    return serverlog.parse_lines(SourceFile(path, path.name, instance), CTX, role)


def _batched(path: Path, role: str, instance: str = "x"):
    return serverlog.parse_in_batches(SourceFile(path, path.name, instance), CTX, role)


def assert_same_result(got, want) -> None:
    for name in ACCOUNT:
        assert getattr(got, name) == getattr(want, name), name
    assert set(got.tables) == set(want.tables)
    for name in want.tables:
        assert_frame_equal(got.table(name), want.table(name))


@pytest.fixture
def small_batches(monkeypatch):
    """Batches of `size` bytes, past every format asleep in a batch (none set aside)."""

    def use(size: int) -> None:
        monkeypatch.setattr(serverlog, "BATCH_BYTES", size)
        monkeypatch.setattr(serverlog, "SET_ASIDE_LINES", 0)

    return use


def test_the_checkout_holds_real_logs_to_compare():
    roles = {role for _, role in LINE_LOGS}
    assert len(LINE_LOGS) >= 40 and roles == {"server", "proxy"}


@pytest.mark.parametrize(("path", "role"), LINE_LOGS, ids=lambda v: str(v)[-60:])
def test_batches_give_the_whole_read_on_real_logs(path, role, small_batches):
    small_batches(max(256, path.stat().st_size // 7))
    got = _batched(path, role)
    if got is not None:  # else it is read whole (the cases below)
        assert_same_result(got, _whole(path, role))


def test_most_real_logs_are_read_in_batches(monkeypatch):
    # as `parse_lines` reads them: the few lines no format took by a sleeping format that
    # looks across lines are set aside, so its waking late does not undo the batches
    refused = []
    for path, role in LINE_LOGS:
        monkeypatch.setattr(serverlog, "BATCH_BYTES", max(256, path.stat().st_size // 3))
        got = _batched(path, role)
        if got is None:
            refused.append(path.name)
        else:
            assert_same_result(got, _whole(path, role))
    assert len(refused) <= 0.1 * len(LINE_LOGS), refused


VLLM_LINES = [
    "2026-02-24T05:59:00.5Z (APIServer pid=1) INFO 02-24 05:59:00 [utils.py:326] non-default "
    "args: {'model': 'google/gemma-4-e4b-it', 'port': 8000}",
    '2026-02-24T06:00:00.014768597Z INFO:     10.0.1.5:41234 - "POST /v1/chat/completions '
    'HTTP/1.1" 200 OK',
    "2026-02-24T06:00:01.5Z (APIServer pid=1) INFO 02-24 06:00:01 [loggers.py:123] Engine 000: "
    "Avg prompt throughput: 120.0 tokens/s, Avg generation throughput: 35.2 tokens/s, Running: "
    "4 reqs, Waiting: 0 reqs, GPU KV cache usage: 12.5%, Prefix cache hit rate: 0.0%",
]


def _vllm_log(tmp_path: Path, middle: list[str], name: str = "vllm.log") -> Path:
    return write(tmp_path / name, "\n".join([VLLM_LINES[0], *middle]) + "\n")


def test_unstamped_lines_across_a_boundary_keep_their_neighbours_times(tmp_path, small_batches):
    # a multi-line message: its continuation lines carry no stamp of their own
    middle = []
    for i in range(40):
        middle += [VLLM_LINES[1], VLLM_LINES[2], f"  continuation {i} of a message", "", "  more"]
    path = _vllm_log(tmp_path, middle)
    want = _whole(path, "server")
    for size in (200, 333, 1000):
        small_batches(size)
        got = _batched(path, "server")
        assert got is not None
        assert_same_result(got, want)


def test_lines_before_the_first_stamp_are_read_whole(tmp_path, small_batches, monkeypatch):
    # they take the first stamp's time, which a batch before it cannot know
    path = write(
        tmp_path / "late.log", "".join(f"no stamp {i}\n" for i in range(50)) + VLLM_LINES[1] + "\n"
    )
    whole = _whole(path, "server")
    small_batches(200)
    assert _batched(path, "server") is None
    monkeypatch.setattr(serverlog, "BATCHED_ABOVE", 0)  # parse_lines tries batches first
    assert_same_result(serverlog.parse_lines(SourceFile(path, path.name, "x"), CTX), whole)
    assert whole.table("server_requests").height == 1 and whole.unparsed == 50


def _new_year_log(tmp_path: Path) -> Path:
    """V0 stats lines (yearless stamps) from 23:59:00 on 31 December to 00:00:29 on 1 January."""
    stamp = "INFO {} [loggers.py:123] Avg prompt throughput: 1.0 tokens/s, Avg generation "
    stamp += "throughput: 1.0 tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, "
    stamp += "GPU KV cache usage: 1.0%, CPU KV cache usage: 0.0%."
    lines = [stamp.format(f"12-31 23:59:{s:02d}") for s in range(30)]
    lines += [stamp.format(f"01-01 00:00:{s:02d}") for s in range(30)]
    return write(tmp_path / "newyear.log", "\n".join(lines) + "\n")


def test_a_yearless_log_over_new_year_is_read_whole(tmp_path, small_batches, monkeypatch):
    path = _new_year_log(tmp_path)
    small_batches(1000)
    assert _batched(path, "server") is None
    monkeypatch.setattr(serverlog, "BATCHED_ABOVE", 0)
    got = serverlog.parse_lines(SourceFile(path, path.name, "x"), CTX)
    stats = got.table("engine_stats")
    assert stats.height == 60
    assert stats["at"].is_sorted() and stats["at"][-1].year == 2027


def test_a_format_waking_in_a_later_batch_makes_the_file_read_whole(
    tmp_path, small_batches, monkeypatch
):
    # the seed's relaying proxy: access lines, then a traceback (python_traceback, which looks
    # across lines, sleeps through the first batches and wakes in the last)
    access = '127.0.0.1 - - [24/Feb/2026 06:00:{:02d}] "POST /v1/chat/completions HTTP/1.1" 200 -'
    trace = [
        "Traceback (most recent call last):",
        '  File "/tmp/pyproxy/proxy.py", line 19, in _forward',
        '    self.send_error(502, f"Bad Gateway: {exc}")',
        "BrokenPipeError: [Errno 32] Broken pipe",
    ]
    lines = [access.format(s % 60) for s in range(120)] + trace
    path = write(tmp_path / "proxy.log", "\n".join(lines) + "\n")
    small_batches(2000)
    assert _batched(path, "proxy") is None
    monkeypatch.setattr(serverlog, "BATCHED_ABOVE", 0)
    got = serverlog.parse_lines(SourceFile(path, path.name, "proxy"), CTX, "proxy")
    monkeypatch.setattr(serverlog, "BATCHED_ABOVE", 1 << 40)
    assert_same_result(
        got, serverlog.parse_lines(SourceFile(path, path.name, "proxy"), CTX, "proxy")
    )
    assert got.table("proxy_events").height == 1 and got.table("proxy_requests").height == 120


@pytest.mark.parametrize("kind", ["crlf", "not_utf8", "unit_separator", "gzip", "no_final_newline"])
def test_ugly_bytes_read_in_batches_as_whole(tmp_path, small_batches, kind):
    middle = [VLLM_LINES[1], VLLM_LINES[2]] * 30
    text = "\n".join([VLLM_LINES[0], *middle]) + "\n"
    data = text.encode()
    if kind == "crlf":
        data = data.replace(b"\n", b"\r\n")
    elif kind == "not_utf8":
        data = data.replace(b"200 OK", b"200 \xff\xfeOK", 3)
    elif kind == "unit_separator":
        data = data.replace(b"200 OK", b"200 \x1fOK", 3)
    elif kind == "no_final_newline":
        data = data.rstrip(b"\n")
    path = tmp_path / "vllm.log"
    path.write_bytes(gzip.compress(data) if kind == "gzip" else data)
    want = _whole(path, "server")
    small_batches(700)
    got = _batched(path, "server")
    assert got is not None
    assert_same_result(got, want)
    assert got.table("server_requests").height == 30


def test_the_batches_hold_every_line_once(tmp_path):
    path = _vllm_log(tmp_path, [VLLM_LINES[1]] * 500)
    source = SourceFile(path, path.name, "x")
    batches = list(source.line_batches(1500))
    numbers = pl.concat([b["line_no"] for b, _ in batches])
    assert numbers.to_list() == list(range(1, 502))
    assert [last for _, last in batches] == [False] * (len(batches) - 1) + [True]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    lines=st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=30),
    final_newline=st.booleans(),
    size=st.integers(1, 64),
    compressed=st.booleans(),
)
def test_byte_batches_are_the_file_cut_after_newlines(
    tmp_path, lines, final_newline, size, compressed
):
    """Whatever the lines' lengths against the batch size (lines longer than a batch,
    empty ones, no final newline, gzip): the pieces are the file's bytes in order, each
    but the last ending in a newline."""
    data = b"\n".join(lines) + (b"\n" if final_newline and lines else b"")
    assume(compressed or not data.startswith(b"\x1f\x8b"))  # gzip's magic: read as gzip
    path = tmp_path / "f.log"
    path.write_bytes(gzip.compress(data) if compressed else data)
    source = SourceFile(path, path.name, "x")
    pieces = list(source.byte_batches(size))
    assert b"".join(pieces) == data
    assert all(piece for piece in pieces)
    assert all(piece.endswith(b"\n") for piece in pieces[:-1])
    # the last piece is told by the file's end (no piece read ahead)
    flags = [last for _, last in source.byte_pieces(size)]
    assert flags == [False] * (len(pieces) - 1) + [True] * bool(pieces)


def test_detached_rows_keep_every_value_and_null():
    """What a batch keeps is copied out of the batch's text (`model.detached`): the copy
    must hold exactly the values, nulls and empty strings included, and leave the other
    columns as they are."""
    from logforensics import model

    text = pl.Series("text", ["GET /v1/chat/completions é", "", None, "x" * 300])
    lines = pl.DataFrame({"line_no": [1, 2, 3, 4], "text": text}).with_columns(
        pl.col("text").str.slice(4).alias("rest"),
        pl.lit(None, dtype=pl.Utf8).alias("nothing"),
        pl.col("text").cast(model.LABEL).alias("label"),
    )
    kept = model.detached(lines.filter(pl.col("line_no") != 1))
    assert_frame_equal(kept, lines.filter(pl.col("line_no") != 1))
    assert kept["text"].to_list() == ["", None, "x" * 300]
    assert kept.schema == lines.schema


def test_columns_of_nulls_kept_as_literals_read_the_same():
    """`model.nulls_as_literals` turns only columns with no value at all into one typed
    null: the frame reads the same, its types unchanged, a column with one value kept."""
    from logforensics import model

    joined = (
        pl.DataFrame({"_row": [0, 1, 2]})
        .join(
            pl.DataFrame(
                {"_row": [7], "at": [dt.datetime(2026, 2, 24, tzinfo=dt.timezone.utc)]},
                schema={"_row": pl.Int64, "at": pl.Datetime("us", "UTC")},
            ).with_columns(pl.lit([1], dtype=pl.List(pl.Int64)).alias("sources")),
            on="_row",
            how="left",
        )
        .with_columns(pl.Series("some", [None, 3, None], dtype=pl.Int64))
    )
    kept = model.nulls_as_literals(joined)
    assert_frame_equal(kept, joined)
    assert kept.schema == joined.schema
    assert kept["some"].to_list() == [None, 3, None]
    assert kept["at"].null_count() == kept["sources"].null_count() == 3
    assert model.nulls_as_literals(joined.clear()).schema == joined.schema


def test_columns_of_one_value_kept_as_literals_read_the_same():
    """`model.constants_as_literals` keeps a column of one value (a label, a stamp with its
    zone, a number, a flag) as that value, and leaves a column with two values, or with a
    value and a null, or of text, as it was: the frame reads the same, its types unchanged."""
    from logforensics import model

    at = dt.datetime(2026, 2, 24, 6, 0, tzinfo=dt.timezone.utc)
    frame = pl.DataFrame(
        {
            "method": ["POST", "POST", "POST"],
            "path": ["/v1/completions", "/v1/chat/completions", "/v1/completions"],
            "at": [at, at, at],
            "at_precision_s": [1e-6, 1e-6, 1e-6],
            "ok": [True, True, True],
            "status": [200, None, 200],
            "id": ["a", "a", "a"],
            "nothing": [None, None, None],
        },
        schema={
            "method": model.LABEL,
            "path": model.LABEL,
            "at": pl.Datetime("us", "UTC"),
            "at_precision_s": pl.Float64,
            "ok": pl.Boolean,
            "status": pl.Int16,
            "id": pl.Utf8,
            "nothing": pl.Int64,
        },
    )
    assert model.one_valued(frame) == ["method", "at", "at_precision_s", "ok"]
    kept = model.constants_as_literals(frame)
    assert_frame_equal(kept, frame)
    assert kept.schema == frame.schema
    assert kept.filter(pl.col("method") == "POST").height == 3
    assert kept.select(pl.col("path").cast(pl.Utf8).unique().len()).item() == 2
    assert kept["status"].to_list() == [200, None, 200]
    assert model.one_valued(frame.head(1)) == []
    assert model.constants_as_literals(frame.head(1)).equals(frame.head(1))


def test_literal_columns_stay_literal_when_counted_and_concatenated():
    """Counting nulls, finding one-valued columns and joining a file's batches leave a
    column held as one value as one value (`frame[name]` wrote it out in full and the
    frame kept that copy: 14 MB a column of a 1.8M-line log), and give the same rows."""
    from logforensics import model

    rows = 50_000
    batch = pl.DataFrame({"line_no": range(rows)}).with_columns(
        pl.lit(1e-6).alias("at_precision_s"),
        pl.lit(None, dtype=pl.Utf8).alias("request_id"),
        (pl.col("line_no") % 7).cast(pl.Int16).alias("status"),
    )
    assert held_as_one_value(batch, "at_precision_s")
    assert model.null_counts(batch) == {
        "line_no": 0,
        "at_precision_s": 0,
        "request_id": rows,
        "status": 0,
    }
    assert model.one_valued(batch) == ["at_precision_s"]
    kept = model.constants_as_literals(batch)
    assert held_as_one_value(batch, "at_precision_s") and held_as_one_value(kept, "at_precision_s")
    assert held_as_one_value(kept, "request_id")
    assert_frame_equal(kept, batch)

    pieces = [batch.slice(0, 20_000), batch.slice(20_000, 1), batch.slice(20_001)]
    whole = model.concatenated(pieces)
    assert pieces == []  # the pieces let go of
    assert_frame_equal(whole, batch)
    assert whole.n_chunks("all") == [1] * whole.width
    assert held_as_one_value(whole, "at_precision_s")


def test_a_parsed_file_holds_its_one_valued_columns_as_one_value():
    """Each file's tables, as its parse ends, hold a column of one value as that value
    while the other files parse (`inputs.read_one`): the largest real server log's."""
    from logforensics import model
    from logforensics.ingest import inputs

    path = max((p for p, role in LINE_LOGS if role == "server"), key=lambda p: p.stat().st_size)
    one = inputs.read_one(path, CTX, {})
    assert one.failure is None
    checked = 0
    for name, frame in one.result.tables.items():
        for column in model.one_valued(frame) if frame.height >= 2048 else ():
            assert held_as_one_value(frame, column), (name, column)
            checked += 1
    assert checked


# ---------------------------------------------------------------- a log in pieces (`--ray`)


def _in_pieces(path: Path, role: str, size: int, instance: str = "x"):
    """`plan_pieces` + `parse_piece` on each + `merge_pieces`, each piece as a task reads
    it (a fresh source each); (the pieces planned, the result or None)."""
    plans = serverlog.plan_pieces(SourceFile(path, path.name, instance), CTX, size)
    if plans is None:
        return None, None
    pieces = [
        serverlog.parse_piece(SourceFile(path, path.name, instance), CTX, role, p) for p in plans
    ]
    return plans, serverlog.merge_pieces(SourceFile(path, path.name, instance), CTX, role, pieces)


@pytest.mark.parametrize(("path", "role"), LINE_LOGS, ids=lambda v: str(v)[-60:])
def test_pieces_give_the_whole_read_on_real_logs(path, role):
    plans, got = _in_pieces(path, role, max(256, path.stat().st_size // 5))
    if plans is None:
        return  # too small to cut at 256 bytes a piece
    assert [p.start for p in plans[1:]] == [p.end for p in plans[:-1]]
    assert sum(p.lines for p in plans) == _whole(path, role).lines
    if got is not None:  # refused: read whole (the cases below)
        assert_same_result(got, _whole(path, role))


def test_most_real_logs_are_read_in_pieces():
    refused, cut = [], 0
    for path, role in LINE_LOGS:
        plans, got = _in_pieces(path, role, max(256, path.stat().st_size // 3))
        cut += plans is not None
        if plans is not None and got is None:
            refused.append(path.name)
    assert cut >= 0.8 * len(LINE_LOGS)
    assert len(refused) <= 0.1 * cut, refused


def test_a_piece_opens_at_a_stamped_line_and_continuations_keep_their_times(tmp_path):
    """Multi-line messages everywhere: every cut falls on a line with its own stamp, and the
    lines after a piece's last stamp learn the next stamp from the line read along."""
    middle = []
    for i in range(60):
        middle += [VLLM_LINES[1], VLLM_LINES[2], f"  continuation {i} of a message", "", "  more"]
    path = _vllm_log(tmp_path, middle)
    want = _whole(path, "server")
    text = path.read_bytes()
    for size in (300, 777, 2000):
        plans, got = _in_pieces(path, "server", size)
        assert plans is not None and len(plans) > 2
        assert all(text[p.start : p.start + 4] == b"2026" for p in plans)
        assert got is not None
        assert_same_result(got, want)


def test_pieces_over_new_year_are_refused(tmp_path):
    path = _new_year_log(tmp_path)
    plans, got = _in_pieces(path, "server", 2000)
    assert plans is not None and len(plans) > 2
    assert got is None  # the 2027 stamps only the whole file can place


def _cut_at_lines(path: Path, cuts: list[int]) -> list[serverlog.PiecePlan]:
    """Pieces opening at the given line numbers (1-based), as `plan_pieces` would write them."""
    starts, offset = {}, 0
    for number, line in enumerate(path.read_bytes().splitlines(keepends=True), start=1):
        starts[number] = offset
        offset += len(line)
    starts[number + 1] = offset
    bounds = [1, *cuts, number + 1]
    return [
        serverlog.PiecePlan(starts[a], starts[b], a, starts[min(b + 1, number + 1)], b - a)
        for a, b in zip(bounds, bounds[1:], strict=False)
    ]


def test_a_stamped_logs_unstamped_tail_is_not_cut_and_a_piece_opening_there_is_refused(
    tmp_path,
):
    """A log whose stamps stop: no cut in its unstamped tail (no stamped line to open a
    piece at); a piece opening there anyway would not know the last stamp before it."""
    path = write(
        tmp_path / "tail.log",
        "\n".join(VLLM_LINES * 3 + [f"  no stamp {i}" for i in range(300)]) + "\n",
    )
    plans, got = _in_pieces(path, "server", 1000)
    assert plans is not None and all(p.first_line <= 10 for p in plans)
    assert_same_result(got, _whole(path, "server"))
    forced = _cut_at_lines(path, [5, 100])
    pieces = [
        serverlog.parse_piece(SourceFile(path, path.name, "x"), CTX, "server", p) for p in forced
    ]
    assert pieces[2].batches.opens_unstamped
    assert serverlog.merge_pieces(SourceFile(path, path.name, "x"), CTX, "server", pieces) is None
