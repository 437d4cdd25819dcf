"""Each verdict from the evidence that should produce it, frames built directly.

The two-way cases matter most: signals every engine-side cause shares
(failures reached an instance, a throughput plateau, latency growth) must not
tell KV from compute; evidence is read on the instance a failure reached.
"""

import datetime as dt

import pytest

from logforensics.diagnose import Thresholds
from logforensics.model import Bottleneck
from tests.diagnose_frames import Case, run, signals

PLATEAU_RUNS = [run(8, 4.0, 300.0), run(16, 9.0, 600.0), run(32, 21.0, 610.0)]
TIMED_OUT = "timed out after 30 s"


def successes(case: Case, until: float = 90, names=("gpu-a", "gpu-b")) -> Case:
    for k in range(10):
        name = names[k % len(names)]
        case.request(5 + k, 5 + k + 4, True, instance=name)
    return case


def kv_full_with_plateau() -> Case:
    case = successes(Case(["gpu-a", "gpu-b"], runs=PLATEAU_RUNS))
    case.requests_n(6, 100, 130, False, step=3, instance="gpu-a", error=TIMED_OUT)
    case.stats_every("gpu-a", 0, 150, running=6, waiting=4, gpu=97.0)
    case.stats_every("gpu-b", 0, 150, running=3, waiting=0, gpu=40.0)
    return case


def test_kv_full_with_a_plateau_is_the_kv_cache():
    v = kv_full_with_plateau().verdict()
    assert v.bottleneck == Bottleneck.KV_CACHE
    assert v.subject == "gpu-a" and v.failures == 6 and v.share == 1.0
    got = signals(v)
    assert got["kv_cache_full_during_failures"] == "discriminating"
    # the plateau and the reached failures corroborate, and are marked as shared
    assert got["throughput_plateaued"] == got["failures_reached_an_instance"] == "shared"
    assert not v.secondary and not v.missing
    assert "GPU KV cache" in next(e.value for e in v.evidence if e.role == "discriminating")


def test_shared_signals_add_confidence_but_do_not_decide():
    with_plateau = kv_full_with_plateau().verdict()
    case = kv_full_with_plateau()
    case.runs = []
    without = case.verdict()
    assert without.bottleneck == with_plateau.bottleneck == Bottleneck.KV_CACHE
    assert with_plateau.confidence > without.confidence


def test_compute_bound_with_kv_at_20_percent_and_requests_waiting_is_gpu():
    case = successes(Case(["gpu-a", "gpu-b"], runs=PLATEAU_RUNS))
    for name in ("gpu-a", "gpu-b"):
        case.requests_n(4, 100, 130, False, step=3, instance=name, error=TIMED_OUT)
        case.stats_every(name, 0, 150, running=16, waiting=8, gpu=20.0, gen_tps=600.0)
    v = case.verdict()
    assert v.bottleneck == Bottleneck.GPU
    assert signals(v)["requests_queued_with_kv_room"] == "discriminating"
    assert v.subject == "gpu-a, gpu-b"


def test_a_full_batch_generating_more_than_it_takes_in_is_decode_bound():
    case = successes(Case(["gpu-a", "gpu-b"], runs=PLATEAU_RUNS))
    for name in ("gpu-a", "gpu-b"):
        case.requests_n(4, 100, 130, False, step=3, instance=name, error=TIMED_OUT)
        case.stats_every(
            name, 0, 150, running=16, waiting=8, gpu=20.0, gen_tps=600.0, prompt_tps=40.0
        )
    v = case.verdict()
    assert v.bottleneck == Bottleneck.GPU and v.qualifiers == ["decode"]
    phase = next(e for e in v.evidence if e.signal == "compute_phase")
    assert phase.role == "qualifying" and phase.value.startswith(
        "decode-bound: over 10 stats line(s) on gpu-a, gpu-b, 400 prompt against 6000 generated"
    )
    assert v.recommendations[0].startswith("Decode-bound")


