"""What the live views cost the load generator, in CPU microseconds per token event: a whole
``Harness.run`` (128 closed-loop streams of 100-token replies against the mock in another
process) with no observer, then with every live view a run can have: the Prometheus exporter
(scraped once a second), the terminal view (handed records only on a terminal) and the
dashboard's feed (its page in its own process, not counted). Only this process's CPU counts.

Token events reach the observers as they arrive without a call per token: the harness sums
the token times of the replies in flight ten times a second (load.harness.live_events); the
line "live_events" times that sum alone.

  python scripts/bench_live_views.py --streams 128 --seconds 8
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("LLMBENCH_TOKENIZER", "approx")

from llmbench.client.request import RequestParams, Timeouts  # noqa: E402
from llmbench.client.target import make_target  # noqa: E402
from llmbench.load.harness import Harness, TargetSpec  # noqa: E402
from llmbench.load.shapes.fixed import ClosedLoop  # noqa: E402
from llmbench.mock_server import MockProcess, make_config  # noqa: E402
from llmbench.workload import WorkloadSpec, build_workload, load_tokenizer  # noqa: E402


def one(url: str, streams: int, tokens: int, seconds: float, views: bool) -> tuple[float, int]:
    wl = build_workload(WorkloadSpec(count=5000, prompt_tokens=(16, 16),
                                     output_tokens=(tokens, tokens)), load_tokenizer("approx"))
    h = Harness(RequestParams(), Timeouts(), None, progress=False)
    board = scraper = None
    stop = threading.Event()
    if views:
        from llmbench.report.dashboard.feed import DashboardFeed
        from llmbench.report.dashboard.handle import Dashboard
        from llmbench.report.live import LiveBoard
        from llmbench.report.prometheus import MetricsExporter
        exporter = MetricsExporter(port=0)
        board = Dashboard().open()
        board.begin({"kind": "run", "unit": "users"})
        h.observers = [exporter, LiveBoard(), DashboardFeed(board)]

        def scrape() -> None:
            while not stop.wait(1.0):
                if exporter._server is not None:
                    try:
                        urllib.request.urlopen(exporter.url, timeout=5).read()
                    except OSError:
                        pass
        scraper = threading.Thread(target=scrape, daemon=True)
        scraper.start()
    shape = ClosedLoop(wl.conversations, concurrency=streams, duration_s=seconds)
    cpu0 = time.process_time()
    out = h.run(shape, [TargetSpec(make_target(url + "/v1", "mock"), server_probe="off")])
    cpu = time.process_time() - cpu0
    stop.set()
    if board is not None:
        board.close()
    return cpu, sum(len(r.token_times) for r in out.records)


def live_events_cost(streams: int) -> float:
    from types import SimpleNamespace
    from llmbench.load.harness import live_events
    from llmbench.load.session import Counters
    from llmbench.records.record import Record
    active = set()
    for i in range(streams):
        r = Record(f"r{i}", scheduled=0.0)
        r.token_times.extend(float(k) for k in range(50))
        active.add(r)
    sessions = {"main": SimpleNamespace(counters=Counters(), active=active)}
    n = 20000
    t0 = time.process_time()
    for _ in range(n):
        live_events(sessions)            # type: ignore[arg-type]
    return (time.process_time() - t0) / n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--streams", type=int, default=128)
    ap.add_argument("--tokens", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--itl-ms", type=float, default=5.0)
    a = ap.parse_args()
    per = live_events_cost(a.streams)
    print(f"live_events, {a.streams} replies in flight: {per * 1e6:.1f} us a call, "
          f"{per * 10 * 1e6:.0f} us of CPU a second at 10 calls a second")
    cfg = make_config(None, ttft_ms=20.0, itl_ms=a.itl_ms, tokens=a.tokens)
    with MockProcess(cfg) as m:
        for views in (False, True, False, True):
            cpu, events = one(m.url, a.streams, a.tokens, a.seconds, views)
            print(f"{'every live view' if views else 'no observer    '}: {events} token events, "
                  f"{cpu / max(events, 1) * 1e6:.1f} us CPU per token event all-in")


if __name__ == "__main__":
    main()
