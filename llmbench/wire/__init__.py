"""Wire formats: build a request body, frame a byte stream into events, classify one event.

Pure functions, no I/O. One module per format; this module picks the right one for a flavour.
"""

from __future__ import annotations

from typing import Any

from . import ollama, openai
from .events import END, ERROR, OTHER, TOKEN, Event
from .framing import NdjsonFramer, SseFramer

__all__ = ["END", "ERROR", "OTHER", "TOKEN", "Event", "build_body", "make_framer", "classify",
           "parse_full_response"]


def build_body(api: str, model: str, messages: list[dict[str, str]], max_tokens: int | None,
               stream: bool, params: dict[str, Any]) -> dict[str, Any]:
    if api == "openai-chat":
        return openai.chat_body(model, messages, max_tokens, stream, params)
    if api == "openai":
        return openai.completions_body(model, messages, max_tokens, stream, params)
    if api == "ollama":
        return ollama.chat_body(model, messages, max_tokens, stream, params)
    raise ValueError(f"unknown API flavour {api!r}")


def make_framer(api: str) -> SseFramer | NdjsonFramer:
    return NdjsonFramer() if api == "ollama" else SseFramer()


def classify(api: str):
    """The event classifier for a flavour: payload bytes -> Event."""
    if api == "openai-chat":
        return openai.classify_chat
    if api == "openai":
        return openai.classify_completion
    return ollama.classify


def parse_full_response(api: str, obj: dict[str, Any]) -> Event:
    """A non-streaming response body as one event."""
    return ollama.parse_full(obj) if api == "ollama" else openai.parse_full(api, obj)
