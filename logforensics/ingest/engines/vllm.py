"""vLLM's own lines: stats, request lifecycle, memory pressure.

Each format's text was taken from the real software's source:

* stats: vLLM ``vllm/engine/metrics.py`` (V0 ``LoggingStatLogger``: ``Running: %d
  reqs, Swapped: %d reqs, Pending: %d reqs, GPU KV cache usage: %.1f%%, CPU KV
  cache usage: %.1f%%``), ``vllm/v1/metrics/loggers.py`` @ 005a810b (V1: ``Engine
  %03d: Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f
  tokens/s, Running: %d reqs, Waiting: %d reqs, GPU KV cache usage: %.1f%%,
  Prefix cache hit rate: %.1f%%``) and the newest ``log_parts`` form (optional
  ``Deferred: %d reqs``, ``Preemptions: %d``, ``Corrupted: %d reqs``,
  ``External prefix cache hit rate: %.1f%%``, ``MM cache hit rate: %.1f%%``;
  ``N Engines Aggregated:`` prefix). Fields are read one by one, so inserted
  or dropped fields in other versions do not break the line. ``SpecDecoding
  metrics:`` lines (``vllm/v1/spec_decode/metrics.py``) and V0's second
  ``Prefix cache hit rate: GPU: …, CPU: …`` line are noise, not stats.
* lifecycle: vLLM ``vllm/entrypoints/logger.py`` (old ``Received request %s:
  prompt: %r, params: ...``; new ``Received request %s: params: %s,
  lora_request: %s.``), ``Added request %s.``, ``Finished request %s.``,
  ``Aborted request %s.`` and the newer V1 ``Aborted request(s) %s.`` with the
  ids comma-joined (one row per id).
* pressure: V0 ``vllm/core/scheduler.py`` (``Sequence group %s is preempted by
  %s mode because there is not enough KV cache space``), PyTorch's CUDA OOM
  message (both wordings, ``capacty`` misspelling too), vLLM's engine-death
  messages (``EngineDeadError``, ``EngineCore encountered a fatal error``,
  ``Background loop is not running``, ``Engine loop is not running``), SGLang's
  ``KV cache pool is full. Retract requests.`` (``scheduler.py``).
"""

from __future__ import annotations

import re

import polars as pl

from logforensics.ingest import register_line_format
from logforensics.ingest.base import (
    Claim,
    Sample,
    SourceFile,
)
from logforensics.ingest.pylogs import CHAIN_TEXT, EXCEPTION_RE
from logforensics.ingest.toolkit import (
    RegexLineFormat,
    first_kind,
    msg_number,
    no_lines,
    source_expr,
)

SPEC_DECODE_RE = r"SpecDecoding metrics: |^Prefix cache hit rate: GPU: "
# V1's stats line as vLLM 0.10-0.32 print it (loggers.py; a CPU build names its cache "CPU",
# the prefix hit rate is left out before any request): each field once, nothing else.
V1_STATS_RE = (
    r"^Engine \d+: Avg prompt throughput: (?P<prompt>[\d.]+) tokens/s, "
    r"Avg generation throughput: (?P<gen>[\d.]+) tokens/s, Running: (?P<running>\d+) reqs, "
    r"Waiting: (?P<waiting>\d+) reqs, (?:GPU|CPU) KV cache usage: (?P<kv>[\d.]+)%"
    r"(?:, Prefix cache hit rate: (?P<prefix>[\d.]+)%)?$"
)


