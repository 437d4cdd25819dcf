"""The demo report as a user sees it: headless Chromium, driven over the DevTools protocol.

No browser-automation dependency: a tiny CDP client (HTTP-free websocket over a
socket, standard library only) talks to Debian's `chromium`. `.ci/run` installs
it when missing; where it cannot be installed the test skips, loudly.

Screenshots land in reports/ (seed-two-instances-390.png, -1280.png and
-print.png, hop-chain-1280.png) for a human to look at.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import time
from pathlib import Path

import polars as pl
import pytest

from logforensics.analysis import analyze
from logforensics.report import build_report, render_html
from logforensics.report.ledger import NOT_OK, build_ledger
from tests.conftest import DATA, FIXTURES, ROOT, corpus_incidents, incident_inputs

CHROMIUM = os.environ.get("LOGFORENSICS_CHROMIUM") or shutil.which("chromium")
REPORTS = ROOT / "reports"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--hide-scrollbars",
    "--mute-audio",
    "--remote-debugging-port=0",
    "--remote-allow-origins=*",
]

pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason=(
        "!!! CHROMIUM NOT INSTALLED: the report was NOT checked in a browser !!! "
        "Install Debian's `chromium` (apt-get install -y --no-install-recommends chromium; "
        ".ci/run does this) or point LOGFORENSICS_CHROMIUM at a Chrome binary."
    ),
)


# ------------------------------------------------------------------ a tiny CDP client


class WebSocket:
    """Just enough RFC 6455 for the DevTools protocol: text frames, client-masked."""

    def __init__(self, url: str, timeout: float = 20.0):
        m = re.match(r"ws://([^/:]+):(\d+)(/.*)", url)
        assert m, url
        host, port, path = m.group(1), int(m.group(2)), m.group(3)
        self.sock = socket.create_connection((host, port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            (
                f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                "Sec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("websocket handshake: connection closed")
            head += chunk
        head, self._buf = head.split(b"\r\n\r\n", 1)
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise ConnectionError(f"websocket handshake refused: {head[:200]!r}")

    def _read(self, n: int) -> bytes:
        while len(self._buf) < n:
            chunk = self.sock.recv(max(65536, n - len(self._buf)))
            if not chunk:
                raise ConnectionError("websocket closed")
            self._buf += chunk
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def send(self, text: str) -> None:
        data = text.encode()
        head = bytearray([0x81])  # FIN + text
        n = len(data)
        if n < 126:
            head.append(0x80 | n)
        elif n < 1 << 16:
            head.append(0x80 | 126)
            head += struct.pack(">H", n)
        else:
            head.append(0x80 | 127)
            head += struct.pack(">Q", n)
        mask = os.urandom(4)
        head += mask
        self.sock.sendall(bytes(head) + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def recv(self) -> str:
        parts = []
        while True:
            b0, b1 = self._read(2)
            opcode, n = b0 & 0x0F, b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            mask = self._read(4) if b1 & 0x80 else None
            payload = self._read(n)
            if mask:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            if opcode == 0x8:
                raise ConnectionError("websocket closed by the browser")
            if opcode == 0x9:  # ping → pong
                continue
            if opcode in (0x0, 0x1, 0x2):
                parts.append(payload)
                if b0 & 0x80:
                    return b"".join(parts).decode()

    def close(self) -> None:
        self.sock.close()


class Browser:
    """One headless Chromium, one page (a flattened target session)."""

    def __init__(self, profile: Path):
        self.proc = subprocess.Popen(
            [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.stderr: list[str] = []
        url = None
        deadline = time.monotonic() + 20
        while url is None and time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.stderr.append(line)
            m = re.search(r"DevTools listening on (ws://\S+)", line)
            url = m.group(1) if m else None
        if url is None:
            self.quit()
            raise RuntimeError("chromium did not start:\n" + "".join(self.stderr[-20:]))
        self.ws = WebSocket(url)
        self._id = 0
        self.events: list[dict] = []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)[
            "sessionId"
        ]

    def call(self, method: str, session: bool = False, **params) -> dict:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params}
        if session:
            msg["sessionId"] = self.session
        self.ws.send(json.dumps(msg))
        while True:
            reply = json.loads(self.ws.recv())
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)

    def page(self, method: str, **params) -> dict:
        return self.call(method, session=True, **params)

    def wait_for(self, event: str, timeout: float = 15.0) -> dict:
        deadline = time.monotonic() + timeout
        seen = 0
        while time.monotonic() < deadline:
            for e in self.events[seen:]:
                if e["method"] == event:
                    self.events.remove(e)
                    return e
            seen = len(self.events)
            self.events.append(json.loads(self.ws.recv()))
        raise TimeoutError(event)

    def evaluate(self, expression: str):
        result = self.page("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(result["exceptionDetails"])
        return result["result"].get("value")

    def quit(self) -> None:
        if getattr(self, "ws", None):
            self.ws.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# ------------------------------------------------------------------ the checks

PAGE_FACTS = """(() => {
  const inScroller = e => {
    for (let p = e.parentElement; p; p = p.parentElement) {
      const o = getComputedStyle(p).overflowX;
      if (o === 'auto' || o === 'scroll') return true;
    }
    return false;
  };
  const v = document.getElementById('verdict');
  const r = v.getBoundingClientRect();
  const h1 = v.querySelector('h1');
  const style = getComputedStyle(v);
  return {
    verdict_text: v.innerText,
    verdict_top: r.top, verdict_bottom: h1.getBoundingClientRect().bottom,
    verdict_visible: style.display !== 'none' && style.visibility !== 'hidden' && r.height > 0,
    viewport: [innerWidth, innerHeight],
    page_width: document.documentElement.scrollWidth,
    images: [...document.images].map(i => ({
      id: i.closest('figure') ? i.closest('figure').id : null,
      data: i.currentSrc.startsWith('data:image/'), complete: i.complete,
      narrow: i.currentSrc !== i.src,
      natural: i.naturalWidth, shown: i.getBoundingClientRect().width,
    })),
    wide: [...document.querySelectorAll('body *')]
      .filter(e => e.getBoundingClientRect().right > innerWidth + 1 && !inScroller(e))
      .map(e => e.tagName + (e.id ? '#' + e.id : '') + (e.className ? '.' + e.className : ''))
      .slice(0, 10),
  };
})()"""


START_ATTEMPTS = 3  # on a loaded machine Chromium now and then exits before it listens


def started_browser(profile: Path) -> Browser:
    """A Browser, its start tried up to START_ATTEMPTS times (each in a profile of its own
    under `profile`); the last failure is raised."""
    for attempt in range(1, START_ATTEMPTS):
        try:
            return Browser(profile / f"attempt-{attempt}")
        except RuntimeError:
            continue
    return Browser(profile / f"attempt-{START_ATTEMPTS}")


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    b = started_browser(tmp_path_factory.mktemp("chromium-profile"))
    try:
        for domain in ("Page", "Runtime", "Log", "Network"):
            b.page(f"{domain}.enable")
        yield b
    finally:
        b.quit()


@pytest.fixture(scope="module")
def report_url(tmp_path_factory) -> str:
    html = render_html(build_report(analyze([FIXTURES / "seed-two-instances"])))
    path = tmp_path_factory.mktemp("report") / "seed-two-instances.html"
    path.write_text(html, encoding="utf-8")
    return path.as_uri()


def _load(browser: Browser, url: str, width: int, height: int, mobile: bool, media: str = ""):
    browser.page(
        "Emulation.setDeviceMetricsOverride",
        width=width,
        height=height,
        deviceScaleFactor=1,
        mobile=mobile,
    )
    browser.page("Emulation.setEmulatedMedia", media=media)
    browser.events.clear()
    browser.page("Page.navigate", url=url)
    browser.wait_for("Page.loadEventFired")
    return browser.evaluate(PAGE_FACTS)


def _screenshot(browser: Browser, name: str, width: int, mobile: bool) -> Path:
    """The whole page, for a human to review."""
    size = browser.page("Page.getLayoutMetrics")["cssContentSize"]
    height = int(min(size["height"], 16000))
    browser.page(
        "Emulation.setDeviceMetricsOverride",
        width=width,
        height=height,
        deviceScaleFactor=1,
        mobile=mobile,
    )
    shot = browser.page("Page.captureScreenshot", format="png", captureBeyondViewport=False)
    REPORTS.mkdir(exist_ok=True)
    out = REPORTS / name
    out.write_bytes(base64.b64decode(shot["data"]))
    return out


def _problems(browser: Browser) -> tuple[list[str], list[str]]:
    errors, requests = [], []
    for e in browser.events:
        p = e.get("params", {})
        if e["method"] == "Runtime.exceptionThrown":
            errors.append(str(p.get("exceptionDetails", {}).get("text")))
        elif e["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            errors.append(json.dumps(p.get("args"))[:300])
        elif e["method"] == "Log.entryAdded" and p["entry"]["level"] == "error":
            errors.append(p["entry"].get("text", "")[:300])
        elif e["method"] == "Network.requestWillBeSent":
            requests.append(p["request"]["url"])
        elif e["method"] == "Network.loadingFailed":
            errors.append(f"loading failed: {p.get('errorText')}")
    return errors, requests


@pytest.mark.parametrize(("width", "height", "mobile"), [(390, 844, True), (1280, 800, False)])
def test_report_in_a_real_browser(browser, report_url, width, height, mobile):
    facts = _load(browser, report_url, width, height, mobile)
    errors, requests = _problems(browser)
    assert errors == [], "console errors"
    others = [
        u
        for u in requests
        if not (u == report_url or u.startswith("data:") or u.startswith(report_url + "#"))
    ]
    assert others == [], "the report fetched something"
    assert facts["viewport"] == [width, height]

    # every chart decoded and is drawn within the page
    assert len(facts["images"]) == 4
    for img in facts["images"]:
        assert img["data"] and img["complete"] and img["natural"] > 0, img
        assert 0 < img["shown"] <= width, img
        assert img["narrow"] == (width <= 600), "phones get the narrow chart layout"

    # the verdict is the first thing seen, above the fold
    assert facts["verdict_visible"]
    assert "Bottleneck: the front proxy" in facts["verdict_text"]
    assert "Confidence 90%" in facts["verdict_text"]
    assert facts["verdict_top"] >= 0 and facts["verdict_bottom"] <= height

    # nothing but the scrolling tables is wider than the screen
    assert facts["page_width"] <= width, facts["wide"]
    assert facts["wide"] == []

    shot = _screenshot(browser, f"seed-two-instances-{width}.png", width, mobile)
    assert shot.stat().st_size > 10_000


def test_report_prints_within_the_page(browser, report_url):
    """Print media at an A4 page's printable width: charts and tables fit it."""
    a4_css_px = 718  # 210 mm - 2 × 12 mm margins, at 96 px per inch
    facts = _load(browser, report_url, a4_css_px, 1000, False, media="print")
    for img in facts["images"]:
        assert img["natural"] > 0 and 0 < img["shown"] <= a4_css_px, img
    assert facts["page_width"] <= a4_css_px, facts["wide"]
    _screenshot(browser, "seed-two-instances-print.png", a4_css_px, False)
    pdf = browser.page("Page.printToPDF", printBackground=True, preferCSSPageSize=True)
    assert base64.b64decode(pdf["data"]).startswith(b"%PDF")


