"""POST /v1/embeddings: OpenAI's embeddings API, as vLLM, llama.cpp (--embeddings) and Ollama's
/v1 serve it. No stream: one JSON body with a vector per input.

Cost: ``embed_ms`` per request plus ``embed_ms_per_token`` per input token of the whole batch
(the batch is one forward pass), times the jitter. With ``embed_shares_slots`` (the default: one
model serves both) a request waits for a generation slot like a chat request and holds it while
it is computed; without, embeddings run beside generation, each at its own cost. Vectors are
deterministic per input text and unit length; ``encoding_format: base64`` is honoured."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import math
import random
import struct
from functools import partial
from typing import Any

from aiohttp import web

from ..context import Context
from ..engine import QueueFull, Seq, mock_tokens
from ..errors import openai_error


def _inputs(raw: Any) -> list[str] | None:
    """The batch as texts: a string, a list of strings, token ids (a list of ints, or a list of
    such lists) read as that many tokens."""
    if isinstance(raw, str):
        return [raw]
    if isinstance(raw, list) and raw:
        if all(isinstance(x, str) for x in raw):
            return list(raw)
        if all(isinstance(x, int) and not isinstance(x, bool) for x in raw):
            return [" ".join(f"t{x}" for x in raw)]
        if all(isinstance(x, list) and all(isinstance(t, int) for t in x) for x in raw):
            return [" ".join(f"t{t}" for t in x) for x in raw]
    return None


def vector(text: str, dim: int) -> list[float]:
    rng = random.Random(hashlib.sha256(text.encode("utf-8", "replace")).digest())
    v = [rng.gauss(0.0, 1.0) for _ in range(dim)]
    norm = math.sqrt(sum(x * x for x in v)) or 1.0
    return [x / norm for x in v]


async def serve(ctx: Context, request: web.Request) -> web.Response:
    engine = ctx.engine
    cfg = engine.config
    if not ctx.authorized(request):
        return openai_error("invalid API key", 401, etype="authentication_error")
    try:
        body = json.loads(await request.read())
    except ValueError as exc:
        return openai_error(f"invalid JSON in request body: {exc}", 400)
    if not isinstance(body, dict):
        return openai_error("request body must be a JSON object", 400)
    model = body.get("model")
    if not isinstance(model, str) or not model:
        return openai_error("[{'type': 'missing', 'loc': ('body', 'model'), 'msg': 'Field required'}]",
                            400, param="model")
    if model not in cfg.models:
        return openai_error(f"The model `{model}` does not exist.", 404, param="model")
    texts = _inputs(body.get("input"))
    if texts is None:
        return openai_error("input must be a string, a list of strings or of token ids", 400,
                            param="input")
    fault = engine.draw_fault()
    if fault == "500":
        return openai_error("mock fault: internal server error", 500)
    if fault == "429":
        return openai_error("mock fault: rate limit exceeded", 429)
    n_tokens = [len(mock_tokens(t)) for t in texts]
    total = sum(n_tokens)
    seq: Seq | None = None
    if cfg.embed_shares_slots:
        try:
            engine.admit()
        except QueueFull:
            return openai_error("The server has too many pending requests; try again later.",
                                429, etype="RateLimitError")
        seq = await engine.acquire_slot(Seq(prompt_tokens=total))
    try:
        await asyncio.sleep(max((cfg.embed_ms + cfg.embed_ms_per_token * total) / 1000.0
                                * engine.jitter(), 0.0))
    finally:
        if seq is not None:
            engine.release_slot(seq)
    b64 = body.get("encoding_format") == "base64"
    data = []
    for i, text in enumerate(texts):
        v = vector(text, cfg.embedding_dim)
        emb: Any = base64.b64encode(struct.pack(f"<{len(v)}f", *v)).decode() if b64 else v
        data.append({"object": "embedding", "index": i, "embedding": emb})
    return web.json_response({"object": "list", "data": data, "model": model,
                              "usage": {"prompt_tokens": total, "total_tokens": total}},
                             headers=ctx.headers())


def add_routes(app: web.Application, ctx: Context) -> None:
    app.router.add_post("/v1/embeddings", partial(serve, ctx))
