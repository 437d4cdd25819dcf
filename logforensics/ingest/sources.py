"""Which files are read, once each, and which instance each belongs to.

* One file, once: the same file reached twice (named twice, a folder and a file
  in it, a symlink, a ``.gz`` beside its uncompressed copy, identical content)
  is read once; the others are listed as "read once" with the reason.
* One instance, many files: a log's rotated parts (``x.log``, ``x.log.1``,
  ``x.log.2.gz``, ``x-2026-11-29.log.gz``, ``x.log-20261129.gz``) share the
  instance name ``x`` and are listed oldest first.
* One instance, restarted into a new file: a later life of a log's instance
  (``instance-1-restarted.log`` announcing the address ``instance-1.log`` did, begun
  after it ended) is that instance, with a restart between (`later_lives`).
* A saved ``/metrics`` scrape carries no request evidence and is usually named
  by port (``metrics-8001.txt``): it is mapped to the instance whose own
  start-up lines name that port (or whose address its ``instance`` label
  names); else its rows are "metrics of an unknown instance" (instance null).
"""

from __future__ import annotations

import gzip
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

LOG_SUFFIXES = (".gz", ".log", ".txt", ".out", ".prom", ".metrics")
DATE_PART = r"(?:19|20)\d{2}-?[01]\d-?[0-3]\d(?:[-_T]?\d{2,6})?"
ROTATION_INDEX_RE = re.compile(r"\.(\d{1,3})$")  # x.log.1, x.log.2(.gz)
ROTATION_DATE_RE = re.compile(rf"[-_.]({DATE_PART})$")  # x-2026-11-29.log, x.log-20261129
LOOPBACK = {"127.0.0.1", "localhost", "0.0.0.0", "::", "::1", "[::]", "[::1]", ""}
PORT_IN_NAME_RE = re.compile(r"(?:^|[^\d])(\d{4,5})(?:$|[^\d])")
ADDRESS_IN_NAME_RE = re.compile(r"((?:\d{1,3}\.){3}\d{1,3})[_:-](\d{2,5})")


def _strip(name: str) -> tuple[str, tuple[int, str]]:
    """The name without log suffixes and rotation marks, and its age key (0 = current)."""
    index, date = 0, ""
    changed = True
    while changed:
        changed = False
        for suffix in LOG_SUFFIXES:
            if name.endswith(suffix) and len(name) > len(suffix):
                name, changed = name[: -len(suffix)], True
        if m := ROTATION_INDEX_RE.search(name):
            name, index, changed = name[: m.start()], int(m.group(1)), True
        if m := ROTATION_DATE_RE.search(name):
            name, date, changed = name[: m.start()], m.group(1).replace("-", ""), True
    return name, (index, date)


def instance_name(path: Path) -> str:
    """An instance is named after its file: ``gpu-0.log``, ``gpu-0.log.1.gz`` → ``gpu-0``."""
    return _strip(path.name)[0]


def rotation_order(paths: list[Path]) -> dict[Path, tuple[int, int]]:
    """Each path of a rotated log → (its place oldest first, parts), where a folder holds
    several parts of one log; files that are not rotated parts are left out."""
    groups: dict[tuple[Path, str], list[Path]] = {}
    for path in paths:
        groups.setdefault((path.parent, instance_name(path)), []).append(path)
    out = {}
    for members in groups.values():
        if len(members) < 2:
            continue

        def age(path: Path) -> tuple:
            index, date = _strip(path.name)[1]
            # higher index = older; an older date = older; the bare file is the newest
            return (-index, date or "99999999")

        ordered = sorted(members, key=age)
        out |= {p: (i + 1, len(ordered)) for i, p in enumerate(ordered)}
    return out


@dataclass(frozen=True)
class Life:
    """One server log as a life of an instance: its name, announced addresses, span."""

    path: Path
    name: str
    addresses: tuple[str, ...]
    start: object  # datetime (UTC)
    end: object


NAME_SEPARATORS = "-_."


def _stem(name: str, names: list[str]) -> str:
    """The shortest of `names` that `name` extends at a separator (``instance-1`` for
    ``instance-1-restarted``), else `name` itself."""
    return next(
        (
            n
            for n in sorted(names, key=len)
            if name == n or (name.startswith(n) and name[len(n)] in NAME_SEPARATORS)
        ),
        name,
    )


