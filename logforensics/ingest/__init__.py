"""Read any mix of files and folders into the canonical tables.

Formats register themselves here by name (`register_file_format`,
`register_line_format`); `detect` picks the file format whose `sniff`
accepts a file's first lines.
"""

from __future__ import annotations

from logforensics.ingest.base import (
    Claim,
    FileFormat,
    InputError,
    LineFormat,
    ParseContext,
    ParseResult,
    SourceFile,
)

FILE_FORMATS: dict[str, FileFormat] = {}
LINE_FORMATS: dict[str, LineFormat] = {}


def register_file_format(cls):
    FILE_FORMATS[cls.name] = cls()
    return cls


def register_line_format(cls):
    LINE_FORMATS[cls.name] = cls()
    return cls


def detect(source: SourceFile) -> FileFormat | None:
    """The first registered file format whose sniff accepts the file, if any."""
    head = source.head()
    if not head:
        return None
    for fmt in FILE_FORMATS.values():
        if fmt.sniff(head):
            return fmt
    return None


# Registration order is sniff order: specific formats before general ones.
from logforensics.ingest import loadtesters, client, serverlog  # noqa: E402,F401,I001

__all__ = [
    "Claim",
    "FILE_FORMATS",
    "FileFormat",
    "InputError",
    "LINE_FORMATS",
    "LineFormat",
    "ParseContext",
    "ParseResult",
    "SourceFile",
    "detect",
    "register_file_format",
    "register_line_format",
]
