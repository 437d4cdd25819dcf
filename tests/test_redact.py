"""`--redact`: prompts, request ids and addresses leave no trace in any output; sources stay."""

import json
import re
import shutil

import polars as pl
import pytest

from logforensics.analysis import analyze
from logforensics.redact import Redactor, redact
from logforensics.report import build_report, render_html, render_json, render_markdown
from tests.conftest import outside_fences

PEER = "10.1.2.3:5555"
SECRETS = ["10.1.2.3", "10.0.0.2", "req-secret-", "lf-secret-", "my secret prompt", "tell me"]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """The seed incident with ids, markers, peers and <script> in every kind of text."""
    from tests.conftest import FIXTURES

    folder = tmp_path_factory.mktemp("hostile") / "bundle"
    shutil.copytree(FIXTURES / "seed-two-instances", folder)
    client = folder / "client" / "results.jsonl"
    records = [json.loads(line) for line in client.read_text().splitlines()]
    for k, rec in enumerate(records):
        rec["request_id"] = f"req-secret-{k:04d}"
        if rec.get("marker"):
            rec["marker"] = f"[lf-secret-s{rec['step']}-{rec['index']}]"
        if rec.get("error") and k == 1:
            rec["error"] = f"connect to {PEER} failed: <script>alert('err')</script>"
    client.write_text("".join(json.dumps(r) + "\n" for r in records))
    log = folder / "instance-1.log"
    log.write_text(
        log.read_text()
        + f'2026-02-24T06:29:58.000000001Z INFO:     {PEER} - "GET /health HTTP/1.1" 200 OK\n'
        + "2026-02-24T06:29:58.500000001Z (APIServer pid=1) INFO 02-24 06:29:58 [logger.py:41] "
        "Received request chatcmpl-req-secret-0002: prompt: '<script>x</script> tell me "
        "[lf-secret-s1-2]', params: SamplingParams(n=1), prompt_token_ids: [1, 2], lora_request: None.\n"
        + f"2026-02-24T06:29:59.000000001Z garbage from {PEER} <script>alert(1)</script> "
        "req-secret-0003 [lf-secret-s1-3] prompt: 'my secret prompt'\n"
    )
    return analyze([folder])


@pytest.fixture(scope="module")
def outputs(hostile):
    red = redact(hostile)
    return {
        "plain": {
            "html": render_html(build_report(hostile)),
            "json": render_json(build_report(hostile)),
            "md": render_markdown(build_report(hostile)),
        },
        "redacted": {
            "html": render_html(build_report(red)),
            "json": render_json(build_report(red)),
            "md": render_markdown(build_report(red)),
        },
        "analysis": red,
    }


def test_the_hostile_text_is_there_without_redaction(outputs):
    plain = outputs["plain"]
    assert PEER in plain["html"] and "req-secret-" in plain["html"]
    assert "my secret prompt" in plain["html"]  # an unparsed line, shown in the inputs section


@pytest.mark.parametrize("kind", ["html", "json", "md"])
def test_no_secret_survives_redaction(outputs, kind):
    text = outputs["redacted"][kind]
    for secret in SECRETS:
        assert secret not in text, f"{secret!r} in the redacted {kind}"


def test_placeholders_replace_them(outputs):
    html = outputs["redacted"]["html"]
    # the peer's address in the client's error and in the unparsed line: one placeholder, port
    # kept (`host-N`: uvicorn's peer is in no table, so no peer column names it a client)
    peer = re.search(r"connect to (host-\d+):5555 failed", html).group(1)
    assert f"garbage from {peer}:5555" in html
    assert "prompt: &#39;&lt;prompt-" in html  # the prompt text itself is gone
    assert "request-" in html  # the unreached table's request column
    for kind in ("html", "json", "md"):
        assert "redacted" in outputs["redacted"][kind]


def test_redacted_html_is_still_escaped(outputs):
    html = outputs["redacted"]["html"]
    assert html.count("<script") == 1  # the page's own filter script
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    md = outputs["redacted"]["md"]
    assert "<script" not in outside_fences(md).replace("\\<script", "")