def test_prompts_queueing_below_the_batch_peak_are_prefill_bound():
    """Running reached 16 earlier; in the failures' windows 2 run while 10 wait and the
    engine takes in far more prompt tokens than it generates: the prompts hold it up."""
    case = successes(Case(["gpu-a"], runs=PLATEAU_RUNS), names=("gpu-a",))
    case.stats_every("gpu-a", 0, 60, running=16, waiting=0, gpu=30.0, gen_tps=300.0)
    case.requests_n(4, 100, 130, False, step=3, instance="gpu-a", error=TIMED_OUT)
    case.stats_every(
        "gpu-a", 90, 150, running=2, waiting=10, gpu=30.0, prompt_tps=3000.0, gen_tps=20.0
    )
    v = case.verdict()
    assert v.bottleneck == Bottleneck.GPU and v.qualifiers == ["prefill"]
    assert "GPU compute, prefill-bound" in v.summary


def test_a_phase_the_stats_do_not_tell_is_left_undecided():
    """One request at a time and nothing waiting: neither a full batch nor a queue below it."""
    v = stale_stats_compute().verdict()
    assert v.bottleneck == Bottleneck.GPU and v.qualifiers == []
    phase = next(e for e in v.evidence if e.signal == "compute_phase")
    assert phase.value.startswith("undecided:")


def stale_stats_compute(error: str = TIMED_OUT, http_status: int | None = None) -> Case:
    """A CPU build whose engine steps outlast the stats interval: Running reads 0–1,
    nothing waits, KV is low, prompt throughput shows the engine busy; every request
    times out at the client after the instance received it."""
    case = Case(["instance-1"], runs=[run(5, 15.0, 12.0), run(9, 25.0, 14.0)])
    case.requests_n(5, 0, 15, True, instance="instance-1")
    case.requests_n(
        13, 100, 130, False, step=3, instance="instance-1", error=error, http_status=http_status
    )
    case.stats_every("instance-1", 0, 140, running=1, waiting=0, cpu=0.8, prompt_tps=18.4)
    return case


def test_requests_timing_out_at_a_busy_instance_with_kv_room_is_gpu():
    v = stale_stats_compute().verdict()
    assert v.bottleneck == Bottleneck.GPU
    busy = next(e for e in v.evidence if e.signal == "instance_busy_while_requests_timed_out")
    assert "CPU" in busy.value and "18.4 prompt" in busy.value


def test_errors_that_are_not_timeouts_at_a_busy_instance_are_not_compute():
    v = stale_stats_compute(error="HTTP 500", http_status=500).verdict()
    assert v.bottleneck == Bottleneck.INCONCLUSIVE
    assert any("instance-1" in m and "/metrics" in m for m in v.missing)


def test_the_correlation_stages_outcome_is_used_when_present():
    case = stale_stats_compute(error="something odd")
    for row in case.requests:
        row["outcome"] = "timeout" if row["ok"] is False else "ok"
    assert case.verdict().bottleneck == Bottleneck.GPU


def test_kv_full_on_one_instance_and_queueing_on_the_other_for_the_same_failures_is_two_ways():
    """Failures reached an instance, but which one is unknown: gpu-a was KV-bound, gpu-b
    compute-bound. The plateau and the reached failures cannot break that tie."""
    case = successes(Case(["gpu-a", "gpu-b"], runs=PLATEAU_RUNS))
    case.requests_n(6, 100, 130, False, step=3, upstream="10.0.0.9:8000", delivery="reached")
    case.stats_every("gpu-a", 0, 150, running=6, waiting=3, gpu=98.0)
    case.stats_every("gpu-b", 0, 150, running=16, waiting=5, gpu=20.0)
    v = case.verdict()
    assert v.bottleneck == Bottleneck.INCONCLUSIVE
    assert v.contested == 6
    assert any("which instance" in m and "kv_cache and gpu" in m for m in v.missing)