@register_line_format
class VllmStats(RegexLineFormat):
    name = "vllm_stats"
    priority = 10
    per_line = True
    samples = (
        Sample(
            "corpus kv-tiny instance-2.log:157 (vLLM 0.32.0 CPU, V1 loggers.py)",
            "(APIServer pid=31615) INFO 11-29 16:19:53 [loggers.py:335] Engine 000: Avg prompt "
            "throughput: 0.0 tokens/s, Avg generation throughput: 138.5 tokens/s, Running: 3 reqs, "
            "Waiting: 7 reqs, CPU KV cache usage: 80.0%, Prefix cache hit rate: 0.0%",
            tables=(("engine_stats", 1),),
        ),
        Sample(
            "layout of vllm/engine/metrics.py V0 LoggingStatLogger; values invented",
            "INFO 02-24 06:16:03 metrics.py:351] Avg prompt throughput: 0.0 tokens/s, Avg generation "
            "throughput: 41.7 tokens/s, Running: 3 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV "
            "cache usage: 1.2%, CPU KV cache usage: 0.0%.",
            tables=(("engine_stats", 1),),
        ),
    )
    pattern = r"Running: \d+ reqs"

    def sniff(self, bodies: list[str]) -> bool:
        return super().sniff(bodies) or any(re.search(SPEC_DECODE_RE, b) for b in bodies if b)

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        # a literal test first: the regex then reads only the lines that name "Running: "
        hits = self.matching(lines.filter(pl.col("msg").str.contains("Running: ", literal=True)))
        hits = hits.with_columns(pl.col("msg").str.extract_groups(V1_STATS_RE).alias("_g"))
        fast = hits.select(pl.col("_g").struct.field("running").is_not_null()).to_series()
        if fast.all():
            stats = self._v1_stats(hits, source)
        elif not fast.any():
            stats = self._stats(hits, source)
        else:  # each line by its own reading, in the lines' order
            stats = pl.concat(
                [self._v1_stats(hits.filter(fast), source), self._stats(hits.filter(~fast), source)]
            ).sort("source")
        # "Preemptions: N" is printed only when N > 0: N requests preempted this interval
        # (never in a line V1_STATS_RE reads whole).
        preempted = (
            (hits.filter(~fast) if fast.any() else hits)
            .with_columns(msg_number(r"Preemptions: (\d+)", pl.Int64).alias("_n"))
            .filter(pl.col("_n") > 0)
        )
        src = source_expr(source.display).alias("source")
        events = preempted.select(
            "instance",
            "at",
            pl.lit("preempted").alias("kind"),
            pl.format("{} preemption(s) in the stats interval (stats line)", pl.col("_n")).alias(
                "detail"
            ),
            src,
        )
        msg = pl.col("msg")
        # SPEC_DECODE_RE as literal tests
        spec_decode = msg.str.contains(
            "SpecDecoding metrics: ", literal=True
        ) | msg.str.starts_with("Prefix cache hit rate: GPU: ")
        noise = lines.filter(spec_decode)["line_no"]
        return Claim(
            records=hits["line_no"],
            noise=noise,
            tables={"engine_stats": stats, "engine_events": events},
        )

    @staticmethod
    def _v1_stats(hits: pl.DataFrame, source: SourceFile) -> pl.DataFrame:
        """Lines in V1's usual layout, read by one regex (`V1_STATS_RE`'s groups as `_g`):
        the values each field's own regex (`_stats`) reads from them."""
        g = pl.col("_g")
        return hits.select(
            "instance",
            "at",
            g.struct.field("running").cast(pl.Int64, strict=False).alias("running"),
            g.struct.field("waiting").cast(pl.Int64, strict=False).alias("waiting"),
            pl.lit(None, dtype=pl.Int64).alias("swapped"),
            g.struct.field("kv").cast(pl.Float64, strict=False).alias("gpu_kv_pct"),
            pl.lit(None, dtype=pl.Float64).alias("cpu_kv_pct"),
            g.struct.field("prompt").cast(pl.Float64, strict=False).alias("prompt_tps"),
            g.struct.field("gen").cast(pl.Float64, strict=False).alias("gen_tps"),
            g.struct.field("prefix").cast(pl.Float64, strict=False).alias("prefix_hit_pct"),
            source_expr(source.display).alias("source"),
        )

    @staticmethod
    def _stats(hits: pl.DataFrame, source: SourceFile) -> pl.DataFrame:
        gpu_kv = msg_number(r"GPU KV cache usage: ([\d.]+)%")
        cpu_kv = msg_number(r"CPU KV cache usage: ([\d.]+)%")
        v0_layout = pl.col("msg").str.contains(r"Swapped: \d+ reqs")
        return hits.select(
            "instance",
            "at",
            msg_number(r"Running: (\d+) reqs", pl.Int64).alias("running"),
            pl.coalesce(
                msg_number(r"Waiting: (\d+) reqs", pl.Int64),
                msg_number(r"Pending: (\d+) reqs", pl.Int64),
            ).alias("waiting"),
            msg_number(r"Swapped: (\d+) reqs", pl.Int64).alias("swapped"),
            # A CPU build's V1 line names its only KV cache "CPU KV cache usage":
            # that is the device cache, so it stands in for the GPU's.
            pl.when(gpu_kv.is_null() & ~v0_layout)
            .then(cpu_kv)
            .otherwise(gpu_kv)
            .alias("gpu_kv_pct"),
            pl.when(v0_layout).then(cpu_kv).alias("cpu_kv_pct"),
            msg_number(r"Avg prompt throughput: ([\d.]+) tokens/s").alias("prompt_tps"),
            msg_number(r"Avg generation throughput: ([\d.]+) tokens/s").alias("gen_tps"),
            # not "External prefix cache hit rate" (a KV connector's), not V0's "GPU: …" line
            msg_number(r"(?:^|[^\w ])\s*Prefix cache hit rate: ([\d.]+)%").alias("prefix_hit_pct"),
            source_expr(source.display).alias("source"),
        )


