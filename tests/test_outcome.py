"""Outcome from positive evidence only, on the real exception strings of real clients.

tests/data/client_errors.json holds what urllib, requests, httpx, aiohttp and the
openai client raised here against a closed port, a full listen backlog, a slow stub,
503/504 stubs and stubs that close or reset (tests/data/client_errors_recorder.txt).
The localised Windows messages are quoted from public issue threads.
"""

import json
from pathlib import Path

import polars as pl
import pytest

from logforensics.ingest.outcome import classify, ok_of, with_outcome

RECORDED = json.loads((Path(__file__).parent / "data" / "client_errors.json").read_text())
# case → outcome; the openai client says only "Connection error." for refused, closed and
# reset connections: a failure of another kind, not a guess between them.
EXPECTED = {
    "refused": "refused",
    "connect_timeout": "timeout",
    "slow": "timeout",
    "503": "http_503",
    "504": "http_504",
    "close": "reset",
    "reset": "reset",
}
VAGUE = {("openai", "refused"), ("openai", "close"), ("openai", "reset")}


def outcomes(**columns) -> list[str]:
    frame = pl.DataFrame(columns, strict=False)
    exprs = {k: pl.col(k) for k in columns}
    return frame.select(classify(**exprs))["outcome"].to_list()


@pytest.mark.parametrize(
    "record",
    RECORDED["records"],
    ids=[f"{r['library']}-{r['case']}" for r in RECORDED["records"]],
)
def test_real_client_exceptions(record):
    want = "error" if (record["library"], record["case"]) in VAGUE else EXPECTED[record["case"]]
    as_logged = [f"{record['type']}: {record['str']}".rstrip(": ")]
    assert outcomes(error=as_logged) == [want]
    if record["str"]:  # the message alone, as the seed script's str(e)[:40] keeps it
        assert outcomes(error=[record["str"][:40]]) in ([want], ["error"])
        assert outcomes(error=[record["str"]]) == [want]


def test_seed_and_lab_texts():
    texts = [
        "OK",
        "HTTP Error 503: Service Unavailable",
        "HTTP Error 504: Gateway Time-out",  # nginx's reason phrase: an answer, not a timeout
        "timed out",
        "<urlopen error timed out>",
        "Remote end closed connection without response",
        "[Errno 104] Connection reset by peer",
        "ReadTimeout: HTTPConnectionPool(host='127.0.0.1', port=8000): Read timed out. "
        "(read timeout=120.0)",  # corpus kv-tiny client.jsonl
        "HTTP 502: <html> <head><title>502 Bad Gateway</title></head>",  # corpus crash-midtest
        "APITimeoutError: Request timed out.",
        "BrokenPipeError: [Errno 32] Broken pipe",
        "asyncio.exceptions.CancelledError",
        "KeyError: 'choices'",
    ]
    assert outcomes(error=texts) == [
        "ok", "http_503", "http_504", "timeout", "timeout", "reset", "reset", "timeout",
        "http_502", "timeout", "reset", "cancelled", "error",
    ]  # fmt: skip


def test_localised_windows_messages():
    texts = [
        # divamgupta/image-segmentation-keras#384 (zh-CN)
        "<urlopen error [WinError 10061] 由于目标计算机积极拒绝，无法连接。>",
        # insidesherpa/JPMC-tech-task-1-PY3#189 (zh-TW)
        "<urlopen error [WinError 10061] 無法連線，因為目標電腦拒絕連線",
        # jhj0517/AdvancedLivePortrait-WebUI#18 (zh-CN)
        "<urlopen error [WinError 10060] 由于连接方在一段时间后没有正确答复或连接的主机没有反应，连接尝试 失败。>",
        # genotrance/px#148 (de-DE)
        "[WinError 10054] Eine vorhandene Verbindung wurde vom Remotehost geschlossen",
        # michaelliao/learn-python3#48 (zh-CN)
        "ConnectionResetError: [WinError 10054] 远程主机强迫关闭了一个现有的连接。",
        # psf/requests#4963 (en)
        "ConnectionRefusedError: [WinError 10061] No connection could be made because the "
        "target machine actively refused it",
    ]
    assert outcomes(error=texts) == ["refused", "refused", "timeout", "reset", "reset", "refused"]


def test_success_needs_positive_evidence():
    got = outcomes(
        ok=[None, True, False, None, None, None, True, None, None],
        http_status=[None, None, None, 200, 503, None, 200, None, 200],
        error=[None, None, None, None, None, None, "stream ended early", None, "None"],
        output_tokens=[None, None, None, None, None, 12, None, 0, None],
    )
    assert got == ["unknown", "ok", "error", "ok", "http_503", "ok", "error", "unknown", "ok"]


def test_words_and_cancelled_flags():
    got = outcomes(
        status_word=["success", "errored", "incomplete", "timeout", None, "weird"],
        cancelled=[False, False, False, False, True, False],
    )
    assert got == ["ok", "error", "cancelled", "timeout", "cancelled", "unknown"]


def test_ok_is_null_only_when_unknown():
    frame = pl.DataFrame({"outcome": ["ok", "timeout", "unknown", "http_503"]})
    assert frame.select(ok_of(pl.col("outcome")))["ok"].to_list() == [True, False, None, False]


def test_with_outcome_equals_classify_row_by_row():
    errors = [r["str"] or None for r in RECORDED["records"]] * 3 + [None, "OK", None]
    frame = pl.DataFrame(
        {
            "error": errors,
            "http_status": [None] * (len(errors) - 3) + [200, None, None],
            "tokens": [0] * (len(errors) - 1) + [7],
        }
    )
    evidence = {"error": pl.col("error"), "http_status": pl.col("http_status")}
    direct = frame.select(classify(**evidence, output_tokens=pl.col("tokens")))["outcome"]
    grouped = with_outcome(frame, **evidence, output_tokens=pl.col("tokens"))["outcome"]
    assert grouped.to_list() == direct.to_list()
    assert grouped.to_list()[-3:] == ["ok", "ok", "ok"]


def test_an_error_text_naming_no_class_takes_the_records_failing_status():
    """JMeter and others keep the reason phrase apart from the code: ("Internal Server
    Error", 500) is an HTTP 500, ("Internal Server Error", none) a failure of another kind."""
    assert outcomes(
        error=["Internal Server Error", "Internal Server Error"], http_status=[500, None]
    ) == [
        "http_500",
        "error",
    ]
    # a text that names its own class keeps it, whatever the status says
    assert outcomes(error=["Read timed out. (read timeout=30)"], http_status=[502]) == ["timeout"]
