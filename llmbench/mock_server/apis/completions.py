"""POST /v1/completions: OpenAI's (legacy) completions API: a prompt string, no messages, no
tools."""

from __future__ import annotations

from functools import partial
from typing import Any

from aiohttp import web

from ..context import Context
from ..errors import BadRequest
from ..generate import Api, Ask, generate, need_object
from ..shapes import CompletionShape, Shape
from . import openai


def parse(ctx: Context, body: Any, rid: str) -> Ask:
    cfg = ctx.engine.config
    body = need_object(body)
    model = openai.model_of(body, cfg)
    prompt = body.get("prompt")
    if not isinstance(prompt, str):
        raise BadRequest(openai.missing("prompt"), param="prompt")
    return openai.ask_of(cfg, body, model, prompt)


def shape(ctx: Context, ask: Ask, rid: str) -> Shape:
    return CompletionShape(ask.model, rid)


API = Api("completions", parse, shape, openai.error, openai.busy)


def add_routes(app: web.Application, ctx: Context) -> None:
    app.router.add_post("/v1/completions", partial(generate, ctx, API))
