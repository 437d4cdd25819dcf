"""Apache JMeter result files (JTL): CSV with its header, and XML.

A sample is a request: ``timeStamp`` / ``ts`` (epoch ms, or the
``jmeter.save.saveservice.timestamp_format`` text read in --client-tz),
``elapsed`` / ``t`` (ms), ``success`` / ``s``, ``responseCode`` / ``rc`` (an
HTTP status, or ``Non HTTP response code: java.net.SocketTimeoutException``),
``responseMessage`` / ``rm``, ``failureMessage``, ``threadName`` / ``tn``, and
``allThreads`` / ``na`` (active threads of every group at that moment) as the
concurrency. The CSV's columns are whatever ``jmeter.save.saveservice.*``
kept, named by its header; its delimiter is the one after ``timeStamp``.

Whether the stamp is a sample's start or its end is a property
(``sampleresult.timestamp.start``: true in the shipped ``jmeter.properties``,
false in the code's default), not written in the file. A thread runs its
samples one after the other, so it is read from the file: the reading under
which no thread's samples overlap; where both fit, the start (the shipped
default), and the notes say so.

XML: one ``<httpSample …/>`` or ``<sample …>`` a top-level request; samples
nested inside one (redirects, embedded resources, a transaction's children)
and child elements (``<responseHeader>``, ``<assertionResult>``) are part of
it.
"""

from __future__ import annotations

import re

import polars as pl

from logforensics import model, timeparse
from logforensics.ingest import register_file_format
from logforensics.ingest.base import FileFormat, ParseContext, ParseResult, Sample, SourceFile
from logforensics.ingest.toolkit import finish_requests, first_column, place_on_clock

DELIMITERS = (",", ";", "\t", "|")
OVERLAP_TOLERANCE_MS = 1  # JMeter's stamps and durations are whole milliseconds
XML_ESCAPES = {"&quot;": '"', "&apos;": "'", "&lt;": "<", "&gt;": ">", "&amp;": "&"}
SAMPLE_OPEN = r"^\s*<(?:httpSample|sample)\s"
SAMPLE_CLOSE = r"</(?:httpSample|sample)>"
XML_FRAME = r"^\s*(?:<\?xml\s|<testResults\b|</testResults>)"


def _delimiter(header: str) -> str | None:
    m = re.match(r'^"?timeStamp"?(.)', header.strip())
    return m.group(1) if m and m.group(1) in DELIMITERS else None


def _stamp_semantics(frame: pl.DataFrame, notes: list[str]) -> pl.Expr:
    """`_start` in seconds: the stamp as a start, or as an end less the elapsed time."""
    ts, elapsed = pl.col("_ts_ms"), pl.col("_elapsed_ms")
    start = ts / 1000
    end_based = (ts - elapsed) / 1000
    if "_thread" not in frame.columns or frame["_ts_ms"].is_null().all():
        return start
    ordered = frame.filter(ts.is_not_null()).sort("_thread", "_ts_ms")
    nxt_ts = ts.shift(-1).over("_thread")
    nxt_el = elapsed.shift(-1).over("_thread")
    tol = OVERLAP_TOLERANCE_MS
    counts = ordered.select(
        (nxt_ts < ts + elapsed - tol).sum().alias("as_start"),
        (nxt_ts - nxt_el < ts - tol).sum().alias("as_end"),
    ).row(0, named=True)
    if counts["as_end"] < counts["as_start"]:
        notes.append(
            "the stamps are the samples' ends (sampleresult.timestamp.start=false): read as "
            f"starts, {counts['as_start']} samples would overlap their thread's previous one, "
            f"as ends {counts['as_end']}; start = stamp − elapsed"
        )
        return end_based
    how = (
        f"read as ends, {counts['as_end']} samples would overlap their thread's previous one"
        if counts["as_end"]
        else "both readings fit this file; the shipped jmeter.properties' setting is taken"
    )
    notes.append(f"the stamps are the samples' starts (sampleresult.timestamp.start=true): {how}")
    return start


