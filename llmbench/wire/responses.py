"""OpenAI's Responses API: POST <base>/responses, streamed as typed server-sent events.

Body: {"model", "input": [messages], "max_output_tokens": N, "stream": true}. The conversation
goes as a message list (role + content, the same items chat takes), so a multi-turn user sends
its history as it does for chat.

Every event's JSON carries its ``type`` (the SSE ``event:`` line repeats it; the payload is
enough). What each one means to the measurement:

- ``response.output_text.delta``: output text, a token event (TTFT, ITL count it);
- ``response.reasoning_text.delta``, ``response.reasoning_summary_text.delta``: reasoning, a
  token event marked as reasoning (TTFO and reasoning time, as for chat's reasoning_content);
- ``response.function_call_arguments.delta``, ``response.refusal.delta``: output the model
  generated, a token event (as chat's tool-call deltas are);
- ``response.completed``: the clean end, with ``response.usage`` (input_tokens, output_tokens,
  output_tokens_details.reasoning_tokens, input_tokens_details.cached_tokens);
- ``response.incomplete``: also an end (the output budget ran out: finish reason "length");
- ``response.failed`` and ``error``: a failure, with the server's message;
- everything else (response.created, in_progress, output_item.*, content_part.*, *.done): no
  output. There is no ``[DONE]``: response.completed ends the stream.
"""

from __future__ import annotations

from typing import Any

from llmbench.wire.events import (END, ERROR, OTHER, TOKEN, Event, Usage, json_object,
                                  text_or_none, tool_piece, wrong_type)
from llmbench.wire.format import WireFormat
from llmbench.wire.openai import usage as openai_usage, with_content_lists

_TEXT = "response.output_text.delta"
# deltas that are model output but not the answer's text
_REASONING = frozenset(("response.reasoning_text.delta", "response.reasoning_summary_text.delta"))
_OTHER_OUTPUT = frozenset(("response.function_call_arguments.delta", "response.refusal.delta",
                           "response.custom_tool_call_input.delta"))
_ENDS = frozenset(("response.completed", "response.incomplete"))
_FAILS = frozenset(("response.failed", "error"))


def _input_message(m: dict[str, Any]) -> dict[str, Any]:
    """A chat message's content parts as Responses input parts: input_text, input_image."""
    return {**m, "content": [
        {"type": "input_image", "image_url": p["image_url"]["url"]}
        if p.get("type") == "image_url" else
        {"type": "input_text", "text": p.get("text", "")} for p in m["content"]]}


