"""Engine metrics from a Prometheus server: its ``/api/v1/query_range`` answers.

In production vLLM's engine state is not in log files: Prometheus scrapes each
pod's ``/metrics`` (production-stack, llm-d, most Kubernetes set-ups). A
matrix answer (``{"status": "success", "data": {"resultType": "matrix",
"result": [{"metric": {labels}, "values": [[<unix s>, "<value>"], …]}]}}``,
the HTTP API's documented shape) gives the same `engine_stats` and
`engine_events` rows as vLLM's stats lines and saved scrapes, read with the
metric-name table of `ingest.metrics` (old and new vLLM names, SGLang's).

* An instance is a series' ``pod`` label, else its ``instance`` label (the
  scrape address, as a proxy names its upstream); `ingest.labels` maps it to
  the instance whose own log names that pod or announces that address, or to
  the name ``--instance NAME=LABEL`` gives.
* Counters are read as Prometheus reads them: a fall is a reset (the process
  started again), and the increase across it is the new value. A reset is a
  ``restart`` engine event at the last sample before it; a growth of
  ``vllm:num_preemptions_total`` is a ``preempted`` event, of
  ``request_success_total{finished_reason="abort"|"error"}`` a
  ``requests_aborted`` / ``requests_errored`` one; where the engine splits its
  preemptions by why (``vllm:num_preemptions_by_reason_total{reason}``, vLLM PR #58037),
  each reason's growth is its own kind (``metrics.PREEMPTION_REASONS``) and the total is
  not counted again.
* A saved answer's times are its step times (Prometheus fills each step with
  the latest sample up to five minutes old); `ingest.prometheus_api` asks for
  each sample's own time (``timestamp()``) and keeps each sample once.
"""

from __future__ import annotations

import json
import re

import polars as pl

from logforensics import model
from logforensics.ingest import register_file_format
from logforensics.ingest.base import FileFormat, ParseContext, ParseResult, Sample, SourceFile
from logforensics.ingest.labels import name_by_labels
from logforensics.ingest.metrics import (
    BY_REASON,
    COUNTERS,
    GAUGES,
    KNOWN,
    PREEMPTION_REASONS,
    REASON_EVENTS,
    SUCCESS,
)
from logforensics.ingest.toolkit import account_document, read_json_document, seconds_to_utc

SERIES_LABELS = ("pod", "instance", "engine", "model_name", "finished_reason", "reason")
COUNTER_NAMES = [*COUNTERS.values(), SUCCESS, BY_REASON]
GAUGE_NAMES = [name for names in GAUGES.values() for name in names]
STATS_FIELDS = (
    "running",
    "waiting",
    "swapped",
    "gpu_kv_pct",
    "cpu_kv_pct",
    "prompt_tps",
    "gen_tps",
)
SERIES = ["instance", "engine", "model_name"]  # one engine's series (data-parallel engines apart)
SAMPLES = {
    "name": pl.Utf8,
    "key": pl.Utf8,  # the series' labels without its name, as text
    **{label: pl.Utf8 for label in SERIES_LABELS},
    "ts": pl.Float64,
    "value": pl.Float64,
    "source": model.SOURCE,
}
NAME_EXAMPLES = 5


def parse_answer(text: str) -> dict:
    """A Prometheus API answer, every number kept as text (sample values are text already)."""
    return json.loads(text, parse_float=str, parse_int=str)


def series_samples(result: list, origin: str) -> tuple[pl.DataFrame, int]:
    """One row per sample of a matrix (or vector) answer's series, and how many entries
    were not series at all. Each sample's `source` is ``<origin> <name>{labels} @<unix s>``."""
    meta, values, odd = [], [], 0
    for series in result:
        if not isinstance(series, dict) or not isinstance(series.get("metric"), dict):
            odd += 1
            continue
        labels = {str(k): str(v) for k, v in series["metric"].items()}
        key = (
            "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()) if k != "__name__") + "}"
        )
        name = labels.get("__name__")
        points = series.get("values")
        if points is None and series.get("value") is not None:
            points = [series["value"]]
        meta.append(
            {
                "name": name,
                "key": key,
                **{label: labels.get(label) for label in SERIES_LABELS},
                "prefix": model.source_prefix(f"{origin} {name or ''}{key} @") * model.LINE_SPAN,
            }
        )
        values.append([[str(x) for x in p] for p in points or [] if isinstance(p, list)])
    schema = {k: v for k, v in SAMPLES.items() if k not in ("ts", "value", "source")}
    frame = pl.DataFrame(meta, schema={**schema, "prefix": pl.Int64}).with_columns(
        pl.Series("point", values, dtype=pl.List(pl.List(pl.Utf8)))
    )
    ts = pl.col("point").list.get(0, null_on_oob=True).cast(pl.Float64, strict=False)
    samples = (
        frame.explode("point")
        .filter(pl.col("point").is_not_null())
        .with_columns(
            ts.alias("ts"),
            pl.col("point")
            .list.get(1, null_on_oob=True)
            .cast(pl.Float64, strict=False)
            .alias("value"),
        )
        .with_columns((pl.col("prefix") + pl.col("ts").floor().cast(pl.Int64)).alias("source"))
    )
    return samples.select(list(SAMPLES)).cast(SAMPLES), odd


