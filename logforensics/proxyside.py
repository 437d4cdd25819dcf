"""What a proxy's own log says about each request.

A proxy names upstreams by address (``10.0.1.11:8000``); instance logs are
files. Each address is mapped to the instance whose access lines keep time
with the proxy's lines for it (or as forced with ``--upstream ADDR=NAME``).
Client requests are then matched to the proxy's lines (request id, else
time and outcome), which gives a second witness: a request the proxy
*refused* never reached any instance — the strongest proof there is — and one
it *delivered* reached its upstream even where that instance's log is missing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from logforensics import correlate, model

MAPPING_MIN_FIT = 0.5  # share of an upstream's lines an instance must echo to be it
AMBIGUOUS_FIT = 0.1  # a rival instance this close in fit makes the mapping a guess


@dataclass
class UpstreamFit:
    address: str
    instance: str | None
    fit: float | None  # share of the upstream's answered lines the instance echoed
    lines: int
    forced: bool = False

    def to_dict(self) -> dict:
        return {
            "instance": self.instance,
            "fit": self.fit,
            "lines": self.lines,
            "forced": self.forced,
        }


def last_upstream(col: pl.Expr) -> pl.Expr:
    """nginx lists every attempt (``a, b : c``): the last one gave the answer."""
    return col.str.split(" : ").list.last().str.split(", ").list.last().str.strip_chars()


def _stamp_precision(frame: pl.DataFrame) -> float:
    """Whole-second stamps (nginx's $time_local) are good to a second; others to a millisecond."""
    if frame.is_empty():
        return 0.0
    whole = (frame["at"].dt.microsecond() == 0).all()
    return 1.0 if whole else 0.001


def _echoed(proxy_times: np.ndarray, instance_times: np.ndarray, tol: float) -> int:
    """Proxy lines paired one-to-one, in time order, with an instance line within `tol`."""
    j, paired = 0, 0
    for t in proxy_times:
        while j < len(instance_times) and instance_times[j] < t - tol:
            j += 1
        if j < len(instance_times) and instance_times[j] <= t + tol:
            paired += 1
            j += 1
    return paired


def map_upstreams(
    proxy: pl.DataFrame, server: pl.DataFrame, forced: dict[str, str]
) -> dict[str, UpstreamFit]:
    """Which instance each upstream address is, judged by timing, one instance per address.

    Addresses are taken best fit first; an instance already taken is not given
    to a second address, and an address that fits two instances about as well
    is left unmapped (pass ``--upstream``) rather than guessed.
    """
    answered = (
        proxy.filter(pl.col("upstream").is_not_null())
        .with_columns(last_upstream(pl.col("upstream")).alias("address"))
        .filter(pl.col("http_status").is_between(200, 299))
    )
    access = correlate.inference_records(server)
    tol = correlate.MATCH_TOLERANCE_S + _stamp_precision(proxy)
    names = access["instance"].unique().sort().to_list()
    instance_times = {
        n: np.sort(access.filter(pl.col("instance") == n)["at"].dt.epoch("us").to_numpy() / 1e6)
        for n in names
    }
    fits: dict[str, UpstreamFit] = {}
    scores = []
    for address in sorted(set(answered["address"].drop_nulls().to_list()) | set(forced)):
        own = np.sort(
            answered.filter(pl.col("address") == address)["at"].dt.epoch("us").to_numpy() / 1e6
        )
        if address in forced:
            fits[address] = UpstreamFit(address, forced[address], None, len(own), forced=True)
            continue
        for n in names:
            head, theirs = correlate.head_window(own, instance_times[n], 0.0)
            scores.append(
                (_echoed(head, theirs, tol) / len(head) if len(head) else 0.0, address, n)
            )
        fits[address] = UpstreamFit(address, None, 0.0, len(own))
    taken = {f.instance for f in fits.values() if f.forced}
    for fit, address, name in sorted(scores, reverse=True):
        current = fits[address]
        if current.instance or name in taken or fit < MAPPING_MIN_FIT:
            continue
        rivals = [f for f, a, n in scores if a == address and n != name and n not in taken]
        if rivals and max(rivals) >= fit - AMBIGUOUS_FIT:
            current.fit = round(fit, 3)
            continue  # two instances keep time with this address: do not guess
        fits[address] = UpstreamFit(address, name, round(fit, 3), current.lines)
        taken.add(name)
    return fits


def attribute(
    requests: pl.DataFrame,
    proxy: pl.DataFrame,
    mapping: dict[str, UpstreamFit],
    forced_offset: float | None,
) -> tuple[pl.DataFrame, correlate.ClockFit | None]:
    """Add proxy_upstream, proxy_instance, proxy_delivery, proxy_status, proxy_source to each request."""
    columns = {
        "proxy_upstream": pl.Utf8,
        "proxy_instance": pl.Utf8,
        "proxy_delivery": pl.Utf8,
        "proxy_status": pl.Int64,
        "proxy_source": model.SOURCE,
    }
    if proxy.is_empty() or requests.is_empty():
        return requests.with_columns(
            pl.lit(None, dtype=t).alias(c) for c, t in columns.items()
        ), None
    inference = (
        proxy.filter(
            pl.col("path").is_null() | pl.col("path").str.contains(correlate.INFERENCE_PATH_RE)
        )
        .with_columns(
            pl.lit(_stamp_precision(proxy)).alias("at_precision_s"),
            pl.col("source").cast(pl.Utf8).alias("instance"),  # each line stands for itself
            pl.lit("access").alias("event"),
            pl.coalesce(pl.col("path"), pl.lit("/v1/chat/completions")).alias("path"),
        )
        .sort("at")
    )
    clock = correlate.estimate_offset(requests, inference, forced_offset)
    rows = requests.with_row_index("_row")
    n = rows.height
    owner: list[str | None] = [None] * n
    key: list[str | None] = [None] * n
    ambiguous = [False] * n
    witness: list[str | None] = [None] * n
    late = [False] * n
    by_id = rows.filter(pl.col("request_id").is_not_null()).join(
        inference.filter(pl.col("request_id").is_not_null()).select(
            pl.col("request_id").str.replace(correlate.ID_PREFIX_RE, "").alias("request_id"),
            pl.col("instance").alias("_src"),
        ),
        on="request_id",
    )
    for row, src in by_id.select("_row", "_src").iter_rows():
        owner[row], key[row], witness[row] = src, "request_id", src
    timed = rows.filter(pl.col("started_at").is_not_null()).select(
        "_row",
        "ok",
        correlate._seconds("started_at").alias("s"),
        correlate._seconds("ended_at").alias("e"),
    )
    taken = {src for src in owner if src}
    correlate._match_by_time(
        inference.filter(~pl.col("instance").is_in(list(taken))),
        timed,
        clock.offset_s,
        owner,
        key,
        ambiguous,
        witness,
        late,
    )
    details = inference.select(
        pl.col("source").alias("proxy_source"),
        last_upstream(pl.col("upstream")).alias("proxy_upstream"),
        pl.col("delivery").alias("proxy_delivery"),
        pl.col("http_status").alias("proxy_status"),
    )
    address_to_instance = {a: f.instance for a, f in mapping.items() if f.instance}
    picked = pl.DataFrame(
        {"_row": list(range(n)), "proxy_source": owner},
        schema={"_row": pl.UInt32, "proxy_source": pl.Utf8},
    ).with_columns(pl.col("proxy_source").cast(model.SOURCE))
    joined = (
        rows.join(picked, on="_row", how="left")
        .join(details, on="proxy_source", how="left")
        .with_columns(
            pl.col("proxy_upstream")
            .replace_strict(address_to_instance, default=None, return_dtype=pl.Utf8)
            .alias("proxy_instance")
        )
    )
    return joined.drop("_row"), clock