def test_front_proxy_refusals_while_one_instance_is_kv_bound():
    case = successes(Case(["gpu-a", "gpu-b"]))
    case.requests_n(
        8,
        100,
        100.5,
        False,
        step=2,
        reach="unreached",
        delivery="refused",
        upstream="vllm_pool",
        proxy_status=503,
        http_status=503,
    )
    for _ in range(8):
        case.proxy_event(100.5, "no_live_upstream", "vllm_pool", 503)
    case.requests_n(4, 95, 125, False, step=2, instance="gpu-a", error=TIMED_OUT)
    case.stats_every("gpu-a", 0, 150, running=6, waiting=4, gpu=99.0)
    case.stats_every("gpu-b", 0, 150, running=2, waiting=0, gpu=10.0)
    v = case.verdict()
    assert v.bottleneck == Bottleneck.FRONT_PROXY
    assert v.failures == 8 and v.share == pytest.approx(8 / 12)
    assert {"proxy_refused_before_any_upstream", "instances_had_room_during_failures"} <= set(
        signals(v)
    )
    (kv,) = v.secondary
    assert kv.bottleneck == Bottleneck.KV_CACHE and kv.failures == 4 and kv.subject == "gpu-a"
    assert kv.share == pytest.approx(4 / 12)
    assert "Also the KV cache: 4 of 12 (33%)." in v.summary
    assert v.to_dict()["secondary"][0]["bottleneck"] == "kv_cache"


def dead_instance() -> Case:
    """gpu-b is killed at ~302 s: its log stops (last stats line at 300 s), three requests
    in flight there fail when the proxy's connection closes, and the balancer keeps
    routing its half there: five connects refused at 400 s."""
    case = Case(["gpu-a", "gpu-b"], upstreams={"10.0.0.2:8000": "gpu-b"})
    for k in range(6):
        case.request(10 + k, 40 + k, True, instance=("gpu-a", "gpu-b")[k % 2])
    case.requests_n(3, 295, 303, True, instance="gpu-a")
    case.requests_n(
        3,
        295,
        303,
        False,
        step=2,
        instance="gpu-b",
        upstream="10.0.0.2:8000",
        delivery="reached",
        proxy_status=502,
        http_status=502,
    )
    case.requests_n(5, 400, 460, True, step=3, instance="gpu-a")
    case.requests_n(
        5,
        400,
        400.01,
        False,
        step=3,
        reach="unreached",
        proxy_instance="gpu-b",
        upstream="10.0.0.2:8000",
        delivery="refused",
        proxy_status=502,
        http_status=502,
    )
    case.stats_every("gpu-a", 0, 500, running=3, waiting=0, gpu=8.0)
    case.stats_every("gpu-b", 0, 300, running=3, waiting=0, gpu=8.0)
    for _ in range(3):
        case.proxy_event(303, "upstream_closed", "10.0.0.2:8000")
    for _ in range(5):
        case.proxy_event(400, "conn_refused", "10.0.0.2:8000")
    case.coverage = {"gpu-a": (0, 500), "gpu-b": (0, 300)}
    return case


def test_a_dead_instance_is_an_instance_failure():
    v = dead_instance().verdict()
    assert v.bottleneck == Bottleneck.INSTANCE_FAILURE
    assert v.subject == "gpu-b" and v.failures == 8 and v.share == 1.0
    assert not v.secondary  # the refused connects are its, not the proxy's
    by = {e.signal: e for e in v.evidence}
    assert by["instance_log_stopped"].sources == ["gpu-b.log:31"]  # its last line
    assert "10:05:00 UTC" in by["instance_log_stopped"].value
    unreachable = by["proxy_could_not_reach_the_instance"]
    assert unreachable.sources[0] == "error.log:1"  # the first proxy error naming it
    assert "upstream_closed×3" in unreachable.value and "conn_refused×5" in unreachable.value
    assert "3 in flight then, 5 sent afterwards" in by["failures_on_it_after_it_failed"].value
    (kept,) = v.findings
    assert kept.kind == "failed_instance_kept_in_pool" and "5 request(s)" in kept.detail
    assert "max_fails" in kept.advice and "proxy_next_upstream" in kept.advice


