"""The rendered reports: self-contained, escaped, showing the right numbers."""

import re

import pytest

from logforensics.analysis import analyze
from logforensics.report import render_html, render_markdown
from tests.conftest import write

HOSTILE = '<script>alert("x")</script>'


@pytest.fixture(scope="module")
def seed_html():
    from tests.conftest import FIXTURES

    return render_html(analyze([FIXTURES / "seed-two-instances"]))


def test_html_is_self_contained(seed_html):
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", seed_html)
    assert "<link" not in seed_html and "@import" not in seed_html
    images = re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', seed_html)
    assert len(images) == 4


def test_html_step_table_shows_the_counts(seed_html):
    rows = re.findall(
        r"<tr><td>(\d+)</td><td>[^<]+</td><td>(\d+)</td><td>(\d+)</td>\s*<td[^>]*>(\d+)</td><td[^>]*>(\d+)</td>\s*<td>(\d+)</td><td>(\d+)</td>",
        seed_html,
    )
    assert rows == [
        ("1", "10", "7", "3", "3", "5", "2"),
        ("2", "13", "8", "5", "5", "5", "3"),
        ("3", "20", "15", "5", "5", "5", "10"),
    ]
    assert seed_html.count("HTTP Error 503: Service Unavailable") == 13


def test_hostile_log_text_is_escaped(tmp_path, seed_bundle):
    import shutil

    folder = tmp_path / "b"
    shutil.copytree(seed_bundle, folder)
    log = folder / "instance-1.log"
    log.write_text(log.read_text() + f"2026-02-24T06:29:59.000000001Z {HOSTILE}\n")
    client = folder / "client" / "results.jsonl"
    client.write_text(client.read_text().replace("HTTP Error 503: Service Unavailable", HOSTILE, 1))
    write(folder / f"{HOSTILE}.log", "junk\n")
    html = render_html(analyze([folder]))
    assert HOSTILE not in html
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in html


def test_markdown_table_escapes_pipes(tmp_path, seed_bundle):
    import shutil

    folder = tmp_path / "b"
    shutil.copytree(seed_bundle, folder)
    write(
        folder / "gpu|3.log",
        "INFO 02-24 05:50:00 [loggers.py:1] Engine 000: Running: 0 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%\n"
        "garbage | with a pipe\n"
        "INFO 02-24 06:35:00 [loggers.py:1] Engine 000: Running: 0 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%\n",
    )
    md = render_markdown(analyze([folder]))
    assert md.startswith("### Bottleneck: the front proxy (confidence 90%)")
    assert (
        "| step | sent | ok | failed | unreached | gpu\\|3 | instance-1 | instance-2 | P50 s | P95 s |"
        in md
    )
    finding = next(line for line in md.splitlines() if line.startswith("- unparsed lines"))
    assert "gpu\\|3.log: 1 of 3 lines not understood" in finding
