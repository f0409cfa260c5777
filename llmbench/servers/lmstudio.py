"""LM Studio: its native REST API's model list (/api/v0/models, LM Studio 0.3.6 on) to
recognise it, polled for the models loaded. It has no metrics page; its OpenAI API (/v1) and
its native /api/v0/chat/completions take the same requests (llmbench --url .../v1 or
.../api/v0), the native one adding its own stats to a whole reply."""

from __future__ import annotations

import json
from typing import Any

from llmbench.servers.base import Get, JsonPoller, Poller, ServerSample


def extract(obj: dict[str, Any]) -> ServerSample:
    from llmbench.servers.identity import _lmstudio_entries
    entries = _lmstudio_entries(obj, None)
    return ServerSample(models_loaded=[e["id"] for e in entries if e["loaded"]])


class _Adapter:
    name = "lmstudio"
    paths = ("/api/v0/models",)

    async def detect(self, get: Get, forced: bool) -> Poller | None:
        from llmbench.servers.identity import _lmstudio_entries
        status, text = await get("/api/v0/models")
        if status != 200:
            return None
        try:
            doc = json.loads(text)
        except ValueError:
            return None
        if forced or _lmstudio_entries(doc, None):
            return JsonPoller("/api/v0/models", extract)
        return None


ADAPTER = _Adapter()
