"""The same requests seen through several client files are one set of requests.

A tester writes several files for one run (GuideLLM json and yaml, the seed
script's printed rows beside a timed JSONL of the same run): one file is the
record, the others are listed as "same run, not re-counted" with the reason.

* Files whose request ids are all in another file's are that file's copy; the
  file kept is the one with more timed rows (then more rows, then the first).
* Untimed rows (the seed script's ``(i, seconds, tokens, 'OK')``) that repeat a
  timed file's requests (same step, index, latency to the script's 0.01 s
  rounding) count once, with the timed copy.
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

    def ids(frame: pl.DataFrame) -> set:
        return set(frame["request_id"].drop_nulls().to_list())

    def rank(frame: pl.DataFrame) -> tuple:
        return (-frame["started_at"].is_not_null().sum(), -frame.height)

    order = sorted(range(len(frames)), key=lambda i: rank(frames[i]))
    kept: list[int] = []
    same: list[SameRun] = []
    for i in order:
        own = ids(frames[i])
        record = next((k for k in kept if own and own <= ids(frames[k])), None)
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
    """Untimed rows that repeat a timed file's requests (same step, index, latency) count once."""
    timed = client.filter(pl.col("started_at").is_not_null())
    untimed = client.filter(pl.col("started_at").is_null())
    if timed.is_empty() or untimed.is_empty():
        return client, []
    key = ["step", "index"]
    pairs = (
        untimed.with_row_index("_u")
        .join(
            timed.select(*key, pl.col("latency_s").alias("_lat"), pl.col("run").alias("_run")),
            on=key,
        )
        .filter((pl.col("latency_s") - pl.col("_lat")).abs() <= DUPLICATE_LATENCY_S)
        .unique("_u", keep="first", maintain_order=True)
    )
    if pairs.is_empty():
        return client, []
    kept = (
        untimed.with_row_index("_u").filter(~pl.col("_u").is_in(pairs["_u"].implode())).drop("_u")
    )
    same = [
        SameRun(str(run), str(other), n, "repeat (same step, index and latency) those in")
        for run, other, n in pairs.group_by("run", "_run", maintain_order=True).len().iter_rows()
    ]
    return pl.concat([timed, kept]), same


def _run(frame: pl.DataFrame) -> str:
    return str(frame["run"][0]) if frame.height else "?"
