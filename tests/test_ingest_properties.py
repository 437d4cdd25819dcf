"""Property: any mix of real-looking lines of every format and garbage parses without
a crash, every line is accounted for, and each valid line is parsed (or noise).

The sample lines follow the formats whose sources are listed at the top of
tests/test_ingest_serverlog.py (vLLM, uvicorn, SGLang, TGI, runtime and journal
prefixes) and tests/test_ingest_proxy.py (nginx, Envoy, HAProxy, Traefik,
LiteLLM, production-stack).
"""

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logforensics.ingest import (
    FILE_FORMATS,
    LINE_FORMATS,
    InputError,
    ParseContext,
    SourceFile,
    detect,
)
from logforensics.ingest.serverlog import classify_lines

CTX = ParseContext(year=2026)
ESC = "\x1b"
P, N = {"parsed"}, {"noise"}

V1 = (
    "(APIServer pid=1) INFO 02-24 06:16:13 [loggers.py:123] Engine 000: Avg prompt throughput: "
    "1843.2 tokens/s, Avg generation throughput: 212.5 tokens/s, Running: 16 reqs, Waiting: 3 reqs, "
    "GPU KV cache usage: 87.4%, Prefix cache hit rate: 12.0%"
)
ITEMS: list[tuple[list[str], set[str]]] = [
    ([V1], P),
    (
        [
            "INFO 02-24 06:16:03 metrics.py:351] Avg prompt throughput: 0.0 tokens/s, Avg generation "
            "throughput: 41.7 tokens/s, Running: 3 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV "
            "cache usage: 1.2%, CPU KV cache usage: 0.0%."
        ],
        P,
    ),
    (
        [
            f"{ESC}[32mINFO{ESC}[0m {ESC}[90m02-24 06:16:23{ESC}[0m {ESC}[90m[loggers.py:123]{ESC}[0m "
            "Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 301.0 "
            "tokens/s, Running: 30 reqs, Waiting: 12 reqs, Deferred: 2 reqs, Preemptions: 4, GPU KV "
            "cache usage: 99.8%, Prefix cache hit rate: 9.7%, MM cache hit rate: 1.0%"
        ],
        P,
    ),
    (
        [
            "(APIServer pid=1) INFO 02-24 06:16:23 [metrics.py:96] SpecDecoding metrics: Mean "
            "acceptance length: 2.31, Accepted throughput: 10.00 tokens/s, Drafted throughput: 20.00 "
            "tokens/s, Accepted: 100 tokens, Drafted: 200 tokens, Per-position acceptance rate: "
            "0.800, 0.500, Avg Draft acceptance rate: 50.0%"
        ],
        N,
    ),
    (
        [
            "(EngineCore_0 pid=312) DEBUG 02-24 06:16:34 [model_executor/.../quantization/utils/"
            "fp8_utils.py:88] Using default W8A8 Block FP8 kernel config"
        ],
        N,
    ),
    (
        [
            "(APIServer pid=1) INFO 02-24 05:58:41 [api_server.py:1395] vLLM API server version 0.10.1.1"
        ],
        N,
    ),
    (
        [
            '(APIServer pid=1) INFO:     10.0.3.7:51234 - "POST /v1/chat/completions HTTP/1.1" 200 OK'
        ],
        P,
    ),
    (['INFO:     10.0.3.7:51236 - "POST /v1/completions HTTP/1.1" 400 Bad Request'], P),
    (["INFO:     Application startup complete."], N),
    (
        [
            "(APIServer pid=1) INFO 02-24 06:16:36 [async_llm.py:1] Aborted request(s) "
            "chatcmpl-a1,chatcmpl-b2."
        ],
        P,
    ),
    (
        [
            "INFO 02-24 06:16:02 [logger.py:41] Received request chatcmpl-abc: prompt: 'hi (17)', "
            "params: SamplingParams(n=1), prompt_token_ids: None, lora_request: None."
        ],
        P,
    ),
    (
        [
            "(APIServer pid=1) INFO 02-24 06:16:36 [async_llm.py:1] Added request chatcmpl-x9-1f2e3d4c."
        ],
        P,
    ),
    (
        [
            "WARNING 02-24 06:16:03 scheduler.py:1560] Sequence group 12 is preempted by "
            "PreemptionMode.RECOMPUTE mode because there is not enough KV cache space."
        ],
        P,
    ),
    (
        [
            "(VllmWorker rank=0 pid=400) ERROR 02-24 06:16:35 [multiproc_executor.py:1] "
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
            "total capacty of 79.15 GiB of which 1.20 GiB is free."
        ],
        P,
    ),
    (
        [
            "Traceback (most recent call last):",
            '  File "/app/proxy.py", line 74, in _forward',
            "    with urllib.request.urlopen(req, timeout=120) as resp:",
            "TimeoutError",
        ],
        P,
    ),
    (
        [
            "[2026-02-24 06:16:40 TP0] Decode batch. #running-req: 12, #token: 8000, token usage: "
            "0.93, cuda graph: True, gen throughput (token/s): 512.33, #queue-req: 4"
        ],
        P,
    ),
    (
        [
            "[2026-02-24 06:16:41 DP0 TP0] Prefill batch. #new-seq: 1, #new-token: 7, #cached-token: "
            "0, token usage: 0.95, #running-req: 12, #queue-req: 3"
        ],
        P,
    ),
    (
        [
            "2026-02-24T06:16:44.123456Z  INFO generate{parameters=GenerateParameters { best_of: None } "
            'total_time="1.2s"}: text_generation_router::server: router/src/server.rs:305: Success'
        ],
        P,
    ),
    (["2026-02-24T06:16:46.000000Z  INFO text_generation_launcher: Starting shard rank=0"], N),
    (
        [
            '10.0.3.7 - - [24/Feb/2026:06:16:03 +0000] "POST /v1/chat/completions HTTP/1.1" 504 167 '
            '"-" "python-requests/2.32.3" 10.0.0.21:8000, 10.0.0.22:8000 502, 504 0.000, 60.001 '
            "60.002"
        ],
        P,
    ),
    (
        [
            '10.244.0.1 - - [25/Feb/2026:10:30:15 +0000] "POST /v1/completions HTTP/1.1" 200 1234 "-" '
            '"Mozilla/5.0" 456 0.032 [default-vllm-svc-8000] [] 10.244.1.7:8000 1234 0.031 200 abc123'
        ],
        P,
    ),
    (
        [
            "2026/02/24 06:16:03 [error] 29#29: *4512 upstream timed out (110: Connection timed out) "
            "while reading response header from upstream, client: 10.0.3.7, server: _, request: "
            '"POST /v1/chat/completions HTTP/1.1", upstream: "http://10.0.0.21:8000/v1/chat/'
            'completions", host: "llm.internal"'
        ],
        P,
    ),
    (["2026/02/24 06:16:07 [notice] 1#1: signal process started"], N),
    (
        [
            '[2026-02-24T06:16:03.482Z] "POST /v1/chat/completions HTTP/1.1" 503 UF,URX 1234 91 2 - '
            '"10.0.3.7" "python-requests/2.32.3" "8d2c4f" "llm.internal" "10.0.0.21:8000"'
        ],
        P,
    ),
    (
        [
            "haproxy[14389]: 10.0.1.2:33317 [06/Feb/2009:12:14:14.655] http-in static/srv1 "
            '10/0/30/69/109 200 2750 - - ---- 1/1/1/1/0 0/0 {1wt.eu} {} "GET /index.html HTTP/1.1"'
        ],
        P,
    ),
    (
        [
            '10.0.3.7 - - [24/Feb/2026:06:16:03 +0000] "POST /v1/chat/completions HTTP/1.1" 502 11 '
            '"-" "curl/8.5.0" 4711 "vllm@kubernetescrd" "http://10.0.0.21:8000" 1ms'
        ],
        P,
    ),
    (
        [
            '{"ClientHost":"10.0.3.7","DownstreamStatus":502,"Duration":1234567,"OriginStatus":0,'
            '"RequestMethod":"POST","RequestPath":"/v1/chat/completions","StartUTC":'
            '"2026-02-24T06:16:03.123456789Z","level":"info"}'
        ],
        P,
    ),
    (
        [
            f"{ESC}[92m06:16:11 - LiteLLM Router:INFO{ESC}[0m: router.py:2901 - litellm.acompletion("
            f"model=hosted_vllm/m){ESC}[31m Exception litellm.Timeout: Request timed out.{ESC}[0m"
        ],
        P,
    ),
    ([f"{ESC}[92m06:16:12 - LiteLLM Proxy:DEBUG{ESC}[0m: proxy_server.py:1 - something"], N),
    (
        [
            f"{ESC}[32;20m[2026-02-24 06:16:13,123] INFO:{ESC}[0m Routing request 8d2c with session "
            "id None to http://10.0.0.21:8000 at 1771913773.123456, process time = 0.0012 "
            f"{ESC}[3m(request.py:350:vllm_router.services.request_service.request){ESC}[0m"
        ],
        P,
    ),
    ([""], N | P),  # a blank line before a traceback joins the block
]
WRAPPERS = [
    "",
    "2026-02-24T06:16:03.482913055Z ",
    "[pod/vllm-0/vllm] 2026-02-24T06:16:03.482913055Z ",
    "2026-02-24T06:16:03+0000 gpu-node-3 vllm[41233]: ",
    "2026-02-24T06:16:03+00:00 gpu-node-3 vllm[41233]: ",
    "Feb 24 06:16:03 gpu-node-3 vllm[41233]: ",
]

