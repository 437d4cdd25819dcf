"""The same requests seen through several client files are one set of requests.

A tester writes several files for one run (GuideLLM json and yaml, the seed
script's printed rows beside a timed JSONL of the same run): one file is the
record, the others are listed as "same run, not re-counted" with the reason.

* Files whose request ids are all in another file's are that file's copy; the
  file kept is the one with more timed rows (then more rows, then the first).
* Untimed rows (the seed script's ``(i, seconds, tokens, 'OK')``) that repeat a
  timed file's requests (same request number and latency to the script's 0.01 s
  rounding) count once, with the timed copy. The timed file decides the steps: a
  console's blocks never change its concurrency, counts or order (their figures are
  the tester's own, compared with the steps found).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import polars as pl

DUPLICATE_LATENCY_S = 0.011  # the seed script rounds latencies to 0.01 s


@dataclass
class SameRun:
    file: str  # the file not re-counted (whole or in part)
    same_as: str  # the file that is the record
    requests: int  # requests of `file` not re-counted
    reason: str

    def note(self) -> str:
        return f"same run, not re-counted: {self.requests} request(s) {self.reason} {self.same_as}"

    def to_dict(self) -> dict:
        return asdict(self)


def drop_copied_files(frames: list[pl.DataFrame]) -> tuple[list[pl.DataFrame], list[SameRun]]:
    """Per-file `client_requests` frames, without the files that copy another's requests."""

    def ids(frame: pl.DataFrame) -> pl.Series:
        return frame["request_id"].drop_nulls()

    def within(own: pl.Series, other: pl.Series) -> bool:
        return bool(own.len()) and bool(own.is_in(other.unique().implode()).all())

    def rank(frame: pl.DataFrame) -> tuple:
        return (-frame["started_at"].is_not_null().sum(), -frame.height)

    order = sorted(range(len(frames)), key=lambda i: rank(frames[i]))
    kept: list[int] = []
    same: list[SameRun] = []
    for i in order:
        own = ids(frames[i]) if kept else None
        record = next((k for k in kept if within(own, ids(frames[k]))), None)
        if record is None:
            kept.append(i)
            continue
        same.append(
            SameRun(
                _run(frames[i]),
                _run(frames[record]),
                frames[i].height,
                "carry only request ids found in",
            )
        )
    return [frames[i] for i in sorted(kept)], same


def drop_repeated_rows(client: pl.DataFrame) -> tuple[pl.DataFrame, list[SameRun]]:
    """Untimed rows that repeat a timed file's requests count once, with the timed copy.

    A pair is the same request number and latency (to the seed script's 0.01 s
    rounding), at the same concurrency where both files say one; steps are not
    compared (one file numbers them 1, 2, …, another by their concurrency). Each
    timed row absorbs at most one untimed row, closest latencies first.
    """
    timed = client.filter(pl.col("started_at").is_not_null())
    untimed = client.filter(pl.col("started_at").is_null())
    if timed.is_empty() or untimed.is_empty():
        return client, []
    pairs = (
        untimed.with_row_index("_u")
        .join(
            timed.with_row_index("_t").select(
                "_t",
                "index",
                pl.col("latency_s").alias("_lat"),
                pl.col("concurrency").alias("_conc"),
                pl.col("run").alias("_run"),
            ),
            on="index",
        )
        .with_columns((pl.col("latency_s") - pl.col("_lat")).abs().alias("_gap"))
        .filter(
            (pl.col("_gap") <= DUPLICATE_LATENCY_S)
            & (
                pl.col("concurrency").is_null()
                | pl.col("_conc").is_null()
                | (pl.col("concurrency") == pl.col("_conc"))
            )
        )  # fmt: skip
        .sort("_gap")
        .unique("_t", keep="first", maintain_order=True)
        .unique("_u", keep="first", maintain_order=True)
    )
    if pairs.is_empty():
        return client, []
    kept = (
        untimed.with_row_index("_u").filter(~pl.col("_u").is_in(pairs["_u"].implode())).drop("_u")
    )
    same = [
        SameRun(str(run), str(other), n, "repeat (same request number and latency) those in")
        for run, other, n in pairs.group_by("run", "_run", maintain_order=True).len().iter_rows()
    ]
    return pl.concat([timed, kept]), same


def _run(frame: pl.DataFrame) -> str:
    return str(frame["run"][0]) if frame.height else "?"
