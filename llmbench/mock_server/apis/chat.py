"""POST /v1/chat/completions: OpenAI's chat API as vLLM, SGLang, llama.cpp and Ollama's /v1
serve it (messages, max_completion_tokens or max_tokens, stream_options, tools, response_format)."""

from __future__ import annotations

from functools import partial
from typing import Any

from aiohttp import web

from ..context import Context
from ..errors import BadRequest
from ..generate import Api, Ask, generate, need_object, plan_reply, render_messages
from ..shapes import ChatShape, Shape
from ..structured import schema_of, tools_of
from . import openai


def parse(ctx: Context, body: Any, rid: str) -> Ask:
    cfg = ctx.engine.config
    body = need_object(body)
    model = openai.model_of(body, cfg)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest(openai.missing("messages"), param="messages")
    prompt = render_messages(messages, cfg)
    ask = openai.ask_of(cfg, body, model, prompt)
    choice = body.get("tool_choice")
    plan_reply(ask, cfg, rid, tools_of(body), choice if isinstance(choice, str) else "auto",
               schema_of(body, "chat"))
    return ask


def shape(ctx: Context, ask: Ask, rid: str) -> Shape:
    field = "reasoning" if ctx.engine.config.flavour == "ollama" else "reasoning_content"
    return ChatShape(ask.model, rid, field)


API = Api("chat", parse, shape, openai.error, openai.busy)


def add_routes(app: web.Application, ctx: Context) -> None:
    app.router.add_post("/v1/chat/completions", partial(generate, ctx, API))
