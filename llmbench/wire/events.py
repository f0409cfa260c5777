"""What one streamed event means to the client, and the normalised token usage it may carry."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from llmbench.records.safejson import kind_of  # noqa: F401  (the formats' wrong_type names types so)

try:
    # orjson decodes an event in about half the time of json.loads (scripts/bench_client_cpu.py
    # --decoder); optional: without it, the standard library decodes the same events.
    from orjson import loads as fast_loads
except ImportError:         # pragma: no cover - orjson is a dependency, kept optional here
    fast_loads = None

OTHER = 0    # carries no output: the role-only chunk, a finish chunk, a usage chunk
TOKEN = 1    # carries output (METRICS.md "token event")
END = 2      # the stream's clean end: [DONE], or Ollama's done:true line
ERROR = 3    # an error object inside the stream
MALFORMED = 4
TOKEN_END = 5  # carries output and is also the stream's last event (TGI's event with generated_text)

# One piece of a tool call as a stream carries it: (the call's index in the reply, its id or
# None, the function's name or None, a piece of its arguments' JSON text). An agent sends the
# call back in its history (wire.agents.assemble_calls joins the pieces).
ToolPiece = tuple[int, "str | None", "str | None", str]


def tool_piece(index: Any, cid: Any = None, name: Any = None, args: Any = "") -> ToolPiece:
    """One ToolPiece from an event's fields as a server sent them: an index that is not a
    number is 0, an empty id or name None, arguments that are not text ""."""
    return (index if isinstance(index, int) else 0, cid or None, name or None,
            args if isinstance(args, str) else "")


def count(value: Any) -> int | None:
    """A token count as a server reported it, or None when it is not a usable count: negative,
    not a number (a string, a bool, null), not finite or not whole. Checked here, at the
    source, so no record ever holds a count a broken server made up."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and math.isfinite(value) and value >= 0 and value.is_integer():
        return int(value)
    return None


@dataclass(slots=True, frozen=True)
class Usage:
    """Token counts a server reported, the same for every wire format (None: not reported)."""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    # prompt/completion counts the server sent that are not counts ("completion_tokens -7"):
    # dropped, and the record's note says so
    rejected: tuple[str, ...] = ()
    # completion_tokens_details.reasoning_tokens (OpenAI's usage; None: not reported)
    reasoning_tokens: int | None = None

    @staticmethod
    def of(prompt: Any = None, completion: Any = None, cached: Any = None) -> "Usage | None":
        """Raw values from the wire -> Usage, None when nothing was reported."""
        p, c = count(prompt), count(completion)
        rejected: tuple[str, ...] = ()
        if (p is None and prompt is not None) or (c is None and completion is not None):
            rejected = tuple(f"{name} {value}" for name, value, ok in
                             (("completion_tokens", completion, c), ("prompt_tokens", prompt, p))
                             if ok is None and value is not None)
        u = Usage(p, c, count(cached), rejected)
        if p is None and c is None and u.cached_tokens is None and not rejected:
            return None
        return u


@dataclass(slots=True)
class Event:
    """One event decoded from a stream: its kind and its text."""
    kind: int
    text: str = ""
    usage: Usage | None = None
    finish_reason: str | None = None
    server_timing: dict[str, Any] | None = None
    error: str | None = None
    reasoning: bool = False    # a token event that carried only reasoning, no answer content
    tool: bool = False         # a token event of a tool call (its name or arguments)
    items: int | None = None   # a whole reply's count of outputs that are not tokens (embeddings)
    ref: str | None = None     # the server's id of this reply (the Responses API's response id)
    calls: tuple[ToolPiece, ...] | None = None   # pieces of tool calls (wire.agents)


class TooDeep(ValueError):
    """A JSON document nested deeper than the decoders go (orjson: 1024 levels)."""


def malformed(payload: bytes, exc: BaseException | None = None) -> Event:
    """The MALFORMED event of a payload that is not one JSON object: the payload's start, and
    why when it parsed but too deep to read."""
    shown = payload[:200].decode("utf-8", "replace")
    if isinstance(exc, TooDeep):
        return Event(MALFORMED, error=f"JSON nested too deeply: {shown[:150]}")
    return Event(MALFORMED, error=shown)


def loads(payload: bytes) -> Any:
    """One JSON document, as ``json.loads`` reads it: orjson first, and whatever orjson refuses
    that Python's json accepts (NaN, Infinity, integers beyond 64 bits) falls back to json, so
    the faster decoder never changes what an event means. Raises ValueError when neither can."""
    fast = fast_loads
    if fast is not None:
        try:
            return fast(payload)
        except ValueError:
            pass
    try:
        return json.loads(payload)
    except RecursionError:
        # json's decoder recurses out of stack (TooDeep): that event is malformed, not a crash
        raise TooDeep("JSON nested too deeply") from None


def wrong_type(where: str, value: Any, wanted: str) -> Event:
    """The MALFORMED event for a field of the wrong JSON type: one bad event fails its request,
    named (``delta.content is a number (5), not a string``), never the run."""
    return Event(MALFORMED, error=f"{where} is {kind_of(value)}, not {wanted}")


def text_or_none(value: Any) -> bool:
    """A text field as the formats read it: a string, or absent (null)."""
    return value is None or value.__class__ is str or isinstance(value, str)


def timings(value: Any) -> dict[str, Any] | None:
    """A server's timing object (llama.cpp's ``timings``, Ollama's durations) with only its
    numbers kept: the summary does arithmetic on them, and a server's string there must not
    end the run."""
    if not isinstance(value, dict):
        return None
    out = {k: v for k, v in value.items()
           if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return out or None


def json_object(payload: bytes) -> "dict[str, Any] | Event":
    """One event's JSON object, or the MALFORMED / ERROR event it stands for: the first step of
    every JSON event format (an object with an "error" key is the server's error event)."""
    try:
        obj = loads(payload)
    except ValueError as exc:
        return malformed(payload, exc)
    if not isinstance(obj, dict):
        return malformed(payload)
    if "error" in obj:
        return Event(ERROR, error=error_text(obj["error"]))
    return obj


def error_text(err: Any) -> str:
    """A server's error value as the record's text: its message when it is an object that has
    one (of any type), else the value itself, at most 200 characters."""
    if isinstance(err, dict):
        msg = err.get("message")
        return str(msg if msg else err)[:200]
    return str(err)[:200]
