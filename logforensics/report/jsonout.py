"""The JSON report (README "JSON output"): the report's Summary written field by field, and
read back into the same records (`read_report`) for `compare`.

FORMAT_VERSION is bumped, with a line below, whenever the shape changes:
# 11: runs[].rate (the request rate the tester fixed for the step, requests/s);
#     verdict.qualifiers (sub-causes that change the fix: shed_at_front — failures that
#     never reached an instance while every instance was saturated are kv_cache's or gpu's,
#     no longer unexplained; prefill | decode on gpu); evidence role "qualifying"
#     (compute_phase); findings preempted_repeatedly, preemptions_not_kv; the ledger's
#     reach_witness front_answer (a front's own rejected-* answer: never reached) and
#     refused_connect (the client's own connect refused: never reached).
# 10: runs[].failures (where each step's failures died: proxy, before_instance, instance,
#     unknown; at_instance and the client's outcomes); instances[].peak_running,
#     peak_waiting, peak_kv_pct; runs[].busy_at_start.source as file:line (was a
#     process-local number); coverage sorted by instance; findings[].sources; inputs[].config
#     (logforensics loadtest's configuration); findings: missing_instance_log exactly when
#     the reach decision doubts "never reached", other unseen successes successes_unseen; a
#     Python traceback cited at the exception naming its kind (was its first line).
# 9:  retries: runs[].per_instance counts every instance an attempt reached, served_by,
#     retried, totals.retried; an ambiguous clock leaves disputed requests unattributed.
# 8:  clock.interval and clock.basis, the same on proxy.clock; clock.second a rival.
# (1-7: README.md's changelog.)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from logforensics.model import as_json, from_json
from logforensics.report.summary import Summary

if TYPE_CHECKING:
    from logforensics.report.data import ReportData

FORMAT_VERSION = 11
# versions whose reports read into this version's records: fields added since take their
# defaults (a version-9 step has no `failures`: compare says where failures died is unknown)
READABLE_VERSIONS = (9, 10, 11)


class ReportVersionError(ValueError):
    """A JSON report this version cannot read: not one of ours, or another format version."""


class NotAReport(ReportVersionError):
    """JSON, but not a report this tool wrote (a tester's result file, say)."""


def contract(summary: Summary) -> dict:
    """The JSON report's object."""
    return as_json(summary)


def render_json(report: ReportData) -> str:
    return json.dumps(contract(report.summary), indent=2, ensure_ascii=False, default=str) + "\n"


def read_report(path: Path) -> Summary:
    """A JSON report this tool wrote, as the records analyze builds; refused by name where
    its format version is not one this version reads."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReportVersionError(f"{path}: not a JSON report ({exc})") from exc
    version = data.get("format_version") if isinstance(data, dict) else None
    if not isinstance(version, int) or "verdict" not in data or "runs" not in data:
        raise NotAReport(f"{path}: not a logforensics JSON report (no format_version)")
    if version > FORMAT_VERSION:
        raise ReportVersionError(
            f"{path}: format_version {version} is newer than this logforensics reads "
            f"({FORMAT_VERSION}): upgrade logforensics, or analyse the run's files again"
        )
    if version not in READABLE_VERSIONS:
        raise ReportVersionError(
            f"{path}: format_version {version} is older than this logforensics reads "
            f"({', '.join(map(str, READABLE_VERSIONS))}): analyse the run's files again"
        )
    return from_json(Summary, data)
