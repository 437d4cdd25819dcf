"""`logforensics compare`: runs read back into the records analyze builds, steps matched,
differences judged against chance, a conclusion built from the evidence by rules."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from logforensics.cli import cli
from logforensics.compare import RENDERERS, Run, build, held, parse_gate, stats
from logforensics.compare.model import COMPARE_FORMAT_VERSION, RunRef
from logforensics.model import Capacity, Failures, OverallBalance
from logforensics.report.jsonout import FORMAT_VERSION, ReportVersionError, contract, read_report
from logforensics.report.summary import (
    ClockRecord,
    InputRecord,
    InstanceShare,
    Summary,
    Totals,
    VerdictRecord,
)
from tests.conftest import DATA, RECORDINGS, make_step

OLD_REPORT = DATA / "reports" / "pyproxy-seed.v9.json"  # written by 085d518 (format 9)


# ------------------------------------------------------------------ statistics


def test_fishers_exact_test_on_the_write_ups_thirteen():
    # 12/13 against 8/13: margins 20 ok of 26, 13 a side; P(k) = C(20,k)·C(6,13−k)/C(26,13):
    # the tables at most as likely as k = 12 (0.07267) are k = 7, 8, 12, 13: 0.16025 in all
    assert stats.fisher_exact(12, 13, 8, 13) == pytest.approx(0.16025, abs=5e-5)
    assert stats.fisher_exact(15, 20, 15, 20) == pytest.approx(1.0)
    assert stats.fisher_exact(20, 20, 5, 20) < 0.001
    assert stats.single_run_decision(0.16, -4 / 13) == "could be chance"
    assert stats.single_run_decision(0.0004, -0.75) == "lower"


def test_welchs_interval_with_runs_as_the_unit():
    # runs of 100: means 0.9 and 0.6, variances 0.01 each (above the binomial floor):
    # se = √(2·0.01/3) = 0.0816, 4 degrees (t 2.776)
    got = stats.welch_interval(
        [(90, 100), (80, 100), (100, 100)], [(50, 100), (60, 100), (70, 100)]
    )
    assert got.delta == pytest.approx(-0.3)
    assert (got.low, got.high) == (
        pytest.approx(-0.5267, abs=1e-3),
        pytest.approx(-0.0733, abs=1e-3),
    )
    assert stats.non_inferiority(got, 0.05) == "inferior"
    assert stats.non_inferiority(stats.Interval(0.0, -0.03, 0.03), 0.05) == "non-inferior"
    assert stats.non_inferiority(stats.Interval(0.0, -0.2, 0.2), 0.05) == "inconclusive"
    assert stats.welch_interval([(9, 10)], [(5, 10), (6, 10)]) is None


def test_identical_runs_still_carry_one_runs_binomial_noise():
    """Three 10/10 runs a side have no spread between them, yet 10 requests cannot show a rate
    is 1.0: the variance is floored at one run's at (30+2)/(30+4), so the interval is not a point."""
    got = stats.welch_interval([(10, 10)] * 3, [(10, 10)] * 3)
    p = 32 / 34
    half = 2.776 * (2 * p * (1 - p) / 10 / 3) ** 0.5  # 4 degrees of freedom
    assert got.delta == 0 and (got.low, got.high) == (pytest.approx(-half), pytest.approx(half))
    assert stats.non_inferiority(got, 0.05) == "inconclusive"


# ------------------------------------------------------------------ comparisons built by hand


def summary(
    bottleneck: str, steps, instances: dict[str, dict] | None = None, config: dict | None = None
) -> Summary:
    """A report's summary built by hand: the verdict, the measured steps, the instances, and
    the client file's recorded configuration."""
    sent = sum(s.sent for s in steps)
    ok = sum(s.succeeded for s in steps)
    shares = [
        InstanceShare(
            name, d.get("requests", 0), None, d.get("running"), d.get("waiting"), d.get("kv")
        )  # fmt: skip
        for name, d in (instances or {}).items()
    ]
    return Summary(
        format_version=FORMAT_VERSION,
        generated_at=dt.datetime(2026, 12, 5, tzinfo=dt.timezone.utc),
        verdict=VerdictRecord(
            bottleneck, 0.9, f"{bottleneck}.", None, sent - ok, 1.0, [], [], 0, 0, [], []
        ),  # fmt: skip
        totals=Totals(sent, ok, sent - ok, 0, 0, 0, 0, 0),
        instances=shares,
        runs=list(steps),
        capacity=Capacity(None, None, None),
        balance=OverallBalance({}, {}, None, None, "n/a"),
        findings=[],
        inputs=[client_input(config)],
        tester_figures=[],
        errors=[],
        clock=ClockRecord(0.0, "assumed", 0, 0, None, None, None, 0, False, None, None, None, {}),
        coverage={},
        proxy=None,
        unmatched_server_records=0,
    )


