"""Prometheus text-format scrapes of vLLM's /metrics → engine_stats / engine_events.

Where the excerpts' exact text comes from (values invented, layout exact):

* metric names, labels and HELP texts: vllm-project/vllm
  ``vllm/v1/metrics/loggers.py`` @ 005a810b (``vllm:num_requests_running``,
  ``vllm:num_requests_waiting``, ``vllm:kv_cache_usage_perc``, deprecated
  ``vllm:gpu_cache_usage_perc``, ``vllm:num_preemptions``,
  ``vllm:generation_tokens``, ``vllm:request_success`` with
  ``finished_reason``; labels ``model_name``, ``engine``) and V0
  ``vllm/engine/metrics.py`` (``vllm:num_requests_swapped``,
  ``vllm:cpu_cache_usage_perc``); ``finished_reason`` values from
  ``vllm/v1/engine/__init__.py`` ``FINISH_REASON_STRINGS``.
* the exposition format (``# HELP``, ``# TYPE``, counters rendered with
  ``_total``, the default ``python_gc_*`` / ``process_*`` metrics first, an
  optional millisecond timestamp after the value): prometheus_client's text
  exposition.
* ``# scraped at <ISO>``: the convention this tool documents for saving
  several curl snapshots in one file.
"""

import datetime as dt
import types
from pathlib import Path

import polars as pl

from logforensics import model
from logforensics.ingest import FILE_FORMATS, ParseContext, SourceFile, detect
from logforensics.model import source_labels as labels

UTC = dt.timezone.utc
CTX = ParseContext(year=2026)
DATA = Path(__file__).parent / "data" / "serverlogs"
LABELS = 'engine="0",model_name="google/gemma-3-4b-it"'

PREAMBLE = "".join(
    f"# HELP python_gc_objects_collected_total Objects collected during gc\n"
    f"# TYPE python_gc_objects_collected_total counter\n"
    f'python_gc_objects_collected_total{{generation="{g}"}} {100 + g}.0\n'
    for g in range(3)
) + "".join(
    f"# HELP process_{name} Process metric.\n# TYPE process_{name} gauge\nprocess_{name} 1.0\n"
    for name in (
        "virtual_memory_bytes",
        "resident_memory_bytes",
        "start_time_seconds",
        "cpu_seconds_total",
        "open_fds",
        "max_fds",
        "threads",
        "uptime",
    )
)


def snapshot(running, waiting, kv, preemptions, gen_tokens, aborts, stamp=None, old=False):
    kv_name = "vllm:gpu_cache_usage_perc" if old else "vllm:kv_cache_usage_perc"
    ts = f" {stamp}" if stamp is not None else ""
    return (
        "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
        "# TYPE vllm:num_requests_running gauge\n"
        f"vllm:num_requests_running{{{LABELS}}} {running}{ts}\n"
        "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n"
        "# TYPE vllm:num_requests_waiting gauge\n"
        f"vllm:num_requests_waiting{{{LABELS}}} {waiting}{ts}\n"
        f"# HELP {kv_name} KV-cache usage. 1 means 100 percent usage.\n"
        f"# TYPE {kv_name} gauge\n"
        f"{kv_name}{{{LABELS}}} {kv}{ts}\n"
        "# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.\n"
        "# TYPE vllm:num_preemptions_total counter\n"
        f"vllm:num_preemptions_total{{{LABELS}}} {preemptions}{ts}\n"
        "# HELP vllm:generation_tokens_total Number of generation tokens processed.\n"
        "# TYPE vllm:generation_tokens_total counter\n"
        f"vllm:generation_tokens_total{{{LABELS}}} {gen_tokens}{ts}\n"
        "# HELP vllm:request_success_total Count of successfully processed requests.\n"
        "# TYPE vllm:request_success_total counter\n"
        f'vllm:request_success_total{{engine="0",finished_reason="stop",model_name="google/gemma-3-4b-it"}} 10.0{ts}\n'
        f'vllm:request_success_total{{engine="0",finished_reason="abort",model_name="google/gemma-3-4b-it"}} {aborts}{ts}\n'
    )


