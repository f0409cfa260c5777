"""What the OpenAI-style APIs (chat, completions, Responses, embeddings) share: their errors,
their full-queue reply, the model check, and the reply length's fields per emulated server."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from ..context import Context
from ..engine import MockConfig
from ..errors import BadRequest, openai_error
from ..generate import Ask, check_max_tokens, make_ask


def missing(name: str) -> str:
    """vLLM's (pydantic's) wording for a required field."""
    return f"[{{'type': 'missing', 'loc': ('body', '{name}'), 'msg': 'Field required'}}]"


def model_of(body: dict[str, Any], cfg: MockConfig) -> str:
    model = body.get("model")
    if not model or not isinstance(model, str):
        raise BadRequest(missing("model"), param="model")
    if model not in cfg.models:
        raise BadRequest(f"The model `{model}` does not exist.", 404, param="model")
    return model


def ask_of(cfg: MockConfig, body: dict[str, Any], model: str, prompt: str) -> Ask:
    """A chat or completions request's Ask, its reply length from max_completion_tokens or
    max_tokens. Ollama's /v1 (openai/openai.go) has max_tokens only: max_completion_tokens and
    ignore_eos are unknown fields there and silently dropped."""
    if cfg.flavour == "ollama":
        max_tokens = body.get("max_tokens")
    else:
        max_tokens = next((body[name] for name in ("max_completion_tokens", "max_tokens")
                           if body.get(name) is not None), None)
        if body.get("n", 1) != 1:
            raise BadRequest("n must be 1: the mock generates one choice", param="n")
    return make_ask(cfg, body, model, prompt, check_max_tokens(max_tokens),
                    body.get("stream", False))


def error(message: str, status: int, param: str | None = None) -> web.Response:
    return openai_error(message, status, param=param)


def busy() -> web.Response:
    return openai_error("The server has too many pending requests; try again later.", 429,
                        etype="RateLimitError")


def models(ctx: Context) -> Any:
    async def handle(request: web.Request) -> web.Response:
        data = [{"id": m, "object": "model", "created": 1700000000, "owned_by": "llmbench-mock",
                 "root": m, "parent": None, "max_model_len": 32768}
                for m in ctx.engine.config.models]
        return web.json_response({"object": "list", "data": data}, headers=ctx.headers())
    return handle