def client_input(config: dict | None) -> InputRecord:
    return InputRecord(
        "client.jsonl", "loadtest_jsonl", [], "client", None, 9, 9, 0, 0,
        {"client_requests": 9}, None, [], [], [], None, config,
    )  # fmt: skip


def run(label: str, s: Summary) -> Run:
    v = s.verdict
    return Run(RunRef(label, label, "report", s.format_version, v.bottleneck, v.confidence,
                      None, v.summary), s)  # fmt: skip


def died_before(n: int) -> Failures:
    return Failures(before_instance=n, outcomes={"http_503": n})


def test_the_second_instance_did_not_raise_capacity():
    """The write-up's comparison: 13 and 20 concurrent, one instance against two, the
    failures dying before any instance in both."""
    one = summary(
        "front_proxy",
        [make_step(13, 13, 12, failures=died_before(1), per_instance={"instance-1": 12}),
         make_step(20, 20, 15, failures=died_before(5), per_instance={"instance-1": 15})],
        {"instance-1": {"requests": 27, "running": 2, "waiting": 0, "kv": 2.4}},
    )  # fmt: skip
    two = summary(
        "front_proxy",
        [make_step(13, 13, 8, failures=died_before(5),
                   per_instance={"instance-1": 4, "instance-2": 4}),
         make_step(20, 20, 15, failures=died_before(5),
                   per_instance={"instance-1": 7, "instance-2": 8})],
        {"instance-1": {"requests": 11}, "instance-2": {"requests": 12}},
    )  # fmt: skip
    c = build([run("one", one)], [run("two", two)], change="the second instance")
    assert c.bottleneck_change == "unchanged" and c.steps_by == "concurrency"
    assert c.conclusion[0] == (
        "The second instance did not raise capacity, and the bottleneck is still the front proxy: "
        "at 20 concurrent both runs served 15 of 20, and the 5 failures died before any "
        "instance in both."
    )
    thirteen = c.steps[0]
    assert (thirteen.baseline.succeeded, thirteen.candidate.succeeded) == (12, 8)
    assert thirteen.success.decision == "could be chance"
    assert thirteen.success.p_value == pytest.approx(0.16025, abs=5e-5)
    assert c.conclusion[1] == (
        "instance-2, new in the candidate, took 12 requests, 52% of those the candidate's "
        "instances served."
    )
    assert not held(["regressed", "bottleneck_changed"], c)
    assert held(["success_drop>20%"], c) == ["success_drop>20%"]  # 12/13 → 8/13: −30.8 points


def test_a_raised_proxy_limit_moved_the_bottleneck():
    before = summary(
        "front_proxy",
        [make_step(20, 20, 15, failures=Failures(proxy=5, outcomes={"http_503": 5}))],
        {"instance-1": {"requests": 8}, "instance-2": {"requests": 7}},
    )
    after = summary(
        "kv_cache",
        [make_step(20, 20, 18, failures=Failures(instance=2, at_instance={"instance-1": 2,
                   "instance-2": 0}, outcomes={"timeout": 2}))],
        {"instance-1": {"requests": 10, "kv": 100.0}, "instance-2": {"requests": 10, "kv": 71.0}},
    )  # fmt: skip
    c = build([run("before", before)], [run("after", after)], change="the raised proxy limit")
    assert c.bottleneck_change == "moved"
    assert c.conclusion[0].startswith(
        "The raised proxy limit moved the bottleneck from the front proxy to the KV cache: at 20 "
        "concurrent the baseline served 15 of 20 and the candidate 18 of 20 (a difference chance "
        "alone can give"
    )
    assert c.conclusion[0].endswith(
        "and the failures went from 5 refused at the proxy to 2 client timeouts at instance-1 "
        "(KV cache peak 100 %)."
    )
    assert held(["bottleneck_changed"], c) and not held(["regressed"], c)


