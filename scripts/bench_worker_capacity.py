"""Per-process capacity: at how many lock-step streams does one llmbench process's own check
(event-loop lag p99 > 10 ms, or CPU > 90% of a core) start to flag itself?

Runs ``llmbench run --concurrency N --workers W`` against the mock in its own process (TTFT
100 ms, one token per 20 ms, 100 tokens: the issue's lock-step setup) for each N, and prints
each worker's lag p99 and CPU, token events/s, and whether the run flagged itself. The
capacity table in docs/workers.md and ``llmbench.workers.plan.STREAMS_PER_PROCESS`` come from this.

    PYTHONPATH=. python scripts/bench_worker_capacity.py --streams 32,64,96,128 --workers 1
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmbench.mock_server import MockConfig, MockProcess  # noqa: E402


def one(url: str, streams: int, workers: int, seconds: float, out: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LLMBENCH_TOKENIZER": "approx"}
    cmd = [sys.executable, "-m", "llmbench.cli", "run", "--url", url, "--model", "mock",
           "--concurrency", str(streams), "--duration", f"{seconds:g}s",
           "--prompt-tokens", "16", "--output-tokens", "100", "--ignore-eos",
           "--workers", str(workers), "--out", str(out), "--no-progress"]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    if p.returncode != 0:
        raise SystemExit(f"llmbench failed ({p.returncode}): {p.stderr[-500:]}")
    run_dir = max(out.iterdir(), key=lambda d: d.stat().st_mtime)
    run = json.loads((run_dir / "run.json").read_text())
    samples = run["monitor"]["samples"][1:-1] or run["monitor"]["samples"]   # whole seconds
    per: dict[str, list[dict]] = {}
    for s in samples:
        per.setdefault(str(s.get("worker")), []).append(s)
    rows = {}
    for w, ss in per.items():
        lags = sorted(x["lag_p99_ms"] for x in ss)
        rows[w] = {"lag_p99_ms": lags[len(lags) // 2],
                   "cpu_pct": sum(x["cpu_pct"] for x in ss) / len(ss)}
    s = run["summary"]
    return {"streams": streams, "workers": workers, "per_worker": rows,
            "overloaded": run["monitor"]["overloaded"],
            "token_events_per_s": s.get("output_throughput"),
            "mean_in_flight": s.get("mean_in_flight") or s.get("max_concurrent_requests"),
            "ttft_p50_ms": s.get("median_ttft_ms"), "itl_p99_ms": s.get("p99_itl_ms")}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--streams", default="16,32,64,96,128")
    ap.add_argument("--workers", default="1")
    ap.add_argument("--seconds", type=float, default=10.0)
    a = ap.parse_args()
    cfg = MockConfig(ttft_ms=100, itl_ms=20, tokens=100)
    with MockProcess(cfg) as mock, tempfile.TemporaryDirectory() as tmp:
        print(f"{'streams':>7} {'workers':>7} {'lag p99 ms (per worker)':>26} "
              f"{'CPU % (per worker)':>20} {'tok/s':>7} {'TTFT p50':>9} {'ITL p99':>8} flagged")
        for w in a.workers.split(","):
            for n in (int(x) for x in a.streams.split(",")):
                r = one(mock.url + "/v1", n, int(w), a.seconds, Path(tmp))
                lag = "/".join(f"{v['lag_p99_ms']:.1f}" for v in r["per_worker"].values())
                cpu = "/".join(f"{v['cpu_pct']:.0f}" for v in r["per_worker"].values())
                print(f"{n:>7} {w:>7} {lag:>26} {cpu:>20} {r['token_events_per_s'] or 0:>7.0f} "
                      f"{r['ttft_p50_ms'] or 0:>9.1f} {r['itl_p99_ms'] or 0:>8.1f} "
                      f"{'yes' if r['overloaded'] else 'no'}", flush=True)


if __name__ == "__main__":
    main()
