"""The command line as a user meets it: outputs, one-line verdict, exit codes."""

import json

from click.testing import CliRunner

from logforensics.cli import cli
from tests.conftest import report_json, write


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def test_analyze_writes_three_reports_and_prints_the_verdict(tmp_path, seed_bundle):
    html, js, md = tmp_path / "r.html", tmp_path / "r.json", tmp_path / "r.md"
    result = run("analyze", seed_bundle, "-o", html, "--json", js, "--md", md)
    assert result.exit_code == 0, result.output
    verdict_lines = [line for line in result.output.splitlines() if line.startswith("verdict:")]
    assert verdict_lines == [
        "verdict: front_proxy (confidence 0.90) — 43 sent, 30 ok, 13 failed, 13 never reached an instance"
    ]
    data = json.loads(js.read_text())
    assert data["verdict"]["bottleneck"] == "front_proxy"
    assert "<h1>Bottleneck: the front proxy</h1>" in html.read_text()
    assert "| 3 | 20 | 15 | 5 | 5 | 5 | 10 |" in md.read_text()


def test_json_to_stdout_is_pure_json(tmp_path, seed_bundle):
    result = CliRunner().invoke(cli, ["analyze", str(seed_bundle), "--json", "-"])
    assert result.exit_code == 0
    assert json.loads(result.stdout)["totals"]["sent"] == 43


def test_missing_path_is_exit_2_but_the_rest_is_analysed(tmp_path, seed_bundle):
    js = tmp_path / "r.json"
    missing = tmp_path / "nope.log"
    result = run("analyze", seed_bundle, missing, "--json", js)
    assert result.exit_code == 2
    assert f"error: {missing}: no such file or folder" in result.output
    data = json.loads(js.read_text())
    assert data["verdict"]["bottleneck"] == "front_proxy"
    assert data["errors"] == [f"{missing}: no such file or folder"]


def test_named_file_of_unknown_format_is_exit_2(tmp_path, seed_bundle):
    odd = write(tmp_path / "nginx.conf", "events {}\nhttp { server { listen 80; } }\n")
    result = run("analyze", seed_bundle / "instance-1.log", odd)
    assert result.exit_code == 2
    assert f"{odd}: not a log: an nginx configuration" in result.output


