"""Prometheus text-format scrapes of a model server's ``/metrics``.

One or several snapshots concatenated, as saved with ``curl`` (optionally
with a ``# scraped at <ISO 8601>`` comment line before each, or a sample
timestamp column in ms). Each snapshot gives one `engine_stats` row per
engine / model label set, for the file's instance; counters give
`engine_events`.

Metric names, from vLLM ``vllm/v1/metrics/loggers.py`` @ 005a810b (labels
``model_name``, ``engine``; ``prometheus_client`` appends ``_total`` to
counters) and V0 ``vllm/engine/metrics.py``:

* gauges ``vllm:num_requests_running``, ``vllm:num_requests_waiting``,
  ``vllm:num_requests_swapped`` (V0), ``vllm:kv_cache_usage_perc`` (new) /
  ``vllm:gpu_cache_usage_perc`` (V0, deprecated in 0.9), ``vllm:cpu_cache_usage_perc``
  (V0) — usages are fractions (0..1) and become percentages;
* counters ``vllm:num_preemptions_total``, ``vllm:prompt_tokens_total``,
  ``vllm:generation_tokens_total`` (throughputs come from the difference
  between consecutive timed snapshots), ``vllm:request_success_total
  {finished_reason="stop"|"length"|"abort"|"error"|"repetition"}``
  (``vllm/v1/engine/__init__.py`` ``FINISH_REASON_STRINGS``);
* ``vllm:num_preemptions_by_reason_total{reason="kv_full"|"priority"|"prefix_cache_reset"}``
  (vLLM PR #58037): where present, preemptions are counted by it, each reason its own
  event kind (only ``kv_full`` is a KV shortage);
* the histogram ``vllm:request_num_preemptions`` (count less its ``le="1.0"`` bucket:
  finished requests preempted 2+ times, event ``preempted_repeatedly``);
* SGLang (``sglang/srt/metrics/collector.py``): ``sglang:num_running_reqs``,
  ``sglang:num_queue_reqs``, ``sglang:token_usage`` (0..1),
  ``sglang:gen_throughput``.

A snapshot's time is its ``# scraped at`` stamp, else its samples' own
timestamps, else the parse context's ``scraped_at`` (the CLI's
``--scraped-at``; only for a file holding a single snapshot), else unknown:
then the rows carry no time and a note says "scrape time unknown".
"""

from __future__ import annotations

import re

import polars as pl

from logforensics import timeparse
from logforensics.ingest import register_file_format
from logforensics.ingest.base import FileFormat, ParseContext, ParseResult, Sample, SourceFile
from logforensics.ingest.toolkit import source_expr

SCRAPED_AT_RE = r"^#\s*(?:scraped[ _]at|scrape[ _]time|timestamp)\s*[:=]?\s*(?P<when>\S.*?)\s*$"
SAMPLE_RE = (
    r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>[^}]*)\})?\s+"
    r"(?P<value>[-+]?(?:[0-9.]+(?:[eE][-+]?\d+)?|Inf|NaN))(?:\s+(?P<ts>-?\d+))?\s*$"
)
COMMENT_RE = r"^#"

