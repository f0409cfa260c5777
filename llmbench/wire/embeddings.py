"""OpenAI's embeddings API: POST <base>/embeddings, one whole JSON body, never streamed.

Body: {"model", "input": a text or a batch of texts, "encoding_format": "float"}. A turn's batch
is its user messages (``--batch-size N`` puts N prompts in one request, workload.batch); the
reply's ``data`` has one vector per input and ``usage.prompt_tokens`` counts the batch. There is
no first token: a request's figures are its latency (E2EL) and what it embedded (``items``:
embeddings, and the input tokens).
"""

from __future__ import annotations

from typing import Any

from llmbench.wire.events import ERROR, OTHER, TOKEN, Event, Usage
from llmbench.wire.format import WireFormat
from llmbench.wire.openai import text_of


def body(model: str, messages: list[dict[str, Any]], max_tokens: int | None, stream: bool,
         params: dict[str, Any]) -> dict[str, Any]:
    texts = [text_of(m["content"]) for m in messages if m.get("role") == "user"]
    out: dict[str, Any] = {"model": model, "input": texts[0] if len(texts) == 1 else texts,
                           "encoding_format": "float"}
    out.update(params.get("extra_body") or {})
    return out


def parse_full(obj: dict[str, Any]) -> Event:
    if "error" in obj:
        err = obj["error"]
        return Event(ERROR, error=str(err.get("message") if isinstance(err, dict) else err)[:200])
    data = obj.get("data")
    if not isinstance(data, list) or not data:
        return Event(OTHER)
    usage = obj.get("usage")
    u = Usage.of(usage.get("prompt_tokens")) if isinstance(usage, dict) else None
    return Event(TOKEN, usage=u, items=sum(1 for d in data if isinstance(d, dict)
                                           and d.get("embedding") is not None))


def classify(payload: bytes) -> Event:
    """Never streamed; a server that streams anyway is read as an error, not measured wrong."""
    return Event(ERROR, error="an embeddings server sent a stream")


EMBEDDINGS = WireFormat(
    name="embeddings", summary="OpenAI embeddings (POST <base>/embeddings, never streamed)",
    endpoint="/embeddings", body=body, classify=classify, parse_full=parse_full,
    root_path="/v1", url_suffixes=("/embeddings",), end_marker="the whole body",
    streams=False, output="embeddings")
FORMATS = (EMBEDDINGS,)