# ------------------------------------------------------------------ the failed requests' hop chains

HOP_ROWS = """(() => [...document.querySelectorAll('#failed details.req')].map((d, i) => ({
  i,
  proxy: [...d.querySelectorAll('li.hop.proxy .quote .ln')].map(l => l.textContent),
  engine: [...d.querySelectorAll('li.hop.instance .quote .ln')].map(l => l.textContent),
})))()"""

OPENED = """(i => {
  const d = document.querySelectorAll('#failed details.req')[i];
  const shown = sel => [...d.querySelectorAll(sel)]
    .filter(e => e.checkVisibility() && e.innerText.trim()).map(e => e.innerText);
  return {open: d.open, proxy: shown('li.hop.proxy .quote .ln'),
          engine: shown('li.hop.instance .quote .ln'), conclusion: shown('li.hop.conclusion')};
})"""


def _hop_chain_inputs() -> tuple[str, list[Path]]:
    """A corpus incident where a failed request has both a proxy line and an engine line,
    else the fixture excerpted from one (the corpus is absent on a user's clone)."""
    for folder in corpus_incidents():
        rows = build_ledger(analyze(incident_inputs(folder)), NOT_OK)
        both = rows.filter(
            pl.col("proxy_source").is_not_null() & pl.col("instance_source").is_not_null()
        )
        if both.height:
            return folder.name, incident_inputs(folder)
    folder = DATA / "incidents" / "nginx-client-timeouts"
    return folder.name, [p for p in incident_inputs(folder) if p.suffix != ".md"]


