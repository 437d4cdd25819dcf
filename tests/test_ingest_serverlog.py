"""Server-side line styles, each as the real software prints it.

Where each excerpt's exact text comes from (values invented, layout exact):

* vLLM logger prefix: vllm-project/vllm ``vllm/logger.py`` (old ``%(levelname)s
  %(asctime)s %(filename)s:%(lineno)d]``, mid/new ``[%(fileinfo)s:%(lineno)d]``),
  ``vllm/logging_utils/formatter.py`` (``ColoredFormatter``: level colours, GREY
  ``\033[90m`` around asctime and the file block; ``NewLineFormatter`` repeats
  the prefix on continuation lines after ``\r\n``; DEBUG ``fileinfo`` such as
  ``model_executor/.../fp8_utils.py``), process tags from ``decorate_logs`` /
  ``_add_prefix`` (``(APIServer pid=1)``, ``(EngineCore_0 pid=…)``,
  ``(VllmWorker rank=0 pid=…)``; Ray's ``(RayWorkerVllm pid=…)``).
* stats: ``vllm/engine/metrics.py`` (V0), ``vllm/v1/metrics/loggers.py`` @
  005a810b (V1 ``Engine %03d: …``) and the newest ``log_parts`` form
  (``Deferred: %d reqs``, ``Preemptions: %d``, ``External prefix cache hit
  rate``, ``MM cache hit rate``, ``%d Engines Aggregated:``);
  ``vllm/v1/spec_decode/metrics.py`` (``SpecDecoding metrics: …``).
* lifecycle: ``vllm/entrypoints/logger.py`` @ 01ff1262 (old ``Received request
  %s: prompt: %r, params: …``) and newer (``Received request %s: params: %s,
  lora_request: %s.``), ``Added request %s.``, V1 ``Aborted request(s) %s.``
  (``",".join(request_ids)``), ``InputProcessor.assign_request_id`` (8-hex suffix).
* pressure: ``vllm/core/scheduler.py`` (preemption warning), PyTorch
  ``c10/cuda/CUDACachingAllocator.cpp`` (OOM text, ``capacty`` in some
  releases), ``vllm/v1/engine/exceptions.py`` / ``core.py`` (engine death).
* uvicorn: ``uvicorn/logging.py`` @ 1554a8a5 (``AccessFormatter``).
* prefixes: moby/moby ``api/server/httputils/write_log_stream.go``
  (RFC3339NanoFixed), kubernetes ``pkg/kubelet/kuberuntime/logs/logs.go`` and
  kubectl ``pkg/cmd/logs/logs.go`` (``[pod/%s/%s] ``), systemd
  ``src/shared/logs-show.c`` (``-o short``: ``%b %d %H:%M:%S``; ``-o
  short-iso``: ``%Y-%m-%dT%H:%M:%S%z`` older, ``+00:00`` newer; then `` host
  ident[pid]: ``).
* SGLang: sgl-project/sglang ``python/sglang/srt/managers/scheduler.py`` /
  ``scheduler_metrics_mixin.py`` (``Decode batch. #running-req: …``,
  ``Prefill batch. …``, ``KV cache pool is full. Retract requests. …``) and
  ``configure_logger`` (``[%(asctime)s{prefix}] %(message)s``).
* text-generation-inference: huggingface/text-generation-inference
  ``router/src/server.rs`` (``tracing::info!("Success")`` in the
  ``generate`` span), rendered by tracing-subscriber's default text layer.
"""

import datetime as dt
from pathlib import Path

import polars as pl

from logforensics.ingest import FILE_FORMATS, ParseContext, SourceFile, detect
from logforensics.ingest.serverlog import split_prefixes
from logforensics.model import source_label
from logforensics.model import source_labels as labels

UTC = dt.timezone.utc
CTX = ParseContext(year=2026)


def prefixes_split(lines: list[str]) -> pl.DataFrame:
    """`split_prefixes` of lines numbered from 1, as one instance's (vllm-0, 2026)."""
    return split_prefixes(
        pl.DataFrame({"line_no": range(1, len(lines) + 1), "text": lines}), "vllm-0", 2026
    )


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
    assert "peer" not in rows.columns  # no stage reads uvicorn's ip:port (one a request)
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
    # cited by the line that says what happened (the timeout), not the separator at line 2
    assert labels(events["source"]) == ["instance-1.log:7"]
    assert result.unparsed == 0
    assert result.parsed == 2 + len(PROXY_TRACEBACK.splitlines())


