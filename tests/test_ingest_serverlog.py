"""Server-side line styles, each as the real software prints it."""

import datetime as dt
from pathlib import Path

import polars as pl

from logforensics.ingest import FILE_FORMATS, ParseContext, SourceFile, detect

UTC = dt.timezone.utc
CTX = ParseContext(year=2026)


def parse(tmp_path: Path, text: str, name: str = "instance-1.log"):
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    source = SourceFile(path, name, path.stem)
    fmt = detect(source)
    assert fmt is FILE_FORMATS["server_log"], f"not sniffed as a server log: {fmt}"
    return fmt.parse(source, CTX)


V1_STATS = (
    "INFO 02-24 06:16:07 [loggers.py:123] Engine 000: Avg prompt throughput: 15.5 tokens/s, "
    "Avg generation throughput: 150.0 tokens/s, Running: 3 reqs, Waiting: 2 reqs, "
    "GPU KV cache usage: 41.7%, Prefix cache hit rate: 12.5%"
)
V0_STATS = (
    "INFO 02-24 06:16:07 metrics.py:351] Avg prompt throughput: 0.0 tokens/s, Avg generation "
    "throughput: 87.3 tokens/s, Running: 4 reqs, Swapped: 1 reqs, Pending: 6 reqs, "
    "GPU KV cache usage: 97.2%, CPU KV cache usage: 3.0%."
)


def test_stats_lines_of_every_generation(tmp_path):
    text = (
        "\n".join(
            [
                V1_STATS,
                "(APIServer pid=7) " + V1_STATS.replace("Running: 3", "Running: 4"),
                V0_STATS,
                # newer V1 inserts fields; CPU build names its device cache "CPU KV cache usage"
                "(APIServer pid=7) INFO 02-24 06:16:17 [loggers.py:127] Engine 000: Avg prompt throughput: 1.0 tokens/s, "
                "Avg generation throughput: 2.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, Preemptions: 0, "
                "CPU KV cache usage: 5.5%, Prefix cache hit rate: 0.0%",
                "\x1b[32mINFO\x1b[0m 02-24 06:16:27 [loggers.py:123] " + V1_STATS.split("] ", 1)[1],
            ]
        )
        + "\n"
    )
    result = parse(tmp_path, text)
    stats = result.table("engine_stats")
    assert stats["running"].to_list() == [3, 4, 4, 1, 3]
    assert stats["waiting"].to_list() == [2, 2, 6, 0, 2]  # V0 "Pending" is waiting
    assert stats["swapped"].to_list() == [None, None, 1, None, None]
    assert stats["gpu_kv_pct"].to_list() == [41.7, 41.7, 97.2, 5.5, 41.7]
    assert stats["cpu_kv_pct"].to_list() == [None, None, 3.0, None, None]
    assert stats["gen_tps"].to_list() == [150.0, 150.0, 87.3, 2.0, 150.0]
    assert stats["at"][4] == dt.datetime(2026, 2, 24, 6, 16, 27, tzinfo=UTC)
    assert (result.parsed, result.noise, result.unparsed) == (5, 0, 0)


def test_seed_stats_fragment_without_prefix(tmp_path):
    # the seed write-up quotes the line without vLLM's prefix
    text = (
        "Avg generation throughput: 150.0 tokens/s, Running: 0 reqs, "
        "Waiting: 0 reqs, GPU KV cache usage: 0.0%\n"
    )
    stats = parse(tmp_path, text).table("engine_stats")
    assert stats.select("running", "waiting", "gpu_kv_pct", "gen_tps").row(0) == (0, 0, 0.0, 150.0)