def parse(tmp_path, text, name="gpu-0.prom", ctx=CTX):
    path = tmp_path / name
    path.write_text(text)
    source = SourceFile(path, name, "gpu-0")
    fmt = detect(source)
    assert fmt is FILE_FORMATS["prometheus_scrape"]
    return fmt.parse(source, ctx)


def test_single_scrape_with_a_scraped_at_comment():
    source = SourceFile(DATA / "gpu-1.txt", "gpu-1.txt", "gpu-1")
    fmt = detect(source)
    assert fmt is FILE_FORMATS["prometheus_scrape"]
    result = fmt.parse(source, CTX)
    stats = result.table("engine_stats")
    assert stats.select("instance", "at", "running", "waiting", "gpu_kv_pct").rows() == [
        ("gpu-1", dt.datetime(2026, 2, 24, 6, 16, 10, tzinfo=UTC), 16, 3, 87.4)
    ]
    assert labels(stats["source"]) == ["gpu-1.txt:4"]
    assert (result.parsed, result.noise, result.unparsed) == (3, 7, 0)
    assert result.span == (dt.datetime(2026, 2, 24, 6, 16, 10, tzinfo=UTC),) * 2


def test_concatenated_scrapes_behind_the_default_metrics(tmp_path):
    text = (
        "# scraped at 2026-02-24T06:16:00Z\n"
        + PREAMBLE
        + snapshot(3, 0, 0.125, 0.0, 1000.0, 0.0)
        + "\n# scraped at 2026-02-24T15:16:10+09:00\n"
        + PREAMBLE
        + snapshot(30, 12, 0.998, 4.0, 4010.0, 2.0)
        + "# scraped at 2026-02-24T06:16:20Z\n"
        + snapshot(31, 12, 0.999, 4.0, 4510.0, 2.0)
    )
    result = parse(tmp_path, text)
    stats = result.table("engine_stats")
    assert stats["at"].to_list() == [
        dt.datetime(2026, 2, 24, 6, 16, s, tzinfo=UTC) for s in (0, 10, 20)
    ]
    assert stats["running"].to_list() == [3, 30, 31]
    assert stats["waiting"].to_list() == [0, 12, 12]
    assert stats["gpu_kv_pct"].to_list() == [12.5, 99.8, 99.9]
    assert stats["gen_tps"].to_list() == [None, 301.0, 50.0]
    events = result.table("engine_events")
    assert events.select("kind", "detail").rows() == [
        ("preempted", "vllm:num_preemptions_total = 4 (+4 since the previous scrape; engine 0)"),
        (
            "requests_aborted",
            'vllm:request_success_total{finished_reason="abort"} = 2 (+2 since the previous '
            "scrape; engine 0)",
        ),
    ]
    assert events["at"].to_list() == [dt.datetime(2026, 2, 24, 6, 16, 10, tzinfo=UTC)] * 2
    assert result.parsed + result.noise + result.unparsed == result.lines
    assert result.unparsed == 0


def by_reason(kv_full, priority):
    """vLLM PR #58037's counter as prometheus_client renders it (name, labels and reasons
    from the PR's description; the HELP text ours)."""
    return (
        "# HELP vllm:num_preemptions_by_reason_total Cumulative number of preemptions by reason.\n"
        "# TYPE vllm:num_preemptions_by_reason_total counter\n"
        + "".join(
            f'vllm:num_preemptions_by_reason_total{{engine="0",model_name="google/gemma-3-4b-it",reason="{why}"}} {n}\n'
            for why, n in (
                ("kv_full", kv_full),
                ("priority", priority),
                ("prefix_cache_reset", 0.0),
            )
        )
    )


