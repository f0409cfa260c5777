"""Anthropic's Messages API: POST <base>/messages (Anthropic, llama.cpp's server, vLLM, LiteLLM),
streamed as typed server-sent events.

Body and headers as README.md's "Anthropic Messages API" gives them (``max_tokens`` required:
DEFAULT_MAX_TOKENS): chat's history becomes Messages here, system messages the top-level
``system``, tool calls and results ``tool_use`` / ``tool_result`` blocks, images ``image`` blocks.

Every event's JSON carries its ``type`` (the SSE ``event:`` line repeats it; the payload is
enough). What each one means to the measurement, timed as chat's (wire/framing.py):

- ``content_block_delta`` with ``text_delta``: answer text, a token event (TTFT, ITL);
- ``content_block_delta`` with ``thinking_delta``: reasoning, a token event marked as reasoning
  (TTFO and reasoning time, as chat's reasoning_content); ``signature_delta`` is not output;
- ``content_block_delta`` with ``input_json_delta``: a tool call's arguments, a token event (as
  chat's tool-call deltas are), and ``content_block_start`` of a ``tool_use`` block (the tool's
  name, as chat's first tool-call delta) too;
- ``message_start``: no output; its ``message.usage`` has the prompt: ``input_tokens`` (the
  uncached part), ``cache_read_input_tokens`` and ``cache_creation_input_tokens``, which add up
  to the prompt; cached tokens are ``cache_read_input_tokens``. Its ``output_tokens`` is not
  the reply's count and is not read;
- ``message_delta``: the stop reason (end_turn -> stop, max_tokens -> length, tool_use ->
  tool_calls) and ``usage.output_tokens``, the reply's count;
- ``message_stop``: the clean end (no ``[DONE]``);
- ``error``: a failure, as the API shapes it ({"type": "error", "error": {"type", "message"}}),
  recorded as "type: message"; an HTTP error body of the same shape is read the same way;
- ``ping``, ``content_block_stop``, everything else: no output.
"""

from __future__ import annotations

import json
from typing import Any

from llmbench.wire.events import (END, ERROR, MALFORMED, OTHER, TOKEN, Event, Usage, count, loads,
                                  text_or_none, tool_piece, wrong_type)
from llmbench.wire.format import WireFormat
from llmbench.wire.openai import apply_common, text_of

# The API requires max_tokens; what is sent when the workload asks for no length.
DEFAULT_MAX_TOKENS = 4096
# The API version every request names (Anthropic's current one; llama.cpp and LiteLLM accept it).
VERSION = "2023-06-01"
KEY_ENV = "ANTHROPIC_API_KEY"

_STOP = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length",
         "tool_use": "tool_calls"}
TOOL_CHOICE = {"auto": {"type": "auto"}, "required": {"type": "any"}, "none": {"type": "none"}}


# -- the request ---------------------------------------------------------------------------------
def _image(url: str) -> dict[str, Any]:
    """A chat image_url as a Messages image block: a data URI as base64, else by URL."""
    if url.startswith("data:") and ";base64," in url:
        head, _, data = url.partition(";base64,")
        return {"type": "image", "source": {"type": "base64", "media_type": head[5:] or "image/png",
                                            "data": data}}
    return {"type": "image", "source": {"type": "url", "url": url}}


def _blocks(content: Any) -> Any:
    """Chat content (a string, or text and image_url parts) as Messages content."""
    if not isinstance(content, list):
        return content if content is not None else ""
    out = []
    for p in content:
        if not isinstance(p, dict):
            continue
        if p.get("type") == "image_url":
            url = p.get("image_url")
            out.append(_image(url.get("url", "") if isinstance(url, dict) else str(url or "")))
        else:
            out.append({"type": "text", "text": str(p.get("text", ""))})
    return out


def _tool_use(call: dict[str, Any]) -> dict[str, Any]:
    fn = call.get("function") if isinstance(call.get("function"), dict) else {}
    args = fn.get("arguments")
    try:
        value = json.loads(args) if isinstance(args, str) and args else {}
    except ValueError:
        value = {}
    return {"type": "tool_use", "id": str(call.get("id") or ""), "name": str(fn.get("name") or ""),
            "input": value if isinstance(value, dict) else {"value": value}}


