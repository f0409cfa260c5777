#!/usr/bin/env python3
"""A buffering reverse proxy in front of a streaming server, measured (issue 24).

An upstream that streams a chat reply as uvicorn answers nginx's default HTTP/1.0 request
(close-delimited body, a token event every --itl-ms after --ttft-ms) is measured by
``llmbench run`` three ways: directly, through nginx with its defaults (``proxy_pass`` alone:
HTTP/1.0 upstream, ``proxy_buffering on``) and through nginx with ``proxy_buffering off``.
Prints, per path, TTFT and ITL medians, the token events per network read that llmbench saw
(the signal it judges buffering by) and whether it said the stream was buffered.

    python scripts/bench_buffering.py                      # 30 tokens 10 ms apart after 50 ms
    python scripts/bench_buffering.py --tokens 200 --itl-ms 20

Needs nginx (Debian: nginx-light; scripts/install-test-deps.sh).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.helpers.field import Nginx  # noqa: E402
from llmbench.servers.ports import free_port  # noqa: E402


def _event(text: str) -> bytes:
    return b"data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": text}}]}).encode() \
        + b"\n\n"


class Upstream:
    """A chat stream as uvicorn sends it to an HTTP/1.0 client: no length, ends by closing."""

    def __init__(self, ttft_ms: float, itl_ms: float, tokens: int) -> None:
        self.ttft_s, self.itl_s, self.tokens = ttft_ms / 1000, itl_ms / 1000, tokens
        self.port = free_port()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.decode("latin-1").lower().split("\r\n"):
            if line.startswith("content-length:"):
                length = int(line.split(":")[1])
        if length:
            await reader.readexactly(length)
        if head.startswith(b"GET"):             # /v1/models, /tokenize probes: say nothing
            writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
            await writer.drain()
            writer.close()
            return
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n")
        await asyncio.sleep(self.ttft_s)
        for i in range(self.tokens):
            if i:
                await asyncio.sleep(self.itl_s)
            writer.write(_event(f" w{i}"))
            await writer.drain()
        writer.write(b"data: [DONE]\n\n")
        await writer.drain()
        writer.close()

    def __enter__(self) -> "Upstream":
        ready = threading.Event()

        def main() -> None:
            loop = asyncio.new_event_loop()
            self.loop = loop

            async def start() -> None:
                self.server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)
                ready.set()
            loop.run_until_complete(start())
            loop.run_forever()
        threading.Thread(target=main, daemon=True).start()
        ready.wait(5)
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)


def measure(url: str, out: Path, requests: int, tokens: int) -> dict:
    env = {**os.environ, "LLMBENCH_TOKENIZER": "approx", "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-m", "llmbench.cli", "run", "--url", url + "/v1",
                        "--model", "m", "--requests", str(requests), "--concurrency", "2",
                        "--output-tokens", str(tokens), "--prompt-tokens", "10",
                        "--out", str(out)], capture_output=True, text=True, env=env,
                       cwd=ROOT, timeout=300)
    if r.returncode != 0:
        raise SystemExit(f"llmbench run failed on {url}: {r.stderr.strip()[-400:]}")
    folder = next(out.iterdir())
    run = json.loads((folder / "run.json").read_text())
    recs = [json.loads(x) for x in (folder / "requests.jsonl").read_text().splitlines()]
    per_read = [len(x["token_us"]) / len(set(x["token_us"])) for x in recs
                if x.get("ok") and x.get("token_us")]
    s = run["summary"]
    said = [line for line in r.stdout.splitlines() if "bursts" in line]
    return {"ttft_p50_ms": s["median_ttft_ms"], "itl_p50_ms": s["median_itl_ms"],
            "events_per_read_p50": statistics.median(per_read) if per_read else None,
            "bunching": s.get("stream_bunching"), "said": said[:1]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ttft-ms", type=float, default=50.0)
    ap.add_argument("--itl-ms", type=float, default=10.0)
    ap.add_argument("--tokens", type=int, default=30)
    ap.add_argument("--requests", type=int, default=12)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, Upstream(a.ttft_ms, a.itl_ms, a.tokens) as up:
        d = Path(tmp)
        paths = {"direct": None, "nginx defaults": None, "nginx proxy_buffering off": False}
        for name, buffering in paths.items():
            out = d / name.replace(" ", "_")
            if name == "direct":
                got = measure(f"http://127.0.0.1:{up.port}", out, a.requests, a.tokens)
            else:
                with Nginx(d / ("ng" + str(len(name))), up.port, buffering=buffering) as ng:
                    got = measure(ng.url, out, a.requests, a.tokens)
            b = got["bunching"] or {}
            print(f"{name:<27} TTFT p50 {got['ttft_p50_ms']:8.1f} ms  ITL p50 "
                  f"{got['itl_p50_ms']:6.2f} ms  events/read p50 "
                  f"{got['events_per_read_p50'] or 0:5.1f}  buffered: {b.get('buffered')}"
                  f" ({b.get('bunched')}/{b.get('requests')})")
            for line in got["said"]:
                print(f"{'':<27} said: {line.strip()[:150]}")


if __name__ == "__main__":
    main()
