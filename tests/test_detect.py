"""`detect_paths` / `render_detect_table`: what each input is, from the same parse as analyze.

The sample files under tests/data/serverlogs/ are excerpts in the real formats
(their sources are listed in tests/test_ingest_proxy.py, test_ingest_metrics.py
and test_ingest_serverlog.py).
"""

import shutil
from pathlib import Path

from logforensics.detect import detect_paths, render_detect_table
from logforensics.ingest import ParseContext

DATA = Path(__file__).parent / "data" / "serverlogs"
CTX = ParseContext(year=2026)


def by_name(rows):
    return {Path(r["path"]).name: r for r in rows}


def test_detect_the_sample_folder():
    rows = by_name(detect_paths([DATA], CTX))
    assert set(rows) == {
        "empty.log",
        "envoy.log",
        "gpu-1.txt",
        "haproxy.log",
        "nginx-access.log",
        "nginx-error.log",
        "pyproxy.log",
        "vllm-0.log",
    }
    vllm = rows["vllm-0.log"]
    assert vllm["formats"] == ["vllm_stats", "uvicorn_access"]
    assert (vllm["lines"], vllm["parsed"], vllm["noise"], vllm["unparsed"]) == (3, 2, 0, 1)
    assert vllm["records"] == {"engine_stats": 1, "server_requests": 1}
    assert vllm["span"] == ["2026-02-24T06:16:00.100000Z", "2026-02-24T06:16:05Z"]
    assert vllm["instance"] == "vllm-0"
    assert vllm["unparsed_examples"] == [
        {"line": 3, "text": "2026-02-24T06:16:05.000000000Z something nobody understands"}
    ]
    nginx = rows["nginx-access.log"]
    assert nginx["formats"] == ["nginx_access"]
    assert nginx["instance"] is None and nginx["role"] == "proxy"
    assert nginx["records"] == {"proxy_requests": 6, "proxy_events": 2}
    assert nginx["span"] == ["2026-02-24T06:16:03Z", "2026-02-24T06:17:08Z"]
    assert rows["gpu-1.txt"]["formats"] == ["prometheus_scrape"]
    # a scrape beside vllm-0's log that no evidence ties to it (nor to a gpu-1 log)
    assert rows["gpu-1.txt"]["instance"] is None
    assert rows["gpu-1.txt"]["notes"][-1].startswith("metrics of an unknown instance")
    assert rows["empty.log"]["skipped"] == "empty file"
    assert rows["empty.log"]["formats"] == []
    for row in rows.values():
        assert row["parsed"] + row["noise"] + row["unparsed"] == row["lines"]


def test_missing_paths_are_rows_too(tmp_path):
    rows = detect_paths([tmp_path / "nope.log"], CTX)
    assert rows == [
        {
            "path": str(tmp_path / "nope.log"),
            "format": None,
            "formats": [],
            "role": None,
            "lines": 0,
            "parsed": 0,
            "unparsed": 0,
            "noise": 0,
            "records": {},
            "span": None,
            "instance": None,
            "unparsed_examples": [],
            "unparsed_shapes": [],
            "tester_summaries": [],
            "notes": [],
            "skipped": "no such file or folder",
        }
    ]


def test_render_detect_table(tmp_path):
    for name in ("vllm-0.log", "nginx-access.log", "empty.log"):
        shutil.copy(DATA / name, tmp_path / name)
    table = render_detect_table(detect_paths([tmp_path], CTX))
    lines = table.splitlines()
    assert lines[0] == f"files under {tmp_path}/"
    assert lines[1].split() == [
        "FILE", "FORMAT", "INSTANCE", "LINES", "PARSED", "NOISE", "UNPARSED",
    ]  # fmt: skip
    assert all(len(line) <= 100 for line in lines)
    body = "\n".join(lines[2:])
    assert "nginx-access.log proxy_log" in body and "proxy_requests=6" in body
    assert "    lines: vllm_stats, uvicorn_access" in body
    assert "skipped: empty file" in body
    assert (
        "unparsed 1× from line 3: 2026-02-24T06:16:05.000000000Z something nobody understands"
        in body
    )
    assert lines[-1] == "3 file(s), 1 skipped: 9 lines, 8 parsed, 0 noise, 1 unparsed"
    assert table.endswith("\n")


def test_one_odd_line_among_many_of_one_shape_is_shown(tmp_path):
    """The first five unparsed lines used to be all that was shown: one odd line after a
    thousand lines of one unknown kind was never seen."""
    lines = [
        f"2026-02-24T06:16:{i % 60:02d}Z worker {i} heartbeat ok 0x{i:08x}" for i in range(1000)
    ]
    lines.insert(700, "2026-02-24T06:17:00Z POST /v1/chat/completions took 3.2 s (id=req-77)")
    lines.insert(0, '2026-02-24T06:15:59Z INFO:     10.0.0.1:5 - "GET /health HTTP/1.1" 200 OK')
    (tmp_path / "odd.log").write_text("\n".join(lines) + "\n")
    (row,) = detect_paths([tmp_path / "odd.log"], CTX)
    shapes = row["unparsed_shapes"]
    assert [(s["count"], s["first_line"]) for s in shapes] == [(1000, 2), (1, 702)]
    assert shapes[0]["shape"] == "<time> worker <n> heartbeat ok <hex>"
    assert "POST /v1/chat/completions" in shapes[1]["example"]
    assert "unparsed 1× from line 702" in render_detect_table([row])


def test_render_an_empty_list():
    assert (
        render_detect_table([]).splitlines()[-1]
        == "0 file(s), 0 skipped: 0 lines, 0 parsed, 0 noise, 0 unparsed"
    )