def _requests(frame: pl.DataFrame, source: SourceFile, ctx: ParseContext, result: ParseResult):
    """Samples with `_ts`, `_elapsed`, `_success`, `_code`, `_message`, `_failure`, `_thread`,
    `_threads`, `line_no` → `client_requests`."""
    stamp = pl.col("_ts")
    numeric = stamp.cast(pl.Float64, strict=False)
    texts = frame.filter(numeric.is_null() & stamp.is_not_null())
    as_text = timeparse.iso_to_utc(stamp.str.replace_all("/", "-"), ctx.client_tz)
    if texts.height:
        result.notes.append(
            f"{texts.height} stamps are formatted text (jmeter.save.saveservice.timestamp_format), "
            f"read in {ctx.client_tz}"
        )
    frame = frame.with_columns(
        pl.coalesce(numeric, as_text.dt.epoch("us") / 1000).alias("_ts_ms"),
        pl.col("_elapsed").cast(pl.Float64, strict=False).alias("_elapsed_ms"),
    )
    start = _stamp_semantics(frame, result.notes)
    code = pl.col("_code").str.strip_chars()
    status = code.cast(pl.Int64, strict=False)
    success = pl.col("_success").str.strip_chars().str.to_lowercase()

    def present(column: str) -> pl.Expr:
        return pl.when(pl.col(column).str.strip_chars() != "").then(pl.col(column))

    # "HTTP 503 Service Unavailable", or "Non HTTP response code: …: Non HTTP response message: …"
    error = pl.concat_str(
        [
            pl.when(status.is_not_null())
            .then(
                pl.concat_str(
                    [pl.lit("HTTP"), code, present("_message")], separator=" ", ignore_nulls=True
                )
            )
            .otherwise(
                pl.concat_str(
                    [present("_code"), present("_message")], separator=": ", ignore_nulls=True
                )
            ),
            present("_failure"),
        ],
        separator=": ",
        ignore_nulls=True,
    )
    frame = frame.select(
        start.alias("_start"),
        (pl.col("_elapsed_ms") / 1000).round(6).alias("latency_s"),
        success.replace_strict({"true": True, "false": False}, default=None).alias("ok"),
        pl.when(status.is_between(100, 599)).then(status).alias("http_status"),
        pl.when(success != "true").then(pl.when(error != "").then(error)).alias("error"),
        pl.col("_threads").cast(pl.Int64, strict=False).alias("concurrency"),
        model.source_id(f"{source.display}:", pl.col("line_no")),
    ).with_columns((pl.col("_start") + pl.col("latency_s")).round(6).alias("_end"))
    clock = f"formatted stamps in {ctx.client_tz}" if texts.height else "epoch milliseconds"
    frame = place_on_clock(frame, ctx, result.notes, clock=f"{clock} (timeStamp)")
    finish_requests(result, frame, source.display)


@register_file_format
class JmeterCsv(FileFormat):
    """JMeter's CSV JTL: a header naming the saved fields, one sample a line."""

    name = "jmeter_csv"
    role = "client"
    priority = 1
    samples = (
        Sample(
            "apache/jmeter bin/testfiles/HTMLReportTestFile.csv (real JMeter 5 output, the "
            "default 17 columns), first 42 samples",
            file="jmeter_results.csv",
            tables=(("client_requests", 42),),
        ),
        Sample(
            "Azure Load Testing docs, 'troubleshoot load test errors': a JMeter results CSV "
            "line of a host that does not resolve",
            file="jmeter_results_azure.csv",
            tables=(("client_requests", 1),),
        ),
    )

    def sniff(self, head: list[str]) -> bool:
        delimiter = _delimiter(head[0]) if head else None
        if delimiter is None:
            return False
        names = {c.strip().strip('"') for c in head[0].split(delimiter)}
        return "elapsed" in names and bool({"success", "responseCode", "label"} & names)

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        lines = source.lines
        result = ParseResult(lines=lines.height, formats=[self.name])
        delimiter = _delimiter(lines["text"][0])
        try:
            table = pl.read_csv(
                source.raw, separator=delimiter, infer_schema_length=0, quote_char='"'
            )
        except pl.exceptions.PolarsError as exc:
            result.notes.append(f"CSV not readable ({exc}); nothing read")
            result.set_unparsed(lines.slice(1))
            result.noise = 1
            return result
        starts = _record_starts(lines)
        blank = lines.filter(pl.col("text").str.strip_chars() == "").height
        result.noise = 1 + blank
        if starts.len() == table.height:
            table = table.with_columns(starts.alias("line_no"))
        else:
            result.notes.append(
                f"{table.height} samples but {starts.len()} lines that start one: sources are "
                "row numbers, not line numbers"
            )
            table = table.with_row_index("line_no", offset=2).cast({"line_no": pl.Int64})
        result.parsed = lines.height - result.noise
        f = table
        frame = f.select(
            "line_no",
            first_column(f, "timeStamp", dtype=pl.Utf8).alias("_ts"),
            first_column(f, "elapsed", dtype=pl.Utf8).alias("_elapsed"),
            first_column(f, "success", dtype=pl.Utf8).alias("_success"),
            first_column(f, "responseCode", dtype=pl.Utf8).fill_null("").alias("_code"),
            first_column(f, "responseMessage", dtype=pl.Utf8).fill_null("").alias("_message"),
            first_column(f, "failureMessage", dtype=pl.Utf8).fill_null("").alias("_failure"),
            first_column(f, "threadName", dtype=pl.Utf8).alias("_thread"),
            first_column(f, "allThreads", dtype=pl.Utf8).alias("_threads"),
        )
        if "success" not in f.columns:
            result.notes.append("no `success` column saved: outcomes from the response codes")
        _requests(frame, source, ctx, result)
        return result