def test_a_dead_instance_s_last_line_is_the_later_of_lines_stamped_alike():
    """Its log's last moment stamped on two lines (a stats line, then an event): the later
    line is its last sign of life, whichever table each is in."""
    case = dead_instance()
    case.stat("gpu-b", 300, running=3, waiting=0, gpu=8.0)  # gpu-b.log:32, at 300 s too
    by = {e.signal: e for e in case.verdict().evidence}
    assert by["instance_log_stopped"].sources == ["gpu-b.log:32"]
    case.event("gpu-b", 300, "preemption", "a line about a preempted sequence")  # :33
    by = {e.signal: e for e in case.verdict().evidence}
    assert by["instance_log_stopped"].sources == ["gpu-b.log:33"]


def test_an_engine_death_banner_counts_until_the_instance_serves_again():
    case = Case(["gpu-a", "gpu-b"])
    case.requests_n(4, 10, 20, True, instance="gpu-b")
    case.event("gpu-b", 100, "engine_dead", "EngineDeadError: EngineCore encountered an issue.")
    case.requests_n(4, 101, 102, False, step=2, instance="gpu-b", http_status=500)
    case.requests_n(4, 160, 170, True, step=3, instance="gpu-b")  # restarted
    case.requests_n(2, 165, 167, False, step=3, instance="gpu-b", http_status=500)
    case.stats_every("gpu-b", 0, 200, running=1, waiting=0, gpu=5.0)
    case.stats_every("gpu-a", 0, 200, running=1, waiting=0, gpu=5.0)
    v = case.verdict()
    assert v.bottleneck == Bottleneck.INSTANCE_FAILURE
    assert v.failures == 4 and v.unexplained == 2  # the two after it served again
    assert "engine_died" in signals(v)


def test_a_shutdown_after_the_test_is_not_an_instance_failure():
    case = kv_full_with_plateau()
    case.event("gpu-a", 400, "engine_dead", "EngineDeadError at shutdown")
    assert case.verdict().bottleneck == Bottleneck.KV_CACHE


def test_kv_full_but_no_stats_during_the_failures_is_inconclusive_and_names_what_to_collect():
    case = successes(Case(["gpu-a", "gpu-b"], runs=PLATEAU_RUNS))
    case.stats_every("gpu-a", 0, 90, running=6, waiting=4, gpu=96.0)
    case.stats_every("gpu-b", 0, 90, running=2, waiting=0, gpu=30.0)
    case.requests_n(6, 200, 320, False, step=3, instance="gpu-a", error=TIMED_OUT)
    case.coverage = {"gpu-a": (0, 330), "gpu-b": (0, 330)}
    v = case.verdict()
    assert v.bottleneck == Bottleneck.INCONCLUSIVE
    assert v.unexplained == 6
    assert (
        "vLLM stats lines or a /metrics scrape covering 10:03:20–10:05:20 UTC on 2026-03-01 on gpu-a"
        in v.missing
    )


def test_the_cpu_builds_kv_label_is_read_and_named():
    case = successes(Case(["instance-1", "instance-2"]), names=("instance-1", "instance-2"))
    case.requests_n(5, 100, 220, False, step=4, instance="instance-2", error=TIMED_OUT)
    case.stats_every("instance-2", 0, 230, running=7, waiting=3, cpu=93.3)
    case.stats_every("instance-1", 0, 230, running=2, waiting=0, cpu=20.0)
    v = case.verdict()
    assert v.bottleneck == Bottleneck.KV_CACHE
    full = next(e for e in v.evidence if e.signal == "kv_cache_full_during_failures")
    assert "93.3% (CPU KV cache) on instance-2" in full.value


def test_preemption_seen_as_running_falling_while_waiting_rises():
    case = Case(["instance-2"])
    case.requests_n(4, 0, 40, True, instance="instance-2")
    case.requests_n(3, 100, 160, False, step=2, instance="instance-2", error=TIMED_OUT)
    case.stat("instance-2", 105, running=7, waiting=3, cpu=93.3)
    case.stat("instance-2", 115, running=3, waiting=7, cpu=80.0)
    case.stat("instance-2", 125, running=2, waiting=8, cpu=60.0)
    v = case.verdict()
    assert v.bottleneck == Bottleneck.KV_CACHE
    assert "preemption_seen_in_stats" in signals(v)


