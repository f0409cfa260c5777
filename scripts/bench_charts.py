"""What the reports' charts cost: start-up, CPU, bytes, and a PNG for slides (issue 25).

  python scripts/bench_charts.py                       # the committed examples only
  python scripts/bench_charts.py --run /tmp/x/RUN      # and a run folder of your own
  python scripts/bench_charts.py --repeat 5

For every report that has charts (results/examples' ramps and sweep, a compare of the two
num_parallel ramps, and the --run folder), ``llmbench report`` (``compare``) runs as a child
process on a copy of the folder: wall time and CPU (os.wait4's rusage, user + system), the
HTML's size and the size of each chart in it (each ``<div class="chart">``). ``-X importtime``
says what the chart engines cost to import. In-process, each chart of the examples is drawn
from its one description (charts.*_chart) by svgplot, and by matplotlib as SVG and as PNG
(what ``--png`` costs), first call and steady state.

Children keep their bytecode in a temporary PYTHONPYCACHEPREFIX warmed by one uncounted run,
so the figures are an installed llmbench's (scripts/bench_fixed_costs.py does the same).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "results" / "examples"


def child(args: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """(wall s, CPU s, exit code) of ``python ARGS``."""
    t = time.perf_counter()
    p = subprocess.Popen([sys.executable, *args], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, env=env, cwd=ROOT)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    return wall, ru.ru_utime + ru.ru_stime, p.returncode


def chart_sizes(html: str) -> list[tuple[str, int]]:
    out = []
    for m in re.finditer(r'<div class="chart"[^>]*data-chart="([^"]*)"[^>]*>(.*?)</div>', html,
                         re.S):
        out.append((m.group(1), len(m.group(2).encode())))
    return out


def import_costs(env: dict[str, str]) -> dict[str, float]:
    """Cumulative import time (ms) of what each engine needs, from -X importtime."""
    out = {}
    for name, stmt in (("llmbench.report.html (the report's own import)",
                        "import llmbench.report.html"),
                       ("matplotlib.figure + backend_svg (a matplotlib SVG chart)",
                        "import llmbench.report.html, matplotlib.figure, "
                        "matplotlib.backends.backend_svg"),
                       ("matplotlib.figure + backend_agg (a PNG)",
                        "import llmbench.report.html, matplotlib.figure, "
                        "matplotlib.backends.backend_agg")):
        best = None
        for _ in range(3):
            p = subprocess.run([sys.executable, "-X", "importtime", "-c", stmt], env=env,
                               capture_output=True, text=True, cwd=ROOT)
            total = 0
            for line in p.stderr.splitlines():
                m = re.match(r"import time:\s+\d+ \|\s+(\d+) \| (\S.*)$", line)
                if m and not m.group(2).startswith(" "):       # top-level imports only
                    total += int(m.group(1))
            best = total if best is None else min(best, total)
        out[name] = best / 1000.0
    return out


def in_process() -> list[dict]:
    """Each chart of the examples from its description: svgplot SVG, matplotlib SVG and PNG."""
    sys.path.insert(0, str(ROOT))
    from llmbench.report import charts, svgplot
    from llmbench.results.latencies import load, read_jsonl
    ramp_dir = sorted((EXAMPLES / "num_parallel").glob("*ramp*"))
    run4, lat = load(ramp_dir[-1])
    run1, _ = load(ramp_dir[0])
    steps = run4["steps"]
    groups = []
    for st in steps:
        w = lat.window(st["index"], st["hold_start"], st["hold_end"])
        groups.append((f"{st['load']:g}", w.ttft_ms[w.ok]))
    rows = read_jsonl(ramp_dir[-1] / "timeline.jsonl")
    ok = lat.ttft_ms[lat.ok]
    descs = {
        "ramp_latency": lambda: charts.ramp_latency_chart(steps, {"ttft": (2000.0, "p95")}, "users"),
        "ramp_throughput": lambda: charts.ramp_throughput_chart(steps, "users"),
        "distributions": lambda: charts.distributions_chart(groups, "TTFT per step (users)"),
        "cdfs": lambda: charts.cdfs_chart([("TTFT", ok), ("E2EL", lat.e2el_ms[lat.ok])],
                                          "TTFT and E2EL"),
        "timeline": lambda: charts.timeline_chart(rows, steps, run4.get("t0_perf")),
        "compare_overlay": lambda: charts.compare_overlay_chart(
            [("1", run1["steps"]), ("4", steps)], "users"),
    }
    out = []
    tmp = Path(tempfile.mkdtemp())
    for name, make in descs.items():
        row: dict = {"chart": name}
        for engine, fn in (("svgplot", lambda c: svgplot.render(c)),
                           ("mpl_svg", lambda c: svgplot.to_svg_matplotlib(c)),
                           ("mpl_png", lambda c: svgplot.save_png(c, tmp / f"{name}.png"))):
            times = []
            result = None
            for _ in range(3):
                t = time.perf_counter()
                result = fn(make())
                times.append(time.perf_counter() - t)
            row[f"{engine}_first_ms"] = times[0] * 1000
            row[f"{engine}_ms"] = min(times[1:]) * 1000
            row[f"{engine}_bytes"] = ((tmp / f"{name}.png").stat().st_size if engine == "mpl_png"
                                      else len(result.encode()))
        out.append(row)
    shutil.rmtree(tmp, ignore_errors=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--run", type=Path, action="append", default=[],
                    help="a run folder of your own (repeatable)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-in-process", action="store_true",
                    help="skip the per-chart engine comparison (needs charts.*_chart)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench_charts."))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LLMBENCH_TOKENIZER": "approx",
           "PYTHONPYCACHEPREFIX": str(work / "pycache"), "MPLCONFIGDIR": str(work / "mpl")}
    targets: list[tuple[str, Path]] = []
    for d in sorted((EXAMPLES / "num_parallel").glob("*ramp*")) + \
            sorted((EXAMPLES / "sweep").glob("*ramp*")):
        targets.append((f"{d.parent.name}/{d.name}", d))
    targets.append(("sweep (sweep.json)", EXAMPLES / "sweep"))
    for r in a.run:
        targets.append((f"--run {r.name}", r))
    results = {"reports": [], "imports": import_costs(env)}
    for label, src in targets:
        dst = work / "in" / label.replace("/", "_").replace(" ", "_")
        shutil.copytree(src, dst)
        out = work / "out" / (dst.name + ".html")
        out.parent.mkdir(parents=True, exist_ok=True)
        args = ["-m", "llmbench.cli", "report", str(dst), "--output", str(out)]
        child(args, env)                                      # warm-up: bytecode, font cache
        runs = [child(args, env) for _ in range(a.repeat)]
        html = out.read_text(encoding="utf-8")
        results["reports"].append({
            "report": label, "wall_s": statistics.median(r[0] for r in runs),
            "cpu_s": statistics.median(r[1] for r in runs), "rc": runs[-1][2],
            "html_bytes": len(html.encode()), "charts": chart_sizes(html)})
    ramps = sorted((work / "in").glob("num_parallel_*"))
    out = work / "out" / "compare.html"
    png = work / "out" / "compare.png"
    for with_png in (False, True):
        args = ["-m", "llmbench.cli", "compare", *map(str, ramps), "--html", str(out)]
        if with_png:
            args += ["--png", str(png)]
        child(args, env)
        runs = [child(args, env) for _ in range(a.repeat)]
        html = out.read_text(encoding="utf-8")
        results["reports"].append({
            "report": "compare num_parallel 1 vs 4" + (" --png" if with_png else ""),
            "wall_s": statistics.median(r[0] for r in runs),
            "cpu_s": statistics.median(r[1] for r in runs), "rc": runs[-1][2],
            "html_bytes": len(html.encode()), "charts": chart_sizes(html),
            **({"png_bytes": png.stat().st_size} if with_png else {})})
    if not a.no_in_process:
        results["charts"] = in_process()
    shutil.rmtree(work, ignore_errors=True)
    if a.json:
        print(json.dumps(results, indent=1))
        return
    print("import cost (cumulative -X importtime, best of 3)")
    for k, v in results["imports"].items():
        print(f"  {v:8.1f} ms  {k}")
    print(f"\nreports (median of {a.repeat}, child process: wall, CPU user+sys, HTML bytes; "
          "chart bytes)")
    for r in results["reports"]:
        sizes = ", ".join(f"{n} {b / 1024:.1f}k" for n, b in r["charts"])
        extra = f"  png {r['png_bytes'] / 1024:.1f}k" if "png_bytes" in r else ""
        print(f"  {r['report'][:58]:58} {r['wall_s']:6.2f} s {r['cpu_s']:6.2f} s CPU "
              f"{r['html_bytes'] / 1024:7.1f} kB{extra}\n      {sizes}")
    if "charts" in results:
        print("\nper chart, the same description drawn three ways (ms first call / steady; bytes)")
        print(f"  {'chart':16} {'svgplot':>18} {'matplotlib svg':>22} {'matplotlib png':>22}")
        for c in results["charts"]:
            cells = [f"{c[e + '_first_ms']:5.0f}/{c[e + '_ms']:4.0f} {c[e + '_bytes'] / 1024:5.1f}k"
                     for e in ("svgplot", "mpl_svg", "mpl_png")]
            print(f"  {c['chart']:16} {cells[0]:>18} {cells[1]:>22} {cells[2]:>22}")


if __name__ == "__main__":
    main()
