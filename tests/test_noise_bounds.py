"""Noise never swallows evidence: a block of chatter ends where its own shape ends.

Real vLLM 0.32.0 logs (their start-up chatter, an orderly shutdown with its
traceback, nanobind's leak report, Python warnings and their echoed source
line) with one line of another shape put after each line of each block: that
line is read on its own (here: unparsed, and shown), never counted as noise.
"""

from __future__ import annotations

import pytest

from logforensics.ingest import ParseContext, SourceFile, detect
from logforensics.ingest.serverlog import classify_lines
from tests.conftest import corpus

CTX = ParseContext(year=2026)
# shapes no format reads: a request line of no known log, an alert, a bare error text
ODD_LINES = (
    "GET /odd 1 2 3 something unknown happened here",
    "ALERT disk /var/log 97% full",
    "upstream went away while reading",
)


def noise_lines(path) -> list[int]:
    """The line numbers the tool counts as noise in the unchanged log."""
    fates = classify_lines(SourceFile(path, path.name, path.stem), CTX)
    return fates.filter(fates["status"] == "noise")["line_no"].to_list()


@pytest.mark.parametrize(
    ("incident", "log"),
    [("kv-tiny", "instance-1.log"), ("compute-loadtest", "instance-1.log")],
)
def test_a_line_after_any_noise_line_is_read_on_its_own(tmp_path, incident, log):
    original = corpus(incident) / log
    lines = original.read_text(encoding="utf-8").splitlines(keepends=True)
    noisy = noise_lines(original)
    # after every noise line of the start-up's last stretch and of the whole shutdown
    where = sorted(set(noisy[-40:]) | set(noisy[:5]))
    assert len(where) >= 30
    for k, after in enumerate(where):
        odd = ODD_LINES[k % len(ODD_LINES)]
        path = tmp_path / f"{after}-{log}"
        path.write_text("".join(lines[:after]) + odd + "\n" + "".join(lines[after:]), "utf-8")
        source = SourceFile(path, path.name, original.stem)
        result = detect(source).parse(source, CTX)
        assert result.unparsed == 1, (after, lines[after - 1], result.unparsed_examples)
        assert result.unparsed_examples[0][0] == after + 1
        assert result.noise == len(noisy), after  # the block itself is still noise
