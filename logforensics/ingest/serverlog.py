"""Server-side logs: a container's stdout, split line by line among line formats.

A vLLM instance's log interleaves vLLM's own lines, uvicorn's access lines
and whatever else runs in the container (a relaying proxy's tracebacks, an
nginx side-car). Each line first loses its runtime prefixes, outermost first:

* ANSI colours (vLLM's level colours and the grey around its asctime, the
  cyan process tag, uvicorn's, LiteLLM's, the production-stack router's), also
  in caret notation (``^[[1;36m``, a trailing ``^M``) as ``cat -v`` saves them;
* ``kubectl logs --prefix`` pod names ``[pod/NAME/CONTAINER] ``, ``docker compose
  logs``' service names ``vllm-a-1  | `` (each its own instance);
* a leading ISO 8601 stamp: ``docker logs -t`` / ``kubectl --timestamps``
  (RFC 3339, nine fraction digits, ``Z`` or an offset), the raw CRI file's
  ``stdout F`` tag, ``journalctl -o short-iso[-precise]``
  (``2026-02-24T06:16:03+0000 host unit[pid]: ``, newer systemd ``+00:00``),
  or any plain ISO 8601 stamp with or without an offset, ``T`` or a space
  between date and time (a naive one is read in the server's zone);
* ``journalctl -o short`` / syslog ``Feb 24 06:16:03 host unit[pid]: ``
  (no year: the context's year, rolled over New Year; the server's zone),
  optionally behind a syslog priority ``<134>``;
* a bracketed Python-logging stamp ``[2026-02-24 06:16:03 TP0] `` (SGLang,
  the vLLM production-stack router) or SGLang's yearless ``[02-24 06:16:03] ``;
* vLLM's process tags ``(APIServer pid=1) ``, ``(EngineCore_0 pid=…) ``,
  ``(VllmWorker rank=0 pid=…) ``, Ray's ``(RayWorkerVllm pid=…) ``;
* vLLM's own ``INFO 02-24 06:16:03 [file.py:12] `` stamp (kept as `level`).

Then every registered line format, in its `priority`, takes the lines it
recognises. Whatever none takes is counted as unparsed and shown in the
report, so ``parsed + noise + unparsed == lines`` always holds.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

import polars as pl

from logforensics import model, timeparse
from logforensics.ingest import LINE_FORMATS, register_file_format
from logforensics.ingest.base import (
    BATCH_BYTES,
    BATCHED_ABOVE,
    FileFormat,
    LineFormat,
    ParseContext,
    ParseResult,
    Sample,
    SourceFile,
    lines_of_bytes,
)

# Any CSI escape (colours, bold, cursor moves); a lone ESC left over is dropped too.
ANSI_RE = r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b"
# The same escapes in caret notation, as `cat -v`, less or a terminal capture save them
# ("^[[1;36m(VllmWorkerProcess pid=7)^[[0;0m INFO …"), and a carriage return as "^M".
CARET_RE = r"\^\[\[[0-?]*[ -/]*[@-~]|\^\[|\^M$"
KUBECTL_PREFIX_RE = r"^\[pod/(?P<pod>[^/\]\s]+)/(?P<container>[^\]\s]+)\] "
# `docker compose logs`: "vllm-a-1  | …" (v2), "traefik_1  | …" (v1); one instance a service
COMPOSE_PREFIX_RE = r"^(?P<service>[A-Za-z0-9][\w.-]*?[-_]\d+)\s+\| "
# docker/kubectl/CRI/journal short-iso/plain ISO, with the journal's "host unit[pid]: "
# or the CRI file's "stdout F " after it when present.
ISO_PREFIX_RE = (
    r"^(?P<iso>\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,](?P<isofrac>\d{1,9}))?"
    r"(?:Z|[+-]\d{2}:?\d{2})?)"
    r"(?:(?: (?:stdout|stderr) [FP])|(?: \S+ [^\s\[\]:]+\[\d+\]:))?(?: |$)"
)
ISO_INNER_RE = ISO_PREFIX_RE.replace("?P<iso>", "?P<iso2>").replace("?P<isofrac>", "?P<iso2frac>")
MONTHS = "Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec"
BSD_PREFIX_RE = (
    rf"^(?:<\d{{1,3}}>)?(?P<bsd>(?:{MONTHS}) [ \d]?\d \d{{2}}:\d{{2}}:\d{{2}}(?:\.(?P<bsdfrac>\d{{1,6}}))?)"
    r" (?:\S+ )?[^\s\[\]:]+(?:\[\d+\])?: ?"
)
# RFC 5424: "<PRI>1 TIMESTAMP HOST APP PROCID MSGID SD " (HAProxy's `log … format rfc5424`).
RFC5424_PREFIX_RE = (
    r"^<\d{1,3}>1 (?P<r5>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.(?P<r5frac>\d{1,9}))?"
    r"(?:Z|[+-]\d{2}:\d{2})) \S+ \S+ \S+ \S+ (?:-|(?:\[[^\]]*\])+) ?"
)
BRACKET_PREFIX_RE = (
    r"^\[(?:(?P<bk>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:[.,](?P<bkfrac>\d{1,6}))?)"
    r"|(?P<bkmd>\d{2}-\d{2} \d{2}:\d{2}:\d{2})"
    # SGLang builds whose logger prints the time only: "[16:43:29 TP0] "
    r"|(?P<bktod>\d{2}:\d{2}:\d{2}(?:[.,]\d{1,6})?))(?: [^\]]*)?\] "
)
PROCESS_TAG_RE = r"^(?:\([^()]*\bpid=\d+\)\s+)+"
# vLLM: "INFO 02-24 06:16:03 [loggers.py:123] msg"; old: "metrics.py:351] msg";
# DEBUG builds: "[v1/engine/core.py:12]", "[model_executor/.../fp8_utils.py:3]";
# vllm-ascend appends ".%03d" to the time.
VLLM_STAMP_HEAD_RE = (
    r"^(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) "
    r"(?P<md>\d{2}-\d{2} \d{2}:\d{2}:\d{2})(?P<mdfrac>\.\d+)? "
    r"(?:\[?[^\s\[\]]+\.py:\d+\]? )?"
)
VLLM_STAMP_RE = VLLM_STAMP_HEAD_RE + r"(?P<msg>.*)$"  # a line holds no "\n": `msg` is the rest
# Line formats a proxy's or gateway's own stdout shares with a model server's.
SHARED_FORMATS = {"uvicorn_access", "python_traceback"}
RUNTIME_PRECISION_S = 1e-6  # fractional stamps are kept to the microsecond
WHOLE_SECOND_S = 1.0
VLLM_STAMP_PRECISION_S = 1.0


PREFIX_STEPS = (
    ("kubectl", KUBECTL_PREFIX_RE),
    ("compose", COMPOSE_PREFIX_RE),
    ("rfc5424", RFC5424_PREFIX_RE),
    ("iso", ISO_PREFIX_RE),
    ("bsd", BSD_PREFIX_RE),
    ("iso2", ISO_INNER_RE),
    ("bracket", BRACKET_PREFIX_RE),
    ("process", PROCESS_TAG_RE),
    ("vllm", VLLM_STAMP_RE),
)
# What every line that carries a layer must start with (or hold): one cheap
# scan of the whole column says exactly whether the layer occurs in the file,
# so the costly extraction runs only for layers that do.
PREFIX_GATES = {
    "kubectl": pl.col("_rest").str.starts_with("[pod/"),
    "compose": pl.col("_rest").str.contains(r"^[A-Za-z0-9][\w.-]*?[-_]\d+\s+\| "),
    "rfc5424": pl.col("_rest").str.starts_with("<"),  # the layer's regex decides per line
    "iso": pl.col("_rest").str.contains(r"^\d{4}-\d{2}-\d{2}[T ]"),
    "bsd": pl.col("_rest").str.contains(rf"^(?:<\d{{1,3}}>)?(?:{MONTHS}) "),
    "iso2": pl.col("_rest").str.contains(r"^\d{4}-\d{2}-\d{2}[T ]"),
    "bracket": pl.col("_rest").str.starts_with("["),
    "process": pl.col("_rest").str.starts_with("("),  # then "pid=" (PROCESS_TAG_RE)
    "vllm": pl.col("_rest").str.contains(r"^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d"),
}
# A cheaper test true wherever a gate that is a regex is (char 4 of an ISO date is its
# first "-"; compose's service name ends in whitespace and "| "): the gate's regex runs
# only in a file where the hint passes somewhere. For the ISO layer the hint itself says
# which lines to peel (a line the hint passes but ISO_PREFIX_RE does not match is left
# as it is), as the runtime-stamp test there reads each line anyway.
ISO_HINT = pl.col("_rest").str.slice(4, 1) == "-"
PREFIX_HINTS = {
    "compose": pl.col("_rest").str.contains("| ", literal=True),
    "iso": ISO_HINT,
    "iso2": ISO_HINT,
}
HINT_DECIDES = {"iso"}


# `docker logs -t` / `kubectl logs --timestamps`: RFC 3339 in UTC with a fraction (Go's
# RFC3339Nano trims its trailing zeros, so the width varies line by line) and one space.
# Such a line's ISO layer is sliced at its first space instead of read by ISO_PREFIX_RE,
# unless what follows is one of the suffixes that regex also takes (a CRI tag, a journal's
# "host unit[pid]:"). The slice is exactly the regex's match on these lines. ASCII digits
# only: a byte offset (`str.find`) is then a character offset (`str.slice`).
RUNTIME_STAMP_RE = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{1,9}Z "
ISO_SUFFIX_RE = r"^\S+ (?:(?:stdout|stderr) [FP]|\S+ [^\s\[\]:]+\[\d+\]:)(?: |$)"


def _suffixed(rest: pl.Series, after: pl.Series) -> pl.Series:
    """Stamped lines that go on with a suffix ISO_PREFIX_RE takes (`after`: the text past the
    stamp's space). Every such suffix starts with ``stdout ``/``stderr `` or holds ``]:``: the
    regex runs only where one of those literal tests passes."""
    frame = pl.DataFrame({"_rest": rest, "_after": after})
    maybe = frame.select(
        pl.col("_after").str.starts_with("stdout ")
        | pl.col("_after").str.starts_with("stderr ")
        | pl.col("_after").str.contains("]:", literal=True)
    ).to_series()
    if not maybe.any():
        return maybe
    return frame.select(maybe & pl.col("_rest").str.contains(ISO_SUFFIX_RE)).to_series()


def _peel_iso(rest: pl.Series, regex: str) -> tuple[pl.Series, dict[str, pl.Series]]:
    """The ISO layer: runtime stamps sliced at their first space (and their time computed:
    `_iso_at`), other stamps matched by `regex`.

    The sliced columns are computed over every line; the lines not sliced (few, if any)
    are matched by `regex` and their values written over them.
    """
    frame = pl.DataFrame({"_rest": rest})
    stamped = frame.select(pl.col("_rest").str.contains(RUNTIME_STAMP_RE)).to_series()
    if not stamped.any():
        return _peel(rest, regex)
    end = pl.col("_rest").str.find(" ", literal=True)
    frame = frame.with_columns(pl.when(pl.lit(stamped)).then(end).alias("_end"))
    after = frame.select(pl.col("_rest").str.slice(pl.col("_end") + 1)).to_series()
    sliced = stamped & ~_suffixed(rest, after)
    if not sliced.all():
        frame = frame.with_columns(pl.when(pl.lit(sliced)).then(pl.col("_end")).alias("_end"))
    end = pl.col("_end")
    frame = frame.with_columns(
        timeparse.sliced_runtime_stamp_to_utc(pl.col("_rest"), end).alias("_iso_at")
    )
    # the stamp's text is kept only where its time could not be computed here (an invalid
    # date); `isofrac` is only ever tested for presence, and a sliced stamp has a fraction
    unread = frame["_iso_at"].null_count() > (~sliced).sum()
    out = frame.select(
        pl.lit(after).alias("_rest"),  # a line not sliced takes its regex peeling below
        pl.when(pl.col("_iso_at").is_null()).then(pl.col("_rest").str.slice(0, end)).alias("iso")
        if unread
        else pl.lit(None, dtype=pl.Utf8).alias("iso"),
        pl.lit("", dtype=pl.Utf8).alias("isofrac"),
        "_iso_at",
    )
    if sliced.all():
        return out["_rest"], {c: out[c] for c in out.columns[1:]}
    others = (~sliced).arg_true()
    peeled, groups = _peel(rest.gather(others), regex)
    merged = out["_rest"].scatter(others, peeled)
    return merged, {
        name: out[name].scatter(others, groups[name]) if name in groups else out[name]
        for name in out.columns[1:]
    }


def _merge(rest: pl.Series, parts: list) -> tuple[pl.Series, dict[str, pl.Series]]:
    """Peelings of complementary rows of `rest` (mask, (rest, groups) or a frame of both)
    put back in row order; a group one peeling lacks is null on its rows."""
    merged, groups = rest.clone(), {}
    for rows, peeled in parts:
        if isinstance(peeled, pl.DataFrame):
            peeled = peeled["_rest"], {c: peeled[c] for c in peeled.columns if c != "_rest"}
        where = rows.arg_true()
        merged = merged.scatter(where, peeled[0])
        for name, values in peeled[1].items():
            empty = pl.repeat(None, rest.len(), dtype=values.dtype, eager=True)
            groups[name] = groups.get(name, empty).scatter(where, values).alias(name)
    return merged, groups


def _peel(rest: pl.Series, regex: str) -> tuple[pl.Series, dict[str, pl.Series]]:
    """One layer off lines that may carry it: (rest of each line, the layer's groups)."""
    groups = re.compile(regex).groupindex
    matched = rest.str.extract_groups(f"^(?P<_prefix>{regex.removeprefix('^')})").struct.unnest()
    length = matched["_prefix"].str.len_chars().fill_null(0)
    peeled = pl.DataFrame({"_rest": rest, "_n": length}).select(
        pl.col("_rest").str.slice(pl.col("_n"))
    )
    return peeled.to_series(), {name: matched[name] for name in groups}


def _may_open(name: str, starts: set[str]) -> bool:
    """Can a line starting with one of `starts` (first characters) carry layer `name`?"""
    if name in ("kubectl", "bracket"):
        return "[" in starts
    if name == "compose":
        return any(c.isascii() and c.isalnum() for c in starts)
    if name == "rfc5424":
        return "<" in starts
    if name in ("iso", "iso2"):  # \d is any Unicode digit
        return any(c.isdigit() or not c.isascii() for c in starts)
    if name == "bsd":
        return bool(starts & set("<JFMASOND"))
    if name == "process":
        return "(" in starts
    return bool(starts & set("DIWEC"))  # vllm


def _open_gates(frame: pl.DataFrame, first: int) -> dict[str, pl.Series]:
    """The first layer from PREFIX_STEPS[first] on that some line may carry, with its gate
    (which lines may). Every layer begins with a known character: the lines' distinct first
    characters rule most layers out at once; the others' hint or gate is then computed in
    order, a gate's regex only where its hint passed. Only the first matters: once it is
    peeled the lines' rest has changed and the later layers are looked for again."""
    names = [name for name, _ in PREFIX_STEPS[first:]]
    if not names:
        return {}
    starts = None  # for one or two layers their own tests cost less
    if len(names) > 2:
        first_chars = frame.select(pl.col("_rest").str.slice(0, 1).unique()).to_series()
        starts = set(first_chars.to_list())
    for name in names:
        if starts is not None and not _may_open(name, starts):
            continue
        gate = frame.select(PREFIX_HINTS.get(name, PREFIX_GATES[name])).to_series()
        if not gate.any():
            continue
        if name in PREFIX_HINTS and name not in HINT_DECIDES:
            gate = frame.select(PREFIX_GATES[name]).to_series()
            if not gate.any():
                continue
        return {name: gate}
    return {}


def _vllm_groups(frame: pl.DataFrame, carries: pl.Series) -> list[pl.Series]:
    """VLLM_STAMP_RE's groups, matched on the lines its gate passes only. The regex reads
    the stamp (VLLM_STAMP_HEAD_RE) and `msg` is sliced after it: captures over the rest
    of a long stats line cost 5× the match."""
    if carries.all():
        return _vllm_stamp_groups(frame["_rest"]).get_columns()
    where = carries.arg_true()
    groups = _vllm_stamp_groups(frame["_rest"].gather(where))
    return [
        pl.repeat(None, frame.height, dtype=values.dtype, eager=True)
        .scatter(where, values)
        .alias(values.name)
        for values in groups.get_columns()
    ]


def _vllm_stamp_groups(rest: pl.Series) -> pl.DataFrame:
    """VLLM_STAMP_RE's groups of each line (null where it does not match): the stamp
    peeled (`_peel`), `msg` the rest of a line that has one."""
    after, groups = _peel(rest, VLLM_STAMP_HEAD_RE)
    return pl.DataFrame({**groups, "msg": after}).with_columns(
        pl.when(pl.col("level").is_not_null()).then(pl.col("msg")).alias("msg")
    )


def _strip_prefixes(lines: pl.DataFrame) -> tuple[pl.DataFrame, set[str]]:
    """Peel the prefix layers in order; only layers some line carries are extracted.

    A layer's gate is true on every line that carries it, so its regex runs only on
    those lines (runtime stamps are sliced, not matched). Returns the frame (`_rest`
    gone, `body` added, each present layer's groups as columns) and the names of the
    layers present.
    """
    text = pl.col("text")
    has_ansi, has_caret = lines.select(
        text.str.contains("\x1b", literal=True).any().alias("ansi"),
        text.str.contains("^[", literal=True).any().alias("caret"),
    ).row(0)
    rest = text.str.replace_all(ANSI_RE, "") if has_ansi else text
    frame = lines.with_columns(
        (rest.str.replace_all(CARET_RE, "") if has_caret else rest).alias("_rest")
    )
    present = set()
    gates_open = _open_gates(frame, 0)
    for step, (name, regex) in enumerate(PREFIX_STEPS):
        if name not in gates_open:
            continue
        carries = gates_open[name]
        present.add(name)
        if name == "vllm":  # vLLM's stamp stays in the body; its groups split it
            frame = frame.with_columns(pl.col("_rest").alias("body"), *_vllm_groups(frame, carries))
            continue
        every = carries.all()
        rest = frame["_rest"] if every else frame["_rest"].filter(carries)
        peeled = _peel_iso(rest, regex) if name == "iso" else _peel(rest, regex)
        if every:
            frame = frame.with_columns(peeled[0], *peeled[1].values())
            gates_open = _open_gates(frame, step + 1)
            continue
        rest, groups = _merge(frame["_rest"], [(carries, peeled)])
        frame = frame.with_columns(rest, *groups.values())
        gates_open = _open_gates(frame, step + 1)  # the lines' rest changed: look again
    if "vllm" not in present:
        frame = frame.with_columns(pl.col("_rest").alias("body"))
    return frame.drop("_rest"), present


def _frac_precision(frac: str) -> pl.Expr:
    return (
        pl.when(pl.col(frac).is_not_null())
        .then(pl.lit(RUNTIME_PRECISION_S))
        .otherwise(pl.lit(WHOLE_SECOND_S))
    )


def _iso_times(frame: pl.DataFrame, server_tz: str) -> pl.Series:
    """The ISO layer's times: those the slicing computed, the other stamps parsed here."""
    known = frame["_iso_at"] if "_iso_at" in frame.columns else None
    if known is None or known.null_count() == 0:
        if known is not None:
            return known
        return timeparse.parse_iso(_decimal_points(frame["iso"]), server_tz).alias("_iso_at")
    left = (known.is_null() & frame["iso"].is_not_null()).arg_true()
    if not left.len():
        return known
    parsed = timeparse.parse_iso(_decimal_points(frame["iso"].gather(left)), server_tz)
    return known.scatter(left, parsed).alias("_iso_at")


def _decimal_points(stamps: pl.Series) -> pl.Series:
    """ISO stamps with a decimal comma (Python logging's default) as decimal points."""
    return stamps.str.replace(",", ".") if stamps.str.contains(",", literal=True).any() else stamps


def _layer_times(frame: pl.DataFrame, present: set[str], year: int, server_tz: str):
    """Each present layer's (time, precision) expressions, outermost first, and the frame."""
    layers = []
    if "rfc5424" in present:
        frame = frame.with_columns(timeparse.parse_iso(frame["r5"], server_tz).alias("_r5_at"))
        layers.append((pl.col("_r5_at"), _frac_precision("r5frac")))
    if "iso" in present:
        frame = frame.with_columns(_iso_times(frame, server_tz))
        layers.append((pl.col("_iso_at"), _frac_precision("isofrac")))
    if "bsd" in present:
        layers.append(
            (
                timeparse.roll_years(timeparse.bsd_to_utc(pl.col("bsd"), year, server_tz)),
                _frac_precision("bsdfrac"),
            )
        )
    if "iso2" in present:
        frame = frame.with_columns(
            timeparse.parse_iso(_decimal_points(frame["iso2"]), server_tz).alias("_iso2_at")
        )
        layers.append((pl.col("_iso2_at"), _frac_precision("iso2frac")))
    if "bracket" in present:
        frame = frame.with_columns(timeparse.parse_iso(frame["bk"], server_tz).alias("_bk_at"))
        layers.append((pl.col("_bk_at"), _frac_precision("bkfrac")))
        bkmd_at = timeparse.roll_years(timeparse.yearless_to_utc(pl.col("bkmd"), year, server_tz))
        layers.append((bkmd_at, pl.lit(WHOLE_SECOND_S)))
    if "vllm" in present:
        # one column, computed once (the precision below and `own_at` both read it)
        frame = _rolled(frame, timeparse.yearless_to_utc(pl.col("md"), year, server_tz), "_vllm_at")
        frame = frame.with_columns(
            pl.col("_vllm_at")
            + pl.duration(
                microseconds=(pl.col("mdfrac").cast(pl.Float64, strict=False).fill_null(0.0) * 1e6)
                .round(0)
                .cast(pl.Int64)
            )
        )
        vllm_at = pl.col("_vllm_at")
        precision = (
            pl.when(pl.col("mdfrac").is_not_null())
            .then(pl.lit(1e-3))
            .otherwise(pl.lit(VLLM_STAMP_PRECISION_S))
        )
        layers.append((vllm_at, precision))
    return frame, layers


def _rolled(frame: pl.DataFrame, stamps: pl.Expr, name: str) -> pl.DataFrame:
    """`frame` with `timeparse.roll_years(stamps)` as `name`; the roll (a year offset
    written per line) is applied only if the stamps step back over a New Year at all."""
    frame = frame.with_columns(stamps.alias(name))
    at = pl.col(name)
    if frame.select(((at - at.forward_fill().shift(1)) < pl.duration(days=-300)).any()).item():
        frame = frame.with_columns(timeparse.roll_years(at))
    return frame


def _date_times_of_day(frame: pl.DataFrame, server_tz: str) -> pl.DataFrame:
    """Time-only stamps (SGLang's ``[16:43:29 TP0]``) dated by the file's nearest dated
    line; without any they stay untimed."""
    at = timeparse.time_of_day_to_utc(pl.col("bktod"), pl.col("own_at"), server_tz)
    return frame.with_columns(
        pl.coalesce(pl.col("own_at"), at).alias("own_at"),
        pl.when(pl.col("own_at").is_null() & at.is_not_null())
        .then(pl.lit(WHOLE_SECOND_S))
        .otherwise(pl.col("own_precision"))
        .alias("own_precision"),
    )


YEARLESS_LAYERS = {"bsd", "bracket", "vllm"}  # their stamps take the year from the context


@dataclass
class Prefixed:
    """Lines with their runtime prefixes split (`split_prefixes`' columns, plus `own_at`:
    the line's own stamp, null where it borrowed its neighbours'), what was found on them:
    the prefix layers present, and whether a time-only stamp was dated by another line."""

    frame: pl.DataFrame
    layers: set[str]
    dated_by_others: bool


def split_prefixes(
    lines: pl.DataFrame, instance: str, year: int, server_tz: str = "UTC"
) -> pl.DataFrame:
    """Strip runtime prefixes; give every line its best-known time and precision.

    Adds `body` (runtime prefixes stripped), `msg` (body after vLLM's own
    stamp, else body), `level`, `instance`, `at`, `at_precision_s`. A line
    with no stamp of its own takes the nearest earlier stamped line's time;
    its precision is the gap to the next stamped line plus that line's own
    precision (unknown at the end of the file).
    """
    return prefixed(lines, instance, year, server_tz).frame.drop("own_at")


def prefixed(
    lines: pl.DataFrame,
    instance: str,
    year: int,
    server_tz: str = "UTC",
    before: dt.datetime | None = None,
) -> Prefixed:
    """`split_prefixes`, keeping each line's own stamp; `before` is the time of the last
    stamped line before these (a batch of a file read in parts), which the lines before
    their first stamp take."""
    frame, present = _strip_prefixes(lines)
    frame, layers = _layer_times(frame, present, year, server_tz)
    null_time = pl.lit(None, dtype=pl.Datetime("us", "UTC"))
    own_at = pl.coalesce(*(at for at, _ in layers)) if layers else null_time
    own_precision = pl.lit(None, dtype=pl.Float64)
    for at, precision in reversed(layers):
        own_precision = pl.when(at.is_not_null()).then(precision).otherwise(own_precision)
    frame = frame.with_columns(
        own_at.alias("own_at"),
        own_precision.alias("own_precision"),
        (pl.coalesce(pl.col("msg"), pl.col("body")) if "vllm" in present else pl.col("body")).alias(
            "msg"
        ),
        (pl.col("level") if "vllm" in present else pl.lit(None, dtype=pl.Utf8)).alias("level"),
        pl.coalesce(
            *(
                pl.col(c)
                for c, layer in (("pod", "kubectl"), ("service", "compose"))
                if layer in present
            ),
            pl.lit(instance),
        ).alias("instance"),
    )
    dated = "bracket" in present and frame.select(pl.col("bktod").is_not_null().any()).item()
    if dated:
        frame = _date_times_of_day(frame, server_tz)
    columns = ("line_no", "text", "body", "msg", "level", "instance")
    if not layers:  # no stamp here: the lines take the one before them, if any
        at = pl.col("own_at") if before is None else pl.lit(before, dtype=pl.Datetime("us", "UTC"))
        frame = frame.select(
            *columns,
            at.alias("at"),
            pl.col("own_precision").alias("at_precision_s"),
            "own_at",
        )
        return Prefixed(frame, present, dated)
    prev_at = pl.col("own_at").forward_fill()
    if before is not None:
        prev_at = prev_at.fill_null(pl.lit(before, dtype=pl.Datetime("us", "UTC")))
    next_at = pl.col("own_at").backward_fill()
    gap = (next_at - prev_at).dt.total_microseconds() / 1e6
    frame = frame.with_columns(
        pl.coalesce(pl.col("own_at"), prev_at, next_at).alias("at"),
        pl.when(pl.col("own_at").is_not_null())
        .then(pl.col("own_precision"))
        .otherwise(gap + pl.col("own_precision").backward_fill())
        .alias("at_precision_s"),
    ).select(*columns, "at", "at_precision_s", "own_at")
    return Prefixed(frame, present, dated)


def ordered_line_formats() -> list[LineFormat]:
    """Line formats in claim order (the registry keeps them by priority)."""
    return list(LINE_FORMATS.values())


# Lines with no stamp of their own held back for the next batch's first stamp (their
# precision is the gap up to it): past this many batches, the file is read whole instead.
PENDING_BATCHES = 4
# A batch goes past a format that looks across lines and is asleep in it only if that
# spares setting aside more than this many lines; fewer wait for the end (in a vLLM
# log or a proxy's, the few lines no format took by then), so that format waking in a
# later batch does not undo the batches read.
SET_ASIDE_LINES = 4096
NEW_YEAR_STEP = dt.timedelta(days=300)  # a yearless stamp stepping back this far wrapped


def parse_lines(source: SourceFile, ctx: ParseContext, role: str = "server") -> ParseResult:
    """Split a file line by line among the line formats; account for every line.

    Line formats also see `file_role` ("server" or "proxy": in a proxy's log
    an access line is the proxy's, not a model server's) and `file_tz` (the
    zone of naive stamps inside a line, such as nginx's error.log or HAProxy's
    accept date). A big file is read in batches where that gives the same result.
    """
    if source.path.stat().st_size > BATCHED_ABOVE:
        result = parse_in_batches(source, ctx, role)
        if result is not None:
            return result
    return _run(source, ctx, role, fates=False)[0]


def classify_lines(source: SourceFile, ctx: ParseContext, role: str = "server") -> pl.DataFrame:
    """Each line's fate: `line_no`, `status` (parsed | noise | unparsed), `format` (or null)."""
    return _run(source, ctx, role)[1]


def prepared_lines(source: SourceFile, ctx: ParseContext, role: str = "server") -> pl.DataFrame:
    """The file's lines as every line format gets them: prefixes split, times, role, zone."""
    return _with_file_facts(
        split_prefixes(source.lines, source.instance, ctx.year, ctx.server_tz), ctx, role
    )


def _with_file_facts(lines: pl.DataFrame, ctx: ParseContext, role: str) -> pl.DataFrame:
    return lines.with_columns(
        pl.lit(role).alias("file_role"), pl.lit(ctx.server_tz).alias("file_tz")
    )


class _Account:
    """What line formats claimed of a file's lines, added up over one or more batches.

    Tables and addresses are kept by format and joined in the formats' order at the end,
    so a file read in batches gives its rows in the order a whole read gives them.
    """

    def __init__(self, source: SourceFile, want_fates: bool = False):
        self.source = source
        self.result = ParseResult()
        self.formats = ordered_line_formats()
        self.tables: dict[int, dict[str, list[pl.DataFrame]]] = {}
        self.addresses: dict[int, list[dict[str, list[str]]]] = {}
        self.recorded: set[int] = set()
        self.fates: list[pl.DataFrame] | None = [] if want_fates else None
        self.spans: list[pl.DataFrame] = []
        self.longest = 0
        self.openings: set[str] = set()

    def offer(self, lines: pl.DataFrame) -> None:
        """The lines formats claim from next: which characters their messages begin with
        (one scan), so that a format whose every claim begins otherwise
        (`LineFormat.openings`) is not run on them."""
        self.openings = set(lines.select(pl.col("msg").str.head(1).unique())["msg"].drop_nulls())

    def read(self, lines: pl.DataFrame) -> None:
        """Count lines about to be claimed: how many, their span, the longest; offer them."""
        self.offer(lines)
        self.result.lines += lines.height
        if lines.height:
            longest = lines.select(pl.col("text").str.len_bytes().max()).item() or 0
            self.longest = max(self.longest, longest)
        if lines["at"].is_not_null().any():
            self.spans.append(
                lines.group_by("instance").agg(
                    pl.col("at").min().alias("lo"), pl.col("at").max().alias("hi")
                )
            )

    def take(self, index: int, lines: pl.DataFrame) -> pl.DataFrame:
        """Format `index`'s claim on `lines` (some of those last offered); the lines it left."""
        fmt = self.formats[index]
        if fmt.openings is not None and fmt.openings.isdisjoint(self.openings):
            return lines  # no message begins as its claims do
        claim = fmt.extract(lines, self.source)
        # A line is counted once, even if a format names it twice or as record and noise.
        records = _distinct(claim.records)
        noise = _distinct(claim.noise)
        noise = noise.filter(~noise.is_in(records.implode()))
        if records.len():
            self.recorded.add(index)
        self.result.parsed += records.len()
        self.result.noise += noise.len()
        kept = self.tables.setdefault(index, {})
        for table, frame in claim.tables.items():
            kept.setdefault(table, []).append(model.detached(model.conform(table, frame)))
        if claim.addresses:
            self.addresses.setdefault(index, []).append(claim.addresses)
        if self.fates is not None:
            for series, status in (records, "parsed"), (noise, "noise"):
                self.fates.append(
                    pl.DataFrame({"line_no": series}).with_columns(
                        pl.lit(status).alias("status"), pl.lit(fmt.name).alias("format")
                    )
                )
        if not records.len() and not noise.len():
            return lines
        return lines.filter(_unclaimed(lines["line_no"], pl.concat([records, noise])))

    def finish(self, unclaimed: pl.DataFrame) -> ParseResult:
        result = self.result
        for index in sorted(self.tables):
            for table, frames in self.tables[index].items():
                result.add(table, model.concatenated(frames))
        for index in sorted(self.addresses):
            for found in self.addresses[index]:
                for instance, addresses in found.items():
                    known = result.addresses.setdefault(instance, [])
                    known += [a for a in addresses if a not in known]
        result.formats = [self.formats[i].name for i in sorted(self.recorded)]
        if self.spans:
            spans = (
                pl.concat(self.spans)
                .group_by("instance", maintain_order=True)
                .agg(pl.col("lo").min(), pl.col("hi").max())
            )
            result.span = (spans["lo"].min(), spans["hi"].max())
            result.instance_spans = {i: (lo, hi) for i, lo, hi in spans.drop_nulls().iter_rows()}
        result.set_unparsed(unclaimed)
        _robustness_notes(self.source.facts, self.longest, result)
        return result


def _unclaimed(line_nos: pl.Series, claimed: pl.Series) -> pl.Series:
    """Which of `line_nos` (ascending) are not among `claimed` (some of them): the claimed
    ones are found by binary search, not hashed."""
    claimed = claimed.sort()
    where = line_nos.search_sorted(claimed)
    if not (line_nos.gather(where.clip(0, max(line_nos.len() - 1, 0))) == claimed).all():
        return ~line_nos.is_in(claimed.implode())  # a claim of lines it was not given
    return pl.repeat(True, line_nos.len(), eager=True).scatter(where, False)


def _run(
    source: SourceFile, ctx: ParseContext, role: str, fates: bool = True
) -> tuple[ParseResult, pl.DataFrame | None]:
    """The file's account and (with `fates`, which only `classify_lines` reads) each
    line's fate."""
    account = _Account(source, want_fates=fates)
    unclaimed = prepared_lines(source, ctx, role)
    account.read(unclaimed)
    for index in range(len(account.formats)):
        if unclaimed.is_empty():
            break
        unclaimed = account.take(index, unclaimed)
    result = account.finish(unclaimed)
    if account.fates is None:
        return result, None
    account.fates.append(
        unclaimed.select(
            "line_no",
            pl.lit("unparsed").alias("status"),
            pl.lit(None, dtype=pl.Utf8).alias("format"),
        )
    )
    return result, pl.concat(account.fates).sort("line_no")


def parse_in_batches(source: SourceFile, ctx: ParseContext, role: str) -> ParseResult | None:
    """`parse_lines` read batch by batch, or None where batches cannot give its result.

    Each batch's prefixes are split on their own (the lines before its first stamp take
    the previous batch's last one; the lines after its last stamp wait for the next
    batch). Then the line formats claim in their order while each either reads a line
    alone (`per_line`) or is asleep in this file (no line passes its `woken_by`); at the
    first format that looks across lines and is awake (or asleep, with few lines left:
    `SET_ASIDE_LINES`), the batch's unclaimed lines are set aside, and that format and
    the rest claim from all of them together at the end, as in a whole read.

    What a batch cannot know stops it (None: read whole): a format asleep in earlier
    batches waking in a later one; lines before the file's first stamp; a yearless
    stamp wrapping over New Year; time-only stamps dated by others; too long a
    stretch of unstamped lines.
    """
    account = _Account(source)
    read = _read_batches(account, source.line_batches(BATCH_BYTES), ctx, role)
    if read is None:
        return None
    return _claim_set_aside(account, read.leftovers, read.stop, read.asleep)


@dataclass
class _Batches:
    """What reading batches left for the end: the lines set aside, the first format that
    looks across lines and was awake (`stop`), those found asleep, and the stamps seen."""

    leftovers: pl.DataFrame
    stop: int | None
    asleep: set[int]
    first_at: dt.datetime | None
    last_at: dt.datetime | None
    yearless: bool
    opens_unstamped: bool  # the first line has no stamp of its own


def _read_batches(
    account: _Account,
    batches,
    ctx: ParseContext,
    role: str,
    lookahead: int | None = None,
) -> _Batches | None:
    """The batch loop of `parse_in_batches` over `batches` ((lines, last) pairs), claims
    into `account`; None where the batches cannot give a whole read's result.
    `lookahead`: the number of a line past the end, read only so that the lines before it
    know the next stamp (a piece of a file: `parse_piece`), never claimed."""
    formats = account.formats
    source = account.source
    asleep: set[int] = set()
    stop: int | None = None
    leftovers: list[pl.DataFrame] = []
    before: dt.datetime | None = None
    first_at: dt.datetime | None = None
    yearless = False
    untimed_head = False
    opens_unstamped: bool | None = None
    pending, held = None, 0
    for batch, last_batch in batches:
        if pending is not None:
            batch, pending = pl.concat([pending, batch]), None
        split = prefixed(batch, source.instance, ctx.year, ctx.server_tz, before)
        if split.dated_by_others:
            return None
        frame, own = split.frame, split.frame["own_at"]
        if opens_unstamped is None and own.len():
            opens_unstamped = own[0] is None
        if lookahead is not None and last_batch:
            frame = frame.filter(pl.col("line_no") != lookahead)
        stamped = own.is_not_null()
        if stamped.any():
            if untimed_head or _wraps(split, own, before):
                return None
            yearless = yearless or bool(split.layers & YEARLESS_LAYERS)
            if not last_batch:
                last = stamped.arg_true()[-1]
                pending, frame = model.detached(batch.slice(last + 1)), frame.head(last + 1)
            held = 0
            first_at = first_at or own.drop_nulls()[0]
            before = own.drop_nulls()[-1]
        elif not last_batch and before is not None:
            pending, held = batch, held + 1
            if held > PENDING_BATCHES:
                return None
            continue
        elif before is None:
            untimed_head = True
        unclaimed = _with_file_facts(frame.drop("own_at"), ctx, role)
        del frame, split
        account.read(unclaimed)
        for index, fmt in enumerate(formats):
            if index == stop or unclaimed.is_empty():
                break
            if not fmt.per_line:
                if _awake(fmt, unclaimed):
                    if index in asleep:
                        return None
                elif unclaimed.height > SET_ASIDE_LINES:
                    asleep.add(index)
                    continue
                stop = index
                break
            unclaimed = account.take(index, unclaimed)
        leftovers.append(model.detached(unclaimed))
        del batch, unclaimed  # not held while the next batch is read
    unclaimed = (
        pl.concat(leftovers)
        if leftovers
        else _with_file_facts(
            split_prefixes(_no_lines(), source.instance, ctx.year, ctx.server_tz), ctx, role
        )
    )
    return _Batches(unclaimed, stop, asleep, first_at, before, yearless, bool(opens_unstamped))


def _claim_set_aside(
    account: _Account, unclaimed: pl.DataFrame, stop: int | None, asleep: set[int]
) -> ParseResult | None:
    """The end of a batched read: the formats from `stop` on claim from every line set
    aside, together, as in a whole read."""
    formats = account.formats
    account.offer(unclaimed)
    for index in range(stop if stop is not None else len(formats), len(formats)):
        if unclaimed.is_empty():
            break
        if index in asleep and _awake(formats[index], unclaimed):
            return None  # awake in the lines set aside, asleep where batches went past it
        unclaimed = account.take(index, unclaimed)
    return account.finish(unclaimed)


# ------------------------------------------------------------ a big log in pieces

PIECE_SCAN_BYTES = 1 << 20  # how far past a cut its first stamped line is looked for
SPLIT_FORMATS = ("server_log", "proxy_log")  # the file formats a log is cut into pieces for


@dataclass
class PiecePlan:
    """One piece of a log: bytes [start, end) (whole lines, the first stamped unless it
    opens the file), its first line's number, and the next piece's first line (bytes
    [end, lookahead_end)) read along for the stamps after its last one."""

    start: int
    end: int
    first_line: int
    lookahead_end: int
    lines: int


@dataclass
class Piece:
    """A piece's claims, by format as `_Account` keeps them (their `source` ids this
    process's, named in `prefixes`), its counts and what its batches left for the end."""

    tables: dict[int, dict[str, list[pl.DataFrame]]]
    addresses: dict[int, list[dict[str, list[str]]]]
    recorded: set[int]
    lines: int
    parsed: int
    noise: int
    spans: list[pl.DataFrame]
    longest: int
    batches: _Batches
    facts: dict
    prefixes: dict[int, str]


def plan_pieces(source: SourceFile, ctx: ParseContext, size: int) -> list[PiecePlan] | None:
    """Cuts of an uncompressed text log into pieces of about `size` bytes, each opening
    at a line with a stamp of its own (so that no line of it takes a stamp from the piece
    before); None where it cannot be cut (compressed, or too small for two pieces)."""
    total = source.path.stat().st_size
    if source.compressed or total < 2 * size:
        return None
    cuts = [0]
    with source.path.open("rb") as handle:
        # a log whose lines carry stamps of their own is cut only at such a line; one whose
        # lines carry none (a proxy's access log: its stamps are the format's) at any line
        stamped = _first_stamped(handle.read(PIECE_SCAN_BYTES), source, ctx) is not None
        for target in range(size, total - size // 2, size):
            if target <= cuts[-1]:
                continue
            handle.seek(target - 1)
            data = handle.read(PIECE_SCAN_BYTES)
            newline = data.find(b"\n")
            if newline < 0:
                continue
            data = data[newline + 1 :]
            cut = _first_stamped(data, source, ctx) if stamped else 0
            if cut is not None:
                cuts.append(target + newline + cut)
        cuts.append(total)
        plans, first = [], 1
        for start, end in zip(cuts, cuts[1:], strict=False):
            handle.seek(end)
            after = end + len(handle.readline()) if end < total else end
            lines = _newlines(handle, start, end)
            plans.append(PiecePlan(start, end, first, after, lines))
            first += lines
    return plans if len(plans) > 1 else None


def _first_stamped(data: bytes, source: SourceFile, ctx: ParseContext) -> int | None:
    """The byte offset in `data` (whole lines) of its first line with a stamp of its own."""
    whole = data[: data.rfind(b"\n") + 1]
    if not whole:
        return None
    lines, _ = lines_of_bytes(whole)
    own = prefixed(lines, source.instance, ctx.year, ctx.server_tz).frame["own_at"]
    stamped = own.is_not_null().arg_true()
    if stamped.is_empty():
        return None
    index, offset = int(stamped[0]), 0
    for _ in range(index):
        offset = whole.index(b"\n", offset) + 1
    return offset


def _newlines(handle, start: int, end: int) -> int:
    handle.seek(start)
    count, left = 0, end - start
    while left > 0 and (chunk := handle.read(min(left, BATCH_BYTES))):
        count += chunk.count(b"\n")
        left -= len(chunk)
    return count


def parse_piece(source: SourceFile, ctx: ParseContext, role: str, plan: PiecePlan) -> Piece | None:
    """One piece read batch by batch as `parse_in_batches` reads a file; None where the
    piece cannot give its part of a whole read (its lines are then read whole)."""
    account = _Account(source)
    more = plan.lookahead_end > plan.end
    lookahead = plan.first_line + plan.lines if more else None
    facts = {"undecodable": False}

    def batches():
        first = plan.first_line
        with source.path.open("rb") as handle:
            if plan.start == 0:
                head = handle.read(source.FACT_BYTES)
                facts.update(nul=b"\x00" in head, crlf=b"\r\n" in head)
            handle.seek(plan.start)
            left = plan.end - plan.start
            while left > 0:
                data = handle.read(min(left, BATCH_BYTES))
                if len(data) < left and not data.endswith(b"\n"):
                    data += handle.readline()
                left -= len(data)
                if left <= 0:
                    facts["final_newline"] = data.endswith(b"\n")
                    if more:
                        extra = handle.read(plan.lookahead_end - plan.end)
                        data += extra if extra.endswith(b"\n") else extra + b"\n"
                frame, bad = lines_of_bytes(data, first)
                facts["undecodable"] = facts["undecodable"] or bad
                first += frame.height
                del data
                yield frame, left <= 0

    read = _read_batches(account, batches(), ctx, role, lookahead=lookahead)
    if read is None:
        return None
    prefixes: dict[int, str] = {}
    for kept in account.tables.values():
        for frames_ in kept.values():
            for frame in frames_:
                prefixes |= model.prefixes_of(frame)
    return Piece(
        account.tables,
        account.addresses,
        account.recorded,
        account.result.lines,
        account.result.parsed,
        account.result.noise,
        account.spans,
        account.longest,
        read,
        facts,
        prefixes,
    )


def merge_pieces(
    source: SourceFile, ctx: ParseContext, role: str, pieces: list[Piece | None]
) -> ParseResult | None:
    """The pieces of one log as one whole read; None where they cannot give it (a piece
    that could not, formats that stopped or slept differently, a yearless stamp stepping
    back over New Year between pieces)."""
    if not pieces or any(p is None for p in pieces):
        return None
    # a piece whose lines were all claimed before any format that looks across lines
    # stopped nowhere: it agrees with any stop; the others must stop at the same format,
    # which no piece went past asleep
    stops = {p.batches.stop for p in pieces} - {None}
    asleep = set().union(*(p.batches.asleep for p in pieces))
    stop = stops.pop() if len(stops) == 1 else None
    if stops or (stop is not None and stop in asleep):
        return None
    for k, later in enumerate(pieces[1:], start=1):
        # lines before a piece's first stamp would have taken an earlier piece's last one
        if later.batches.opens_unstamped and any(p.batches.last_at for p in pieces[:k]):
            return None
        last, first = pieces[k - 1].batches.last_at, later.batches.first_at
        if later.batches.yearless and last and first and first < last - NEW_YEAR_STEP:
            return None
    account = _Account(source)
    for piece in pieces:
        for index, kept in piece.tables.items():
            mine = account.tables.setdefault(index, {})
            for table, frames in kept.items():
                mine.setdefault(table, []).extend(
                    model.source_remap(f, piece.prefixes) for f in frames
                )
        for index, found in piece.addresses.items():
            account.addresses.setdefault(index, []).extend(found)
        account.recorded |= piece.recorded
        account.result.lines += piece.lines
        account.result.parsed += piece.parsed
        account.result.noise += piece.noise
        account.spans += piece.spans
        account.longest = max(account.longest, piece.longest)
    source.facts = {
        "undecodable": any(p.facts["undecodable"] for p in pieces),
        "nul": pieces[0].facts.get("nul", False),
        "crlf": pieces[0].facts.get("crlf", False),
        "final_newline": pieces[-1].facts.get("final_newline", True),
        "empty": False,
    }
    leftovers = pl.concat([p.batches.leftovers for p in pieces], how="vertical_relaxed")
    return _claim_set_aside(account, leftovers, stop, asleep)


def _awake(fmt: LineFormat, lines: pl.DataFrame) -> bool:
    return fmt.woken_by is None or lines.select(fmt.woken_by.any()).item()


def _wraps(split: Prefixed, own: pl.Series, before: dt.datetime | None) -> bool:
    """Might a yearless stamp in this batch have wrapped over New Year (stepping back from
    the last batch's, or within the batch)? Then only the whole file can say."""
    if not split.layers & YEARLESS_LAYERS:
        return False
    first, lo, hi = own.drop_nulls()[0], own.min(), own.max()
    return (before is not None and first < before - NEW_YEAR_STEP) or lo.year != hi.year


def _no_lines() -> pl.DataFrame:
    return pl.DataFrame(schema={"line_no": pl.Int64, "text": pl.Utf8})


def _distinct(line_nos: pl.Series) -> pl.Series:
    """Line numbers once each (a format's rows come in file order: then no hashing)."""
    line_nos = line_nos.cast(pl.Int64).rename("line_no")
    if line_nos.len() < 2 or (line_nos.diff().min() or 0) > 0:
        return line_nos
    return line_nos.unique()


def _robustness_notes(facts: dict, longest: int, result: ParseResult) -> None:
    if facts["undecodable"]:
        result.notes.append("file holds bytes that are not UTF-8; they were replaced")
    if facts["nul"]:
        result.notes.append("file holds NUL bytes (binary data?); such lines count as unparsed")
    if not facts["final_newline"]:
        result.notes.append("last line has no newline (file truncated while written?)")
    if longest > 1_000_000:
        result.notes.append(f"a line of {longest:,} bytes was read whole")
    if facts["crlf"]:
        result.notes.append("CRLF line ends (Windows copy, or vLLM multi-line messages)")


def _sniff_frame(head: list[str]) -> pl.DataFrame:
    return split_prefixes(
        pl.DataFrame(
            {"line_no": range(1, len(head) + 1), "text": head},
            schema={"line_no": pl.Int64, "text": pl.Utf8},
        ),
        "?",
        2000,
    )


def _recognisers(head: list[str]) -> tuple[bool, set[str]]:
    """Does vLLM's own stamp occur, and which decisive line formats recognise the head?"""
    frame = _sniff_frame(head)
    vllm = bool(frame["level"].is_not_null().any())
    bodies = frame["msg"].to_list()
    names = {
        fmt.name
        for fmt in ordered_line_formats()
        if getattr(fmt, "decisive", False) and fmt.sniff(bodies)
    }
    return vllm, names


def _proxy_only(vllm: bool, names: set[str]) -> bool:
    """Only a proxy's lines (a gateway's container also prints uvicorn lines and tracebacks)."""
    proxies = {n for n in names if getattr(LINE_FORMATS[n], "proxy", False)}
    return not vllm and bool(proxies) and names <= proxies | SHARED_FORMATS


@register_file_format
class ProxyLog(FileFormat):
    """A log whose first lines only a proxy or gateway line format recognises.

    Parsed exactly like a server log (a proxy container's stdout may still
    mix in anything), but its role is ``proxy``: the file names no model
    server instance, and its span is no instance's coverage. Proxy line
    formats write `proxy_requests` / `proxy_events` with `proxy` = the file's
    (or kubectl pod's) name.
    """

    name = "proxy_log"
    priority = 40
    samples = (Sample("corpus kv-tiny nginx-access.log (nginx 1.22.1)", file="nginx-access.log"),)
    role = "proxy"

    def sniff(self, head: list[str]) -> bool:
        return _proxy_only(*_recognisers(head))

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        return self.finish(parse_lines(source, ctx, role="proxy"))

    @staticmethod
    def finish(result: ParseResult) -> ParseResult:
        if any(result.table(t).height for t in ("server_requests", "engine_stats")):
            result.notes.append(
                "read as a proxy log (its first lines are a proxy's), yet it also holds "
                "model-server lines; name the instance with --instance to count them"
            )
        return result


@register_file_format
class ServerLog(FileFormat):
    """Any text log in which at least one registered line format recognises lines."""

    name = "server_log"
    priority = 41
    samples = (
        Sample(
            "corpus kv-tiny instance-1.log (vLLM 0.32.0 CPU, excerpt)", file="vllm-instance.log"
        ),
    )
    role = "server"

    def sniff(self, head: list[str]) -> bool:
        vllm, names = _recognisers(head)
        return (vllm or bool(names)) and not _proxy_only(vllm, names)

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        return self.finish(parse_lines(source, ctx))

    @staticmethod
    def finish(result: ParseResult) -> ParseResult:
        return result


def parse_pieces(
    fmt: ServerLog | ProxyLog, source: SourceFile, ctx: ParseContext, pieces: list[Piece | None]
) -> ParseResult | None:
    """A log read in pieces (`parse_piece` on each of `plan_pieces`), as `fmt.parse` gives
    it whole; None where the pieces cannot give that (then read it whole)."""
    result = merge_pieces(source, ctx, fmt.role, pieces)
    return None if result is None else fmt.finish(result)
