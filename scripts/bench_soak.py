"""Memory of a long ``llmbench run`` at a fixed rate: what each record costs, and what an hour
costs (issue 40 section 4: a 10-minute soak grew 71 -> 80 MB, about 600 bytes a record).

  python scripts/bench_soak.py                          # 30 and 90 req/s, 240 s each
  python scripts/bench_soak.py --rates 30 --duration 600 --output-tokens 128

Starts ``llmbench mock`` with real gaps between tokens (TTFT 20 ms, ITL 10 ms, unlimited
slots: token times then take the 1-2 bytes each a real stream's do, not the zero-delay
mock's 1), then the real CLI ``llmbench run --rate R --duration D`` against it, as a user runs
it (open loop, server probe on, live line off). Every 5 s it samples the run's resident set
(VmRSS from /proc) and how many records requests.jsonl holds; the run's peak is its
ru_maxrss (wait4), end-of-run passes included.

What it prints, per rate: RSS when the load starts, the slope of RSS over records during the
load (least squares over the samples after the first fifth: bytes per record), the peak.
With two rates (the same duration) it splits the growth into a cost per record and a cost
per second (the monitor's and the server probe's samples grow with time, not requests):
growth per second at rate r = per_record * r + per_second. Then the hour: the peak a 1-hour
run at 30 req/s (108,000 records) would reach, from the higher rate's run (its start, its
end-of-run passes, scaled by records) plus per_record * (108,000 - its records) and
per_second * (3,600 - its seconds): a shorter run at a higher rate stands in for the hour,
because what grows is the records. The budget: under 200 MB.
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


def start_mock(tokens: int) -> tuple[subprocess.Popen[str], str]:
    cmd = LLMBENCH + ["mock", "--ttft-ms", "20", "--itl-ms", "10", "--tokens", str(tokens),
                      "--port", "0", "--parallel", "0"]
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


def soak(url: str, rate: float, duration_s: float, tokens: int, out: Path) -> dict:
    cmd = LLMBENCH + ["run", "--url", url + "/v1", "--model", "mock", "--rate", str(rate),
                      "--duration", f"{duration_s:g}s", "--prompt-tokens", "32",
                      "--output-tokens", str(tokens), "--tokenizer", "approx",
                      "--no-progress", "--out", str(out)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    samples: list[tuple[float, int, int]] = []         # (s since start, records, RSS KiB)
    done = threading.Event()

    def poll() -> None:
        while not done.wait(5.0):
            logs = list(out.glob("*/requests.jsonl"))
            n = lines_of(logs[0]) if logs else 0
            if n:
                samples.append((time.perf_counter() - t0, n, rss_kb(proc.pid)))
    th = threading.Thread(target=poll, daemon=True)
    th.start()
    assert proc.stdout is not None
    proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    done.set()
    th.join()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"llmbench run exited {os.waitstatus_to_exitcode(status)}")
    run_dir = next(p for p in out.iterdir() if p.is_dir())
    records = lines_of(run_dir / "requests.jsonl")
    summary = json.loads((run_dir / "run.json").read_text())["summary"]
    # the load's samples: records still growing (the end-of-run passes come after)
    load = [s for s in samples if s[1] < records] or samples
    warm = load[len(load) // 5:] or load
    n = [s[1] for s in warm]
    m = [s[2] * 1024.0 for s in warm]
    t = [s[0] for s in warm]
    slope = _fit(n, m)
    per_s = _fit(t, m)
    return {"rate": rate, "records": records, "summary_requests": summary["requests"],
            "seconds": load[-1][0] - load[0][0] if len(load) > 1 else 0.0,
            "start_mb": load[0][2] / 1024.0, "end_of_load_mb": load[-1][2] / 1024.0,
            "peak_mb": usage.ru_maxrss / 1024.0, "bytes_per_record": slope,
            "bytes_per_s": per_s, "load_records": load[-1][1]}


def _fit(x: list[float], y: list[float]) -> float:
    """Least-squares slope of y over x (0 with fewer than two points)."""
    if len(x) < 2:
        return 0.0
    mx, my = sum(x) / len(x), sum(y) / len(y)
    den = sum((a - mx) ** 2 for a in x)
    return sum((a - mx) * (b - my) for a, b in zip(x, y)) / den if den else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rates", type=float, nargs="+", default=[30.0, 90.0])
    ap.add_argument("--duration", type=float, default=240.0, help="seconds of load per rate")
    ap.add_argument("--output-tokens", type=int, default=128)
    a = ap.parse_args()
    mock, url = start_mock(a.output_tokens)
    rows = []
    try:
        with tempfile.TemporaryDirectory() as d:
            for rate in a.rates:
                r = soak(url, rate, a.duration, a.output_tokens, Path(d) / f"r{rate:g}")
                rows.append(r)
                ok = r["records"] == r["summary_requests"]
                print(f"{rate:g} req/s x {a.duration:g} s x {a.output_tokens} tokens: "
                      f"{r['records']} records ({'==' if ok else '!='} summary), RSS at the "
                      f"load's start {r['start_mb']:.1f} MB, at its end {r['end_of_load_mb']:.1f} "
                      f"MB, peak {r['peak_mb']:.1f} MB; growth {r['bytes_per_record']:.0f} "
                      f"bytes per record ({r['bytes_per_s'] / 1024:.1f} kB/s)", flush=True)
    finally:
        mock.terminate()
        mock.wait(5)
    if len(rows) < 2:
        return
    lo, hi = rows[0], rows[-1]
    # growth per second = per_record * rate + per_second, at each rate
    per_record = (hi["bytes_per_s"] - lo["bytes_per_s"]) / (hi["rate"] - lo["rate"])
    per_second = lo["bytes_per_s"] - per_record * lo["rate"]
    n_hour = HOUR_S * HOUR_RATE
    # the end-of-run passes of the larger run, scaled by records
    passes = max(hi["peak_mb"] - hi["end_of_load_mb"], 0.0) * n_hour / max(hi["records"], 1)
    hour = (hi["end_of_load_mb"] + per_record * (n_hour - hi["load_records"]) / 2**20
            + per_second * (HOUR_S - hi["seconds"]) / 2**20 + passes)
    print(f"split: {per_record:.0f} bytes per record, {per_second / 1024:.2f} kB per second "
          "(monitor and server samples)")
    print(f"1 hour at {HOUR_RATE:g} req/s ({n_hour:,.0f} records): about {hour:.0f} MB at its peak "
          f"(budget {BUDGET_MB:g} MB)  {'OK' if hour < BUDGET_MB else 'OVER'}")


if __name__ == "__main__":
    main()