def test_preemptions_counted_by_reason_where_the_engine_splits_them(tmp_path):
    """Where the engine says why it preempted, each reason is its own kind: 9 preemptions of
    which 3 for priority are 6 KV-full ones, not 9 (the total is not counted again)."""
    text = (
        "# scraped at 2026-02-24T06:16:00Z\n"
        + snapshot(3, 0, 0.5, 0.0, 100.0, 0.0)
        + by_reason(0.0, 0.0)
        + "# scraped at 2026-02-24T06:16:10Z\n"
        + snapshot(8, 4, 0.99, 9.0, 900.0, 0.0)
        + by_reason(6.0, 3.0)
    )
    events = parse(tmp_path, text).table("engine_events")
    assert events.select("kind", "detail").rows() == [
        (
            "preempted",
            'vllm:num_preemptions_by_reason_total{reason="kv_full"} = 6 (+6 since the previous '
            "scrape; engine 0)",
        ),
        (
            "preempted_priority",
            'vllm:num_preemptions_by_reason_total{reason="priority"} = 3 (+3 since the previous '
            "scrape; engine 0)",
        ),
    ]


def test_first_scrape_with_preemptions_reports_the_cumulative_count(tmp_path):
    text = "# scraped at 2026-02-24T06:16:00Z\n" + snapshot(1, 0, 0.5, 7.0, 10.0, 0.0, old=True)
    result = parse(tmp_path, text)
    assert result.table("engine_stats")["gpu_kv_pct"].to_list() == [50.0]  # the old name
    assert result.table("engine_events")["detail"].to_list() == [
        "vllm:num_preemptions_total = 7 (cumulative since the server started; engine 0)"
    ]


def test_sample_timestamps_split_and_place_snapshots(tmp_path):
    text = snapshot(1, 0, 0.1, 0.0, 0.0, 0.0, stamp=1771913760000) + snapshot(
        2, 1, 0.2, 0.0, 100.0, 0.0, stamp=1771913770000
    )
    stats = parse(tmp_path, text).table("engine_stats")
    assert stats["running"].to_list() == [1, 2]
    assert stats["at"].to_list() == [
        dt.datetime(2026, 2, 24, 6, 16, 0, tzinfo=UTC),
        dt.datetime(2026, 2, 24, 6, 16, 10, tzinfo=UTC),
    ]
    assert stats["gen_tps"].to_list() == [None, 10.0]


def test_scrape_time_unknown_without_marker_or_context(tmp_path):
    text = snapshot(1, 0, 0.1, 0.0, 0.0, 0.0) + snapshot(2, 0, 0.2, 0.0, 0.0, 0.0)
    result = parse(tmp_path, text)
    stats = result.table("engine_stats")
    assert stats["running"].to_list() == [1, 2]  # two snapshots told apart by repetition
    assert stats["at"].to_list() == [None, None]
    assert any("scrape time unknown" in note for note in result.notes)
    assert result.span is None


def test_scraped_at_from_the_parse_context(tmp_path):
    when = dt.datetime(2026, 2, 24, 6, 16, 30, tzinfo=UTC)
    ctx = types.SimpleNamespace(year=2026, server_tz="UTC", client_tz="UTC", scraped_at=when)
    result = parse(tmp_path, snapshot(5, 1, 0.5, 0.0, 0.0, 0.0), ctx=ctx)
    assert result.table("engine_stats")["at"].to_list() == [when]
    assert not result.notes


def test_v0_and_sglang_metric_names(tmp_path):
    text = (
        "# scraped at 2026-02-24T06:16:00Z\n"
        '# TYPE vllm:num_requests_swapped gauge\nvllm:num_requests_swapped{model_name="m"} 2.0\n'
        '# TYPE vllm:cpu_cache_usage_perc gauge\nvllm:cpu_cache_usage_perc{model_name="m"} 0.03\n'
        '# TYPE vllm:gpu_cache_usage_perc gauge\nvllm:gpu_cache_usage_perc{model_name="m"} 0.972\n'
        "# scraped at 2026-02-24T06:16:00Z\n"
        '# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{model_name="s"} 12.0\n'
        '# TYPE sglang:num_queue_reqs gauge\nsglang:num_queue_reqs{model_name="s"} 4.0\n'
        '# TYPE sglang:token_usage gauge\nsglang:token_usage{model_name="s"} 0.93\n'
        '# TYPE sglang:gen_throughput gauge\nsglang:gen_throughput{model_name="s"} 512.5\n'
    )
    stats = parse(tmp_path, text).table("engine_stats")
    assert stats.select(
        "running", "waiting", "swapped", "gpu_kv_pct", "cpu_kv_pct", "gen_tps"
    ).rows() == [
        (None, None, 2, 97.2, 3.0, None),
        (12, 4, None, 93.0, None, 512.5),
    ]


