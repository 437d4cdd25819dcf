"""--cache keeps parsed tables; --quiet / the progress display."""

import io
import shutil

from logforensics import cache
from logforensics.analysis import Options, analyze
from logforensics.cli import Progress
from tests.conftest import FIXTURES, report_json


def without_time(d):
    d.pop("generated_at")
    return d


def test_cache_gives_the_same_analysis_and_notices_a_changed_file(tmp_path):
    folder = tmp_path / "b"
    shutil.copytree(FIXTURES / "seed-two-instances", folder)
    store = tmp_path / "cache"
    first = without_time(report_json(analyze([folder], Options(cache_dir=store))))
    entries = sorted(p.name for p in store.iterdir())
    # two logs, two client files; the skipped expected.json is not cached
    assert len(entries) == 4
    again = without_time(report_json(analyze([folder], Options(cache_dir=store))))
    assert again == first
    # a cached entry really is read: damage the source file's text but keep size and mtime
    log = folder / "instance-2.log"
    stat = log.stat()
    text = log.read_bytes()
    log.write_bytes(text.replace(b"POST /v1/chat", b"POST /v1/chaT"))
    import os

    os.utime(log, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert without_time(report_json(analyze([folder], Options(cache_dir=store)))) == first
    # a changed mtime parses again
    os.utime(log, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    changed = report_json(analyze([folder], Options(cache_dir=store)))
    assert changed["totals"]["unknown"] > 0  # instance-2's POSTs are no longer inference calls


def test_a_damaged_cache_entry_is_parsed_again(tmp_path):
    store = tmp_path / "cache"
    first = without_time(report_json(analyze([FIXTURES / "healthy"], Options(cache_dir=store))))
    for meta in store.rglob("file.json"):
        meta.write_text("{not json")
    assert (
        without_time(report_json(analyze([FIXTURES / "healthy"], Options(cache_dir=store))))
        == first
    )
    assert cache.load(store, "no-such-entry") is None


class FakeTerminal(io.StringIO):
    def __init__(self, tty: bool):
        super().__init__()
        self.tty = tty

    def isatty(self):
        return self.tty


def test_progress_shows_only_on_a_terminal_after_the_delay():
    quiet = FakeTerminal(tty=False)
    p = Progress(quiet)
    p.DELAY_S = 0
    p(1, 2, 1000)
    assert quiet.getvalue() == ""
    term = FakeTerminal(tty=True)
    p = Progress(term)
    p(1, 2, 1000)
    assert term.getvalue() == ""  # not yet two seconds
    p.DELAY_S = 0
    p(1, 2, 1_500_000)
    p(2, 2, 3_000_000)
    out = term.getvalue()
    assert out.startswith("\rread 1/2 files · 1,500,000 lines · ")
    assert "\rread 2/2 files · 3,000,000 lines · " in out and out.endswith("lines/s\n")


def test_source_ids_written_by_another_process_are_mapped_to_this_ones():
    """A cache entry's ids were numbered by the process that wrote it: they are re-based."""
    import polars as pl

    from logforensics import model

    written = pl.DataFrame({"source": [9 * model.LINE_SPAN + 5, 9 * model.LINE_SPAN + 12, None]})
    here = model.source_remap(written, {9: "other-process.log:"})
    assert model.source_labels(here["source"]) == [
        "other-process.log:5",
        "other-process.log:12",
        None,
    ]
    # one file's rows of two prefixes (a tester's console beside its results): each its own
    two = pl.DataFrame({"source": [9 * model.LINE_SPAN + 1, 4 * model.LINE_SPAN + 2]})
    mapped = model.source_remap(two, {9: "other-process.log:", 4: "its-console.txt:"})
    assert model.source_labels(mapped["source"]) == ["other-process.log:1", "its-console.txt:2"]
