"""The engines' own queue time (OpenTelemetry spans) as compute evidence in the `gpu` rule.

A request that waited in an engine's queue while its KV cache had room waited for
compute; where the KV cache was full the same wait is the KV cache's, and the
queue time decides nothing.
"""

from logforensics.diagnose import Thresholds
from logforensics.model import Bottleneck
from tests.diagnose_frames import Case, signals

RESET = "Remote end closed connection without response"


def dropped_while_queued(kv: float, waiting: int = 0, queue_s: float = 6.0) -> Case:
    """Requests reset at gpu-a (not timeouts: the busy-engine signal stays silent) while
    the stats show nothing waiting; the engine's spans show arrivals that waited."""
    case = Case(["gpu-a"])
    case.requests_n(5, 0, 10, True, instance="gpu-a")
    case.requests_n(4, 100, 120, False, step=2, instance="gpu-a", error=RESET)
    case.stats_every("gpu-a", 0, 140, running=4, waiting=waiting, gpu=kv, gen_tps=300.0)
    for k in range(3):
        case.timing("gpu-a", 101 + k, queue_s)
    return case


def test_spans_that_waited_with_kv_room_make_it_compute():
    v = dropped_while_queued(kv=30.0).verdict()
    assert v.bottleneck == Bottleneck.GPU and v.failures == 4
    got = signals(v)
    assert got == {"requests_waited_in_the_engine_queue_with_kv_room": "discriminating"} | {
        k: r for k, r in got.items() if r in ("shared", "qualifying")
    }
    evidence = next(e for e in v.evidence if e.role == "discriminating")
    assert "3 request(s) waited up to 6.00 s in the queue of gpu-a" in evidence.value
    assert evidence.sources == [f"gpu-a-spans.json:{n}" for n in (1, 2, 3)]


def test_without_spans_the_same_case_is_not_compute():
    case = dropped_while_queued(kv=30.0)
    case.timings = []
    assert case.verdict().bottleneck == Bottleneck.INCONCLUSIVE


def test_a_short_wait_is_below_the_threshold():
    assert dropped_while_queued(kv=30.0, queue_s=0.2).verdict().bottleneck != Bottleneck.GPU
    lower = Thresholds(queue_time_s=0.1)
    assert dropped_while_queued(kv=30.0, queue_s=0.2).verdict(lower).bottleneck == Bottleneck.GPU


def test_waiting_with_a_full_kv_cache_is_the_kv_caches_not_compute():
    v = dropped_while_queued(kv=97.0, waiting=3).verdict()
    assert v.bottleneck == Bottleneck.KV_CACHE
    assert "requests_waited_in_the_engine_queue_with_kv_room" not in signals(v)


def test_the_spans_decide_prefill_against_decode_where_they_time_both():
    """The engine's spans time each phase: where the requests in the failures' windows spent
    longer in prefill than in decode, the compute bottleneck is prefill-bound."""
    case = dropped_while_queued(kv=30.0)
    case.timings = []
    for k, (prefill, decode) in enumerate(((3.0, 0.2), (2.5, 0.3), (4.0, 0.1))):
        case.timing("gpu-a", 101 + k, 6.0, prefill_s=prefill, decode_s=decode)
    v = case.verdict()
    assert v.bottleneck == Bottleneck.GPU and v.qualifiers == ["prefill"]
    phase = next(e for e in v.evidence if e.signal == "compute_phase")
    assert phase.value == (
        "prefill-bound: 3 request(s) spent 9.5 s in prefill and 0.6 s in decode on gpu-a "
        "(the engine's spans)"
    )
    assert v.summary.startswith("GPU compute, prefill-bound: 4 of 4 failed requests")
    assert v.recommendations[0].startswith("Prefill-bound")