@pytest.fixture(scope="module")
def hop_report(tmp_path_factory) -> tuple[str, list[Path]]:
    name, inputs = _hop_chain_inputs()
    html = render_html(build_report(analyze(inputs)))
    path = tmp_path_factory.mktemp("hops") / f"{name}.html"
    path.write_text(html, encoding="utf-8")
    return path.as_uri(), inputs


def _line_of(inputs: list[Path], quoted: str) -> str:
    """The file's own line for a quoted `file:line text` (the report shows paths relative)."""
    source, _, _ = quoted.partition(" ")
    file, _, number = source.rpartition(":")
    (path,) = [p for p in inputs if str(p).endswith("/" + file)]
    return path.read_text(encoding="utf-8").splitlines()[int(number) - 1]


def _click(browser: Browser, selector_js: str) -> None:
    """A real mouse click in the middle of an element."""
    box = browser.evaluate(
        f"(() => {{ const e = {selector_js}; e.scrollIntoView({{block: 'center'}});"
        " const r = e.getBoundingClientRect(); return [r.x + 8, r.y + r.height / 2]; })()"
    )
    for kind in ("mousePressed", "mouseReleased"):
        browser.page(
            "Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left", clickCount=1
        )


def test_a_failed_request_opens_to_its_proxy_and_engine_lines(browser, hop_report):
    url, inputs = hop_report
    _load(browser, url, 1280, 800, False)
    rows = browser.evaluate(HOP_ROWS)
    both = [r for r in rows if r["proxy"] and r["engine"]]
    assert both, "no failed request shows both a proxy line and an engine line"
    row = both[0]["i"]
    closed = browser.evaluate(f"({OPENED})({row})")
    assert not closed["open"] and closed["proxy"] == [] and closed["engine"] == []
    _click(
        browser, f"document.querySelectorAll('#failed details.req')[{row}].querySelector('summary')"
    )
    opened = browser.evaluate(f"({OPENED})({row})")
    assert opened["open"]
    assert opened["proxy"] and opened["engine"], opened
    for quoted in (opened["proxy"][0], opened["engine"][0]):
        source, _, text = quoted.partition(" ")
        line = _line_of(inputs, quoted)
        assert line.startswith(text.split(" … (+")[0]), (source, text, line)
    assert any("Received request" in q or "aborted" in q.lower() for q in opened["engine"])
    assert "reached" in opened["conclusion"][0]
    errors, requests = _problems(browser)
    assert errors == []
    assert all(u == url or u.startswith("data:") for u in requests)
    _screenshot(browser, "hop-chain-1280.png", 1280, False)


