#!/usr/bin/env python3
"""Time to an answer: ``llmbench ramp --find`` with its defaults on the mock of issue 50
(``llmbench mock --parallel 4 --ttft-ms 300 --itl-ms 20``, threshold TTFT p95 < 500 ms: 4
users on paper). Prints the wall time, the answer and how each step ended.

    python scripts/bench_find_answer.py [--port 18600] [--extra '--hold 10s']

Starts the mock on a free port (or --port), runs the search in a temporary folder, stops
the mock. Compare with another tool's search on the same mock by hand (issue 50's table).
"""

from __future__ import annotations

import argparse
import json
import shlex
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

MOCK = ["--parallel", "4", "--ttft-ms", "300", "--itl-ms", "20"]
THRESHOLD = "ttft.p95<500ms"
EXPECTED = 4


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_up(url: str, timeout_s: float = 30.0) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        try:
            urllib.request.urlopen(url + "/v1/models", timeout=1).read()
            return
        except OSError:
            time.sleep(0.2)
    sys.exit(f"the mock did not answer on {url} within {timeout_s:g} s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0, help="the mock's port (0: a free one)")
    ap.add_argument("--extra", default="", help="more options for ramp (default: none)")
    a = ap.parse_args()
    port = a.port or free_port()
    url = f"http://127.0.0.1:{port}"
    py = sys.executable
    mock = subprocess.Popen([py, "-m", "llmbench.cli", "mock", "--port", str(port), *MOCK],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_up(url)
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "run"
            cmd = [py, "-m", "llmbench.cli", "ramp", "--url", url, "--find", "--threshold",
                   THRESHOLD, "--out", str(out), *shlex.split(a.extra)]
            t0 = time.monotonic()
            p = subprocess.run(cmd, capture_output=True, text=True)
            wall = time.monotonic() - t0
            print(p.stdout, end="")
            runs = sorted(out.rglob("run.json")) if out.exists() else []
            limit = None
            if runs:
                doc = json.loads(runs[-1].read_text())
                limit = (doc.get("search") or {}).get("limit")
            print(f"\nllmbench ramp --find{' ' + a.extra if a.extra else ''}: answer "
                  f"{limit if limit is not None else '?'} users (on paper {EXPECTED}) in "
                  f"{wall:.1f} s wall (exit {p.returncode})")
            if p.returncode not in (0, 1) and p.stderr:
                print(p.stderr[-2000:], file=sys.stderr)
    finally:
        mock.terminate()
        mock.wait(10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
