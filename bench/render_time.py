"""How long a browser takes to load an HTML report: headless Chromium over DevTools.

    .venv/bin/python bench/render_time.py REPORT.html [--runs 3]

Milliseconds from navigation start to the end of the load event (every inline
chart decoded, the page laid out), the best of `--runs` loads in one browser,
at a 1280×800 viewport. It uses the small standard-library CDP client of
tests/test_browser.py; with no Chromium it says so and prints nothing else.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.test_browser import CHROMIUM, started_browser  # noqa: E402

LOAD_MS = """(() => {
  const n = performance.getEntriesByType('navigation')[0];
  document.body.getBoundingClientRect();
  return n.loadEventEnd > 0 ? n.loadEventEnd : n.duration;
})()"""


def load_ms(report: Path, runs: int = 3) -> float | None:
    """Best load time of `runs` loads, or None where no Chromium is installed or starts."""
    if CHROMIUM is None:
        return None
    with tempfile.TemporaryDirectory() as profile:
        try:
            browser = started_browser(Path(profile))
        except RuntimeError as exc:
            print(f"the load time is not measured: {exc}", file=sys.stderr)
            return None
        try:
            for domain in ("Page", "Runtime"):
                browser.page(f"{domain}.enable")
            browser.page(
                "Emulation.setDeviceMetricsOverride",
                width=1280,
                height=800,
                deviceScaleFactor=1,
                mobile=False,
            )
            times = []
            for _ in range(runs):
                browser.events.clear()
                browser.page("Page.navigate", url=report.resolve().as_uri())
                browser.wait_for("Page.loadEventFired", timeout=60)
                times.append(float(browser.evaluate(LOAD_MS)))
            return min(times)
        finally:
            browser.quit()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", type=Path)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    ms = load_ms(args.report, args.runs)
    if ms is None:
        print("no chromium installed: nothing measured", file=sys.stderr)
        return 1
    print(f"{ms:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
