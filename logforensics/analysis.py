"""The whole job as one library call: `analyze(paths) -> Analysis`.

The Analysis is built once; the HTML, JSON and Markdown reporters only render it.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import tempfile
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

import polars as pl

from logforensics import findings, model
from logforensics import tables as datasets
from logforensics.correlate import attribute, balance, clock, proxy, reach, steps
from logforensics.correlate.records import MATCH_TOLERANCE_S, connect_target, inference_records
from logforensics.diagnose import Finding, Thresholds, Verdict, diagnose
from logforensics.held import Held, ids_joined
from logforensics.ingest import InputError, ParseContext, SourceFile, prometheus_api
from logforensics.ingest.inputs import InputFile, Inputs, combine, expand, file_size, load
from logforensics.ingest.inputs import read as read_files
from logforensics.model import Capacity, OverallBalance, Step


@dataclass
class Options:
    year: int | None = None
    server_tz: str = "UTC"
    client_tz: str = "UTC"
    offset_s: float | None = None
    proxy_offset_s: float | None = None  # force the client→proxy clock offset
    upstreams: dict[str, str] = field(default_factory=dict)  # proxy upstream address → instance
    client_anchor: dt.datetime | None = None  # wall time of relative client clocks' zero
    scraped_at: dt.datetime | None = None  # when a single /metrics snapshot was taken
    instance_names: dict[Path, str] = field(default_factory=dict)
    instance_labels: dict[str, str] = field(default_factory=dict)  # metrics label → instance
    prometheus_url: str | None = None  # read the window's engine metrics from this server
    prometheus_from: dt.datetime | None = None  # the window (default: the client files' span)
    prometheus_to: dt.datetime | None = None
    thresholds: Thresholds = field(default_factory=Thresholds)
    cache_dir: Path | None = None  # keep parsed tables as Parquet here (--cache)
    tables: list[Path] = field(default_factory=list)  # read these datasets, not paths (--tables)
    spill: bool | None = None  # parse through a dataset on disk (--spill); None: if big (`spills`)
    progress: Callable[[int, int, int], None] | None = None  # called after each file is read


@dataclass
class Analysis:
    verdict: Verdict
    requests: pl.DataFrame  # client_requests + attribution columns
    tables: dict[str, pl.DataFrame]
    runs: list[Step]
    instances: list[str]
    clock: clock.ClockFit
    findings: list[Finding]
    inputs: list[InputFile]
    errors: list[str]
    coverage: dict[str, tuple[dt.datetime, dt.datetime]]
    instance_clocks: dict[str, clock.ClockFit]
    upstreams: dict[str, proxy.UpstreamFit]
    proxy_clock: clock.ClockFit | None
    unmatched_server_records: int
    generated_at: dt.datetime
    capacity: Capacity
    balance: OverallBalance
    # the tester's own figures per step beside the logs' (steps.tester_figures)
    tester_figures: list[dict] = field(default_factory=list)
    # under --redact, what the report applies to log text it reads later (cited lines)
    redact_text: Callable[[str], str] | None = None

    @cached_property
    def measured(self) -> pl.DataFrame:
        """The requests without the warm-up (filtered once: every report section reads it;
        not copied where there is none)."""
        return model.without_warmup(self.requests)

    def totals(self) -> dict:
        m = self.measured
        return {
            "sent": m.height,
            "succeeded": int(m["ok"].sum()) if m.height else 0,
            "failed": int((~m["ok"]).sum()) if m.height else 0,
            "unreached": int((m["reach"] == "unreached").sum()) if m.height else 0,
            "unknown": int((m["reach"] == "unknown").sum()) if m.height else 0,
            # successes no present log saw: served by an instance whose log is missing
            "reached_unseen": int((m["reach_witness"] == "success").sum()) if m.height else 0,
            "outcome_unknown": int(m["ok"].is_null().sum()) if m.height else 0,
            # requests the proxy logged more than one upstream attempt for
            "retried": int(m.select(steps.retried(m).sum()).item()) if m.height else 0,
        }

    def instance_shares(self) -> list[dict]:
        """Each instance's requests and share, and the most its engine held at once (what a
        comparison of two runs shows beside the share: the new instance idle, the KV full)."""
        counts = dict(self.measured.group_by("reached_instance").len().drop_nulls().iter_rows())
        served = sum(counts.values())
        peaks = {
            row[0]: row[1:]
            for row in self.tables["engine_stats"]
            .group_by(pl.col("instance").cast(pl.Utf8))
            .agg(
                pl.col("running").max(),
                pl.col("waiting").max(),
                pl.coalesce("gpu_kv_pct", "cpu_kv_pct").max(),
            )
            .iter_rows()
        }
        out = []
        for name in self.instances:
            n = counts.get(name, 0)
            running, waiting, kv = peaks.get(name, (None, None, None))
            out.append(
                {
                    "name": name,
                    "requests": n,
                    "share": (n / served) if served else None,
                    "peak_running": running,
                    "peak_waiting": waiting,
                    "peak_kv_pct": kv,
                }
            )
        return out

    def proxy_summary(self) -> dict | None:
        """What the proxy's log witnessed; None without a proxy log."""
        if self.tables["proxy_requests"].is_empty():
            return None
        m = self.measured
        clock = self.proxy_clock
        return {
            "upstreams": {a: f.to_dict() for a, f in self.upstreams.items()},
            # counted, not filtered: a filter would copy every column of the requests
            **m.select(
                pl.col("proxy_source").is_not_null().sum().alias("matched"),
                (pl.col("proxy_delivery") == "reached").sum().alias("delivered"),
                (pl.col("proxy_delivery") == "refused").sum().alias("refused"),
            ).row(0, named=True),
            "clock": None
            if clock is None
            else {
                "offset_s": clock.offset_s,
                "method": clock.method,
                "matched": clock.matched,
                "considered": clock.considered,
                "interval": None if clock.interval is None else list(clock.interval),
                "basis": clock.basis,
            },
        }


