"""What one streamed event means to the client, and the normalised token usage it may carry."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

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
    return json.loads(payload)


def json_object(payload: bytes) -> "dict[str, Any] | Event":
    """One event's JSON object, or the MALFORMED / ERROR event it stands for: the first step of
    every JSON event format (an object with an "error" key is the server's error event)."""
    try:
        obj = loads(payload)
    except ValueError:
        obj = None
    if not isinstance(obj, dict):
        return Event(MALFORMED, error=payload[:200].decode("utf-8", "replace"))
    if "error" in obj:
        return Event(ERROR, error=str(obj["error"])[:200])
    return obj