def test_a_traceback_is_cited_by_the_exception_that_names_its_kind(tmp_path):
    """The kind is the first of NETWORK_KINDS the block names: a block whose first exception
    names none is cited at the one that does; a block naming no kind, at its first exception."""
    text = (
        'INFO:     10.0.0.2:1 - "GET /health HTTP/1.1" 200 OK\n'
        "Traceback (most recent call last):\n"
        '  File "/app/proxy.py", line 70, in _forward\n'
        "    resp = opener.open(req)\n"
        "ValueError: bad header\n"
        "\n"
        "During handling of the above exception, another exception occurred:\n"
        "\n"
        "Traceback (most recent call last):\n"
        '  File "/app/proxy.py", line 76, in _forward\n'
        "    self.send_error(502)\n"
        "BrokenPipeError: [Errno 32] Broken pipe\n"
        'INFO:     10.0.0.2:2 - "GET /health HTTP/1.1" 200 OK\n'
        "Traceback (most recent call last):\n"
        '  File "/app/proxy.py", line 90, in do_POST\n'
        "    body = json.loads(raw)\n"
        "KeyError: 'model'\n"
    )
    events = parse(tmp_path, text).table("proxy_events")
    assert events["kind"].to_list() == ["broken_pipe", "exception"]
    assert labels(events["source"]) == ["instance-1.log:12", "instance-1.log:17"]


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


ESC = "\x1b"
V1_NEWEST = (
    "(APIServer pid=1) INFO 02-24 06:16:23 [loggers.py:123] Engine 000: Avg prompt throughput: "
    "0.0 tokens/s, Avg generation throughput: 301.0 tokens/s, Running: 30 reqs, Waiting: 12 reqs, "
    "Deferred: 2 reqs, Preemptions: 4, GPU KV cache usage: 99.8%, Prefix cache hit rate: 9.7%, "
    "External prefix cache hit rate: 50.0%, MM cache hit rate: 3.1%"
)


def test_newest_v1_stats_fields_and_preemption_counts(tmp_path):
    text = (
        "\n".join(
            [
                V1_NEWEST,
                # DP: the aggregated logger's prefix
                "(APIServer pid=1) INFO 02-24 06:16:33 [loggers.py:123] 2 Engines Aggregated: Avg "
                "prompt throughput: 5.0 tokens/s, Avg generation throughput: 6.0 tokens/s, Running: "
                "7 reqs, Waiting: 0 reqs, GPU KV cache usage: 50.0%, Prefix cache hit rate: 1.0%",
                # the first V1 format: no Engine prefix, trailing space, no KV usage
                "INFO 02-24 06:16:43 [loggers.py:60] Avg prompt throughput: 1.0 tokens/s, Avg "
                "generation throughput: 2.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs ",
                # V0 with prefix caching: a second line, noise
                "INFO 02-24 06:16:53 metrics.py:367] Prefix cache hit rate: GPU: 12.50%, CPU: 0.00%",
                # spec decoding (old and new) is noise, not stats
                "INFO 02-24 06:16:53 [metrics.py:86] SpecDecoding metrics: Draft acceptance rate: "
                "62.5%, Accepted: 50 tokens, Drafted: 80 tokens",
                "(APIServer pid=1) INFO 02-24 06:16:53 [metrics.py:96] SpecDecoding metrics: Mean "
                "acceptance length: 2.31, Accepted throughput: 10.00 tokens/s, Drafted throughput: "
                "20.00 tokens/s, Accepted: 100 tokens, Drafted: 200 tokens, Per-position acceptance "
                "rate: 0.800, 0.500, Avg Draft acceptance rate: 50.0%",
            ]
        )
        + "\n"
    )
    result = parse(tmp_path, text)
    stats = result.table("engine_stats")
    assert stats["running"].to_list() == [30, 7, 1]
    assert stats["waiting"].to_list() == [12, 0, 0]
    assert stats["gpu_kv_pct"].to_list() == [99.8, 50.0, None]
    assert stats["prefix_hit_pct"].to_list() == [9.7, 1.0, None]  # not the External one
    assert stats["gen_tps"].to_list() == [301.0, 6.0, 2.0]
    events = result.table("engine_events")
    assert events.with_columns(source_label()).select("kind", "detail", "source").rows() == [
        ("preempted", "4 preemption(s) in the stats interval (stats line)", "instance-1.log:1")
    ]
    assert (result.parsed, result.noise, result.unparsed) == (3, 3, 0)


