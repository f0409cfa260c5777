"""OpenAI chat completions and completions: request bodies and event classification."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

from llmbench.wire.events import END, ERROR, MALFORMED, OTHER, TOKEN, Event, Usage, count, loads
from llmbench.wire.format import WireFormat

_DONE = b"[DONE]"
# --max-tokens-field values ("auto" is resolved by the client from the URL before it gets here)
MAX_TOKENS_FIELDS = ("both", "max_tokens", "max_completion_tokens", "none")


def _apply_common(body: dict[str, Any], stream: bool, params: dict[str, Any]) -> dict[str, Any]:
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    if params.get("temperature") is not None:
        body["temperature"] = params["temperature"]
    if params.get("ignore_eos"):
        body["ignore_eos"] = True
    body.update(params.get("extra_body") or {})
    return body


def chat_body(model: str, messages: list[dict[str, str]], max_tokens: int | None, stream: bool,
              params: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "messages": messages}
    if max_tokens is not None:
        # Servers disagree on the field: Ollama's /v1 and LM Studio read only max_tokens, the
        # OpenAI API rejects max_tokens for some models, vLLM/SGLang/llama.cpp read either.
        field = params.get("max_tokens_field") or "both"
        if field not in MAX_TOKENS_FIELDS:
            raise ValueError(f"unknown max-tokens field {field!r}")
        if field in ("both", "max_tokens"):
            body["max_tokens"] = max_tokens
        if field in ("both", "max_completion_tokens"):
            body["max_completion_tokens"] = max_tokens
    return _apply_common(body, stream, params)


def text_of(content: Any) -> str:
    """A message's text: the string, or the text parts of a content list (the plan refuses
    images for the text-only APIs before any request, so none is dropped here)."""
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content if isinstance(p, dict))


def with_content_lists(messages: list[dict[str, Any]],
                       convert: Callable[[dict[str, Any]], dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with each message whose content is a list of parts (text with images)
    replaced by ``convert(message)``; the list itself (no copy) when there is none, which is
    the usual case: the turn's messages are never changed."""
    out = messages
    for i, m in enumerate(messages):
        if isinstance(m.get("content"), list):
            if out is messages:
                out = list(messages)
            out[i] = convert(m)
    return out


def messages_to_prompt(messages: list[dict[str, str]]) -> str:
    """The completions API takes text: a single user turn is sent as is, history as a transcript."""
    if len(messages) == 1:
        return text_of(messages[0]["content"])
    lines = [f"{m['role'].capitalize()}: {text_of(m['content'])}" for m in messages]
    return "\n\n".join(lines) + "\n\nAssistant:"


def completions_body(model: str, messages: list[dict[str, str]], max_tokens: int | None,
                     stream: bool, params: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "prompt": messages_to_prompt(messages)}
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    return _apply_common(body, stream, params)


def _error_text(err: Any) -> str:
    if isinstance(err, dict):
        return str(err.get("message") or err)[:200]
    return str(err)[:200]


def _load(payload: bytes) -> Any:
    try:
        return loads(payload)
    except ValueError:
        return None


def _decode(payload: bytes) -> Event | dict[str, Any]:
    """[DONE], a malformed payload, or the event's JSON object."""
    if payload == _DONE:
        return Event(END)
    obj = _load(payload)
    if not isinstance(obj, dict):
        return Event(MALFORMED, error=payload[:200].decode("utf-8", "replace"))
    return obj


