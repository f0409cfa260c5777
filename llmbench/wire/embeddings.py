"""OpenAI's embeddings API: POST <base>/embeddings, one whole JSON body, never streamed.

Body: {"model", "input": a text or a batch of texts, "encoding_format": "float"}. A turn's batch
is its user messages (``--batch-size N`` puts N prompts in one request, workload.batch); the
reply's ``data`` has one vector per input and ``usage.prompt_tokens`` counts the batch. There is
no first token: a request's figures are its latency (E2EL) and what it embedded (``items``:
embeddings, and the input tokens).
"""

from __future__ import annotations

from typing import Any

from llmbench.wire.events import ERROR, TOKEN, Event, Usage, error_text, wrong_type
from llmbench.wire.format import WireFormat
from llmbench.wire.openai import text_of


def body(model: str, messages: list[dict[str, Any]], max_tokens: int | None, stream: bool,
         params: dict[str, Any]) -> dict[str, Any]:
    texts = [text_of(m["content"]) for m in messages if m.get("role") == "user"]
    out: dict[str, Any] = {"model": model, "input": texts[0] if len(texts) == 1 else texts,
                           "encoding_format": "float"}
    out.update(params.get("extra_body") or {})
    return out


def items_expected(body: dict[str, Any]) -> int:
    """How many vectors the reply to ``body`` must hold: one per input."""
    inputs = body.get("input")
    return len(inputs) if isinstance(inputs, list) else 1


def _vector_len(d: Any) -> int:
    """The length of one ``data`` entry's vector: a list whose first value is a number (the
    rest is not walked: a 4096-float vector per input, on every request), or a base64 string
    (encoding_format "base64" through --extra-body); 0 when it holds none."""
    if not isinstance(d, dict):
        return 0
    v = d.get("embedding")
    if isinstance(v, list) and v and isinstance(v[0], (int, float)) and not isinstance(v[0], bool):
        return len(v)
    if isinstance(v, str) and v:
        return -1                       # base64: its length says nothing about dimensions
    return 0


def parse_full(obj: dict[str, Any]) -> Event:
    """``items``: how many of the reply's vectors have the batch's one dimension."""
    if "error" in obj:
        return Event(ERROR, error=error_text(obj["error"]))
    data = obj.get("data")
    if data is None:
        data = []
    if not isinstance(data, list):
        return wrong_type("data", data, "a list")
    usage = obj.get("usage")
    u = Usage.of(usage.get("prompt_tokens")) if isinstance(usage, dict) else None
    lengths = [_vector_len(d) for d in data]
    dims = next((n for n in lengths if n), 0)
    return Event(TOKEN, usage=u, items=sum(1 for n in lengths if n and n == dims))


def classify(payload: bytes) -> Event:
    """Never streamed; a server that streams anyway is read as an error, not measured wrong."""
    return Event(ERROR, error="an embeddings server sent a stream")


EMBEDDINGS = WireFormat(
    name="embeddings", summary="OpenAI embeddings (POST <base>/embeddings, never streamed)",
    endpoint="/embeddings", body=body, classify=classify, parse_full=parse_full,
    root_path="/v1", url_suffixes=("/embeddings",), end_marker="the whole body",
    streams=False, output="embeddings", items_expected=items_expected)
FORMATS = (EMBEDDINGS,)
