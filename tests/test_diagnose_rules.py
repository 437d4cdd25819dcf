"""The rules' declarations: the README is rendered from them, the CLI exposes every
threshold, and what users read names no internal words."""

import dataclasses
import re

from logforensics.analysis import analyze
from logforensics.cli import analyze_command
from logforensics.diagnose import RULES, Thresholds, shared
from logforensics.diagnose.evidence import DISCRIMINATING, QUALIFYING, SHARED
from logforensics.diagnose.table import render
from logforensics.diagnose.thresholds import option_name
from logforensics.model import Bottleneck
from logforensics.report.jsonout import FORMAT_VERSION as JSON_FORMAT_VERSION
from tests.conftest import FIXTURES, ROOT, report_json

INTERNAL_WORDS = re.compile(r"\bseeds?\b|\bfixtures?\b|\bscenario\b|\bclaims?\b", re.IGNORECASE)


def test_the_readme_verdict_tables_are_the_rendered_ones():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert render() in readme, "stale: run python -m logforensics.diagnose.table README.md"


def test_the_readme_documents_the_json_format_version_the_tool_writes():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"\nformat_version: {JSON_FORMAT_VERSION}\n" in readme
    assert f"\n* {JSON_FORMAT_VERSION} — " in readme  # its changelog line


def test_every_cause_has_a_rule_and_every_signal_a_unique_name():
    assert {r.bottleneck for r in RULES} == set(Bottleneck) - {Bottleneck.INCONCLUSIVE}
    names = [s.name for r in RULES for s in r.signals] + [s.name for s in shared.SIGNALS]
    assert len(names) == len(set(names))
    # a rule's signals decide its cause, or (weightless) one of its qualifiers
    assert all(
        s.role == DISCRIMINATING or (s.role == QUALIFYING and s.weight == 0)
        for r in RULES
        for s in r.signals
    )
    assert all(s.role == SHARED for s in shared.SIGNALS)
    # every qualifier has a distinct name within its rule, its decision and its own fix
    for r in RULES:
        assert len({q.name for q in r.qualifiers}) == len(r.qualifiers)
        assert all(q.when and q.recommendations and "{claimed}" in q.summary for q in r.qualifiers)


def test_every_threshold_is_an_analyze_option_with_its_default():
    params = {p.name: p for p in analyze_command.params}
    for f in dataclasses.fields(Thresholds):
        assert option_name(f.name) in params[f.name].opts
        assert params[f.name].default == f.default
        assert f.metadata["help"]


def test_every_signal_names_only_thresholds_that_exist():
    fields = {f.name for f in dataclasses.fields(Thresholds)}
    for signal in [s for r in RULES for s in r.signals] + list(shared.SIGNALS):
        assert set(signal.options()) <= fields, signal.name
        signal.threshold(Thresholds())  # renders


def test_user_facing_text_names_no_internal_words():
    for rule in RULES:
        texts = [rule.headline, rule.summary, *rule.recommendations]
        texts += [t for s in rule.signals for t in (s.title, s.test)]
        for text in texts:
            assert not INTERNAL_WORDS.search(text), text


def test_the_json_contract_carries_the_verdicts_new_fields():
    got = report_json(analyze([FIXTURES / "seed-two-instances"]))
    assert got["format_version"] == JSON_FORMAT_VERSION >= 4  # 4 brought these fields
    verdict = got["verdict"]
    assert {"secondary", "failures", "share", "subject", "contested", "unexplained"} <= set(verdict)
    assert all({"title", "role"} <= set(e) for e in verdict["evidence"])
    for text in [verdict["summary"], *verdict["recommendations"]]:
        assert not INTERNAL_WORDS.search(text), text


def test_a_verdicts_qualifiers_read_in_its_rules_words():
    from logforensics.diagnose import qualified_words

    assert qualified_words("gpu", ["shed_at_front", "decode"]) == (
        " (shed at the front, decode-bound)"
    )
    assert qualified_words("kv_cache", ["shed_at_front"]) == " (shed at the front)"
    assert qualified_words("front_proxy", []) == ""