def later_lives(logs: list[Life]) -> dict[Path, tuple[str, Life]]:
    """Logs that hold a later life of another log's instance → (the instance's name, the
    log of the life before): a server restarted with its output sent to a new file
    (``instance-1.log``, then ``instance-1-restarted.log``).

    Only with positive evidence of each: in one folder, the later log's name extends the
    first's at a separator (or is the same, a rotated part), its start-up lines announce
    an address the first's announced (one port is held by one process at a time), and it
    begins at or after every earlier life of the name ended. Else they stay apart (two
    pods may both announce 0.0.0.0:8000): name them with --instance.
    """
    groups: dict[tuple[Path, str], list[Life]] = {}
    names_by_folder: dict[Path, list[str]] = {}
    for log in logs:
        names_by_folder.setdefault(log.path.parent, []).append(log.name)
    for log in logs:
        stem = _stem(log.name, names_by_folder[log.path.parent])
        groups.setdefault((log.path.parent, stem), []).append(log)
    out: dict[Path, tuple[str, Life]] = {}
    for (_, stem), lives in groups.items():
        lives.sort(key=lambda life: (life.start, life.end))
        first = lives[0]
        for i, life in enumerate(lives[1:], start=1):
            before = max(lives[:i], key=lambda earlier: earlier.end)
            if life.start < before.end or not set(life.addresses) & set(first.addresses):
                break  # overlapping or another address: not one instance's lives
            out[life.path] = (stem, before)
    return out


@dataclass
class Duplicate:
    path: Path
    same_as: Path
    reason: str


def _gzip_size(path: Path) -> int | None:
    """A gzip file's uncompressed size from its trailer (mod 2³²), without reading it."""
    try:
        with path.open("rb") as handle:
            if handle.read(2) != b"\x1f\x8b":
                return None
            handle.seek(-4, 2)
            return int.from_bytes(handle.read(4), "little")
    except OSError:
        return None


def _digest(path: Path) -> str | None:
    try:
        opener = gzip.open if _gzip_size(path) is not None else open
        h = hashlib.blake2b(digest_size=16)
        with opener(path, "rb") as handle:
            while chunk := handle.read(8 << 20):
                h.update(chunk)
        return h.hexdigest()
    except (OSError, EOFError, gzip.BadGzipFile):
        return None


def distinct_files(
    files: list[tuple[Path, bool]],
) -> tuple[list[tuple[Path, bool]], list[Duplicate]]:
    """The files to read, each once, and the duplicates left out (with why).

    Only files whose (uncompressed) size equals another's are hashed, so a
    folder of distinct logs costs one `stat` each.
    """
    by_real: dict[Path, list[tuple[Path, bool]]] = {}
    for path, named in files:
        by_real.setdefault(path.resolve(), []).append((path, named))
    kept: list[tuple[Path, bool]] = []
    duplicates: list[Duplicate] = []
    for reached in by_real.values():
        # the file itself rather than a link to it; a name given on the command line first
        first, named = min(reached, key=lambda r: (r[0].is_symlink(), not r[1]))
        kept.append((first, any(n for _, n in reached)))
        for path, _ in reached:
            if path == first:
                continue
            how = "a symlink to it" if path.is_symlink() else "reached by two names"
            duplicates.append(Duplicate(path, first, f"the same file ({how})"))
        if sum(1 for path, _ in reached if path == first) > 1:
            duplicates.append(Duplicate(first, first, "named twice (a folder and a file in it)"))
    first_seen = {}
    for i, (path, _) in enumerate(files):
        first_seen.setdefault(path, i)
    kept.sort(key=lambda item: first_seen[item[0]])
    sizes: dict[int, list[Path]] = {}
    for path, _ in kept:
        size = _gzip_size(path)
        if size is None:
            try:
                size = path.stat().st_size
            except OSError:
                continue
        if size:
            sizes.setdefault(size, []).append(path)
    same_content: dict[Path, Path] = {}
    for group in sizes.values():
        if len(group) < 2:
            continue
        seen: dict[str, Path] = {}
        for path in group:
            digest = _digest(path)
            if digest is None:
                continue
            if digest in seen:
                same_content[path] = seen[digest]
            else:
                seen[digest] = path
    out = []
    for path, named in kept:
        if path in same_content:
            first = same_content[path]
            what = (
                "its uncompressed copy"
                if (path.suffix == ".gz") != (first.suffix == ".gz")
                else "identical content"
            )
            duplicates.append(Duplicate(path, first, what))
        else:
            out.append((path, named))
    return out, duplicates


def _hosts_match(a: str, b: str) -> bool:
    return a == b or (a in LOOPBACK and b in LOOPBACK) or not a or not b


def _split(address: str) -> tuple[str, str]:
    host, _, port = address.rpartition(":")
    return host.strip("[]") if host else "", port


def address_instance(host: str, port: str, addresses: dict[str, list[str]]) -> str | None:
    """The one instance whose start-up lines announce `host`:`port` (a loopback or wildcard
    host matches any other such; an empty host any), else None (none, or several)."""
    matches = {
        instance
        for instance, own in addresses.items()
        if any(_split(a)[1] == port and _hosts_match(host, _split(a)[0]) for a in own)
    }
    return matches.pop() if len(matches) == 1 else None