garbage = st.binary(max_size=120).filter(lambda b: b"\n" not in b)
valid = st.tuples(st.sampled_from(range(len(ITEMS))), st.sampled_from(WRAPPERS))
entries = st.lists(st.one_of(valid, garbage), max_size=40)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(entries=entries, role=st.sampled_from(["server", "proxy"]), crlf=st.booleans())
def test_every_line_is_accounted_for_and_valid_lines_are_understood(entries, role, crlf):
    chunks: list[bytes] = []
    expected: dict[int, set[str]] = {}
    for entry in entries:
        if isinstance(entry, bytes):
            chunks.append(entry)
            continue
        index, wrapper = entry
        lines, want = ITEMS[index]
        for line in lines:
            chunks.append((wrapper + line).encode())
            expected[len(chunks)] = want
    end = b"\r\n" if crlf else b"\n"
    data = end.join(chunks) + (end if chunks else b"")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mixed.log"
        path.write_bytes(data)
        source = SourceFile(path, "mixed.log", "mixed")
        if data[:2] == b"\x1f\x8b":  # gzip's magic, then garbage: a clear "cannot read"
            try:
                assert source.raw is not None
            except InputError as exc:
                assert "mixed.log: cannot read" in str(exc)
                return
        detect(source)  # never raises, whatever it decides
        fmt = FILE_FORMATS["proxy_log" if role == "proxy" else "server_log"]
        result = fmt.parse(source, CTX)
        fates = classify_lines(source, CTX, role)
    assert result.lines == len(chunks) == fates.height
    assert result.parsed + result.noise + result.unparsed == result.lines
    assert fates["line_no"].to_list() == list(range(1, len(chunks) + 1))
    counts = fates["status"].value_counts()
    got = dict(zip(counts["status"].to_list(), counts["count"].to_list(), strict=True))
    assert got.get("parsed", 0) == result.parsed and got.get("noise", 0) == result.noise
    status = dict(zip(fates["line_no"].to_list(), fates["status"].to_list(), strict=True))
    for line_no, want in expected.items():
        assert status[line_no] in want, (line_no, chunks[line_no - 1], status[line_no])