def test_prefixes_fileinfo_process_tags_and_colours(tmp_path):
    stats = (
        "Engine 000: Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 "
        "tokens/s, Running: {} reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%, Prefix cache "
        "hit rate: 0.0%"
    )
    lines = [
        # colours: level, grey asctime and file block (ColoredFormatter), cyan process tag
        f"{ESC}[1;36m(APIServer pid=1){ESC}[0;0m {ESC}[32mINFO{ESC}[0m {ESC}[90m02-24 06:16:00"
        f"{ESC}[0m {ESC}[90m[loggers.py:123]{ESC}[0m " + stats.format(1),
        # DEBUG builds print a shortened relative path, with "..." in it
        "(EngineCore_0 pid=312) DEBUG 02-24 06:16:01 [v1/engine/core.py:12] " + stats.format(2),
        "(VllmWorker rank=0 pid=400) DEBUG 02-24 06:16:02 "
        "[model_executor/.../quantization/utils/fp8_utils.py:88] " + stats.format(3),
        "(RayWorkerVllm pid=1756) INFO 02-24 06:16:03 [worker.py:1] " + stats.format(4),
        # vllm-ascend appends milliseconds
        "(Worker_TP0 pid=9) INFO 02-24 06:16:04.250 [loggers.py:1] " + stats.format(5),
        # the old format has no opening bracket
        "INFO 02-24 06:16:05 metrics.py:351] " + stats.format(6),
    ]
    result = parse(tmp_path, "\n".join(lines) + "\n")
    got = result.table("engine_stats")
    assert got["running"].to_list() == [1, 2, 3, 4, 5, 6]
    assert got["at"][0] == dt.datetime(2026, 2, 24, 6, 16, 0, tzinfo=UTC)
    assert got["at"][4] == dt.datetime(2026, 2, 24, 6, 16, 4, 250000, tzinfo=UTC)
    assert result.unparsed == 0


def test_multi_line_messages_repeat_the_prefix(tmp_path):
    # NewLineFormatter: "\n" in a message becomes "\r\n" + the whole prefix
    prefix = "(EngineCore_0 pid=7) ERROR 02-24 06:20:04 [core.py:700] "
    text = (
        "\r\n".join(
            prefix + part
            for part in [
                "EngineCore encountered a fatal error.",
                "Traceback (most recent call last):",
                '  File "/usr/local/lib/python3.12/site-packages/vllm/v1/engine/core.py", line 691, '
                "in run_engine_core",
                "    engine_core.run_busy_loop()",
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.31 GiB. GPU 0 has a "
                "total capacty of 79.15 GiB of which 1.20 GiB is free.",
            ]
        )
        + "\r\n"
        + "(APIServer pid=1) INFO 02-24 06:20:05 [api_server.py:1] Some config:\r\n"
        + "(APIServer pid=1) INFO 02-24 06:20:05 [api_server.py:1]   max_model_len: 8192\r\n"
    )
    result = parse(tmp_path, text)
    events = result.table("engine_events")
    assert events["kind"].to_list() == ["oom", "engine_dead"]
    # the traceback cited at its OutOfMemoryError, not at "Traceback (most recent call last)"
    assert labels(events["source"]) == ["instance-1.log:5", "instance-1.log:1"]
    assert (
        "(innermost frame /usr/local/lib/python3.12/site-packages/vllm/v1/engine/core.py:691"
        in (events["detail"][0])
    )
    assert (result.parsed, result.noise, result.unparsed) == (5, 2, 0)
    assert any("CRLF" in note for note in result.notes)


