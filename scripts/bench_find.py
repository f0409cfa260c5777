#!/usr/bin/env python3
"""Time to answer with ``ramp --find`` against the linear grid that finds the same answer, on
the mock, for limits of 3, 12, 48 and 200 users (issue 36).

Each mock has a limit on paper: a closed loop (think 0) against P slots, each request served in
S = ttft + (events - 1) x itl (the mock streams --chunk-tokens a step), gives N >= P users a mean time to first token of
ttft + (N/P - 1) x S (Little's law). With P = ceil(L/2) slots and a mean-TTFT threshold halfway
between L and L + 1 users, the limit is L. The search (``--find``) grows 1, 2, 4 ... until a
step breaks and narrows to one user; the linear grid (``--users 1,2,...,L+1``) is the fixed ramp
that would give the same answer, one user at a time until the first break. Both run the same
steps (ramp-in, hold); the table gives steps and wall time both ways.

The linear grid is measured up to ``--linear-up-to`` users (default 12: above that it takes
many minutes); beyond, its time is the measured seconds per step of that limit's search times
the grid's steps, marked "est.". The grid is 1, 2 ... up to one above the limit the search
found (the fixed ramp that gives the same answer). The 200-user limit needs the load generator's
``--workers`` (one process keeps ~128 streams on 2 cores): ``--workers 2`` from 64 users up.

    .venv/bin/python scripts/bench_find.py                  # 3, 12, 48, 200
    .venv/bin/python scripts/bench_find.py --limits 3,12 --linear-up-to 12
"""

from __future__ import annotations

import argparse
import json
import math
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# a reply of 20 tokens streamed 5 at a time (4 events, 300 ms apart: few events per request,
# so 200 users are a load the mock and the generator carry on 2 cores)
TTFT_MS, ITL_MS, TOKENS, CHUNK = 100.0, 300.0, 20, 5
SERVICE_MS = TTFT_MS + (math.ceil(TOKENS / CHUNK) - 1) * ITL_MS     # 1,000 ms a request


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def slots_for(limit: int) -> int:
    return max(1, math.ceil(limit / 2))


def threshold_ms(limit: int) -> float:
    return TTFT_MS + ((limit + 0.5) / slots_for(limit) - 1) * SERVICE_MS


def start_mock(slots: int) -> tuple[subprocess.Popen, str]:
    port = free_port()
    p = subprocess.Popen([sys.executable, "-m", "llmbench.cli", "mock", "--port", str(port),
                          "--parallel", str(slots), "--ttft-ms", str(TTFT_MS),
                          "--itl-ms", str(ITL_MS), "--chunk-tokens", str(CHUNK),
                          "--jitter", "0"], cwd=ROOT, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return p, url
        except OSError:
            time.sleep(0.2)
    p.kill()
    raise SystemExit("the mock did not start")


def ramp(url: str, limit: int, steps: list[int] | None, out: Path, hold: str,
         ramp_in: str) -> dict:
    """One ramp (the search, or the fixed steps given): its wall time, steps and answer."""
    args = [sys.executable, "-m", "llmbench.cli", "ramp", "--url", url + "/v1", "--model", "mock",
            "--ramp-in", ramp_in, "--hold", hold, "--think", "0", "--turns", "1",
            "--prompt-tokens", "10", "--output-tokens", str(TOKENS),
            "--threshold", f"ttft.mean<={threshold_ms(limit):.0f}ms",
            "--generator-lag-limit", "2000ms", "--no-progress", "--out", str(out)]
    args += ["--find", "--up-to", str(4 * limit + 4)] if steps is None else \
        ["--users", ",".join(map(str, steps))]
    if limit >= 64:
        args += ["--workers", "2"]
    t0 = time.perf_counter()
    r = subprocess.run(args, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    runs = sorted(p for p in out.iterdir() if (p / "run.json").is_file())
    if not runs:
        raise SystemExit(f"no run folder: exit {r.returncode}\n{r.stderr[-2000:]}")
    run = json.loads((runs[-1] / "run.json").read_text())
    if steps is None:
        s = run["search"]
        held = s["limit"]
        n = len(s["trials"])
    else:
        held = max((x["load"] for x in run["steps"] if x["held"]), default=0)
        n = len(run["steps"])
    return {"wall_s": wall, "steps": n, "held": held, "code": r.returncode}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limits", default="3,12,48,200")
    ap.add_argument("--linear-up-to", type=int, default=12,
                    help="measure the linear grid up to this limit; estimate it above")
    ap.add_argument("--hold", default="3s")
    ap.add_argument("--ramp-in", default="0.5s")
    a = ap.parse_args()
    limits = [int(x) for x in a.limits.split(",")]
    rows = []
    for limit in limits:
        proc, url = start_mock(slots_for(limit))
        try:
            with tempfile.TemporaryDirectory() as d:
                found = ramp(url, limit, None, Path(d) / "find", a.hold, a.ramp_in)
                # the grid that gives the search's answer: one user at a time up to the
                # first load above the limit found
                grid = list(range(1, int(found["held"]) + 2))
                if limit <= a.linear_up_to:
                    lin = ramp(url, limit, grid, Path(d) / "grid", a.hold, a.ramp_in)
                    lin["est"] = False
                else:
                    per_step = found["wall_s"] / max(found["steps"], 1)
                    lin = {"wall_s": per_step * len(grid), "steps": len(grid), "held": None,
                           "est": True}
        finally:
            proc.terminate()
            proc.wait(10)
        rows.append((limit, slots_for(limit), found, lin))
        grid_held = "-" if lin["held"] is None else f"{lin['held']:g}"
        print(f"limit {limit}: search {found['held']:g} in {found['steps']} steps, "
              f"{found['wall_s']:.0f} s; grid {grid_held} in {lin['steps']} steps, "
              f"{lin['wall_s']:.0f} s{' (est.)' if lin['est'] else ''}", flush=True)
    load = os.getloadavg()
    print(f"\nmock: P = ceil(L/2) slots, {SERVICE_MS:.0f} ms a request; steps {a.ramp_in} in, "
          f"{a.hold} held; load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on "
          f"{os.cpu_count()} cores\n")
    print("| limit on paper | slots | --find: limit found | steps | time | linear grid: limit "
          "found | steps | time | time saved |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for limit, slots, f, lin in rows:
        est = " (est.)" if lin["est"] else ""
        held = "not run" if lin["held"] is None else f"{lin['held']:g}"
        print(f"| {limit} | {slots} | {f['held']:g} | {f['steps']} | {f['wall_s']:.0f} s | "
              f"{held} | {lin['steps']} | {lin['wall_s']:.0f} s{est} | "
              f"{lin['wall_s'] / max(f['wall_s'], 1e-9):.1f}x |")


if __name__ == "__main__":
    main()
