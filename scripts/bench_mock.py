"""The mock's own figures: timing accuracy, capacity in zero-delay mode, memory over a long run.

  python scripts/bench_mock.py timing   --streams 128 --seconds 15   # actual gaps/TTFT vs configured
  python scripts/bench_mock.py capacity --seconds 15 --workers 1,2   # req/s and events/s, 64-token streams
  python scripts/bench_mock.py memory   --requests 100000            # RSS as requests go by
  python scripts/bench_mock.py streams  --workers 1,2 --streams-list 128,256,512
      # capacity in streams: does the mock (1 or 2 worker processes) keep a 20 ms gap
      # for 100-token streams? judged from its own send-time log, with its CPU per event

The mock runs in a child process; llmbench's client drives it from this one. Timing comes from
the mock's own send-time log (--record), so it is the server's truth, not the client's view.
Capacity is reported twice: what was served, and the ceiling implied by the mock's CPU time per
request (on a 2-core machine the client shares the CPU, so the served rate is client-bound).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("LLMBENCH_TOKENIZER", "approx")

from llmbench.client.request import Client, RequestParams  # noqa: E402
from llmbench.load.shapes.fixed import run_closed  # noqa: E402
from llmbench.load.session import Session  # noqa: E402
from llmbench.client.target import make_target  # noqa: E402
from llmbench.workload import Conversation, Turn  # noqa: E402
from llmbench.mock_server import MockProcess, make_config  # noqa: E402
from llmbench.mock_server.recorder import read_log  # noqa: E402


def proc_cpu_s(pid: int) -> float:
    f = open(f"/proc/{pid}/stat").read().split(")")[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def proc_rss_mb(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def convs(n: int, tokens: int) -> list[Conversation]:
    return [Conversation(f"c{i}", (Turn(f"request {i} about the weather today", tokens, 8),))
            for i in range(n)]


async def drive(url: str, streams: int, seconds: float | None, requests: int | None, tokens: int,
                on_progress=None):
    target = make_target(url + "/v1", "mock")
    async with Client(target, RequestParams(), max_connections=streams + 8) as c:
        s = Session(c, None)
        cv = convs(20000, tokens)
        await run_closed(s, cv, streams, streams, None)
        s.records.clear()
        if on_progress is not None:
            s.on_record = on_progress
        t0 = time.perf_counter()
        await run_closed(s, cv, streams, requests, seconds)
        return s.records, time.perf_counter() - t0


def timing(a) -> None:
    with tempfile.TemporaryDirectory() as d:
        log = os.path.join(d, "send.jsonl")
        cfg = make_config(None, ttft_ms=a.ttft_ms, itl_ms=a.itl_ms, tokens=50)
        with MockProcess(cfg, record=log) as m:
            asyncio.run(drive(m.url, a.streams, a.seconds, None, 50))
        entries = [e for e in read_log(log) if e["status"] == "ok" and len(e["event_ns"]) > 1]
    gaps = np.concatenate([np.diff(e["event_ns"]) for e in entries]) / 1e6
    # the first gap after the first token lands on the shared step clock: leave it out
    steady = np.concatenate([np.diff(e["event_ns"][1:]) for e in entries]) / 1e6
    ttft = np.array([(e["event_ns"][0] - e["arrival_ns"]) / 1e6 for e in entries])
    print(f"{a.streams} streams, configured gap {a.itl_ms} ms, TTFT {a.ttft_ms} ms, "
          f"{len(entries)} requests")
    print(f"  gap  p50 {np.percentile(gaps, 50):.2f} ms  p99 {np.percentile(gaps, 99):.2f} ms"
          f"  (steady: p50 {np.percentile(steady, 50):.2f}, p99 {np.percentile(steady, 99):.2f})")
    print(f"  TTFT p50 {np.percentile(ttft, 50):.2f} ms  p99 {np.percentile(ttft, 99):.2f} ms "
          "(server arrival to first send)")


def capacity(a) -> None:
    cfg = make_config(None, ttft_ms=0, itl_ms=0, tokens=64)
    for workers in [int(w) for w in a.workers.split(",")]:
        with MockProcess(cfg, workers=workers) as m:
            pid = m.proc.pid
            c0 = tree_cpu_s(pid)
            records, wall = asyncio.run(drive(m.url, a.streams, a.seconds, None, 64))
            cpu = tree_cpu_s(pid) - c0
        ok = [r for r in records if r.ok]
        events = sum(len(r.token_times) for r in ok)
        print(f"zero-delay, 64-token streams, {a.streams} concurrent, {workers} worker(s), "
              f"{wall:.1f} s")
        print(f"  served: {len(ok) / wall:.0f} req/s, {events / wall:.0f} events/s "
              f"(mock CPU {cpu / wall * 100:.0f}% of a core)")
        print(f"  mock CPU per request {cpu / len(ok) * 1e6:.0f} us -> ceiling about "
              f"{len(ok) / cpu:.0f} req/s, {events / cpu:.0f} events/s per core")


def memory(a) -> None:
    cfg = make_config(None, ttft_ms=0, itl_ms=0, tokens=16, prefix_cache=True)
    with tempfile.TemporaryDirectory() as d:
        with MockProcess(cfg, record=os.path.join(d, "log.jsonl")) as m:
            pid = m.proc.pid
            marks = {}
            done = [0]

            def progress(_rec) -> None:
                done[0] += 1
                if done[0] in (1000, 10000, 50000, 100000) or done[0] % 25000 == 0:
                    marks[done[0]] = proc_rss_mb(pid)

            print(f"start RSS {proc_rss_mb(pid):.1f} MB")
            asyncio.run(drive(m.url, 32, None, a.requests, 16, progress))
            for k in sorted(marks):
                print(f"  after {k:>7} requests: RSS {marks[k]:.1f} MB")


def _client_proc(url: str, streams: int, seconds: float, tokens: int) -> tuple[int, int]:
    """One client process's share of the streams: (requests ok, events)."""
    records, _wall = asyncio.run(drive(url, streams, seconds, None, tokens))
    ok = [r for r in records if r.ok]
    return len(ok), sum(len(r.token_times) for r in ok)