def test_uvicorn_access_lines_take_the_runtime_stamp(tmp_path):
    text = (
        '2026-02-24T06:16:05.614699807Z INFO:     10.0.0.2:40246 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
        '2026-02-24T06:16:06.000000001Z INFO:     [::1]:5555 - "GET /metrics HTTP/1.1" 200 OK\n'
        '2026-02-24T06:16:07.5Z WARNING:  10.0.0.9:1 - "POST /v1/completions HTTP/1.0" 400 Bad Request\n'
    )
    rows = parse(tmp_path, text).table("server_requests")
    assert rows["method"].to_list() == ["POST", "GET", "POST"]
    assert rows["path"].to_list() == ["/v1/chat/completions", "/metrics", "/v1/completions"]
    assert rows["http_status"].to_list() == [200, 200, 400]
    assert rows["peer"].to_list() == ["10.0.0.2:40246", "[::1]:5555", "10.0.0.9:1"]
    assert rows["at"][0] == dt.datetime(2026, 2, 24, 6, 16, 5, 614699, tzinfo=UTC)
    assert rows["at_precision_s"].to_list() == [1e-6] * 3


def test_unstamped_access_lines_borrow_the_neighbours_time(tmp_path):
    text = (
        "INFO 02-24 06:16:00 [loggers.py:123] Engine 000: Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%\n"
        'INFO:     10.0.0.2:1 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
        "INFO 02-24 06:16:10 [loggers.py:123] Engine 000: Running: 0 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%\n"
    )
    rows = parse(tmp_path, text).table("server_requests")
    assert rows["at"][0] == dt.datetime(2026, 2, 24, 6, 16, 0, tzinfo=UTC)
    # the true time lies somewhere up to the next stamp (10 s) plus that stamp's own 1 s
    assert rows["at_precision_s"][0] == 11.0


def test_kubectl_prefix_routes_lines_to_their_pod(tmp_path):
    text = (
        '[pod/vllm-0/vllm] 2026-02-24T06:16:05.1Z INFO:     10.0.0.2:1 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
        '[pod/vllm-1/vllm] 2026-02-24T06:16:05.2Z INFO:     10.0.0.2:2 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
    )
    rows = parse(tmp_path, text, "all-pods.log").table("server_requests")
    assert rows["instance"].to_list() == ["vllm-0", "vllm-1"]


PROXY_TRACEBACK = """\
----------------------------------------
Exception occurred during processing of request from ('10.0.0.2', 51001)
Traceback (most recent call last):
  File "/app/proxy.py", line 74, in _forward
    with urllib.request.urlopen(req, timeout=120) as resp:
TimeoutError

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/app/proxy.py", line 76, in _forward
    self.send_error(502, f"Bad Gateway: {exc}")
BrokenPipeError: [Errno 32] Broken pipe
----------------------------------------
"""


def test_proxy_traceback_becomes_one_event(tmp_path):
    stamped = "".join(
        f"2026-02-24T06:18:02.{k:06d}Z {line}\n"
        for k, line in enumerate(PROXY_TRACEBACK.splitlines())
    )
    text = (
        '2026-02-24T06:18:01.000000Z INFO:     10.0.0.2:1 - "GET /health HTTP/1.1" 200 OK\n'
        + stamped
        + '2026-02-24T06:18:03.000000Z INFO:     10.0.0.2:2 - "GET /health HTTP/1.1" 200 OK\n'
    )
    result = parse(tmp_path, text)
    events = result.table("proxy_events")
    assert events.height == 1
    event = events.row(0, named=True)
    assert event["kind"] == "timeout"
    assert event["http_status"] == 502
    assert "TimeoutError → BrokenPipeError: [Errno 32] Broken pipe" in event["detail"]
    assert event["at"] == dt.datetime(2026, 2, 24, 6, 18, 2, tzinfo=UTC)
    assert event["source"] == "instance-1.log:2"
    assert result.unparsed == 0
    assert result.parsed == 2 + len(PROXY_TRACEBACK.splitlines())


def test_seed_abbreviated_traceback_frames(tmp_path):
    # the seed quotes frames as "proxy.py, line 74, in _forward"
    text = (
        "INFO 02-24 06:18:02 [loggers.py:1] Engine 000: Running: 0 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%\n"
        "proxy.py, line 74, in _forward\nTimeoutError\nproxy.py, line 76, in _forward\n"
        'self.send_error(502, f"Bad Gateway: {exc}")\nBrokenPipeError: [Errno 32] Broken pipe\n'
    )
    events = parse(tmp_path, text).table("proxy_events")
    assert events["kind"].to_list() == ["timeout"]


