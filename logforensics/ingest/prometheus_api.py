"""``--prometheus URL``: the engine metrics of the test window, from Prometheus's HTTP API.

Asked for (standard library HTTP, `urllib`):

1. ``/api/v1/query``: ``count_over_time(vllm:num_requests_running[W])`` (and
   SGLang's running gauge) at the window's end: whether the window holds any
   engine data at all, and each series' sample count, hence the scrape
   interval;
2. ``/api/v1/query_range`` of every metric `ingest.metrics` knows, at a step of
   a third of that interval (bounded by the API's 11,000 points a series);
3. ``/api/v1/query_range`` of ``timestamp(<metric>)`` for each metric found: the
   time of the sample each step holds, so each scrape is kept once, at its own
   time, and a series that stopped is not stretched over the five minutes
   Prometheus looks back.

Unreachable, an HTTP error, an answer that is not the API's, or no data in the
window: a `PrometheusError` whose message names the URL and what happened;
the analysis of the other inputs goes on without it.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import urllib.error
import urllib.parse
import urllib.request

import polars as pl

from logforensics.ingest.base import ParseResult
from logforensics.ingest.inputs import InputFile, Inputs
from logforensics.ingest.labels import instance_names, rename_instances
from logforensics.ingest.metrics import GAUGES, KNOWN
from logforensics.ingest.prometheus import label_name, parse_answer, read_samples, series_samples
from logforensics.ingest.toolkit import seconds_to_utc

FORMAT = "prometheus_api"
MAX_POINTS = 11_000  # the API refuses a range query of more points a series
STEP_FRACTION = 3  # steps a scrape interval: every sample is seen despite scrape jitter
MIN_STEP_S = 0.001
WINDOW_MARGIN = dt.timedelta(minutes=2)  # around the client files' span, by default
TIMEOUT_S = 30.0


class PrometheusError(Exception):
    """Prometheus could not give the window's metrics; the message says why."""


def test_window(
    inputs: Inputs, start: dt.datetime | None, end: dt.datetime | None
) -> tuple[dt.datetime, dt.datetime]:
    """--from/--to, else the client files' span widened by `WINDOW_MARGIN`."""
    client = inputs.tables["client_requests"]
    first = client["started_at"].min() if client.height else None
    last = client["ended_at"].max() if client.height else None
    start = start or (first - WINDOW_MARGIN if first is not None else None)
    end = end or (last + WINDOW_MARGIN if last is not None else None)
    if start is None or end is None:
        raise PrometheusError(
            "no test window: no client file gives absolute request times; give --from and --to"
        )
    if end <= start:
        raise PrometheusError(f"the window ends ({end.isoformat()}) before it starts")
    return start, end


class Api:
    """GET requests to one Prometheus server's HTTP API, with errors named for the user."""

    def __init__(self, url: str, timeout_s: float = TIMEOUT_S):
        self.base = url.rstrip("/")
        self.timeout_s = timeout_s
        self.warnings: list[str] = []

    def get(self, path: str, **params) -> dict:
        url = f"{self.base}{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=self.timeout_s) as answer:  # noqa: S310
                body = answer.read()
        except urllib.error.HTTPError as exc:
            raise PrometheusError(
                f"{self.base} answered HTTP {exc.code}: {_error_text(exc)}"
            ) from exc
        except urllib.error.URLError as exc:
            raise PrometheusError(f"{self.base} is unreachable ({exc.reason})") from exc
        except TimeoutError as exc:
            raise PrometheusError(
                f"{self.base} did not answer within {self.timeout_s:g} s"
            ) from exc
        except ValueError as exc:  # not an http(s) URL
            raise PrometheusError(
                f"{self.base} is not a URL Prometheus can be asked at ({exc})"
            ) from exc
        try:
            doc = parse_answer(body.decode("utf-8", errors="replace"))
        except ValueError as exc:
            raise PrometheusError(
                f"{self.base} did not answer as Prometheus's HTTP API does (not JSON: "
                f"{body[:60]!r})"
            ) from exc
        if not isinstance(doc, dict) or doc.get("status") != "success":
            detail = doc.get("error") if isinstance(doc, dict) else None
            raise PrometheusError(f"{self.base} answered with an error: {detail or doc!r:.200}")
        self.warnings += [str(w) for w in doc.get("warnings") or []]
        data = doc.get("data")
        if not isinstance(data, dict) or not isinstance(data.get("result"), list):
            raise PrometheusError(f"{self.base} answered without a `data.result` list")
        return data

    def query_range(self, query: str, start: float, end: float, step: str) -> list:
        return self.get("/api/v1/query_range", query=query, start=start, end=end, step=step)[
            "result"
        ]


def _error_text(exc: urllib.error.HTTPError) -> str:
    """The API's own error text where the answer carries one, else the HTTP reason."""
    try:
        doc = json.loads(exc.read().decode("utf-8", errors="replace"))
        return f"{doc.get('errorType')}: {doc.get('error')}"
    except (ValueError, AttributeError, OSError):
        return str(exc.reason)


