"""The share of test items that start llmbench's CLI in a child process (issue 38 §5: tests that
need numbers call the API in process; only wording, exit codes and signals keep a CLI child).

    python scripts/count_cli_spawns.py                       # the whole suite (-n 2, as CI)
    python scripts/count_cli_spawns.py tests/e2e -- -n 0     # some tests; pytest's own options after --
    python scripts/count_cli_spawns.py --read FOLDER         # the logs of a run made with
                                                             # LLMBENCH_COUNT_CLI_SPAWNS=FOLDER

Counted at run time, not guessed from the source: with LLMBENCH_COUNT_CLI_SPAWNS set,
tests/conftest.py wraps subprocess.Popen in every pytest process (tests/helpers/spawns.py) and
logs each item run and each child that runs ``python -m llmbench.cli`` / ``llmbench``. Prints
the items, the items that spawned the CLI (and the share), the spawns, and the files with the
most spawning items. Exits with pytest's code (0 with --read).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def read(folder: Path) -> tuple[set[str], dict[str, int]]:
    """(items run, CLI children by item) from the logs; a node id may hold spaces (a
    parametrized id), so it ends at a tab (or, in older logs, is the longest item id that
    starts the line)."""
    items: set[str] = set()
    spawn_lines: list[str] = []
    for log in sorted(folder.glob("*.log")):
        for line in log.read_text(encoding="utf-8").splitlines():
            kind, _, rest = line.partition(" ")
            if kind == "item":
                items.add(rest.split("\t", 1)[0])
            elif kind == "spawn":
                spawn_lines.append(rest)
    spawns: Counter[str] = Counter()
    by_length = sorted(items, key=len, reverse=True)
    for rest in spawn_lines:
        if "\t" in rest:
            spawns[rest.split("\t", 1)[0]] += 1
        else:
            spawns[next((n for n in by_length if rest.startswith(n + " ")),
                        rest.split(" ", 1)[0])] += 1
    return items, dict(spawns)


def report(items: set[str], spawns: dict[str, int], top: int = 15) -> None:
    spawning = {n for n in spawns if n in items}
    share = len(spawning) / len(items) if items else 0.0
    print(f"test items run: {len(items)}")
    print(f"items that start the CLI in a child process: {len(spawning)} ({share:.1%})")
    print(f"CLI child processes started: {sum(spawns[n] for n in spawning)}")
    outside = sum(v for n, v in spawns.items() if n not in items)
    if outside:
        print(f"CLI children started outside any item: {outside}")
    by_file: Counter[str] = Counter(n.split("::")[0] for n in spawning)
    of_file: Counter[str] = Counter(n.split("::")[0] for n in items)
    if by_file:
        print("files with the most such items (spawning items / items):")
        for f, k in by_file.most_common(top):
            print(f"  {k:4d} / {of_file[f]:4d}  {f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="*", help="test paths (default: tests)")
    ap.add_argument("--read", type=Path, help="only read the logs of an earlier run")
    argv = sys.argv[1:]
    extra: list[str] = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    a = ap.parse_args(argv)
    if a.read:
        report(*read(a.read))
        return 0
    with tempfile.TemporaryDirectory(prefix="cli-spawns-") as tmp:
        env = {**os.environ, "LLMBENCH_COUNT_CLI_SPAWNS": tmp}
        rc = subprocess.run([sys.executable, "-m", "pytest", *(a.paths or ["tests"]), "-q",
                             "-p", "no:cacheprovider", *extra], cwd=ROOT, env=env).returncode
        report(*read(Path(tmp)))
    return rc


if __name__ == "__main__":
    sys.exit(main())
