"""What a parser is, what it returns, and how files become lines.

Two kinds of format are registered by name:

* a *file format* reads a whole file (a client's JSON report, the seed
  script's rows) and says with ``sniff`` whether the file's first lines look
  like its format;
* a *line format* recognises some lines of a server-side log (vLLM stats,
  uvicorn access lines, a Python traceback). A container's stdout interleaves
  several of them, so a server log is split line by line among them.
"""

from __future__ import annotations

import datetime as dt
import gzip
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import ClassVar, NamedTuple

import polars as pl

from logforensics import model
from logforensics.ingest.shapes import shapes_of

SNIFF_LINES = 40
# A text log bigger than BATCHED_ABOVE bytes is parsed in batches of about BATCH_BYTES
# (`serverlog.parse_in_batches`): one batch's text and working columns are held at a
# time instead of the whole file's. Each batch costs polars' per-call overheads (~25 ms
# a batch of a vLLM log); memory not touched saves the kernel's page faults, which on a
# virtual machine cost more than those overheads. Under 32 MiB: Python's allocator maps
# a bytes object of 32 MiB or more afresh from the kernel each time (100-160k page
# faults a 195 MB log read in 32 MiB batches, 20-27k in 24 MiB ones: 0.5-0.7 s against
# 0.36-0.41 s). A batch's working columns are about four times its bytes: a 195 MB
# uvicorn log's parse held 244 MiB above the process at 24 MiB batches, 175 at 12 (the
# 5M-short bench, two such logs parsed at once: 597-622 against 508-536 MiB, 0.1-0.2 s
# slower; 8 MiB saved ~15 MiB more for 0.4-0.5 s).
BATCH_BYTES = 12 << 20
BATCHED_ABOVE = 2 * BATCH_BYTES
UNPARSED_EXAMPLES = 5


class InputError(Exception):
    """A file that cannot be read at all; the message names the file (and line)."""


# polars' CSV reader as a line splitter: the ASCII unit separator as the field separator (a
# file holding one is split in Python instead), no quoting, one text column
AS_LINES = dict(has_header=False, separator="\x1f", quote_char=None, schema={"text": pl.Utf8})


