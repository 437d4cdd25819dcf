"""A load tester's console output: its own figures per step, not requests.

Read so the report can show the tester's own counts beside the tool's (a
mismatch between them is a finding); its requests are counted from the
tester's record file of the same run, never from here. Two consoles, from
their source:

* ``logforensics loadtest`` (``logforensics/loadtest.py``: ``run ID: steps
  5,9,13,20, rest 45 s, timeout 30 s -> client.jsonl``, ``step 1/4: 5 sent, 5
  done, 0 failed, 17.5 s``, ``48 records for 48 requests (33 failed) written
  to …``);
* the lab's ThreadPoolExecutor client (``../shared/lab/client.py``: ``ISO step
  concurrency=5 indexes 1..5``, ``ISO step 5: ok=5/5 statuses=['200'] lat
  min/med/max=36.666/39.461/48.184``, ``   #40 ReadTimeout: …`` per failure).
"""

from __future__ import annotations

import re

import polars as pl

from logforensics.ingest import register_file_format
from logforensics.ingest.base import FileFormat, ParseContext, ParseResult, Sample, SourceFile
from logforensics.ingest.pylogs import CHAIN_TEXT, EXCEPTION_RE, FRAME_RE

# A Python traceback a tester prints for a failed request: its own lines, each by shape
# (the source line under a frame is indented 4, Python 3.11's carets under it).
TRACEBACK_RE = rf"{CHAIN_TEXT}|{FRAME_RE}|^    \S|^\s*[~^]+\s*$|{EXCEPTION_RE}"

ISO = r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})"
LINES = {
    # logforensics loadtest
    "lf_run": r"^run (?P<run>\S+): steps (?P<steps>[\d,]+), rest \S+ s, timeout (?P<timeout>[\d.]+) s -> ",
    "lf_config": r"^configuration -> \S",
    # its own warnings (loadtest.py: a rest shorter than the timeout)
    "lf_warning": r"^warning: rest \S+ s is shorter than timeout ",
    "lf_warmup": r"^warm-up: .+, [\d.]+ s$",
    "lf_step": (
        r"^step (?P<step>\d+)/\d+: (?P<sent>\d+) sent, (?P<done>\d+) done, (?P<failed>\d+) failed,"
        r" (?P<duration>[\d.]+) s"
    ),
    "lf_total": r"^\d+ records for \d+ requests \(\d+ failed\) written to |^aborted; |^interrupted$",
    # the lab's client.py
    "lab_marker": rf"^{ISO} (?:warm-up(?: done .*)?|done|rest [\d.]+s)$",
    "lab_start": rf"^{ISO} step concurrency=(?P<level>\d+) indexes \d+\.\.\d+$",
    "lab_step": (
        rf"^{ISO} step (?P<lab_step>\d+): ok=(?P<ok>\d+)/(?P<n>\d+) statuses=\[[^\]]*\] "
        r"lat min/med/max=(?P<min>[\d.]+)/(?P<med>[\d.]+)/(?P<max>[\d.]+)$"
    ),
    "lab_failure": r"^   #\d+ \S",
}
KNOWN_RE = "|".join(f"(?:{rx})" for rx in LINES.values())


@register_file_format
class TesterConsole(FileFormat):
    """A load tester's console summary → `tester_summaries` (no requests: same run, not
    re-counted). Every line is one of `LINES` or unparsed."""

    name = "tester_console"
    role = "client"
    priority = 26
    samples = (
        Sample(
            "corpus compute-loadtest client-stdout.log (logforensics loadtest)",
            file="lf_console.log",
        ),
        Sample("corpus kv-tiny client-stdout.log (the lab's client.py)", file="lab_console.log"),
    )

    def sniff(self, head: list[str]) -> bool:
        rx = re.compile(KNOWN_RE)
        hits = sum(bool(rx.search(line)) for line in head)
        return hits >= max(2, len(head) // 2) and any(
            re.search(LINES[k], line)
            for k in ("lf_run", "lf_step", "lab_start", "lab_step")
            for line in head
        )

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        lines = source.lines
        text = pl.col("text")
        frame = lines.with_columns(
            text.str.contains(KNOWN_RE).alias("known"),
            text.str.extract_groups(LINES["lf_run"]).alias("_run"),
            text.str.extract_groups(LINES["lf_step"]).alias("_lf"),
            text.str.extract_groups(LINES["lab_start"]).alias("_ls"),
            text.str.extract_groups(LINES["lab_step"]).alias("_lab"),
        ).unnest("_run", "_lf", "_ls", "_lab")
        result = ParseResult(lines=lines.height, formats=[self.name])
        result.noise = frame.filter(pl.col("known")).height
        result.set_unparsed(frame.filter(~pl.col("known") & (text.str.strip_chars() != "")))
        result.noise += frame.filter(~pl.col("known") & (text.str.strip_chars() == "")).height
        steps = (frame["steps"].drop_nulls().head(1).to_list() or [""])[0]
        levels = [int(s) for s in steps.split(",") if s]
        timeout = frame["timeout"].drop_nulls().head(1).to_list()
        for row in frame.filter(pl.col("step").is_not_null()).iter_rows(named=True):
            step, sent, failed = int(row["step"]), int(row["sent"]), int(row["failed"])
            result.tester_summaries.append(
                {
                    "tester": "logforensics loadtest",
                    "run": (frame["run"].drop_nulls().head(1).to_list() or [None])[0],
                    "step": step,
                    "concurrency": levels[step - 1] if step <= len(levels) else None,
                    "sent": sent,
                    "ok": sent - failed,
                    "failed": failed,
                    "duration_s": float(row["duration"]),
                    "timeout_s": float(timeout[0]) if timeout else None,
                    "line": row["line_no"],
                }
            )
        for row in frame.filter(pl.col("lab_step").is_not_null()).iter_rows(named=True):
            n, ok = int(row["n"]), int(row["ok"])
            result.tester_summaries.append(
                {
                    "tester": "ThreadPoolExecutor client (lab client.py)",
                    "step": int(row["lab_step"]),
                    "concurrency": int(row["lab_step"]),
                    "sent": n,
                    "ok": ok,
                    "failed": n - ok,
                    "latency_s": {
                        "min": float(row["min"]),
                        "p50": float(row["med"]),
                        "max": float(row["max"]),
                    },
                    "line": row["line_no"],
                }
            )
        result.parsed = len(result.tester_summaries)
        result.noise -= result.parsed
        result.notes.append(
            "a load tester's console: its own figures per step are kept beside the tool's "
            "counts; its requests are counted from the record file of the same run, not here"
        )
        return result


def within(opens: pl.Expr, closes: pl.Expr) -> pl.Expr:
    """Per line: inside a block that a line matching `opens` began and no line matching
    `closes` has ended yet (an opening line is inside; a closing one is not)."""
    mark = pl.when(opens).then(True).when(closes).then(False)
    return mark.forward_fill().fill_null(False)


def console_figures(
    result: ParseResult, frame: pl.DataFrame, known: pl.Expr, figure: pl.Expr
) -> None:
    """Account a console's lines: those `figure` marks gave the tester's figures (parsed), the
    rest of the `known` or blank ones are chatter (noise), any other is unparsed and shown."""
    understood = known | figure | (pl.col("text").str.strip_chars() == "")
    result.parsed = frame.filter(figure).height
    result.noise = frame.filter(understood).height - result.parsed
    result.set_unparsed(frame.filter(~understood))
