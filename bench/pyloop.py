"""Reference: the naive per-line Python loop (one regex per line, no vectorisation).

Counts uvicorn access lines in the files named on the command line; prints the
count. `bench/run.py` times it beside `grep` and `logforensics analyze`.
"""

from __future__ import annotations

import re
import sys

ACCESS_RE = re.compile(
    r'(?:INFO|WARNING|ERROR|DEBUG):\s+(?P<peer>\S+) - "(?P<method>[A-Z]+) (?P<path>\S+) '
    r'HTTP/[\d.]+" (?P<status>\d{3})'
)


def main(paths: list[str]) -> int:
    hits = 0
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if ACCESS_RE.search(line):
                    hits += 1
    print(hits)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
