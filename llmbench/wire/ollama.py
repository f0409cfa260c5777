"""Ollama's native /api/chat: request bodies and NDJSON line classification."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from llmbench.wire.events import json_object, END, ERROR, OTHER, TOKEN, Event, Usage, error_text, text_or_none, timings, wrong_type
from llmbench.wire.format import WireFormat
from llmbench.wire.openai import with_content_lists

# Durations on Ollama's final line, in nanoseconds, and its counts (prompt_eval_cached_count,
# its cached prompt tokens, 0.34 on: kept so the cache check tells it from llmbench's inference)
TIMING_KEYS = ("total_duration", "load_duration", "prompt_eval_count", "prompt_eval_duration",
               "eval_count", "eval_duration", "prompt_eval_cached_count")


@lru_cache(maxsize=256)
def _base64_of(uri: str) -> str:
    """A data URI's base64 payload (what Ollama's images field takes); a string's hash is kept
    by the string, so a pool image costs one slice for the whole run."""
    return uri.split(",", 1)[1] if uri.startswith("data:") else uri


def _native_message(m: dict[str, Any]) -> dict[str, Any]:
    """Content parts (text + image_url) as Ollama's message: content text + images (base64)."""
    parts = m["content"]
    return {"role": m["role"],
            "content": "".join(p.get("text", "") for p in parts if p.get("type") == "text"),
            "images": [_base64_of(p["image_url"]["url"]) for p in parts
                       if p.get("type") == "image_url"]}


def chat_body(model: str, messages: list[dict[str, str]], max_tokens: int | None, stream: bool,
              params: dict[str, Any]) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if max_tokens is not None:
        options["num_predict"] = max_tokens
    if params.get("temperature") is not None:
        options["temperature"] = params["temperature"]
    body: dict[str, Any] = {"model": model,
                            "messages": with_content_lists(messages, _native_message),
                            "stream": stream}
    extra = dict(params.get("extra_body") or {})
    options.update(extra.pop("options", {}) or {})
    if options:
        body["options"] = options
    body.update(extra)
    return body


def _timing(obj: dict[str, Any]) -> dict[str, Any]:
    # numbers only: the summary subtracts them (analysis.metrics.ollama_slot_wait_s)
    return timings({k: obj[k] for k in TIMING_KEYS if k in obj}) or {}


def classify(payload: bytes) -> Event:
    obj = json_object(payload)
    if isinstance(obj, Event):
        return obj
    msg = obj.get("message")
    if msg is not None:
        if not isinstance(msg, dict):
            return wrong_type("message", msg, "an object")
        answer, thinking = msg.get("content"), msg.get("thinking")
        where = "message."
    else:
        answer, thinking = obj.get("response"), obj.get("thinking")
        where = ""
    # the text fields are the record's and the history's: another type fails this request
    if not text_or_none(answer):
        return wrong_type(where + ("content" if where else "response"), answer, "a string")
    if not text_or_none(thinking):
        return wrong_type(where + "thinking", thinking, "a string")
    text = (answer or "") + (thinking or "") if msg is not None else (answer or thinking or "")
    if obj.get("done"):
        # the last line; it carries text only when the reply was not streamed (one body)
        timing = _timing(obj)
        usage = Usage.of(obj.get("prompt_eval_count"), obj.get("eval_count"),
                         obj.get("prompt_eval_cached_count"))
        reason = obj.get("done_reason")
        return Event(END, text=text, usage=usage,
                     finish_reason=reason if isinstance(reason, str) else None,
                     server_timing=timing)
    # the reply's text is the answer (it becomes the conversation's history); thinking is a
    # token event of its own, as reasoning_content is on /v1
    return Event(TOKEN if text else OTHER, text=answer or "", reasoning=bool(thinking) and not answer)


def parse_full(obj: dict[str, Any]) -> Event:
    if "error" in obj:
        return Event(ERROR, error=error_text(obj["error"]))
    ev = classify(json.dumps({**obj, "done": False}).encode())
    end = classify(json.dumps(obj).encode())
    ev.usage, ev.server_timing, ev.finish_reason = end.usage, end.server_timing, end.finish_reason
    return ev


def _claims_root(path: str) -> int | None:
    """A bare host (Ollama's documented base URL) or host/api."""
    if path in ("", "/"):
        return 0
    return len("/api") if path == "/api" else None


CHAT = WireFormat(
    name="ollama", summary="Ollama's native API (POST <root>/api/chat, NDJSON)",
    endpoint="/api/chat", body=chat_body, classify=classify, parse_full=parse_full,
    framing="ndjson", url_suffixes=("/api/chat", "/api/generate"), claims_base=_claims_root,
    models_path="/api/tags", end_marker="done:true", images=True)
FORMATS = (CHAT,)
