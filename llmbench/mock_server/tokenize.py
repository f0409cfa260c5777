"""``/tokenize`` and ``/detokenize`` as vLLM and llama.cpp's servers shape them.

Only the vLLM and llama.cpp flavours answer (checked per request, since the flavour can change
at run time); the Ollama flavour answers 404 like Ollama, which has no such route. Tokens are the
mock's own (words and punctuation, the same count its engine uses for prompts), with ids from a
vocabulary grown on first sight, so a client can round-trip them.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from .engine import Engine, mock_tokens


class _Vocab:
    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.pieces: list[str] = []

    def encode(self, text: str) -> list[int]:
        out = []
        for p in mock_tokens(text):
            i = self.ids.get(p)
            if i is None:
                i = self.ids[p] = len(self.pieces)
                self.pieces.append(p)
            out.append(i)
        return out

    def decode(self, ids: list[int]) -> str:
        return " ".join(self.pieces[i] for i in ids if 0 <= i < len(self.pieces))


def add_tokenize_routes(app: web.Application, engine: Engine) -> None:
    vocab = _Vocab()

    async def body_of(request: web.Request) -> dict[str, Any] | None:
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return None
        return body if isinstance(body, dict) else None

    def not_found() -> web.Response:
        return web.Response(status=404, text="404 page not found")

    def vllm_error(message: str, status: int = 400) -> web.Response:
        return web.json_response({"error": {"message": message, "type": "BadRequestError",
                                            "param": None, "code": status}}, status=status)

    def model_ok(body: dict[str, Any]) -> bool:
        m = body.get("model")
        return m is None or m in engine.config.models

    async def tokenize(request: web.Request) -> web.Response:
        body = await body_of(request)
        if engine.config.flavour == "vllm":
            if body is None or not isinstance(body.get("prompt"), str):
                return vllm_error("prompt must be a string")
            if not model_ok(body):
                return vllm_error(f"The model `{body.get('model')}` does not exist.", 404)
            tokens = vocab.encode(body["prompt"])
            return web.json_response({"count": len(tokens), "max_model_len": 32768,
                                      "tokens": tokens, "token_strs": None})
        if engine.config.flavour == "llamacpp":
            if body is None:
                return web.json_response({"error": {"code": 400, "message": "invalid JSON",
                                                    "type": "invalid_request_error"}}, status=400)
            content = body.get("content")
            # llama.cpp answers an empty list when "content" is missing
            ids = vocab.encode(content) if isinstance(content, str) else []
            if body.get("with_pieces") is True:
                # llama.cpp's {"id", "piece"} per token (its pieces keep their leading space;
                # the mock's tokens have none)
                return web.json_response({"tokens": [{"id": i, "piece": vocab.pieces[i]}
                                                     for i in ids]})
            return web.json_response({"tokens": ids})
        return not_found()

    async def detokenize(request: web.Request) -> web.Response:
        body = await body_of(request)
        ids = body.get("tokens") if body is not None else None
        if engine.config.flavour not in ("vllm", "llamacpp"):
            return not_found()
        if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
            return vllm_error("tokens must be a list of integers")
        text = vocab.decode(ids)
        vllm = engine.config.flavour == "vllm"
        return web.json_response({"prompt": text} if vllm else {"content": text})

    app.router.add_post("/tokenize", tokenize)
    app.router.add_post("/detokenize", detokenize)
