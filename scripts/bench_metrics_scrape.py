"""What a Prometheus scrape of ``--metrics-port`` costs the load it watches.

The mock runs in another process (TTFT 100 ms, 50 tokens 20 ms apart, unlimited slots); this
process drives N closed-loop streams (128 by default) for ~15 s with a Harness, three times:

  none     no exporter (what a run without --metrics-port does)
  idle     the exporter is open, nobody scrapes it: the loop only appends each finished record
           to a deque (the one render after the run drains them all and is timed apart)
  scraped  a separate process (as Prometheus would be) GETs /metrics every 100 ms: each scrape
           buckets the records since the last one and renders the text in the exporter's
           thread, which shares the GIL with the event loop

Per run: requests, TTFT p50/p99 (the summary's), the event-loop lag (median and worst second's
p99, worst single lag), this process's CPU (process time / wall, % of one core; the exporter's
thread is in it), and for the exporter its scrapes, mean render time and exposition size.

  python scripts/bench_metrics_scrape.py
  python scripts/bench_metrics_scrape.py --streams 128 --seconds 15 --interval-ms 100 --repeat 2
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("LLMBENCH_TOKENIZER", "approx")

from llmbench.analysis.metrics import summarize  # noqa: E402
from llmbench.client.request import RequestParams, Timeouts  # noqa: E402
from llmbench.client.target import make_target  # noqa: E402
from llmbench.load.harness import Harness, TargetSpec  # noqa: E402
from llmbench.load.monitor import busy  # noqa: E402
from llmbench.load.shapes.fixed import ClosedLoop  # noqa: E402
from llmbench.report.prometheus import MetricsExporter  # noqa: E402
from llmbench.workload import Conversation, Turn  # noqa: E402
from llmbench.mock_server import MockProcess, make_config  # noqa: E402

# The scraper: its own interpreter, a GET every interval until stdin closes; prints how many
# scrapes, the mean and max wall time of one (request to last byte) and the last body's size.
SCRAPER = r"""
import sys, threading, time, urllib.request
url, interval = sys.argv[1], float(sys.argv[2])
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
n, total, worst, size, failed = 0, 0.0, 0.0, 0, 0
nxt = time.perf_counter()
while not stop.is_set():
    t0 = time.perf_counter()
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            size = len(r.read())
        dt = time.perf_counter() - t0
        n, total, worst = n + 1, total + dt, max(worst, dt)
    except OSError:
        failed += 1
    nxt += interval
    stop.wait(max(nxt - time.perf_counter(), 0.0))