@dataclass
class SourceFile:
    """One input file, read once, with its lines numbered from 1."""

    path: Path
    display: str  # the name shown in reports and in `source` columns
    instance: str  # the instance this file's server records belong to

    HEAD_BYTES = 64 * 1024
    FACT_BYTES = 1 << 20  # NUL and CRLF are looked for in the first MiB

    def _read(self, limit: int | None = None) -> bytes:
        """The file's bytes (gzip undone), all of them or the first `limit`."""
        try:
            with self.path.open("rb") as handle:
                magic = handle.read(2)
            if magic == b"\x1f\x8b":
                with gzip.open(self.path, "rb") as handle:
                    return handle.read() if limit is None else handle.read(limit)
            with self.path.open("rb") as handle:
                return handle.read() if limit is None else handle.read(limit)
        except (OSError, EOFError, gzip.BadGzipFile, zlib.error) as exc:
            raise InputError(f"{self.display}: cannot read: {exc}") from exc

    def read_bytes(self) -> bytes:
        """The whole file's bytes, not kept: a parser that reads natively calls this once."""
        return self.__dict__.get("raw") or self._read()

    @cached_property
    def compressed(self) -> bool:
        """gzip's magic number (a rotated `.gz`, whatever its name)."""
        try:
            with self.path.open("rb") as handle:
                return handle.read(2) == b"\x1f\x8b"
        except OSError as exc:
            raise InputError(f"{self.display}: cannot read: {exc}") from exc

    def stream_facts(self) -> tuple[int, dict]:
        """(lines, byte facts) read in chunks, holding none of the file.

        Whether the bytes are UTF-8 is left unknown (None): a native reader
        that rejects bad UTF-8 finds it.
        """
        opener = gzip.open if self.compressed else open
        facts = ByteFacts()
        try:
            with opener(self.path, "rb") as handle:
                while chunk := handle.read(8 << 20):
                    facts.add(chunk)
        except (OSError, EOFError, gzip.BadGzipFile, zlib.error) as exc:
            raise InputError(f"{self.display}: cannot read: {exc}") from exc
        return facts.lines, facts.facts()

    @cached_property
    def raw(self) -> bytes:
        """Whole-document formats (JSON reports, CSV) read the bytes; line formats never keep them."""
        return self._read()

    @cached_property
    def text(self) -> str:
        return self.raw.decode("utf-8", errors="replace")

    @cached_property
    def lines(self) -> pl.DataFrame:
        """`line_no` (1-based) and `text`, CR and a final empty line removed.

        polars reads the file itself where it can (in parallel, no Python
        copy); a file it refuses (bytes that are not UTF-8, a line holding the
        unit-separator byte) is split here instead. Either way only the polars
        column stays in memory.
        """
        native = self._native_lines()
        if native is not None:
            return native
        data = self.read_bytes()
        lines, undecodable = lines_of_bytes(data) if data else (_NO_LINES, False)
        self.facts = byte_facts(data, undecodable)
        return lines

    def line_batches(self, size: int) -> Iterator[tuple[pl.DataFrame, bool]]:
        """The file's lines as `lines` gives them, in consecutive batches of about `size`
        bytes (cut after a newline), numbered across the file, each with whether it is the
        last; `facts` set once read through.

        For a big log parsed batch by batch: only one batch's text is held at a time (the
        last is told by the file's end, not by reading the next batch ahead). The bytes
        are read here, not by polars' own reader of the file, which maps the whole file
        into memory: its pages count as the process's resident memory (195 MB of a 195 MB
        log by its end; twice that with two such logs parsed at once).
        """
        first, head, last, undecodable = 1, b"", b"", False
        for data, at_end in self.byte_pieces(size):
            if len(head) < self.FACT_BYTES:
                head += data[: self.FACT_BYTES - len(head)]
            last = data[-1:]
            frame, bad = lines_of_bytes(data, first)
            undecodable = undecodable or bad
            first += frame.height
            del data
            yield frame, at_end
        self.facts = {
            "undecodable": undecodable,
            "nul": b"\x00" in head,
            "crlf": b"\r\n" in head,
            "final_newline": not last or last == b"\n",
            "empty": not last,
        }

    def byte_batches(self, size: int) -> Iterator[bytes]:
        """The file's bytes (gzip undone) in consecutive pieces of about `size`, each cut
        after a newline (the last may lack one): a big file read without holding it."""
        for chunk, _ in self.byte_pieces(size):
            yield chunk
            del chunk

    def byte_pieces(self, size: int) -> Iterator[tuple[bytes, bool]]:
        """`byte_batches`' pieces, each with whether it is the last (the file ends there)."""
        opener = gzip.open if self.compressed else open
        try:
            with opener(self.path, "rb") as handle:
                while chunk := handle.read(size):
                    # the rest of the piece's last line read on, not cut off and carried:
                    # one copy of the piece instead of two (1.5 GB: 0.43M → 0.14M page faults)
                    if not chunk.endswith(b"\n"):
                        chunk += handle.readline()
                    yield chunk, not handle.peek(1)
                    del chunk
        except (OSError, EOFError, gzip.BadGzipFile, zlib.error) as exc:
            raise InputError(f"{self.display}: cannot read: {exc}") from exc

    def release(self) -> None:
        """Forget the cached bytes, text and lines once the file is parsed."""
        for name in ("raw", "text", "lines"):
            self.__dict__.pop(name, None)

    def _native_lines(self) -> pl.DataFrame | None:
        count, facts = self.stream_facts()
        if "raw" in self.__dict__ or not count or facts["unit_separator"]:
            return None
        try:
            frame = pl.read_csv(self.path, **AS_LINES)
        except (pl.exceptions.PolarsError, OSError):
            return None
        if frame.height != count:
            return None
        self.facts = {**facts, "undecodable": False}
        return numbered_lines(frame["text"], 1, facts["cr"])

    @cached_property
    def facts(self) -> dict:
        """Byte-level facts the report notes: not UTF-8, NUL bytes, CRLF, last newline."""
        return byte_facts(self.raw)

    @property
    def undecodable_bytes(self) -> bool:
        return self.facts["undecodable"]

    def is_blank(self) -> bool:
        """Empty, or only white space."""
        chunk = self._read(self.HEAD_BYTES + 1)
        return len(chunk) <= self.HEAD_BYTES and not chunk.strip()

    def head(self, n: int = SNIFF_LINES) -> list[str]:
        chunk = self._read(self.HEAD_BYTES).decode("utf-8", errors="replace")
        return [line.rstrip("\r") for line in chunk.split("\n")[:n] if line.strip()]

    def pick_lines(self, numbers: set[int]) -> dict[int, str]:
        """The text of some lines (1-based, numbered as `lines` numbers them), read up to the last.

        For a report quoting a few cited lines of a big file: nothing past the
        last wanted line is read, and only the wanted lines are kept.
        """
        if not numbers:
            return {}
        last, out = max(numbers), {}
        opener = gzip.open if self.compressed else open
        try:
            with opener(self.path, "rb") as handle:
                for number, raw in enumerate(handle, start=1):
                    if number in numbers:
                        text = raw.rstrip(b"\n").decode("utf-8", errors="replace")
                        out[number] = text.rstrip("\r")
                    if number >= last:
                        break
        except (OSError, EOFError, gzip.BadGzipFile, zlib.error) as exc:
            raise InputError(f"{self.display}: cannot read: {exc}") from exc
        return out


