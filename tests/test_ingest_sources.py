"""One file, once; one instance, many files; a saved /metrics scrape under the instance
its evidence names — on the corpus's real vLLM 0.32 logs and scrapes."""

import gzip
import shutil

import polars as pl

from logforensics import model
from logforensics.ingest import ParseContext
from logforensics.ingest.inputs import load
from logforensics.ingest.sources import instance_name, rotation_order, scrape_instance
from tests.conftest import RECORDINGS, corpus, write

CTX = ParseContext(year=2026)


def accounts(inputs):
    return {a.path.rsplit("/", 1)[-1]: a for a in inputs.files}


def test_scrapes_named_by_port_go_to_the_instance_whose_start_up_names_it():
    inputs = load([corpus("kv-tiny")], CTX)
    assert inputs.addresses == {"instance-1": ["127.0.0.1:8001"], "instance-2": ["127.0.0.1:8002"]}
    files = accounts(inputs)
    assert files["metrics-8001.txt"].instance == "instance-1"
    assert files["metrics-8002.txt"].instance == "instance-2"
    assert any("127.0.0.1:8001" in n for n in files["metrics-8001.txt"].notes)
    stats = inputs.tables["engine_stats"]
    assert sorted(stats["instance"].unique().to_list()) == ["instance-1", "instance-2"]
    # the preemption counter (28 on 8001) is instance-1's
    assert set(inputs.tables["engine_events"]["instance"].to_list()) <= {"instance-1", "instance-2"}


def test_a_scrape_no_evidence_names_belongs_to_no_instance(tmp_path):
    shutil.copy(corpus("kv-tiny") / "instance-1.log", tmp_path / "instance-1.log")
    shutil.copy(corpus("kv-tiny") / "metrics-8002.txt", tmp_path / "metrics-8002.txt")
    inputs = load([tmp_path], CTX)
    scrape = accounts(inputs)["metrics-8002.txt"]
    assert scrape.instance is None
    assert any(n.startswith("metrics of an unknown instance") for n in scrape.notes)
    assert inputs.tables["engine_stats"]["instance"].drop_nulls().unique().to_list() == [
        "instance-1"
    ]
    # --instance still decides
    named = load([tmp_path], CTX, {tmp_path / "metrics-8002.txt": "gpu-b"})
    assert accounts(named)["metrics-8002.txt"].instance == "gpu-b"


def test_scrape_labels_and_names():
    own = {"instance-1": ["127.0.0.1:8001"], "instance-2": [":8002"], "gpu-0": []}
    assert scrape_instance("gpu-0", [], own)[0] == "gpu-0"
    assert scrape_instance("metrics-8001", [], own)[0] == "instance-1"
    assert scrape_instance("scrape", ["localhost:8002"], own)[0] == "instance-2"
    assert scrape_instance("scrape_10.0.0.5_8001", [], own)[0] is None  # another host
    assert scrape_instance("metrics", [], own)[0] is None


def test_the_same_file_twice_is_read_once_and_changes_nothing(tmp_path):
    folder = tmp_path / "incident"
    shutil.copytree(corpus("kv-tiny"), folder)
    once = load([folder], CTX)
    (folder / "instance-1.log.gz").write_bytes(
        gzip.compress((folder / "instance-1.log").read_bytes())
    )
    (folder / "copy.jsonl").symlink_to(folder / "client.jsonl")
    twice = load([folder, folder / "instance-1.log", folder / "client.jsonl"], CTX)
    for name, table in once.tables.items():
        assert twice.tables[name].height == table.height, name
    files = accounts(twice)
    assert files["instance-1.log.gz"].skipped.startswith("read once: its uncompressed copy")
    assert files["copy.jsonl"].skipped.startswith("read once: the same file (a symlink to it)")
    assert any("read once" in n for n in files["instance-1.log"].notes)