def test_lifecycle_new_forms_aborted_lists_and_suffixes(tmp_path):
    text = (
        "(APIServer pid=1) INFO 02-24 06:16:02 [logger.py:39] Received request "
        "chatcmpl-bench-1a2b3c4d-17: params: SamplingParams(n=1, presence_penalty=0.0, "
        "max_tokens=256, stop=[], skip_special_tokens=True), lora_request: None.\n"
        "(APIServer pid=1) INFO 02-24 06:16:02 [async_llm.py:270] Added request "
        "chatcmpl-bench-1a2b3c4d-17-1f2e3d4c.\n"
        "(APIServer pid=1) INFO 02-24 06:16:09 [async_llm.py:377] Aborted request(s) "
        "chatcmpl-a1,chatcmpl-b2,chatcmpl-c3.\n"
        "INFO 02-24 06:16:10 [logger.py:41] Received request cmpl-7d9e-0: prompt: 'Explain [lf-3-17] "
        "briefly', params: SamplingParams(n=1), prompt_token_ids: [1, 2], prompt_embeds shape: None, "
        "lora_request: None, prompt_adapter_request: None.\n"
    )
    rows = parse(tmp_path, text).table("server_requests")
    assert rows["event"].to_list() == [
        "received",
        "received",
        "aborted",
        "aborted",
        "aborted",
        "received",
    ]
    assert rows["request_id"].to_list() == [
        "chatcmpl-bench-1a2b3c4d-17",
        "chatcmpl-bench-1a2b3c4d-17-1f2e3d4c",
        "chatcmpl-a1",
        "chatcmpl-b2",
        "chatcmpl-c3",
        "cmpl-7d9e-0",
    ]
    assert rows["prompt_marker"].to_list() == [None] * 5 + ["[lf-3-17]"]
    assert labels(rows["source"])[2:5] == ["instance-1.log:3"] * 3


def test_more_pressure_messages(tmp_path):
    text = (
        "WARNING 02-24 06:16:03 scheduler.py:1560] Sequence group cmpl-9f-0 is preempted by "
        "PreemptionMode.RECOMPUTE mode because there is not enough KV cache space. This can affect "
        "the end-to-end performance. Increase gpu_memory_utilization or tensor_parallel_size to "
        "provide more KV cache memory. total_num_cumulative_preemption=51\n"
        "ERROR 03-11 17:23:51 [core.py:305] ValueError: No available memory for the cache blocks. "
        "Try increasing `gpu_memory_utilization` when initializing the engine.\n"
        "ERROR 03-11 17:23:52 [engine.py:1] RuntimeError: CUDA out of memory. Tried to allocate "
        "20.00 MiB (GPU 0; 15.77 GiB total capacity; 14.10 GiB already allocated; 3.12 MiB free; "
        "14.50 GiB reserved in total by PyTorch)\n"
        "ERROR 03-11 17:23:53 [client.py:1] AsyncEngineDeadError: Background loop is not running. "
        "If it was running, inspect the output to find the stacktrace of the error that caused "
        "the background loop to stop (AsyncEngineDeadError).\n"
    )
    events = parse(tmp_path, text).table("engine_events")
    assert events["kind"].to_list() == ["preempted", "kv_full", "oom", "engine_dead"]


def test_journalctl_and_plain_iso_prefixes(tmp_path):
    body = (
        "INFO 02-24 06:16:0{} [loggers.py:123] Engine 000: Running: {} reqs, Waiting: 0 reqs, "
        "GPU KV cache usage: 1.0%"
    )
    text = (
        "\n".join(
            [
                # -o short-iso, older systemd: +0000; newer: +00:00; -precise: microseconds
                "2026-02-24T06:16:01+0000 gpu-node-3 vllm[41233]: " + body.format(1, 1),
                "2026-02-24T15:16:02+09:00 gpu-node-3 vllm[41233]: " + body.format(2, 2),
                "2026-02-24T06:16:03.482913+00:00 gpu-node-3 vllm[41233]: " + body.format(3, 3),
                # -o short: no year (the context's), the server's zone
                "Feb 24 06:16:04 gpu-node-3 vllm[41233]: " + body.format(4, 4),
                # plain ISO with a space, naive (server zone), or with an offset
                '2026-02-24 06:16:05,250 INFO:     10.0.0.2:1 - "POST /v1/completions HTTP/1.1" 200 OK',
                '2026-02-24T01:16:06.5-05:00 INFO:     10.0.0.2:2 - "POST /v1/completions HTTP/1.1" 200 OK',
            ]
        )
        + "\n"
    )
    result = parse(tmp_path, text)
    stats = result.table("engine_stats")
    assert stats["at"].to_list() == [
        dt.datetime(2026, 2, 24, 6, 16, s, us, tzinfo=UTC)
        for s, us in [(1, 0), (2, 0), (3, 482913), (4, 0)]
    ]
    access = result.table("server_requests")
    assert access["at"].to_list() == [
        dt.datetime(2026, 2, 24, 6, 16, 5, 250000, tzinfo=UTC),
        dt.datetime(2026, 2, 24, 6, 16, 6, 500000, tzinfo=UTC),
    ]
    assert stats["running"].to_list() == [1, 2, 3, 4]
    assert result.unparsed == 0