UVICORN_ACCESS_RE = (
    r'^(?:INFO|WARNING|ERROR|DEBUG):\s+(?P<peer>\S+) - "(?P<method>[A-Z]+) (?P<path>\S+) '
    r'HTTP/[\d.]+" (?P<status>\d{3})\b'
)


# The seed's prompts end in "({i})"; `logforensics loadtest` writes "[lf-...]".
PROMPT_MARKER_RE = r"(\[lf-[\w.-]+\]|\(\d+\))"
LIFECYCLE_RE = r"\b(?:Received|Added|Finished|Aborted) request(?:\(s\))? (\S+?)[:.,]?(?:\s|$)"
# V1 (0.32: async_llm.py "Request %s aborted."): the client's own id, without the suffix
REQUEST_ABORTED_RE = r"^Request (\S+) aborted\.$"


@register_line_format
class VllmLifecycle(RegexLineFormat):
    name = "vllm_lifecycle"
    priority = 12
    per_line = True
    samples = (
        Sample(
            "corpus kv-tiny instance-1.log (vLLM 0.32.0 --enable-log-requests)",
            "(APIServer pid=31372) INFO 11-29 16:09:05 [request_logger.py:65] Received request "
            "chatcmpl-8d471985c66099d7: params: SamplingParams(n=1, presence_penalty=0.0, "
            "temperature=0.0, max_tokens=768), lora_request: None.\n"
            "(APIServer pid=31372) INFO 11-29 16:09:05 [async_llm.py:578] Added request "
            "chatcmpl-8d471985c66099d7-bc0857dc.\n"
            "(APIServer pid=31372) INFO 11-29 16:21:34 [async_llm.py:922] Aborted request(s) "
            "chatcmpl-991efeba62823d03-bf7a37d3.\n"
            "(APIServer pid=31372) INFO 11-29 16:21:34 [async_llm.py:783] Request "
            "chatcmpl-991efeba62823d03 aborted.",
            tables=(("server_requests", 4),),
        ),
    )
    pattern = LIFECYCLE_RE + "|" + REQUEST_ABORTED_RE

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        hits = self.matching(lines)
        msg = pl.col("msg")
        verb = pl.coalesce(
            msg.str.extract(r"\b(Received|Added|Finished|Aborted) request", 1),
            pl.when(msg.str.contains(REQUEST_ABORTED_RE)).then(pl.lit("Aborted")),
        )
        prompt = msg.str.extract(r"prompt: (.*?), params:", 1)
        # "Aborted request(s) a,b,c." names several (external) ids: one row each.
        many = msg.str.extract(r"\bAborted request\(s\) (\S+)", 1).str.strip_suffix(".")
        one = pl.coalesce(msg.str.extract(LIFECYCLE_RE, 1), msg.str.extract(REQUEST_ABORTED_RE, 1))
        rows = (
            hits.select(
                "instance",
                "at",
                "at_precision_s",
                verb.replace_strict(
                    {
                        "Received": "received",
                        "Added": "received",
                        "Finished": "finished",
                        "Aborted": "aborted",
                    },
                    default=None,
                ).alias("event"),
                pl.when(many.is_not_null())
                .then(many.str.split(","))
                .otherwise(pl.concat_list(one))
                .alias("request_id"),
                prompt.str.extract(PROMPT_MARKER_RE, 1).alias("prompt_marker"),
                source_expr(source.display).alias("source"),
            )
            .explode("request_id")
            .filter(pl.col("request_id").str.len_chars() > 0)
        )
        return Claim(records=hits["line_no"], tables={"server_requests": rows})


