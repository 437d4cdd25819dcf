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

import datetime as dt
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import polars as pl

from logforensics import model
from logforensics.correlate.attribute import match_by_time
from logforensics.correlate.clock import ClockFit, RequestTimes, estimate_offset, head_span
from logforensics.correlate.pairing import pair_windows
from logforensics.correlate.records import (
    ID_PREFIX_RE,
    INFERENCE_PATH_RE,
    MATCH_TOLERANCE_S,
    RECORD_COLUMNS,
    in_time_order,
    inference_records,
    is_inference_path,
    seconds,
    timed_requests,
)

MAPPING_MIN_FIT = 0.5  # share of an upstream's lines an instance must echo to be it
AMBIGUOUS_FIT = 0.1  # a rival instance this close in fit makes the mapping a guess
# Under load every instance has a line within a second of any time, so echoes
# cannot tell instances apart; requests per second can. The counts of an
# address and of its own instance correlate near 1 (0.98–0.99 on the bench
# bundles), rival instances' only through the shared load steps (≤ 0.65).
COUNTS_MIN_R = 0.8
COUNTS_MARGIN = 0.2
COUNTS_MAX_LAG_S = 3  # clocks of the proxy's and the instances' hosts may differ this much
COUNTS_MAX_BINS = 500_000


@dataclass
class UpstreamFit:
    address: str
    instance: str | None
    fit: float | None  # share of the upstream's answered lines the instance echoed
    lines: int
    forced: bool = False
    by: str | None = None  # forced | address | timing | counts: what decided the mapping
    counts_r: float | None = None  # correlation of requests per second, where it decided

    def to_dict(self) -> dict:
        return {
            "instance": self.instance,
            "fit": self.fit,
            "lines": self.lines,
            "forced": self.forced,
            "by": self.by,
            "counts_r": self.counts_r,
        }


def last_upstream(col: pl.Expr) -> pl.Expr:
    """nginx lists every attempt (``a, b : c``): the last one gave the answer."""
    return (
        col.cast(pl.Utf8).str.split(" : ").list.last().str.split(", ").list.last().str.strip_chars()
    )


def with_last_upstream(frame: pl.DataFrame, name: str) -> pl.DataFrame:
    """`frame` with column `name`: `last_upstream` of its `upstream`, worked out once per
    distinct value (a log names few upstreams on millions of lines), a label."""
    values = frame.select(pl.col("upstream").drop_nulls().unique().cast(pl.Utf8)).to_series()
    last = pl.DataFrame({"upstream": values}).select(last_upstream(pl.col("upstream"))).to_series()
    return frame.with_columns(
        pl.col("upstream")
        .replace_strict(values, last, default=None, return_dtype=model.LABEL)
        .alias(name)
    )


def _named_attempts(addresses: pl.Series, address_to_instance: dict[str, str]) -> pl.Series:
    """``a, b`` of addresses as ``name, name`` where the address is an instance's (worked out
    once per distinct list: a log retries through few)."""
    values = addresses.drop_nulls().unique().cast(pl.Utf8)
    named = (
        values.str.split(", ").list.eval(pl.element().replace(address_to_instance)).list.join(", ")
    )
    return addresses.cast(pl.Utf8).replace_strict(
        values, named, default=None, return_dtype=model.LABEL
    )


PRECISION_PEEK = 10_000  # lines that usually settle the stamps' precision


def _stamp_precision(frame: pl.DataFrame) -> float:
    """Whole-second stamps (nginx's $time_local) are good to a second; others to a millisecond."""
    if frame.is_empty():
        return 0.0
    # (a millisecond stamp among the first lines settles it without a pass over millions;
    # the pass reads the stamps as integers: a calendar's microsecond took 0.1 s at 20M)
    per_second = SUBSECOND_UNITS[frame["at"].dtype.time_unit]
    for part in (frame["at"].head(PRECISION_PEEK), frame["at"]):
        if not (part.to_physical() % per_second == 0).all():
            return 0.001
    return 1.0


SUBSECOND_UNITS = {"ms": 10**3, "us": 10**6, "ns": 10**9}  # a Datetime's units in a second


