"""The command line's start-up: CPU (user + system, os.wait4's rusage) of a command that does
no work, so what it costs is what it imports:
  - ``llmbench run --no-such-flag``: a usage error (one line, exit 2),
  - ``llmbench --help``: the list of commands,
  - ``llmbench run --help``: one command's options.
Goal (issue 44 §1): <= 0.3 s for the usage error. The command line builds only the command
asked for (llmbench/cli/app.py ``_TABLE``), so the others' specs are not imported.

The first run of each is a warm-up (bytecode written), not counted.

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
ENV = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
       "COLUMNS": "80"}
CASES = {"usage error": ["run", "--no-such-flag"], "--help": ["--help"],
         "run --help": ["run", "--help"]}
GOAL_S = 0.3


def cpu_s(args: list[str]) -> tuple[float, int]:
    """(user + system seconds, exit code) of one llmbench process."""
    code = "import sys; from llmbench.cli.app import main; sys.argv[0] = 'llmbench'; main()"
    proc = subprocess.Popen([sys.executable, "-c", code, *args], env=ENV, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _pid, status, usage = os.wait4(proc.pid, 0)
    return usage.ru_utime + usage.ru_stime, os.waitstatus_to_exitcode(status)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    worst = 0.0
    for name, args in CASES.items():
        cpu_s(args)                                    # warm-up: bytecode
        runs = [cpu_s(args) for _ in range(a.repeat)]
        times = [t for t, _ in runs]
        print(f"{name:<12} llmbench {' '.join(args):<22} CPU min {min(times):.2f} s, "
              f"median {statistics.median(times):.2f} s (exit {runs[0][1]})")
        if name == "usage error":
            worst = statistics.median(times)
    print(f"goal: usage error <= {GOAL_S:g} s CPU: {'met' if worst <= GOAL_S else 'NOT met'}")
    return 0 if worst <= GOAL_S else 1


if __name__ == "__main__":
    sys.exit(main())