def messages_of(messages: list[dict[str, Any]]) -> tuple[str | None, list[dict[str, Any]]]:
    """(system text, Messages turns) for a chat-shaped history. The list itself when it is
    plain user and assistant text, the usual case (no copy on the hot path)."""
    if all(m.get("role") in ("user", "assistant") and isinstance(m.get("content"), str)
           and not m.get("tool_calls") for m in messages):
        return None, messages
    system: list[str] = []
    out: list[dict[str, Any]] = []
    for m in messages:
        role = m.get("role")
        if role in ("system", "developer"):
            system.append(text_of(m.get("content") or ""))
            continue
        if role == "tool":
            block = {"type": "tool_result", "tool_use_id": str(m.get("tool_call_id") or ""),
                     "content": text_of(m.get("content") or "")}
            last = out[-1] if out else None
            if last is not None and last["role"] == "user" and isinstance(last["content"], list) \
                    and all(b.get("type") == "tool_result" for b in last["content"]):
                last["content"].append(block)       # the results of one step: one user turn
            else:
                out.append({"role": "user", "content": [block]})
            continue
        content = _blocks(m.get("content"))
        calls = m.get("tool_calls") if role == "assistant" else None
        if calls:
            blocks = ([{"type": "text", "text": content}] if isinstance(content, str) and content
                      else (content if isinstance(content, list) else []))
            content = blocks + [_tool_use(c) for c in calls if isinstance(c, dict)]
        out.append({"role": "assistant" if role == "assistant" else "user", "content": content})
    return ("\n\n".join(system) if system else None), out


def body(model: str, messages: list[dict[str, Any]], max_tokens: int | None, stream: bool,
         params: dict[str, Any]) -> dict[str, Any]:
    system, turns = messages_of(messages)
    out: dict[str, Any] = {"model": model, "max_tokens": max_tokens or DEFAULT_MAX_TOKENS,
                           "messages": turns}
    if system is not None:
        out["system"] = system
    return apply_common(out, stream, params, usage_chunk=False)


def tools_fields(tools: list[dict[str, Any]] | None, tool_choice: str | None) -> dict[str, Any]:
    """--tools (chat's definitions) and --tool-choice in the Messages shape."""
    out: dict[str, Any] = {}
    if tools:
        out["tools"] = [{"name": t["function"]["name"],
                         **({"description": t["function"]["description"]}
                            if "description" in t["function"] else {}),
                         "input_schema": t["function"].get("parameters") or {"type": "object"}}
                        for t in tools]
    if tool_choice:
        out["tool_choice"] = TOOL_CHOICE[tool_choice]
    return out


# -- the reply -----------------------------------------------------------------------------------
def error_text(obj: Any) -> str | None:
    """"type: message" of an error as the API (module doc) or an OpenAI-style server shapes it."""
    if not isinstance(obj, dict):
        return None
    err = obj.get("error")
    if isinstance(err, dict):
        kind, message = err.get("type"), err.get("message")
        if message is None and kind is None:
            return str(err)[:200]
        return (f"{kind}: {message}" if kind and message else str(message or kind))[:200]
    if err is not None:
        return str(err)[:200]
    return None


def http_error(text: str) -> str | None:
    """An HTTP error body (its first characters, as recorded) -> the API's message, or None
    when it is not one (a proxy's page, a body cut short): then the body stays as it was."""
    try:
        return error_text(loads(text.encode()))
    except ValueError:
        return None


def usage(raw: Any, prompt: bool = True) -> Usage | None:
    """Messages usage -> Usage, the prompt's three counts added up (module doc); the reply's
    count only where asked (message_delta, a whole reply)."""
    if not isinstance(raw, dict):
        return None
    p_raw = raw.get("input_tokens") if prompt else None
    total: Any = p_raw
    cached = raw.get("cache_read_input_tokens") if prompt else None
    if p_raw is not None and count(p_raw) is not None:
        parts = [count(raw.get(k)) for k in ("cache_read_input_tokens", "cache_creation_input_tokens")]
        total = count(p_raw) + sum(v for v in parts if v is not None)   # type: ignore[operator]
    return Usage.of(total, raw.get("output_tokens") if "output_tokens" in raw else None, cached)