_NO_LINES = pl.DataFrame(schema={"line_no": pl.Int64, "text": pl.Utf8})


class ByteFacts:
    """`SourceFile.stream_facts`' count and facts, added up over consecutive pieces of a
    file: a reader that goes through the bytes anyway learns them without a pass of its own.
    """

    def __init__(self) -> None:
        self.newlines, self.size, self.start, self.last = 0, 0, b"", b""
        self.separator = self.cr = False

    def add(self, chunk: bytes) -> int:
        """Take the next piece; its lines as `line_count` counts them (for a piece cut
        after a newline, as `SourceFile.byte_batches` cuts them)."""
        if len(self.start) < SourceFile.FACT_BYTES:
            self.start += chunk[: SourceFile.FACT_BYTES - len(self.start)]
        newlines = chunk.count(b"\n")
        self.newlines += newlines
        self.separator = self.separator or b"\x1f" in chunk
        self.cr = self.cr or b"\r" in chunk
        self.size += len(chunk)
        self.last = chunk[-1:] or self.last
        return newlines + (0 if chunk.endswith(b"\n") else 1)

    @property
    def lines(self) -> int:
        """Lines so far, a last one without its newline included."""
        return self.newlines + (0 if not self.size or self.last == b"\n" else 1)

    def facts(self) -> dict:
        return {
            "undecodable": None,
            "nul": b"\x00" in self.start,
            "crlf": b"\r\n" in self.start,
            "final_newline": not self.size or self.last == b"\n",
            "empty": not self.size,
            "starts_blank": self.start[:1].isspace(),
            "unit_separator": self.separator,  # the byte the native line reader splits fields at
            "cr": self.cr,  # any carriage return at all (CRLF ends are stripped)
        }


def line_count(data: bytes) -> int:
    """How many lines `data` holds, a last one without its newline included."""
    return data.count(b"\n") + (0 if data.endswith(b"\n") else 1)


def lines_of_bytes(data: bytes, first: int = 1) -> tuple[pl.DataFrame, bool]:
    """(`line_no` from `first` and `text` of whole lines, as `SourceFile.lines` gives them;
    whether bytes that are not UTF-8 were replaced). polars splits them where it can."""
    count = line_count(data)
    frame, undecodable = None, False
    if b"\x1f" not in data:
        try:
            frame = pl.read_csv(data, **AS_LINES)
        except (pl.exceptions.PolarsError, OSError):
            frame = None
        if frame is not None and frame.height != count:
            frame = None
    if frame is not None:
        text = frame["text"]
    else:
        try:
            decoded = data.decode("utf-8")
        except UnicodeDecodeError:
            decoded, undecodable = data.decode("utf-8", errors="replace"), True
        text = pl.Series("text", [decoded], dtype=pl.Utf8).str.split("\n").explode()
        del decoded
        if text.len() and data.endswith(b"\n"):
            text = text.head(text.len() - 1)
    return numbered_lines(text, first, b"\r" in data), undecodable


