"""How close to a trace's schedule requests arrive at a server: the figure behind ``run --trace``.

    python scripts/bench_trace_replay.py [--rate 50] [--requests 500] [--speed 1]

Starts a loopback server (in this process, its own thread) that answers every chat request at
once with one token and logs when each request's body arrived, replays a constant-gap trace
through the CLI against it, and prints the arrival error against the schedule (arrival i minus
arrival 0, against due i minus due 0) next to the dispatch lag llmbench itself reports.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
EVENTS = b'data: {"choices":[{"index":0,"delta":{"content":"ok"}}]}\n\ndata: [DONE]\n\n'
# keep-alive, as real servers: the arrival is the request's, not a new connection's
REPLY = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
         b"content-length: %d\r\n\r\n" % len(EVENTS)) + EVENTS


def serve(arrivals: list[tuple[float, bytes]], ready: threading.Event, port: list[int]) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                break
            n = 0
            for line in head.decode("latin-1").lower().split("\r\n"):
                if line.startswith("content-length:"):
                    n = int(line.split(":")[1])
            body = await reader.readexactly(n) if n else b""
            arrivals.append((time.perf_counter(), body))
            writer.write(REPLY)
            await writer.drain()
        writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port.append(server.sockets[0].getsockname()[1])
        ready.set()
        await asyncio.Event().wait()

    asyncio.run(main())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=50.0)
    ap.add_argument("--requests", type=int, default=500)
    ap.add_argument("--speed", type=float, default=1.0)
    a = ap.parse_args()
    arrivals: list[tuple[float, bytes]] = []
    ready, port = threading.Event(), []
    threading.Thread(target=serve, args=(arrivals, ready, port), daemon=True).start()
    ready.wait(5)
    with tempfile.TemporaryDirectory() as d:
        trace = Path(d) / "t.jsonl"
        gap_ms = 1000.0 / a.rate
        trace.write_text("".join(json.dumps({"timestamp": i * gap_ms, "input_length": 200,
                                             "output_length": 1}) + "\n"
                                 for i in range(a.requests)))
        env = {**os.environ, "PYTHONPATH": str(ROOT), "LLMBENCH_TOKENIZER": "approx"}
        r = subprocess.run([sys.executable, "-m", "llmbench.cli", "run", "--url",
                            f"http://127.0.0.1:{port[0]}/v1", "--model", "m", "--trace",
                            str(trace), "--trace-speed", str(a.speed), "--out", d],
                           capture_output=True, text=True, env=env, cwd=ROOT)
        if r.returncode != 0:
            sys.exit(r.stderr)
        (run,) = [p for p in Path(d).iterdir() if p.is_dir()]
        lag = json.loads((run / "run.json").read_text())["trace"]["dispatch_lag"]
    got = [t for t, body in arrivals if body and b'"Hi"' not in body][-a.requests:]
    arr = np.array(got)
    due = np.arange(a.requests) * gap_ms / 1000.0 / a.speed
    # against the schedule placed where most requests arrived (the median offset): the constant
    # part is the clock's zero, not lateness
    off = arr - due
    err_ms = np.abs(off - np.median(off)) * 1000.0
    print(f"{a.requests} requests at {a.rate * a.speed:g}/s: arrival error vs schedule "
          f"p50 {np.percentile(err_ms, 50):.3f} ms, p99 {np.percentile(err_ms, 99):.3f} ms, "
          f"max {err_ms.max():.3f} ms")
    print(f"llmbench's dispatch lag: p50 {lag['p50_ms']:.3f} ms, p99 {lag['p99_ms']:.3f} ms, "
          f"max {lag['max_ms']:.3f} ms, behind={lag['behind']}")


if __name__ == "__main__":
    main()