def _input(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = with_content_lists(messages, _input_message)
    if any(m.get("tool_calls") or m.get("role") == "tool" for m in out):
        out = _tool_items(out)
    return out


def _tool_items(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An agent's chat-shaped history as Responses input items: an assistant turn's tool calls
    become ``function_call`` items (after its text, if any) and each ``tool`` message a
    ``function_call_output`` naming the call it answers."""
    out: list[dict[str, Any]] = []
    for m in messages:
        calls = m.get("tool_calls") if m.get("role") == "assistant" else None
        if calls:
            if m.get("content"):
                out.append({"role": "assistant", "content": m["content"]})
            for c in calls:
                fn = c.get("function") or {}
                out.append({"type": "function_call", "call_id": c.get("id") or "",
                            "name": fn.get("name") or "", "arguments": fn.get("arguments") or ""})
        elif m.get("role") == "tool":
            out.append({"type": "function_call_output", "call_id": m.get("tool_call_id") or "",
                        "output": m.get("content") or ""})
        else:
            out.append(m)
    return out


def body(model: str, messages: list[dict[str, Any]], max_tokens: int | None, stream: bool,
         params: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"model": model, "input": _input(messages)}
    if max_tokens is not None:
        out["max_output_tokens"] = max_tokens
    if stream:
        out["stream"] = True
    if params.get("temperature") is not None:
        out["temperature"] = params["temperature"]
    # "store" only with --responses-state server: each reply kept for the next turn to name
    # (previous_response_id) instead of sending the history; else nothing kept, like chat
    out["store"] = params.get("responses_state") == "server"
    out.update(params.get("extra_body") or {})
    return out


def usage(raw: Any) -> Usage | None:
    """The Responses usage object -> Usage (input/output instead of prompt/completion)."""
    return openai_usage(raw, "input_tokens", "output_tokens")


def _error_text(obj: dict[str, Any]) -> str:
    err = obj.get("error")
    if not isinstance(err, dict):
        resp = obj.get("response")
        err = resp.get("error") if isinstance(resp, dict) else None
    if isinstance(err, dict):
        code = err.get("code")
        message = err.get("message") or err
        return (f"{code}: {message}" if code else str(message))[:200]
    if err is not None:
        return str(err)[:200]
    message = obj.get("message")
    code = obj.get("code")
    if message:
        return (f"{code}: {message}" if code else str(message))[:200]
    return f"{obj.get('type')} without an error message"


def _finish(resp: Any, kind: str) -> str:
    if kind == "response.incomplete":
        details = resp.get("incomplete_details") if isinstance(resp, dict) else None
        reason = details.get("reason") if isinstance(details, dict) else None
        return "length" if reason in (None, "max_output_tokens") else str(reason)
    return "stop"


def _id(resp: Any) -> str | None:
    rid = resp.get("id") if isinstance(resp, dict) else None
    return rid if isinstance(rid, str) and rid else None


def classify(payload: bytes) -> Event:
    obj = json_object(payload)          # a malformed payload, or an object with "error"
    if isinstance(obj, Event):
        return obj
    kind = obj.get("type")
    if kind == _TEXT:                   # the hot path: most events of a reply
        delta = obj.get("delta")
        if not text_or_none(delta):
            return wrong_type(f"{_TEXT} delta", delta, "a string")
        return Event(TOKEN, text=delta or "")
    if not isinstance(kind, str):
        return Event(OTHER) if kind is None else wrong_type("type", kind, "a string")
    if kind in _REASONING:
        return Event(TOKEN, reasoning=True)
    if kind in _OTHER_OUTPUT:
        if kind == "response.refusal.delta":
            return Event(TOKEN)
        return Event(TOKEN, tool=True,
                     calls=(tool_piece(obj.get("output_index"), args=obj.get("delta")),))
    if kind == "response.output_item.added":
        item = obj.get("item")
        if isinstance(item, dict) and item.get("type") == "function_call":
            # the call's id and name, before its arguments stream: not output yet (no token)
            return Event(OTHER, calls=(tool_piece(obj.get("output_index"),
                                                  item.get("call_id") or item.get("id"),
                                                  item.get("name")),))
        return Event(OTHER)
    if kind in _ENDS:
        resp = obj.get("response")
        u = usage(resp.get("usage")) if isinstance(resp, dict) else None
        return Event(END, usage=u, finish_reason=_finish(resp, kind), ref=_id(resp))
    if kind == "response.created":
        return Event(OTHER, ref=_id(obj.get("response")))
    if kind in _FAILS:
        return Event(ERROR, error=_error_text(obj))
    return Event(OTHER)


def parse_full(obj: dict[str, Any]) -> Event:
    """A whole response object: its output items' text, reasoning included (as chat counts
    reasoning_content in a whole reply), its usage and status."""
    if obj.get("error") or obj.get("status") == "failed":
        return Event(ERROR, error=_error_text(obj))
    output = obj.get("output")
    if not isinstance(output, list):
        return Event(OTHER, usage=usage(obj.get("usage")))
    parts: list[str] = []
    has = tool = False
    calls = []
    for i, item in enumerate(output):
        if not isinstance(item, dict):
            return wrong_type(f"output[{i}]", item, "an object")
        if item.get("type") == "function_call":
            has = tool = True
            args = item.get("arguments")
            if not text_or_none(args):
                return wrong_type(f"output[{i}].arguments", args, "a string")
            parts.append(args or "")
            calls.append((i, item.get("call_id") or item.get("id") or None,
                          item.get("name") or None, args or ""))
            continue
        content = item.get("content") or item.get("summary") or ()
        if not isinstance(content, (list, tuple)):
            return wrong_type(f"output[{i}].content", content, "a list")
        for c in content:
            if isinstance(c, dict) and "text" in c:
                if not isinstance(c["text"], str):
                    return wrong_type(f"output[{i}].content[].text", c["text"], "a string")
                parts.append(c["text"])
    text = "".join(parts)
    kind = "response.incomplete" if obj.get("status") == "incomplete" else "response.completed"
    return Event(TOKEN if (text or has) else OTHER, text=text, usage=usage(obj.get("usage")),
                 finish_reason=_finish(obj, kind), tool=tool, ref=_id(obj),
                 calls=tuple(calls) if calls else None)


RESPONSES = WireFormat(
    name="responses", summary="OpenAI Responses API (POST <base>/responses)",
    endpoint="/responses", body=body, classify=classify, parse_full=parse_full,
    root_path="/v1", url_suffixes=("/responses",), end_marker="response.completed",
    images=True, tools=True, structured=True)
FORMATS = (RESPONSES,)