def _record_starts(lines: pl.DataFrame) -> pl.Series:
    """The line numbers where a CSV record begins (a quoted field may hold line breaks)."""
    quotes = pl.col("text").str.count_matches('"', literal=True)
    inside = (quotes.cum_sum() % 2).shift(1).fill_null(0)
    return (
        lines.slice(1)
        .filter(pl.col("text").str.strip_chars() != "")
        .with_columns(inside.alias("_inside"))
        .filter(pl.col("_inside") == 0)["line_no"]
    )


def _attribute(name: str) -> pl.Expr:
    value = pl.col("text").str.extract(rf'\s{name}="([^"]*)"', 1)
    for escaped, char in XML_ESCAPES.items():
        value = value.str.replace_all(escaped, char, literal=True)
    return value


@register_file_format
class JmeterXml(FileFormat):
    """JMeter's XML JTL: ``<testResults>`` of ``<httpSample>`` / ``<sample>`` elements."""

    name = "jmeter_xml"
    role = "client"
    priority = 2
    samples = (
        Sample(
            "apache/jmeter bin/testfiles/sample_log1.jtl (real JMeter output, httpSample "
            "elements), excerpt: the first 12 samples and thread 1-2's first two",
            file="jmeter_sample_log1.jtl",
            tables=(("client_requests", 14),),
        ),
        Sample(
            "apache/jmeter bin/BatchTestLocal.jtl (real JMeter output: sample elements with a "
            "child element each, failures with an empty rc), excerpt of 9 samples",
            file="jmeter_batch_test_local.jtl",
            tables=(("client_requests", 9),),
        ),
    )

    def sniff(self, head: list[str]) -> bool:
        text = "\n".join(head[:5])
        return "<testResults" in text and bool(
            re.search(r"<(?:httpSample|sample)\s[^>]*\bts=\"\d", "\n".join(head))
        )

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        lines = source.lines
        text = pl.col("text")
        opens = text.str.contains(SAMPLE_OPEN)
        closes = text.str.count_matches(SAMPLE_CLOSE) + text.str.contains(r"/>\s*$").cast(
            pl.UInt32
        ) * opens.cast(pl.UInt32)
        depth = (opens.cast(pl.Int64) - closes.cast(pl.Int64)).cum_sum().shift(1).fill_null(0)
        frame = lines.with_columns(opens.alias("_open"), depth.alias("_depth"))
        top = pl.col("_open") & (pl.col("_depth") == 0)
        inside = pl.col("_depth") > 0
        blank = text.str.strip_chars() == ""
        known = top | inside | blank | text.str.contains(XML_FRAME)
        result = ParseResult(lines=lines.height, formats=[self.name])
        result.parsed = frame.filter(top).height
        result.noise = frame.filter(known & ~top).height
        result.set_unparsed(frame.filter(~known))
        nested = frame.filter(pl.col("_open") & inside).height
        if nested:
            result.notes.append(
                f"{nested} samples nested in another (sub-results: redirects, embedded "
                "resources, a transaction's children) are part of it, not requests of their own"
            )
        samples = frame.filter(top).select(
            "line_no",
            _attribute("ts").alias("_ts"),
            _attribute("t").alias("_elapsed"),
            _attribute("s").alias("_success"),
            _attribute("rc").fill_null("").alias("_code"),
            _attribute("rm").fill_null("").alias("_message"),
            pl.lit("").alias("_failure"),
            _attribute("tn").alias("_thread"),
            _attribute("na").alias("_threads"),
        )
        if samples.height:
            _requests(samples, source, ctx, result)
        return result
