"""What one request start and one token event cost llmbench's client, in CPU microseconds.

Two measurements, each reproducible with the variants that chose the client's setup:

1. ``--decoder``: the stream decoder alone (no network, no loop): realistic OpenAI chat chunks
   fed to StreamDecoder, microseconds per event for the JSON decoder in use (stdlib json or
   orjson).
2. ``--whole``: the whole ``llmbench run`` process (start-up, load, analysis, run folder) as
   ``/usr/bin/time`` sees it (user + sys of the child): a 1-request run (start-up) and
   ``--streams`` lock-step streams x ``--waves`` waves of ``--tokens``-token replies, in CPU
   microseconds per token event, with the machine's load average beside each figure.
3. The client against the mock in another process (only this process's CPU counts): N closed-
   loop streams, a phase of one-token requests and a phase of ``--tokens``-token requests;
   cpu = a * requests + b * events over the two phases gives ``a`` (per request start, its
   finish included) and ``b`` (per token event).

Variants (combine freely; the default is what llmbench uses):
  --loop asyncio|uvloop|auto     the event loop (auto: uvloop when installed)
  --json stdlib|orjson|auto      request body encoding and event decoding
  --no-send-stamp                without stamping the send delay (aiohttp: its trace hook)
  --transport aiohttp|fast|auto  the HTTP stack behind Client (auto: llmbench's default)

  python scripts/bench_client_cpu.py --decoder
  python scripts/bench_client_cpu.py --whole --streams 128 --waves 4   # issue 50's 128 x 100
  python scripts/bench_client_cpu.py --streams 128 --loop asyncio --json stdlib   # the old client
  python scripts/bench_client_cpu.py --streams 128                                  # llmbench today
  python scripts/bench_client_cpu.py --streams 128 --transport fast                 # fasthttp
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("LLMBENCH_TOKENIZER", "approx")

from llmbench.client import request as client_mod  # noqa: E402
from llmbench.client.request import Client, RequestParams, choose_transport  # noqa: E402
from llmbench.client.decoder import StreamDecoder  # noqa: E402
from llmbench.load.eventloop import choose, run as run_loop  # noqa: E402
from llmbench.load.session import Session  # noqa: E402
from llmbench.records.record import Record  # noqa: E402
from llmbench.load.shapes.fixed import run_closed  # noqa: E402
from llmbench.client.target import make_target  # noqa: E402
from llmbench.wire import events as events_mod  # noqa: E402
from llmbench.wire.openai import CHAT  # noqa: E402
from llmbench.workload import WorkloadSpec, build_workload, load_tokenizer  # noqa: E402
from llmbench.mock_server import MockProcess, make_config  # noqa: E402


def use_json(kind: str) -> str:
    """Point llmbench's JSON encoding/decoding at stdlib json (the old client) or orjson."""
    if kind == "stdlib":
        events_mod.fast_loads = None
        client_mod.fast_dumps = None
        return "stdlib"
    return "orjson" if events_mod.fast_loads is not None else "stdlib"


def chunks(n_events: int) -> list[bytes]:
    """What vLLM sends for a chat stream, one event per chunk."""
    out = [b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,'
           b'"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},'
           b'"logprobs":null,"finish_reason":null}]}\n\n']
    for i in range(n_events):
        out.append(b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,'
                   b'"model":"m","choices":[{"index":0,"delta":{"content":" tok%d"},'
                   b'"logprobs":null,"finish_reason":null}]}\n\n' % i)
    out.append(b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,'
               b'"model":"m","choices":[],"usage":{"prompt_tokens":16,"total_tokens":116,'
               b'"completion_tokens":100}}\n\ndata: [DONE]\n\n')
    return out


def bench_decoder(reps: int) -> None:
    cs = chunks(100)
    for kind in ("stdlib", "orjson"):
        saved = getattr(events_mod, "fast_loads", None)
        if kind == "stdlib":
            events_mod.fast_loads = None
        elif saved is None:
            print("orjson: not installed")
            continue
        best = float("inf")
        for _ in range(5):
            t0 = time.process_time()
            for _ in range(reps):
                rec = Record("x", 0.0)
                dec = StreamDecoder(CHAT, rec, [])
                for c in cs:
                    dec.feed(1.0, c)
                dec.finish()
            best = min(best, (time.process_time() - t0) / (reps * 100) * 1e6)
        events_mod.fast_loads = saved
        print(f"decoder, {kind:>6} JSON: {best:6.2f} us per token event (best of 5)")


async def phase(url: str, streams: int, tokens: int, seconds: float, stamp: bool,
                transport: str):
    tok = load_tokenizer("approx")
    wl = build_workload(WorkloadSpec(count=5000, prompt_tokens=(16, 16),
                                     output_tokens=(tokens, tokens)), tok)
    c = Client(make_target(url + "/v1", "mock"), RequestParams(), max_connections=streams + 8,
               transport=transport)
    if not stamp:
        c.send_stamps = False
    async with c:
        s = Session(c, None)
        await run_closed(s, wl.conversations, streams, streams, None)     # open the connections
        s.records.clear()
        cpu0 = time.process_time()
        await run_closed(s, wl.conversations, streams, None, seconds)
        cpu = time.process_time() - cpu0
        ok = [r for r in s.records if r.ok]
        return cpu, len(s.records), sum(len(r.token_times) for r in s.records), len(ok)