def usage(raw: Any, prompt: str = "prompt_tokens", completion: str = "completion_tokens"
          ) -> Usage | None:
    """OpenAI's usage object -> Usage: chat's prompt/completion_tokens (vLLM and SGLang put
    cached tokens in prompt_tokens_details), or with ``prompt="input_tokens",
    completion="output_tokens"`` the Responses API's, whose details follow the same names."""
    if not isinstance(raw, dict):
        return None
    details = raw.get(f"{prompt}_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    u = Usage.of(raw.get(prompt), raw.get(completion), cached)
    out_details = raw.get(f"{completion}_details")
    reasoning = count(out_details.get("reasoning_tokens")) if isinstance(out_details, dict) else None
    if u is not None and reasoning is not None:
        u = replace(u, reasoning_tokens=reasoning)
    return u


def _no_choices(obj: dict[str, Any]) -> Event:
    if "error" in obj:
        return Event(ERROR, error=_error_text(obj["error"]))
    return Event(OTHER, usage=usage(obj.get("usage")), server_timing=obj.get("timings"))


def classify_chat(payload: bytes) -> Event:
    obj = _decode(payload)
    if isinstance(obj, Event):
        return obj
    choices = obj.get("choices")
    if choices:
        choice = choices[0]
        delta = choice.get("delta") or {}
        content = delta.get("content")
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        is_token = bool(content) or bool(reasoning) or bool(delta.get("tool_calls")) \
            or bool(delta.get("function_call")) or (content == "" and "role" not in delta)
        u = obj.get("usage")
        # reasoning_content (vLLM, SGLang) or reasoning (Ollama's /v1) without answer content
        only_reasoning = bool(reasoning) and not content and not delta.get("tool_calls") \
            and not delta.get("function_call")
        return Event(TOKEN if is_token else OTHER, text=(content or "") if is_token else "",
                     usage=usage(u) if u is not None else None, finish_reason=choice.get("finish_reason"),
                     server_timing=obj.get("timings"), reasoning=only_reasoning,
                     tool=bool(delta.get("tool_calls") or delta.get("function_call")))
    return _no_choices(obj)


def classify_completion(payload: bytes) -> Event:
    obj = _decode(payload)
    if isinstance(obj, Event):
        return obj
    choices = obj.get("choices")
    if choices:
        choice = choices[0]
        u = obj.get("usage")
        return Event(TOKEN, text=choice.get("text") or "", usage=usage(u) if u is not None else None,
                     finish_reason=choice.get("finish_reason"), server_timing=obj.get("timings"))
    return _no_choices(obj)


def parse_full(api: str, obj: dict[str, Any]) -> Event:
    choices = obj.get("choices") or []
    if not choices:
        if "error" in obj:
            return Event(ERROR, error=_error_text(obj["error"]))
        return Event(OTHER, usage=usage(obj.get("usage")))
    choice = choices[0]
    if api == "openai-chat":
        msg = choice.get("message") or {}
        text = (msg.get("content") or "") + (msg.get("reasoning_content") or msg.get("reasoning") or "")
        has = bool(text) or bool(msg.get("tool_calls"))
        tool = bool(msg.get("tool_calls") or msg.get("function_call"))
    else:
        text = choice.get("text") or ""
        has, tool = True, False
    return Event(TOKEN if has else OTHER, text=text, usage=usage(obj.get("usage")),
                 finish_reason=choice.get("finish_reason"), server_timing=obj.get("timings"),
                 tool=tool)


def _claims_v1(path: str) -> int | None:
    """An OpenAI-style base URL: .../v1, a /v1/ prefix before more path, or Azure-like .../openai."""
    if path.endswith("/v1") or "/v1/" in path + "/" or path.endswith("/openai"):
        return 0
    return None


CHAT = WireFormat(
    name="openai-chat", summary="OpenAI chat completions (POST <base>/chat/completions)",
    endpoint="/chat/completions", body=chat_body, classify=classify_chat,
    parse_full=lambda obj: parse_full("openai-chat", obj), root_path="/v1",
    url_suffixes=("/chat/completions",), claims_base=_claims_v1, images=True, tools=True,
    structured=True)
COMPLETIONS = WireFormat(
    name="openai", summary="OpenAI completions (POST <base>/completions)",
    endpoint="/completions", body=completions_body, classify=classify_completion,
    parse_full=lambda obj: parse_full("openai", obj), root_path="/v1",
    url_suffixes=("/completions",))
FORMATS = (CHAT, COMPLETIONS)
