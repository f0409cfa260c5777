"""NOMYO router: /api/usage lists requests in flight per backend and model."""

from __future__ import annotations

from typing import Any

from llmbench.servers.base import Get, JsonPoller, Poller, ServerSample


def extract(obj: dict[str, Any]) -> ServerSample:
    counts = obj.get("usage_counts") or {}
    backends = {}
    for endpoint, per_model in counts.items():
        if isinstance(per_model, dict):
            backends[endpoint] = sum(v for v in per_model.values() if isinstance(v, (int, float)))
        elif isinstance(per_model, (int, float)):
            backends[endpoint] = per_model
    return ServerSample(backends_in_flight=backends, running=sum(backends.values()))


class _Adapter:
    name = "nomyo"
    paths = ("/api/usage",)

    async def detect(self, get: Get, forced: bool) -> Poller | None:
        status, text = await get("/api/usage")
        if status == 200 and "usage_counts" in text:
            return JsonPoller("/api/usage", extract)
        return None


ADAPTER = _Adapter()