GAUGES = {
    "running": ["vllm:num_requests_running", "sglang:num_running_reqs"],
    "waiting": ["vllm:num_requests_waiting", "sglang:num_queue_reqs"],
    "swapped": ["vllm:num_requests_swapped"],
    "kv": ["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage"],
    "cpu_kv": ["vllm:cpu_cache_usage_perc"],
    "gen_rate": ["sglang:gen_throughput"],
}
COUNTERS = {
    "preemptions": "vllm:num_preemptions_total",
    "prompt_tokens": "vllm:prompt_tokens_total",
    "gen_tokens": "vllm:generation_tokens_total",
}
SUCCESS = "vllm:request_success_total"
# vLLM PR #58037: the preemptions split by why (they sum to num_preemptions); only a
# KV-full one is a KV shortage, a priority one is churn under --scheduling-policy priority
BY_REASON = "vllm:num_preemptions_by_reason_total"
PREEMPTION_REASONS = {
    "kv_full": "preempted",
    "priority": "preempted_priority",
    "prefix_cache_reset": "preempted_cache_reset",
}
# The histogram of preemptions per finished request (vLLM 0.32 and earlier V1 releases,
# buckets 1, 2, 3, 4, 5, 10, 20 by default): its count less its `le="1.0"` bucket is how
# many finished requests had been preempted two or more times — their work recomputed each
# time — named by no id. Without a `le="1.0"` bucket (custom buckets) it says nothing here.
PER_REQUEST = "vllm:request_num_preemptions"
PER_REQUEST_COUNT = f"{PER_REQUEST}_count"
PER_REQUEST_BUCKET = f"{PER_REQUEST}_bucket"
KNOWN = (
    {n for names in GAUGES.values() for n in names}
    | set(COUNTERS.values())
    | {SUCCESS, BY_REASON, PER_REQUEST_COUNT, PER_REQUEST_BUCKET}
)
# finished_reason → engine event kind, when its counter grew
REASON_EVENTS = {"abort": "requests_aborted", "error": "requests_errored"}


def _is_exposition(head: list[str]) -> bool:
    typed = False
    for line in head:
        if line.startswith("# TYPE "):
            typed = True
        if line.startswith("#"):
            continue
        if not re.match(SAMPLE_RE, line):
            return False
    return typed or any(re.match(r"^(?:vllm|sglang):\w+", line) for line in head)


