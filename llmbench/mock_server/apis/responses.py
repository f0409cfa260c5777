"""POST /v1/responses: OpenAI's Responses API (input as a string or messages,
max_output_tokens, text.format, tools flat), with the stored replies a later turn names by
``previous_response_id`` (``store: true``)."""

from __future__ import annotations

from collections import OrderedDict
from functools import partial
from typing import Any

from aiohttp import web

from ..context import Context
from ..errors import BadRequest
from ..generate import (Api, Ask, check_max_tokens, generate, make_ask, need_object, plan_reply,
                        render_messages)
from ..shapes import ResponsesShape, Shape
from ..structured import schema_of, tools_of
from . import openai

KEEP = 10_000       # stored replies per replica, oldest dropped first


class Stored:
    """The Responses API's stored replies (store: true): id -> the conversation's text so far,
    so a turn naming previous_response_id is prefilled with its history; bounded."""

    def __init__(self, keep: int = KEEP) -> None:
        self.keep = keep
        self._texts: "OrderedDict[str, str]" = OrderedDict()

    def get(self, rid: str) -> str | None:
        text = self._texts.get(rid)
        if text is not None:
            self._texts.move_to_end(rid)
        return text

    def put(self, rid: str, conversation: str) -> None:
        self._texts[rid] = conversation
        while len(self._texts) > self.keep:
            self._texts.popitem(last=False)


def _as_message(item: Any) -> Any:
    """An input item as a chat message: a tool call the model made (function_call) as an
    assistant turn's tool call, its result (function_call_output) as a tool turn."""
    if isinstance(item, dict) and "role" not in item:
        if item.get("type") == "function_call":
            return {"role": "assistant", "content": None, "tool_calls": [
                {"function": {"name": item.get("name", ""), "arguments": item.get("arguments", "")}}]}
        if item.get("type") == "function_call_output":
            output = item.get("output", "")
            return {"role": "tool", "content": output if isinstance(output, (str, list)) else
                    str(output)}
    return item


def parser(stored: Stored) -> Any:
    def parse(ctx: Context, body: Any, rid: str) -> Ask:
        cfg = ctx.engine.config
        body = need_object(body)
        model = openai.model_of(body, cfg)
        given = body.get("input")
        if isinstance(given, str):
            given = [{"role": "user", "content": given}]
        if not isinstance(given, list) or not given:
            raise BadRequest("input is required: a string or a list of messages", param="input")
        messages = [_as_message(item) for item in given]
        previous = body.get("previous_response_id")
        if previous is not None:
            history = stored.get(previous) if isinstance(previous, str) else None
            if history is None:
                raise BadRequest(f"Previous response with id '{previous}' not found.",
                                 param="previous_response_id")
            messages = [{"role": "user", "content": history}] + messages
        prompt = render_messages(messages, cfg)
        ask = make_ask(cfg, body, model, prompt, check_max_tokens(body.get("max_output_tokens")),
                       body.get("stream", False))
        choice = body.get("tool_choice")
        plan_reply(ask, cfg, rid, tools_of(body), choice if isinstance(choice, str) else "auto",
                   schema_of(body, "responses"))
        if body.get("store") is True:
            ask.on_done = lambda reply: stored.put(f"resp_{rid}", prompt + "\n" + reply)
        return ask
    return parse


def shape(ctx: Context, ask: Ask, rid: str) -> Shape:
    return ResponsesShape(ask.model, rid)


def add_routes(app: web.Application, ctx: Context) -> None:
    api = Api("responses", parser(Stored()), shape, openai.error, openai.busy)
    app.router.add_post("/v1/responses", partial(generate, ctx, api))