def tree_cpu_s(pid: int) -> float:
    """CPU of a process and its children (the supervisor and its workers)."""
    total = proc_cpu_s(pid)
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if int(open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()[1]) == pid:
                    total += proc_cpu_s(int(d))
            except (OSError, ValueError, IndexError):
                pass
    return total


def streams(a) -> None:
    """For each worker count and stream count: S closed-loop streams of ``--tokens`` tokens, one
    event per ``--itl-ms``, driven by ``--clients`` client processes (so the client is less of
    the bottleneck), judged from the mock's own send-time log: the steady gap between events
    (p50/p99 against the configured gap), arrival to first send against the configured TTFT,
    events served per second against the ideal, and the mock's CPU per event."""
    from concurrent.futures import ProcessPoolExecutor
    tokens = a.tokens
    print(f"gap {a.itl_ms} ms, TTFT {a.ttft_ms} ms, {tokens} tokens, {a.seconds:.0f} s per point, "
          f"{a.clients} client processes, {os.cpu_count()} CPUs (shared: figures are pessimistic)")
    print(f"{'workers':>7} {'streams':>7} {'ev/s':>7} {'ideal':>7} {'gap p50':>8} {'gap p99':>8} "
          f"{'late>5ms':>8} {'ttft p50':>8} {'ttft p99':>8} {'mock CPU':>8} {'us/ev':>6} "
          f"{'ceiling':>7}  keeps up")
    # ceiling: streams one fully free core would carry at the mock's measured CPU per event
    for workers in [int(w) for w in a.workers.split(",")]:
        for n in [int(x) for x in a.streams_list.split(",")]:
            with tempfile.TemporaryDirectory() as d:
                log = os.path.join(d, "send.jsonl")
                cfg = make_config(None, ttft_ms=a.ttft_ms, itl_ms=a.itl_ms, tokens=tokens)
                with MockProcess(cfg, record=log, workers=workers) as m:
                    shares = [n // a.clients + (1 if i < n % a.clients else 0)
                              for i in range(a.clients)]
                    c0 = tree_cpu_s(m.proc.pid)
                    t0_ns = time.perf_counter_ns()
                    with ProcessPoolExecutor(a.clients) as pool:
                        futs = [pool.submit(_client_proc, m.url, k, a.seconds, tokens)
                                for k in shares if k]
                        [f.result() for f in futs]
                    wall = (time.perf_counter_ns() - t0_ns) / 1e9
                    cpu = tree_cpu_s(m.proc.pid) - c0
                entries = [e for e in read_log(log) if e["status"] == "ok" and len(e["event_ns"]) > 2]
            # the measured window: the last a.seconds, after each client's warm-up round
            t_end = max(e["event_ns"][-1] for e in entries)
            t_start = t_end - int(a.seconds * 1e9)
            events = sum(1 for e in entries for t in e["event_ns"] if t >= t_start)
            # timing from requests after the start-up burst (or all, when that leaves none)
            t_calm = min(e["arrival_ns"] for e in entries) + int(a.ttft_ms * 1e6) * 2
            calm = [e for e in entries if e["arrival_ns"] >= t_calm] or entries
            steady = np.concatenate([np.diff(e["event_ns"][1:]) for e in calm]) / 1e6
            ttft = np.array([(e["event_ns"][0] - e["arrival_ns"]) / 1e6 for e in calm])
            ideal = n * 1000.0 / a.itl_ms * tokens / (tokens + a.ttft_ms / a.itl_ms)
            rate = events / a.seconds
            late = float(np.mean(steady > a.itl_ms + 5)) * 100
            p99 = np.percentile(steady, 99)
            ok = rate >= 0.95 * ideal and p99 <= a.itl_ms * 1.25
            us_ev = cpu / max(sum(len(e["event_ns"]) for e in entries), 1) * 1e6
            print(f"{workers:>7} {n:>7} {rate:>7.0f} {ideal:>7.0f} {np.percentile(steady, 50):>8.2f} "
                  f"{p99:>8.2f} {late:>7.1f}% {np.percentile(ttft, 50):>8.1f} "
                  f"{np.percentile(ttft, 99):>8.1f} {cpu / wall * 100:>7.0f}% "
                  f"{us_ev:>6.1f} {1e6 / (us_ev * 1000.0 / a.itl_ms):>7.0f}  "
                  f"{'yes' if ok else 'NO'}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=("timing", "capacity", "memory", "streams"))
    ap.add_argument("--streams", type=int, default=128)
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--itl-ms", type=float, default=20.0)
    ap.add_argument("--ttft-ms", type=float, default=100.0)
    ap.add_argument("--requests", type=int, default=100000)
    ap.add_argument("--workers", default="1", help="streams: worker counts to try, e.g. 1,2")
    ap.add_argument("--streams-list", default="128,256,512",
                    help="streams: stream counts to try")
    ap.add_argument("--tokens", type=int, default=100)
    ap.add_argument("--clients", type=int, default=2, help="streams: client processes")
    a = ap.parse_args()
    {"timing": timing, "capacity": capacity, "memory": memory, "streams": streams}[a.what](a)


if __name__ == "__main__":
    main()
