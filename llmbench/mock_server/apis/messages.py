"""POST /v1/messages: Anthropic's Messages API, as Anthropic, llama.cpp's server and LiteLLM
serve it: ``system`` (a string or text blocks), ``messages`` of user and assistant turns whose
content is a string or blocks (text, image, tool_use, tool_result, thinking), ``max_tokens``
(required), ``stream``, ``tools`` ({"name", "input_schema"}) and ``tool_choice`` ({"type":
"auto" | "any" | "tool" | "none"}). Errors as the API shapes them: {"type": "error", "error":
{"type": "invalid_request_error", "message": ...}}. The stream is shapes.MessagesShape."""

from __future__ import annotations

import json
from functools import partial
from typing import Any

from aiohttp import web

from ..context import Context
from ..errors import BadRequest
from ..generate import Api, Ask, generate, image_prompts, make_ask, need_object, plan_reply
from ..shapes import MessagesShape, Shape

# an HTTP status -> the API's error type
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error",
               403: "permission_error", 404: "not_found_error", 413: "request_too_large",
               429: "rate_limit_error", 500: "api_error", 529: "overloaded_error"}


def error(message: str, status: int, param: str | None = None) -> web.Response:
    return web.json_response({"type": "error", "error": {
        "type": ERROR_TYPES.get(status, "api_error"), "message": message}}, status=status)


def busy() -> web.Response:
    return error("The server has too many pending requests; try again later.", 429)


def _text(content: Any, role: str, images: list[str]) -> str:
    """A turn's content as the prompt text the engine prefills: text blocks, a tool call's name
    and arguments, a tool result's content; images set aside (they cost image_tokens each)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise BadRequest(f"messages: each {role} turn's content is a string or a list of blocks")
    parts = []
    for block in content:
        if not isinstance(block, dict):
            raise BadRequest("messages: each content block is an object with a type")
        kind = block.get("type")
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif kind == "tool_use":
            parts.append(f"{block.get('name', '')} {json.dumps(block.get('input', {}))}")
        elif kind == "tool_result":
            parts.append(_text(block.get("content", ""), role, images))
        elif kind == "image":
            src = block.get("source") if isinstance(block.get("source"), dict) else {}
            images.append(str(src.get("data") or src.get("url") or ""))
    return " ".join(parts)


def _prompt(body: dict[str, Any], cfg: Any) -> str:
    system = body.get("system")
    images: list[str] = []
    parts = []
    if system:
        parts.append(f"<|system|>{_text(system, 'system', images)}")
    for m in body["messages"]:
        if not isinstance(m, dict) or m.get("role") not in ("user", "assistant"):
            raise BadRequest("messages: each turn has a role, user or assistant, and content")
        parts.append(f"<|{m['role']}|>{_text(m.get('content'), m['role'], images)}")
    return "\n".join(parts + image_prompts(images, cfg))


def _tools(body: dict[str, Any]) -> tuple[list[tuple[str, dict[str, Any]]], str]:
    tools = []
    for tool in body.get("tools") or ():
        if isinstance(tool, dict) and isinstance(tool.get("name"), str):
            schema = tool.get("input_schema")
            tools.append((tool["name"], schema if isinstance(schema, dict) else {}))
    choice = body.get("tool_choice")
    kind = choice.get("type") if isinstance(choice, dict) else "auto"
    if kind == "tool" and isinstance(choice, dict):       # this one tool, always
        named = [t for t in tools if t[0] == choice.get("name")]
        if not named:
            raise BadRequest(f"tool_choice: no tool named {choice.get('name')!r} in tools")
        return named, "required"
    return tools, {"any": "required", "none": "none"}.get(str(kind), "auto")


def parse(ctx: Context, body: Any, rid: str) -> Ask:
    cfg = ctx.engine.config
    body = need_object(body)
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest("model: Field required")
    if model not in cfg.models:
        raise BadRequest(f"model: {model}", 404)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages: Field required (a list of user and assistant turns)")
    max_tokens = body.get("max_tokens")
    if max_tokens is None:
        raise BadRequest("max_tokens: Field required")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise BadRequest(f"max_tokens: must be a whole number at least 1, got {max_tokens!r}")
    ask = make_ask(cfg, body, model, _prompt(body, cfg), max_tokens, body.get("stream", False))
    tools, choice = _tools(body)
    plan_reply(ask, cfg, rid, tools, choice, None)
    return ask


def shape(ctx: Context, ask: Ask, rid: str) -> Shape:
    return MessagesShape(ask.model, rid)


API = Api("messages", parse, shape, error, busy)


def add_routes(app: web.Application, ctx: Context) -> None:
    app.router.add_post("/v1/messages", partial(generate, ctx, API))