def label_name() -> pl.Expr:
    """The instance a series describes, as the cluster names it: its pod, else its address."""
    return pl.coalesce(pl.col("pod"), pl.col("instance"))


def _increase(value: pl.Expr, previous: pl.Expr) -> pl.Expr:
    """A counter's growth since the previous sample; across a reset, its new value."""
    return (
        pl.when(previous.is_null())
        .then(None)
        .when(value >= previous)
        .then(value - previous)
        .otherwise(value)
    )


def engine_tables(samples: pl.DataFrame) -> tuple[dict[str, pl.DataFrame], list[str]]:
    """`engine_stats` and `engine_events` from named samples (`instance`, `at` set), and notes."""
    known = samples.filter(pl.col("name").is_in(list(KNOWN)) & pl.col("at").is_not_null())
    keys = [*SERIES, "at"]
    order = {name: i for i, name in enumerate(GAUGE_NAMES + COUNTER_NAMES)}

    def pick(names: list[str]) -> pl.Expr:
        out = pl.lit(None, dtype=pl.Float64)
        for name in reversed(names):
            out = pl.coalesce(pl.col("value").filter(pl.col("name") == name).first(), out)
        return out

    rows = (
        known.filter(~pl.col("name").is_in([SUCCESS, BY_REASON]))
        .with_columns(pl.col("name").replace_strict(order, default=99).alias("_order"))
        .group_by(keys)
        .agg(
            *[pick(names).alias(field) for field, names in GAUGES.items()],
            *[pick([name]).alias(field) for field, name in COUNTERS.items()],
            pl.col("source").sort_by("_order").first(),
        )
        .sort(keys, nulls_last=True)
    )
    dt_s = pl.col("at").diff().over(SERIES).dt.total_microseconds() / 1e6

    def rate(column: str) -> pl.Expr:
        return _increase(pl.col(column), pl.col(column).shift(1).over(SERIES)) / dt_s

    stats = rows.select(
        "instance",
        "at",
        pl.col("running").cast(pl.Int64),
        pl.col("waiting").cast(pl.Int64),
        pl.col("swapped").cast(pl.Int64),
        (pl.col("kv") * 100).round(6).alias("gpu_kv_pct"),
        (pl.col("cpu_kv") * 100).round(6).alias("cpu_kv_pct"),
        rate("prompt_tokens").alias("prompt_tps"),
        pl.coalesce(pl.col("gen_rate"), rate("gen_tokens")).alias("gen_tps"),
        "source",
    ).filter(pl.any_horizontal(pl.col(f).is_not_null() for f in STATS_FIELDS))
    events, notes = _counter_events(known.filter(pl.col("name").is_in(COUNTER_NAMES)))
    return {"engine_stats": stats, "engine_events": events}, notes


