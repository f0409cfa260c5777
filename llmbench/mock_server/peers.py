"""The worker processes of one port (``llmbench mock --workers N``), reached over unix sockets
in a private directory: /metrics gathers every worker's engine and /admin/config changes every
worker's, whichever worker the kernel handed the connection to."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import aiohttp
from aiohttp import web

from . import prometheus
from .context import Context


class Peers:
    def __init__(self, directory: str, worker: int, workers: int) -> None:
        self.directory = directory
        self.worker = worker
        self.workers = workers

    def path(self, worker: int) -> str:
        return os.path.join(self.directory, f"w{worker}.sock")

    def app(self, replicas: list[Context]) -> web.Application:
        """The internal side: what the other workers ask of this one."""
        async def state(request: web.Request) -> web.Response:
            r = replicas[int(request.match_info["i"])]
            return web.json_response(prometheus.snapshot(r.engine))

        async def config(request: web.Request) -> web.Response:
            r = replicas[int(request.match_info["i"])]
            try:
                r.apply_config(await request.json())
            except ValueError as exc:
                return web.json_response({"error": str(exc)}, status=400)
            return web.json_response({})
        app = web.Application()
        app.router.add_get("/state/{i}", state)
        app.router.add_post("/config/{i}", config)
        return app

    async def _call(self, worker: int, method: str, path: str,
                    body: Any = None) -> tuple[int, Any] | None:
        try:
            async with aiohttp.ClientSession(
                    connector=aiohttp.UnixConnector(path=self.path(worker)),
                    timeout=aiohttp.ClientTimeout(total=2.0)) as s:
                async with s.request(method, "http://worker" + path, json=body) as r:
                    return r.status, await r.json()
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError):
            return None

    def _others(self) -> list[int]:
        return [w for w in range(self.workers) if w != self.worker]

    async def states(self, index: int, own: dict[str, Any]) -> tuple[list[tuple[str, Any]],
                                                                    list[int]]:
        """Every worker's snapshot of replica ``index`` (labelled by worker), and the workers
        that did not answer."""
        others = self._others()
        got = await asyncio.gather(*(self._call(w, "GET", f"/state/{index}") for w in others))
        snaps = {self.worker: own}
        missing = []
        for w, res in zip(others, got):
            if res is not None and res[0] == 200:
                snaps[w] = res[1]
            else:
                missing.append(w)
        return [(str(w), snaps[w]) for w in sorted(snaps)], missing

    async def configure(self, index: int, changes: dict[str, Any]) -> list[int]:
        """Apply to the other workers; the workers that did not take the change."""
        others = self._others()
        got = await asyncio.gather(*(self._call(w, "POST", f"/config/{index}", changes)
                                     for w in others))
        return [w for w, res in zip(others, got) if res is None or res[0] != 200]