def test_engine_pressure_lines(tmp_path):
    text = (
        "\n".join(
            [
                "WARNING 02-24 06:20:01 [scheduler.py:1560] Sequence group 12 is preempted by PreemptionMode.RECOMPUTE mode "
                "because there is not enough KV cache space. This can affect the end-to-end performance.",
                "ERROR 02-24 06:20:02 [engine.py:1] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.34 GiB",
                "WARNING 02-24 06:20:03 [x.py:1] All KV cache blocks are full.",
                "ERROR 02-24 06:20:04 [async_llm.py:1] EngineDeadError: EngineCore encountered an issue.",
            ]
        )
        + "\n"
    )
    events = parse(tmp_path, text).table("engine_events")
    assert events["kind"].to_list() == ["preempted", "oom", "kv_full", "engine_dead"]


def test_lifecycle_lines_keep_request_id_and_prompt_marker(tmp_path):
    text = (
        "INFO 02-24 06:16:02 [logger.py:41] Received request chatcmpl-abc123: prompt: '<bos><start_of_turn>user\\n"
        "클라우드 컴퓨팅을 세 문장으로 설명해주세요. (17)<end_of_turn>', params: SamplingParams(n=1), "
        "prompt_token_ids: None, lora_request: None.\n"
        "INFO 02-24 06:16:05 [async_llm.py:1] Finished request chatcmpl-abc123.\n"
        "INFO 02-24 06:18:02 [async_llm.py:1] Aborted request chatcmpl-def456.\n"
    )
    rows = parse(tmp_path, text).table("server_requests")
    assert rows["event"].to_list() == ["received", "finished", "aborted"]
    assert rows["request_id"].to_list() == ["chatcmpl-abc123", "chatcmpl-abc123", "chatcmpl-def456"]
    assert rows["prompt_marker"].to_list() == ["(17)", None, None]


def test_every_line_is_accounted_for(tmp_path):
    text = (
        "2026-02-24T06:00:00Z INFO 02-24 06:00:00 [api_server.py:1] vLLM API server version 0.10.1.1\n"
        "2026-02-24T06:00:01Z INFO:     Started server process [1]\n"
        "\n"
        "2026-02-24T06:00:02Z something nobody understands\n"
        "\x00\x01binary junk\r\n"
        + V1_STATS
        + "\r\n"
        + "x" * 100_000
        + "\n"
        + 'INFO:     10.0.0.2:1 - "POST /v1/chat/completions HTTP/1.1" 200 OK'  # truncated: no newline
    )
    result = parse(tmp_path, text)
    assert result.lines == 8
    assert (result.parsed, result.noise, result.unparsed) == (2, 3, 3)
    assert [n for n, _ in result.unparsed_examples] == [4, 5, 7]
    assert len(result.unparsed_examples[2][1]) <= 300


def test_non_utf8_bytes_are_replaced_and_noted(tmp_path):
    text = (V1_STATS + "\n").encode() + b"INFO 02-24 06:16:08 [x.py:1] caf\xe9\n"
    result = parse(tmp_path, text)
    assert result.parsed == 1 and result.noise == 1
    assert any("not UTF-8" in note for note in result.notes)


def test_gzip_is_read_transparently(tmp_path):
    import gzip

    path = tmp_path / "instance-9.log.gz"
    path.write_bytes(gzip.compress((V1_STATS + "\n").encode()))
    source = SourceFile(path, path.name, "instance-9")
    fmt = detect(source)
    assert fmt is FILE_FORMATS["server_log"]
    assert fmt.parse(source, CTX).table("engine_stats").height == 1


def test_plain_prose_is_not_a_server_log(tmp_path):
    path = tmp_path / "README.txt"
    path.write_text("These are the logs from Tuesday.\nAsk Kim about instance 2.\n")
    assert detect(SourceFile(path, path.name, "README")) is None


def test_parsed_frames_have_the_canonical_schema(tmp_path):
    from logforensics import model

    result = parse(tmp_path, V1_STATS + "\n")
    for name, frame in result.tables.items():
        assert frame.schema == pl.Schema(model.SCHEMAS[name]), name