def test_journal_short_stamps_use_the_server_zone_and_roll_over_new_year(tmp_path):
    line = '{} gpu-node-3 vllm[7]: INFO:     10.0.0.2:1 - "POST /v1/completions HTTP/1.1" 200 OK'
    text = "\n".join(line.format(s) for s in ["Dec 31 23:59:59", "Jan  1 00:00:09"]) + "\n"
    path = tmp_path / "node.log"
    path.write_text(text)
    source = SourceFile(path, "node.log", "node")
    result = detect(source).parse(source, ParseContext(year=2025, server_tz="Asia/Seoul"))
    assert result.table("server_requests")["at"].to_list() == [
        dt.datetime(2025, 12, 31, 14, 59, 59, tzinfo=UTC),
        dt.datetime(2025, 12, 31, 15, 0, 9, tzinfo=UTC),
    ]


def test_sglang_scheduler_lines(tmp_path):
    text = (
        "[2026-02-24 06:16:40 TP0] Decode batch. #running-req: 12, #token: 8000, token usage: 0.93, "
        "cuda graph: True, gen throughput (token/s): 512.33, #queue-req: 4\n"
        "[2026-02-24 06:16:41 DP0 TP0] Prefill batch. #new-seq: 1, #new-token: 7, #cached-token: 0, "
        "token usage: 0.95, #running-req: 12, #queue-req: 3\n"
        "[2026-02-24 06:16:42 TP0] Decode batch, #running-req: 13, #full token: 500, full token "
        "usage: 0.41, #swa token: 100, swa token usage: 0.20, cuda graph: True, gen throughput "
        "(token/s): 100.00, #queue-req: 0\n"
        "[2026-02-24 06:16:43 TP0] KV cache pool is full. Retract requests. #retracted_reqs: 1, "
        "#new_token_ratio: 0.9998 -> 1.0000\n"
        '[2026-02-24 06:16:44] INFO:     127.0.0.1:40000 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
    )
    result = parse(tmp_path, text, "sglang-0.log")
    stats = result.table("engine_stats")
    assert stats["running"].to_list() == [12, 12, 13]
    assert stats["waiting"].to_list() == [4, 3, 0]
    assert stats["gpu_kv_pct"].to_list() == [93.0, 95.0, 41.0]
    assert stats["gen_tps"].to_list() == [512.33, None, 100.0]
    assert stats["at"][0] == dt.datetime(2026, 2, 24, 6, 16, 40, tzinfo=UTC)
    assert result.table("engine_events")["kind"].to_list() == ["preempted"]
    assert result.table("server_requests")["http_status"].to_list() == [200]
    assert result.unparsed == 0


def test_text_generation_inference_router_lines(tmp_path):
    text = (
        "2026-02-24T06:16:44.123456Z  INFO generate{parameters=GenerateParameters { best_of: None, "
        'temperature: None, max_new_tokens: Some(20) } total_time="1.2s" validation_time="1ms" '
        'queue_time="50us" inference_time="1.1s" time_per_token="55ms" seed="None"}: '
        "text_generation_router::server: router/src/server.rs:305: Success\n"
        "2026-02-24T06:16:45.123456Z ERROR compat_generate{default_return_full_text=true}:"
        "generate_stream{parameters=GenerateParameters { max_new_tokens: Some(20) }}:"
        "generate_stream{}:infer:send_error: text_generation_router::infer: "
        "router/src/infer/mod.rs:866: Request failed during generation: Server error: Out of "
        "available cache blocks\n"
        "2026-02-24T06:16:46.000000Z  INFO text_generation_launcher: Starting shard rank=0\n"
    )
    result = parse(tmp_path, text, "tgi.log")
    access = result.table("server_requests")
    assert access.select("event", "path", "http_status").rows() == [("access", "/generate", 200)]
    assert access["at"][0] == dt.datetime(2026, 2, 24, 6, 16, 44, 123456, tzinfo=UTC)
    assert result.table("engine_events")["kind"].to_list() == ["kv_full"]
    assert (result.parsed, result.noise, result.unparsed) == (2, 1, 0)


