"""Peak memory of ``llmbench run`` over a long run (issue 12, item 5).

  python scripts/bench_memory.py --requests 20000 100000 1000000
  python scripts/bench_memory.py --requests 20000 --output-tokens 128

Starts ``llmbench mock`` (zero delay) in its own process, then the real CLI ``llmbench run`` in a
subprocess against it, and reports the peak resident set of llmbench's own process(es) only:
the run's process from ``wait4`` (its ru_maxrss, exact, whatever happened after the last poll)
plus the high-water marks (VmHWM) of any child processes it starts (workers), polled. The mock
is not counted. It also checks that requests.jsonl holds as many records as requests were asked
for, and that the summary's ``requests`` says the same.

Figures depend on how busy the machine is only through time, not memory; the per-request slope
(MB per 100k requests between the sizes run) says whether memory still grows with the run.

Measured 2026-11-30 on the shared 2-core machine (8-token replies, concurrency 32):
  before (records as Record objects):  20k 130.7 MB, 100k 295.9 MB
  after (RecordStore, columnar summary, regenerated synthetic workload):
                                       20k 111.6 MB, 100k 146.2 MB
  128-token replies, 20k: 322 MB before (issue 12), 184.9 MB after
About 97 MB of any run is fixed: imports (~49 MB) and matplotlib for report.html (~50 MB).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LLMBENCH = [sys.executable, "-c", "import sys; from llmbench.cli import main; sys.exit(main())"]


def start_mock(tokens: int) -> tuple[subprocess.Popen[str], str]:
    cmd = LLMBENCH[:] + ["mock", "--ttft-ms", "0", "--itl-ms", "0", "--tokens", str(tokens),
                         "--port", "0", "--parallel", "0"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    # "llmbench mock 0 on http://127.0.0.1:PORT  (OpenAI: .../v1, Ollama: ...)"
    if " on http" not in line:
        proc.kill()
        raise SystemExit(f"the mock did not start: {line!r}")
    url = line.split(" on ", 1)[1].split()[0]
    return proc, url


def descendants(pid: int) -> list[int]:
    """Child processes of ``pid`` (recursively), from /proc."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/task/{p}/children") as fh:
                kids = [int(x) for x in fh.read().split()]
        except OSError:
            continue
        out.extend(kids)
        todo.extend(kids)
    return out


def hwm_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def run_once(url: str, requests: int, tokens: int, concurrency: int, out: Path) -> dict:
    cmd = LLMBENCH[:] + ["run", "--url", url + "/v1", "--model", "mock",
                         "--requests", str(requests), "--concurrency", str(concurrency),
                         "--prompt-tokens", "8", "--output-tokens", str(tokens),
                         "--tokenizer", "approx", "--server-probe", "off", "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env=env)
    kids_hwm: dict[int, int] = {}
    main_hwm = [0]
    done = threading.Event()

    def poll() -> None:
        while not done.wait(0.5):
            main_hwm[0] = max(main_hwm[0], hwm_kb(proc.pid))
            for k in descendants(proc.pid):
                kids_hwm[k] = max(kids_hwm.get(k, 0), hwm_kb(k))
    th = threading.Thread(target=poll, daemon=True)
    th.start()
    assert proc.stdout is not None
    stdout = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    done.set()
    th.join()
    wall_s = time.perf_counter() - t0
    if proc.returncode != 0:
        print(stdout[-2000:], file=sys.stderr)
        raise SystemExit(f"llmbench run exited {proc.returncode}")
    run_dir = max((p for p in out.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime)
    with open(run_dir / "requests.jsonl", "rb") as fh:
        lines = sum(1 for _ in fh)
    summary = json.loads((run_dir / "run.json").read_text())["summary"]
    main_kb = max(usage.ru_maxrss, main_hwm[0])      # ru_maxrss is in KiB on Linux
    return {"requests": requests, "records": lines, "summary_requests": summary["requests"],
            "completed": summary["completed"], "peak_rss_mb": (main_kb + sum(kids_hwm.values())) / 1024,
            "main_mb": main_kb / 1024, "children": len(kids_hwm), "wall_s": wall_s,
            "cpu_s": usage.ru_utime + usage.ru_stime}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, nargs="+", default=[20000, 100000])
    ap.add_argument("--output-tokens", type=int, default=8, help="reply length (tokens)")
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--limit-mb", type=float, default=250.0)
    a = ap.parse_args()
    mock, url = start_mock(a.output_tokens)
    rows = []
    try:
        with tempfile.TemporaryDirectory() as d:
            for n in a.requests:
                r = run_once(url, n, a.output_tokens, a.concurrency, Path(d) / str(n))
                rows.append(r)
                ok = r["records"] == n == r["summary_requests"]
                print(f"{n:>9} requests x {a.output_tokens} tokens: peak RSS {r['peak_rss_mb']:6.1f} MB"
                      f" (main {r['main_mb']:.1f}, {r['children']} child processes)  "
                      f"records {r['records']} {'==' if ok else '!='} requests  "
                      f"[{r['wall_s']:.0f} s wall, {r['cpu_s']:.0f} s CPU, "
                      f"{n / r['wall_s']:.0f} req/s]"
                      f"  {'OK' if ok and r['peak_rss_mb'] < a.limit_mb else 'FAIL'}", flush=True)
    finally:
        mock.terminate()
        mock.wait(5)
    if len(rows) >= 2:
        a0, b0 = rows[0], rows[-1]
        slope = (b0["peak_rss_mb"] - a0["peak_rss_mb"]) / (b0["requests"] - a0["requests"])
        print(f"slope: {slope * 1e5:.1f} MB per 100k requests "
              f"({slope * 1024 * 1024:.0f} bytes per request)")


if __name__ == "__main__":
    main()