ENGINE_PRESSURE = {
    "preempted": (
        r"preempted by PreemptionMode|[Pp]reempt(?:ed|ing) request"
        r"|KV cache pool is full\. Retract requests|[Dd]ecode out of memory happened"
    ),
    "kv_full": (
        r"All KV cache blocks are full|KV cache exhausted|No available (?:KV cache )?blocks"
        r"|No available memory for the cache blocks"
        r"|larger than the maximum number of tokens that can be stored in KV cache"
    ),
    "oom": r"CUDA out of memory|OutOfMemoryError|total capac(?:i)?ty of [\d.]+ [KMGT]iB",
    "engine_dead": (
        r"EngineDeadError|Engine loop is not running|Background loop is not running"
        r"|engine core .*died|EngineCore .*failed|EngineCore encountered"
    ),
    "queue_timeout": r"Request timeout after \d+s",
}


@register_line_format
class VllmPressure(RegexLineFormat):
    """Lines that say the engine ran short of memory, preempted, or died."""

    name = "vllm_pressure"
    priority = 15
    per_line = True
    samples = (
        Sample(
            "layout of vllm/core/scheduler.py (V0 preemption warning); values invented",
            "WARNING 02-24 06:20:01 [scheduler.py:1560] Sequence group 12 is preempted by "
            "PreemptionMode.RECOMPUTE mode because there is not enough KV cache space. This can "
            "affect the end-to-end performance.",
            tables=(("engine_events", 1),),
        ),
        Sample(
            "vLLM PR #42827's per-request preemption warning: its message as the PR's "
            "description shows it (cut there), behind vLLM's own level/time/file prefix",
            "WARNING 05-16 10:02:11 [scheduler.py:846] Preempting request cmpl-abc123: 480 "
            "computed tokens lost",
            tables=(("engine_events", 1),),
        ),
        Sample(
            "SGLang's scheduler retracting requests when decode runs out of KV memory, as quoted "
            "in sgl-project/sglang#4184 (the ratio values as the scheduler prints them)",
            "[2025-03-07 21:49:33 TP13] Decode out of memory happened. #retracted_reqs: 1, "
            "#new_token_ratio: 0.9998 -> 1.0000\n"
            "[2025-03-07 21:49:34 TP0] KV cache pool is full. Retract requests. #retracted_reqs: 1, "
            "#new_token_ratio: 0.9998 -> 1.0000",
            tables=(("engine_events", 2),),
        ),
    )
    pattern = "|".join(f"(?:{rx})" for rx in ENGINE_PRESSURE.values())

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        hits = self.matching(lines)
        rows = hits.select(
            "instance",
            "at",
            first_kind(ENGINE_PRESSURE, pl.col("msg")).alias("kind"),
            pl.col("msg").str.slice(0, 300).alias("detail"),
            source_expr(source.display).alias("source"),
        )
        return Claim(records=hits["line_no"], tables={"engine_events": rows})


# Where an orderly shutdown begins (vLLM 0.32's "[shutdown]" lines, uvicorn's, a signal)...
SHUTDOWN_RE = (
    r"\[shutdown\]|^Shutting down$|received signal=SIG(?:TERM|INT)"
    r"|^Received (?:SIGTERM|SIGINT|signal)|^Shutting down the (?:engine|server)"
)
# ...and where a (re)start begins, which ends it.
STARTUP_RE = (
    r"vLLM API server version|non-default args: |^Started server process"
    r"|Initializing a V1 LLM engine|Initializing an LLM engine"
)