@pytest.mark.parametrize(
    "scraped_at, said",
    [(None, "read at an unknown time"), (700, "read at 10:11:40 UTC, after the test")],
)
def test_a_scrapes_preemption_counter_alone_is_kv_pressure(scraped_at, said):
    """No stats line shows KV full or a preemption (vLLM 0.32 prints none); the saved
    /metrics scrape's counter does, and requests waited while others failed."""
    case = successes(Case(["gpu-a", "gpu-b"]))
    case.requests_n(5, 100, 220, False, step=3, instance="gpu-a", error=TIMED_OUT)
    case.stats_every("gpu-a", 0, 230, running=2, waiting=4, gpu=70.0)
    case.stats_every("gpu-b", 0, 230, running=2, waiting=0, gpu=20.0)
    case.event(
        "gpu-a",
        scraped_at,
        "preempted",
        "vllm:num_preemptions_total = 29 (cumulative since the server started; engine 0)",
        file="metrics-8001.txt",
    )
    case.coverage = {"gpu-a": (0, 230), "gpu-b": (0, 230)}
    v = case.verdict()
    assert v.bottleneck == Bottleneck.KV_CACHE
    counter = next(e for e in v.evidence if e.signal == "preemptions_on_record")
    assert "vllm:num_preemptions_total = 29" in counter.value and said in counter.value
    assert "preemption happened between" in counter.value or scraped_at is None
    assert counter.sources[0] == "metrics-8001.txt:1"


def test_requests_waiting_without_the_counter_would_be_compute():
    """The same case without the scrape: KV 70% with requests waiting is compute."""
    case = successes(Case(["gpu-a", "gpu-b"]))
    case.requests_n(5, 100, 220, False, step=3, instance="gpu-a", error=TIMED_OUT)
    case.stats_every("gpu-a", 0, 230, running=2, waiting=4, gpu=70.0)
    assert case.verdict().bottleneck == Bottleneck.GPU


def test_every_request_succeeding_is_none():
    case = successes(Case(["gpu-a", "gpu-b"]))
    case.stats_every("gpu-a", 0, 90, running=2, waiting=0, gpu=12.0)
    v = case.verdict()
    assert v.bottleneck == Bottleneck.NONE
    assert signals(v) == {
        "failed_requests": "discriminating",
        "peak_kv_cache_pct": "discriminating",
    }


def test_a_kv_cache_that_filled_without_failures_is_still_named():
    case = successes(Case(["gpu-a"]), names=("gpu-a",))
    case.stats_every("gpu-a", 0, 90, running=8, waiting=2, gpu=95.0)
    v = case.verdict()
    assert v.bottleneck == Bottleneck.KV_CACHE and "no request failed" in v.summary


def test_refusals_at_the_front_while_every_kv_cache_was_full_are_shed_not_a_front_verdict():
    """The proxy turned requests away while both engines were full: it shed what they could
    not take. The KV cache is the bottleneck, qualified `shed_at_front`, and the advice leads
    with capacity, not with raising the proxy's limit."""
    case = successes(Case(["gpu-a", "gpu-b"]))
    case.requests_n(6, 100, 100.2, False, reach="unreached", delivery="refused", http_status=503)
    for name in ("gpu-a", "gpu-b"):
        case.stats_every(name, 0, 150, running=8, waiting=6, gpu=98.0)
    v = case.verdict()
    assert v.bottleneck == Bottleneck.KV_CACHE and v.qualifiers == ["shed_at_front"]
    assert v.failures == 6 and v.subject == "gpu-a, gpu-b"
    assert v.summary.startswith("The KV cache, shed at the front: 6 of 6 failed requests")
    assert v.recommendations[0].startswith("Add KV capacity")
    shed = next(e for e in v.evidence if e.signal == "shed_at_the_front_while_kv_full")
    assert shed.value == (
        "6/6 never reached an instance (6 refused in the front's own log), while gpu-a, gpu-b "
        "ran with KV cache up to 98% and up to 6 requests waiting"
    )


