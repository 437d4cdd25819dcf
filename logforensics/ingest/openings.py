"""The characters a regex's match can begin with, read from the regex itself.

A line format whose pattern is anchored (`^…` in every alternative) can only claim a
line whose message starts with one of a few characters. One pass over a batch finds
which first characters its messages have; a format none of whose openings occur there
cannot claim any of its lines and is not run on it (in an nginx log's batch, 8 of the 17
formats that claim before nginx's). The set is derived by Python's own regex
parser, and only where it is certain: a class with categories or negation, a case-
insensitive flag, an unanchored alternative, a pattern that can match the empty
string at the start, or one Python cannot parse all give None (no gate).
"""

from __future__ import annotations

from re import _constants as sre
from re import _parser as sre_parse

MAX_RANGE = 256  # a wider character range (`[\x00-\uffff]`) gives up instead of listing it
# Syntax polars' regex engine (Rust's) reads otherwise than Python's parser: a POSIX class
# (`[[:alpha:]]`, to Python the characters "[:alph"), a class's intersection, difference or
# symmetric difference. A pattern holding any of them is given no gate.
RUST_ONLY = ("[[:", "[^[:", "&&", "--", "~~")
# Flags under which a literal or `^` says less than it seems: any case, after any newline.
UNCERTAIN_FLAGS = sre.SRE_FLAG_IGNORECASE | sre.SRE_FLAG_MULTILINE


class _Unknown(Exception):
    """An element whose first characters are not certain from the pattern alone."""


def first_characters(pattern: str) -> frozenset[str] | None:
    """Every character a match of `pattern` (searched anywhere in a text) starts with,
    or None where the pattern does not say for certain."""
    if any(syntax in pattern for syntax in RUST_ONLY):
        return None
    try:
        parsed = sre_parse.parse(pattern)
    except Exception:  # noqa: BLE001 - re.error and the parser's own complaints alike
        return None
    if parsed.state.flags & sre.SRE_FLAG_VERBOSE:  # Rust skips spaces in a class, Python not
        return None
    try:
        return frozenset(_anchored(list(parsed), _flags(parsed.state.flags, 0, 0)))
    except _Unknown:
        return None


def _anchored(items: list, flags: int) -> set[str]:
    """First characters of a sequence that must begin at the text's start."""
    if not items:
        raise _Unknown
    op, arg = items[0]
    if op is sre.AT and arg is sre.AT_BEGINNING:
        chars, nullable = _sequence(items[1:], flags)
        if nullable:  # an empty match at the start: the line may begin with anything
            raise _Unknown
        return chars
    if op is sre.BRANCH and len(items) == 1:
        return set().union(*(_anchored(list(branch), flags) for branch in arg[1]))
    if op is sre.SUBPATTERN and len(items) == 1:
        _group, add, delete, sub = arg
        return _anchored(list(sub), _flags(flags, add, delete))
    raise _Unknown  # an alternative that may match anywhere in the line


def _flags(flags: int, add: int, delete: int) -> int:
    flags = (flags | add) & ~delete
    if flags & UNCERTAIN_FLAGS:
        raise _Unknown
    return flags


def _sequence(items, flags: int) -> tuple[set[str], bool]:
    """(first characters, whether the sequence can match the empty string)."""
    chars: set[str] = set()
    for op, arg in items:
        own, nullable = _element(op, arg, flags)
        chars |= own
        if not nullable:
            return chars, False
    return chars, True


def _element(op, arg, flags: int) -> tuple[set[str], bool]:
    if op is sre.LITERAL:
        return {chr(arg)}, False
    if op is sre.IN:
        return _members(arg), False
    if op is sre.SUBPATTERN:
        _group, add, delete, sub = arg
        return _sequence(sub, _flags(flags, add, delete))
    if op is sre.BRANCH:
        parts = [_sequence(branch, flags) for branch in arg[1]]
        return set().union(*(c for c, _ in parts)), any(n for _, n in parts)
    if op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT):
        low, _high, sub = arg
        chars, nullable = _sequence(sub, flags)
        return chars, nullable or low == 0
    if op is sre.ATOMIC_GROUP:
        return _sequence(arg, flags)
    if op is sre.AT and arg is not sre.AT_BEGINNING:  # \b, $ …: zero width, no character
        return set(), True
    raise _Unknown  # ., \d, [^…], a back-reference, a look-around: not listed here


def _members(items) -> set[str]:
    out: set[str] = set()
    for op, arg in items:
        if op is sre.LITERAL:
            out.add(chr(arg))
        elif op is sre.RANGE and arg[1] - arg[0] < MAX_RANGE:
            out.update(chr(c) for c in range(arg[0], arg[1] + 1))
        else:  # a category (\s, \w), a negation, a wide range
            raise _Unknown
    return out