def numbered_lines(text: pl.Series, first: int, cr: bool) -> pl.DataFrame:
    """`line_no` from `first` and `text` (a line polars read as missing is empty; with `cr`,
    a CR end dropped), in one chunk, as the split path gives (see proxylogs._format: a
    2.1 panic)."""
    text = text.fill_null("") if text.has_nulls() else text
    return (
        pl.DataFrame({"text": text})
        .select(
            pl.int_range(first, first + pl.len(), dtype=pl.Int64).alias("line_no"),
            pl.col("text").str.strip_chars_end("\r") if cr else pl.col("text"),
        )
        .rechunk()
    )


def byte_facts(data: bytes, undecodable: bool | None = None) -> dict:
    """What the report notes about a file's bytes; `undecodable` if the caller already knows."""
    if undecodable is None:
        try:
            data.decode("utf-8")
            undecodable = False
        except UnicodeDecodeError:
            undecodable = True
    start = data[: SourceFile.FACT_BYTES]
    return {
        "undecodable": undecodable,
        "nul": b"\x00" in start,
        "crlf": b"\r\n" in start,
        "final_newline": not data or data.endswith(b"\n"),
        "empty": not data,
    }


@dataclass
class ParseResult:
    """What one file gave: canonical tables plus an account of every line."""

    tables: dict[str, pl.DataFrame] = field(default_factory=dict)
    lines: int = 0
    parsed: int = 0
    noise: int = 0
    unparsed_examples: list[tuple[int, str]] = field(default_factory=list)
    unparsed_shapes: list[dict] = field(default_factory=list)  # see ingest.shapes
    notes: list[str] = field(default_factory=list)
    formats: list[str] = field(default_factory=list)
    span: tuple | None = None  # (first, last) time the file covers, where lines carry times
    # per instance, where one file holds several (kubectl logs --prefix)
    instance_spans: dict[str, tuple] = field(default_factory=dict)
    # instance → the host:port addresses its own start-up lines name, as printed
    addresses: dict[str, list[str]] = field(default_factory=dict)
    # a load tester's own figures (per step or run: sent, ok, failed, latency, throughput)
    tester_summaries: list[dict] = field(default_factory=list)
    # the run's configuration as its tester recorded it (`compare` checks it)
    run_config: dict | None = None

    @property
    def unparsed(self) -> int:
        return self.lines - self.parsed - self.noise

    def set_unparsed(self, lines: pl.DataFrame) -> None:
        """Show the unparsed lines (`line_no`, `text`): the first few, and every shape."""
        first = lines.select("line_no", "text").sort("line_no").head(UNPARSED_EXAMPLES)
        self.unparsed_examples = [(n, t[:300]) for n, t in first.iter_rows()]
        self.unparsed_shapes = shapes_of(lines)

    def table(self, name: str) -> pl.DataFrame:
        return self.tables.get(name, model.empty(name))

    def add(self, name: str, frame: pl.DataFrame) -> None:
        frame = model.conform(name, frame)
        if name in self.tables:
            frame = pl.concat([self.tables[name], frame])
        self.tables[name] = frame


class Parsed(NamedTuple):
    """One file as read: its source, format and result, or why it was not read."""

    source: SourceFile
    fmt: FileFormat | None
    result: ParseResult | None
    failure: str | None


@dataclass
class ParseContext:
    """Facts a parser cannot know from its own file."""

    year: int  # for yearless stamps (vLLM's `MM-DD HH:MM:SS`)
    server_tz: str = "UTC"  # the zone of servers' own (naive) stamps
    client_tz: str = "UTC"  # the zone of naive client timestamps
    # wall time of a client file's relative zero (--started-at)
    client_anchor: dt.datetime | None = None
    # when a single saved /metrics snapshot was taken (--scraped-at)
    scraped_at: dt.datetime | None = None