# "Starting vLLM server on http://127.0.0.1:8001" (0.32), "Starting vLLM API server 0 on
# http://0.0.0.0:8000" (0.10–0.11), older "Starting vLLM API server on …", uvicorn's own.
LISTEN_URL_RE = (
    r"(?:Starting vLLM (?:API )?server(?: \d+)? on|Uvicorn running on) "
    r"(?:https?://)?(?P<address>[^\s/]+)"
)
ARGS_RE = r"non-default args: \{"
# vLLM 0.32's shutdown, the streams still running then: "[shutdown] EngineCore: aborting
# in-flight requests count=3"
ABORTED_IN_FLIGHT_RE = r"aborting in-flight requests count=(\d+)"


def stopping_shape(msg: pl.Expr) -> pl.Expr:
    """What a stopping server prints: its own stamped lines, uvicorn's lifecycle lines, and
    their tracebacks (frames, code, exceptions, chain text: indented or exception-shaped).
    Any other line after a shutdown began is read on its own: noise never swallows what
    follows it."""
    return (
        pl.col("level").is_not_null()
        | msg.str.contains(r"^(?:INFO|WARNING|ERROR|DEBUG|CRITICAL):\s")
        | msg.str.contains(r"^\s")
        | msg.str.contains(EXCEPTION_RE)
        | msg.str.contains(CHAIN_TEXT)
    )


