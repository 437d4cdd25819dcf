import datetime as dt

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logforensics import timeparse

UTC = dt.timezone.utc


def convert(values, fn):
    return pl.DataFrame({"v": values}).select(fn(pl.col("v")).alias("t"))["t"].to_list()


def test_iso_variants_land_on_the_same_utc_instant():
    values = [
        "2026-02-24T06:16:03.482913055Z",  # docker logs -t: nanoseconds
        "2026-02-24T15:16:03.482913+09:00",  # client in Seoul
        "2026-02-24 06:16:03,482913",  # Python logging's comma, naive (UTC assumed)
        "2026-02-24T01:16:03.482913-0500",  # offset without colon
    ]
    expected = dt.datetime(2026, 2, 24, 6, 16, 3, 482913, tzinfo=UTC)
    assert convert(values, timeparse.iso_to_utc) == [expected] * 4


def test_naive_iso_is_read_in_the_assumed_zone():
    [t] = convert(["2026-02-24T15:16:03"], lambda e: timeparse.iso_to_utc(e, "Asia/Seoul"))
    assert t == dt.datetime(2026, 2, 24, 6, 16, 3, tzinfo=UTC)


def test_unreadable_iso_is_null_not_an_error():
    assert convert(["garbage", "2026-13-45T99:00:00Z", ""], timeparse.iso_to_utc) == [None] * 3


def test_yearless_vllm_stamps_roll_over_new_year():
    frame = pl.DataFrame({"md": ["12-31 23:59:58", "12-31 23:59:59", "01-01 00:00:07"]})
    out = frame.select(timeparse.roll_years(timeparse.yearless_to_utc(pl.col("md"), 2025)))
    years = [t.year for t in out.to_series().to_list()]
    assert years == [2025, 2025, 2026]


def test_yearless_stamp_in_server_local_time():
    [t] = convert(["02-24 15:16:03"], lambda e: timeparse.yearless_to_utc(e, 2026, "Asia/Seoul"))
    assert t == dt.datetime(2026, 2, 24, 6, 16, 3, tzinfo=UTC)


@pytest.mark.parametrize(
    "value",
    [1771913763.5, 1771913763500, 1771913763500000, 1771913763500000000],
    ids=["s", "ms", "us", "ns"],
)
def test_epoch_units_told_apart_by_magnitude(value):
    [t] = convert([value], timeparse.epoch_to_utc)
    assert t == dt.datetime(2026, 2, 24, 6, 16, 3, 500000, tzinfo=UTC)


def test_clf_bsd_naive_and_time_of_day_styles():
    frame = pl.DataFrame(
        {
            "clf": ["24/Feb/2026:15:16:03 +0900", None],
            "bsd": ["Feb  4 06:16:03", "Dec 31 23:59:59.250"],
            "naive": ["01/Dec/2026 14:33:36", "garbage"],
        }
    )
    out = frame.select(
        timeparse.clf_to_utc(pl.col("clf")).alias("clf"),
        timeparse.bsd_to_utc(pl.col("bsd"), 2026, "UTC").alias("bsd"),
        timeparse.naive_to_utc(pl.col("naive"), "%d/%b/%Y %H:%M:%S", "Asia/Seoul").alias("naive"),
    )
    utc = dt.timezone.utc
    assert out["clf"].to_list() == [dt.datetime(2026, 2, 24, 6, 16, 3, tzinfo=utc), None]
    assert out["bsd"].to_list() == [
        dt.datetime(2026, 2, 4, 6, 16, 3, tzinfo=utc),
        dt.datetime(2026, 12, 31, 23, 59, 59, 250000, tzinfo=utc),
    ]
    assert out["naive"].to_list() == [dt.datetime(2026, 12, 1, 5, 33, 36, tzinfo=utc), None]


def test_time_of_day_is_dated_by_its_neighbours_and_rolls_over_midnight():
    dated = [dt.datetime(2026, 2, 24, 23, 59, 58, tzinfo=dt.timezone.utc), None, None, None]
    frame = pl.DataFrame(
        {"tod": ["23:59:58", "23:59:59", "23:59:57", "00:00:01"], "at": dated},
        schema={"tod": pl.Utf8, "at": pl.Datetime("us", "UTC")},
    )
    out = frame.select(timeparse.time_of_day_to_utc(pl.col("tod"), pl.col("at"), "UTC"))
    assert [t.isoformat() for t in out.to_series()] == [
        "2026-02-24T23:59:58+00:00",
        "2026-02-24T23:59:59+00:00",
        "2026-02-24T23:59:57+00:00",  # another rank's line, seconds back: the same day
        "2026-02-25T00:00:01+00:00",
    ]


ZULU = "2026-02-24T06:16:03.482913Z"
stamp_pieces = st.tuples(
    st.sampled_from(["2026", "2028", "1999", "0000", "20a6"]),
    st.sampled_from(["-02-", "-12-", "-13-", "-2-", "/02/"]),
    st.sampled_from(["24", "29", "31", "00"]),
    st.sampled_from(["T", " ", "t"]),
    st.sampled_from(["06:16:03", "23:59:59", "24:00:00", "06:16:60", "6:16:03", "06:1:3"]),
    st.sampled_from(["", ".", ","]),
    st.text("0123456789", max_size=12),
    st.sampled_from(["Z", "", "z", "+09:00", "-0500", " Z", "Z ", "Zx"]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(stamp_pieces.map("".join) | st.none(), min_size=1, max_size=30))
def test_parse_iso_reads_what_the_regex_path_reads(values):
    """Whichever path `parse_iso` takes for a column (UTC stamps sliced, a sniffed format,
    the regex), each value's instant is the one `iso_to_utc` reads from it alone."""
    column = pl.DataFrame({"v": pl.Series(values, dtype=pl.Utf8)})
    micros = column.select(timeparse.iso_to_utc(pl.col("v")).alias("t"))["t"].cast(pl.Int64)
    expected = micros.to_list()  # as integers: year 0 is no Python datetime
    got = timeparse.parse_iso(column["v"])
    assert got.dtype == pl.Datetime("us", "UTC")
    assert got.cast(pl.Int64).to_list() == expected
    # after a head of UTC stamps with a fraction, the column is read by slicing
    padded = timeparse.parse_iso(pl.Series([ZULU] * timeparse.SNIFF_SAMPLE + values))
    assert padded.cast(pl.Int64).to_list()[timeparse.SNIFF_SAMPLE :] == expected
    assert padded[0] == dt.datetime(2026, 2, 24, 6, 16, 3, 482913, tzinfo=UTC)