SAMPLES_DIR = Path(__file__).parent / "samples"


@dataclass(frozen=True)
class Sample:
    """Real text a format must read, and where it came from.

    `text` holds lines as they appear in a file; a whole-file sample names a
    file under ``ingest/samples/`` instead. `role` is the file role a line
    sample is read in (``server`` or ``proxy``), `status` what its lines
    become (``parsed``, ``noise``, or ``any`` of the two), `tables` the rows it
    gives, where said.
    The registry test reads every sample with every format.
    """

    origin: str
    text: str = ""
    file: str = ""
    role: str = "server"
    status: str = "parsed"
    tables: tuple[tuple[str, int], ...] = ()

    def read(self) -> str:
        return (SAMPLES_DIR / self.file).read_text() if self.file else self.text


class FileFormat:
    """A format read a whole file at a time. Subclasses register themselves.

    `priority` is the sniff order (lower first, unique); `samples` the real
    files it must read.
    """

    name: ClassVar[str]
    role: ClassVar[str]  # "client", "server" or "proxy"
    priority: ClassVar[int]
    samples: ClassVar[tuple[Sample, ...]] = ()
    # engine metrics with no request evidence (a scrape, a Prometheus answer): never an
    # instance's log, and the addresses it reports are its series' labels
    metrics_source: ClassVar[bool] = False
    # its rows name their instances by labels (pods, hosts, addresses), not after the file:
    # its `addresses` map each label name to its address labels (see `name_instances`)
    labelled_rows: ClassVar[bool] = False
    # the generic form, which claims what no specific format does (its sniff overlaps theirs)
    fallback: ClassVar[bool] = False

    def sniff(self, head: list[str]) -> bool:
        raise NotImplementedError

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        raise NotImplementedError

    def name_instances(
        self, result: ParseResult, logs: dict[str, list[str]], given: dict[str, str]
    ) -> None:
        """Once every file is read: give rows named by labels the log instance those labels
        name (`logs`: each log instance's announced addresses; `given`: label → name from
        ``--instance NAME=LABEL``). Only formats whose rows describe several instances by
        label need to."""


class LineFormat:
    """A kind of line inside a server-side log.

    ``extract`` gets the lines no earlier line format claimed, with columns
    `line_no`, `text` (as in the file), `body` (runtime prefix stripped),
    `at` / `at_precision_s` (the best time known for the line) and `instance`.
    It returns a `Claim`: which lines it recognised and the rows they gave.
    `priority` is the claim order (lower first, unique); `samples` the real
    lines it must claim.
    """

    name: ClassVar[str]
    priority: ClassVar[int]
    samples: ClassVar[tuple[Sample, ...]] = ()
    fallback: ClassVar[bool] = False  # takes what every other format left (claims overlap it)
    supersedes: ClassVar[tuple[str, ...]] = ()  # later formats whose lines it claims on purpose
    # Whether each line's claim and rows depend on that line alone (never on the lines
    # around it or on which others it is given): then a file read in batches gives the
    # same claims batch by batch (see serverlog.parse_in_batches).
    per_line: ClassVar[bool] = False
    # For a format that looks across lines: a per-line test with which it claims nothing
    # from lines none of which pass it (its own first check), so a file can be read in
    # batches past it where it is asleep. None: it may claim from any lines.
    woken_by: ClassVar[pl.Expr | None] = None

    @property
    def openings(self) -> frozenset[str] | None:
        """The characters every message it claims begins with; None: any. A batch none of
        whose messages begins so is not offered to it (`serverlog`)."""
        return None

    def sniff(self, bodies: list[str]) -> bool:
        raise NotImplementedError

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        raise NotImplementedError


@dataclass
class Claim:
    """Lines a line format recognised: `records` gave rows, `noise` carry nothing."""

    records: pl.Series  # line_no values
    noise: pl.Series = field(default_factory=lambda: pl.Series("line_no", [], dtype=pl.Int64))
    tables: dict[str, pl.DataFrame] = field(default_factory=dict)
    addresses: dict[str, list[str]] = field(default_factory=dict)  # see ParseResult.addresses
