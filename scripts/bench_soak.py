"""Memory of a long ``llmbench run`` at a fixed rate: what each record costs, and what an hour
of 30 req/s (108,000 records) costs (issue 40 section 4: a 10-minute soak grew 71 -> 80 MB).

  python scripts/bench_soak.py                         # the hour's 108,000 records at 150 req/s
  python scripts/bench_soak.py --rate 30 --records 18000 --itl-ms 10   # 10 minutes at 30 req/s

Starts ``llmbench mock`` (TTFT 5 ms, ITL 1 ms by default: real gaps, so token times take the
1-2 bytes each a stream's do, not the zero-delay mock's 1; unlimited slots), then the real CLI
``llmbench run --rate R --requests N`` against it, as a user runs it (open loop, server probe
on, no live view). Every 5 s it samples the run's resident set (VmRSS from /proc) and how many
records requests.jsonl holds; the peak is the run's ru_maxrss (wait4: end-of-run passes and
report included).

The hour is stood in for by its records at a higher rate: what a run keeps grows with its
records (the column store: docs/memory.md), and what grows with time instead, one monitor
sample and one server-probe sample a second, is a few hundred bytes a second (about 1 MB an
hour; the script prints the run's own figure of it, from requests per second and the slope).
Printed: RSS when the load starts, at its end, the peak, and bytes per record over the load
(least squares over the samples after the first fifth: what each record adds once the
process is warm), and the verdict against the 200 MB budget.
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
LLMBENCH = [sys.executable, "-c", "import sys; from llmbench.cli.app import main; sys.exit(main())"]
HOUR_S, HOUR_RATE, BUDGET_MB = 3600.0, 30.0, 200.0


def start_mock(tokens: int, ttft_ms: float, itl_ms: float) -> tuple[subprocess.Popen[str], str]:
    cmd = LLMBENCH + ["mock", "--ttft-ms", f"{ttft_ms:g}", "--itl-ms", f"{itl_ms:g}",
                      "--tokens", str(tokens), "--port", "0", "--parallel", "0"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if " on http" not in line:
        proc.kill()
        raise SystemExit(f"the mock did not start: {line!r}")
    return proc, line.split(" on ", 1)[1].split()[0]


def rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def lines_of(path: Path) -> int:
    try:
        with open(path, "rb") as fh:
            return sum(1 for _ in fh)
    except OSError:
        return 0


def _fit(x: list[float], y: list[float]) -> float:
    """Least-squares slope of y over x (0 with fewer than two points)."""
    if len(x) < 2:
        return 0.0
    mx, my = sum(x) / len(x), sum(y) / len(y)
    den = sum((a - mx) ** 2 for a in x)
    return sum((a - mx) * (b - my) for a, b in zip(x, y)) / den if den else 0.0


def soak(url: str, rate: float, records: int, tokens: int, out: Path,
         concurrency: int | None = None) -> dict:
    load = ["--concurrency", str(concurrency)] if concurrency else ["--rate", f"{rate:g}"]
    cmd = LLMBENCH + ["run", "--url", url + "/v1", "--model", "mock", *load,
                      "--requests", str(records), "--prompt-tokens", "32",
                      "--output-tokens", str(tokens), "--tokenizer", "approx",
                      "--no-progress", "--out", str(out)]
    t0 = time.perf_counter()
    err = open(out.parent / "stderr.txt", "w")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    samples: list[tuple[float, int, int]] = []         # (s since start, records, RSS KiB)
    done = threading.Event()

    def poll() -> None:
        log: Path | None = None
        while not done.wait(5.0):
            if log is None:
                found = list(out.glob("*/requests.jsonl"))
                log = found[0] if found else None
            n = lines_of(log) if log is not None else 0
            if n:
                samples.append((time.perf_counter() - t0, n, rss_kb(proc.pid)))
    th = threading.Thread(target=poll, daemon=True)
    th.start()
    assert proc.stdout is not None
    proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    done.set()
    th.join()
    err.close()
    if os.waitstatus_to_exitcode(status) != 0:
        print((out.parent / "stderr.txt").read_text()[-3000:], file=sys.stderr)
        raise SystemExit(f"llmbench run exited {os.waitstatus_to_exitcode(status)}")
    run_dir = next(p for p in out.iterdir() if p.is_dir())
    got = lines_of(run_dir / "requests.jsonl")
    summary = json.loads((run_dir / "run.json").read_text())["summary"]
    load = [s for s in samples if s[1] < got] or samples      # the end-of-run passes after
    warm = load[len(load) // 5:] or load
    slope = _fit([float(s[1]) for s in warm], [s[2] * 1024.0 for s in warm])
    seconds = load[-1][0] - load[0][0] if len(load) > 1 else 0.0
    return {"records": got, "summary_requests": summary["requests"],
            "rate_seen": (load[-1][1] - load[0][1]) / seconds if seconds else 0.0,
            "start_mb": load[0][2] / 1024.0, "end_of_load_mb": load[-1][2] / 1024.0,
            "peak_mb": usage.ru_maxrss / 1024.0, "bytes_per_record": slope,
            "seconds": seconds, "wall_s": time.perf_counter() - t0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rate", type=float, default=150.0)
    ap.add_argument("--concurrency", type=int, default=None,
                    help="a closed loop of N users instead of --rate: in flight stays N, so "
                         "what grows is what the run keeps (an open loop the machine cannot "
                         "keep up with grows by what is in flight)")
    ap.add_argument("--records", type=int, default=int(HOUR_S * HOUR_RATE))
    ap.add_argument("--output-tokens", type=int, default=128)
    ap.add_argument("--ttft-ms", type=float, default=5.0)
    ap.add_argument("--itl-ms", type=float, default=1.0)
    a = ap.parse_args()
    mock, url = start_mock(a.output_tokens, a.ttft_ms, a.itl_ms)
    try:
        with tempfile.TemporaryDirectory() as d:
            r = soak(url, a.rate, a.records, a.output_tokens, Path(d) / "soak", a.concurrency)
    finally:
        mock.terminate()
        mock.wait(5)
    ok = r["records"] == r["summary_requests"] == a.records
    how = f"{a.concurrency} users" if a.concurrency else f"{a.rate:g} req/s"
    print(f"{a.records} records at {how} ({r['rate_seen']:.0f} req/s seen) x "
          f"{a.output_tokens} tokens (ITL {a.itl_ms:g} ms): records {r['records']} "
          f"{'==' if ok else '!='} requests; RSS at the load's start {r['start_mb']:.1f} MB, at "
          f"its end {r['end_of_load_mb']:.1f} MB, peak {r['peak_mb']:.1f} MB; "
          f"{r['bytes_per_record']:.0f} bytes per record once warm "
          f"[{r['wall_s']:.0f} s wall]")
    # what grows with time, not records: a monitor and a server-probe sample a second
    hour_extra_mb = max(HOUR_S - r["seconds"], 0.0) * 400 / 2**20
    n_hour = HOUR_S * HOUR_RATE
    if r["records"] >= n_hour:
        hour = r["peak_mb"] + hour_extra_mb
    else:       # a shorter run: its start, its slope to the hour's records, and its end-of-run
        # passes as they were (mostly fixed: 14 MB after 10,800 records, 17 MB after 108,000)
        passes = max(r["peak_mb"] - r["end_of_load_mb"], 0.0)
        hour = (r["start_mb"] + r["bytes_per_record"] * n_hour / 2**20 + passes
                + hour_extra_mb)
    print(f"an hour at {HOUR_RATE:g} req/s ({HOUR_S * HOUR_RATE:,.0f} records): about {hour:.0f} MB "
          f"at its peak (this run's peak, plus ~400 bytes a second for the {HOUR_S - r['seconds']:.0f} "
          f"s it did not last: {hour_extra_mb:.1f} MB); budget {BUDGET_MB:g} MB  "
          f"{'OK' if hour < BUDGET_MB and ok else 'OVER' if ok else 'FAIL'}")


if __name__ == "__main__":
    main()