def _child_cpu(cmd: list[str]) -> tuple[float, str]:
    """user + sys CPU seconds of one child process (as /usr/bin/time counts them), and its
    last output line."""
    import resource
    import subprocess
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = (out.stdout + out.stderr).strip().splitlines()
    return cpu, (lines[-1] if lines else "")


def _load() -> str:
    return "load %.1f" % os.getloadavg()[0]


def bench_whole(a: argparse.Namespace) -> None:
    """The whole llmbench run process against the mock, start-up apart."""
    import tempfile
    cfg = make_config(None, ttft_ms=a.ttft_ms, itl_ms=a.itl_ms, tokens=a.tokens)
    with MockProcess(cfg) as m, tempfile.TemporaryDirectory() as tmp:
        def run(users: int, requests: int, tokens: int) -> tuple[float, str]:
            return _child_cpu([sys.executable, "-m", "llmbench.cli", "run", "--url",
                               m.url + "/v1", "--model", "mock", "--concurrency", str(users),
                               "--requests", str(requests), "--output-tokens", str(tokens),
                               "--prompt-tokens", "16", "--server-probe", "off",
                               "--server-pid", "off", "--network-floor", "off", "--quiet",
                               "--out", tmp])
        run(1, 1, 1)                        # bytecode compiled, caches warm
        for _ in range(a.runs):
            cpu1, _ = run(1, 1, 1)
            print(f"start-up (a 1-request run, whole process): {cpu1:5.2f} s CPU   ({_load()})")
        n = a.streams * a.waves
        for _ in range(a.runs):
            cpu, line = run(a.streams, n, a.tokens)
            events = n * a.tokens
            print(f"{a.streams} streams x {a.waves} waves x {a.tokens} tokens: {cpu:5.2f} s CPU, "
                  f"{cpu / events * 1e6:5.1f} us per token whole process   ({_load()})")
            if "0 failed" not in line:
                print(f"  (the run said: {line})")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--decoder", action="store_true", help="the decoder alone, no network")
    ap.add_argument("--whole", action="store_true", help="the whole llmbench run process")
    ap.add_argument("--waves", type=int, default=4, help="--whole: requests per stream")
    ap.add_argument("--runs", type=int, default=2, help="--whole: runs of each")
    ap.add_argument("--reps", type=int, default=300)
    ap.add_argument("--streams", type=int, default=128)
    ap.add_argument("--tokens", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--itl-ms", type=float, default=5.0)
    ap.add_argument("--ttft-ms", type=float, default=20.0)
    ap.add_argument("--loop", choices=("auto", "asyncio", "uvloop"), default="auto")
    ap.add_argument("--json", choices=("auto", "stdlib", "orjson"), default="auto")
    ap.add_argument("--no-send-stamp", action="store_true")
    ap.add_argument("--transport", choices=("auto", "aiohttp", "fast"), default="auto")
    a = ap.parse_args()
    if a.decoder:
        bench_decoder(a.reps)
        return
    if a.whole:
        if a.itl_ms == 5.0:
            a.itl_ms = 20.0                 # a pace the mock keeps at 128 streams
        bench_whole(a)
        return
    js = use_json(a.json)
    transport = choose_transport("http://x", a.transport)
    print(f"transport={transport} loop={choose(a.loop)} json={js} send-stamp={'off' if a.no_send_stamp else 'on'} "
          f"streams={a.streams} TTFT {a.ttft_ms:g} ms, event every {a.itl_ms:g} ms, "
          f"{os.cpu_count()} cores")
    cfg = make_config(None, ttft_ms=a.ttft_ms, itl_ms=a.itl_ms, tokens=a.tokens)
    with MockProcess(cfg) as m:
        one = run_loop(phase(m.url, a.streams, 1, a.seconds, not a.no_send_stamp, transport),
                       a.loop)
        many = run_loop(phase(m.url, a.streams, a.tokens, a.seconds, not a.no_send_stamp,
                              transport), a.loop)
    import numpy as np
    (c1, r1, e1, ok1), (c2, r2, e2, ok2) = one, many
    per_start, per_event = np.linalg.solve(np.array([[r1, e1], [r2, e2]], dtype=float),
                                           np.array([c1, c2]))
    print(f"one-token phase: {r1} requests ({ok1} ok), {c1 / max(r1, 1) * 1e6:.0f} us CPU each")
    print(f"{a.tokens}-token phase: {r2} requests ({ok2} ok), {e2} events, "
          f"{c2 / max(e2, 1) * 1e6:.1f} us CPU per event all-in")
    print(f"per request start: {per_start * 1e6:6.1f} us   per token event: {per_event * 1e6:6.1f} us")


if __name__ == "__main__":
    main()