LINE_BYTES = st.lists(
    st.sampled_from(
        [b"a", b"\xc3\xa9", b" ", b"\r", b"\n", b"\n", b"\x1f", b"\x00", b'"', b"\xff"]
    ),
    max_size=60,
).map(b"".join)


@settings(max_examples=150, deadline=None)
@given(data=LINE_BYTES, gzipped=st.booleans())
def test_native_line_reading_equals_splitting_the_decoded_text(data, gzipped):
    """Whichever reader a file takes (polars' native one, or the Python split it falls
    back to), its lines are the text split at LF, trailing CRs and the empty line after a
    final newline removed, undecodable bytes replaced, and numbered from 1."""
    import gzip as gz

    text = data.decode("utf-8", errors="replace").split("\n")
    if text[-1] == "":
        text.pop()
    expected = [line.rstrip("\r") for line in text]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "x.log"
        path.write_bytes(gz.compress(data) if gzipped else data)
        lines = SourceFile(path, "x.log", "x").lines
        assert lines["text"].to_list() == expected
        assert lines["line_no"].to_list() == list(range(1, len(expected) + 1))
        assert SourceFile(path, "x.log", "x").facts["undecodable"] == (b"\xff" in data)


# Every line format's own real samples (its registry entry), each kept whole (a traceback
# is one block), mixed with garbage: each sample's lines keep their fate. Formats that
# change how *later* lines read (a shutdown phase) are left out: their effect is not local.
SAMPLE_ITEMS = [
    (sample.read().split("\n"), {"parsed", "noise"} if sample.status == "any" else {sample.status})
    for fmt in LINE_FORMATS.values()
    if not fmt.supersedes
    for sample in fmt.samples
]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    entries=st.lists(st.one_of(st.sampled_from(range(len(SAMPLE_ITEMS))), garbage), max_size=25),
    role=st.sampled_from(["server", "proxy"]),
)
def test_registry_samples_mixed_with_garbage_keep_their_fate(entries, role):
    chunks: list[bytes] = []
    expected: dict[int, set[str]] = {}
    for entry in entries:
        if isinstance(entry, bytes):
            chunks.append(entry.replace(b"\r", b""))
            continue
        lines, want = SAMPLE_ITEMS[entry]
        for line in lines:
            chunks.append(line.encode())
            expected[len(chunks)] = want
    data = b"\n".join(chunks) + (b"\n" if chunks else b"")
    if data[:2] == b"\x1f\x8b":
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mixed.log"
        path.write_bytes(data)
        source = SourceFile(path, "mixed.log", "mixed")
        fmt = FILE_FORMATS["proxy_log" if role == "proxy" else "server_log"]
        result = fmt.parse(source, CTX)
        fates = classify_lines(source, CTX, role)
    assert result.parsed + result.noise + result.unparsed == result.lines == len(chunks)
    status = dict(zip(fates["line_no"].to_list(), fates["status"].to_list(), strict=True))
    for line_no, want in expected.items():
        assert status[line_no] in want, (line_no, chunks[line_no - 1], status[line_no])
