"""Lines understood but carrying nothing to analyse: chatter, counted apart from unparsed lines.

Real servers print much that is not evidence: library notices, Python
``warnings`` output and the source line it echoes, C++ runtime warnings,
leak reports at exit, progress bars. Each kind below was seen in the real
start-up and shutdown of vLLM 0.32.0 (corpus) and is named by its pattern;
"unparsed" stays for lines that look like data in an unknown shape.
"""

from __future__ import annotations

import polars as pl

from logforensics.ingest import register_line_format
from logforensics.ingest.base import (
    Claim,
    Sample,
    SourceFile,
)
from logforensics.ingest.toolkit import (
    RegexLineFormat,
    no_lines,
)

# kind → pattern over the message (prefixes stripped); the first that matches names the line.
CHATTER = {
    # Python's warnings.showwarning: "FILE:LINE: CATEGORY: message" (a leak report may run into it)
    "python_warning": r"[\w./-]+\.py:\d+: [A-Z]\w*Warning: ",
    # c10 / glog: "[W1129 16:08:03.856182244 utils.cpp:68] Warning: …"
    "cpp_runtime_log": r"^\[[IWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d+ [\w./-]+:\d+\] ",
    # Triton's import-time notice on CPU builds
    "library_notice": r"^Triton is installed, but doesn't include|^Triton is not installed",
    # nanobind's leak report at interpreter exit
    "leak_report": r"^nanobind: |^ - leaked (?:instance|type|function) |^ - \.\.\. skipped remainder"
    r"|^See https://nanobind\.readthedocs\.io/",
    # tqdm bars: its default "100%|█████| 3/3 [00:01<00:00, …]" and vLLM's
    # "Loading safetensors checkpoint shards: 100% Completed | 1/1 [00:00<00:00, …]"
    "progress_bar": r"\d+%(?:\|[^|]*\|| Completed \|) *\d+/\d+ \[",
    # a server's or proxy's start-up banner naming where it listens: `python -m http.server`'s
    # "Serving HTTP on 0.0.0.0 port 8000 (http://0.0.0.0:8000/) ...", a relay's "… proxy on
    # 127.0.0.1:8000 -> …" (no method, no status: nothing of a request)
    "startup_banner": r"(?i)^Serving HTTP on |^[^\"]*\b(?:listening|proxy|serving|server)\b"
    r"[^\"]*? on (?:https?://)?[\w.\[\]:-]+:\d+\b(?:[^\"]*)$",
}
CHATTER_RE = "|".join(f"(?:{rx})" for rx in CHATTER.values())