def test_rotated_parts_are_one_instance_in_time_order(tmp_path):
    lines = (corpus("kv-tiny") / "instance-2.log").read_bytes().splitlines(keepends=True)
    (tmp_path / "gpu-b.log.2.gz").write_bytes(gzip.compress(b"".join(lines[:90])))
    (tmp_path / "gpu-b.log.1").write_bytes(b"".join(lines[90:180]))
    (tmp_path / "gpu-b.log").write_bytes(b"".join(lines[180:]))
    whole = load([corpus("kv-tiny") / "instance-2.log"], CTX)
    parts = load([tmp_path], CTX)
    assert {a.instance for a in parts.files} == {"gpu-b"}
    assert parts.tables["server_requests"].height == whole.tables["server_requests"].height
    assert parts.coverage["gpu-b"] == whole.coverage["instance-2"]
    order = rotation_order(sorted(tmp_path.iterdir()))
    assert order[tmp_path / "gpu-b.log.2.gz"] == (1, 3) and order[tmp_path / "gpu-b.log"] == (3, 3)


def test_instance_names_of_rotated_and_dated_files(tmp_path):
    names = ["x.log", "x.log.1", "x.log.2.gz", "x-2026-11-29.log.gz", "x.log-20261129.gz"]
    assert {instance_name(tmp_path / n) for n in names} == {"x"}
    assert instance_name(tmp_path / "gpu-0.log") == "gpu-0"
    assert instance_name(tmp_path / "metrics-8001.txt") == "metrics-8001"


def test_a_restart_in_one_log_is_an_engine_event():
    """corpus crash-restart: instance-2 was killed (SIGKILL, no shutdown line) and started
    again, its new process appending to the same log."""
    inputs = load([corpus("crash-restart") / "instance-2.log"], CTX)
    events = inputs.tables["engine_events"]
    (row,) = events.filter(events["kind"] == "restarted").iter_rows(named=True)
    assert row["at"].isoformat().startswith("2026-12-01T15:04:24")
    assert "killed or crashed" in row["detail"]
    assert inputs.addresses == {"instance-2": ["127.0.0.1:8002"]}


def test_configs_and_documents_are_named_not_read_as_logs():
    from logforensics.ingest.sources import not_a_log

    rsyslog = (corpus("syslog-healthy") / "rsyslog.conf").read_text().splitlines()
    assert not_a_log(rsyslog, ".conf") == "an rsyslog configuration"  # its comments are no headings
    haproxy = (corpus("syslog-healthy") / "haproxy.cfg").read_text().splitlines()
    assert not_a_log(haproxy, ".cfg") == "an HAProxy configuration"
    truth = (corpus("kv-tiny") / "GROUND_TRUTH.md").read_text().splitlines()[:40]
    assert not_a_log(truth, ".md") == "a Markdown document"
    assert not_a_log(["key = 1", "other = 2"], ".ini") == "a configuration file"
    # a load tester's YAML config (its list items and comments are no Markdown)
    llt = (RECORDINGS / "traefik-refuse" / "llm-load-test-6.yaml").read_text().splitlines()
    assert not_a_log(llt, ".yaml") == "a YAML document"
    assert not_a_log(["# routes", "- name: a", "- name: b"], ".yml") == "a YAML document"
    caddyfile = (RECORDINGS / "caddy-crash" / "Caddyfile").read_text().splitlines()
    assert not_a_log(caddyfile) == "a Caddy configuration"  # its comments are no headings
    inputs = load([corpus("guidellm-kv") / "GROUND_TRUTH.md"], CTX)  # quotes vLLM lines
    assert inputs.files[0].skipped == "not a log: a Markdown document"


def test_a_prompts_file_is_prose_not_a_log():
    from logforensics.ingest.sources import not_a_log

    prompts = (corpus("compute-loadtest") / "lf-prompts.txt").read_text().splitlines()[:40]
    assert not_a_log(prompts) == "prose (no timestamps, no fields)"
    vllm = (corpus("kv-tiny") / "instance-1.log").read_text().splitlines()[:40]
    assert not_a_log(vllm) is None


RESTART = RECORDINGS / "aiperf-restart"


