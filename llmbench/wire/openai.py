"""OpenAI chat completions and completions: request bodies and event classification."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, Callable

from llmbench.wire.events import END, ERROR, OTHER, TOKEN, Event, Usage, count, error_text, loads, malformed, text_or_none, timings, wrong_type
from llmbench.wire import events as _events
from llmbench.wire.format import WireFormat

_DONE = b"[DONE]"
# --max-tokens-field values ("auto" is resolved by the client from the URL before it gets here)
MAX_TOKENS_FIELDS = ("both", "max_tokens", "max_completion_tokens", "none")


def apply_common(body: dict[str, Any], stream: bool, params: dict[str, Any],
                 usage_chunk: bool = True) -> dict[str, Any]:
    """What every chat-like body takes alike: stream (with the usage chunk asked, where the API
    has one), temperature, ignore_eos (llama.cpp's and vLLM's extension) and --extra-body."""
    if stream:
        body["stream"] = True
        if usage_chunk:
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
    return apply_common(body, stream, params)


def text_of(content: Any) -> str:
    """A message's text: the string, or the text parts of a content list (the plan refuses
    images for the text-only APIs before any request, so none is dropped here)."""
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content if isinstance(p, dict))


def with_content_lists(messages: list[dict[str, Any]],
                       convert: Callable[[dict[str, Any]], dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with each message whose content is a list of parts replaced by
    ``convert(message)``, in a new list; the list itself when there is none (the usual case)."""
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
    return apply_common(body, stream, params)


def _choice(obj: dict[str, Any]) -> "dict[str, Any] | Event | None":
    """The first choice of an event or a body; None when it has none; the MALFORMED event when
    ``choices`` or the choice is not what the API says (a list of objects)."""
    choices = obj.get("choices")
    if not choices:
        return None
    if not isinstance(choices, list):
        return wrong_type("choices", choices, "a list")
    choice = choices[0]
    if not isinstance(choice, dict):
        return wrong_type("choices[0]", choice, "an object")
    return choice


def _finish_reason(choice: dict[str, Any]) -> str | None:
    """finish_reason when it is a string (a server's number there is dropped, not stored)."""
    reason = choice.get("finish_reason")
    return reason if isinstance(reason, str) else None


def _decode(payload: bytes) -> Event | dict[str, Any]:
    """[DONE], a malformed payload, or the event's JSON object."""
    if payload == _DONE:
        return Event(END)
    fast = _events.fast_loads
    try:
        # orjson at once (one call, not two, per event); what it refuses goes through loads
        obj = fast(payload) if fast is not None else loads(payload)
    except ValueError:
        try:
            obj = loads(payload)
        except ValueError as exc:
            return malformed(payload, exc)
    if not isinstance(obj, dict):
        return malformed(payload)
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


def _no_choices(obj: dict[str, Any], timed: bool = True) -> Event:
    """An event or body without choices: the server's error, or its usage (a stream's: timings)."""
    if "error" in obj:
        return Event(ERROR, error=error_text(obj["error"]))
    return Event(OTHER, usage=usage(obj.get("usage")),
                 server_timing=timings(obj.get("timings")) if timed else None)


_NO_DELTA: dict[str, Any] = {}


