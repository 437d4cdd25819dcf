"""The findings stage: its families, and a finding that agrees with the decision it reports."""

from __future__ import annotations

import shutil
import types

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


def test_a_request_preempted_again_and_again_is_named_with_its_lines(tmp_path):
    """vLLM PR #42827's per-request warnings (and V0's) name the request: one preempted three
    times is named first with the lines that say so; one preempted once is not named."""
    from logforensics.findings import preemption
    from logforensics.ingest import ParseContext
    from logforensics.ingest.inputs import load

    lines = [
        "INFO 05-16 10:02:01 [loggers.py:127] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
        "Avg generation throughput: 80.0 tokens/s, Running: 8 reqs, Waiting: 3 reqs, GPU KV "
        "cache usage: 99.5%, Prefix cache hit rate: 0.0%",
        *(
            f"WARNING 05-16 10:02:{s:02d} [scheduler.py:846] Preempting request {rid}: "
            f"{n} computed tokens lost"
            for s, rid, n in (
                (11, "cmpl-7", 480),
                (12, "cmpl-9", 200),
                (14, "cmpl-7", 96),
                (19, "cmpl-7", 512),
            )  # fmt: skip
        ),
    ]
    log = tmp_path / "instance-1.log"
    log.write_text("\n".join(lines) + "\n")
    events = load([log], ParseContext(year=2026)).tables["engine_events"]
    (found,) = preemption.find(types.SimpleNamespace(events=events))
    assert found.kind == "preempted_repeatedly"
    assert found.detail == "1 request(s) were preempted 2 or more times: cmpl-7 3× on instance-1"
    assert [s.rsplit("/", 1)[-1] for s in found.sources] == [
        "instance-1.log:2",
        "instance-1.log:4",
        "instance-1.log:5",
    ]