def test_a_router_that_says_it_shed_them_is_quoted_by_its_reason():
    """llm-d's flow control answers what it never dispatched with its dropped reason; with
    both engines full that is shedding, and the evidence says which reason the front gave."""
    case = successes(Case(["gpu-a", "gpu-b"]))
    dropped = "429 Too Many Requests (x-llm-d-request-dropped-reason: rejected-saturated)"
    case.requests_n(5, 100, 100.2, False, reach="unreached", error=dropped, http_status=429)
    for name in ("gpu-a", "gpu-b"):
        case.stats_every(name, 0, 150, running=8, waiting=6, gpu=99.0)
    v = case.verdict()
    assert v.bottleneck == Bottleneck.KV_CACHE and v.qualifiers == ["shed_at_front"]
    shed = next(e for e in v.evidence if e.signal == "shed_at_the_front_while_kv_full")
    assert shed.value.startswith(
        "5/5 never reached an instance (5 answered rejected-saturated by the front)"
    )


def test_a_fronts_403_is_no_shedding_however_full_the_engines():
    case = successes(Case(["gpu-a", "gpu-b"]))
    case.requests_n(4, 100, 100.2, False, reach="unreached", delivery="refused", http_status=403)
    for name in ("gpu-a", "gpu-b"):
        case.stats_every(name, 0, 150, running=8, waiting=6, gpu=98.0)
    v = case.verdict()
    assert "shed_at_front" not in v.qualifiers
    assert "shed_at_the_front_while_kv_full" not in signals(v)


def test_refusals_at_the_front_while_engines_queued_with_kv_room_are_shed_by_compute():
    case = successes(Case(["gpu-a", "gpu-b"]))
    case.requests_n(4, 100, 100.2, False, reach="unreached", delivery="refused", http_status=503)
    for name in ("gpu-a", "gpu-b"):
        case.stats_every(name, 0, 150, running=16, waiting=5, gpu=40.0)
    v = case.verdict()
    assert v.bottleneck == Bottleneck.GPU and v.qualifiers == ["shed_at_front"]
    assert v.recommendations[0].startswith("Add compute (replicas)")
    assert "shed_at_the_front_while_engines_busy" in signals(v)


def test_refusals_while_one_engine_had_room_stay_the_fronts():
    """One engine full, the other idle: the front refused what an engine could take."""
    case = successes(Case(["gpu-a", "gpu-b"]))
    case.requests_n(4, 100, 100.2, False, reach="unreached", delivery="refused", http_status=503)
    case.stats_every("gpu-a", 0, 150, running=8, waiting=6, gpu=98.0)
    case.stats_every("gpu-b", 0, 150, running=1, waiting=0, gpu=5.0)
    v = case.verdict()
    assert v.bottleneck == Bottleneck.FRONT_PROXY and v.qualifiers == []


def test_failures_no_log_covers_are_inconclusive():
    case = successes(Case(["gpu-a"]), names=("gpu-a",))
    case.requests_n(6, 100, 120, False, reach="unknown", error=TIMED_OUT)
    case.stats_every("gpu-a", 0, 90, running=1, waiting=0, gpu=5.0)
    v = case.verdict()
    assert v.bottleneck == Bottleneck.INCONCLUSIVE
    assert any(m.startswith("logs covering") and "from every instance" in m for m in v.missing)


def test_a_null_ok_is_neither_success_nor_failure():
    case = kv_full_with_plateau()
    case.requests_n(3, 100, 130, None, step=3, instance="gpu-b")
    v = case.verdict()
    assert v.bottleneck == Bottleneck.KV_CACHE and v.failures == 6


def test_thresholds_change_the_verdict():
    # at 97% the KV cache is full by default; with --kv-full-pct 99 it had room, and the
    # requests waiting there make it a compute limit
    assert kv_full_with_plateau().verdict().bottleneck == Bottleneck.KV_CACHE
    assert kv_full_with_plateau().verdict(Thresholds(kv_full_pct=99)).bottleneck == Bottleneck.GPU


