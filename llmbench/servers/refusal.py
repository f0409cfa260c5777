"""A server that refuses llmbench's request without saying why: what was sent that it may
have refused.

A 400 with an empty body names nothing to fix (llama-cpp-python's server answered every request
so while llmbench's x-request-id was not a UUID: its middleware checks that header before any
route runs). So the line says what a server may refuse that is not the prompt: the headers
beyond content-type (by name; their values may be secrets) and the request's fields."""

from __future__ import annotations

from typing import Any, Mapping

# the fields every chat request carries: a server refuses these only for what is in them
_PLAIN = ("model", "messages", "prompt", "input", "stream")


def said(text: str | None, limit: int = 100) -> str:
    """What an error body says: its JSON message when it has one (OpenAI's error.message,
    a plain error string), else its first words; at most ``limit`` characters."""
    import json
    try:
        doc = json.loads(text or "")
    except ValueError:
        doc = None
    err = doc.get("error") if isinstance(doc, dict) else None
    msg = err.get("message") if isinstance(err, dict) else err if isinstance(err, str) else None
    if msg is None and isinstance(doc, dict) and isinstance(doc.get("detail"), str):
        msg = doc["detail"]                         # FastAPI's
    words = " ".join(str(msg if msg else text or "").split())
    return (words[:limit] + ("..." if len(words) > limit else "")) or "no body"


def empty_refusal(status: int | None, error: str | None, headers: Mapping[str, str],
                  body: Mapping[str, Any], request_id: str) -> str | None:
    """The sentence for a 4xx whose body said nothing, else None."""
    if status is None or not 400 <= status < 500 or (error or "").strip():
        return None
    names = [k for k in headers if k.lower() not in ("content-type", "content-length", "host")]
    fields = [k for k in body if k not in _PLAIN]
    sent = [f"x-request-id: {request_id} (a UUID)"] + [f"header {n}" for n in names]
    if fields:
        sent.append("fields " + ", ".join(fields))
    return (f"; the server gave no reason (an empty body). Besides the prompt llmbench sent "
            f"{'; '.join(sent)}: a server or a proxy in front of it may refuse one of these "
            "(try the same request with curl, or another --api)")
