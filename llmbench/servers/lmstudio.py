"""LM Studio: its native REST API's model list (/api/v0/models, LM Studio 0.3.6 on) to
recognise it, polled for the models loaded. It has no metrics page; its OpenAI API (/v1) and
its native /api/v0/chat/completions take the same requests (llmbench --url .../v1 or
.../api/v0), the native one adding its own stats to a whole reply."""

from __future__ import annotations

import json
from typing import Any

from llmbench.servers.base import JsonAdapter, ServerSample


def extract(obj: dict[str, Any]) -> ServerSample:
    from llmbench.servers.identity import _lmstudio_entries
    entries = _lmstudio_entries(obj, None)
    return ServerSample(models_loaded=[e["id"] for e in entries if e["loaded"]])


def _knows(text: str, forced: bool) -> bool:
    from llmbench.servers.identity import _lmstudio_entries
    try:
        doc = json.loads(text)
    except ValueError:
        return False
    return forced or bool(_lmstudio_entries(doc, None))


ADAPTER = JsonAdapter("lmstudio", ("/api/v0/models",), _knows, extract)