def test_robustness_garbage_binary_huge_line_crlf_truncated(tmp_path):
    huge = "y" * 10_000_000
    text = (
        (V1_STATS + "\r\n").encode()
        + bytes(range(256))
        + b"\n"
        + huge.encode()
        + b"\n"
        + b"\xff\xfe\x00garbage\x00\r\n"
        + b'INFO:     10.0.0.2:1 - "POST /v1/chat/completions HTTP/1.1" 200 OK'
    )
    path = tmp_path / "junk.log"
    path.write_bytes(text)
    source = SourceFile(path, "junk.log", "junk")
    result = FILE_FORMATS["server_log"].parse(source, CTX)
    assert result.parsed + result.noise + result.unparsed == result.lines
    assert result.parsed == 2
    notes = " | ".join(result.notes)
    for word in ("not UTF-8", "NUL", "no newline", "10,000,000 bytes", "CRLF"):
        assert word in notes, word


def test_empty_and_binary_files_are_skipped_with_a_reason(tmp_path):
    from logforensics.ingest.inputs import load

    (tmp_path / "empty.log").write_bytes(b"")
    (tmp_path / "blob.bin").write_bytes(bytes(range(256)) * 64)
    inputs = load([tmp_path / "empty.log", tmp_path / "blob.bin"], CTX)
    reasons = {f.path.rsplit("/", 1)[-1]: f.skipped for f in inputs.files}
    assert reasons == {"empty.log": "empty file", "blob.bin": "no known format"}


def test_time_only_stamps_are_dated_by_their_neighbours(tmp_path):
    """SGLang's ``[23:59:58 TP0]`` has no date: the nearest dated line gives it; a step back
    of seconds (another TP rank) is no new day, past midnight is."""
    text = (
        "2026-02-24T23:59:58.000000000Z [23:59:58 TP0] Decode batch. #running-req: 3, #token: 800, "
        "token usage: 0.10, gen throughput (token/s): 50.00, #queue-req: 0\n"
        "[23:59:59 TP1] Decode batch. #running-req: 3, #token: 800, token usage: 0.10, gen "
        "throughput (token/s): 50.00, #queue-req: 0\n"
        "[23:59:57 TP0] Prefill batch. #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: "
        "0.12, #running-req: 3, #queue-req: 1\n"
        "[00:00:01 TP0] Decode batch. #running-req: 4, #token: 900, token usage: 0.11, gen "
        "throughput (token/s): 51.00, #queue-req: 0\n"
    )
    result = parse(tmp_path, text, "sglang.log")
    assert result.table("engine_stats")["at"].to_list() == [
        dt.datetime(2026, 2, 24, 23, 59, 58, tzinfo=UTC),
        dt.datetime(2026, 2, 24, 23, 59, 59, tzinfo=UTC),
        dt.datetime(2026, 2, 24, 23, 59, 57, tzinfo=UTC),
        dt.datetime(2026, 2, 25, 0, 0, 1, tzinfo=UTC),
    ]
    alone = parse(tmp_path, "\n".join(text.splitlines()[1:]) + "\n", "sglang-2.log")
    assert alone.table("engine_stats")["at"].is_null().all()  # no date anywhere: untimed
    assert alone.unparsed == 0


def test_caret_notation_escapes_are_stripped(tmp_path):
    text = (
        "^[[1;36m(VllmWorkerProcess pid=4012)^[[0;0m INFO 02-24 06:16:05 metrics.py:351] Avg prompt "
        "throughput: 0.0 tokens/s, Avg generation throughput: 41.7 tokens/s, Running: 3 reqs, "
        "Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 1.2%, CPU KV cache usage: 0.0%.^M\n"
    )
    result = parse(tmp_path, text)
    assert result.table("engine_stats")["running"].to_list() == [3]
    assert result.table("engine_stats")["at"][0] == dt.datetime(2026, 2, 24, 6, 16, 5, tzinfo=UTC)


