"""A real Prometheus serving a recorded data directory, for `make validate` and the tests.

A recording whose engines were scraped by Prometheus keeps its TSDB
(``prometheus-data/``): the evidence a user has when the pods are gone. It is
served as Prometheus serves it — ``prometheus --storage.tsdb.path`` on a copy
(Prometheus writes to its storage on start-up), nothing to scrape, on a free
loopback port — and `logforensics analyze --prometheus URL` reads it as it
reads any server. Debian's `prometheus` (``.ci/run`` installs it), or
``$LOGFORENSICS_PROMETHEUS``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

DATA_DIR = "prometheus-data"  # a recording's Prometheus storage, served rather than read
READY_WITHIN_S = 30.0


class PrometheusUnavailable(RuntimeError):
    """No `prometheus` binary, or it did not become ready; the message says which."""


def binary() -> str | None:
    return os.environ.get("LOGFORENSICS_PROMETHEUS") or shutil.which("prometheus")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serving(data: Path) -> Iterator[str]:
    """The URL of a Prometheus serving a copy of `data`; stopped on leaving."""
    program = binary()
    if program is None:
        raise PrometheusUnavailable("no prometheus binary (apt-get install prometheus)")
    with tempfile.TemporaryDirectory(prefix="lf-prometheus-") as tmp:
        root = Path(tmp)
        shutil.copytree(data, root / "data")
        for lock in (root / "data").glob("lock"):
            lock.unlink()  # a copy of a server's live storage may hold its lock file
        (root / "prometheus.yml").write_text("global:\n  scrape_interval: 1h\n")
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        log = (root / "prometheus.log").open("w")
        server = subprocess.Popen(
            [
                program,
                f"--config.file={root / 'prometheus.yml'}",
                f"--storage.tsdb.path={root / 'data'}",
                "--storage.tsdb.retention.time=100y",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            _wait_ready(url, server, root / "prometheus.log")
            yield url
        finally:
            server.terminate()
            server.wait(timeout=20)
            log.close()


def _wait_ready(url: str, server: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + READY_WITHIN_S
    while True:
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=1) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            raise PrometheusUnavailable(f"prometheus did not start: {log.read_text()[-500:]}")
        time.sleep(0.2)
