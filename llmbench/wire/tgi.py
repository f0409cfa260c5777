"""Hugging Face TGI's native API: POST <root>/generate_stream (SSE) and /generate (one body).

Body: {"inputs": prompt, "parameters": {"max_new_tokens": N, "details": true, ...}}. Every
event carries one ``token`` ({"id", "text", "logprob", "special"}); the last one also carries
``generated_text`` and, because details were asked for, ``details`` (finish_reason,
generated_tokens, input_length). There is no [DONE]: the last event is the end marker. An
error inside the stream is {"error": ..., "error_type": ...}.
"""

from __future__ import annotations

from typing import Any

from llmbench.wire.events import json_object, ERROR, OTHER, TOKEN, TOKEN_END, Event, Usage, error_text, text_or_none, wrong_type
from llmbench.wire.format import WireFormat
from llmbench.wire.openai import messages_to_prompt

# TGI's finish reasons in the OpenAI words the rest of llmbench reads ("stop": the model ended).
_FINISH = {"eos_token": "stop", "stop_sequence": "stop", "length": "length"}


def body(model: str, messages: list[dict[str, str]], max_tokens: int | None, stream: bool,
         params: dict[str, Any]) -> dict[str, Any]:
    parameters: dict[str, Any] = {"details": True}
    if max_tokens is not None:
        parameters["max_new_tokens"] = max_tokens
    temperature = params.get("temperature")
    if temperature is not None:
        if temperature > 0:         # TGI rejects temperature 0; greedy is do_sample false
            parameters["temperature"] = temperature
            parameters["do_sample"] = True
        else:
            parameters["do_sample"] = False
    extra = dict(params.get("extra_body") or {})
    parameters.update(extra.pop("parameters", {}) or {})
    out: dict[str, Any] = {"inputs": messages_to_prompt(messages), "parameters": parameters}
    out.update(extra)
    return out


def _end(obj: dict[str, Any], kind: int, text: str) -> Event:
    details = obj.get("details")
    usage = finish = None
    if isinstance(details, dict):
        usage = Usage.of(details.get("input_length"), details.get("generated_tokens"))
        reason = details.get("finish_reason")
        finish = _FINISH.get(reason, reason) if isinstance(reason, str) else None
    return Event(kind, text=text, usage=usage, finish_reason=finish)


def classify(payload: bytes) -> Event:
    obj = json_object(payload)
    if isinstance(obj, Event):
        return obj
    token = obj.get("token")
    if token is None:
        return Event(OTHER)
    if not isinstance(token, dict):
        return wrong_type("token", token, "an object")
    # a special token (EOS) is a decode step like any other, but its text is not reply text
    raw = token.get("text")
    if not text_or_none(raw):
        return wrong_type("token.text", raw, "a string")
    text = "" if token.get("special") else (raw or "")
    generated = obj.get("generated_text")
    if generated is not None:
        if not isinstance(generated, str):
            return wrong_type("generated_text", generated, "a string")
        return _end(obj, TOKEN_END, text)
    return Event(TOKEN, text=text)


def parse_full(obj: dict[str, Any]) -> Event:
    if "error" in obj:
        return Event(ERROR, error=error_text(obj["error"]))
    text = obj.get("generated_text")
    if text is None:
        return Event(OTHER)
    if not isinstance(text, str):
        return wrong_type("generated_text", text, "a string")
    return _end(obj, TOKEN, text)


GENERATE = WireFormat(
    name="tgi", summary="TGI's native API (POST <root>/generate_stream)",
    endpoint="/generate_stream", whole_endpoint="/generate", body=body, classify=classify,
    parse_full=parse_full, url_suffixes=("/generate_stream",), models_path="/info",
    end_marker="the event with generated_text")
FORMATS = (GENERATE,)