def test_failed_requests_filter_and_read_without_scripts(browser, hop_report):
    url, _ = hop_report
    _load(browser, url, 390, 844, True)
    counts = browser.evaluate(
        """(() => {
      const s = document.querySelector('#ledger-filters select');
      const facet = s.getAttribute('data-facet'), value = s.options[1].value;
      const total = document.querySelectorAll('#failed details.req').length;
      s.value = value; s.dispatchEvent(new Event('change', {bubbles: true}));
      const visible = [...document.querySelectorAll('#failed details.req')]
        .filter(d => d.checkVisibility());
      visible.forEach(d => { d.open = true; });  // every hop chain open: still within the phone
      return {total, visible: visible.length, facet, value,
              match: visible.every(d => d.getAttribute('data-' + facet) === value),
              label: document.getElementById('ledger-count').textContent,
              width: document.documentElement.scrollWidth};
    })()"""
    )
    assert 0 < counts["visible"] < counts["total"] and counts["match"], counts
    assert counts["label"] == f"{counts['visible']} of {counts['total']} shown"
    assert counts["width"] <= 390
    browser.page("Emulation.setScriptExecutionDisabled", value=True)
    try:
        _load(browser, url, 390, 844, True)
        plain = browser.evaluate(
            """(() => ({
          rows: [...document.querySelectorAll('#failed details.req')]
            .filter(d => d.checkVisibility()).length,
          filters: document.getElementById('ledger-filters').checkVisibility(),
        }))()"""
        )
    finally:
        browser.page("Emulation.setScriptExecutionDisabled", value=False)
    assert plain["rows"] == counts["total"] and not plain["filters"]