def fetch(api: Api, start: dt.datetime, end: dt.datetime) -> tuple[pl.DataFrame, list[str]]:
    """Every engine sample of the window, once each, at its own time (`at`), and notes.

    The step starts at a third of the scrape interval the sample counts imply and
    is made finer while a running gauge's series has samples the steps missed.
    """
    t0, t1 = start.timestamp(), end.timestamp()
    width = max(0.001, math.floor((t1 - t0) * 1000) / 1000)  # (t1 - width, t1] lies in the window
    running = list(GAUGES["running"])
    counts = pl.concat(
        [
            series_samples(
                api.get(
                    "/api/v1/query",
                    query=f"count_over_time({name}[{round(width * 1000)}ms])",
                    time=t1,
                )["result"],
                api.base,
            )[0]
            for name in running
        ]
    ).select("key", pl.col("value").alias("count"))
    most = counts["count"].max()
    if not most:
        raise PrometheusError(
            f"{api.base} holds no engine metrics ({' or '.join(running)}) between "
            f"{start.isoformat()} and {end.isoformat()}"
        )
    finest = max(width / MAX_POINTS, MIN_STEP_S)
    step_s = max(width / most / STEP_FRACTION, finest)
    while True:
        samples, odd = _samples_at(api, t0, t1, f"{step_s:.3f}")
        read = (
            samples.filter(pl.col("name").is_in(running))
            .group_by("key")
            .agg(pl.col("at_s").n_unique().alias("read"))
        )
        missed = (
            counts.join(read, on="key", how="left")
            .select((pl.col("count") - pl.col("read").fill_null(0)).clip(0).sum())
            .item()
        )
        if not missed or step_s <= finest:
            break
        step_s = max(step_s / 4, finest)
    notes = [
        f"{samples.select(pl.struct('name', 'key').n_unique()).item()} series, "
        f"{samples.height} samples of "
        f"{samples['name'].n_unique()} metrics between {start.isoformat()} and "
        f"{end.isoformat()}; asked at a {step_s:.3f} s step, each sample kept once at its "
        "own time"
    ]
    if missed:
        notes.append(
            f"{missed:.0f} samples of the running gauge fell between steps even at the finest "
            f"step the API allows ({finest:.3f} s) and were not read"
        )
    if odd:
        notes.append(f"{odd} answer entries were not series")
    notes += [f"Prometheus warned: {w}" for w in dict.fromkeys(api.warnings)]
    return samples, notes


def _samples_at(api: Api, t0: float, t1: float, step: str) -> tuple[pl.DataFrame, int]:
    """The window's samples at `step`, each once, at its own time (`at_s`, `at`)."""
    names = "|".join(sorted(KNOWN))
    values, odd = series_samples(
        api.query_range(f'{{__name__=~"{names}"}}', t0, t1, step), api.base
    )
    stamps = [
        series_samples(api.query_range(f"timestamp({name})", t0, t1, step), api.base)[0].select(
            "key", "ts", pl.lit(name).alias("name"), pl.col("value").alias("at_s")
        )
        for name in values["name"].drop_nulls().unique().sort().to_list()
    ]
    if not stamps:
        return values.with_columns(pl.lit(None, dtype=pl.Float64).alias("at_s")).clear(), odd
    series = ["name", "key"]
    once = (
        values.join(pl.concat(stamps), on=["name", "key", "ts"], how="inner")
        .sort([*series, "ts"])
        .filter(pl.col("at_s") != pl.col("at_s").shift(1).over(series).fill_null(-1.0))
        .filter((pl.col("at_s") >= t0) & (pl.col("at_s") <= t1))
        .with_columns(
            (pl.col("source") - pl.col("ts").floor() + pl.col("at_s").floor()).cast(pl.Int64),
            seconds_to_utc(pl.col("at_s")).alias("at"),
        )
    )
    return once, odd


def add_to(
    inputs: Inputs,
    url: str,
    start: dt.datetime | None,
    end: dt.datetime | None,
    given: dict[str, str] | None = None,
) -> None:
    """Read the window's engine metrics into `inputs`: their rows and an account, or an
    error naming the URL (the other inputs stand as they are)."""
    given = given or {}
    try:
        start, end = test_window(inputs, start, end)
        samples, notes = fetch(Api(url), start, end)
    except PrometheusError as exc:
        inputs.errors.append(f"--prometheus {exc}; the other inputs were analysed without it")
        inputs.files.append(InputFile(url, None, None, None, skipped=str(exc)))
        return
    result = ParseResult(lines=samples.height, parsed=samples.height, formats=[FORMAT], notes=notes)
    samples = samples.with_columns(label_name().alias("_own"))
    pairs = samples.select("pod", "instance").unique().sort("pod", "instance", nulls_last=True)
    server = inputs.tables["server_requests"]["instance"].drop_nulls().unique().to_list()
    logs = {name: inputs.addresses.get(name, []) for name in {*inputs.coverage, *server}}
    mapping, named = instance_names(pairs.rows(), logs, given)
    read_samples(samples.with_columns(pl.col("_own").alias("instance")), result)
    rename_instances(result.tables, mapping)
    result.notes += named
    labels = {v for pair in pairs.rows() for v in pair if v}
    result.notes += [
        f"--instance {name}={label}: no series is labelled {label}"
        for label, name in sorted(given.items())
        if label not in labels
    ]
    for name, frame in result.tables.items():
        inputs.tables[name] = pl.concat([inputs.tables[name], frame])
    # a series no log names is an instance known by its labels: the address it was scraped at
    # is where a proxy reaches it (pods gone, Prometheus kept their numbers)
    for pod, address in pairs.rows():
        own = pod or address
        if address and own not in mapping and own not in logs:
            known = inputs.addresses.setdefault(own, [])
            known += [address] if address not in known else []
    described = sorted(
        {i for f in result.tables.values() for i in f["instance"].drop_nulls().unique().to_list()}
    )
    inputs.files.append(
        InputFile(
            path=url,
            format=FORMAT,
            role="server",
            instance=", ".join(described) or None,
            lines=result.lines,
            parsed=result.parsed,
            formats=result.formats,
            records={n: f.height for n, f in result.tables.items() if f.height},
            span=result.span,
            notes=result.notes,
        )
    )