def echoed(proxy_times: np.ndarray, lo: np.ndarray, hi: np.ndarray, tol: float) -> int:
    """Proxy lines paired one-to-one, in time order, with an instance line within `tol`.

    An instance line is the interval [lo, hi] its true time lies in: an
    unstamped access line borrowed a neighbour's stamp and may be seconds
    later. Wide intervals echo everything, so they cannot single an instance out.
    """
    tols = np.full(len(proxy_times), tol)
    return int((pair_windows(proxy_times, tols, lo, hi) >= 0).sum())


def _times_by(frame: pl.DataFrame, key: str) -> dict[str, np.ndarray]:
    """Sorted epoch seconds of the rows for each value of `key` (nulls left out), in one pass."""
    return {name: lo for name, (lo,) in _sorted_by(frame, key, seconds("at")).items()}


def _windows_by(frame: pl.DataFrame, key: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per value of `key`, the rows' time intervals [at, at + at_precision_s], sorted by start."""
    precision = (
        pl.col("at_precision_s").fill_null(0.0)
        if "at_precision_s" in frame.columns
        else pl.lit(0.0)
    )
    return _sorted_by(frame, key, seconds("at"), seconds("at") + precision)


def _sorted_by(
    frame: pl.DataFrame, key: str, *values: pl.Expr
) -> dict[str, tuple[np.ndarray, ...]]:
    """Per value of `key` (in order of first appearance), `values` of its rows sorted by the
    first, as arrays: one sorted copy, each key's rows picked from it by a mask (a partition
    copied every column a second time: with the filter and the sort, 0.5 GB at 20M)."""
    names = [f"_{i}" for i in range(len(values))]
    rows = frame.select(key, *(v.alias(n) for v, n in zip(values, names, strict=True)))
    if rows[key].null_count() or rows["_0"].null_count():  # (a filter copies all it keeps)
        rows = rows.filter(pl.col(key).is_not_null() & pl.col("_0").is_not_null())
    if not rows["_0"].is_sorted():  # (a log in time order, the proxy's: no sorted copy)
        rows = rows.sort("_0", maintain_order=True)
    arrays = [rows[n].to_numpy() for n in names]
    # each key's positions, in order, from one grouping (a mask a key was a pass over all
    # the rows a key: 0.35 s for the proxy's nine upstreams at 20M)
    positions = rows.select(key).with_row_index("_at").group_by(key, maintain_order=True).all()
    return {
        name: tuple(a[at.to_numpy()] for a in arrays)
        for name, at in zip(positions[key].to_list(), positions["_at"], strict=True)
    }


# What an nginx error-log line says of the request its access line left open
# (nginx 1.22 ngx_http_upstream.c; the layouts without $upstream_connect_time
# cannot tell a refused connect from a dropped answer by the access line alone).
ERROR_LOG_DELIVERY = {
    "conn_refused": "refused",  # connect() failed (111: Connection refused)
    "conn_failed": "refused",  # connect() failed (113: No route to host), …
    "no_live_upstream": "refused",  # no live upstreams while connecting to upstream
    "timeout": "reached",  # upstream timed out … while reading response header
    "upstream_closed": "reached",  # upstream prematurely closed connection
    "conn_reset": "reached",  # recv() failed (104: Connection reset by peer) while reading
    "upstream_error": "reached",  # upstream sent invalid header / too big header
}
ERROR_LOG_WINDOW_S = 2.0  # an error line and the access line of the same failure, whole seconds
UNNAMED_TIE_S = 0.005  # the two lines of one failure, where neither names the other


def with_error_log_delivery(proxy: pl.DataFrame, events: pl.DataFrame) -> pl.DataFrame:
    """Access lines whose delivery was left open, decided by the error line of the same failure.

    The error line names the upstream and is written when nginx gives up on it;
    the access line, at the end of the request, names the same upstream with a
    5xx. Each open access line takes the nearest error line for its upstream.
    """
    decisive = events.filter(pl.col("kind").is_in(list(ERROR_LOG_DELIVERY)))
    open_lines = (pl.col("delivery") == "unknown") & (pl.col("http_status") >= 500)
    if decisive.is_empty() or proxy.filter(open_lines).is_empty():
        return proxy
    said = (
        decisive.filter(pl.col("upstream").is_not_null())
        .select(
            pl.col("upstream").cast(pl.Utf8).alias("_address"),
            pl.col("at").alias("_error_at"),
            pl.col("kind").replace_strict(ERROR_LOG_DELIVERY).alias("_said"),
        )
        .sort("_error_at")
    )
    rows = proxy.with_row_index("_i")
    candidates = (
        rows.filter(open_lines)
        .select(
            "_i",
            last_upstream(pl.col("upstream")).alias("_address"),
            pl.col("at").alias("_error_at"),
        )
        .sort("_error_at")
        .join_asof(
            said,
            on="_error_at",
            by="_address",
            strategy="nearest",
            tolerance=dt.timedelta(seconds=ERROR_LOG_WINDOW_S),
            check_sortedness=False,
        )
        .select("_i", "_said")
    )
    decided = rows.join(candidates, on="_i", how="left", maintain_order="left").with_columns(
        pl.coalesce(pl.col("_said"), pl.col("delivery")).alias("delivery")
    )
    return with_unnamed_upstream_delivery(decided.drop("_said"), decisive).drop("_i")


def with_unnamed_upstream_delivery(rows: pl.DataFrame, decisive: pl.DataFrame) -> pl.DataFrame:
    """Open 5xx lines that name no upstream (Caddy's access log never does), decided by the
    error line written within `UNNAMED_TIE_S` of them with the same status.

    The proxy stamps both lines of one failure in the same microseconds; the tie is
    kept only where it is one-to-one — one line, one error line — so a burst of
    failures that could pair either way is left open, never guessed. The error line's
    address becomes the line's upstream.
    """
    open_lines = (
        (pl.col("delivery") == "unknown")
        & (pl.col("http_status") >= 500)
        & pl.col("upstream").is_null()
    )
    lines = rows.filter(open_lines).select("_i", "at", "http_status")
    said = (
        decisive.filter(pl.col("upstream").is_not_null())
        .with_row_index("_e")
        .select(
            "_e",
            pl.col("at").alias("_error_at"),
            pl.col("http_status").alias("_error_status"),
            pl.col("upstream").alias("_error_upstream"),
            pl.col("kind").replace_strict(ERROR_LOG_DELIVERY).alias("_said"),
        )
    )
    if lines.is_empty() or said.is_empty():
        return rows
    near = dt.timedelta(seconds=UNNAMED_TIE_S)
    pairs = (
        lines.join_where(
            said,
            pl.col("_error_at") >= pl.col("at") - near,
            pl.col("_error_at") <= pl.col("at") + near,
        )
        .filter(
            pl.col("_error_status").is_null() | (pl.col("_error_status") == pl.col("http_status"))
        )
        .filter((pl.len().over("_i") == 1) & (pl.len().over("_e") == 1))
        .select("_i", "_said", "_error_upstream")
    )
    return (
        rows.join(pairs, on="_i", how="left", maintain_order="left")
        .with_columns(
            pl.coalesce(pl.col("_said"), pl.col("delivery")).alias("delivery"),
            pl.coalesce(pl.col("upstream"), pl.col("_error_upstream")).alias("upstream"),
        )
        .drop("_said", "_error_upstream")
    )


def host_port(address: str) -> tuple[str, str] | None:
    """``http://127.0.0.1:8001/v1`` → ("127.0.0.1", "8001"); None without a port."""
    m = re.match(r"^(?:[a-z]+://)?\[?([^\]/\s]*?)\]?:(\d+)(?:/|$)", address.strip().lower())
    return (m.group(1), m.group(2)) if m else None


WILDCARD_HOSTS = {"", "0.0.0.0", "::", "*"}


def map_by_address(
    upstreams: list[str], addresses: dict[str, list[str]], aliases: dict[str, str]
) -> dict[str, str]:
    """Upstreams named by an address an instance's own start-up lines announce.

    vLLM prints where it listens (``Starting vLLM server on
    http://127.0.0.1:8001``); a proxy names the same host and port, or a
    server name its configuration binds to one (`aliases`: HAProxy's
    ``backend/server`` → address). An instance listening on every interface
    matches by port, but only when no other instance has that port.
    """
    exact: dict[tuple[str, str], set[str]] = {}
    by_port: dict[str, set[str]] = {}
    for name, listed in addresses.items():
        for address in listed:
            hp = host_port(address)
            if hp:
                exact.setdefault(hp, set()).add(name)
                by_port.setdefault(hp[1], set()).add(name)
    mapped = {}
    for upstream in upstreams:
        hp = host_port(aliases.get(upstream, upstream))
        if hp is None:
            continue
        owners = exact.get(hp) or {
            n
            for (host, port), names in exact.items()
            if port == hp[1] and host in WILDCARD_HOSTS
            for n in names
        }
        if not owners and len(by_port.get(hp[1], ())) == 1:
            owners = by_port[
                hp[1]
            ]  # one instance on that port, logged under another name for the host
        if len(owners) == 1:
            mapped[upstream] = next(iter(owners))
    claims = {}
    for upstream, name in mapped.items():
        claims.setdefault(name, []).append(upstream)
    # two upstreams announcing one instance: the evidence contradicts itself
    return {u: n for u, n in mapped.items() if len(claims[n]) == 1}


def map_upstreams(
    proxy: pl.DataFrame,
    server: pl.DataFrame,
    forced: dict[str, str],
    records: pl.DataFrame | None = None,
    addresses: dict[str, list[str]] | None = None,
    aliases: dict[str, str] | None = None,
) -> dict[str, UpstreamFit]:
    """Which instance each upstream address is, one instance per address.

    Strongest evidence first: ``--upstream`` (forced); the address an
    instance's start-up lines announce (`addresses`: instance → addresses;
    `aliases`: a proxy's server name → address); then timing, best fit first:
    an instance already taken is not given to a second address, and an address
    that fits two instances about as well is left unmapped rather than
    guessed; last, requests per second.
    """
    answered = with_last_upstream(  # (the columns read: a filter copies what it is given)
        proxy.select("upstream", "at", "http_status").filter(
            pl.col("upstream").is_not_null() & pl.col("http_status").is_between(200, 299)
        ),
        "address",
    )
    access = inference_records(server) if records is None else records
    tol = MATCH_TOLERANCE_S + _stamp_precision(proxy)
    names = access["instance"].unique().sort().to_list()
    by_instance = _windows_by(access, "instance")
    empty = (np.array([]), np.array([]))
    instance_windows = {n: by_instance.get(n, empty) for n in names}
    by_address = _times_by(answered, "address")
    fits: dict[str, UpstreamFit] = {}
    scores = []
    distinct = proxy.select(pl.col("upstream").drop_nulls().unique())
    tried = distinct.select(last_upstream(pl.col("upstream")).unique()).to_series()
    # every address the proxy sent to, answered or not; a group name is not an upstream
    logged = sorted(
        set(by_address) | set(forced) | {u for u in tried if host_port((aliases or {}).get(u, u))}
    )
    announced = map_by_address(logged, addresses or {}, aliases or {})
    for address in logged:
        own = by_address.get(address, np.array([]))
        if address in forced:
            fits[address] = UpstreamFit(
                address, forced[address], None, len(own), forced=True, by="forced"
            )
            continue
        if address in announced:
            fits[address] = UpstreamFit(address, announced[address], None, len(own), by="address")
            continue
        for n in names:
            lo, hi = instance_windows[n]
            head, keep = head_span(own, lo, 0.0)
            score = echoed(head, lo[keep], hi[keep], tol) / len(head) if len(head) else 0.0
            scores.append((score, address, n))
        fits[address] = UpstreamFit(address, None, 0.0, len(own))
    taken = {f.instance for f in fits.values() if f.instance}
    for fit, address, name in sorted(scores, reverse=True):
        current = fits[address]
        if current.instance or name in taken or fit < MAPPING_MIN_FIT:
            continue
        rivals = [f for f, a, n in scores if a == address and n != name and n not in taken]
        # another open address keeping time with this instance as well: its log may be the
        # one missing (each instance answers only its own address)
        rival_addresses = [
            f for f, a, n in scores if n == name and a != address and not fits[a].instance
        ]
        if max(rivals + rival_addresses, default=0.0) >= fit - AMBIGUOUS_FIT:
            current.fit = round(fit, 3)
            continue  # two instances or two addresses keep time alike: do not guess
        fits[address] = UpstreamFit(address, name, round(fit, 3), current.lines, by="timing")
        taken.add(name)
    # requests per second are only comparable where the instance's stamps are its own
    precise = {
        n: lo
        for n, (lo, hi) in instance_windows.items()
        if len(lo) and np.median(hi - lo) <= MATCH_TOLERANCE_S
    }
    _map_by_counts(fits, by_address, precise, taken)
    return fits


def _map_by_counts(
    fits: dict[str, UpstreamFit],
    by_address: dict[str, np.ndarray],
    instance_times: dict[str, np.ndarray],
    taken: set[str],
) -> None:
    """Addresses timing left open, mapped by requests per second where one instance stands out."""
    scores = []
    open_addresses = [
        a for a, fit in fits.items() if not (fit.instance or fit.forced) and a in by_address
    ]
    open_names = [n for n in instance_times if n not in taken]
    per_second = PerSecond(
        [by_address[a] for a in open_addresses] + [instance_times[n] for n in open_names]
    )
    for address in open_addresses:
        for name in open_names:
            r = per_second.correlation(by_address[address], instance_times[name])
            scores.append((r, address, name))
    for r, address, name in sorted(scores, reverse=True):
        current = fits[address]
        if current.instance or name in taken or r < COUNTS_MIN_R:
            continue
        rivals = [q for q, a, n in scores if a == address and n != name and n not in taken]
        if rivals and max(rivals) > r - COUNTS_MARGIN:
            continue
        current.instance, current.by, current.counts_r = name, "counts", round(r, 3)
        taken.add(name)


class PerSecond:
    """Requests per second of several sorted time series on one grid of whole seconds,
    each counted once (not once a pair: 64 pairs of 800k times took 0.44 s at 20M)."""

    def __init__(self, series: list[np.ndarray]) -> None:
        present = [s for s in series if len(s)]
        self.lo = np.floor(min(s[0] for s in present)) if present else 0.0
        bins = int(np.floor(max(s[-1] for s in present)) - self.lo) + 1 if present else 0
        self.counts: dict[int, np.ndarray] = {}
        if bins <= COUNTS_MAX_BINS:  # (else each pair is counted on its own grid)
            for s in present:
                self.counts[id(s)] = np.bincount((s - self.lo).astype(np.int64), minlength=bins)

    def correlation(self, own: np.ndarray, theirs: np.ndarray) -> float:
        """Best Pearson correlation of the two series' requests per second over the seconds
        they span together, the clocks up to a few seconds apart."""
        if len(own) < 2 or len(theirs) < 2:
            return 0.0
        lo = np.floor(min(own[0], theirs[0]))
        bins = int(np.floor(max(own[-1], theirs[-1])) - lo) + 1
        if bins > COUNTS_MAX_BINS:
            return 0.0
        a, b = self._counts(own, lo, bins), self._counts(theirs, lo, bins)
        best = 0.0
        for lag in range(-COUNTS_MAX_LAG_S, COUNTS_MAX_LAG_S + 1):
            x = a[max(0, lag) : bins + min(0, lag)]
            y = b[max(0, -lag) : bins - max(0, lag)]
            if x.std() > 0 and y.std() > 0:
                best = max(best, float(np.corrcoef(x, y)[0, 1]))
        return best

    def _counts(self, times: np.ndarray, lo: float, bins: int) -> np.ndarray:
        whole = self.counts.get(id(times))
        if whole is None:
            return np.bincount((times - lo).astype(np.int64), minlength=bins).astype(float)
        # (a second from the grid's origin is the same second from the pair's: epoch times
        # lie within a factor two of whole seconds near them, so each difference is exact)
        start = int(lo - self.lo)
        return whole[start : start + bins].astype(float)


LINE_COLUMNS = (
    "at",
    "http_status",
    "request_id",
    "upstream",
    "delivery",
    "attempts",
    "also_reached",
    "source",
)


def inference_lines(proxy: pl.DataFrame, columns: tuple[str, ...] = LINE_COLUMNS) -> pl.DataFrame:
    """The proxy's lines of inference calls, sorted, each known by its position (`_line`, also
    its "instance" while matching: each line stands for itself). `columns`: what is kept of
    each (the clock reads two; a sort copies what it is given)."""
    if "source" not in columns:
        columns = (*columns, "source")  # (the order of lines stamped alike)
    # a filter and a sort each copy every column they are given (0.2 GB at 20M): neither
    # where every line is an inference call's and the log is in time order (nginx writes
    # a line as its request ends, stamped then)
    paths = proxy["path"].drop_nulls().unique().cast(pl.Utf8)
    if paths.str.contains(INFERENCE_PATH_RE).all():
        lines = proxy.select(*columns)
    else:
        lines = (
            proxy.lazy()  # (lazy: the filter then copies only the columns selected after it)
            .filter(pl.col("path").is_null() | is_inference_path(paths))  # (the distinct ones)
            .select(*columns)
            .collect()
        )
    lines = lines.with_columns(pl.lit(_stamp_precision(proxy)).alias("at_precision_s"))
    if not in_time_order(lines["at"], lines["source"]):
        # lines stamped alike (nginx's $msec: many a millisecond) keep the log's order
        lines = lines.sort("at", "source", maintain_order=True)
    return lines.with_row_index("_line").with_columns(pl.col("_line").alias("instance"))


def fit_clock(
    client: pl.DataFrame | RequestTimes,
    proxy: pl.DataFrame,
    forced_offset: float | None,
    rivals: bool = False,
) -> ClockFit | None:
    """The client→proxy offset, from the proxy's lines against the requests' ends; None
    without a proxy log. `rivals`: also score its best rival offset (where it is the only
    server-side clock there is)."""
    times = RequestTimes.of(client)
    if proxy.is_empty() or not len(times.starts):
        return None
    lines = inference_lines(proxy, ("at", "http_status"))
    return estimate_offset(times, lines, forced_offset, rivals=rivals)


def attribute(
    requests: pl.DataFrame,
    proxy: pl.DataFrame,
    mapping: dict[str, UpstreamFit],
    clock: ClockFit | None,
) -> pl.DataFrame:
    """Add proxy_upstream, proxy_instance, proxy_delivery, proxy_status, proxy_source,
    proxy_attempts and proxy_also_reached (the instances, else addresses, an earlier attempt
    reached before the proxy retried elsewhere) to each request; `clock` is the
    client→proxy fit (`fit_clock`)."""
    columns = {
        "proxy_upstream": model.LABEL,
        "proxy_instance": model.LABEL,
        "proxy_delivery": model.LABEL,
        "proxy_status": pl.Int64,
        "proxy_source": model.SOURCE,
        "proxy_attempts": model.COUNT,
        "proxy_also_reached": model.LABEL,
    }

    def nothing() -> pl.DataFrame:
        return requests.with_columns(pl.lit(None, dtype=t).alias(c) for c, t in columns.items())

    if proxy.is_empty() or requests.is_empty() or clock is None:
        return nothing()
    inference = inference_lines(proxy)
    if inference.is_empty():  # a proxy log of health checks only
        return nothing()
    rows = requests.with_row_index("_row")
    line_ids = inference.filter(pl.col("request_id").is_not_null()).select(
        pl.col("request_id").str.replace(ID_PREFIX_RE, "").alias("request_id"),
        pl.col("_line").alias("_src"),
    )
    by_id = (  # (the requests' ids copied only where lines have some: 220 MB of text at 20M)
        rows.select("_row", "request_id")
        .filter(pl.col("request_id").is_not_null())
        .join(line_ids, on="request_id")
        if line_ids.height
        else pl.DataFrame(schema={"_row": pl.UInt32, "request_id": pl.Utf8, "_src": pl.UInt32})
    )
    # a request whose id two lines carry keeps the later one
    pinned = by_id.group_by("_row", maintain_order=True).agg(
        pl.col("_src").last().alias("instance")
    )
    address_to_instance = {a: f.instance for a, f in mapping.items() if f.instance}
    timed = timed_requests(rows, pl.col("instance").alias("_served_by"))
    inference = with_last_upstream(inference, "proxy_upstream")
    lines = inference.with_columns(
        pl.col("proxy_upstream")
        .replace_strict(address_to_instance, default=None, return_dtype=model.LABEL)
        .alias("_to")
    )
    taken = np.zeros(inference.height, dtype=bool)  # lines given to a request so far
    taken[pinned["instance"].drop_nulls().to_numpy()] = True
    # requests still without a line, by row (masks, not anti-joins of millions of rows)
    waiting = np.ones(rows.height, dtype=bool)
    waiting[pinned["_row"].to_numpy()] = False
    timed_rows = timed["_row"].to_numpy()
    owners = [pinned]
    # a request an instance's own log placed takes a line of that instance's address
    # first: in a burst, time alone hands one instance's lines to the other's requests.
    # Each instance's lines and requests are its own (a line goes to one address, a
    # request was served by one instance): matched two instances at once, each picking its
    # rows from the whole (a partition of both, kept through the matching, was 0.35 GB)
    none_pinned = pinned.clear()
    own_columns, line_to = lines.select(*RECORD_COLUMNS, "_line"), lines["_to"]
    untaken, unplaced = pl.Series(~taken), pl.Series(waiting[timed_rows])

    def own_lines(name: str) -> pl.DataFrame:
        own = own_columns.filter((line_to == name).fill_null(False) & untaken)
        mine = timed.filter((timed["_served_by"] == name).fill_null(False) & unplaced)
        if own.is_empty() or mine.is_empty():
            return pl.DataFrame(schema={"_row": pl.UInt32, "instance": pl.UInt32})
        return match_by_time(own, mine, clock.offset_s, none_pinned).select("_row", "instance")

    with ThreadPoolExecutor(max_workers=2) as pool:
        owners += pool.map(own_lines, sorted(set(address_to_instance.values())))
    for own in owners[1:]:
        taken[own["instance"].to_numpy()] = True
        waiting[own["_row"].to_numpy()] = False
    # the rest by time alone (a request whose instance has a known address had its turn)
    placed_elsewhere = pl.col("_served_by").is_in(list(address_to_instance.values()))
    by_time = match_by_time(
        lines.filter(~pl.Series(taken)),
        timed.filter(pl.Series(waiting[timed_rows]) & ~placed_elsewhere.fill_null(False)),
        clock.offset_s,
        none_pinned,
    )
    owners.append(by_time.select("_row", "instance"))
    # each request's line, by position: its details are gathered, not joined on text
    line_of = np.full(rows.height, -1, dtype=np.int64)
    owner = pl.concat(owners)
    line_of[owner["_row"].to_numpy()] = owner["instance"].to_numpy()
    has_line = line_of >= 0
    details = lines.select(
        pl.col("source").cast(model.SOURCE).alias("proxy_source"),
        "proxy_upstream",
        pl.col("_to").alias("proxy_instance"),  # (each line's, not 6.6M requests' as text)
        pl.col("delivery").alias("proxy_delivery"),
        pl.col("http_status").alias("proxy_status"),
        pl.col("attempts").alias("proxy_attempts"),
        _named_attempts(inference["also_reached"], address_to_instance).alias("proxy_also_reached"),
    )
    del inference, lines
    # a null position gathers a null row: no second pass over each column to blank them
    where = pl.Series(line_of).set(pl.Series(~has_line), None)
    return requests.with_columns(model.nulls_as_literals(details.gather(where)))
