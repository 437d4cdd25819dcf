"""Every number a verdict rule compares against, in one place.

Each field is one command-line option (`--kv-full-pct` for `kv_full_pct`):
the CLI builds its options from these fields, and the README's threshold
table is rendered from them, so the help text below is what users read.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field


def _threshold(default: float, meaning: str) -> float:
    return field(default=default, metadata={"help": meaning})


@dataclass(frozen=True)
class Thresholds:
    kv_full_pct: float = _threshold(
        90.0,
        "KV cache usage (GPU or CPU, as the engine reports it) that counts as full.",
    )
    idle_kv_pct: float = _threshold(
        50.0,
        "KV cache usage below which an instance had room (with nothing waiting); "
        "a compute verdict without waiting requests also needs KV usage below it.",
    )
    stats_pad_s: float = _threshold(
        10.0,
        "Stats lines up to this long after a failed request ended still describe its "
        "window (vLLM prints them every 10 s).",
    )
    proxy_window_s: float = _threshold(
        5.0, "Proxy errors this close to a failed request's window count for it."
    )
    front_wait_s: float = _threshold(
        5.0,
        "A failed request that reached its instance this long after it was sent (and after "
        "half its time at the client) waited in front of it: the time was lost before the engine.",
    )
    log_silence_s: float = _threshold(
        30.0,
        "An instance log that ends this long before the test's last request while another "
        "instance's log goes on has stopped.",
    )
    queue_time_s: float = _threshold(
        1.0,
        "Time a request waited in an engine's queue before it was scheduled (its OpenTelemetry "
        "span: vLLM's gen_ai.latency.time_in_queue, SGLang's prefill_waiting) that counts as "
        "queued.",
    )
    reached_share: float = _threshold(
        0.5, "Share of failures that reached an instance for that signal to corroborate."
    )
    latency_growth: float = _threshold(
        2.0, "P50 latency of the last step over the first's that counts as growth."
    )
    throughput_plateau: float = _threshold(
        0.1, "Throughput growth below this share, for more load, counts as a plateau."
    )
    plateau_load_growth: float = _threshold(
        0.3, "How much more concurrency a step needs over the one before to test a plateau."
    )
    explained_share: float = _threshold(
        0.5,
        "Share of the failed requests the causes found must explain; below it the verdict "
        "is inconclusive.",
    )
    min_confidence: float = _threshold(
        0.4, "A cause whose own evidence scores below this is not a verdict."
    )


def threshold_fields() -> list[dataclasses.Field]:
    """The fields in declaration order, for the CLI's options and the README table."""
    return list(dataclasses.fields(Thresholds))


def option_name(name: str) -> str:
    """The command-line option of a threshold field."""
    return "--" + name.replace("_", "-")
