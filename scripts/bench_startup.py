"""The command line's start-up: CPU (user + system, os.wait4's rusage, as /usr/bin/time counts
it) of commands that do no work or a tiny run, so what they cost is what they import and set up:
  - ``llmbench --version``: the floor (the interpreter and the package),
  - ``llmbench run --no-such-flag``: a usage error (one line, exit 2),
  - ``llmbench --help``: the list of commands,
  - ``llmbench run --help``: one command's options,
  - ``llmbench run --url URL --model mock --requests 1 ...``: a whole 1-request run against a
    mock this script starts (with ``--server-probe off``, and with every default),
    analysis, run folder and report.html included.
Goals: <= 0.3 s for the usage error (issue 44 §1) and for the 1-request run against a URL,
with ``--server-probe off`` and with every default (issue 50 §2: the server probe, telemetry
and the server's process found by its port go without aiohttp over http://).

The first run of each is a warm-up (bytecode and the dataclass code written: the children run
without PYTHONDONTWRITEBYTECODE, as an installed llmbench does), not counted.

  python scripts/bench_startup.py              # 5 repetitions, min and median
  python scripts/bench_startup.py --repeat 9
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENV = {**{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
       "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), "COLUMNS": "80"}
CASES = {"--version": ["--version"], "usage error": ["run", "--no-such-flag"],
         "--help": ["--help"], "run --help": ["run", "--help"]}
# a 1-request run against a URL: {url} and {out} filled in when the mock listens
RUN = ["run", "--url", "{url}/v1", "--model", "mock", "--requests", "1", "--output-tokens", "1",
       "--prompt-tokens", "16", "--quiet", "--out", "{out}"]
RUNS = {"run, 1 request": [*RUN, "--server-probe", "off"], "run, defaults": RUN}
GOAL_S = 0.3
GOALS = ("usage error", "run, 1 request", "run, defaults")


def cpu_s(args: list[str]) -> tuple[float, int]:
    """(user + system seconds, exit code) of one llmbench process."""
    code = "import sys; from llmbench.cli.app import main; sys.argv[0] = 'llmbench'; main()"
    proc = subprocess.Popen([sys.executable, "-c", code, *args], env=ENV, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _pid, status, usage = os.wait4(proc.pid, 0)
    return usage.ru_utime + usage.ru_stime, os.waitstatus_to_exitcode(status)


def main() -> int:
    import tempfile
    from llmbench.mock_server import MockProcess, make_config
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    medians: dict[str, float] = {}
    with MockProcess(make_config(None, ttft_ms=5, itl_ms=1)) as m, \
            tempfile.TemporaryDirectory() as out:
        cases = {**CASES, **{k: [x.format(url=m.url, out=out) for x in v]
                             for k, v in RUNS.items()}}
        for name, args in cases.items():
            cpu_s(args)                                    # warm-up: bytecode
            runs = [cpu_s(args) for _ in range(a.repeat)]
            times = [t for t, _ in runs]
            medians[name] = statistics.median(times)
            shown = " ".join(args[:2]) + (" ..." if len(args) > 2 else "")
            print(f"{name:<15} llmbench {shown:<22} CPU min {min(times):.2f} s, "
                  f"median {medians[name]:.2f} s (exit {runs[0][1]})   "
                  f"(load {os.getloadavg()[0]:.1f})")
    ok = all(medians[g] <= GOAL_S for g in GOALS)
    for g in GOALS:
        print(f"goal: {g} <= {GOAL_S:g} s CPU: {'met' if medians[g] <= GOAL_S else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
