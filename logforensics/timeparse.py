"""Every timestamp style to UTC, as polars expressions (never dateutil per line).

Styles seen in real logs:

* RFC 3339 / ISO 8601 (``docker logs -t``, ``kubectl logs --timestamps``,
  client JSON): nanoseconds, ``Z`` or an offset, or naive (then a zone is assumed);
* vLLM's own yearless stamp ``INFO 02-24 06:16:03``: no year, no zone, whole
  seconds, in the server's local time; a log that crosses New Year rolls over;
* CLF ``24/Feb/2026:06:16:03 +0000`` (nginx, Traefik), and naive layouts in a
  known zone (HAProxy's accept date, nginx's error.log, ``http.server``'s
  ``01/Dec/2026 14:33:36``);
* BSD syslog ``Feb 24 06:16:03`` (no year; journald ``-o short``, RFC 3164);
* time of day only (SGLang's ``[16:43:29 TP0]``), dated by a neighbouring line;
* epoch seconds / milliseconds / microseconds / nanoseconds (client result files).
"""

from __future__ import annotations

import polars as pl

# As leniently as the sniffed formats read (`parse_iso`): RFC 3339's lower-case "t" and
# "z", and a one-digit month, day, hour, minute or second (`%m`, `%H`, … take them).
ISO_RE = (
    r"^(\d{4}-\d{1,2}-\d{1,2})[Tt ](\d{1,2}:\d{1,2}:\d{1,2})(?:[.,](\d{1,9}))?\d*"
    r"\s*([Zz]|[+-]\d{2}:?\d{2})?$"
)


def iso_to_utc(text: pl.Expr, assume_tz: str = "UTC") -> pl.Expr:
    """ISO 8601 text to UTC microseconds; naive values are read in `assume_tz`.

    Unreadable values become null, so callers can count them.
    """
    parts = text.str.strip_chars().str.extract_groups(ISO_RE)
    date, clock = parts.struct.field("1"), parts.struct.field("2")
    frac = parts.struct.field("3").fill_null("0")
    zone = (
        parts.struct.field("4")
        .str.replace(r"^[Zz]$", "+00:00")
        .str.replace(r"^([+-]\d{2})(\d{2})$", "${1}:${2}")
    )
    base = pl.concat_str([date, pl.lit("T"), clock, pl.lit("."), frac])
    zoned = (
        pl.concat_str([base, zone])
        .str.to_datetime("%Y-%m-%dT%H:%M:%S%.f%:z", time_unit="us", strict=False)
        .dt.convert_time_zone("UTC")
    )
    naive = (
        base.str.to_datetime("%Y-%m-%dT%H:%M:%S%.f", time_unit="us", strict=False)
        .dt.replace_time_zone(assume_tz, ambiguous="earliest", non_existent="null")
        .dt.convert_time_zone("UTC")
    )
    return pl.when(zone.is_not_null()).then(zoned).otherwise(naive)


def runtime_stamp_to_utc(stamp: pl.Expr) -> pl.Expr:
    """``YYYY-MM-DDTHH:MM:SS.f…Z`` (a container runtime's stamp) to UTC µs; null if it is not one."""
    return stamp.str.to_datetime(
        "%Y-%m-%dT%H:%M:%S%.fZ", time_unit="us", strict=False, cache=False
    ).dt.replace_time_zone("UTC")


# microseconds per unit of a fraction's first `n` (≤ 6) digits
_MICROS_PER_DIGITS = {n: 10 ** (6 - n) for n in range(1, 7)}


def sliced_runtime_stamp_to_utc(line: pl.Expr, end: pl.Expr) -> pl.Expr:
    """A runtime stamp ``YYYY-MM-DDTHH:MM:SS.f…Z`` (1 to 9 digits, ASCII) that is
    ``line[:end]``, to UTC µs; null where `end` is. The same instant `runtime_stamp_to_utc`
    reads (the fraction truncated to the microsecond), 7× faster: the whole seconds by one
    fixed-width format, the fraction's digits as an integer."""
    digits = pl.min_horizontal(end - len("2026-02-24T06:16:03.Z"), 6)
    fraction = line.str.slice(len("2026-02-24T06:16:03."), digits).cast(pl.Int64, strict=False)
    micros = fraction * digits.replace_strict(
        _MICROS_PER_DIGITS, default=None, return_dtype=pl.Int64
    )
    whole = line.str.slice(0, len("2026-02-24T06:16:03")).str.to_datetime(
        "%Y-%m-%dT%H:%M:%S", time_unit="us", strict=False, cache=False
    )
    return (
        pl.when(end.is_not_null())
        .then(whole + pl.duration(microseconds=micros))
        .dt.replace_time_zone("UTC")
    )