def test_runs_of_a_side_that_disagree_are_named_run_by_run_never_one_picked():
    full = summary("kv_cache", [make_step(12, 12, 7)])
    clean = summary("none", [make_step(12, 12, 12)])
    c = build([run("a1", full), run("a2", full)], [run("b1", clean), run("b2", full)])
    assert (c.baseline.bottleneck, c.candidate.bottleneck) == ("kv_cache", "mixed")
    assert c.bottleneck_change == "mixed"
    assert c.conclusion[0].startswith(
        "The runs' verdicts differ (baseline a1 the KV cache, a2 the KV cache; candidate b1 no "
        "bottleneck, b2 the KV cache): no one change of bottleneck to name: at 12 concurrent"
    )
    assert held(["bottleneck_changed"], c) == ["bottleneck_changed"]


def test_a_new_instance_that_took_none_of_the_load_is_named():
    one = summary("none", [make_step(8, 8)], {"instance-1": {"requests": 8}})
    two = summary("none", [make_step(8, 8)], {"instance-1": {"requests": 8}, "standby": {}})
    c = build([run("a", one)], [run("b", two)])
    assert c.conclusion[0].startswith("Neither run found a bottleneck: at 8 concurrent both runs")
    assert any("standby, new in the candidate, took none of the load" in s for s in c.conclusion)


def test_repetitions_make_the_run_the_unit_and_name_a_fragile_decision():
    # three runs a side of 20 requests: 14 each before; 20, 20 and then 8 after
    rates_a, rates_b = [(14, 20)] * 3, [(20, 20), (20, 20), (8, 20)]
    a = [run(f"a{k}", summary("none", [make_step(20, n, ok)])) for k, (ok, n) in enumerate(rates_a)]
    b = [run(f"b{k}", summary("none", [make_step(20, n, ok)])) for k, (ok, n) in enumerate(rates_b)]
    c = build(a, b, margin=0.05)
    t = c.steps[0].success
    assert t.test == stats.WELCH and t.p_value is None
    assert t.baseline_rate == pytest.approx(0.7) and t.candidate_rate == pytest.approx(0.8)
    assert t.delta == pytest.approx(0.1)
    low, high = t.interval
    assert low < -0.05 < 0 < high  # b2's 8/20 widens the interval past the margin
    assert t.decision == "inconclusive"
    # without b2: 1.0 and 1.0 against 0.7, noise floored at one run's binomial spread
    assert t.fragile == ["candidate b2"]
    again = stats.welch_interval(rates_a, rates_b[:2])
    assert stats.non_inferiority(again, 0.05) == "non-inferior"
    assert "dropping candidate b2 would change that" in c.conclusion[0]


def test_steps_with_a_repeated_or_unknown_concurrency_are_matched_by_order():
    a = summary("none", [make_step(8, 8, index=1), make_step(8, 8, index=2)])
    c = build([run("a", a)], [run("b", a)])
    assert c.steps_by == "order" and [p.key for p in c.steps] == [1, 2]
    # a rate-driven tester's steps name no concurrency: by order, never all under one key
    unnamed = [
        dataclasses.replace(make_step(n, n, ok), concurrency=None) for n, ok in ((4, 4), (9, 5))
    ]
    rated = summary("none", unnamed)
    c = build([run("a", rated)], [run("b", rated)])
    assert c.steps_by == "order" and [(p.key, p.baseline.sent) for p in c.steps] == [(1, 4), (2, 9)]
    assert "in step 2 " in c.conclusion[0]


def test_rate_driven_steps_are_matched_by_the_rate_the_tester_fixed():
    """A rate-driven step's concurrency is only what it sent (19 here, 20 there): matched by
    it, no step would pair. The rate the tester fixed pairs them, and the sentences say it."""
    base = summary(
        "none", [make_step(n, n, ok, rate=r) for n, ok, r in ((10, 10, 2.0), (25, 25, 5.0))]
    )
    cand = summary(
        "none", [make_step(n, n, ok, rate=r) for n, ok, r in ((10, 10, 2.0), (24, 12, 5.0))]
    )
    c = build([run("a", base)], [run("b", cand)])
    assert c.steps_by == "rate" and c.key_name == "requests/s"
    assert [(p.key, p.baseline.sent, p.candidate.sent) for p in c.steps] == [
        (2.0, 10, 10),
        (5.0, 25, 24),
    ]
    assert any("at 5 requests/s" in line for line in c.conclusion)
    # one rate for every step, the concurrency varied (a sweep of --max-concurrency): by that
    fixed = summary("none", [make_step(n, n, rate=5.0) for n in (4, 8)])
    assert build([run("a", fixed)], [run("b", fixed)]).steps_by == "concurrency"