@register_line_format
class VllmProcess(RegexLineFormat):
    """A server process's life in its log: an orderly shutdown, and a restart.

    What a server prints after an orderly shutdown began (until it starts again), in
    the shapes a stopping server prints (`stopping_shape`), is noise: vLLM 0.32.0
    (corpus compute-loadtest) logs ``EngineDeadError`` and a traceback *after*
    ``[shutdown] API server: shutdown triggered``; the engine was
    told to stop, it did not die. A real engine death comes before any shutdown line,
    and a killed process prints none. Request lines and stats there keep their
    formats (they claim first).

    A second start-up in one log (``non-default args: …`` again, corpus
    crash-restart) is an `engine_events` ``restarted`` row: the instance went away
    and came back, after an orderly shutdown or (no shutdown line) killed or crashed.
    Each life's first shutdown line is a ``shutdown`` row (where a restart into another
    log finds the life before ended: `inputs`), and vLLM 0.32's ``aborting in-flight
    requests count=N`` an ``aborted`` row: the engine's own count of the requests it cut.

    Its start-up lines name the address it serves on (`ParseResult.addresses`): a
    proxy's upstream address or a saved ``/metrics`` scrape named by port is mapped
    to the instance whose start-up names it. From ``non-default args: {…}`` only a
    printed ``'port'`` (with ``'host'`` where printed: ``host:port``, else ``:port``).
    """

    name = "vllm_process"
    priority = 13
    samples = (
        Sample(
            "corpus compute-loadtest instance-1.log:196-221 (vLLM 0.32.0 SIGTERM at the end)",
            "(APIServer pid=28852) INFO 12-01 13:08:43 [launcher.py:254] [shutdown] API server: "
            "shutdown triggered\n"
            "(APIServer pid=28852) ERROR 12-01 13:08:43 [async_llm.py:906] AsyncLLM output_handler "
            "failed.\n"
            "(APIServer pid=28852) ERROR 12-01 13:08:43 [async_llm.py:906] Traceback (most recent "
            "call last):\n"
            '(APIServer pid=28852) ERROR 12-01 13:08:43 [async_llm.py:906]   File "/srv/llm/vllmcpu/'
            'lib/python3.11/site-packages/vllm/v1/engine/core_client.py", line 1235, in '
            "get_output_async\n"
            "(APIServer pid=28852) ERROR 12-01 13:08:43 [async_llm.py:906]     raise "
            "self._format_exception(outputs) from None\n"
            "(APIServer pid=28852) ERROR 12-01 13:08:43 [async_llm.py:906] vllm.v1.engine.exceptions."
            "EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root "
            "cause.\n"
            "INFO:     Shutting down",
            status="any",
            tables=(("engine_events", 1),),
        ),
        Sample(
            "corpus crash-restart instance-2.log:8,119 (vLLM 0.32.0 killed with SIGKILL, started "
            "again: its second start-up; the first is the start-up address format's)",
            "(APIServer pid=8497) INFO 12-01 15:04:24 [api_utils.py:286] non-default args: "
            "{'model_tag': '/srv/llm/tiny-llama', 'host': '127.0.0.1', 'port': 8002}\n"
            "(APIServer pid=8497) INFO 12-01 15:05:01 [entry.py:140] Starting vLLM server on "
            "http://127.0.0.1:8002\n"
            "(APIServer pid=8497) INFO 12-01 15:04:24 [api_utils.py:286] non-default args: "
            "{'model_tag': '/srv/llm/tiny-llama', 'host': '127.0.0.1', 'port': 8002}",
            status="any",
            tables=(("engine_events", 1),),
        ),
        Sample(
            "recordings/aiperf-restart instance-1.log:224-229 (vLLM 0.32.0 given SIGTERM with "
            "3 streams running: its shutdown, and the requests it aborted)",
            "(EngineCore pid=16629) INFO 12-05 23:43:46 [core.py:1454] [shutdown] EngineCore: "
            "trigger received signal=SIGTERM\n"
            "(APIServer pid=16587) INFO 12-05 23:43:46 [launcher.py:254] [shutdown] API server: "
            "shutdown triggered\n"
            "(APIServer pid=16587) INFO 12-05 23:43:46 [launcher.py:270] [shutdown] API server: "
            "stopping engine client mode=abort timeout=0s\n"
            "(EngineCore pid=16629) INFO 12-05 23:43:46 [core.py:1635] [shutdown] EngineCore: "
            "start mode=abort timeout=0s\n"
            "(APIServer pid=16587) INFO 12-05 23:43:46 [core_client.py:770] [shutdown] MPClient: "
            "start timeout=0s\n"
            "(EngineCore pid=16629) INFO 12-05 23:43:46 [core.py:1644] [shutdown] EngineCore: "
            "aborting in-flight requests count=3",
            status="any",
            tables=(("engine_events", 2),),
        ),
        Sample(
            "corpus kv-tiny instance-1.log (vLLM 0.32.0 start-up)",
            "(APIServer pid=31372) INFO 11-29 16:07:48 [api_utils.py:286] non-default args: "
            "{'model_tag': '/srv/llm/tiny-llama', 'host': '127.0.0.1', 'port': 8001, 'model': "
            "'/srv/llm/tiny-llama', 'dtype': 'bfloat16', 'max_model_len': 1024}\n"
            "(APIServer pid=31372) INFO 11-29 16:08:40 [entry.py:140] Starting vLLM server on "
            "http://127.0.0.1:8001",
            status="noise",
        ),
        Sample(
            "vllm/entrypoints/openai/api_server.py (0.10: 'Starting vLLM API server %d on %s'); "
            "uvicorn/server.py ('Uvicorn running on %s://%s:%d (Press CTRL+C to quit)')",
            "INFO 02-24 05:58:41 [api_server.py:1818] Starting vLLM API server 0 on "
            "http://0.0.0.0:8000\n"
            "INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)",
            status="noise",
        ),
    )
    decisive = False
    supersedes = ("python_traceback", "vllm_pressure", "runtime_chatter")
    pattern = SHUTDOWN_RE + "|" + LISTEN_URL_RE + "|" + ARGS_RE
    # a log with neither vLLM's stamp nor uvicorn's "INFO:" is no vLLM server's (a proxy's)
    woken_by = pl.col("level").is_not_null() | pl.col("msg").str.starts_with("INFO:")

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        msg = pl.col("msg")
        if not lines.select(self.woken_by.any()).item():
            return Claim(records=no_lines())
        starts = msg.str.contains("non-default args: ", literal=True)
        listening = msg.str.contains("Starting vLLM", literal=True) | msg.str.contains(
            "Uvicorn running on", literal=True
        )
        stops = (
            msg.str.contains("hutdown", literal=True)
            | msg.str.contains("Shutting down", literal=True)
            | msg.str.contains("SIG", literal=True)
        )
        if not lines.select((starts | listening | stops).any()).item():
            return Claim(records=no_lines())
        stopping = msg.str.contains(SHUTDOWN_RE)
        phase = (
            pl.when(stopping)
            .then(True)
            .when(msg.str.contains(STARTUP_RE))
            .then(False)
            .forward_fill()
            .over("instance")
            .fill_null(False)
        )
        marked = lines.with_columns(
            phase.alias("_down"),
            (starts | (listening & msg.str.contains(LISTEN_URL_RE))).alias("_start"),
            # a start after the instance's first
            (starts & (starts.cast(pl.Int32).cum_sum().over("instance") > 1)).alias("_again"),
            stopping.cast(pl.Int32).cum_sum().over("instance").alias("_stops"),
        )
        restarts = (
            marked.filter(starts)
            .with_columns(
                # did a shutdown line come between the previous start and this one?
                (pl.col("_stops") > pl.col("_stops").shift(1).over("instance")).alias("_orderly")
            )
            .filter(pl.col("_again"))
        )
        events = restarts.select(
            "instance",
            "at",
            pl.lit("restarted").alias("kind"),
            pl.when(pl.col("_orderly"))
            .then(pl.lit("the server started again after an orderly shutdown"))
            .otherwise(
                pl.lit("the server started again with no shutdown line before: killed or crashed")
            )
            .alias("detail"),
            source_expr(source.display).alias("source"),
            "line_no",
        )
        ends = self._life_ends(marked, starts, stopping, source)
        events = pl.concat([events, ends], how="vertical_relaxed")
        stopping_chatter = pl.col("_down") & stopping_shape(msg)
        claimed = pl.col("line_no").is_in(ends["line_no"].implode())
        noise = marked.filter((stopping_chatter | pl.col("_start")) & ~pl.col("_again") & ~claimed)
        return Claim(
            records=pl.concat([restarts["line_no"], ends["line_no"]]),
            noise=noise["line_no"],
            tables={"engine_events": events.drop("line_no")},
            addresses=self._addresses(marked.filter(pl.col("_start"))),
        )

    @staticmethod
    def _life_ends(
        marked: pl.DataFrame, starts: pl.Expr, stopping: pl.Expr, source: SourceFile
    ) -> pl.DataFrame:
        """Each life's first shutdown line (`shutdown`: where a later log of the same
        instance, started after this one ended, finds its restart began) and the requests
        its engine aborted then (`aborted`: vLLM 0.32's ``aborting in-flight requests
        count=3``, streams the clients got cut short)."""
        msg = pl.col("msg")
        aborted = pl.col("_aborted")
        lives = (
            marked.rechunk()
            .with_columns(
                starts.cast(pl.Int32).cum_sum().over("instance").alias("_life"),
                msg.str.extract(ABORTED_IN_FLIGHT_RE, 1)
                .cast(pl.Int64, strict=False)
                .alias("_aborted"),
                stopping.alias("_stopping"),
            )
            .with_columns(
                (
                    pl.col("_stopping")
                    & (pl.col("_stopping").cast(pl.Int32).cum_sum().over("instance", "_life") == 1)
                ).alias("_first_stop")
            )
            .filter(pl.col("_first_stop") | (aborted > 0))
        )
        return lives.select(
            "instance",
            "at",
            pl.when(aborted > 0)
            .then(pl.lit("aborted"))
            .otherwise(pl.lit("shutdown"))
            .alias("kind"),
            pl.when(aborted > 0)
            .then(pl.format("the engine aborted {} request(s) in flight at shutdown", aborted))
            .otherwise(msg.str.slice(0, 300))
            .alias("detail"),
            source_expr(source.display).alias("source"),
            "line_no",
        )

    @staticmethod
    def _addresses(started: pl.DataFrame) -> dict[str, list[str]]:
        msg = pl.col("msg")
        host = msg.str.extract(r"'host': '([^']+)'", 1)
        port = msg.str.extract(r"'port': (\d+)", 1)
        found = started.select(
            "instance",
            pl.coalesce(
                msg.str.extract(LISTEN_URL_RE, 1),
                pl.when(port.is_not_null()).then(
                    pl.concat_str([host.fill_null(""), pl.lit(":"), port])
                ),
            ).alias("address"),
        ).drop_nulls()
        addresses: dict[str, list[str]] = {}
        for instance, address in found.unique(maintain_order=True).iter_rows():
            addresses.setdefault(instance, []).append(address)
        return addresses
