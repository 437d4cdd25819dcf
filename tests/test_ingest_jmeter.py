"""Apache JMeter JTL files, CSV and XML.

Samples (origins in the formats' `samples`): JMeter's own test files
(bin/testfiles/HTMLReportTestFile.csv, sample_log1.jtl, BatchTestLocal.jtl)
and the Azure Load Testing docs' CSV line. Per-request counts and outcomes
are exact.
"""

import datetime as dt

from logforensics.ingest import ParseContext
from logforensics.ingest.base import SAMPLES_DIR as SAMPLES
from tests.conftest import outcomes, write
from tests.conftest import read_client_file as parse

UTC = dt.timezone.utc


def test_jmeter_csv_counts_each_sample_with_its_outcome_and_threads():
    name, result, req = parse(SAMPLES / "jmeter_results.csv")
    assert name == "jmeter_csv" and req.height == 42
    assert outcomes(req) == {"ok": 41, "http_400": 1}
    assert req["concurrency"].unique().to_list() == [1]  # allThreads
    assert req["started_at"][0] == dt.datetime(2019, 3, 5, 11, 0, 27, 191000, tzinfo=UTC)
    assert req["latency_s"][0] == 0.351
    assert any("samples' starts" in n for n in result.notes)


def test_jmeter_stamps_that_are_ends_are_told_from_the_threads(tmp_path):
    """The same samples stamped at their ends (sampleresult.timestamp.start=false)."""
    lines = (SAMPLES / "jmeter_results.csv").read_text().splitlines()
    rows = [lines[0]]
    for line in lines[1:]:
        ts, elapsed, rest = line.split(",", 2)
        rows.append(f"{int(ts) + int(elapsed)},{elapsed},{rest}")
    _, result, req = parse(write(tmp_path / "ends.jtl", "\n".join(rows) + "\n"))
    assert req["started_at"][0] == dt.datetime(2019, 3, 5, 11, 0, 27, 191000, tzinfo=UTC)
    assert any("samples' ends" in n for n in result.notes)


def test_jmeter_csv_other_delimiter_fields_and_a_quoted_line_break(tmp_path):
    text = (
        "timeStamp;elapsed;label;responseCode;responseMessage;threadName;success;allThreads\n"
        "1767225600000;812;chat;200;OK;Thread Group 1-1;true;8\n"
        '1767225600100;30002;chat;Non HTTP response code: java.net.SocketTimeoutException;"Non HTTP '
        'response message: Read timed out;\nafter 30000 ms";Thread Group 1-2;false;8\n'
        "1767225600200;15;chat;503;Service Unavailable;Thread Group 1-3;false;8\n"
    )
    _, result, req = parse(write(tmp_path / "semi.jtl", text))
    assert outcomes(req) == {"ok": 1, "timeout": 1, "http_503": 1}
    assert req["concurrency"].to_list() == [8, 8, 8]
    from logforensics.model import source_labels

    assert source_labels(req["source"]) == ["semi.jtl:2", "semi.jtl:3", "semi.jtl:5"]
    assert result.unparsed == 0


def test_jmeter_xml_top_level_samples_only():
    name, result, req = parse(SAMPLES / "jmeter_batch_test_local.jtl")
    assert name == "jmeter_xml" and req.height == 9
    assert outcomes(req) == {"ok": 7, "error": 2}  # s="false", rc="": a failure, no status
    _, old, req = parse(SAMPLES / "jmeter_sample_log1.jtl")
    assert req.height == 14 and outcomes(req) == {"ok": 14}
    assert any("samples' ends" in n for n in old.notes)  # JMeter 2.1 stamped the end


def test_jmeter_xml_sub_results_are_part_of_their_sample(tmp_path):
    text = (
        '<?xml version="1.0" encoding="UTF-8"?>\n<testResults version="1.2">\n'
        '<httpSample t="900" lt="80" ts="1767225600000" s="true" lb="chat" rc="200" rm="OK" '
        'tn="TG 1-1" dt="text" na="4" ng="4">\n'
        '  <httpSample t="20" lt="20" ts="1767225600000" s="true" lb="chat-0" rc="302" '
        'rm="Found" tn="TG 1-1" dt="text"/>\n'
        '  <httpSample t="880" lt="60" ts="1767225600020" s="true" lb="chat-1" rc="200" '
        'rm="OK" tn="TG 1-1" dt="text"/>\n'
        "  <java.net.URL>http://lb/v1/chat/completions</java.net.URL>\n"
        "</httpSample>\n"
        '<httpSample t="5" lt="0" ts="1767225600950" s="false" lb="chat" rc="502" '
        'rm="Bad Gateway &amp; more" tn="TG 1-2" dt="text" na="4" ng="4"/>\n'
        "</testResults>\n"
    )
    _, result, req = parse(write(tmp_path / "r.jtl", text))
    assert req.height == 2 and outcomes(req) == {"ok": 1, "http_502": 1}
    assert req["error"].to_list() == [None, "HTTP 502 Bad Gateway & more"]
    assert req["concurrency"].to_list() == [4, 4]
    assert result.unparsed == 0 and any("nested" in n for n in result.notes)


def test_jmeter_formatted_stamps_are_read_in_the_client_zone(tmp_path):
    text = (
        "timeStamp,elapsed,label,responseCode,responseMessage,threadName,success,allThreads\n"
        "2026/01/01 09:00:30.123,812,chat,200,OK,TG 1-1,true,2\n"
        "2026/01/01 09:00:31.000,15,chat,503,Service Unavailable,TG 1-1,false,2\n"
    )
    ctx = ParseContext(year=2026, client_tz="Asia/Seoul")
    _, result, req = parse(write(tmp_path / "fmt.jtl", text), ctx)
    assert req["started_at"].to_list() == [
        dt.datetime(2026, 1, 1, 0, 0, 30, 123000, tzinfo=UTC),
        dt.datetime(2026, 1, 1, 0, 0, 31, tzinfo=UTC),
    ]
    assert outcomes(req) == {"ok": 1, "http_503": 1}
    assert any("formatted text" in n and "Asia/Seoul" in n for n in result.notes)