@register_file_format
class PrometheusScrape(FileFormat):
    name = "prometheus_scrape"
    priority = 30
    metrics_source = True
    samples = (
        Sample(
            "corpus kv-tiny metrics-8001.txt (vLLM 0.32.0 /metrics, excerpt)",
            file="vllm_metrics_scrape.txt",
        ),
    )
    role = "server"

    def sniff(self, head: list[str]) -> bool:
        return _is_exposition(head)

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        lines = source.lines
        result = ParseResult(lines=lines.height, formats=[self.name])
        text = pl.col("text").str.strip_chars()
        frame = lines.with_columns(
            text.str.extract(SCRAPED_AT_RE, 1).alias("marker"),
            text.str.extract_groups(SAMPLE_RE).alias("_s"),
            text.str.contains(COMMENT_RE).alias("comment"),
            (text == "").alias("blank"),
        ).unnest("_s")
        frame = frame.with_columns(
            timeparse.iso_to_utc(pl.col("marker")).alias("marker_at"),
            pl.col("labels").fill_null("").alias("labels"),
        )
        has_markers = frame["marker"].is_not_null().any()
        key = pl.concat_str([pl.col("name"), pl.lit("{"), pl.col("labels"), pl.lit("}")])
        if has_markers:
            snapshot = pl.col("marker").is_not_null().cast(pl.Int64).cum_sum()
        else:
            snapshot = pl.int_range(1, pl.len() + 1).over(key) - 1
        frame = frame.with_columns(snapshot.alias("snapshot"))
        samples = frame.filter(pl.col("name").is_not_null())
        known = samples.filter(pl.col("name").is_in(list(KNOWN)))
        markers = (
            frame.filter(pl.col("marker").is_not_null())
            .group_by("snapshot")
            .agg(pl.col("marker_at").first().alias("marker_at"))
        )
        # every line accounted for: known samples parsed, comments / other samples / blanks noise
        result.parsed = known.height
        result.noise = frame.filter(
            (pl.col("name").is_not_null() & ~pl.col("name").is_in(list(KNOWN)))
            | pl.col("comment")
            | pl.col("blank")
        ).height
        unparsed = frame.filter(pl.col("name").is_null() & ~pl.col("comment") & ~pl.col("blank"))
        result.set_unparsed(unparsed)
        if source.undecodable_bytes:
            result.notes.append("file holds bytes that are not UTF-8; they were replaced")
        labelled = (
            samples["labels"].str.extract(r'(?:^|,)\s*instance="([^"]+)"', 1).drop_nulls().unique()
        )
        if labelled.len():  # a Prometheus server's copy names where it scraped (host:port)
            result.addresses[source.instance] = sorted(labelled.to_list())
        if known.is_empty():
            result.notes.append("no vLLM or SGLang metrics in this scrape")
            return result

        known = known.with_columns(
            pl.col("value").cast(pl.Float64, strict=False),
            pl.col("labels").str.extract(r'(?:^|,)\s*engine="([^"]*)"', 1).alias("engine"),
            pl.col("labels").str.extract(r'(?:^|,)\s*model_name="([^"]*)"', 1).alias("model"),
            pl.col("labels").str.extract(r'(?:^|,)\s*finished_reason="([^"]*)"', 1).alias("reason"),
            pl.col("labels").str.extract(r'(?:^|,)\s*reason="([^"]*)"', 1).alias("why"),
            pl.col("ts").cast(pl.Int64, strict=False).alias("ts"),
        )
        group = ["snapshot", "engine", "model"]

        def pick(names: list[str]) -> pl.Expr:
            out = pl.lit(None, dtype=pl.Float64)
            for name in reversed(names):
                value = pl.col("value").filter(pl.col("name") == name).first()
                out = pl.coalesce(value, out)
            return out

        snaps = (
            known.group_by(group, maintain_order=True)
            .agg(
                pl.col("line_no").min().alias("line_no"),
                pl.col("ts").min().alias("ts"),
                *[pick(names).alias(field) for field, names in GAUGES.items()],
                *[pick([name]).alias(field) for field, name in COUNTERS.items()],
                pl.col("line_no")
                .filter(pl.col("name") == COUNTERS["preemptions"])
                .first()
                .alias("preemptions_line"),
            )
            .join(markers, on="snapshot", how="left")
        )
        ctx_at = ctx.scraped_at
        n_snapshots = snaps["snapshot"].n_unique()
        fallback = ctx_at if (ctx_at is not None and n_snapshots == 1) else None
        snaps = snaps.with_columns(
            pl.coalesce(
                pl.col("marker_at"),
                (pl.col("ts") * 1000).cast(pl.Datetime("us", "UTC")),
                pl.lit(fallback, dtype=pl.Datetime("us", "UTC")),
            ).alias("at")
        ).sort(["engine", "model", "snapshot"], nulls_last=True)
        if snaps["at"].is_null().any():
            result.notes.append(
                "scrape time unknown: add '# scraped at <ISO time>' before each snapshot, "
                "or give the scrape time (--scraped-at)"
            )
        series = ["engine", "model"]
        dt_s = pl.col("at").diff().over(series).dt.total_microseconds() / 1e6
        snaps = snaps.with_columns(
            (pl.col("prompt_tokens").diff().over(series) / dt_s).alias("prompt_tps"),
            pl.coalesce(pl.col("gen_rate"), pl.col("gen_tokens").diff().over(series) / dt_s).alias(
                "gen_tps"
            ),
        )
        src = source_expr(source.display).alias("source")
        stats = snaps.select(
            pl.lit(source.instance).alias("instance"),
            "at",
            pl.col("running").cast(pl.Int64),
            pl.col("waiting").cast(pl.Int64),
            pl.col("swapped").cast(pl.Int64),
            (pl.col("kv") * 100).round(6).alias("gpu_kv_pct"),
            (pl.col("cpu_kv") * 100).round(6).alias("cpu_kv_pct"),
            pl.when(pl.col("prompt_tps") >= 0).then(pl.col("prompt_tps")).alias("prompt_tps"),
            pl.when(pl.col("gen_tps") >= 0).then(pl.col("gen_tps")).alias("gen_tps"),
            src,
        )
        result.add("engine_stats", stats)

        at = snaps.select("snapshot", "engine", "model", "at")
        by_reason = (
            known.filter(pl.col("name") == BY_REASON)
            .join(at, on=group, how="left", nulls_equal=True)
            .sort(["why", "engine", "model", "snapshot"], nulls_last=True)
        )
        if by_reason.is_empty():
            events = [
                self._counter_events(
                    snaps.with_columns(pl.col("preemptions_line").alias("line_no")),
                    "preemptions",
                    "preempted",
                    COUNTERS["preemptions"],
                    source,
                )
            ]
        else:  # the reasons sum to the total: each counted once, by why
            events = [
                self._counter_events(
                    by_reason.filter(pl.col("why") == why).rename({"value": why}),
                    why,
                    kind,
                    f'{BY_REASON}{{reason="{why}"}}',
                    source,
                )
                for why, kind in PREEMPTION_REASONS.items()
            ]
        events.append(self._repeated(known, at, source))
        reasons = (
            known.filter((pl.col("name") == SUCCESS) & pl.col("reason").is_in(list(REASON_EVENTS)))
            .join(at, on=group, how="left", nulls_equal=True)
            .sort(["reason", "engine", "model", "snapshot"], nulls_last=True)
        )
        for reason, kind in REASON_EVENTS.items():
            rows = reasons.filter(pl.col("reason") == reason).rename({"value": reason})
            events.append(
                self._counter_events(
                    rows, reason, kind, f'{SUCCESS}{{finished_reason="{reason}"}}', source
                )
            )
        for frame_ in events:
            result.add("engine_events", frame_)
        times = stats["at"].drop_nulls()
        if times.len():
            result.span = (times.min(), times.max())
        return result

    @classmethod
    def _repeated(cls, known: pl.DataFrame, at: pl.DataFrame, source: SourceFile) -> pl.DataFrame:
        """`preempted_repeatedly` events from the per-request histogram: finished requests
        preempted 2+ times (its count less its `le="1.0"` bucket), where that grew."""
        group = ["snapshot", "engine", "model"]
        le = pl.col("labels").str.extract(r'(?:^|,)\s*le="([^"]*)"', 1)
        rows = known.filter(
            (pl.col("name") == PER_REQUEST_COUNT)
            | ((pl.col("name") == PER_REQUEST_BUCKET) & le.cast(pl.Float64, strict=False).eq(1))
        )
        per_snapshot = (
            rows.group_by(group, maintain_order=True)
            .agg(
                (
                    pl.col("value").filter(pl.col("name") == PER_REQUEST_COUNT).first()
                    - pl.col("value").filter(pl.col("name") == PER_REQUEST_BUCKET).first()
                ).alias("repeated"),
                pl.col("line_no").filter(pl.col("name") == PER_REQUEST_COUNT).first(),
            )
            .filter(pl.col("repeated").is_not_null())
            .join(at, on=group, how="left", nulls_equal=True)
            .sort(["engine", "model", "snapshot"], nulls_last=True)
        )
        return cls._counter_events(
            per_snapshot,
            "repeated",
            "preempted_repeatedly",
            f'{PER_REQUEST_COUNT} − {PER_REQUEST_BUCKET}{{le="1.0"}} (finished requests '
            "preempted 2+ times)",
            source,
        )

    @staticmethod
    def _counter_events(
        frame: pl.DataFrame, column: str, kind: str, metric: str, source: SourceFile
    ) -> pl.DataFrame:
        """One event per snapshot where the counter is > 0 and grew (or is first seen)."""
        series = ["engine", "model"]
        previous = pl.col(column).shift(1).over(series)
        grew = frame.with_columns((pl.col(column) - previous).alias("_delta")).filter(
            (pl.col(column) > 0) & (pl.col("_delta").is_null() | (pl.col("_delta") > 0))
        )
        return grew.select(
            pl.lit(source.instance).alias("instance"),
            "at",
            pl.lit(kind).alias("kind"),
            pl.when(pl.col("_delta").is_null())
            .then(
                pl.format(
                    "{} = {} (cumulative since the server started; engine {})",
                    pl.lit(metric),
                    pl.col(column).cast(pl.Int64),
                    pl.coalesce(pl.col("engine"), pl.lit("?")),
                )
            )
            .otherwise(
                pl.format(
                    "{} = {} (+{} since the previous scrape; engine {})",
                    pl.lit(metric),
                    pl.col(column).cast(pl.Int64),
                    pl.col("_delta").cast(pl.Int64),
                    pl.coalesce(pl.col("engine"), pl.lit("?")),
                )
            )
            .alias("detail"),
            source_expr(source.display).alias("source"),
        )
