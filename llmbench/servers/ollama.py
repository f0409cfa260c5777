"""Ollama: /api/version to recognise it, /api/ps for the models loaded and where they sit."""

from __future__ import annotations

from typing import Any

from llmbench.servers.base import JsonAdapter, ServerSample


def extract(obj: dict[str, Any]) -> ServerSample:
    models = obj.get("models") or []
    size = sum(int(m.get("size") or 0) for m in models)
    vram = sum(int(m.get("size_vram") or 0) for m in models)
    # recent Ollama names each loaded model's context (num_ctx, shared by its parallel slots)
    ctx = [m.get("context_length") for m in models if isinstance(m.get("context_length"), int)]
    return ServerSample(models_loaded=[m.get("name") for m in models], size_bytes=size,
                        vram_bytes=vram, ram_bytes=max(size - vram, 0),
                        context_length=float(max(ctx)) if ctx else None)


ADAPTER = JsonAdapter("ollama", ("/api/version",), lambda text, forced: "version" in text, extract,
                      "/api/ps")
