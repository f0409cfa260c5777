"""Which HTTP server library for the mock? Streamed requests per second, one process each.

Each candidate serves the same minimal OpenAI-style stream (64 SSE events, no delays) on
loopback; a separate aiohttp client process drives it at 64 concurrent requests for a few
seconds; we report requests/s and the server process's CPU per request. Candidates that are not
installed are skipped (uvicorn + starlette: `pip install uvicorn starlette`).

  python scripts/bench_http_servers.py --seconds 8
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import textwrap
import time

EVENT = b'data: {"choices":[{"index":0,"delta":{"content":"word "}}]}\n\n'

SERVERS = {
    "aiohttp": textwrap.dedent('''
        import sys
        from aiohttp import web
        EVENT = %r
        async def chat(request):
            await request.read()
            resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
            resp.enable_chunked_encoding()
            await resp.prepare(request)
            for _ in range(64):
                await resp.write(EVENT)
            await resp.write(b"data: [DONE]\\n\\n")
            await resp.write_eof()
            return resp
        app = web.Application()
        app.router.add_post("/v1/chat/completions", chat)
        web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), access_log=None, print=None)
    ''' % EVENT),
    "uvicorn+starlette": textwrap.dedent('''
        import sys, uvicorn
        from starlette.applications import Starlette
        from starlette.responses import StreamingResponse
        from starlette.routing import Route
        EVENT = %r
        async def gen():
            for _ in range(64):
                yield EVENT
            yield b"data: [DONE]\\n\\n"
        async def chat(request):
            await request.body()
            return StreamingResponse(gen(), media_type="text/event-stream")
        app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])
        uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)
    ''' % EVENT),
}


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def cpu_s(pid: int) -> float:
    f = open(f"/proc/{pid}/stat").read().split(")")[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


async def drive(url: str, seconds: float, conc: int) -> int:
    import aiohttp
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}],
                       "stream": True}).encode()
    done = 0
    deadline = time.perf_counter() + seconds
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=conc + 4)) as s:
        async def worker() -> None:
            nonlocal done
            while time.perf_counter() < deadline:
                async with s.post(url, data=body, headers={"content-type": "application/json"}) as r:
                    async for _ in r.content.iter_any():
                        pass
                done += 1
        await asyncio.gather(*(worker() for _ in range(conc)))
    return done


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--concurrency", type=int, default=64)
    a = ap.parse_args()
    for name, code in SERVERS.items():
        port = free_port()
        proc = subprocess.Popen([sys.executable, "-c", code, str(port)],
                                stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), 0.1).close()
                break
            except OSError:
                if proc.poll() is not None:
                    break
                time.sleep(0.1)
        if proc.poll() is not None:
            print(f"{name:>18}: not available ({proc.stderr.read().decode().strip().splitlines()[-1][:80]})")
            continue
        c0 = cpu_s(proc.pid)
        n = asyncio.run(drive(f"http://127.0.0.1:{port}/v1/chat/completions", a.seconds,
                              a.concurrency))
        cpu = cpu_s(proc.pid) - c0
        proc.terminate()
        proc.wait(5)
        print(f"{name:>18}: {n / a.seconds:7.0f} streamed req/s (64 events each), "
              f"server CPU {cpu / max(n, 1) * 1e6:5.0f} us per request")


if __name__ == "__main__":
    main()
