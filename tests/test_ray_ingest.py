"""`ingest --ray` on a real local Ray cluster (two CPUs): one task per file gives the
dataset a local `ingest` gives, a failed task names its file while the others land, and
a rerun writes only the missing entries. Ray is the optional `ray` extra: the core never
imports it."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest
from click.testing import CliRunner

from logforensics.cli import cli
from tests.conftest import corpus, incident_inputs

ray = pytest.importorskip("ray", reason="the `ray` extra is not installed (make test installs it)")


@pytest.fixture(scope="module")
def cluster():
    """A real local Ray cluster for the module; `ingest --ray` joins the running session."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def analysis(runner: CliRunner, args: list[str], out) -> tuple[int, dict]:
    result = runner.invoke(cli, ["analyze", *args, "--json", str(out), "-q"])
    assert result.exit_code in (0, 2), result.output
    data = json.loads(out.read_text(encoding="utf-8"))
    data.pop("generated_at")
    return result.exit_code, data


def ray_ingest(runner: CliRunner, paths, folder):
    return runner.invoke(cli, ["ingest", *map(str, paths), "--tables", str(folder), "--ray", "-q"])


@pytest.fixture
def incident(tmp_path, monkeypatch):
    """kv-tiny copied and named relative to the working folder (a worker's is its own)."""
    folder = tmp_path / "kv-tiny"
    shutil.copytree(corpus("kv-tiny"), folder)
    monkeypatch.chdir(tmp_path)
    return [p.relative_to(tmp_path) for p in incident_inputs(folder)]


def test_ray_tasks_give_the_analysis_the_files_give(cluster, tmp_path, incident):
    runner = CliRunner()
    result = ray_ingest(runner, incident, "ds")
    assert result.exit_code == 0, result.output
    plan = json.loads((tmp_path / "ds" / "plan.json").read_text())
    manifest = json.loads((tmp_path / "ds" / "dataset.json").read_text())
    assert plan["inputs"] == [str(p) for p in incident]
    assert manifest["entries"] == [f"{i:05d}" for i in range(len(incident))]
    assert manifest["errors"] == []
    _, direct = analysis(runner, [str(p) for p in incident], tmp_path / "direct.json")
    _, via_ray = analysis(runner, ["--tables", "ds"], tmp_path / "ray.json")
    assert via_ray == direct
    assert direct["totals"]["sent"] > 0


def test_big_logs_read_in_pieces_give_the_same_analysis(cluster, tmp_path, incident):
    """With 4 KiB pieces every instance log and the proxy's log of kv-tiny (48-62 KB) is cut
    into pieces, each read by a task and joined by another: the same analysis."""
    runner = CliRunner()
    result = runner.invoke(
        cli,
        ["ingest", *map(str, incident), "--tables", "ds", "--ray", "--piece-size", "4K", "-q"],
    )
    assert result.exit_code == 0, result.output
    read_in = re.search(r"read in pieces: (\d+) file\(s\), (\d+) pieces", result.output)
    assert read_in and int(read_in[1]) >= 3 and int(read_in[2]) > 3 * int(read_in[1])
    _, direct = analysis(runner, [str(p) for p in incident], tmp_path / "direct.json")
    _, via_pieces = analysis(runner, ["--tables", "ds"], tmp_path / "pieces.json")
    assert via_pieces == direct


def test_a_piece_size_that_is_no_size_is_a_usage_error(tmp_path, incident):
    result = CliRunner().invoke(
        cli, ["ingest", str(incident[0]), "--tables", "ds", "--ray", "--piece-size", "lots"]
    )
    assert result.exit_code == 2
    assert "not a size: 'lots'" in result.output


def test_a_failed_task_names_its_file_the_others_land_and_a_rerun_writes_only_it(
    cluster, tmp_path, incident
):
    runner = CliRunner()
    assert ray_ingest(runner, incident, "ds").exit_code == 0
    ds = tmp_path / "ds"
    # the fourth file's entry damaged (its folder now a plain file, which no task can
    # write into) and the run left unfinished: no dataset.json
    (ds / "dataset.json").unlink()
    shutil.rmtree(ds / "files" / "00003")
    (ds / "files" / "00003").write_text("in the way\n")
    others = {
        p: p.stat().st_mtime_ns for p in ds.glob("files/*/file.json") if p.parent.name != "00003"
    }
    assert len(others) == len(incident) - 1

    damaged = json.loads((ds / "plan.json").read_text())["inputs"][3]
    failed = ray_ingest(runner, incident, "ds")
    assert failed.exit_code == 2
    assert f"{damaged}: not ingested: its task failed: FileExistsError" in failed.output
    assert f"({len(others)} kept from an earlier run)" in failed.output
    manifest = json.loads((ds / "dataset.json").read_text())
    assert "00003" not in manifest["entries"]
    assert len(manifest["entries"]) == len(incident) - 1
    code, partial = analysis(runner, ["--tables", "ds"], tmp_path / "partial.json")
    assert code == 2
    assert any(e.startswith(f"{damaged}: not ingested") for e in partial["errors"])
    assert {p: p.stat().st_mtime_ns for p in others} == others  # the others not rewritten

    (ds / "files" / "00003").unlink()
    rerun = ray_ingest(runner, incident, "ds")
    assert rerun.exit_code == 0, rerun.output
    assert f"({len(incident) - 1} kept from an earlier run)" in rerun.output
    assert {p: p.stat().st_mtime_ns for p in others} == others
    _, direct = analysis(runner, [str(p) for p in incident], tmp_path / "direct.json")
    _, finished = analysis(runner, ["--tables", "ds"], tmp_path / "finished.json")
    assert finished == direct


def test_a_rerun_over_other_files_is_refused(cluster, tmp_path, incident):
    runner = CliRunner()
    assert ray_ingest(runner, incident[:2], "ds").exit_code == 0
    other = ray_ingest(runner, incident[:3], "ds")
    assert other.exit_code == 2
    assert "a dataset of other files or options" in other.output


def test_an_unfinished_dataset_is_named_so_by_analyze(tmp_path, incident):
    runner = CliRunner()
    local = runner.invoke(cli, ["ingest", *map(str, incident), "--tables", "ds", "-q"])
    assert local.exit_code == 0
    (tmp_path / "ds" / "dataset.json").unlink()
    result = runner.invoke(cli, ["analyze", "--tables", "ds", "--json", "x.json", "-q"])
    assert result.exit_code == 2
    assert "an unfinished dataset" in result.output


def test_without_ray_the_option_says_how_to_install_it(tmp_path, incident, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    result = CliRunner().invoke(cli, ["ingest", str(incident[0]), "--tables", "ds", "--ray"])
    assert result.exit_code == 2
    assert "pip install 'logforensics[ray]'" in result.output


def test_the_core_never_imports_ray(tmp_path):
    """`analyze` and a local `ingest` run without Ray in their process."""
    code = (
        "import sys; from logforensics.cli import cli; "
        "sys.argv = ['logforensics', 'ingest', sys.argv[1], '--tables', sys.argv[2], '-q']; "
        "\ntry: cli()\nexcept SystemExit: pass\n"
        "assert 'ray' not in sys.modules, 'ray imported'; print('no ray')"
    )
    source = incident_inputs(corpus("kv-tiny"))[0]
    out = subprocess.run(
        [sys.executable, "-c", code, str(source), str(tmp_path / "ds")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "no ray"