def test_a_log_restarted_into_a_new_file_is_the_same_instance_with_a_restart():
    """recordings/aiperf-restart: vLLM got SIGTERM mid-run and was started again on its port
    with its output in instance-1-restarted.log; both announce 127.0.0.1:8011, the second
    begins after the first ends: one instance, a restart where the first life shut down."""
    inputs = load([RESTART / "instance-1.log", RESTART / "instance-1-restarted.log"], CTX)
    files = accounts(inputs)
    assert files["instance-1-restarted.log"].instance == "instance-1"
    assert any("a later life of instance-1" in n for n in files["instance-1-restarted.log"].notes)
    assert inputs.addresses == {"instance-1": ["127.0.0.1:8011"]}
    for table in ("server_requests", "engine_stats", "engine_events"):
        assert inputs.tables[table]["instance"].unique().to_list() == ["instance-1"]
    assert list(inputs.coverage) == ["instance-1"]
    events = inputs.tables["engine_events"].sort("at")
    restart = events.filter(pl.col("kind") == "restart")
    assert restart.height == 1
    # at the first life's shutdown line, naming where it came back
    assert model.source_labels(restart["source"]) == [f"{RESTART / 'instance-1.log'}:224"]
    assert (
        "instance-1-restarted.log starts instance-1 again on 127.0.0.1:8011"
        in (restart["detail"][0])
    )
    aborted = events.filter(pl.col("kind") == "aborted")
    assert aborted["detail"].to_list() == ["the engine aborted 3 request(s) in flight at shutdown"]


def _life(tmp_path, name, port, stamp, until=None):
    """A vLLM 0.32 log of one life: the recording's start-up and stats lines, its port and
    times changed."""
    lines = [
        "(APIServer pid=17075) INFO 12-05 {t} [api_utils.py:286] non-default args: "
        "{{'model_tag': '/srv/llm/tiny-llama', 'host': '127.0.0.1', 'port': {p}}}",
        "(APIServer pid=17075) INFO 12-05 {t} [entry.py:140] Starting vLLM server on "
        "http://127.0.0.1:{p}",
        "(APIServer pid=17075) INFO 12-05 {t} [loggers.py:335] Engine 000: Avg prompt throughput: "
        "0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, Running: 0 reqs, Waiting: 0 "
        "reqs, CPU KV cache usage: 0.0%, Prefix cache hit rate: 0.0%",
    ]
    lines = [x.format(t=stamp, p=port) for x in lines]
    lines += [lines[-1].replace(stamp, until)] if until else []
    return write(tmp_path / name, "\n".join(lines) + "\n")


def test_lives_of_one_instance_need_one_address_and_no_overlap(tmp_path):
    """Only positive evidence joins two logs: another port, overlapping spans or an unrelated
    name leave them two instances; a killed first life (no shutdown line) gives its restart
    at its last line."""
    joined = tmp_path / "joined"
    _life(joined, "gpu-0.log", 8011, "23:40:00")
    _life(joined, "gpu-0-restarted.log", 8011, "23:45:00")
    inputs = load([joined], CTX)
    assert list(inputs.coverage) == ["gpu-0"]
    restart = inputs.tables["engine_events"].filter(pl.col("kind") == "restart")
    assert model.source_labels(restart["source"]) == [f"{joined / 'gpu-0.log'}:3"]
    assert "killed or crashed" in restart["detail"][0]
    for case, second in (
        ("port", ("gpu-0-restarted.log", 8012, "23:45:00")),
        ("overlap", ("gpu-0-restarted.log", 8011, "23:39:00", "23:41:00")),
        ("name", ("gpu-1.log", 8011, "23:45:00")),
    ):
        folder = tmp_path / case
        _life(folder, "gpu-0.log", 8011, "23:40:00")
        _life(folder, *second)
        inputs = load([folder], CTX)
        assert len(inputs.coverage) == 2, case
        assert inputs.tables["engine_events"].filter(pl.col("kind") == "restart").is_empty()
