"""The text of cited log lines: `file:line` sources back to what the file says there.

Reports cite lines by source (``instance-1.log:60``); a reader of the ticket
should see the line itself. `read_cited_lines` re-reads only the files that are
cited, each once for all of its cited lines and only up to the last of them,
through the ingest stage's own reader (`SourceFile.pick_lines`: gzip, CRLF and
bytes that are not UTF-8 handled as when the file was parsed). Lines longer than `MAX_LINE_CHARS` are cut with a
marker; under ``--redact`` each text goes through the same redaction as the
rest of the report (before it is cut, so that no cut splits what it hides).

Sources that are not lines of a text file (``report.json:record 5``, an
aggregate row) have no text and are left out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from logforensics.ingest import InputError, SourceFile

MAX_LINE_CHARS = 320  # characters of one cited line; the rest is counted


@dataclass(frozen=True)
class CitedLine:
    """One line a report cites: where it is and what it says."""

    source: str  # file:line, as the report prints it
    path: str  # the file, as given on the command line
    line: int  # 1-based line number
    text: str  # the line, cut to MAX_LINE_CHARS and redacted where asked

    def to_dict(self) -> dict:
        return {"source": self.source, "text": self.text}


def split_source(source: str) -> tuple[str, int] | None:
    """(file, line) of a `file:line` source; None for a source that is not a text line."""
    path, sep, number = source.rpartition(":")
    if not sep or not path or not number.isdigit() or int(number) == 0:
        return None
    return path, int(number)


def clip_line(text: str, limit: int = MAX_LINE_CHARS) -> str:
    """A line cut to `limit` characters, saying how many were left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]} … (+{len(text) - limit:,} characters)"


def read_cited_lines(
    sources: Iterable[str],
    readable: set[str],
    redact: Callable[[str], str] | None = None,
) -> dict[str, CitedLine]:
    """The text of each `file:line` source whose file is in `readable`, keyed by source.

    Each file is read once, whatever number of its lines is cited; a file that
    cannot be read any more (moved, truncated) gives no texts, not an error.
    """
    wanted: dict[str, dict[int, str]] = {}
    for source in dict.fromkeys(sources):
        place = split_source(source) if source else None
        if place and place[0] in readable:
            wanted.setdefault(place[0], {})[place[1]] = source
    out: dict[str, CitedLine] = {}
    for path, numbers in wanted.items():
        try:
            found = SourceFile(Path(path), path, "").pick_lines(set(numbers))
        except InputError:
            continue
        for number, text in found.items():
            # redacted whole, then cut: a cut could split an address or a prompt's quotes
            text = clip_line(redact(text) if redact else text)
            out[numbers[number]] = CitedLine(numbers[number], path, number, text)
    return out
