"""Does llmbench stamp late when many streams restart together? (issue 50 §1)

N lock-step streams against the mock in another process: every stream's request has the same
TTFT, the same number of events and the same gaps, so the streams end together and all N
users start their next request in the same instant: the burst that kept arrived first tokens
unread (1,024 streams: TTFT p99 +123 ms after the first wave). The truth is the mock's own
send log (its arrival stamp of each request and the send time of each event, on
CLOCK_MONOTONIC, the clock llmbench stamps with; see scripts/bench_client_accuracy.py): per
request, TTFT error = client TTFT - (first send - server arrival), ITL error = each client gap
- the server's gap, lag = client stamp - server send. The first wave (connections warm, all N
sent at once by the shape) and the later waves (restarting together) are shown apart.

Which clock stamps the tokens is printed (client.rxstamp: the kernel's receive time of each
read on Linux over plain TCP, else the read time); ``--stamp read`` forces the read time, to
compare. ``mock late 1st/gap`` is how far the mock's own sends fell behind its schedule, p99:
its first send over --ttft-ms after the request arrived, its gaps over --itl-ms. Its sends of
one lock-step tick go out one after another (~0.1-0.25 ms each on a busy 2-core machine:
100-250 ms for 1,024 streams), so with a gap near that the mock cannot keep up and the streams
drift apart; widen --itl-ms until its gap lateness is well under the gap (1,000 ms at 1,024
streams on a quiet machine; busy loops beside slow the mock too).

``--busy K`` runs K busy loops (``while True: pass`` processes) on the machine meanwhile;
``--no-gate`` measures without load.pacing's bound on starts per loop turn (as before it).
Keep the mock's gaps wide enough for it to keep up (1,024 streams at 200 ms: 5,120 events a
second; on 2 shared cores 1,000 ms keeps it within a few ms); the machine's load average is
printed beside each row.

  python scripts/bench_client_lockstep.py --streams 128,1024
  python scripts/bench_client_lockstep.py --streams 1024 --itl-ms 1000 --ttft-ms 500
  python scripts/bench_client_lockstep.py --streams 1024 --no-gate
  python scripts/bench_client_lockstep.py --streams 1024 --stamp read
  python scripts/bench_client_lockstep.py --streams 128 --busy 2 --itl-ms 20
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("LLMBENCH_TOKENIZER", "approx")

from llmbench.client import rxstamp  # noqa: E402
from llmbench.client.request import Client, RequestParams  # noqa: E402
from llmbench.client.target import make_target  # noqa: E402
from llmbench.load.eventloop import run as run_loop  # noqa: E402
from llmbench.load.monitor import LoopMonitor  # noqa: E402
from llmbench.load.session import Session  # noqa: E402
from llmbench.load.shapes.fixed import run_closed  # noqa: E402
from llmbench.mock_server import MockProcess, make_config  # noqa: E402
from llmbench.mock_server.recorder import read_log  # noqa: E402
from llmbench.workload import WorkloadSpec, build_workload, load_tokenizer  # noqa: E402


async def drive(url: str, streams: int, waves: int, tokens: int, gate: bool):
    tok = load_tokenizer("approx")
    wl = build_workload(WorkloadSpec(count=streams * (waves + 2), prompt_tokens=(16, 16),
                                     output_tokens=(tokens, tokens)), tok)
    c = Client(make_target(url + "/v1", "mock"), RequestParams(),
               max_connections=streams + 8, transport="fast")
    async with c:
        s = Session(c, None)
        if not gate:
            s.gate = None
        monitor = LoopMonitor()
        monitor.start()
        cpu0 = time.process_time()
        await run_closed(s, wl.conversations, streams, streams * waves, None)
        cpu = time.process_time() - cpu0
        await monitor.stop()
        return list(s.records), cpu, [m.lag_p99_ms for m in monitor.samples]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--streams", default="128,1024")
    ap.add_argument("--waves", type=int, default=4, help="requests per stream")
    ap.add_argument("--tokens", type=int, default=10)
    ap.add_argument("--itl-ms", type=float, default=200.0)
    ap.add_argument("--ttft-ms", type=float, default=200.0)
    ap.add_argument("--busy", type=int, default=0, help="busy loops on the machine meanwhile")
    ap.add_argument("--no-gate", action="store_true", help="no bound on starts per loop turn")
    ap.add_argument("--stamp", choices=("auto", "read"), default="auto",
                    help="read: stamp on read even where the kernel's receive time is there")
    a = ap.parse_args()
    os.environ[rxstamp.CLOCK_ENV] = a.stamp
    clock = rxstamp.clock_of("http", "fast")
    print(f"lock-step streams: TTFT {a.ttft_ms:g} ms, {a.tokens} events {a.itl_ms:g} ms apart, "
          f"{a.waves} waves; gate {'off' if a.no_gate else 'on'}; {a.busy} busy loops; "
          f"{os.cpu_count()} cores; stamps: {clock} clock")
    print("errors are client - server (the mock's send log), in ms; TTFT: wave 1 / later "
          "waves; 1st lag (first token stamp - its send) and start->arr (client start -> "
          "server arrival): later waves")
    print(f"{'streams':>7} {'reqs':>5} {'TTFT err p50':>13} {'TTFT err p99':>15} "
          f"{'ITL err p99':>11} {'ITL p99 cli/srv':>15} {'lag p50/p99':>13} "
          f"{'1st lag p50/99':>14} {'start->arr':>14} "
          f"{'us CPU/ev':>9} {'loop p99 max':>12} {'mock late p99':>13} {'load':>5}")
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(a.busy)]
    try:
        for n in [int(x) for x in a.streams.split(",")]:
            row(a, n)
    finally:
        for p in busy:
            p.kill()
            p.wait()


def row(a: argparse.Namespace, n: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        log = os.path.join(d, "send.jsonl")
        cfg = make_config(None, ttft_ms=a.ttft_ms, itl_ms=a.itl_ms, tokens=a.tokens)
        with MockProcess(cfg, record=log) as m:
            records, cpu, lags = run_loop(drive(m.url, n, a.waves, a.tokens, not a.no_gate))
        sent = {e["request_id"]: e for e in read_log(log)}
    ok = sorted((r for r in records if r.ok and r.request_id in sent), key=lambda r: r.start)
    ttft, first_lag, to_arrival = ([], []), ([], []), ([], [])
    itl_err, cli_gaps, srv_gaps, lag, mock_first, mock_gap = [], [], [], [], [], []
    for k, r in enumerate(ok):
        e = sent[r.request_id]
        ns = np.asarray(e["event_ns"], dtype=float) / 1e9
        t = np.asarray(r.token_times)
        if len(ns) != len(t):
            continue
        w = 0 if k < n else 1
        ttft[w].append(r.ttft - (ns[0] - e["arrival_ns"] / 1e9))
        first_lag[w].append(t[0] - ns[0])          # the first token's stamp, late by
        to_arrival[w].append(e["arrival_ns"] / 1e9 - r.start)   # send delay + the hop
        itl_err.extend(np.diff(t) - np.diff(ns))
        cli_gaps.extend(np.diff(t))
        srv_gaps.extend(np.diff(ns))
        lag.extend(t - ns)
        mock_first.append(ns[0] - e["arrival_ns"] / 1e9 - a.ttft_ms / 1000)
        mock_gap.extend(np.diff(ns) - a.itl_ms / 1000)
    ms = lambda v, p: np.percentile(v, p) * 1000 if len(v) else float("nan")  # noqa: E731
    events = sum(len(r.token_times) for r in records)
    print(f"{n:>7} {len(ok):>5} {ms(ttft[0], 50):+6.2f}/{ms(ttft[1], 50):<+6.2f} "
          f"{ms(ttft[0], 99):+7.2f}/{ms(ttft[1], 99):<+7.2f} {ms(itl_err, 99):+11.2f} "
          f"{ms(cli_gaps, 99):7.2f}/{ms(srv_gaps, 99):<7.2f} "
          f"{ms(lag, 50):6.2f}/{ms(lag, 99):<6.2f} "
          f"{ms(first_lag[1], 50):6.2f}/{ms(first_lag[1], 99):<7.2f} "
          f"{ms(to_arrival[1], 50):6.2f}/{ms(to_arrival[1], 99):<7.2f} "
          f"{cpu / max(events, 1) * 1e6:9.1f} "
          f"{max(lags) if lags else float('nan'):12.2f} "
          f"{ms(mock_first, 99):8.2f}/{ms(mock_gap, 99):<8.2f} "
          f"{os.getloadavg()[0]:5.1f}",
          flush=True)


if __name__ == "__main__":
    main()