def test_unknown_files_found_in_a_folder_are_skipped_not_errors(tmp_path, seed_bundle):
    import shutil

    folder = tmp_path / "bundle"
    shutil.copytree(seed_bundle, folder)
    write(folder / "README.md", "# notes\nKim restarted the proxy at 06:30.\n")
    (folder / "screenshot.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    js = tmp_path / "r.json"
    result = run("analyze", folder, "--json", js)
    assert result.exit_code == 0, result.output
    skipped = {
        i["path"].rsplit("/", 1)[-1]: i["skipped"]
        for i in json.loads(js.read_text())["inputs"]
        if i["skipped"]
    }
    assert set(skipped) == {"README.md", "screenshot.png", "expected.json"}


def test_nothing_recognisable_is_exit_2(tmp_path):
    folder = tmp_path / "empty"
    write(folder / "notes.txt", "nothing to see\n")
    result = run("analyze", folder)
    assert result.exit_code == 2
    assert "nothing recognisable" in result.output


def test_empty_folder_and_empty_file(tmp_path):
    (tmp_path / "void").mkdir()
    result = run("analyze", tmp_path / "void")
    assert result.exit_code == 2 and "folder holds no files" in result.output
    empty = write(tmp_path / "empty.log", "")
    result = run("analyze", empty)
    assert result.exit_code == 2 and f"{empty}: empty file" in result.output


def test_instance_option_names_a_log(tmp_path, seed_bundle):
    js = tmp_path / "r.json"
    result = run(
        "analyze",
        seed_bundle,
        "--json",
        js,
        "--instance",
        f"gpu-a={seed_bundle / 'instance-1.log'}",
    )
    assert result.exit_code == 0
    names = [i["name"] for i in json.loads(js.read_text())["instances"]]
    assert names == ["gpu-a", "instance-2"]


def test_bad_instance_option_is_a_usage_error(seed_bundle):
    result = CliRunner().invoke(cli, ["analyze", str(seed_bundle), "--instance", "no-equals-sign"])
    assert result.exit_code == 2
    assert "expected NAME=PATH" in result.output


def test_loadtest_is_registered():
    result = run("--help")
    assert "analyze" in result.output and "loadtest" in result.output


def test_fail_on_gates_exit_3_and_say_which_held(tmp_path, seed_bundle):
    result = run("analyze", seed_bundle, "--fail-on", "unreached>0", "--fail-on", "bottleneck==gpu")
    assert result.exit_code == 3
    held = [
        line for line in result.output.splitlines() if line.startswith("logforensics: fail-on:")
    ]
    assert len(held) == 1 and "unreached>0" in held[0] and "13" in held[0]
    assert run("analyze", seed_bundle, "--fail-on", "success<0.5").exit_code == 0  # 30/43 ok


def test_fail_on_rejects_a_malformed_condition(seed_bundle):
    result = CliRunner().invoke(cli, ["analyze", str(seed_bundle), "--fail-on", "p95 is bad"])
    assert result.exit_code == 2
    assert "--fail-on" in result.output


def test_bad_input_outranks_a_gate(tmp_path, seed_bundle):
    result = run("analyze", seed_bundle, tmp_path / "missing.log", "--fail-on", "unreached>0")
    assert result.exit_code == 2


def test_redact_reaches_every_output(tmp_path, seed_bundle):
    html, js, md = tmp_path / "r.html", tmp_path / "r.json", tmp_path / "r.md"
    result = run("analyze", seed_bundle, "--redact", "-o", html, "--json", js, "--md", md)
    assert result.exit_code == 0
    for path in (html, js, md):
        assert "10.0.0.2" not in path.read_text(), path.name
    assert any(f["kind"] == "redacted" for f in json.loads(js.read_text())["findings"])


def test_detect_lists_formats_counts_and_pods(tmp_path):
    from tests.conftest import FIXTURES

    result = run("detect", "--json", FIXTURES / "healthy", FIXTURES / "kv-cache-exhaustion")
    assert result.exit_code == 0
    rows = {r["path"].rsplit("/", 1)[-1]: r for r in json.loads(result.output)}
    pods = rows["pods.log"]
    assert pods["instance"] == "vllm-0, vllm-1, vllm-2"
    assert pods["lines"] == pods["parsed"] + pods["noise"] + pods["unparsed"]
    assert pods["records"]["server_requests"] == 69
    assert rows["results.csv"]["records"] == {"client_requests": 52}
    assert rows["llama-8b-0.log"]["formats"] == [
        "vllm_stats",
        "uvicorn_access",
        "vllm_lifecycle",
        "vllm_pressure",
    ]
    assert rows["expected.json"]["skipped"] == "no known format"
    table = run("detect", FIXTURES / "healthy").output
    assert "pods.log" in table and "vllm-0, vllm-1, vllm-2" in table


def test_detect_exit_codes(tmp_path):
    assert run("detect", tmp_path / "missing").exit_code == 2
    notes = write(tmp_path / "notes.txt", "nothing here\n")
    assert run("detect", notes).exit_code == 2


def test_kubectl_prefix_gives_each_pod_its_own_coverage(tmp_path):
    from logforensics.analysis import analyze
    from tests.conftest import FIXTURES

    got = report_json(analyze([FIXTURES / "healthy"]))
    assert set(got["coverage"]) == {"vllm-0", "vllm-1", "vllm-2"}


def test_one_instance_may_own_several_rotated_files(tmp_path, seed_bundle):
    js = tmp_path / "r.json"
    result = run(
        "analyze",
        seed_bundle,
        "--json",
        js,
        "--instance",
        f"gpu={seed_bundle / 'instance-1.log'}",
        "--instance",
        f"gpu={seed_bundle / 'instance-2.log'}",
    )
    assert result.exit_code == 0
    got = json.loads(js.read_text())
    assert [i["name"] for i in got["instances"]] == ["gpu"]
    assert got["instances"][0]["requests"] == 30
