"""KServe's inference logger, as a CloudEvents receiver prints its events. Exact text, from
the projects' source and docs:

* the logger agent runs beside the model server in each predictor pod (kserve/kserve
  pkg/logger, @ aaac4e29): for each request it sends an ``org.kubeflow.serving.inference.request``
  event and, for a 200 answer only, an ``…inference.response`` event with the same id
  (the request's ``Ce-Id`` header, else a UUID the agent makes: not its X-Request-Id);
  ``time`` is when the request arrived, or when the answer came back;
* the receiver KServe's docs use, Knative's ``event_display`` (the "message-dumper"), prints
  each as ``☁️  cloudevents.Event`` / ``Context Attributes,`` / ``Extensions,`` /
  ``Data,`` blocks (kserve/website basic-logger.md; the ``component`` extension since
  kserve PR #1636).

The events name the InferenceService and namespace, never the pod: the source is the
agent's ``http://localhost:9081/``. So they prove a request reached a model server (its
pod's agent) and, with a response event, that the server answered 200; which replica, they
cannot say.
"""

from __future__ import annotations

import polars as pl

from logforensics import timeparse
from logforensics.ingest import register_file_format
from logforensics.ingest.base import FileFormat, ParseContext, ParseResult, Sample, SourceFile
from logforensics.ingest.toolkit import source_column

EVENT = "cloudevents.Event"
# `kubectl logs --timestamps` puts an RFC 3339 stamp before each line
STAMP_RE = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2}) "
ATTRIBUTE_RE = r"^  (?P<key>[a-z][a-z0-9]*): ?(?P<value>.*)$"
SECTIONS = {"Context Attributes,": "context", "Extensions,": "extensions", "Data,": "data"}
REQUEST = "org.kubeflow.serving.inference.request"
RESPONSE = "org.kubeflow.serving.inference.response"


@register_file_format
class KserveLoggerEvents(FileFormat):
    """KServe inference-logger events as ``event_display`` prints them.

    One `proxy_requests` row per event id: `at` = the response event's ``time`` (else the
    request's), `request_id` = the id, `upstream` = ``inferenceservicename`` (with
    ``/component`` where given), `delivery` reached (the pod's agent logged it),
    `upstream_status` 200 and `status_origin` upstream where a response event came back,
    `request_time_s` between the two. Each event's header and attribute lines are parsed;
    ``Validation:``, section titles and the payload are noise.
    """

    name = "kserve_logger_events"
    role = "proxy"
    priority = 34
    samples = (
        Sample(
            "kserve/website docs/model-serving/predictive-inference/logger/basic-logger.md "
            "@ 131f0540: the message-dumper's output for one request (request and response)",
            file="kserve_logger_event_display.txt",
        ),
    )

    def sniff(self, head: list[str]) -> bool:
        return any(EVENT in line for line in head[:5]) and any(
            REQUEST in line or RESPONSE in line for line in head
        )

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        lines = source.lines
        result = ParseResult(lines=lines.height, formats=[self.name])
        text = pl.col("text").str.replace(STAMP_RE, "")
        frame = lines.with_columns(
            text.alias("body"),
            text.str.contains(EVENT, literal=True).alias("header"),
        ).with_columns(
            pl.col("header").cum_sum().alias("event"),
            pl.col("body")
            .replace_strict(SECTIONS, default=None, return_dtype=pl.Utf8)
            .forward_fill()
            .alias("_section"),
        )
        # a section title resets at each event: the header line itself belongs to none
        frame = frame.with_columns(
            pl.when(pl.col("header"))
            .then(None)
            .otherwise(pl.col("_section").forward_fill().over("event"))
            .alias("section"),
        ).with_columns(
            pl.when(pl.col("section").is_in(["context", "extensions"]))
            .then(pl.col("body").str.extract_groups(ATTRIBUTE_RE))
            .alias("_a")
        )
        frame = frame.unnest("_a")
        attributes = frame.filter(pl.col("key").is_not_null() & (pl.col("event") > 0))
        result.parsed = int(frame["header"].sum()) + attributes.height
        noise = frame.filter((pl.col("event") > 0) & ~pl.col("header") & pl.col("key").is_null())
        result.noise = noise.height
        result.set_unparsed(frame.filter(pl.col("event") == 0).select("line_no", pl.col("text")))
        if attributes.is_empty():
            return result
        events = attributes.pivot(
            on="key", index="event", values="value", aggregate_function="first"
        ).join(frame.filter(pl.col("header")).select("event", "line_no"), on="event", how="left")
        for column in ("type", "id", "time", "inferenceservicename", "component"):
            if column not in events.columns:
                events = events.with_columns(pl.lit(None, dtype=pl.Utf8).alias(column))
        events = events.with_columns(timeparse.iso_to_utc(pl.col("time")).alias("at"))
        first = ["id", "at", "line_no", "inferenceservicename", "component"]
        request = events.filter(pl.col("type") == REQUEST).select(first).unique("id", keep="first")
        response = (
            events.filter(pl.col("type") == RESPONSE).select(first).unique("id", keep="first")
        )
        pairs = (
            request.join(
                response,
                on="id",
                how="full",
                coalesce=True,
                suffix="_r",
                maintain_order="left_right",
            )
            .select(
                "id",
                pl.col("at").alias("arrived"),
                pl.col("at_r").alias("answered"),
                pl.coalesce("line_no", "line_no_r").alias("line_no"),
                pl.coalesce("inferenceservicename", "inferenceservicename_r").alias(
                    "inferenceservicename"
                ),
                pl.coalesce("component", "component_r").alias("component"),
            )
            .sort("line_no")
        )
        answered = pl.col("answered").is_not_null()
        isvc = pl.col("inferenceservicename").str.strip_chars()
        component = pl.col("component").str.strip_chars()
        rows = (
            pairs.select(
                pl.coalesce("answered", "arrived").alias("at"),
                pl.lit(source.instance).alias("proxy"),
                pl.when(component.is_not_null() & (component != ""))
                .then(pl.concat_str([isvc, pl.lit("/"), component]))
                .otherwise(isvc)
                .alias("upstream"),
                pl.when(answered).then(200).alias("upstream_status"),
                pl.when(answered)
                .then(pl.lit("upstream"))
                .otherwise(pl.lit("unknown"))
                .alias("status_origin"),
                pl.lit("reached").alias("delivery"),
                (pl.col("answered") - pl.col("arrived"))
                .dt.total_microseconds()
                .truediv(1e6)
                .alias("upstream_time_s"),
                pl.col("id").alias("request_id"),
                "line_no",
            )
            .with_columns(source_column(source))
            .drop("line_no")
        )
        result.add("proxy_requests", rows)
        times = rows["at"].drop_nulls()
        if times.len():
            result.span = (times.min(), times.max())
        result.notes.append(
            "KServe logger events name the InferenceService, never the pod: they prove a "
            "request reached a model server (and a response event that it answered 200), "
            "not which replica"
        )
        return result
