"""A loopback server that speaks TGI's native API the way TGI's router shapes it.

POST /generate_stream: one SSE event per token, ``data:{"index":..,"token":{...},
"generated_text":null,"details":null}``; the last event carries ``generated_text`` and, when
``parameters.details`` is true, ``details`` (finish_reason, generated_tokens, input_length,
seed); then the response ends (no [DONE]). POST /generate: one JSON body. GET /info: model_id.
Validation errors answer 422 {"error", "error_type"} like TGI.
"""

from __future__ import annotations

import asyncio
import json
import threading

from aiohttp import web

from tests.helpers import free_port


class TgiServer:
    def __init__(self, itl_s: float = 0.005, ttft_s: float = 0.02, eos_at: int | None = None,
                 cut_after: int | None = None, error_after: int | None = None,
                 model_id: str = "tgi/test-model") -> None:
        self.itl_s, self.ttft_s = itl_s, ttft_s
        self.eos_at = eos_at              # end with a special EOS token after this many tokens
        self.cut_after = cut_after        # end the response after this many events, no last event
        self.error_after = error_after    # send TGI's in-stream error event after this many
        self.model_id = model_id
        self.port = free_port()
        self.bodies: list[dict] = []
        self.paths: list[str] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _check(self, body) -> tuple[str, dict] | web.Response:
        if not isinstance(body, dict) or not isinstance(body.get("inputs"), str):
            return web.json_response({"error": "missing field `inputs`", "error_type": "validation"},
                                     status=422)
        params = body.get("parameters") or {}
        if params.get("temperature") is not None and params["temperature"] <= 0:
            return web.json_response({"error": "`temperature` must be strictly positive",
                                      "error_type": "validation"}, status=422)
        return body["inputs"], params

    def _tokens(self, params: dict) -> tuple[list[dict], str]:
        n = int(params.get("max_new_tokens") or 20)
        finish = "length"
        if self.eos_at is not None and self.eos_at < n:
            n, finish = self.eos_at + 1, "eos_token"
        toks = [{"id": 100 + i, "text": f" w{i}", "logprob": -0.5, "special": False}
                for i in range(n)]
        if finish == "eos_token":
            toks[-1] = {"id": 2, "text": "</s>", "logprob": -0.1, "special": True}
        return toks, finish

    def _details(self, inputs: str, toks: list[dict], finish: str) -> dict:
        return {"finish_reason": finish, "generated_tokens": len(toks),
                "input_length": len(inputs.split()), "seed": None}

    async def _stream(self, request: web.Request) -> web.StreamResponse:
        self.paths.append(request.path)
        body = await request.json()
        self.bodies.append(body)
        checked = self._check(body)
        if isinstance(checked, web.Response):
            return checked
        inputs, params = checked
        toks, finish = self._tokens(params)
        resp = web.StreamResponse(headers={"content-type": "text/event-stream",
                                           "cache-control": "no-cache"})
        await resp.prepare(request)
        await asyncio.sleep(self.ttft_s)
        for i, tok in enumerate(toks):
            if self.cut_after is not None and i == self.cut_after:
                await resp.write_eof()              # a clean end, but without the last event
                return resp
            if self.error_after is not None and i == self.error_after:
                err = {"error": "Request failed during generation: CUDA OOM",
                       "error_type": "generation"}
                await resp.write(b"data:" + json.dumps(err).encode() + b"\n\n")
                await resp.write_eof()
                return resp
            last = i == len(toks) - 1
            ev = {"index": i + 1, "token": tok, "top_tokens": None,
                  "generated_text": "".join(t["text"] for t in toks if not t["special"]) if last else None,
                  "details": self._details(inputs, toks, finish) if last and params.get("details") else None}
            await resp.write(b"data:" + json.dumps(ev).encode() + b"\n\n")
            if not last:
                await asyncio.sleep(self.itl_s)
        await resp.write_eof()
        return resp

    async def _generate(self, request: web.Request) -> web.Response:
        self.paths.append(request.path)
        body = await request.json()
        self.bodies.append(body)
        checked = self._check(body)
        if isinstance(checked, web.Response):
            return checked
        inputs, params = checked
        toks, finish = self._tokens(params)
        await asyncio.sleep(self.ttft_s + self.itl_s * (len(toks) - 1))
        out = {"generated_text": "".join(t["text"] for t in toks if not t["special"])}
        if params.get("details"):
            out["details"] = {**self._details(inputs, toks, finish), "prefill": [], "tokens": toks}
        return web.json_response(out)

    async def _info(self, request: web.Request) -> web.Response:
        return web.json_response({"model_id": self.model_id, "max_input_tokens": 4095,
                                  "router": "text-generation-router", "version": "3.0.0"})

    def __enter__(self) -> "TgiServer":
        ready = threading.Event()

        def main() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            app = web.Application()
            app.router.add_post("/generate_stream", self._stream)
            app.router.add_post("/generate", self._generate)
            app.router.add_get("/info", self._info)
            self._runner = web.AppRunner(app)
            loop.run_until_complete(self._runner.setup())
            loop.run_until_complete(web.TCPSite(self._runner, "127.0.0.1", self.port).start())
            ready.set()
            loop.run_forever()

        self._thread = threading.Thread(target=main, daemon=True)
        self._thread.start()
        assert ready.wait(5), "TGI test server did not start"
        return self

    def __exit__(self, *exc) -> None:
        assert self._loop is not None and self._runner is not None
        fut = asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop)
        fut.result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