def test_conditions_that_differ_are_flagged_first():
    a = summary("none", [make_step(4, 4, timeout_s=60.0), make_step(8, 8, timeout_s=60.0)])
    b = summary("none", [make_step(4, 4, timeout_s=60.0), make_step(16, 16, timeout_s=30.0)])
    c = build([run("a", a)], [run("b", b)])
    whats = [d.what for d in c.conditions]
    assert whats == ["step ladder (concurrency)", "client timeout"]
    assert c.conclusion[0].startswith("The runs' conditions differ (step ladder (concurrency): ")
    # neither run's tester wrote its configuration: those conditions were not compared
    assert c.not_checked == ["model", "max tokens", "fixed output length (ignore_eos)",
                             "temperature", "streaming", "prompts"]  # fmt: skip


def test_a_recorded_configuration_is_compared_and_a_condition_one_run_lacks_is_not():
    config = {"logforensics_loadtest": "0.1.0", "model": "tiny-llama", "max_tokens": 300,
              "ignore_eos": True, "temperature": 0.0, "stream": False, "prompts": 1,
              "prompts_sha256": "ab" * 32}  # fmt: skip
    steps = [make_step(4, 4, timeout_s=60.0)]
    base = summary("none", steps, config=config)
    same = build([run("a", base)], [run("b", summary("none", steps, config=config))])
    assert same.conditions == [] and same.not_checked == []
    shorter = summary("none", steps, config={**config, "max_tokens": 64, "ignore_eos": False})
    c = build([run("a", base)], [run("b", shorter)])
    assert [(d.what, d.baseline, d.candidate) for d in c.conditions] == [
        ("max tokens", "300", "64"),
        ("fixed output length (ignore_eos)", "yes", "no"),
    ]
    assert c.conclusion[0] == (
        "The runs' conditions differ (max tokens: 300 against 64; fixed output length "
        "(ignore_eos): yes against no): their numbers may not compare."
    )
    unknown = build([run("a", base)], [run("b", summary("none", steps))])
    assert unknown.conditions == [] and "max tokens" in unknown.not_checked


def test_every_renderer_writes_the_comparison_and_escapes_what_the_user_typed():
    a = summary("none", [make_step(4, 4)])
    c = build([run("a", a)], [run("b", a)], change="<script>alert(1)</script>")
    out = {kind: render(c) for kind, render in RENDERERS}
    assert "<script>alert" not in out["html"] and "&lt;script&gt;" in out["html"]
    assert json.loads(out["json"])["conclusion"] == c.conclusion
    # Markdown shows the tag as text: `\<` cannot open one
    assert out["md"].startswith("### Did \\<script>alert(1)\\</script> help?")
    with pytest.raises(ValueError, match="unknown compare condition"):
        parse_gate("p99>3")


# ------------------------------------------------------------------ reports read back


def test_a_report_of_the_previous_format_reads_into_the_same_records(tmp_path):
    old = read_report(OLD_REPORT)
    assert old.format_version == 9 and old.verdict.bottleneck == "front_proxy"
    assert [(s.concurrency, s.succeeded, s.failed) for s in old.measured] == [
        (5, 5, 0), (9, 6, 3), (13, 8, 5), (20, 8, 12)
    ]  # fmt: skip
    assert old.measured[0].failures == Failures()  # a field version 9 lacks: its default
    c = build([run("old", old)], [run("same", old)])
    assert "not in a report of format 9" in c.conclusion[0]


def test_a_future_or_foreign_report_is_refused_by_name(tmp_path):
    data = json.loads(OLD_REPORT.read_text())
    future = tmp_path / "future.json"
    future.write_text(json.dumps({**data, "format_version": FORMAT_VERSION + 1}))
    with pytest.raises(
        ReportVersionError, match=rf"future\.json: format_version {FORMAT_VERSION + 1} is newer"
    ):
        read_report(future)
    ancient = tmp_path / "ancient.json"
    ancient.write_text(json.dumps({**data, "format_version": 7}))
    with pytest.raises(ReportVersionError, match="ancient.json: format_version 7 is older"):
        read_report(ancient)
    other = tmp_path / "other.json"
    other.write_text('{"results": []}')
    with pytest.raises(ReportVersionError, match="other.json: not a logforensics JSON report"):
        read_report(other)