def scrape_instance(
    name: str, labelled: list[str], addresses: dict[str, list[str]]
) -> tuple[str | None, str]:
    """The instance a scrape belongs to, and why (None: no instance's evidence names it).

    `name` is the file's instance-style name (``metrics-8001``), `labelled` the
    addresses its ``instance`` labels name, `addresses` each instance's own
    start-up addresses.
    """
    if name in addresses:
        return name, f"its name is instance {name}'s"
    wanted = [(h, p) for h, p in ADDRESS_IN_NAME_RE.findall(name)]
    if not wanted:  # a bare port, where the name holds no host:port
        wanted = [("", p) for p in PORT_IN_NAME_RE.findall(name)]
    wanted += [_split(a) for a in labelled]
    for host, port in wanted:
        matches = sorted(
            instance
            for instance, own in addresses.items()
            if any(_split(a)[1] == port and _hosts_match(host, _split(a)[0]) for a in own)
        )
        if len(matches) == 1:
            printed = next(a for a in addresses[matches[0]] if _split(a)[1] == port)
            where = f"{host}:{port}" if host else f"port {port}"
            return matches[0], f"{where} matches {matches[0]}'s start-up address {printed}"
        if len(matches) > 1:
            return None, f"port {port} is named by several instances ({', '.join(matches)})"
    known = "; ".join(f"{i}: {', '.join(a)}" for i, a in sorted(addresses.items())) or "none"
    return None, f"neither its name nor its labels name an instance's address (known: {known})"


# Files that are not logs, told apart so the account can say what they are. Each is a
# pattern that several of the first lines match (one line is not enough).
NOT_LOGS = {
    "an nginx configuration": r"^\s*(?:worker_processes|events\s*\{|http\s*\{|upstream\s+\S+\s*\{"
    r"|server\s*\{|location\s|proxy_pass\s|listen\s+\S+;|log_format\s|access_log\s)",
    "an HAProxy configuration": r"^(?:global|defaults|frontend\s+\S+|backend\s+\S+|listen\s+\S+)\s*$"
    r"|^\s+(?:mode\s+(?:http|tcp)|balance\s+\w+|server\s+\S+\s+\S+:\d+|timeout\s+\w+\s+\S+)",
    "an rsyslog configuration": r"^\s*(?:module|input|global|template|action|ruleset)\(|^\$[A-Z]\w+ "
    r"|^if \$(?:programname|syslogtag)",
    "a Caddy configuration": r"^(?:https?://)?[\w.*-]*:\d+(?:,\s*\S+)*\s*\{\s*$"
    r"|^\s*(?:reverse_proxy|lb_policy|lb_try_duration|health_uri|file_server|php_fastcgi"
    r"|handle_path|handle_errors)\s|^\s*output (?:file|stderr|stdout|discard)\b",
    "a Markdown document": r"^#{1,6} \S|^\|[-| :]+\|$|^(?:[-*]|\d+\.) \S",
    "a script": r"^#!/",
}
NOT_LOG_MIN_LINES = 2
CONFIG_SUFFIXES = {".conf", ".cfg", ".ini", ".toml"}
YAML_SUFFIXES = {".yml", ".yaml"}  # a load tester's or proxy's configuration, as a rule


def not_a_log(head: list[str], suffix: str = "") -> str | None:
    """What a file of no known format is, where it is plainly not a log (else None).

    A file named as a configuration is never taken for a Markdown document (its
    comments look like headings, a YAML list's items like a Markdown list's): it is
    a configuration of a kind, a YAML document, or a configuration of no kind.
    """
    yaml = suffix.lower() in YAML_SUFFIXES
    config = suffix.lower() in CONFIG_SUFFIXES or yaml
    for what, pattern in NOT_LOGS.items():
        if config and what == "a Markdown document":
            continue
        rx = re.compile(pattern)
        hits = sum(bool(rx.search(line)) for line in head)
        needed = (
            1 if what == "a script" and head and head[0].startswith("#!") else NOT_LOG_MIN_LINES
        )
        if hits >= needed:
            return what
    if yaml:
        return "a YAML document"
    if config:
        return "a configuration file"
    return "prose (no timestamps, no fields)" if _prose(head) else None


PROSE_LINE = re.compile(r"^(?!.*\d{1,2}:\d{2}:\d{2})(?!.*[={}\[\]<>|])[^\t]{40,}$")


def _prose(head: list[str]) -> bool:
    """Sentences, line after line (a prompts file, notes): long lines of words with no
    time of day and no field syntax, in nearly every line."""
    worded = [line for line in head if PROSE_LINE.match(line) and line.count(" ") >= 6]
    return len(head) >= 3 and len(worded) >= 0.8 * len(head)
