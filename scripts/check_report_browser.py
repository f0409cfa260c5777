"""Open a report in a real browser (headless Chromium) and check it: it loads with no console
errors or failed requests, and its charts are present and drawn.

  python scripts/check_report_browser.py results/<run>/report.html [--screenshot out.png]

Needs Debian's chromium (`apt-get install chromium`). Exits 1 when a check fails.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("report")
    ap.add_argument("--screenshot")
    a = ap.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("chromium is not installed (apt-get install chromium)")
        return 2
    url = Path(a.report).resolve().as_uri()
    with tempfile.TemporaryDirectory() as profile:
        r = subprocess.run([chromium, *FLAGS, f"--user-data-dir={profile}", "--enable-logging=stderr",
                            "--v=0", "--dump-dom", url], capture_output=True, text=True, timeout=120)
        if a.screenshot:
            subprocess.run([chromium, *FLAGS, f"--user-data-dir={profile}", "--window-size=1200,3000",
                            f"--screenshot={a.screenshot}", url], capture_output=True, timeout=120)
    dom = r.stdout
    console = [line for line in r.stderr.splitlines() if "CONSOLE" in line]
    failed = [line for line in r.stderr.splitlines() if "net::ERR" in line]
    charts = re.findall(r'data-chart="([^"]+)"', dom)
    svgs = dom.count("<svg")
    # drawn shapes: matplotlib's SVG is all <path>; the hand-written charts (svgplot) also use
    # <line>, <rect> and <circle>
    paths = len(re.findall(r"<(?:path|line|polyline|rect|circle)\b", dom))
    print(f"loaded: {len(dom)} characters of DOM, {len(charts)} charts ({', '.join(charts)}), "
          f"{svgs} svg elements, {paths} shapes; console messages: {len(console)}; "
          f"failed requests: {len(failed)}")
    for line in console + failed:
        print("  " + line)
    ok = bool(dom) and charts and svgs >= len(charts) and paths > 10 and not console and not failed
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