def test_a_scrape_without_model_server_metrics_says_so(tmp_path):
    result = parse(tmp_path, PREAMBLE)
    assert result.tables == {} or all(f.is_empty() for f in result.tables.values())
    assert result.notes == ["no vLLM or SGLang metrics in this scrape"]
    assert result.parsed == 0 and result.unparsed == 0


def test_metric_frames_have_the_canonical_schema():
    source = SourceFile(DATA / "gpu-1.txt", "gpu-1.txt", "gpu-1")
    result = detect(source).parse(source, CTX)
    for name, frame in result.tables.items():
        assert frame.schema == pl.Schema(model.SCHEMAS[name]), name


# vLLM 0.32's histogram as recordings/guidellm-kv/metrics-8002.txt holds it (its buckets 1…20)
PER_REQUEST = """\
# HELP vllm:request_num_preemptions Histogram of the number of times a request was preempted.
# TYPE vllm:request_num_preemptions histogram
vllm:request_num_preemptions_bucket{{engine="0",le="1.0",model_name="tiny-llama"}} {le1}
vllm:request_num_preemptions_bucket{{engine="0",le="2.0",model_name="tiny-llama"}} {le2}
vllm:request_num_preemptions_bucket{{engine="0",le="+Inf",model_name="tiny-llama"}} {count}
vllm:request_num_preemptions_count{{engine="0",model_name="tiny-llama"}} {count}
vllm:request_num_preemptions_sum{{engine="0",model_name="tiny-llama"}} {total}
"""


def test_requests_preempted_twice_or_more_from_the_per_request_histogram(tmp_path):
    """count less the le="1.0" bucket is the finished requests preempted 2+ times: 23 − 20 = 3
    at the recording's scrape; a scrape where it did not grow gives no event."""
    first = PER_REQUEST.format(le1="14.0", le2="15.0", count="15.0", total="4.0")
    same = PER_REQUEST.format(le1="18.0", le2="19.0", count="19.0", total="8.0")
    last = PER_REQUEST.format(le1="20.0", le2="22.0", count="23.0", total="16.0")
    text = "".join(
        f"# scraped at 2026-12-01T10:00:{s:02d}Z\n{body}"
        for s, body in ((0, first), (10, same), (20, last))
    )
    result = parse(tmp_path, text)
    events = result.table("engine_events").filter(pl.col("kind") == "preempted_repeatedly")
    assert events["detail"].to_list() == [
        'vllm:request_num_preemptions_count − vllm:request_num_preemptions_bucket{le="1.0"} '
        "(finished requests preempted 2+ times) = 1 (cumulative since the server started; "
        "engine 0)",
        'vllm:request_num_preemptions_count − vllm:request_num_preemptions_bucket{le="1.0"} '
        "(finished requests preempted 2+ times) = 3 (+2 since the previous scrape; engine 0)",
    ]
    assert [s.rsplit(":", 1)[-1] for s in labels(events["source"])] == ["7", "23"]
    assert result.table("engine_events").filter(pl.col("kind") == "preempted").is_empty()


def test_the_finding_counts_them_per_instance_without_ids(tmp_path):
    from logforensics.findings import preemption
    from logforensics.ingest.inputs import load

    for name, (le1, count) in {"gpu-0.prom": (19, 21), "gpu-1.prom": (20, 23)}.items():
        body = PER_REQUEST.format(le1=le1, le2=count, count=count, total=9)
        (tmp_path / name).write_text(f"# scraped at 2026-12-01T10:00:00Z\n{body}")
    events = load(sorted(tmp_path.iterdir()), CTX).tables["engine_events"]
    (found,) = preemption.find(types.SimpleNamespace(events=events))
    assert found.kind == "preempted_repeatedly"
    assert found.detail.endswith("no request ids): 2 on gpu-0, 3 on gpu-1")