def classify_chat(payload: bytes) -> Event:
    # the hot path (one call per token event): the type checks are class identities, inline
    # (orjson and json give exact dicts, lists and strs), ~0.1 us an event
    obj = _decode(payload)
    if obj.__class__ is not dict:
        return obj                                  # type: ignore[return-value]
    choices = obj.get("choices")
    if not choices:
        return _no_choices(obj)
    if choices.__class__ is not list:
        return wrong_type("choices", choices, "a list")
    choice = choices[0]
    if choice.__class__ is not dict:
        return wrong_type("choices[0]", choice, "an object")
    delta = choice.get("delta") or _NO_DELTA
    if delta.__class__ is not dict:
        return wrong_type("choices[0].delta", delta, "an object")
    content = delta.get("content")
    if content.__class__ is str and content and len(delta) == 1 \
            and choice.get("finish_reason") is None and obj.get("usage") is None \
            and obj.get("timings") is None:
        # the usual event (text only, no usage, no finish): what the general path below
        # returns for it, without its checks (issue 50: per token event CPU)
        return Event(TOKEN, content)
    # the text fields are what the record and the conversation's history are made of: one of
    # another type fails this request (malformed_event), it is never joined as text
    if content is not None and content.__class__ is not str:
        return wrong_type("delta.content", content, "a string")
    reasoning = delta.get("reasoning_content") or delta.get("reasoning")
    if reasoning is not None and reasoning.__class__ is not str:
        return wrong_type("delta.reasoning_content", reasoning, "a string")
    tools = delta.get("tool_calls") or delta.get("function_call")
    is_token = bool(content) or bool(reasoning) or bool(tools) \
        or (content == "" and "role" not in delta)
    u = obj.get("usage")
    t = obj.get("timings")
    reason = choice.get("finish_reason")
    # reasoning_content (vLLM, SGLang) or reasoning (Ollama's /v1) without answer content
    only_reasoning = bool(reasoning) and not content and not tools
    return Event(TOKEN if is_token else OTHER, text=(content or "") if is_token else "",
                 usage=usage(u) if u is not None else None,
                 finish_reason=reason if reason.__class__ is str else None,
                 server_timing=timings(t) if t is not None else None, reasoning=only_reasoning,
                 tool=bool(tools), calls=_call_pieces(delta) if tools else None)


def _call_pieces(delta: dict[str, Any]) -> tuple[Any, ...]:
    """Chat's tool-call deltas (or the legacy function_call) as wire.events.ToolPiece values."""
    out = []
    tcs = delta.get("tool_calls")
    for k, tc in enumerate(tcs if isinstance(tcs, list) else ()):
        if not isinstance(tc, dict):
            continue
        fn = tc.get("function") if isinstance(tc.get("function"), dict) else {}
        index = tc.get("index")
        args = fn.get("arguments")
        out.append((index if isinstance(index, int) else k, tc.get("id") or None,
                    fn.get("name") or None,
                    args if isinstance(args, str) else (json.dumps(args) if args else "")))
    fc = delta.get("function_call")
    if isinstance(fc, dict):
        args = fc.get("arguments")
        out.append((0, None, fc.get("name") or None, args if isinstance(args, str) else ""))
    return tuple(out)


def _completion(obj: dict[str, Any], timed: bool = True) -> Event:
    """A completions event or whole body (``timed``: a stream's, see _no_choices)."""
    choice = _choice(obj)
    if choice is None:
        return _no_choices(obj, timed)
    if isinstance(choice, Event):
        return choice
    text = choice.get("text")
    if not text_or_none(text):
        return wrong_type("choices[0].text", text, "a string")
    return Event(TOKEN, text=text or "", usage=usage(obj.get("usage")),
                 finish_reason=_finish_reason(choice), server_timing=timings(obj.get("timings")))


def classify_completion(payload: bytes) -> Event:
    obj = _decode(payload)
    return obj if isinstance(obj, Event) else _completion(obj)


def parse_full(api: str, obj: dict[str, Any]) -> Event:
    if api != "openai-chat":
        return _completion(obj, timed=False)
    choice = _choice(obj)
    if choice is None:
        return _no_choices(obj, timed=False)
    if isinstance(choice, Event):
        return choice
    msg = choice.get("message") or {}
    if not isinstance(msg, dict):
        return wrong_type("choices[0].message", msg, "an object")
    parts = (msg.get("content"), msg.get("reasoning_content") or msg.get("reasoning"))
    for name, part in zip(("message.content", "message.reasoning_content"), parts):
        if not text_or_none(part):
            return wrong_type(name, part, "a string")
    text = (parts[0] or "") + (parts[1] or "")
    has = bool(text) or bool(msg.get("tool_calls"))
    tool = bool(msg.get("tool_calls") or msg.get("function_call"))
    return Event(TOKEN if has else OTHER, text=text, usage=usage(obj.get("usage")),
                 finish_reason=_finish_reason(choice), server_timing=timings(obj.get("timings")),
                 tool=tool, calls=_call_pieces(msg) if tool else None)


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
