"""Loopback servers that answer like each local LLM engine's own pages, for discovery and
identity tests: the pages are the shapes each engine's documentation (or the real server in
../shared/realserver/, tests/fixtures/telemetry/) gives; a chat route streams a short reply
the way OpenAI-style servers do.

``EngineServer("llama-cpp-python")`` also behaves like that server's request-id middleware
(starlette-context's RequestIdPlugin): any ``x-request-id`` that ``uuid.UUID(value,
version=4)`` cannot read is answered with an empty HTTP 400 before any route runs; its stream
carries no usage, as the real one's.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid

from aiohttp import web

from tests.helpers import FIXTURES, free_port

_LLAMACPP_PROPS = json.loads((FIXTURES / "telemetry" / "llamacpp_props.json").read_text())
_LLAMACPP_MODELS = json.loads((FIXTURES / "telemetry" / "llamacpp_models.json").read_text())


def _ollama(loaded: list[str]) -> dict[str, object]:
    tags = {"models": [
        {"name": "nomic-embed-text:latest", "model": "nomic-embed-text:latest",
         "details": {"family": "nomic-bert", "families": ["nomic-bert"],
                     "parameter_size": "137M", "quantization_level": "F16"}},
        {"name": "qwen2.5:0.5b", "model": "qwen2.5:0.5b",
         "details": {"family": "qwen2", "families": ["qwen2"], "parameter_size": "494.03M",
                     "quantization_level": "Q4_K_M"}},
        {"name": "llama3.2:1b", "model": "llama3.2:1b",
         "details": {"family": "llama", "families": ["llama"], "parameter_size": "1.2B",
                     "quantization_level": "Q8_0"}}]}
    ps = {"models": [{"name": n, "model": n, "size": 1, "size_vram": 0, "context_length": 4096,
                      "details": {"family": "llama"}} for n in loaded]}
    return {"/api/version": {"version": "0.12.6"}, "/api/tags": tags, "/api/ps": ps,
            "/v1/models": {"object": "list", "data": [
                {"id": m["name"], "object": "model", "owned_by": "library"}
                for m in tags["models"]]}}


PAGES: dict[str, dict[str, object]] = {
    "ollama": _ollama(["llama3.2:1b"]),
    "ollama-idle": _ollama([]),
    "llama.cpp": {"/props": _LLAMACPP_PROPS, "/v1/models": _LLAMACPP_MODELS,
                  "/health": {"status": "ok"}},
    "vllm": {"/version": {"version": "0.11.0"},
             "/v1/models": {"object": "list", "data": [
                 {"id": "Qwen/Qwen2.5-0.5B-Instruct", "object": "model", "owned_by": "vllm",
                  "root": "Qwen/Qwen2.5-0.5B-Instruct", "max_model_len": 32768}]}},
    "sglang": {"/get_server_info": {"version": "0.4.6", "tp_size": 1, "dp_size": 1,
                                    "max_running_requests": 48,
                                    "model_path": "Qwen/Qwen2.5-0.5B-Instruct"},
               "/v1/models": {"object": "list", "data": [
                   {"id": "Qwen/Qwen2.5-0.5B-Instruct", "object": "model",
                    "owned_by": "sglang"}]}},
    # LM Studio 0.3.x (REST API v0): an embedding model listed first, the LLM loaded
    "lmstudio": {"/api/v0/models": {"object": "list", "data": [
        {"id": "text-embedding-nomic-embed-text-v1.5", "object": "model", "type": "embeddings",
         "publisher": "nomic-ai", "arch": "nomic-bert", "compatibility_type": "gguf",
         "quantization": "Q4_0", "state": "loaded", "max_context_length": 2048},
        {"id": "qwen2-vl-7b-instruct", "object": "model", "type": "vlm",
         "publisher": "mlx-community", "arch": "qwen2_vl", "compatibility_type": "mlx",
         "quantization": "4bit", "state": "not-loaded", "max_context_length": 32768},
        {"id": "meta-llama-3.1-8b-instruct", "object": "model", "type": "llm",
         "publisher": "lmstudio-community", "arch": "llama", "compatibility_type": "gguf",
         "quantization": "Q4_K_M", "state": "loaded", "max_context_length": 131072}]},
        "/v1/models": {"object": "list", "data": [
            {"id": "text-embedding-nomic-embed-text-v1.5", "object": "model",
             "owned_by": "organization_owner"},
            {"id": "qwen2-vl-7b-instruct", "object": "model", "owned_by": "organization_owner"},
            {"id": "meta-llama-3.1-8b-instruct", "object": "model",
             "owned_by": "organization_owner"}]}},
    # LM Studio 0.4 (REST API v1): loaded instances with the context they were loaded with
    "lmstudio-v1": {"/api/v1/models": {"models": [
        {"type": "embedding", "publisher": "gaianet",
         "key": "text-embedding-nomic-embed-text-v1.5-embedding", "display_name": "Nomic",
         "quantization": {"name": "F16", "bits_per_weight": 16}, "size_bytes": 274290560,
         "params_string": None, "loaded_instances": [], "max_context_length": 2048,
         "format": "gguf"},
        {"type": "llm", "publisher": "lmstudio-community", "key": "gemma-3-270m-it-qat",
         "display_name": "Gemma 3 270m Instruct Qat", "architecture": "gemma3",
         "quantization": {"name": "Q4_0", "bits_per_weight": 4}, "size_bytes": 241410208,
         "params_string": "270M", "loaded_instances": [
             {"id": "gemma-3-270m-it-qat", "config": {"context_length": 4096}}],
         "max_context_length": 32768, "format": "gguf"}]},
        "/v1/models": {"object": "list", "data": [
            {"id": "text-embedding-nomic-embed-text-v1.5-embedding", "object": "model"},
            {"id": "gemma-3-270m-it-qat", "object": "model"}]}},
    "llama-cpp-python": {"/openapi.json": {"openapi": "3.1.0", "info": {
        "title": "\U0001f999 llama.cpp Python API", "version": "0.3.36"}, "paths": {}},
        "/v1/models": {"object": "list", "data": [
            {"id": "gemma-3-270m", "object": "model", "owned_by": "me", "permissions": []}]}},
    "koboldcpp": {"/api/extra/version": {"result": "KoboldCpp", "version": "1.80.3",
                                         "protected": False},
                  "/v1/models": {"object": "list", "data": [
                      {"id": "koboldcpp/gemma-3-270m", "object": "model",
                       "owned_by": "koboldcpp"}]}},
}


class EngineServer:
    """GET <path> answers the engine's page (404 otherwise); POST /v1/chat/completions streams
    ``tokens`` words. Counts the requests and keeps their x-request-id headers."""

    def __init__(self, engine: str, tokens: int = 8, itl_s: float = 0.002,
                 refuse_all: bool = False, reset: str = "ok") -> None:
        self.engine = engine
        self.refuse_all = refuse_all      # every POST: an empty 400, no reason given
        # a prompt cache on paper: a prompt sent before is all cached (usage's cached_tokens);
        # the engine's reset empties it ("ok"), fails as the engine words it ("refused"),
        # or answers success and keeps it ("lies")
        self.seen: set[str] = set()
        self.reset = reset
        self.resets: list[str] = []
        self.pages = PAGES[engine]
        self.tokens, self.itl_s = tokens, itl_s
        self.port = free_port()
        self.request_ids: list[str | None] = []
        self.refused = 0

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @web.middleware
    async def _request_id(self, request: web.Request, handler):
        if self.engine != "llama-cpp-python":
            return await handler(request)
        value = request.headers.get("x-request-id")
        self.request_ids.append(value)
        if value:
            try:
                uuid.UUID(value, version=4)
            except ValueError:
                self.refused += 1
                return web.Response(status=400, body=b"")
        return await handler(request)

    async def _get(self, request: web.Request) -> web.Response:
        page = self.pages.get(request.path)
        if page is None:
            return web.json_response({"detail": "Not Found"}, status=404)
        return web.json_response(page)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if self.refuse_all:
            self.refused += 1
            return web.Response(status=400, body=b"")
        n = min(int(body.get("max_completion_tokens") or body.get("max_tokens") or self.tokens),
                self.tokens)
        text = json.dumps(body.get("messages"))
        n_prompt = len(text.split())
        cached = n_prompt if text in self.seen else 0
        self.seen.add(text)
        resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await resp.prepare(request)
        model = body.get("model")
        for i in range(n):
            ev = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": model,
                  "choices": [{"index": 0, "delta": {"content": f" w{i}"},
                               "finish_reason": "length" if i == n - 1 else None}]}
            await resp.write(b"data: " + json.dumps(ev).encode() + b"\r\n\r\n")
            await asyncio.sleep(self.itl_s)
        if self.engine != "llama-cpp-python" and (body.get("stream_options") or {}).get(
                "include_usage"):
            usage = {"prompt_tokens": n_prompt, "completion_tokens": n,
                     "total_tokens": n_prompt + n,
                     "prompt_tokens_details": {"cached_tokens": cached}}
            ev = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": model,
                  "choices": [], "usage": usage}
            await resp.write(b"data: " + json.dumps(ev).encode() + b"\r\n\r\n")
        await resp.write(b"data: [DONE]\r\n\r\n")
        await resp.write_eof()
        return resp

    async def _reset(self, request: web.Request) -> web.Response:
        """vLLM's /reset_prefix_cache, SGLang's /flush_cache, llama.cpp's slot erase."""
        self.resets.append(request.path_qs)
        if self.reset == "refused":
            if self.engine == "vllm":
                return web.json_response({"success": False})        # vLLM's failed reset
            return web.json_response({"error": {"code": 501, "message": "This server does not "
                                      "support slots action. Start it with `--slot-save-path`",
                                      "type": "not_supported_error"}}, status=501)
        if self.reset == "ok":
            self.seen.clear()
        if self.engine == "llama.cpp":
            return web.json_response({"id_slot": int(request.match_info["id"]), "n_erased": 1})
        return web.json_response({"success": True}) if self.engine == "vllm" else \
            web.Response(text="Cache flushed.")

    async def _slots(self, request: web.Request) -> web.Response:
        return web.json_response([{"id": i, "n_ctx": 2048, "is_processing": False}
                                  for i in range(2)])

    def __enter__(self) -> "EngineServer":
        ready = threading.Event()

        def main() -> None:
            self._loop = asyncio.new_event_loop()
            app = web.Application(middlewares=[self._request_id])
            app.router.add_post("/v1/chat/completions", self._chat)
            app.router.add_post("/api/v0/chat/completions", self._chat)     # LM Studio's
            app.router.add_post("/reset_prefix_cache", self._reset)
            app.router.add_post("/flush_cache", self._reset)
            app.router.add_post("/slots/{id}", self._reset)
            app.router.add_get("/slots", self._slots)
            app.router.add_route("GET", "/{tail:.*}", self._get)
            self._runner = web.AppRunner(app)
            self._loop.run_until_complete(self._runner.setup())
            self._loop.run_until_complete(
                web.TCPSite(self._runner, "127.0.0.1", self.port).start())
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=main, daemon=True)
        self._thread.start()
        assert ready.wait(10), f"the {self.engine} test server did not start"
        return self

    def __exit__(self, *exc) -> None:
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