def yearless_to_utc(text: pl.Expr, year: int, assume_tz: str = "UTC") -> pl.Expr:
    """vLLM's ``MM-DD HH:MM:SS`` stamp, given the year and the server's zone.

    A log that crosses New Year is fixed later by `roll_years`.
    """
    return (
        pl.concat_str([pl.lit(f"{year}-"), text])
        .str.to_datetime("%Y-%m-%d %H:%M:%S", time_unit="us", strict=False)
        .dt.replace_time_zone(assume_tz, ambiguous="earliest", non_existent="null")
        .dt.convert_time_zone("UTC")
    )


def roll_years(stamps: pl.Expr) -> pl.Expr:
    """Add a year to every yearless stamp after the log wrapped past 31 Dec.

    A wrap is a step back of more than 300 days from the last stamp seen (lines
    without a stamp in between do not break the chain).
    """
    previous = stamps.forward_fill().shift(1)
    back = (stamps - previous) < pl.duration(days=-300)
    wraps = back.fill_null(False).cast(pl.Int32).cum_sum()
    return stamps.dt.offset_by(pl.format("{}y", wraps))


def clf_to_utc(text: pl.Expr) -> pl.Expr:
    """``24/Feb/2026:06:16:03 +0000`` (nginx ``$time_local``, Traefik CLF) to UTC."""
    return text.str.to_datetime(
        "%d/%b/%Y:%H:%M:%S %z", time_unit="us", strict=False
    ).dt.convert_time_zone("UTC")


def naive_to_utc(text: pl.Expr, fmt: str, tz: str) -> pl.Expr:
    """A stamp in layout `fmt` with no zone of its own, read in `tz`."""
    return (
        text.str.to_datetime(fmt, time_unit="us", strict=False)
        .dt.replace_time_zone(tz, ambiguous="earliest", non_existent="null")
        .dt.convert_time_zone("UTC")
    )


def bsd_to_utc(text: pl.Expr, year: int, tz: str) -> pl.Expr:
    """BSD syslog ``Feb  4 06:16:03[.123456]`` in `year` and `tz` (roll with `roll_years`)."""
    day = text.str.replace(r"^(\w{3}) +(\d) ", "${1} 0${2} ").str.replace(r"^(\w{3}) +", "${1} ")
    whole = naive_to_utc(
        pl.concat_str([pl.lit(f"{year} "), day.str.replace(r"\.\d+$", "")]), "%Y %b %d %H:%M:%S", tz
    )
    fraction = text.str.extract(r"\.(\d{1,6})$", 1).str.pad_end(6, "0").cast(pl.Int64).fill_null(0)
    return whole + pl.duration(microseconds=fraction)


def time_of_day_to_utc(text: pl.Expr, dated: pl.Expr, tz: str) -> pl.Expr:
    """``HH:MM:SS[.f]`` dated by the nearest dated stamp (`dated`, earlier else later).

    A step back of more than 12 h is the next day; a step back of seconds (lines of
    several processes) is not. Without any dated stamp the result is null.
    """
    day = (
        dated.dt.convert_time_zone(tz)
        .dt.replace_time_zone(None)
        .dt.truncate("1d")
        .forward_fill()
        .backward_fill()
    )
    tod = text.str.replace(",", ".").str.to_time("%H:%M:%S%.f", strict=False)
    ns = tod.cast(pl.Int64)
    wraps = (ns < ns.forward_fill().shift(1) - 12 * 3600 * 10**9).fill_null(False).cum_sum()
    return (
        day.dt.combine(tod)
        .dt.offset_by(pl.format("{}d", wraps))
        .dt.replace_time_zone(tz, ambiguous="earliest", non_existent="null")
        .dt.convert_time_zone("UTC")
    )


def epoch_to_utc(value: pl.Expr) -> pl.Expr:
    """Epoch seconds, milliseconds, microseconds or nanoseconds, told apart by magnitude."""
    v = value.cast(pl.Float64)
    micros = (
        pl.when(v.abs() >= 1e17)
        .then(v / 1e3)
        .when(v.abs() >= 1e14)
        .then(v)
        .when(v.abs() >= 1e11)
        .then(v * 1e3)
        .otherwise(v * 1e6)
    )
    return micros.round(0).cast(pl.Int64).cast(pl.Datetime("us", "UTC"))


