"""Every timestamp style to UTC, as polars expressions (never dateutil per line).

Styles seen in real logs:

* RFC 3339 / ISO 8601 (``docker logs -t``, ``kubectl logs --timestamps``,
  client JSON): nanoseconds, ``Z`` or an offset, or naive (then a zone is assumed);
* vLLM's own yearless stamp ``INFO 02-24 06:16:03``: no year, no zone, whole
  seconds, in the server's local time;
* epoch seconds / nanoseconds (client result files).
"""

from __future__ import annotations

import polars as pl

ISO_RE = (
    r"^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}:\d{2})(?:[.,](\d{1,9}))?\d*"
    r"\s*(Z|[+-]\d{2}:?\d{2})?$"
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
        .str.replace("Z", "+00:00")
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

    A wrap is a step back of more than 300 days between consecutive stamps.
    """
    back = stamps.diff() < pl.duration(days=-300)
    wraps = back.fill_null(False).cast(pl.Int32).cum_sum()
    return stamps.dt.offset_by(pl.format("{}y", wraps))


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