def classify(payload: bytes) -> Event:
    try:
        obj = loads(payload)
    except ValueError:
        obj = None
    if not isinstance(obj, dict):
        return Event(MALFORMED, error=payload[:200].decode("utf-8", "replace"))
    kind = obj.get("type")
    if kind == "content_block_delta":           # the hot path: most events of a reply
        delta = obj.get("delta")
        if delta.__class__ is not dict:
            return wrong_type("content_block_delta's delta", delta, "an object")
        dkind = delta.get("type")
        if dkind == "text_delta":
            text = delta.get("text")
            # the record's and the history's text: another type fails this request, never joined
            if not text_or_none(text):
                return wrong_type("delta.text", text, "a string")
            return Event(TOKEN, text=text or "")
        if dkind == "thinking_delta":
            if not text_or_none(delta.get("thinking")):
                return wrong_type("delta.thinking", delta.get("thinking"), "a string")
            return Event(TOKEN, reasoning=True)
        if dkind == "input_json_delta":
            return Event(TOKEN, tool=True, calls=(tool_piece(obj.get("index"),
                                                             args=delta.get("partial_json")),))
        return Event(OTHER)                     # signature_delta, citations_delta
    if kind == "content_block_start":
        return _block_start(obj)
    if kind == "message_delta":
        return _message_delta(obj)
    if kind == "message_start":
        return _message_start(obj)
    if kind == "message_stop":
        return Event(END)
    if kind == "error" or "error" in obj:
        return Event(ERROR, error=error_text(obj) or "error without a message")
    return Event(OTHER)                         # ping, content_block_stop


def _block_start(obj: dict[str, Any]) -> Event:
    block = obj.get("content_block")
    bkind = block.get("type") if isinstance(block, dict) else None
    if bkind in ("tool_use", "server_tool_use"):
        # the tool's name (and its input, when a server sends it whole here)
        given = block.get("input")                           # type: ignore[union-attr]
        return Event(TOKEN, tool=True, calls=(tool_piece(
            obj.get("index"), block.get("id"), block.get("name"),  # type: ignore[union-attr]
            json.dumps(given) if isinstance(given, dict) and given else ""),))
    if bkind == "text" and block.get("text"):                # type: ignore[union-attr]
        if not text_or_none(block["text"]):                  # type: ignore[index]
            return wrong_type("content_block.text", block["text"], "a string")  # type: ignore[index]
        return Event(TOKEN, text=block["text"])             # type: ignore[index]
    if bkind == "redacted_thinking":
        return Event(TOKEN, reasoning=True)
    return Event(OTHER)


def _message_delta(obj: dict[str, Any]) -> Event:
    delta = obj.get("delta")
    stop = delta.get("stop_reason") if isinstance(delta, dict) else None
    raw = obj.get("usage")
    # the reply's count, and the prompt's where a server repeats them (the API's cumulative usage)
    u = usage(raw, prompt=isinstance(raw, dict) and "input_tokens" in raw)
    # a stop reason of another type is dropped (the summary counts them as text)
    return Event(OTHER, usage=u, finish_reason=_STOP.get(stop, stop)
                 if stop.__class__ is str and stop else None)


def _message_start(obj: dict[str, Any]) -> Event:
    msg = obj.get("message")
    msg = msg if isinstance(msg, dict) else {}
    raw = msg.get("usage")
    u = usage({k: v for k, v in raw.items() if k != "output_tokens"}) \
        if isinstance(raw, dict) else None
    rid = msg.get("id")
    return Event(OTHER, usage=u, ref=rid if isinstance(rid, str) and rid else None)


def parse_full(obj: dict[str, Any]) -> Event:
    """A whole message: its text and thinking blocks' text (as chat counts reasoning_content
    in a whole reply), whether it called a tool, its usage and stop reason."""
    if obj.get("type") == "error" or "error" in obj:
        return Event(ERROR, error=error_text(obj) or "error without a message")
    parts: list[str] = []
    tool = False
    calls = []
    for i, block in enumerate(obj.get("content") or ()):
        if not isinstance(block, dict):
            continue
        if block.get("type") in ("tool_use", "server_tool_use"):
            tool = True
            given = block.get("input")
            calls.append((i, block.get("id") or None, block.get("name") or None,
                          json.dumps(given) if isinstance(given, dict) else "{}"))
        elif isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif isinstance(block.get("thinking"), str):
            parts.append(block["thinking"])
    text = "".join(parts)
    stop = obj.get("stop_reason")
    rid = obj.get("id")
    return Event(TOKEN if (text or tool) else OTHER, text=text, usage=usage(obj.get("usage")),
                 finish_reason=_STOP.get(stop, stop) if isinstance(stop, str) else None,
                 tool=tool, ref=rid if isinstance(rid, str) and rid else None,
                 calls=tuple(calls) if calls else None)


ANTHROPIC = WireFormat(
    name="anthropic", summary="Anthropic Messages API (POST <base>/messages)",
    endpoint="/messages", body=body, classify=classify, parse_full=parse_full,
    root_path="/v1", url_suffixes=("/messages",), end_marker="message_stop", images=True,
    key_header="x-api-key", key_env=KEY_ENV, headers=(("anthropic-version", VERSION),),
    error_text=http_error, tools=True)
FORMATS = (ANTHROPIC,)