def test_a_report_written_now_reads_back_equal(tmp_path):
    result = CliRunner().invoke(
        cli, ["analyze", str(RECORDINGS / "pyproxy-seed"), "--json", str(tmp_path / "r.json")]
    )
    assert result.exit_code == 0, result.output
    back = read_report(tmp_path / "r.json")
    assert back.format_version == FORMAT_VERSION
    step = next(s for s in back.measured if s.concurrency == 20)
    assert step.failures.before_instance == 12 and step.failures.outcomes == {"http_503": 12}
    # written again from the records read back: the same JSON
    assert contract(back) == json.loads((tmp_path / "r.json").read_text())


# ------------------------------------------------------------------ the command


def test_compare_on_the_command_line_mixes_a_folder_and_an_old_report(tmp_path):
    out = tmp_path / "c"
    result = CliRunner().invoke(
        cli,
        ["compare", str(OLD_REPORT), str(RECORDINGS / "pyproxy-overlap"), "-o", str(out / "c.html"),
         "--json", str(out / "c.json"), "--md", str(out / "c.md"),
         "--fail-on", "bottleneck_changed"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output  # both front_proxy: the gate does not hold
    got = json.loads((out / "c.json").read_text())
    assert [r["read_as"] for r in (got["baseline"]["runs"] + got["candidate"]["runs"])] == [
        "report",
        "analysed",
    ]
    assert got["bottleneck_change"] == "unchanged"
    assert (out / "c.html").read_text().startswith("<!doctype html>")
    twenty = next(p for p in got["steps"] if p["key"] == 20)
    assert (twenty["baseline"]["succeeded"], twenty["candidate"]["succeeded"]) == (8, 2)


def test_compare_names_every_unreadable_run_and_exits_2(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    future = tmp_path / "future.json"
    future.write_text(json.dumps({**json.loads(OLD_REPORT.read_text()), "format_version": 99}))
    result = CliRunner().invoke(cli, ["compare", str(bad), str(future)])
    assert result.exit_code == 2
    assert "bad.json: not a JSON report" in result.output
    assert "future.json: format_version 99 is newer" in result.output


def test_a_gate_that_holds_exits_3(tmp_path):
    result = CliRunner().invoke(
        cli, ["compare", str(OLD_REPORT), str(RECORDINGS / "field-instance-skew"),
              "--fail-on", "bottleneck_changed"],
    )  # fmt: skip
    assert result.exit_code == 3, result.output
    assert "fail-on: bottleneck_changed" in result.output


# ------------------------------------------------------------------ the recorded pairs


def pair_truth(pair: str) -> tuple[dict, dict[str, dict[int, dict]]]:
    """A recorded pair's COMPARE.json, and each side's step counts summed over its runs'
    TRUTH.json (counted from the raw files by the lab's scripts, never by this tool)."""
    folder = RECORDINGS / pair
    truth = json.loads((folder / "COMPARE.json").read_text())
    sums: dict[str, dict[int, dict]] = {}
    for side in ("baseline", "candidate"):
        steps = sums.setdefault(side, {})
        for name in truth[side]:
            for s in json.loads((folder / name / "TRUTH.json").read_text())["steps"]:
                into = steps.setdefault(
                    s["concurrency"], dict.fromkeys(("sent", "ok", "failed", "unreached"), 0)
                )
                for key in into:
                    into[key] += s[key]
    return truth, sums


def compare_pair(pair: str, out: Path, change: str) -> dict:
    """`logforensics compare` on a recorded pair's run folders, every output written."""
    truth, _ = pair_truth(pair)
    args = ["compare", "--change", change, "-o", str(out / "c.html"), "--json",
            str(out / "c.json"), "--md", str(out / "c.md")]  # fmt: skip
    for side in ("baseline", "candidate"):
        for name in truth[side]:
            args += [f"--{side}", str(RECORDINGS / pair / name)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    return json.loads((out / "c.json").read_text())


def assert_steps_match_the_truth(got: dict, sums: dict) -> None:
    for side in ("baseline", "candidate"):
        counted = {
            p["key"]: {"sent": p[side]["sent"], "ok": p[side]["succeeded"],
                       "failed": p[side]["failed"], "unreached": p[side]["unreached"]}
            for p in got["steps"]
        }  # fmt: skip
        assert counted == sums[side], side


def test_the_write_ups_comparison_recorded_one_instance_against_two(tmp_path):
    truth, sums = pair_truth("compare-seed")
    got = compare_pair("compare-seed", tmp_path, "the second instance")
    assert got["format_version"] == COMPARE_FORMAT_VERSION and got["steps_by"] == truth["steps_by"]
    assert (got["baseline"]["bottleneck"], got["candidate"]["bottleneck"]) == ("front_proxy",) * 2
    assert got["bottleneck_change"] == truth["bottleneck"]["change"] == "unchanged"
    assert_steps_match_the_truth(got, sums)
    twenty = sums["baseline"][20]["ok"], sums["candidate"][20]["ok"]
    assert got["conclusion"][0] == (
        "The second instance did not measurably raise capacity, and the bottleneck is still the "
        f"front proxy: at 20 concurrent the baseline served {twenty[0]} of 20 and the candidate "
        f"{twenty[1]} of 20 (a difference chance alone can give: Fisher's exact test, two-sided, "
        f"p = {stats.fisher_exact(twenty[0], 20, twenty[1], 20):.2f}), and the failures died "
        f"before any instance in both ({20 - twenty[0]}, then {20 - twenty[1]})."
    )
    # the new instance is named with its share: the seed's active-standby question answered
    row = next(r for r in got["instances"] if r["name"] == "instance-2")
    assert row["baseline"] is None and truth["instances_only_in"] == {"candidate": ["instance-2"]}
    assert (row["candidate"]["requests"], row["candidate"]["share"]) == (15, 0.5)
    assert got["conclusion"][1].startswith("instance-2, new in the candidate, took 15 requests")
    md = (tmp_path / "c.md").read_text()
    html = (tmp_path / "c.html").read_text()
    assert got["conclusion"][0] in md
    assert "| 20 | 6 / 20 | 14 | 14 | 14 never reached an instance | 8 / 20 | 12 | 12 |" in md
    assert "the candidate 8 of 20 (a difference chance alone can give: Fisher&#39;s exact" in html


def test_a_raised_proxy_limit_recorded_moves_the_bottleneck_into_the_engines(tmp_path):
    truth, sums = pair_truth("compare-limit")
    got = compare_pair("compare-limit", tmp_path, "the raised nginx limit")
    assert got["bottleneck_change"] == truth["bottleneck"]["change"] == "moved"
    assert (got["baseline"]["bottleneck"], got["candidate"]["bottleneck"]) == (
        truth["bottleneck"]["baseline"],
        truth["bottleneck"]["candidate"],
    )
    assert_steps_match_the_truth(got, sums)
    sixteen = next(p for p in got["steps"] if p["key"] == 16)
    assert sixteen["baseline"]["failures"]["proxy"] == sums["baseline"][16]["unreached"] == 12
    assert sixteen["candidate"]["failures"]["at_instance"] == {"instance-1": 3, "instance-2": 4}
    assert got["conclusion"][0].startswith(
        "The raised nginx limit moved the bottleneck from the front proxy to the KV cache: at 16 "
        "concurrent the baseline served 4 of 16 and the candidate 9 of 16"
    )
    assert got["conclusion"][0].endswith(
        "and the failures went from 12 refused at the proxy to 3 client timeouts at instance-1 "
        "(KV cache peak 100 %) and 4 at instance-2 (KV cache peak 100 %)."
    )
    assert got["conclusion"][0] in (tmp_path / "c.md").read_text()


def test_three_runs_a_side_recorded_make_the_run_the_unit(tmp_path):
    truth, sums = pair_truth("compare-reps")
    got = compare_pair("compare-reps", tmp_path, "the doubled KV cache")
    assert_steps_match_the_truth(got, sums)
    assert got["bottleneck_change"] == truth["bottleneck"]["change"]
    (step,) = got["steps"]
    t = step["success"]
    rates = {side: [] for side in ("baseline", "candidate")}
    for side in rates:
        for name in truth[side]:
            (s,) = json.loads((RECORDINGS / "compare-reps" / name / "TRUTH.json").read_text())[
                "steps"
            ]
            rates[side].append((s["ok"], s["sent"]))
    want = stats.welch_interval(rates["baseline"], rates["candidate"])
    assert t["test"] == stats.WELCH and t["p_value"] is None
    assert t["interval"] == [pytest.approx(want.low), pytest.approx(want.high)]
    assert t["delta"] == pytest.approx(34 / 36 - 24 / 36)  # 12 requests in every run
    assert t["decision"] == stats.non_inferiority(want, 0.05) == "non-inferior"
    assert want.low < 0 < want.high  # with three runs a side the gain is not significant
    assert len(t["fragile"]) == 6  # three runs: dropping any one leaves 1 degree of freedom
    assert "dropping any one run would change that" in got["conclusion"][0]
    assert got["conclusion"][0].startswith(
        "The doubled KV cache raised the success rate on average, not beyond what chance gives "
        "with 3 and 3 runs, and the bottleneck is still the KV cache: at 12 concurrent the "
        "baseline served 24 of 36 and the candidate 34 of 36 (the candidate's success rate "
        "+27.8 points, 95 % interval -4.1 to +59.6: non-inferior at a 5-point margin; dropping "
        "any one run would change that)"
    )
    md = (tmp_path / "c.md").read_text()
    assert "| non-inferior (-4 to +60 points); fragile: any one run |" in md


def test_a_manifest_names_the_runs_and_the_change(tmp_path):
    """The recorded pairs' COMPARE.json is a manifest: its runs relative to it, its change."""
    manifest = RECORDINGS / "compare-limit" / "COMPARE.json"
    result = CliRunner().invoke(
        cli, ["compare", "--manifest", str(manifest), "--json", str(tmp_path / "c.json")]
    )
    assert result.exit_code == 0, result.output
    got = json.loads((tmp_path / "c.json").read_text())
    truth = json.loads(manifest.read_text())
    assert [r["label"] for r in got["baseline"]["runs"]] == truth["baseline"]
    assert got["change"] == truth["change"]
    assert got["conclusion"][0].startswith("The nginx per-upstream connection limit raised")
    bad = tmp_path / "bad.yaml"
    bad.write_text("baseline: [nowhere]\ncandidate: after\n")
    result = CliRunner().invoke(cli, ["compare", "--manifest", str(bad)])
    assert result.exit_code == 2
    assert (
        f"{bad}: `baseline` names runs that do not exist: {tmp_path / 'nowhere'}" in result.output
    )


def test_two_loadtest_runs_recorded_differ_only_in_max_tokens_and_say_so_first(tmp_path):
    truth, sums = pair_truth("compare-conditions")
    got = compare_pair("compare-conditions", tmp_path, "the longer answers")
    assert_steps_match_the_truth(got, sums)
    assert [d["what"] for d in got["conditions"]] == truth["conditions"] == ["max tokens"]
    (flagged,) = got["conditions"]
    assert (flagged["baseline"], flagged["candidate"]) == ("64", "256")
    assert got["not_checked"] == []  # loadtest recorded every condition compare reads
    assert got["conclusion"][0] == (
        "The runs' conditions differ (max tokens: 64 against 256): their numbers may not compare."
    )
    assert got["bottleneck_change"] == truth["bottleneck"]["change"] == "none"


def test_a_testers_json_result_file_is_a_run_of_evidence_not_a_refused_report(tmp_path):
    """llm-load-test writes its results as .json: analysed as evidence, never taken for a
    report of an unknown format; a damaged report is still refused by name."""
    from logforensics.ingest.base import SAMPLES_DIR

    result_file = SAMPLES_DIR / "llm_load_test_vllm_output-004.json"
    result = CliRunner().invoke(
        cli, ["compare", str(result_file), str(result_file), "--json", str(tmp_path / "c.json")]
    )
    assert result.exit_code == 0, result.output
    got = json.loads((tmp_path / "c.json").read_text())
    assert [r["read_as"] for r in got["baseline"]["runs"] + got["candidate"]["runs"]] == [
        "analysed",
        "analysed",
    ]


def test_a_run_whose_own_inputs_are_faulty_is_compared_but_exits_2_naming_them(tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(RECORDINGS / "compare-seed" / "one-instance", run_dir)
    stray = tmp_path / "notes.bin"
    stray.write_bytes(b"\x00\x01 not a log")
    result = CliRunner().invoke(
        cli, ["compare", "--baseline", str(run_dir), "--baseline", str(stray),
              "--candidate", str(run_dir), "--json", str(tmp_path / "c.json")],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert f"in a run's inputs: {stray}:" in result.output
    assert (tmp_path / "c.json").is_file()  # the comparison is still written