def test_a_full_kv_cache_with_nothing_waiting_is_not_enough():
    """KV usage is at 95%, but nothing waits and nothing was preempted: the cache held
    what was admitted. Neither KV nor compute is proven; `missing` says what was seen."""
    case = successes(Case(["gpu-a"]), names=("gpu-a",))
    case.requests_n(4, 100, 130, False, step=3, instance="gpu-a", error=TIMED_OUT)
    case.stats_every("gpu-a", 0, 150, running=4, waiting=0, gpu=95.0)
    v = case.verdict()
    assert v.bottleneck == Bottleneck.INCONCLUSIVE
    assert any("KV cache up to 95% and up to 0 waiting" in m for m in v.missing)


def test_client_errors_are_not_a_capacity_limit():
    """400s at a busy instance are the requests' own fault, not compute."""
    case = successes(Case(["gpu-a", "gpu-b"]))
    case.requests_n(4, 100, 101, False, step=3, instance="gpu-a", http_status=400)
    case.stats_every("gpu-a", 0, 150, running=16, waiting=8, gpu=20.0)
    v = case.verdict()
    assert v.bottleneck == Bottleneck.INCONCLUSIVE
    assert any("rejected 4 request(s) (http_400)" in m for m in v.missing)


def test_failures_a_queueing_proxy_delivered_late_are_the_front_proxy_not_compute():
    """The seed's garbage measurement: the client gives up at 20 s while the proxy's queue
    still holds its requests; the engine, busy with two at a time and KV near empty, gets
    them 13–30 s after they were sent. Their time was lost in front of the engine."""
    case = stale_stats_compute()
    for row in case.requests:
        if row["ok"] is False:
            row["arrived_at"] = row["started_at"] + dt.timedelta(seconds=22)
    v = case.verdict()
    assert v.bottleneck == Bottleneck.FRONT_PROXY
    assert signals(v)["failures_waited_in_front_of_the_instances"] == "discriminating"
    assert not v.secondary  # compute does not claim them
    # the same failures received as soon as they were sent: the engine was the limit
    for row in case.requests:
        if row["ok"] is False:
            row["arrived_at"] = row["started_at"] + dt.timedelta(seconds=0.2)
    assert case.verdict().bottleneck == Bottleneck.GPU


def test_an_instance_restarted_on_its_port_is_the_instance_failure(tmp_path):
    """recordings/aiperf-restart: SIGTERM to the one instance 20 s into an AIPerf rate run,
    started again on its port into a new log. The verdict names it with the restart between
    its two logs, the connects refused while nothing listened, and the streams its engine
    aborted; one step at the rate (not bursts, so no skew and no contamination); no balancer
    stood in between, so none "kept it in the pool"."""
    from logforensics.analysis import analyze
    from tests.conftest import report_json
    from tests.corpus import variant

    got = report_json(analyze([variant("aiperf-restart", tmp_path)]))
    verdict = got["verdict"]
    assert verdict["bottleneck"] == "instance_failure"
    fired = {e["signal"]: e for e in verdict["evidence"]}
    assert "instance-1-restarted.log starts instance-1 again on 127.0.0.1:8011" in str(
        fired["engine_died"]["value"]
    )
    assert (
        "63 request(s) refused at connect by instance-1's address"
        in fired["refused_while_down"]["value"]
    )
    aborted = fired["in_flight_aborted"]
    assert "aborted 3 request(s) in flight" in aborted["value"]
    assert aborted["sources"][0].endswith("instance-1.log:229")
    assert (
        "66 of 66 failed requests went to instance-1"
        in fired["failures_on_it_after_it_failed"]["value"]
    )
    assert (
        "3 in flight then, 63 sent afterwards" in fired["failures_on_it_after_it_failed"]["value"]
    )
    (step,) = [r for r in got["runs"] if not r["warmup"]]
    assert (step["rate"], step["concurrency"], step["sent"], step["failed"]) == (1.0, 4, 106, 66)
    kinds = {f["kind"] for f in got["findings"]}
    assert not kinds & {"lb_skew", "contaminated_step", "failed_instance_kept_in_pool"}
    assert [i["name"] for i in got["instances"]] == ["instance-1"]