@register_line_format
class RuntimeChatter(RegexLineFormat):
    """Chatter of the Python and C++ runtimes under a model server (`CHATTER`), and the
    source line Python's ``warnings`` echoes under a warning (indented, next line)."""

    name = "runtime_chatter"
    priority = 90
    samples = (
        Sample(
            "corpus kv-tiny instance-1.log:25-26 (vLLM 0.32.0 start-up, torch FutureWarning)",
            "/srv/llm/vllmcpu/lib/python3.11/site-packages/vllm/triton_utils/dispatcher.py:138: "
            "FutureWarning: `torch.distributed.reduce_op` is deprecated, please use "
            "`torch.distributed.ReduceOp` instead\n"
            '  if hasattr(value, "__dict__"):',
            status="noise",
        ),
        Sample(
            "corpus kv-tiny instance-1.log (vLLM 0.32.0 CPU start-up: Triton, c10)",
            "Triton is installed, but doesn't include CPU backend. Disabling Triton.\n"
            "[W1129 16:08:03.856182244 utils.cpp:68] Warning: NUMA binding: Using MEMBIND policy "
            "for memory allocation on the NUMA nodes (0). (function init_cpu_memory_env)",
            status="noise",
        ),
        Sample(
            "corpus kv-tiny instance-1.log:228-266 (vLLM 0.32.0 exit: nanobind, resource_tracker)",
            "nanobind: leaked 4 instances!\n"
            ' - leaked instance 0x7fd94d250ba8 of type "triton._C.libtriton.ir.attribute"\n'
            ' - leaked type "triton._C.libtriton.ir.location"\n'
            " - ... skipped remainder\n"
            'nanobind: leaked 514 functions!\n - leaked function "add_fn_attr"\n'
            "nanobind: this is likely caused by a reference counting issue in the binding code.\n"
            "See https://nanobind.readthedocs.io/en/latest/refleaks.html/opt/pyenv/versions/3.11.7/"
            "lib/python3.11/multiprocessing/resource_tracker.py:254: UserWarning: "
            "resource_tracker: There appear to be 1 leaked semaphore objects to clean up at shutdown\n"
            "  warnings.warn('resource_tracker: There appear to be %d '",
            status="noise",
        ),
        Sample(
            "corpus pyproxy-seed proxy.log:1 (the lab's relaying proxy's start-up print); "
            "CPython 3.11 Lib/http/server.py test(): `python -m http.server`'s banner",
            "relay proxy on 127.0.0.1:8000 -> http://127.0.0.1:8001, http://127.0.0.1:8002; "
            "2 workers per upstream, queue timeout 17s, upstream timeout 120s\n"
            "Serving HTTP on 0.0.0.0 port 8000 (http://0.0.0.0:8000/) ...",
            status="noise",
        ),
        Sample(
            "tqdm's bar as vLLM's weight loader prints it to stderr (tqdm format_meter)",
            "Loading safetensors checkpoint shards: 100% Completed | 1/1 [00:00<00:00,  3.10it/s]\n"
            "Processed prompts: 100%|██████████| 8/8 [00:02<00:00,  3.91it/s]",
            status="noise",
        ),
    )
    decisive = False
    pattern = CHATTER_RE

    # One literal scan each: most files hold none of these.
    woken_by = (
        pl.col("msg").str.contains(".py:", literal=True)
        | pl.col("msg").str.starts_with("[")
        | pl.col("msg").str.contains("riton", literal=True)
        | pl.col("msg").str.contains("leaked", literal=True)
        | pl.col("msg").str.contains("%", literal=True)
        | pl.col("msg").str.starts_with("nanobind")
        | pl.col("msg").str.contains(" on ", literal=True)
    )

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        msg = pl.col("msg")
        gate = self.woken_by
        if not lines.select(gate.any()).item():
            return Claim(records=no_lines())
        hit = msg.str.contains(CHATTER_RE)
        warning = msg.str.contains(CHATTER["python_warning"])
        contiguous = pl.col("line_no").diff().fill_null(0) == 1
        echo = msg.str.starts_with("  ") & warning.shift(1).fill_null(False) & contiguous
        noise = lines.filter(hit | echo)["line_no"]
        return Claim(records=no_lines(), noise=noise)


# The start of a line that carries a record — an access line, an engine's stats — which its
# format did not read (cut short by a killed writer or a full disk, or a layout not known
# yet): never noise, it stays unparsed and shown.
UNREAD_RECORD_RE = (
    r'^(?:INFO|WARNING|ERROR|DEBUG|CRITICAL):\s+\S+:\d+ - "'  # uvicorn's access line
    r"|\bAvg prompt throughput: "  # vLLM's stats line
)


@register_line_format
class KnownNoise(RegexLineFormat):
    """Lines understood but carrying nothing to analyse.

    vLLM's other stamped lines (startup, config, the continuation lines of a
    multi-line message, which repeat the prefix), uvicorn's lifecycle lines
    (``Started server process``, ``Application startup complete.``), other
    Python-logging lines with a level and blank lines. Counted apart from
    unparsed lines so a report can say both.
    """

    name = "known_noise"
    priority = 100
    per_line = True
    samples = (
        Sample(
            "corpus kv-tiny instance-1.log (vLLM 0.32.0 start-up and uvicorn shutdown)",
            "(APIServer pid=31372) INFO 11-29 16:07:48 [model.py:2152] Using max model len 1024\n"
            "INFO:     Application shutdown complete.",
            status="noise",
        ),
        Sample(
            "a V0 worker's line (_add_prefix's cyan tag; text of V0 worker/model_runner.py) in "
            "caret notation, as cat -v saves it",
            "^[[1;36m(VllmWorkerProcess pid=4012)^[[0;0m INFO 02-24 06:16:05 model_runner.py:1523] "
            "Graph capturing finished in 5 secs.^M",
            status="noise",
        ),
    )
    decisive = False
    fallback = True
    pattern = r"^$"

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        noise = lines.filter(
            (
                pl.col("level").is_not_null()
                | pl.col("msg").str.contains(r"^(?:INFO|WARNING|ERROR|DEBUG|CRITICAL):\s{1,5}\S")
                | (pl.col("msg").str.strip_chars() == "")
            )
            & ~pl.col("msg").str.contains(UNREAD_RECORD_RE)
        )
        return Claim(records=no_lines(), noise=noise["line_no"])