def _counter_events(counters: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    """Resets (restarts), preemptions and aborted/errored requests, from each counter series."""
    series = ["name", "key", "instance"]
    ordered = counters.sort([*series, "at"]).with_columns(
        pl.col("value").shift(1).over(series).alias("_prev"),
        pl.col("at").shift(1).over(series).alias("_prev_at"),
    )
    grew = ordered.with_columns(_increase(pl.col("value"), pl.col("_prev")).alias("_delta"))
    span = pl.concat_str(
        pl.col("_prev_at").dt.strftime("%H:%M:%S"),
        pl.lit("–"),
        pl.col("at").dt.strftime("%H:%M:%S UTC"),
    )
    fell = grew.filter(pl.col("value") < pl.col("_prev"))
    restarts = (
        fell.group_by("instance", "at")
        .agg(
            pl.col("_prev_at").min().alias("seen_at"),
            pl.col("source").first(),
            pl.format(
                "{} {} → {}",
                pl.col("name"),
                pl.col("_prev").cast(pl.Int64),
                pl.col("value").cast(pl.Int64),
            )
            .unique()
            .sort()
            .str.join("; ")
            .alias("fell"),
            span.first().alias("span"),
        )
        .select(
            "instance",
            pl.col("seen_at").alias("at"),
            pl.lit("restart").alias("kind"),
            pl.format(
                "counters started again from zero between {} ({}): the engine restarted",
                pl.col("span"),
                pl.col("fell"),
            ).alias("detail"),
            "source",
        )
    )
    # where the engine splits its preemptions by why (vLLM PR #58037), each is counted by
    # its reason (only kv_full is a KV shortage) and the total not again
    by_reason = counters.filter(pl.col("name") == BY_REASON)["instance"].unique()
    kinds = pl.when(
        (pl.col("name") == COUNTERS["preemptions"]) & ~pl.col("instance").is_in(by_reason.implode())
    ).then(pl.lit("preempted"))
    for why, kind in PREEMPTION_REASONS.items():
        kinds = kinds.when((pl.col("name") == BY_REASON) & (pl.col("reason") == why)).then(
            pl.lit(kind)
        )
    for reason, kind in REASON_EVENTS.items():
        kinds = kinds.when(
            (pl.col("name") == SUCCESS) & (pl.col("finished_reason") == reason)
        ).then(pl.lit(kind))
    growth = (
        grew.with_columns(kinds.otherwise(None).alias("kind"))
        .filter(pl.col("kind").is_not_null() & (pl.col("_delta") > 0))
        .select(
            "instance",
            "at",
            "kind",
            pl.format(
                "{}{} +{} (to {}) between {}{}",
                pl.col("name"),
                pl.col("key"),
                pl.col("_delta").cast(pl.Int64),
                pl.col("value").cast(pl.Int64),
                span,
                pl.when(pl.col("value") < pl.col("_prev"))
                .then(pl.lit(", across a counter reset"))
                .otherwise(pl.lit("")),
            ).alias("detail"),
            "source",
        )
    )
    notes = []
    first = (
        ordered.filter(pl.col("name") == COUNTERS["preemptions"])
        .group_by("instance")
        .agg(pl.col("value").first())
        .filter(pl.col("value") > 0)
        .sort("instance")
    )
    if first.height:
        notes.append(
            "preemptions before the window (not timed, not counted as events): "
            + ", ".join(f"{i} {v:.0f}" for i, v in first.iter_rows())
        )
    return pl.concat([restarts, growth], how="vertical_relaxed"), notes


def read_samples(samples: pl.DataFrame, result: ParseResult) -> None:
    """Add the tables of named, timed samples to `result`, with what it skipped."""
    other = samples.filter(~pl.col("name").is_in(list(KNOWN)) | pl.col("name").is_null())
    if other.height:
        names = other["name"].fill_null("(no metric name: a computed query)").unique().sort()
        result.notes.append(
            f"{other['key'].n_unique()} series of other metrics not read "
            f"({', '.join(names.head(NAME_EXAMPLES).to_list())}"
            + (", …" if names.len() > NAME_EXAMPLES else "")
            + ")"
        )
    tables, notes = engine_tables(samples)
    result.notes.extend(notes)
    for name, frame in tables.items():
        result.add(name, frame)
    times = tables["engine_stats"]["at"].drop_nulls()
    if times.len():
        result.span = (times.min(), times.max())


def read_series(samples: pl.DataFrame, result: ParseResult) -> None:
    """Samples (`SAMPLES`) of series named by their labels: their tables added to `result`,
    each instance its pod or address label, `result.addresses` what `name_instances` maps
    once every log is read."""
    samples = samples.with_columns(
        label_name().alias("_own"), seconds_to_utc(pl.col("ts")).alias("at")
    )
    result.addresses = {
        own: sorted(a for a in found if a)
        for own, found in samples.group_by("_own")
        .agg(pl.col("instance").unique())
        .drop_nulls("_own")
        .iter_rows()
    }
    read_samples(samples.with_columns(pl.col("_own").alias("instance")), result)


@register_file_format
class PrometheusQueryRange(FileFormat):
    """A saved ``/api/v1/query_range`` (or ``/api/v1/query``) answer of a Prometheus server."""

    name = "prometheus_query_range"
    role = "server"
    priority = 27
    metrics_source = True
    labelled_rows = True
    samples = (
        Sample(
            "a real Prometheus 2.42.0 (Debian) /api/v1/query_range answer, the server fed with "
            "vLLM 0.32 metric names, labels and HELP/TYPE lines of corpus kv-tiny metrics-800x.txt "
            "through promtool (tests/test_prometheus.py's recording)",
            file="prometheus_query_range.json",
            tables=(("engine_stats", 6), ("engine_events", 1)),
        ),
    )

    def sniff(self, head: list[str]) -> bool:
        text = "\n".join(head)
        return text.lstrip().startswith("{") and bool(
            re.search(r'"resultType"\s*:\s*"(?:matrix|vector)"', text)
        )

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        result = ParseResult(formats=[self.name])
        answer = read_json_document(result, source, parse_answer)
        if answer is None:
            return result
        data = answer.get("data", answer) if isinstance(answer, dict) else None
        if isinstance(answer, dict) and answer.get("status") == "error":
            result.notes.append(
                f"Prometheus answered with an error ({answer.get('errorType')}: "
                f"{answer.get('error')}): nothing read"
            )
            return result
        if not isinstance(data, dict) or not isinstance(data.get("result"), list):
            account_document(result, source, 0)
            result.notes.append("no `data.result` list: not a query answer, nothing read")
            return result
        samples, odd = series_samples(data["result"], source.display)
        if odd:
            result.notes.append(f"{odd} result entries are not series (no `metric`): not read")
        result.notes.append(
            f"{data.get('resultType')} answer: {samples['key'].n_unique()} series, "
            f"{samples.height} samples; times are the query's step times (each step holds the "
            "latest sample up to 5 min old), not the scrape times"
        )
        read_series(samples, result)
        return result

    def name_instances(
        self, result: ParseResult, logs: dict[str, list[str]], given: dict[str, str]
    ) -> None:
        name_by_labels(result, logs, given)
