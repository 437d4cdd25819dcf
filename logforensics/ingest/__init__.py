"""Read any mix of files and folders into the canonical tables.

Formats register themselves here by name (`register_file_format`,
`register_line_format`), each with an explicit, unique `priority`: file
formats are sniffed and line formats claim lines in that order. `detect`
picks the first file format whose `sniff` accepts a file's first lines.
"""

from __future__ import annotations

from logforensics.ingest.base import (
    Claim,
    FileFormat,
    InputError,
    LineFormat,
    ParseContext,
    ParseResult,
    Sample,
    SourceFile,
)

FILE_FORMATS: dict[str, FileFormat] = {}
LINE_FORMATS: dict[str, LineFormat] = {}


def _register(registry: dict, cls) -> None:
    clash = [f.name for f in registry.values() if f.priority == cls.priority]
    if clash or cls.name in registry:
        raise ValueError(
            f"format {cls.name}: priority {cls.priority} or name already taken {clash}"
        )
    registry[cls.name] = cls()
    ordered = sorted(registry.values(), key=lambda fmt: fmt.priority)
    registry.clear()
    registry.update((fmt.name, fmt) for fmt in ordered)


def register_file_format(cls):
    _register(FILE_FORMATS, cls)
    return cls


def register_line_format(cls):
    _register(LINE_FORMATS, cls)
    return cls


def detect(source: SourceFile) -> FileFormat | None:
    """The first file format (by priority) whose sniff accepts the file, if any."""
    head = source.head()
    if not head:
        return None
    for fmt in FILE_FORMATS.values():
        if fmt.sniff(head):
            return fmt
    return None


# Importing a format's module registers it; the order of imports does not matter.
from logforensics.ingest import metrics, noise, prometheus, pylogs, serverlog, traces  # noqa: E402,F401,I001
from logforensics.ingest.engines import sglang, tgi, vllm  # noqa: E402,F401,I001
from logforensics.ingest.proxies import (  # noqa: E402,F401,I001
    caddy, envoy, epp, haproxy, httpserver, kserve_logger, litellm, nginx, traefik, vllm_router,
)  # fmt: skip
from logforensics.ingest.testers import (  # noqa: E402,F401,I001
    aiperf, aiperf_metrics, console, generic, genai_bench, genai_perf, guidellm, hey, inference_perf, jmeter, k6,
    llm_load_test, llmperf, loadtest_config, locust, seed, vegeta, vllm_bench,
)  # fmt: skip

__all__ = [
    "Claim",
    "FILE_FORMATS",
    "FileFormat",
    "InputError",
    "LINE_FORMATS",
    "LineFormat",
    "ParseContext",
    "ParseResult",
    "Sample",
    "SourceFile",
    "detect",
    "register_file_format",
    "register_line_format",
]
