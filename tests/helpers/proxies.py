"""Small forwarding proxies for the tests: a fixed delay before the first byte, and round-robin
over several upstreams. Real HTTP, streamed through chunk by chunk."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time

import aiohttp
from aiohttp import web


class Proxy:
    def __init__(self, upstreams: list[str], delay_s: float = 0.0, fail_upstream: bool = False,
                 sticky: bool = False) -> None:
        self.upstreams = upstreams
        self.sticky = sticky        # route by the conversation's first message, like a cache-aware router
        self.delay_s = delay_s
        self.fail_upstream = fail_upstream
        self._rr = itertools.cycle(range(len(upstreams)))
        self.added_s: list[float] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self.url = ""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        if self.delay_s:
            t0 = time.perf_counter()
            await asyncio.sleep(self.delay_s)
            self.added_s.append(time.perf_counter() - t0)   # what was really added
        if self.fail_upstream:
            return web.json_response({"error": {"message": "upstream connect error: connection refused",
                                                "type": "bad_gateway"}}, status=502)
        if self.sticky:
            import hashlib
            import json
            first = json.loads(body)["messages"][0]["content"]
            upstream = self.upstreams[int(hashlib.sha1(first.encode()).hexdigest(), 16) % len(self.upstreams)]
        else:
            upstream = self.upstreams[next(self._rr)]
        headers = {k: v for k, v in request.headers.items()
                   if k.lower() not in ("host", "content-length", "transfer-encoding")}
        async with self._session.request(request.method, upstream + request.path_qs, data=body,
                                         headers=headers) as up:
            resp = web.StreamResponse(status=up.status, headers={
                k: v for k, v in up.headers.items()
                if k.lower() not in ("content-length", "transfer-encoding", "content-encoding",
                                     "connection")})
            await resp.prepare(request)
            async for chunk in up.content.iter_any():
                await resp.write(chunk)
            await resp.write_eof()
            return resp

    def __enter__(self) -> "Proxy":
        ready = threading.Event()

        def main() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop

            async def start() -> None:
                self._session = aiohttp.ClientSession(auto_decompress=False)
                app = web.Application()
                app.router.add_route("*", "/{tail:.*}", self.handle)
                self._runner = web.AppRunner(app, access_log=None)
                await self._runner.setup()
                site = web.TCPSite(self._runner, "127.0.0.1", 0)
                await site.start()
                port = site._server.sockets[0].getsockname()[1]
                self.url = f"http://127.0.0.1:{port}"
                ready.set()

            loop.run_until_complete(start())
            loop.run_forever()

            async def stop() -> None:
                await self._session.close()
                await self._runner.cleanup()
            loop.run_until_complete(stop())
            loop.close()

        self._thread = threading.Thread(target=main, daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def __exit__(self, *exc) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