YEAR_RES = (
    re.compile(r"\b((?:19|20)\d{2})-[01]\d-[0-3]\d[T ][0-2]\d:[0-5]\d"),  # ISO 8601
    re.compile(r"\b[0-3]\d/[A-Z][a-z]{2}/((?:19|20)\d{2}):"),  # nginx/CLF $time_local
)
EPOCH_RE = re.compile(r"\b(1[5-9]\d{8}|2[0-1]\d{8})(?:\.\d+|\d{3}|\d{6}|\d{9})?\b")


def infer_year(paths: list[Path]) -> tuple[int, str | None]:
    """Yearless vLLM stamps need a year: take it from a dated source, else today's.

    Only each file's first lines are read: any dated line (a runtime prefix, a
    client's ISO or epoch times, a proxy's $time_local) names the year.
    """
    files, _ = expand(paths)
    years: list[int] = []
    for path, _named in files:
        try:
            head = SourceFile(path, str(path), "").head()
        except InputError:
            continue
        text = "\n".join(head)
        for rx in YEAR_RES:
            years += [int(y) for y in rx.findall(text)]
        if not years:
            years += [
                dt.datetime.fromtimestamp(int(e), dt.timezone.utc).year
                for e in EPOCH_RE.findall(text)
            ]
    if years:
        return Counter(years).most_common(1)[0][0], None
    today = dt.date.today().year
    return today, f"no dated source: yearless timestamps were read as {today} (set --year)"


def instance_names(
    tables: dict[str, pl.DataFrame], upstreams: dict[str, proxy.UpstreamFit] | None = None
) -> list[str]:
    """Instances are the names behind request evidence (access or lifecycle lines), and
    those a proxy's upstream address names by the address they announce (an engine whose
    metrics Prometheus kept, its log gone: the proxy's deliveries are its requests).

    A source with neither — a saved /metrics scrape, a stats-only file, a proxy's
    own log — is never an instance in shares, skew tests or standby findings:
    it could only ever "serve nothing".
    """
    named = set(tables["server_requests"]["instance"].drop_nulls().unique().to_list())
    named |= {f.instance for f in (upstreams or {}).values() if f.instance and f.by == "address"}
    return sorted(named)


