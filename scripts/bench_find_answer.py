#!/usr/bin/env python3
"""Time to an answer (issue 50 §3): ``llmbench ramp --find`` on the mock of the issue
(``llmbench mock --parallel 4 --ttft-ms 300 --itl-ms 20``, threshold TTFT p95 < 500 ms), with
its defaults and with ``--think 0``; optionally servebench's ``find-capacity`` on the same mock.
Prints each search's wall time, its answer, the answer on paper, and how each step ended.

The answer on paper: the most users for which at most 5 % of requests wait 200 ms or more
for a slot, computed by simulating the mock's queue (an event simulation of the users, 4
slots first come first served, replies of 0.3 + 127 x 0.02 s; 20,000 s per load). With
``--think 0`` (a closed loop, the question servebench's concurrency search asks) 4 users never
wait and 5 make requests wait 0.71 s on average (Little's law): 4. With the defaults each
user thinks 5-10 s between turns, so a 5th user rarely finds the 4 slots full: 7 users (3.9 %
wait at 7, 6.9 % at 8). servebench answers the concurrency question (4).

    python scripts/bench_find_answer.py                       # defaults, then --think 0
    python scripts/bench_find_answer.py --cases default --servebench /path/to/servebench
    python scripts/bench_find_answer.py --cases default --runs 3 --quiet    # the spread

Each search's steps are printed with how each hold ended (``ended_why``: settled after how
long and why, or held in full and what its checks stood at); the machine's load average is
printed before and after, since on a shared machine the wall times move with it.
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import random
import shlex
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MOCK = ["--parallel", "4", "--ttft-ms", "300", "--itl-ms", "20"]
SLOTS, TTFT_S, ITL_S = 4, 0.3, 0.02
THRESHOLD, LIMIT_S, SHARE = "ttft.p95<500ms", 0.5, 0.05
OUTPUT_TOKENS = 128                      # ramp's default reply length against a URL
CASES = {"default": "", "think0": "--think 0"}


def share_over(users: int, think: tuple[float, float], seconds: float = 20_000.0,
               seed: int = 1) -> float:
    """The share of requests whose first token takes LIMIT_S or more: ``users`` users, each
    thinking a uniform ``think`` between replies, against SLOTS slots served first come first
    served, each reply TTFT_S + (OUTPUT_TOKENS - 1) x ITL_S long (the mock's, on paper)."""
    rng = random.Random(seed)
    service = TTFT_S + (OUTPUT_TOKENS - 1) * ITL_S
    events = [(rng.uniform(0.0, 10.0), 0, u) for u in range(users)]   # (time, 0 arrive/1 end)
    heapq.heapify(events)
    busy, queue, n, over = 0, [], 0, 0
    while events:
        t, kind, u = heapq.heappop(events)
        if t > seconds:
            break
        if kind == 0:
            if busy < SLOTS:
                busy += 1
                n += 1
                heapq.heappush(events, (t + service, 1, u))
            else:
                queue.append((t, u))
            continue
        heapq.heappush(events, (t + rng.uniform(*think), 0, u))
        if queue:
            t0, u2 = queue.pop(0)
            n += 1
            over += (t - t0 + TTFT_S) >= LIMIT_S
            heapq.heappush(events, (t + service, 1, u2))
        else:
            busy -= 1
    return over / max(n, 1)


def paper_limit(think: tuple[float, float]) -> tuple[int, dict[int, float]]:
    """The limit on paper and the shares over the limit around it."""
    shares = {n: share_over(n, think) for n in range(SLOTS, 4 * SLOTS)}
    limit = max((n for n, s in shares.items() if s <= SHARE), default=0)
    return limit, {n: s for n, s in shares.items() if abs(n - limit) <= 1}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_up(url: str, timeout_s: float = 30.0) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        try:
            urllib.request.urlopen(url + "/v1/models", timeout=1).read()
            return
        except OSError:
            time.sleep(0.2)
    sys.exit(f"the mock did not answer on {url} within {timeout_s:g} s")


def start_mock(port: int) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-m", "llmbench.cli", "mock", "--port", str(port),
                          *MOCK], cwd=ROOT, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    wait_up(f"http://127.0.0.1:{port}")
    return p


