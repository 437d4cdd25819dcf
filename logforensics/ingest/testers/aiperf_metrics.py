"""AIPerf's ``server_metrics_export.jsonl``: the engines' ``/metrics`` as the load tester
scraped them through the run. Exact text: real output of AIPerf 0.13.0 (PyPI; no 0.14 is
released) with ``--server-metrics URL --server-metrics-formats json csv jsonl parquet``
against vLLM 0.32 (its model, ``common/models/server_metrics_models.py`` ``SlimRecord``):

* one compact JSON line per scrape of an endpoint: ``endpoint_url``, ``timestamp_ns``
  (epoch ns, when the answer's first byte came), ``endpoint_latency_ns``, ``metrics``
  (family name → ``[{"labels": {…}, "value": x}]``, histograms as ``buckets`` / ``sum`` /
  ``count``), ``request_sent_ns``, ``first_byte_ns`` and, from 0.12, the phase
  (``benchmark_phase`` warmup | profiling, absent for the scrape before them);
* counters are the raw cumulative values, their ``_total`` dropped by the parser AIPerf
  uses (``vllm:num_preemptions``); a scrape whose text repeats the previous one is skipped.

Read as a Prometheus server's samples are (`ingest.prometheus`): the endpoint's
``host:port`` names the instance until a log announces that address; a counter that falls
is a restart of the engine. The JSON and Parquet exports hold deltas from the last sample
before profiling with resets clamped to 0 (a restart there is hidden): they stay summaries.
"""

from __future__ import annotations

import json
import re

import polars as pl

from logforensics import model
from logforensics.ingest import register_file_format
from logforensics.ingest.base import FileFormat, ParseContext, ParseResult, Sample, SourceFile
from logforensics.ingest.labels import name_by_labels
from logforensics.ingest.metrics import KNOWN
from logforensics.ingest.prometheus import SAMPLES, SERIES_LABELS, read_series

FIRST_KEYS = re.compile(r'^\{"endpoint_url":"[^"]*","timestamp_ns":\d+')
HOST_PORT = re.compile(r"^[a-z]+://([^/]+)")


def metric_name(family: str) -> str:
    """The exposition name of a family AIPerf keeps: a known counter's ``_total`` back."""
    return f"{family}_total" if f"{family}_total" in KNOWN else family


@register_file_format
class AIPerfServerMetricsJsonl(FileFormat):
    """AIPerf's per-scrape export of the engines' metrics: `engine_stats` and
    `engine_events` rows per endpoint, as a Prometheus server's answer gives them."""

    name = "aiperf_server_metrics_jsonl"
    role = "server"
    priority = 35
    metrics_source = True
    labelled_rows = True
    samples = (
        Sample(
            "real output: AIPerf 0.13.0 against vLLM 0.32 (CPU), three scrapes of "
            "server_metrics_export.jsonl (before, in warm-up, in profiling), trimmed to the "
            "vLLM families read and a few others",
            file="aiperf_server_metrics_export.jsonl",
            tables=(("engine_stats", 3),),
        ),
    )

    def sniff(self, head: list[str]) -> bool:
        return bool(head) and bool(FIRST_KEYS.match(head[0])) and '"metrics":{' in head[0]

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        lines = source.lines
        result = ParseResult(lines=lines.height, formats=[self.name])
        rows, bad, phases = [], [], {}
        for line_no, text in lines.iter_rows():
            try:
                record = json.loads(text)
                url, ts = record["endpoint_url"], int(record["timestamp_ns"]) / 1e9
                metrics = record["metrics"]
            except (ValueError, KeyError, TypeError):
                if text.strip():
                    bad.append((line_no, text))
                continue
            phase = record.get("benchmark_phase") or "before the run"
            phases[phase] = phases.get(phase, 0) + 1
            endpoint = (HOST_PORT.match(url) or [None, url])[1]
            prefix = model.source_prefix(f"{source.display}:") * model.LINE_SPAN
            for family, series in metrics.items():
                name = metric_name(family)
                if name not in KNOWN or not isinstance(series, list):
                    continue
                for sample in series:
                    if not isinstance(sample, dict) or "value" not in sample:
                        continue  # a histogram: its buckets are not read here
                    labels = {str(k): str(v) for k, v in (sample.get("labels") or {}).items()}
                    rows.append(
                        {
                            "name": name,
                            "key": "{"
                            + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
                            + "}",
                            **{label: labels.get(label) for label in SERIES_LABELS},
                            "instance": endpoint,
                            "ts": ts,
                            "value": sample["value"],
                            "source": prefix + line_no,
                        }
                    )
        blank = lines.filter(pl.col("text").str.strip_chars() == "").height
        result.parsed, result.noise = lines.height - len(bad) - blank, blank
        if bad:
            result.set_unparsed(
                pl.DataFrame(bad, schema={"line_no": pl.Int64, "text": pl.Utf8}, orient="row")
            )
        result.notes.append(
            "AIPerf's scrapes of the engines' /metrics: "
            + ", ".join(f"{n} {phase}" for phase, n in phases.items())
        )
        if not rows:
            return result
        read_series(pl.DataFrame(rows, schema=SAMPLES), result)
        return result

    def name_instances(
        self, result: ParseResult, logs: dict[str, list[str]], given: dict[str, str]
    ) -> None:
        name_by_labels(result, logs, given)
