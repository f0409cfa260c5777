"""Peak resident memory of drawing a few requests from a big JSONL file (issue 23, item 7).

    python scripts/bench_dataset_rss.py [--mb 500] [--requests 5] [--root DIR]

Writes a JSONL file of about --mb MB (chat-sized prompts), then runs, each under
/usr/bin/time -v: `llmbench datasets inspect FILE --count N` and `llmbench run --dataset FILE
--requests N` against the built-in mock. Prints each command's peak RSS (the largest of the
process and its children) and wall time. --root runs another checkout's llmbench (to measure
before a change: a git worktree of the older commit).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def write_jsonl(path: Path, mb: int) -> None:
    line = (json.dumps({"prompt": "tell me about load testing " * 80}) + "\n").encode()
    with open(path, "wb") as fh:
        for _ in range(mb * 1_000_000 // len(line)):
            fh.write(line)


def measure(root: Path, args: list[str], cwd: Path) -> tuple[float, float]:
    """(peak RSS in MB, wall s) of one llmbench command."""
    env = {**os.environ, "PYTHONPATH": str(root), "LLMBENCH_TOKENIZER": "approx"}
    r = subprocess.run(["/usr/bin/time", "-v", sys.executable, "-m", "llmbench.cli", *args],
                       capture_output=True, text=True, env=env, cwd=cwd)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({r.returncode}): {r.stderr[-800:]}")
    rss_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr).group(1))
    wall = re.search(r"Elapsed \(wall clock\) time .*: (?:(\d+):)?(\d+):([\d.]+)", r.stderr)
    h, m, s = wall.groups()
    return rss_kb / 1000, int(h or 0) * 3600 + int(m) * 60 + float(s)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=500)
    ap.add_argument("--requests", type=int, default=5)
    ap.add_argument("--root", type=Path, default=ROOT)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "big.jsonl"
        write_jsonl(big, a.mb)
        print(f"{big.stat().st_size / 1e6:.0f} MB JSONL, {a.requests} requests, "
              f"llmbench from {a.root}")
        for args in (["datasets", "inspect", str(big), "--count", str(a.requests)],
                     ["run", "--dataset", str(big), "--requests", str(a.requests),
                      "--output-tokens", "4", "--out", str(Path(tmp) / "res")]):
            rss, wall = measure(a.root, args, Path(tmp))
            print(f"  {args[0]:<8} peak RSS {rss:7.1f} MB  wall {wall:5.1f} s")


if __name__ == "__main__":
    main()
