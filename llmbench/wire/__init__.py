"""Wire formats: build a request body, frame a byte stream into events, classify one event.

Pure functions, no I/O. One module per format (openai, ollama, ...), each building a
``WireFormat`` (format.py); registry.py lists them. These helpers look a format up by name.
"""

from __future__ import annotations

from typing import Any, Callable

from llmbench.wire.events import END, ERROR, OTHER, TOKEN, TOKEN_END, Event, Usage
from llmbench.wire.format import WireFormat
from llmbench.wire.framing import NdjsonFramer, SseFramer
from llmbench.wire.registry import detect, get, names

__all__ = ["END", "ERROR", "OTHER", "TOKEN", "TOKEN_END", "Event", "Usage", "WireFormat",
           "build_body", "make_framer", "classify", "parse_full_response", "get", "names",
           "detect"]


def _format(api: str) -> WireFormat:
    try:
        return get(api)
    except KeyError:
        raise ValueError(f"unknown API flavour {api!r}") from None


def build_body(api: str, model: str, messages: list[dict[str, str]], max_tokens: int | None,
               stream: bool, params: dict[str, Any]) -> dict[str, Any]:
    return _format(api).body(model, messages, max_tokens, stream, params)


def make_framer(api: str) -> SseFramer | NdjsonFramer:
    return _format(api).make_framer()


def classify(api: str) -> Callable[[bytes], Event]:
    """The event classifier for a flavour: payload bytes -> Event."""
    return _format(api).classify


def parse_full_response(api: str, obj: dict[str, Any]) -> Event:
    """A non-streaming response body as one event."""
    return _format(api).parse_full(obj)