def test_runtime_stamps_sliced_read_as_the_generic_format():
    """A runtime stamp's fixed-width reading (seconds by one format, fraction digits as an
    integer) gives the instant the generic ``%.f`` format gives, at every width."""
    from logforensics import timeparse

    stamps = [
        "2026-02-24T06:16:03.5Z",
        "2026-02-24T06:16:03.05Z",
        "2026-02-24T06:16:03.123Z",
        "2026-02-24T06:16:03.123456Z",
        "2026-02-24T06:16:03.1234567Z",
        "2026-02-24T06:16:03.999999999Z",
        "2026-12-31T23:59:59.000000001Z",
        "2028-02-29T00:00:00.9Z",
        "2026-02-30T00:00:00.9Z",  # no such day: null, as the generic format gives
    ]
    frame = pl.DataFrame({"line": [s + " rest" for s in stamps]})
    end = pl.col("line").str.find(" ", literal=True)
    got = frame.select(
        timeparse.sliced_runtime_stamp_to_utc(pl.col("line"), end).alias("fast"),
        timeparse.runtime_stamp_to_utc(pl.col("line").str.slice(0, end)).alias("generic"),
    )
    assert got["fast"].to_list() == got["generic"].to_list()
    assert got["fast"][5] == dt.datetime(2026, 2, 24, 6, 16, 3, 999999, tzinfo=dt.timezone.utc)
    assert got["fast"][-1] is None


def test_runtime_stamps_beside_other_iso_layers(tmp_path):
    """Sliced runtime stamps and lines the ISO regex reads (no fraction, a CRI tag, a
    journal's unit, a naive stamp) in one file: each layer as the regex alone reads it."""
    lines = [
        '2026-02-24T06:16:03.25Z INFO:     10.0.0.2:1 - "GET /health HTTP/1.1" 200 OK',
        '2026-02-24T06:16:04Z INFO:     10.0.0.2:2 - "GET /health HTTP/1.1" 200 OK',
        '2026-02-24T06:16:05.5Z stdout F INFO:     10.0.0.2:3 - "GET /a HTTP/1.1" 200 OK',
        '2026-02-24T06:16:06.75Z host vllm[12]: INFO:     10.0.0.2:4 - "GET /b HTTP/1.1" 200 OK',
        "2026-02-24 06:16:07 plain text",
        "(APIServer pid=1) no stamp at all",
        "2026-02-24T06:16:08.125Z [x]: not a journal unit",
    ]
    frame = prefixes_split(lines)
    utc = dt.timezone.utc
    assert frame["body"].to_list() == [
        'INFO:     10.0.0.2:1 - "GET /health HTTP/1.1" 200 OK',
        'INFO:     10.0.0.2:2 - "GET /health HTTP/1.1" 200 OK',
        'INFO:     10.0.0.2:3 - "GET /a HTTP/1.1" 200 OK',
        'INFO:     10.0.0.2:4 - "GET /b HTTP/1.1" 200 OK',
        "plain text",
        "no stamp at all",
        "[x]: not a journal unit",
    ]
    assert frame["at"].to_list()[:5] + frame["at"].to_list()[6:] == [
        dt.datetime(2026, 2, 24, 6, 16, 3, 250000, tzinfo=utc),
        dt.datetime(2026, 2, 24, 6, 16, 4, tzinfo=utc),
        dt.datetime(2026, 2, 24, 6, 16, 5, 500000, tzinfo=utc),
        dt.datetime(2026, 2, 24, 6, 16, 6, 750000, tzinfo=utc),
        dt.datetime(2026, 2, 24, 6, 16, 7, tzinfo=utc),
        dt.datetime(2026, 2, 24, 6, 16, 8, 125000, tzinfo=utc),
    ]
    assert frame["at_precision_s"].to_list()[:5] == [1e-6, 1.0, 1e-6, 1e-6, 1.0]