# Explicit formats tried on a sample of a column, fastest path first. The
# regex-based `iso_to_utc` handles whatever a chosen format misses.
FAST_ISO_FORMATS = (
    ("%Y-%m-%dT%H:%M:%S%.fZ", "utc"),
    ("%Y-%m-%dT%H:%M:%S%.f%#z", "zoned"),
    ("%Y-%m-%dT%H:%M:%S%.f", "local"),
    ("%Y-%m-%d %H:%M:%S%.f", "local"),
)
SNIFF_SAMPLE = 200


# A UTC stamp with a fraction, ASCII only (a client's `datetime.isoformat()` + "Z", Go's
# RFC3339Nano): `sliced_runtime_stamp_to_utc` reads a column of them 2× faster than the
# format string `%Y-%m-%dT%H:%M:%S%.fZ` does.
ZULU_STAMP_RE = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{1,9}Z$"


def parse_iso(values: pl.Series, assume_tz: str = "UTC") -> pl.Series:
    """ISO 8601 text to UTC µs, the format sniffed once per column, not per line.

    A column whose first values are all UTC stamps with a fraction is read by
    slicing (one regex says which rows are such stamps; the others take the
    path below). Otherwise the first explicit format that reads a whole sample
    is applied to the column; only the rows it misses (mixed styles, commas,
    odd offsets) take the slower regex path. Unreadable values are null.
    """
    text = values.cast(pl.Utf8)
    head = text.head(SNIFF_SAMPLE).drop_nulls()
    if head.len() and head.str.contains(ZULU_STAMP_RE).all():
        return _sliced_zulu(text, assume_tz).alias(values.name)
    return _sniffed_iso(text, assume_tz).alias(values.name)


def _sliced_zulu(text: pl.Series, assume_tz: str) -> pl.Series:
    """`parse_iso` of a column of mostly UTC stamps with a fraction: those sliced, the
    rest (if any) read by the sniffed path."""
    frame = pl.DataFrame({"v": text})
    zulu = frame.select(pl.col("v").str.contains(ZULU_STAMP_RE)).to_series()
    end = pl.when(pl.lit(zulu)).then(pl.col("v").str.len_bytes().cast(pl.Int64))
    out = frame.select(sliced_runtime_stamp_to_utc(pl.col("v"), end)).to_series()
    rest = (~zulu).arg_true()  # null values are null in `zulu` and skipped here
    if rest.len():
        out = out.scatter(rest, _sniffed_iso(text.gather(rest), assume_tz))
    return out


def _sniffed_iso(text: pl.Series, assume_tz: str) -> pl.Series:
    """`parse_iso` by the first format that reads a whole sample, the regex where it misses."""
    if text.str.contains(r"^\s|\s$").any():
        text = text.str.strip_chars()
    present = text.is_not_null() & (text != "")
    sample = text.head(SNIFF_SAMPLE * 10).drop_nulls()
    sample = sample.filter(sample != "").head(SNIFF_SAMPLE)
    if sample.len() < SNIFF_SAMPLE < text.len():  # the first present values lie further on
        sample = text.filter(present).head(SNIFF_SAMPLE)
    # stamps with a fraction are nearly all distinct: a cache of parsed values only costs
    cache = not sample.str.contains(r"[.,]\d").any()
    out = None
    for fmt, kind in FAST_ISO_FORMATS:
        if (
            sample.len()
            and sample.str.to_datetime(fmt, time_unit="us", strict=False).null_count() == 0
        ):
            parsed = text.str.to_datetime(fmt, time_unit="us", strict=False, cache=cache)
            if kind == "utc":
                parsed = parsed.dt.replace_time_zone("UTC")
            elif kind == "local":
                parsed = parsed.dt.replace_time_zone(
                    assume_tz, ambiguous="earliest", non_existent="null"
                )
            out = parsed.dt.convert_time_zone("UTC")
            break
    if out is None:
        return pl.DataFrame({"v": text}).select(iso_to_utc(pl.col("v"), assume_tz)).to_series()
    missed = (out.is_null() & present).arg_true()
    if missed.len():
        slow = pl.DataFrame({"v": text.gather(missed)}).select(iso_to_utc(pl.col("v"), assume_tz))
        out = out.scatter(missed, slow.to_series())
    return out