def parse_context(paths: list[Path], options: Options) -> tuple[ParseContext, list[str]]:
    """What parsers cannot know from their own file, and a note if the year was assumed."""
    year, year_note = (options.year, None) if options.year else infer_year(paths)
    ctx = ParseContext(
        year=year,
        server_tz=options.server_tz,
        client_tz=options.client_tz,
        client_anchor=options.client_anchor,
        scraped_at=options.scraped_at,
    )
    return ctx, [year_note] if year_note else []


def read_tables(folders: list[Path], instance_labels: dict[str, str]) -> tuple[Inputs, list[str]]:
    """`--tables` datasets combined as one run's inputs; the year notes their ingests made."""
    read = datasets.read_datasets(folders)
    if datasets.context_of(read) is None:
        raise InputError(
            "the --tables datasets were parsed with different --year/--server-tz/--client-tz/"
            "--started-at/--scraped-at: ingest them again with the same options"
        )
    return combine(read.read, instance_labels), sorted(set(read.year_notes))


SPILL_SHARE = 0.4  # input over this share of the machine's memory: parsed through a dataset


def spills(paths: list[Path], spill: bool | None) -> bool:
    """Whether to parse through a dataset on disk (`load_spilled`): as told, else when the
    files are over SPILL_SHARE of this machine's memory (their tables and the analysis
    beside them would not fit; the 150M bench bundle is 22 GB on a 24 GB machine)."""
    if spill is not None:
        return spill
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # (no such figure here: never on its own)
        return False
    files, _ = expand(paths)
    return sum(file_size(path) for path, _named in files) > SPILL_SHARE * memory


def load_spilled(paths: list[Path], ctx: ParseContext, options: Options) -> Inputs:
    """`load` through a dataset in a temporary folder: each file's tables written as its
    parse completes and let go of, then all read back as `--tables` reads them (the same
    analysis: the bench checks the two routes' JSON are equal). While parsing, the
    files being parsed are held, not every file's tables."""
    with tempfile.TemporaryDirectory(prefix="logforensics-spill-") as scratch:
        folder = Path(scratch) / "tables"
        writer = datasets.EntryWriter(folder, ctx)
        read = read_files(
            paths, ctx, options.instance_names, options.cache_dir, options.progress, sink=writer
        )
        writer.finish(read, None)
        del read
        inputs, _ = read_tables([folder], options.instance_labels)
    return inputs


def placing_window(fit: clock.ClockFit) -> float:
    """How far apart a record and the request it is given by time may lie: the matching
    tolerance, and the clock's own uncertainty (its interval's width)."""
    width = fit.interval[1] - fit.interval[0] if fit.interval else 0.0
    return MATCH_TOLERANCE_S + width


def fit_clocks(
    client: pl.DataFrame | clock.RequestTimes,
    tables: dict[str, pl.DataFrame],
    records: pl.DataFrame,
    options: Options,
) -> tuple[clock.ClockFit, clock.ClockFit | None]:
    """The client→servers clock, narrowed by the proxy's where that is the finer witness, and
    the client→proxy clock (None without a proxy log)."""
    times = clock.RequestTimes.of(client)

    def proxy_fit(rivals: bool) -> clock.ClockFit | None:
        return proxy.fit_clock(times, tables["proxy_requests"], options.proxy_offset_s, rivals)

    # the two fits at once (numpy's searches release the GIL: 0.9 s at 20M); the proxy's
    # rivals matter only where the instances leave no clock, and are then scored again
    with ThreadPoolExecutor(max_workers=2) as pool:
        proxy_clock = pool.submit(proxy_fit, False)
        common = clock.estimate_offset(
            times, records, options.offset_s, server=tables["server_requests"]
        )
        proxy_clock = proxy_clock.result()
    if common.method == "assumed":
        proxy_clock = proxy_fit(True)
    return clock.sharpen(common, proxy_clock), proxy_clock