def find(url: str, extra: str, show: bool) -> tuple[float, float | None, list[dict]]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        cmd = [sys.executable, "-m", "llmbench.cli", "ramp", "--url", url, "--find",
               "--threshold", THRESHOLD, "--out", str(out), "--no-progress",
               *shlex.split(extra)]
        t0 = time.monotonic()
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        wall = time.monotonic() - t0
        if show:
            print(p.stdout, end="")
        runs = sorted(out.rglob("run.json")) if out.exists() else []
        if not runs:
            print(p.stderr[-2000:], file=sys.stderr)
            return wall, None, []
        search = json.loads(runs[-1].read_text()).get("search") or {}
        return wall, search.get("limit"), search.get("trials") or []


def servebench(binary: str, url: str) -> tuple[float, str]:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [binary, "find-capacity", "--url", url + "/v1", "--model", "mock",
               "--slo-ttft-ms", "500", "--target", "0.95", "--out", str(Path(tmp) / "sb")]
        t0 = time.monotonic()
        p = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.monotonic() - t0
    line = next((x for x in p.stdout.splitlines() if x.startswith("Capacity:")), "no answer")
    return wall, line


def _load_line(when: str) -> str:
    load = os.getloadavg()
    return (f"load average {when}: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on "
            f"{os.cpu_count()} cores")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0, help="the mock's port (0: a free one)")
    ap.add_argument("--cases", default="default,think0", help="default, think0 (comma list)")
    ap.add_argument("--extra", default="", help="more options for every ramp")
    ap.add_argument("--servebench", default="", help="servebench's path: run it too")
    ap.add_argument("--quiet", action="store_true", help="not the ramps' own output")
    ap.add_argument("--runs", type=int, default=1, help="searches per case (the spread)")
    a = ap.parse_args()
    print(_load_line("before"))
    port = a.port or free_port()
    url = f"http://127.0.0.1:{port}"
    mock = start_mock(port)
    rows = []
    try:
        for case in a.cases.split(","):
            extra = (CASES[case] + " " + a.extra).strip()
            think = (0.0, 0.0) if "--think 0" in extra else (5.0, 10.0)
            truth, shares = paper_limit(think)
            for _ in range(max(1, a.runs)):
                wall, limit, trials = find(url, extra, not a.quiet)
                rows.append((f"ramp --find {extra}".strip(), wall, limit, truth))
                print(f"\n{case}: answer {limit} users in {wall:.1f} s (on paper {truth}; "
                      "share waiting 200 ms+ " + ", ".join(f"{n} users {s * 100:.1f} %" for n, s
                                                         in sorted(shares.items())) + ")")
                print(f"  {_load_line('now')}")
                for t in trials:
                    print(f"  {t['load']:g} users, {t['why']}: held {t['hold_s']:.1f} s, "
                          f"{'held' if t.get('held') else 'broke'}; "
                          f"{t.get('ended_why') or t.get('ended') or 'full hold'}"
                          + (f" ({t['note']})" if t.get("note") else ""))
        if a.servebench:
            wall, line = servebench(a.servebench, url)
            rows.append(("servebench find-capacity", wall, None, SLOTS))
            print(f"\nservebench: {line} in {wall:.1f} s")
    finally:
        mock.terminate()
        mock.wait(10)
    print(f"\n{_load_line('after')}\n\n| search | wall | answer | on paper |\n"
          "|---|---:|---:|---:|")
    for name, wall, limit, truth in rows:
        print(f"| {name} | {wall:.0f} s | {'-' if limit is None else f'{limit:g}'} | {truth} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