def test_sources_and_numbers_stay(outputs, hostile):
    plain, red = json.loads(outputs["plain"]["json"]), json.loads(outputs["redacted"]["json"])

    def without_text(evidence):
        return [{k: v for k, v in e.items() if k != "lines"} for e in evidence]

    assert without_text(red["verdict"]["evidence"]) == without_text(plain["verdict"]["evidence"])
    for r, p in zip(red["verdict"]["evidence"], plain["verdict"]["evidence"], strict=True):
        assert [q["source"] for q in r["lines"]] == [q["source"] for q in p["lines"]]
    assert red["totals"] == plain["totals"] and red["runs"] == plain["runs"]
    assert [i["path"] for i in red["inputs"]] == [i["path"] for i in plain["inputs"]]
    assert red["findings"][:-1] == plain["findings"]  # plus one note saying it was redacted
    assert red["findings"][-1]["kind"] == "redacted"


def test_same_value_same_placeholder(outputs, hostile):
    red = outputs["analysis"]
    requests = red.requests.filter(red.requests["request_id"].is_not_null())
    ids = requests["request_id"].to_list()
    assert len(set(ids)) == len(ids) and all(i.startswith("request-") for i in ids)
    server = red.tables["server_requests"]
    received = server.filter(server["event"] == "received").row(0, named=True)
    client = red.requests.filter((pl.col("step") == 1) & (pl.col("index") == 2))
    # vLLM's id for the request carries the client's placeholder, its marker the prompt's
    assert received["request_id"] == "chatcmpl-" + client["request_id"][0]
    assert received["prompt_marker"] == client["marker"][0]
    # a second redaction of the same analysis gives the same placeholders
    again = redact(hostile)
    assert again.requests["request_id"].to_list() == red.requests["request_id"].to_list()
    assert (
        render_json(build_report(again)).split('"generated_at"')[1]
        == render_json(build_report(red)).split('"generated_at"')[1]
    )


def test_the_original_analysis_is_untouched(hostile):
    redact(hostile)
    assert "req-secret-0000" in hostile.requests["request_id"].to_list()
    assert not any(f.kind == "redacted" for f in hostile.findings)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("request from ('10.0.0.2', 51001)", "request from ('host-1', 51001)"),
        ("to 10.1.2.3:5555 and 10.1.2.3", "to host-1:5555 and host-1"),
        ("[fe80::1]:8000 or ::1", "[host-1]:8000 or host-2"),
        (
            "vLLM version 0.10.1.1 at 06:16:02, std::vector",
            "vLLM version 0.10.1.1 at 06:16:02, std::vector",
        ),
        ('{"content": "a secret <b>"}', '{"content": "<prompt-1>"}'),
        ('{"prompt": "tell me", "ok": true}', '{"prompt": "<prompt-1>", "ok": true}'),
        ("prompt: 'unterminated secret", "prompt: '<prompt-1>'"),
        ("id 0f8fad5b-d9cb-469f-a165-70867728950e", "id request-1"),
        ("Aborted request cmpl-abc123-0.", "Aborted request cmpl-request-1."),
        ("/logs/10.9.9.9.log:4 from 10.9.9.9", "/logs/10.9.9.9.log:4 from host-1"),
    ],
)
def test_free_text(text, expected):
    assert Redactor(protected=["/logs/10.9.9.9.log"]).text(text) == expected


def test_peer_columns_name_clients_and_keep_ports():
    r = Redactor()
    assert r.peer("10.0.0.2:40110") == "client-1:40110"
    assert r.peer("10.0.0.2:40111") == "client-1:40111"
    assert r.peer("gateway.internal:80") == "client-2:80"
    assert r.text("seen 10.0.0.2 again") == "seen client-1 again"
    assert r.mapping["addresses"] == {"10.0.0.2": "client-1", "gateway.internal": "client-2"}


def test_quoted_lines_and_the_ledger_are_redacted(outputs, hostile, tmp_path):
    from logforensics.report.ledger import build_ledger, write_ledger

    plain = json.loads(outputs["plain"]["json"])
    red = json.loads(outputs["redacted"]["json"])
    quoted = [q["text"] for e in plain["verdict"]["evidence"] for q in e["lines"]]
    assert any(s in text for text in quoted for s in SECRETS)  # the client's lines hold them
    quoted = [q["text"] for e in red["verdict"]["evidence"] for q in e["lines"]]
    assert quoted and not any(secret in text for text in quoted for secret in SECRETS)
    assert red["ledger"]["rows"] and "request-" in json.dumps(red["ledger"])
    for suffix in (".csv", ".jsonl"):
        write_ledger(build_ledger(outputs["analysis"]), tmp_path / f"ledger{suffix}")
        text = (tmp_path / f"ledger{suffix}").read_text()
        assert "results.jsonl:" in text  # sources stay
        for secret in SECRETS:
            assert secret not in text, f"{secret!r} in the redacted ledger ({suffix})"