# ------------------------------------------------------------------ the comparison page


@pytest.fixture(scope="module")
def compare_url(tmp_path_factory) -> str:
    """The write-up's own comparison, recorded: one instance against two behind proxy.py."""
    from click.testing import CliRunner

    from logforensics.cli import cli
    from tests.conftest import RECORDINGS

    out = tmp_path_factory.mktemp("compare") / "compare-seed.html"
    pair = RECORDINGS / "compare-seed"
    result = CliRunner().invoke(
        cli,
        ["compare", str(pair / "one-instance"), str(pair / "two-instances"),
         "--change", "the <b>second</b> instance", "-o", str(out)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return out.as_uri()


@pytest.mark.parametrize(("width", "height", "mobile"), [(390, 844, True), (1280, 800, False)])
def test_comparison_in_a_real_browser(browser, compare_url, width, height, mobile):
    facts = _load(browser, compare_url, width, height, mobile)
    errors, requests = _problems(browser)
    assert errors == [], "console errors"
    assert [u for u in requests if u != compare_url and not u.startswith("data:")] == []
    # the user's --change is text, not markup
    assert "Did the <b>second</b> instance help?" in facts["verdict_text"]
    assert "did not measurably raise capacity" in facts["verdict_text"]
    assert facts["verdict_top"] >= 0 and facts["verdict_bottom"] <= height
    assert len(facts["images"]) == 2  # the capacity curves and the paired split
    for img in facts["images"]:
        assert img["data"] and img["complete"] and img["natural"] > 0, img
        assert 0 < img["shown"] <= width, img
        assert img["narrow"] == (width <= 600), "phones get the narrow chart layout"
    assert facts["page_width"] <= width, facts["wide"]
    assert _screenshot(browser, f"compare-seed-{width}.png", width, mobile).stat().st_size > 10_000


def test_comparison_prints_within_the_page(browser, compare_url):
    a4_css_px = 718
    facts = _load(browser, compare_url, a4_css_px, 1000, False, media="print")
    for img in facts["images"]:
        assert img["natural"] > 0 and 0 < img["shown"] <= a4_css_px, img
    assert facts["page_width"] <= a4_css_px, facts["wide"]
    pdf = browser.page("Page.printToPDF", printBackground=True, preferCSSPageSize=True)
    assert base64.b64decode(pdf["data"]).startswith(b"%PDF")