def test_v1_stats_layout_read_as_each_field_reads_it():
    """A stats line V1_STATS_RE reads whole gives what the per-field regexes give."""
    from logforensics.ingest.engines.vllm import V1_STATS_RE, VllmStats

    msgs = [
        "Engine 000: Avg prompt throughput: 12.0 tokens/s, Avg generation throughput: 150.0 "
        "tokens/s, Running: 4 reqs, Waiting: 0 reqs, GPU KV cache usage: 41.7%, Prefix cache "
        "hit rate: 12.5%",
        "Engine 001: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 0.0 "
        "tokens/s, Running: 0 reqs, Waiting: 0 reqs, CPU KV cache usage: 0.0%",
        "Engine 000: Avg prompt throughput: 1.2.3 tokens/s, Avg generation throughput: 7 "
        "tokens/s, Running: 12 reqs, Waiting: 30 reqs, CPU KV cache usage: 100.0%, Prefix cache "
        "hit rate: 0.0%",
    ]
    hits = pl.DataFrame(
        {"instance": "i", "at": None, "line_no": range(1, len(msgs) + 1), "msg": msgs},
        schema_overrides={"at": pl.Datetime("us", "UTC")},
    ).with_columns(pl.col("msg").str.extract_groups(V1_STATS_RE).alias("_g"))
    assert hits["_g"].struct.field("running").is_not_null().all()
    source = SourceFile(Path("x.log"), "x.log", "i")
    fast, slow = VllmStats._v1_stats(hits, source), VllmStats._stats(hits, source)
    assert fast.equals(slow)


def test_runtime_stamp_of_no_such_day_borrows_the_neighbours_time():
    lines = ["2026-02-24T06:16:03.25Z a", "2026-02-30T06:16:09.5Z b", "2026-02-24T06:16:04Z c"]
    frame = split_prefixes(pl.DataFrame({"line_no": [1, 2, 3], "text": lines}), "x", 2026)
    at = dt.datetime(2026, 2, 24, 6, 16, 3, 250000, tzinfo=dt.timezone.utc)
    assert frame.select("body", "at", "at_precision_s").rows()[:2] == [
        ("a", at, 1e-6),
        ("b", at, 1.75),  # the gap to the next stamp plus its precision
    ]


def test_a_record_line_cut_short_is_unparsed_not_noise(tmp_path):
    """Real lines of corpus kv-tiny's instance-1.log (vLLM 0.32.0), the last two cut short
    as a killed writer or a full disk leaves them: a stats line and an access line that
    their formats cannot read are shown as unparsed, never swallowed as chatter, while a
    cut line of a module that logs no record stays noise."""
    whole = (
        "(APIServer pid=31372) INFO 11-29 16:15:51 [loggers.py:335] Engine 000: Avg prompt "
        "throughput: 31.1 tokens/s, Avg generation throughput: 22.9 tokens/s, Running: 5 reqs, "
        "Waiting: 0 reqs, CPU KV cache usage: 21.9%, Prefix cache hit rate: 0.0%\n"
        'INFO:     127.0.0.1:59264 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
    )
    cut = (
        "(APIServer pid=31372) INFO 11-29 16:16:21 [loggers.py:335] Engine 000: Avg prompt "
        "throughput: 0.0 tokens/s, Avg genera\n"
        'INFO:     127.0.0.1:59264 - "POST /\n'
        "(APIServer pid=31372) INFO 11-29 16:21:34 [async_llm.py:9\n"
    )
    result = parse(tmp_path, whole + cut)
    assert (result.lines, result.parsed, result.noise) == (5, 2, 1)
    assert [line for line, _ in result.unparsed_examples] == [3, 4]
    assert result.tables["engine_stats"].height == 1


def test_vllm_stamp_split_as_its_whole_regex_reads_it():
    """The stamp's groups and `msg` (sliced after the stamp) are what VLLM_STAMP_RE, read
    by Python's own engine, captures from each line; a line the gate passes but the regex
    does not keeps its whole text as `msg`."""
    import re

    from logforensics.ingest.serverlog import VLLM_STAMP_RE

    lines = [
        "INFO 02-24 06:16:03 [loggers.py:123] Engine 000: Avg prompt throughput: 1.0 tokens/s",
        "WARNING 02-24 06:16:04 metrics.py:351] old layout",
        "DEBUG 02-24 06:16:05 [v1/engine/core.py:12] débit 10 µs — ünïcode",
        "INFO 02-24 06:16:06.123 [api_server.py:9] ascend's milliseconds",
        "ERROR 02-24 06:16:07 no file at all",
        "INFO 2 is not a stamp",
        "CRITICAL 02-24 06:16:08 [x.py:1] ",
        "INFO 02-24 06:16:09 [modèle.py:3] a file name not ASCII",
    ]
    frame = prefixes_split(lines)
    for line, (level, msg) in zip(lines, frame.select("level", "msg").iter_rows(), strict=True):
        match = re.match(VLLM_STAMP_RE, line)
        assert (level, msg) == ((match["level"], match["msg"]) if match else (None, line))
