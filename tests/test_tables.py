"""`ingest --tables` + `analyze --tables` give what `analyze` gives on the same files, also
from datasets written by separate ingests over parts of the files (decisions across files
are made when the datasets are combined)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from click.testing import CliRunner

from logforensics import tables
from logforensics.cli import cli
from tests.conftest import FIXTURES, corpus, held_as_one_value, incident_inputs

sys.path.insert(0, str(FIXTURES.parent / "bench"))
import generate  # noqa: E402


def analysis_json(runner: CliRunner, args: list[str], out) -> dict:
    result = runner.invoke(cli, ["analyze", *args, "--json", str(out), "-q"])
    assert result.exit_code in (0, 2), result.output
    data = json.loads(out.read_text(encoding="utf-8"))
    data.pop("generated_at")
    return data


def ingest(runner: CliRunner, paths, folder) -> None:
    result = runner.invoke(cli, ["ingest", *map(str, paths), "--tables", str(folder), "-q"])
    assert result.exit_code in (0, 2), result.output


def test_a_dataset_gives_the_same_analysis_as_its_files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    bundle, _, _ = generate.ensure(30_000, tmp_path / "scratch")
    runner = CliRunner()
    direct = analysis_json(runner, [str(bundle)], tmp_path / "direct.json")
    ingest(runner, [bundle], tmp_path / "whole")
    assert analysis_json(runner, ["--tables", "whole"], tmp_path / "t.json") == direct


@pytest.mark.parametrize("name", ["kv-tiny", "aiperf-haproxy"])
def test_datasets_of_two_separate_ingests_combine_as_one_run(tmp_path, monkeypatch, name):
    """kv-tiny's /metrics scrapes are mapped by the instance logs' start-up addresses and its
    client console repeats client.jsonl: the halves put each in another dataset."""
    folder = tmp_path / name
    shutil.copytree(corpus(name), folder)
    monkeypatch.chdir(tmp_path)
    inputs = [p.relative_to(tmp_path) for p in incident_inputs(folder)]
    first, second = inputs[::2], inputs[1::2]
    runner = CliRunner()
    # the files in the order the two datasets list them
    direct = analysis_json(runner, [str(p) for p in first + second], tmp_path / "direct.json")
    ingest(runner, first, tmp_path / "a")
    ingest(runner, second, tmp_path / "b")
    combined = analysis_json(runner, ["--tables", "a", "--tables", "b"], tmp_path / "ab.json")
    assert combined == direct


def test_labels_written_as_plain_strings_read_as_the_tool_writes_them(tmp_path, monkeypatch):
    """Another engine writing the dataset holds no categoricals: its label columns are
    plain strings. They are read as labels, and the analysis is the same."""
    import polars as pl

    from logforensics import model

    monkeypatch.chdir(tmp_path)
    bundle, _, _ = generate.ensure(30_000, tmp_path / "scratch")
    runner = CliRunner()
    ingest(runner, [bundle], tmp_path / "whole")
    direct = analysis_json(runner, ["--tables", "whole"], tmp_path / "direct.json")
    relabelled = 0
    for parquet in (tmp_path / "whole").glob("files/*/*.parquet"):
        frame = pl.read_parquet(parquet)
        labels = [c for c, dtype in frame.schema.items() if dtype == model.LABEL]
        assert labels == [c for c, d in model.SCHEMAS[parquet.stem].items() if d == model.LABEL]
        frame.with_columns(pl.col(labels).cast(pl.Utf8)).write_parquet(parquet)
        relabelled += frame.height > 0 and bool(labels)
    assert relabelled >= 3  # the instances' and the proxy's rows, at least
    assert analysis_json(runner, ["--tables", "whole"], tmp_path / "plain.json") == direct


def test_a_version_2_dataset_with_its_peer_column_reads_the_same(tmp_path, monkeypatch):
    """Version 2 wrote uvicorn's `peer` in `server_requests`, a column 3 has not, and its
    statuses as Int64; an unknown version is refused, naming the versions read."""
    import polars as pl

    monkeypatch.chdir(tmp_path)
    shutil.copytree(FIXTURES / "seed-two-instances", tmp_path / "seed")
    runner = CliRunner()
    ingest(runner, ["seed"], tmp_path / "whole")
    direct = analysis_json(runner, ["--tables", "whole"], tmp_path / "direct.json")
    manifest_path = tmp_path / "whole" / "dataset.json"
    manifest = json.loads(manifest_path.read_text())
    manifest_path.write_text(json.dumps({**manifest, "version": 2}))
    written = 0
    for parquet in (tmp_path / "whole").glob("files/*/server_requests.parquet"):
        frame = pl.read_parquet(parquet)
        frame.with_columns(
            pl.lit("10.0.0.2:40110").alias("peer"), pl.col("http_status").cast(pl.Int64)
        ).write_parquet(parquet)
        written += frame.height
    assert written
    assert analysis_json(runner, ["--tables", "whole"], tmp_path / "v2.json") == direct
    manifest_path.write_text(json.dumps({**manifest, "version": 1}))
    result = runner.invoke(cli, ["analyze", "--tables", "whole", "--json", "x.json"])
    assert result.exit_code == 2
    assert "dataset of version 2, 3, 4, 5 or 6 (found logforensics-tables 1)" in result.output


def test_the_same_file_in_two_datasets_is_read_once(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shutil.copytree(FIXTURES / "seed-two-instances", tmp_path / "seed")
    runner = CliRunner()
    ingest(runner, ["seed"], tmp_path / "a")
    ingest(runner, ["seed/instance-1.log"], tmp_path / "b")
    direct = analysis_json(runner, ["seed"], tmp_path / "direct.json")
    combined = analysis_json(runner, ["--tables", "a", "--tables", "b"], tmp_path / "ab.json")
    assert combined["totals"] == direct["totals"]
    (log,) = [f for f in combined["inputs"] if f["path"] == "seed/instance-1.log"]
    assert "reached twice, read once: the same file (in two datasets)" in log["notes"]


def test_a_folder_that_is_no_dataset_is_a_bad_input(tmp_path):
    (tmp_path / "empty").mkdir()
    result = CliRunner().invoke(cli, ["analyze", "--tables", str(tmp_path / "empty")])
    assert result.exit_code == 2
    assert "no readable dataset.json" in result.output
    with pytest.raises(tables.TablesError):
        tables.read_datasets([tmp_path / "empty"])


def test_paths_or_tables_not_both(tmp_path):
    result = CliRunner().invoke(cli, ["analyze", str(FIXTURES / "healthy"), "--tables", "."])
    assert result.exit_code == 2 and "one or the other" in result.output


def test_the_ingest_command_runs_as_a_program(tmp_path):
    out = tmp_path / "t"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "logforensics.cli",
            "ingest",
            str(FIXTURES / "healthy"),
            "--tables",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    manifest = json.loads((out / "dataset.json").read_text())
    assert (manifest["format"], manifest["version"]) == (
        tables.TABLES_FORMAT,
        tables.TABLES_VERSION,
    )
    entries = sorted((out / "files").iterdir())
    assert entries and all((e / "file.json").exists() for e in entries)


def test_a_status_past_int16_or_a_count_past_int32_is_unknown_not_a_crash():
    """Statuses are Int16 (`model.STATUS`), a client's steps, indexes and token counts
    Int32 (`model.COUNT`): a client file's 70000 is no HTTP status and 2**40 no index,
    read as unknown; -1 (some testers' "no answer") is kept."""
    import polars as pl

    from logforensics import model

    frame = pl.DataFrame({"http_status": [200, 70000, -1, None], "index": [0, 2**40, 7, None]})
    conformed = model.conform("client_requests", frame)
    assert conformed.schema["http_status"] == model.STATUS
    assert conformed.schema["index"] == model.COUNT
    assert conformed["http_status"].to_list() == [200, None, -1, None]
    assert conformed["index"].to_list() == [0, None, 7, None]


@pytest.mark.parametrize("name", ["field-high-rate", "aiperf-restart", "traefik-refuse"])
def test_a_spilled_parse_gives_the_same_analysis(tmp_path, name, monkeypatch):
    """`--spill` (what `analyze` does on its own past its share of memory) parses through a
    dataset on disk: on real recordings, the same report as the files held in memory."""
    from logforensics import analysis

    read_back = []
    reading = analysis.read_tables
    monkeypatch.setattr(analysis, "read_tables", lambda *a: read_back.append(a[0]) or reading(*a))
    paths = [str(p) for p in incident_inputs(corpus(name))]
    runner = CliRunner()
    held = analysis_json(runner, [*paths, "--no-spill"], tmp_path / "held.json")
    assert not read_back
    spilled = analysis_json(runner, [*paths, "--spill"], tmp_path / "spilled.json")
    assert len(read_back) == 1 and not read_back[0][0].exists()  # (its folder is gone)
    assert spilled == held
    assert held["totals"]["sent"] > 0  # (a report of something)


def test_a_dataset_is_written_file_by_file_as_each_parse_completes(tmp_path, seed_bundle):
    """Each file's entry is on disk when its parse is handed over, and only its account is
    kept: a dataset's writer never holds every file's tables."""
    from logforensics.analysis import Options, parse_context
    from logforensics.ingest.inputs import read

    folder = tmp_path / "ds"
    ctx = parse_context([seed_bundle], Options())[0]

    class Watching(tables.EntryWriter):
        def take(self, index, parsed):
            kept = super().take(index, parsed)
            on_disk = (self.plan.entry(index) / tables.ENTRY_FILE).is_file()
            self.seen.append((on_disk, parsed.result is not None and bool(parsed.result.tables)))
            assert kept.result is None or kept.result.tables == {}
            return kept

    writer = Watching(folder, ctx)
    writer.seen = []
    done = read([seed_bundle], ctx, jobs=1, sink=writer)
    assert writer.finish(done, None) == len(done.files) == len(writer.seen) >= 3
    assert all(on_disk for on_disk, _ in writer.seen)
    assert any(had_tables for _, had_tables in writer.seen)
    assert all(p.result is None or p.result.tables == {} for p in done.parsed)
    # read back, the dataset is what the files give
    runner = CliRunner()
    assert analysis_json(runner, ["--tables", str(folder)], tmp_path / "a.json") == (
        analysis_json(runner, [str(seed_bundle)], tmp_path / "b.json")
    )


def test_a_dataset_read_back_holds_one_valued_columns_as_one_value(tmp_path):
    """Parquet gives every column in full; each table read holds a column of one value as
    that value (as the parse does) before the next is read, a label written as text
    included."""
    from logforensics import model

    bundle, _, _ = generate.ensure(30_000, tmp_path / "scratch")
    ingest(CliRunner(), [bundle], tmp_path / "ds")
    read = tables.read_datasets([tmp_path / "ds"])
    checked = 0
    for parsed in read.read.parsed:
        for name, frame in (parsed.result.tables if parsed.result else {}).items():
            for column in model.one_valued(frame) if frame.height >= 2048 else ():
                assert held_as_one_value(frame, column), (parsed.source.display, name, column)
                checked += 1
    assert checked


def test_the_parse_spills_past_its_share_of_memory(tmp_path, monkeypatch):
    from logforensics import analysis

    big = tmp_path / "big.log"
    big.write_bytes(b"x" * 4096)
    assert analysis.spills([big], True) and not analysis.spills([big], False)
    monkeypatch.setattr(analysis, "SPILL_SHARE", 4096 / 2 / analysis_memory())
    assert analysis.spills([tmp_path], None)  # (a folder: its files' sizes)
    monkeypatch.setattr(analysis, "SPILL_SHARE", 4096 * 2 / analysis_memory())
    assert not analysis.spills([tmp_path], None)


def analysis_memory() -> int:
    import os

    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
