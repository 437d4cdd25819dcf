"""The findings stage: its families, and a finding that agrees with the decision it reports."""

from __future__ import annotations

import shutil

from logforensics import findings
from logforensics.analysis import analyze
from logforensics.findings.base import Kind
from tests.conftest import FIXTURES, report_json


def test_every_family_declares_its_kinds_beside_the_function_that_finds_them():
    seen: dict[str, str] = {}
    for family in findings.FINDINGS:
        assert callable(family.find), family.__name__
        assert family.KINDS, family.__name__
        for kind, declared in family.KINDS.items():
            assert isinstance(declared, Kind)
            assert kind not in seen, f"{kind} in {family.__name__} and {seen.get(kind)}"
            seen[kind] = family.__name__
            assert declared.severity in ("info", "warning"), kind
            assert declared.advice is None or declared.advice.endswith("."), kind
    # the families are imported and ordered by the tuple, each once
    assert len({f.__name__ for f in findings.FINDINGS}) == len(findings.FINDINGS)


def kinds(got: dict) -> dict[str, dict]:
    return {f["kind"]: f for f in got["findings"]}


def test_a_missing_log_is_found_exactly_when_the_reach_decision_doubts_never_reached():
    """One instance's log is absent: its successes are in no log, so a failure may have
    reached it; the finding says so, and no failure is called unreached."""
    got = report_json(analyze([FIXTURES / "seed-one-log-missing"]))
    found = kinds(got)
    assert got["totals"]["unreached"] == 0 and got["totals"]["unknown"] == 13
    unseen = got["totals"]["reached_unseen"]
    assert found["missing_instance_log"]["detail"].startswith(
        f"{unseen} successful request(s) appear in no instance's log"
    )
    assert "successes_unseen" not in found


def test_a_success_outside_the_logs_span_leaves_the_failures_inside_it_judged(tmp_path):
    """instance-2's log cut before its last answer: that success is in no log, but outside
    the span both logs cover, so it proves no log missing inside it. The reach decision still
    calls failures inside the span unreached, and the finding says the same, as info; before
    the findings read the reach decision, it claimed no failure could be proven unreached."""
    bundle = FIXTURES / "seed-two-instances"
    shutil.copytree(bundle / "client", tmp_path / "client")
    shutil.copy(bundle / "instance-1.log", tmp_path)
    lines = (bundle / "instance-2.log").read_text().splitlines(keepends=True)
    last_answer = max(i for i, line in enumerate(lines) if '"POST ' in line)
    (tmp_path / "instance-2.log").write_text("".join(lines[:last_answer]))
    got = report_json(analyze([tmp_path]))
    found = kinds(got)
    assert "missing_instance_log" not in found
    assert found["successes_unseen"]["severity"] == "info"
    assert found["successes_unseen"]["detail"].startswith(
        "1 successful request(s) appear in no instance's log"
    )
    assert got["totals"]["reached_unseen"] == 1
    assert got["totals"]["unreached"] > 0  # proven inside the span, as the finding says
