"""Every reader's output on every saved run folder, written to one directory, so two versions of
llmbench can be diffed byte for byte (issue 38: the typed result must not change a report).

  python scripts/check_report_bytes.py OUT            # write OUT/<case> files
  python scripts/check_report_bytes.py OUT --against BASE   # ... and diff with BASE

It copies the example folders (``results/examples/*``) and the real runs
(``/work/shared/real-runs/*``, or ``--real DIR``) into one fixed scratch folder (so paths in the
outputs are the same from one version to the next), then runs ``llmbench report`` (html, md, csv,
csv --per-request, parquet) on each run folder and on the sweep, ``llmbench compare`` on each
group of ramps (console text and its HTML), and ``llmbench runs``. HTML date stamps are masked
(a report names the time it was written). Exit 1 when ``--against`` finds a difference.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRATCH = Path("/tmp/llmbench-report-bytes")
# the time a report was written, in the HTML's footer or head
STAMPS = re.compile(rb"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2})?")


def llmbench(*args: str) -> bytes:
    # this checkout's llmbench, whatever the interpreter has installed
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-m", "llmbench.cli", *args], capture_output=True,
                       cwd=SCRATCH, env=env)
    return (f"exit {p.returncode}\n".encode() + b"--- stdout\n" + p.stdout
            + b"--- stderr\n" + p.stderr)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--against", type=Path)
    ap.add_argument("--real", type=Path, default=Path("/work/shared/real-runs"))
    a = ap.parse_args()
    shutil.rmtree(SCRATCH, ignore_errors=True)
    (SCRATCH / "examples").mkdir(parents=True)
    for d in sorted((ROOT / "results" / "examples").iterdir()):
        shutil.copytree(d, SCRATCH / "examples" / d.name)
    real = SCRATCH / "real"
    real.mkdir()
    for d in sorted(p for p in a.real.iterdir() if p.is_dir()):
        shutil.copytree(d, real / d.name)
    for p in SCRATCH.rglob("*"):           # the real runs are read-only where they live
        p.chmod(0o755 if p.is_dir() else 0o644)
    # the saved reports are outputs: remove them so each version writes its own
    for p in list(SCRATCH.rglob("report.html")) + list(SCRATCH.rglob("compare.html")):
        p.unlink()
    runs = sorted(p.parent for p in SCRATCH.rglob("run.json"))
    sweeps = sorted(p.parent for p in SCRATCH.rglob("sweep.json"))
    out = a.out.resolve()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)

    def name(d: Path) -> str:
        return str(d.relative_to(SCRATCH)).replace("/", "__")

    for d in runs:
        n = name(d)
        (out / f"{n}.report-html.txt").write_bytes(llmbench("report", str(d)))
        shutil.move(d / "report.html", out / f"{n}.report.html")
        for fmt in ("md", "csv"):
            (out / f"{n}.report-{fmt}.txt").write_bytes(llmbench("report", str(d), "--format", fmt))
        (out / f"{n}.report-csv-per-request.txt").write_bytes(
            llmbench("report", str(d), "--format", "csv", "--per-request"))
        pq = SCRATCH / "out.parquet"
        (out / f"{n}.report-parquet.txt").write_bytes(
            llmbench("report", str(d), "--format", "parquet", "-o", str(pq)))
        if pq.exists():
            shutil.move(pq, out / f"{n}.parquet")
    for d in sweeps:
        n = name(d)
        (out / f"{n}.sweep-report.txt").write_bytes(llmbench("report", str(d)))
        if (d / "report.html").exists():
            shutil.move(d / "report.html", out / f"{n}.sweep-report.html")
    groups = {"num_parallel": sorted((SCRATCH / "examples" / "num_parallel").glob("2*")),
              "sweep": sorted((SCRATCH / "examples" / "sweep").glob("2*")),
              "real": sorted(real.iterdir()),
              "mixed": sorted((SCRATCH / "examples" / "num_parallel").glob("2*"))[:1]
              + sorted(real.iterdir())[:1]}
    for g, dirs in groups.items():
        html = SCRATCH / f"compare-{g}.html"
        args = ["compare", *map(str, dirs), "--html", str(html)]
        (out / f"compare-{g}.txt").write_bytes(llmbench(*args))
        (out / f"compare-{g}-gate.txt").write_bytes(
            llmbench(*args, "--max-regression", "10%", "--metric", "held",
                     "--metric", "ttft.p95", "--metric", "output_throughput"))
        if html.exists():
            shutil.move(html, out / f"compare-{g}.html")
    for where in ("examples/num_parallel", "examples", "real"):
        (out / f"runs-{where.replace('/', '__')}.txt").write_bytes(
            llmbench("runs", "--out", str(SCRATCH / where)))
    for d in runs + sweeps:                # a reader never writes over a run's own files
        for f in ("run.json", "sweep.json"):
            if (d / f).exists():
                shutil.copy(d / f, out / f"{name(d)}.{f}.after")
    for p in out.iterdir():
        if p.suffix == ".html":
            p.write_bytes(STAMPS.sub(b"<date>", p.read_bytes()))
    print(f"{len(list(out.iterdir()))} files in {out}")
    if a.against is None:
        return 0
    base = a.against.resolve()
    names = sorted({p.name for p in out.iterdir()} | {p.name for p in base.iterdir()})
    differ = [n for n in names if not (out / n).exists() or not (base / n).exists()
              or not filecmp.cmp(out / n, base / n, shallow=False)]
    for n in differ:
        print(f"DIFFERS: {n}")
    print(f"{len(names) - len(differ)} of {len(names)} files byte-identical")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
