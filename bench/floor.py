"""Reference: polars' own floor for a bench bundle, the fields read and nothing else.

Each file named on the command line is read by polars' own readers and reduced to the
columns the analysis needs, by the fastest extraction of each line found (the client
JSONL by `scan_ndjson`; an nginx line cut at its quotes and spaces, unchecked;
an instance's runtime stamp sliced and read as `timeparse.sliced_runtime_stamp_to_utc`
does (a stamp with no fraction, on a few start-up lines, is left undated), its uvicorn
access lines cut as `pylogs.access_fields` cuts them, its stats lines by `V1_STATS_RE`),
every file in one `collect_all` so that polars keeps both cores busy (its streaming
engine measured no faster), then one as-of join a table pair (timed, not kept).
Nothing is checked, attributed, diagnosed or reported, no line is accounted for, no
other layout or format is looked for: what `analyze` takes on the same machine cannot
be much below this. (Its memory is no floor: every file is held whole at once.)

Prints the rows read (each kind's on stderr). The kind of a file is told by its path:
``*.jsonl`` a client's results, a name holding ``nginx`` the proxy's access log,
anything else an instance's log.
"""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl

from logforensics import timeparse
from logforensics.ingest.base import AS_LINES
from logforensics.ingest.engines.vllm import V1_STATS_RE

CLIENT_STAMP = "%Y-%m-%dT%H:%M:%S%.fZ"


def lines(path: Path) -> pl.LazyFrame:
    """The file's lines as one text column, read as the tool reads a file whole."""
    return pl.scan_csv(path, **AS_LINES)


def client(path: Path) -> pl.LazyFrame:
    fields = {"started_at": pl.Utf8, "ended_at": pl.Utf8, "http_status": pl.Int64}
    fields |= {"request_id": pl.Utf8, "ok": pl.Boolean, "error": pl.Utf8}
    return pl.scan_ndjson(path, schema_overrides=fields).select(
        "request_id",
        pl.col("started_at").str.to_datetime(CLIENT_STAMP, time_unit="us", time_zone="UTC"),
        pl.col("ended_at").str.to_datetime(CLIENT_STAMP, time_unit="us", time_zone="UTC"),
        "ok",
        "http_status",
        "error",
    )


def proxy(path: Path) -> pl.LazyFrame:
    """Cut at quotes and spaces, unchecked: less than the tool may do (it must tell the
    common layout's lines from others), 1.35× faster than `NGINX_COMMON_RE`'s captures."""
    quoted = [pl.col("q").struct.field(f"field_{i}") for i in range(7)]
    head, request, status, upstream = quoted[0], quoted[1], quoted[2], quoted[6]
    return (
        lines(path)
        .select(pl.col("text").str.split_exact('"', 6).alias("q"))
        .select(
            head.str.head(head.str.find(" ", literal=True)).alias("client"),
            timeparse.clf_to_utc(head.str.tail(28).str.head(26)).alias("at"),
            request.str.splitn(" ", 3).alias("r"),
            status.str.slice(1, 3).cast(pl.Int64, strict=False).alias("status"),
            upstream.str.slice(1).str.splitn(" ", 4).alias("u"),
        )
        .select(
            "at",
            "client",
            pl.col("r").struct.field("field_0").alias("method"),
            pl.col("r").struct.field("field_1").alias("path"),
            "status",
            pl.col("u").struct.field("field_0").alias("ua"),
            pl.col("u").struct.field("field_1").cast(pl.Int64, strict=False).alias("us"),
            pl.col("u").struct.field("field_2").cast(pl.Float64, strict=False).alias("rt"),
            pl.col("u").struct.field("field_3").cast(pl.Float64, strict=False).alias("urt"),
        )
    )


def instance(path: Path) -> pl.LazyFrame:
    text = pl.col("text")
    end = text.str.find(" ", literal=True)
    msg, dash = pl.col("msg"), pl.col("_dash")
    access = msg.str.starts_with("INFO: ") & dash.is_not_null()
    return (
        lines(path)
        .select(
            timeparse.sliced_runtime_stamp_to_utc(text, end).alias("at"),
            text.str.slice(end + 1).alias("msg"),
        )
        .with_columns(msg.str.find(' - "', literal=True).alias("_dash"))
        .select(
            "at",
            pl.when(access).then(msg.str.slice(dash + 4).str.splitn(" ", 4)).alias("_request"),
            pl.when(msg.str.contains("Running: ", literal=True))
            .then(msg.str.extract_groups(V1_STATS_RE.removeprefix("^")))
            .alias("_stats"),
        )
        .unnest("_stats")
        .with_columns(
            pl.col("_request").struct.field("field_0").alias("method"),
            pl.col("_request").struct.field("field_1").alias("path"),
            pl.col("_request").struct.field("field_3").str.slice(0, 3).alias("status"),
        )
        .drop("_request")
    )


def kind_of(path: Path) -> str:
    return "client" if path.suffix == ".jsonl" else "proxy" if "nginx" in path.name else "instance"


READERS = {"client": client, "proxy": proxy, "instance": instance}


def read(paths: list[Path]) -> dict[str, pl.DataFrame]:
    """Each kind's rows, every file read at once; then one as-of join a table pair."""
    kinds = [kind_of(path) for path in paths]
    frames = pl.collect_all([READERS[kind](path) for kind, path in zip(kinds, paths, strict=True)])
    parts: dict[str, list[pl.DataFrame]] = {}
    for kind, frame in zip(kinds, frames, strict=True):
        parts.setdefault(kind, []).append(frame)
    tables = {kind: pl.concat(frames) for kind, frames in parts.items()}
    if "proxy" in tables:
        at = tables["proxy"].select("at", "ua").drop_nulls("at").sort("at")
        if "instance" in tables:
            served = tables["instance"].filter(pl.col("method").is_not_null()).drop_nulls("at")
            served.sort("at").join_asof(at, on="at", strategy="nearest")  # timed, not kept
        if "client" in tables:
            ended = tables["client"].drop_nulls("ended_at").sort("ended_at")
            ended.join_asof(at.rename({"at": "ended_at"}), on="ended_at", strategy="nearest")
    return tables


def main(paths: list[str]) -> int:
    tables = read([Path(p) for p in paths])
    for kind, frame in tables.items():
        print(f"{kind}: {frame.height:,} rows", file=sys.stderr)
    print(f"{sum(frame.height for frame in tables.values())} rows read")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
