"""llama.cpp's server: /metrics (llamacpp:*) when started with --metrics, else /slots; /props
gives the slot count either way."""

from __future__ import annotations

from typing import Any

from llmbench.records import safejson
from llmbench.servers.base import Get, JsonPoller, Metrics, MetricsAdapter, MetricsPoller, Poller, ServerSample, biggest, total


def extract(m: Metrics) -> ServerSample:
    return ServerSample(running=total(m, "llamacpp:requests_processing"),
                        waiting=total(m, "llamacpp:requests_deferred"),
                        kv_cache_usage=biggest(m, "llamacpp:kv_cache_usage_ratio"))


def extract_slots(slots: Any, props: dict[str, Any] | None) -> ServerSample:
    s = ServerSample()
    if isinstance(slots, list):
        s.running = sum(1 for x in slots if isinstance(x, dict) and
                        (x.get("is_processing") or x.get("state") == 1))
        s.slots = len(slots)
    if props and props.get("total_slots"):
        s.slots = props["total_slots"]
    return s


METRICS = MetricsAdapter("llamacpp", "llamacpp:", ("llamacpp:requests_processing",
                                                   "llamacpp:requests_deferred",
                                                   "llamacpp:kv_cache_usage_ratio"), extract)


async def _props(get: Get) -> dict[str, Any] | None:
    import asyncio      # here, so listing the adapters (the CLI's help) stays light
    import aiohttp
    try:
        status, text = await get("/props")
        if status == 200:
            obj = safejson.loads(text, "GET /props")
            if isinstance(obj, dict) and "total_slots" in obj:
                return obj
    except (ValueError, aiohttp.ClientError, asyncio.TimeoutError):
        pass
    return None


class _Adapter:
    name = "llamacpp"
    paths = ("/metrics", "/props")

    async def detect(self, get: Get, forced: bool) -> Poller | None:
        metrics = await METRICS.detect(get, forced)
        if metrics is not None:
            props = await _props(get)
            return MetricsPoller(METRICS, slots=(props or {}).get("total_slots"))
        props = await _props(get)
        if props is not None:
            return JsonPoller("/slots", lambda slots: extract_slots(slots, props))
        return None


ADAPTER = _Adapter()