def analyze(paths: list[Path], options: Options | None = None) -> Analysis:
    options = options or Options()
    if options.tables:
        inputs, year_notes = read_tables(options.tables, options.instance_labels)
    else:
        ctx, year_notes = parse_context(paths, options)
        if spills(paths, options.spill):
            inputs = load_spilled(paths, ctx, options)
        else:
            inputs = load(
                paths,
                ctx,
                options.instance_names,
                options.cache_dir,
                options.progress,
                instance_labels=options.instance_labels,
            )
    if options.prometheus_url:
        prometheus_api.add_to(
            inputs,
            options.prometheus_url,
            options.prometheus_from,
            options.prometheus_to,
            options.instance_labels,
        )
    tables = inputs.tables
    client = steps.assign_steps(tables["client_requests"])
    held = None  # the client's ids, where nothing but the report reads them
    if not ids_joined(tables) and client["request_id"].null_count() < client.height:
        client, held = Held.take(client, "request_id")
        tables["client_requests"] = tables["client_requests"].with_columns(
            pl.lit(None, dtype=held.dtype).alias(held.column)
        )
    records = inference_records(tables["server_requests"])
    times = clock.RequestTimes.of(client)  # (sorted once for the three fits)
    offset, proxy_clock = fit_clocks(times, tables, records, options)
    aligned, coverage, instance_clocks = clock.align_instances(
        times, tables, inputs.coverage, offset, records
    )
    del times  # (two sorted copies of the request times: 106 MB at 20M)
    if aligned is not tables:  # an instance was moved onto the common clock
        tables, records = aligned, inference_records(aligned["server_requests"])
        offset = clock.without_explained_rival(offset, instance_clocks)
    del aligned  # (`tables` from here on: what is narrowed below is let go of)
    requests = attribute.attribute_on_both_clocks(
        client, tables["server_requests"], offset, records
    )
    tables["proxy_requests"] = proxy.with_error_log_delivery(
        tables["proxy_requests"], tables["proxy_events"]
    )
    upstreams = proxy.map_upstreams(
        tables["proxy_requests"],
        tables["server_requests"],
        options.upstreams,
        records,
        addresses=inputs.addresses,
    )
    instances = instance_names(tables, upstreams)
    record_count = records.height
    del records  # a row for every inference access line: not needed past here
    requests = proxy.attribute(requests, tables["proxy_requests"], upstreams, proxy_clock)
    # from here on the aligned tables, holding only what the rest reads of them
    inputs = replace(inputs, tables=model.narrowed(tables))
    tables = inputs.tables
    requests = connect_target(requests, inputs.addresses)
    requests = reach.decide_reach(
        requests, coverage, offset.offset_s, tables["server_requests"], tables["engine_stats"]
    )
    requests = model.declared(model.REQUESTS, requests)
    step_runs = steps.summarise(
        requests, instances, tables["engine_stats"], offset.offset_s, placing_window(offset)
    )
    unmatched = max(0, record_count - requests["match_key"].is_not_null().sum())
    verdict = diagnose(
        requests,
        tables,
        offset.offset_s,
        instances,
        options.thresholds,
        step_runs,
        coverage,
        {address: fit.instance for address, fit in upstreams.items()},
    )
    figures = steps.tester_figures(inputs.tester_summaries, step_runs)
    found = findings.find(
        findings.FindingFacts(
            steps=step_runs,
            instances=instances,
            clock=offset,
            inputs=inputs,
            requests=requests,
            coverage=coverage,
            unmatched=unmatched,
            figures=figures,
            year_notes=year_notes,
            events=tables["engine_events"],
        )
    )
    if held is not None:
        values = held.values()
        requests = held.restore(requests, values)
        tables["client_requests"] = held.restore(tables["client_requests"], values)
    return Analysis(
        verdict=verdict,
        requests=requests,
        tables=tables,
        runs=step_runs,
        instances=instances,
        clock=offset,
        findings=found + verdict.findings,
        inputs=inputs.files,
        errors=inputs.errors,
        coverage=coverage,
        instance_clocks=instance_clocks,
        upstreams=upstreams,
        proxy_clock=proxy_clock,
        unmatched_server_records=unmatched,
        generated_at=dt.datetime.now(dt.timezone.utc).replace(microsecond=0),
        capacity=steps.capacity(step_runs, options.thresholds),
        balance=balance.overall_balance(step_runs, instances),
        tester_figures=figures,
    )
