"""The mock's HTTP app, on aiohttp.web: every API's routes (one handler module each, apis/) and
the server's own (``Routes.app`` lists them).

aiohttp was chosen for the mock's HTTP layer because it is a production server that is already a
dependency (the client transport) and it streams chunked responses without an ASGI layer in
between: scripts/bench_mock.py measures its request and event rates.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from aiohttp import web

from . import prometheus
from .apis import chat, completions, embeddings, messages, ollama, openai, responses
from .context import Context
from .engine import Engine
from .peers import Peers
from .recorder import Recorder
from .tokenize import add_tokenize_routes

# each API's module, in the order its routes are added
APIS = (chat, completions, responses, messages, embeddings, ollama)


@web.middleware
async def _arrival_done(request: web.Request, handler: Any) -> web.StreamResponse:
    """Clear the connection's arrival stamp once a request is answered, whatever the route, so
    the next request on a kept-alive connection stamps its own (its bytes come after this reply:
    clients do not pipeline)."""
    try:
        return await handler(request)
    finally:
        if getattr(request.protocol, "arrival_ns", 0):
            request.protocol.arrival_ns = 0


class Routes(Context):
    """One replica's app: its context (engine, log, worker) and the routes on it."""

    def __init__(self, engine: Engine, recorder: Recorder | None = None, worker: int = 0,
                 peers: Peers | None = None, index: int = 0) -> None:
        super().__init__(engine, recorder, worker, peers.workers if peers is not None else 1,
                         index)
        self.peers = peers          # the other worker processes on this port, if any

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024, middlewares=[_arrival_done])
        r = app.router
        r.add_get("/v1/models", openai.models(self))
        for api in APIS:
            api.add_routes(app, self)
        r.add_get("/health", self.health)
        r.add_get("/metrics", self.metrics)
        r.add_get("/props", self.props)
        r.add_get("/slots", self.slots)
        r.add_post("/admin/reset_cache", self.reset_cache)
        r.add_get("/admin/config", self.get_config)
        r.add_post("/admin/config", self.set_config)
        add_tokenize_routes(app, self.engine)
        return app

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(text="", headers=self.headers())

    async def metrics(self, request: web.Request) -> web.Response:
        headers = self.headers()
        snaps = [("0", prometheus.snapshot(self.engine))]
        said = ""
        if self.peers is not None:
            # every worker's series, one engine label each (prometheus.py says why)
            snaps, missing = await self.peers.states(self.index, snaps[0][1])
            headers["x-llmbench-workers-reporting"] = f"{len(snaps)}/{self.workers}"
            said = "".join(f"# llmbench_mock: worker {w} did not answer\n" for w in missing)
        return web.Response(text=said + prometheus.render_many(snaps), content_type="text/plain",
                            charset="utf-8", headers=headers)

    async def props(self, request: web.Request) -> web.Response:
        cfg = self.engine.config
        return web.json_response({"total_slots": (cfg.parallel or 1) * self.workers,
                                  "model_path": cfg.models[0] if cfg.models else "mock",
                                  "llmbench_mock": True, "workers": self.workers,
                                  "flavour": cfg.flavour,
                                  **({"n_ctx": cfg.context} if cfg.context else {})},
                                 headers=self.headers())

    async def reset_cache(self, request: web.Request) -> web.Response:
        """This worker's ``Engine.reset_cache``, answered as vLLM's /reset_prefix_cache does:
        {"success": true}, with the tokens dropped."""
        dropped = self.engine.reset_cache()
        return web.json_response({"success": True, "dropped_tokens": dropped},
                                 headers=self.headers())

    async def slots(self, request: web.Request) -> web.Response:
        """llama.cpp's /slots (this worker's engine): each slot's request, its prompt tokens,
        how many were cached and how many it has decoded."""
        return web.json_response(self.engine.slots(), headers=self.headers())

    def _config_body(self) -> dict[str, Any]:
        shown = dataclasses.asdict(self.engine.config)
        if shown.get("api_key"):
            shown["api_key"] = "set"            # a key is never shown
        return {"replica": self.engine.replica, "worker": self.worker, "workers": self.workers,
                **shown}

    async def get_config(self, request: web.Request) -> web.Response:
        return web.json_response(self._config_body())

    async def set_config(self, request: web.Request) -> web.Response:
        try:
            changes = await request.json()
            self.apply_config(changes)              # all or nothing, every worker
        except (ValueError, json.JSONDecodeError) as exc:
            return web.json_response({"error": str(exc)}, status=400)
        if self.peers is not None:
            missed = await self.peers.configure(self.index, changes)
            if missed:
                return web.json_response(
                    {"error": "workers " + ", ".join(map(str, missed)) + " did not take the "
                     "change (the others did)"}, status=502)
        return web.json_response(self._config_body())