print(n, total, worst, size, failed, flush=True)
"""


def one_run(url: str, mode: str, streams: int, seconds: float, tokens: int,
            interval_s: float) -> dict[str, Any]:
    convs = [Conversation(f"c{i}", (Turn(f"hello {i} there friend", tokens, 16),))
             for i in range(50_000)]
    shape = ClosedLoop(convs, concurrency=streams, duration_s=seconds)
    exporter = MetricsExporter(port=0, run=f"bench-{mode}") if mode != "none" else None
    scraper = None
    if exporter is not None:
        exporter.start()                  # the harness keeps an open port (and closes it)
        if mode == "scraped":
            scraper = subprocess.Popen([sys.executable, "-c", SCRAPER, exporter.url, str(interval_s)],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            deadline = time.monotonic() + 10
            while exporter.scrapes == 0 and time.monotonic() < deadline:
                time.sleep(0.02)
    scrapes0 = exporter.scrapes if exporter is not None else 0
    render0 = exporter.render_s_total if exporter is not None else 0.0
    harness = Harness(RequestParams(), Timeouts(), None, progress=False,
                      observers=[exporter] if exporter is not None else [])
    wall0, cpu0 = time.perf_counter(), time.process_time()
    out = harness.run(shape, [TargetSpec(make_target(url + "/v1", "mock"), server_probe="off")])
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    res: dict[str, Any] = {"mode": mode, "wall": wall, "cpu_pct": 100.0 * cpu / wall}
    if scraper is not None:
        got, _ = scraper.communicate("", timeout=30)
        n, total, worst, size, failed = got.split()
        res.update(scraper_n=int(n), scrape_mean_ms=float(total) / max(int(n), 1) * 1e3,
                   scrape_max_ms=float(worst) * 1e3, scraper_failed=int(failed))
    sm = summarize(out.records).flat()
    mon = busy(out.monitor)
    per_second = [s.lag_p99_ms for s in out.monitor]
    res.update(requests=len(out.records), ok=sm["completed"], ttft_p50=sm["median_ttft_ms"],
               ttft_p99=sm["p99_ttft_ms"], lag_p99_median=mon["lag_p99_ms"],
               lag_p99_worst=max(per_second, default=0.0), lag_max=mon["lag_max_ms"],
               monitor_cpu=mon["cpu_pct"], events=sm["total_output_tokens"])
    if exporter is not None:
        scrapes = exporter.scrapes - scrapes0
        res.update(scrapes=scrapes,
                   render_mean_ms=(exporter.render_s_total - render0) / scrapes * 1e3 if scrapes else None)
        t0 = time.perf_counter()
        body = exporter.render()          # after the run: for "idle", every record at once
        res.update(final_render_ms=(time.perf_counter() - t0) * 1e3, size=len(body))
    return res


def show(r: dict[str, Any]) -> None:
    line = (f"{r['mode']:>8}: {r['requests']:5d} requests ({r['ok']} ok, {r['events']} tokens) "
            f"in {r['wall']:.1f} s | TTFT p50 {r['ttft_p50']:.1f} ms p99 {r['ttft_p99']:.1f} ms | "
            f"loop lag p99 {r['lag_p99_median']:.1f} ms (median second), "
            f"{r['lag_p99_worst']:.1f} ms (worst second), max {r['lag_max']:.1f} ms | "
            f"CPU {r['cpu_pct']:.0f}% of a core (monitor {r['monitor_cpu']:.0f}%)")
    print(line, flush=True)
    if r["mode"] == "idle":
        print(f"{'':>10}exporter not scraped; one render after the run (every record at once): "
              f"{r['final_render_ms']:.1f} ms, {r['size']} bytes", flush=True)
    elif r["mode"] == "scraped":
        print(f"{'':>10}{r['scrapes']} scrapes served, render {r['render_mean_ms']:.2f} ms mean "
              f"(render_s_total / scrapes), {r['size']} bytes; the scraper saw "
              f"{r['scrape_mean_ms']:.1f} ms mean, {r['scrape_max_ms']:.1f} ms max per GET"
              + (f", {r['scraper_failed']} refused (the port closed after the run)"
                 if r["scraper_failed"] else ""), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--streams", type=int, default=128)
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--tokens", type=int, default=50)
    ap.add_argument("--ttft-ms", type=float, default=100.0)
    ap.add_argument("--itl-ms", type=float, default=20.0)
    ap.add_argument("--interval-ms", type=float, default=100.0, help="scrape interval")
    ap.add_argument("--repeat", type=int, default=1, help="rounds of the three runs")
    ap.add_argument("--modes", default="none,idle,scraped")
    a = ap.parse_args()
    print(f"{a.streams} closed-loop streams, TTFT {a.ttft_ms:g} ms, {a.tokens} tokens "
          f"{a.itl_ms:g} ms apart, {a.seconds:g} s per run, scrape every {a.interval_ms:g} ms "
          f"from another process; {os.cpu_count()} cores, load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
    cfg = make_config(None, ttft_ms=a.ttft_ms, itl_ms=a.itl_ms, tokens=a.tokens)
    with MockProcess(cfg) as m:
        for _ in range(a.repeat):
            for mode in a.modes.split(","):
                show(one_run(m.url, mode, a.streams, a.seconds, a.tokens, a.interval_ms / 1000.0))


if __name__ == "__main__":
    main()
