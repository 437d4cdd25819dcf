"""`--fail-on` conditions: parsed strictly, evaluated on the JSON contract."""

import pytest

from logforensics.analysis import analyze
from logforensics.gates import Condition, evaluate, parse_condition, parse_conditions
from tests.conftest import report_json


@pytest.fixture(scope="module")
def seed_dict():
    from tests.conftest import FIXTURES

    return report_json(analyze([FIXTURES / "seed-two-instances"]))


def _dict(sent=10, succeeded=10, unreached=0, p95=(1.0, 2.0), bottleneck="none", confidence=0.9):
    return {
        "verdict": {"bottleneck": bottleneck, "confidence": confidence},
        "totals": {
            "sent": sent,
            "succeeded": succeeded,
            "failed": sent - succeeded,
            "unreached": unreached,
            "unknown": 0,
        },
        "runs": [
            {"index": 0, "warmup": True, "latency_s": {"p50": 99.0, "p95": 99.0, "p99": 99.0}},
            *[
                {
                    "index": i + 1,
                    "warmup": False,
                    "latency_s": {"p50": p / 2 if p else None, "p95": p, "p99": p},
                    "contaminated": False,
                    "balance": {"verdict": "even"},
                }
                for i, p in enumerate(p95)
            ],
        ],
        "errors": [],
        "unmatched_server_records": 0,
    }


@pytest.mark.parametrize(
    ("text", "metric", "op", "value"),
    [
        ("unreached>0", "unreached", ">", 0.0),
        ("failed>=1", "failed", ">=", 1.0),
        ("success<0.99", "success", "<", 0.99),
        ("success < 99%", "success", "<", 0.99),
        ("p95>5s", "p95", ">", 5.0),
        ("p95>5", "p95", ">", 5.0),
        ("p95>500ms", "p95", ">", 0.5),
        ("p99 >= 2m", "p99", ">=", 120.0),
        ("bottleneck!=none", "bottleneck", "!=", "none"),
        ("bottleneck==front_proxy", "bottleneck", "==", "front_proxy"),
        ("bottleneck=KV_CACHE", "bottleneck", "==", "kv_cache"),
        ("confidence>=0.5", "confidence", ">=", 0.5),
        ("  ok <= 3 ", "succeeded", "<=", 3.0),
    ],
)
def test_parse(text, metric, op, value):
    c = parse_condition(text)
    assert (c.metric, c.op, c.value) == (metric, op, value)
    assert c.text == text.strip()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty condition"),
        ("unreached", "expected METRIC OP VALUE"),
        ("unreachd>0", "unknown metric 'unreachd' (did you mean unreached?); known: sent,"),
        ("p95>fast", "p95 takes a duration such as 5s, 500ms or 2m"),
        ("p95>5h", "p95 takes a duration"),
        ("unreached>0s", "unreached is a count, not a duration: drop the unit"),
        ("failed>=many", "'many' is not a number"),
        ("success<1.5", "success is a fraction between 0 and 1"),
        ("failed>5%", "failed is a count, not a percentage"),
        ("bottleneck>gpu", "bottleneck can only be compared with == or !="),
        (
            "bottleneck==disk",
            "bottleneck is one of front_proxy, kv_cache, gpu, instance_failure, none",
        ),
        ("unreached>>0", "unknown operator"),
        ("unreached=>0", "unknown operator"),
        ("unreached>", "missing the value"),
    ],
)
def test_malformed_conditions_say_what_is_wrong(text, message):
    with pytest.raises(ValueError) as err:
        parse_condition(text)
    assert message in str(err.value)


def test_messages_fit_click_bad_parameter():
    import click

    with pytest.raises(ValueError) as err:
        parse_condition("p96>5s")
    bad = click.BadParameter(str(err.value), param_hint="--fail-on")
    assert "Invalid value for --fail-on: 'p96>5s': unknown metric" in bad.format_message()


def test_evaluate_on_the_seed_incident(seed_dict):
    conditions = parse_conditions(
        [
            "unreached>0",
            "failed>=1",
            "success<0.99",
            "p95>5s",
            "p95>3500ms",
            "bottleneck!=none",
            "bottleneck==front_proxy",
            "bottleneck==gpu",
            "confidence>=0.5",
            "confidence>=95%",
        ]
    )
    held = evaluate(conditions, seed_dict)
    assert [h.split(" ", 1)[0] for h in held] == [
        "unreached>0",
        "failed>=1",
        "success<0.99",
        "p95>3500ms",
        "bottleneck!=none",
        "bottleneck==front_proxy",
        "confidence>=0.5",
    ]
    assert held[0] == "unreached>0 (unreached = 13: failures that never reached an instance)"
    assert held[2].startswith("success<0.99 (success = 0.6977:")
    assert held[3].startswith("p95>3500ms (p95 = 3.766 s:")  # the worst step's P95, in seconds


def test_evaluate_accepts_strings_and_nothing_holds_on_a_clean_run():
    clean = _dict()
    assert evaluate(["unreached>0", "failed>=1", "success<0.99", "p95>5s"], clean) == []
    assert evaluate(["bottleneck==none", "p95>=2s"], clean) == [
        "bottleneck==none (bottleneck = none: the verdict: front_proxy, kv_cache, gpu, "
        "instance_failure, none, inconclusive)",
        "p95>=2s (p95 = 2.000 s: worst step P95 latency of successes)",
    ]


def test_p95_is_the_worst_measured_step_warmup_excluded():
    d = _dict(p95=(1.0, 4.5, 2.0))
    assert parse_condition("p95>4s").measure(d) == 4.5
    assert evaluate(["p95>4.4s"], d) and not evaluate(["p95>4.6s"], d)


def test_missing_values_do_not_hold():
    everything_failed = _dict(sent=5, succeeded=0, p95=(None,), bottleneck="front_proxy")
    assert evaluate(["p95>0s"], everything_failed) == []
    assert evaluate(["success<0.99"], everything_failed)
    nothing_sent = _dict(sent=0, succeeded=0, p95=())
    assert evaluate(["success<0.99", "p95>0s"], nothing_sent) == []


def test_condition_is_a_value():
    assert parse_condition("p95>5s") == Condition("p95>5s", "p95", ">", 5.0)
