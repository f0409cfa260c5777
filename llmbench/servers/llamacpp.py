"""llama.cpp's server: /metrics (llamacpp:*) when started with --metrics, else /slots; /props
gives the slot count either way."""

from __future__ import annotations

from typing import Any

from llmbench.records import safejson
from llmbench.servers.base import Get, JsonPoller, Metrics, MetricsAdapter, MetricsPoller, Poller, ServerSample, biggest, total


def extract(m: Metrics) -> ServerSample:
    # prompt_tokens_total counts the prompt tokens it computed; prompt_tokens_cached_total
    # (recent builds) those it reused from a slot's cache or its host-memory prompt cache
    return ServerSample(running=total(m, "llamacpp:requests_processing"),
                        waiting=total(m, "llamacpp:requests_deferred"),
                        kv_cache_usage=biggest(m, "llamacpp:kv_cache_usage_ratio"),
                        prefilled_tokens_total=total(m, "llamacpp:prompt_tokens_total"),
                        cached_tokens_total=total(m, "llamacpp:prompt_tokens_cached_total"))


def extract_slots(slots: Any, props: dict[str, Any] | None) -> ServerSample:
    s = ServerSample()
    if isinstance(slots, list):
        s.running = sum(1 for x in slots if isinstance(x, dict) and
                        (x.get("is_processing") or x.get("state") == 1))
        s.slots = len(slots)
        # a slot's context window (n_ctx); /props's when the slots say none
        ctx = [x.get("n_ctx") for x in slots if isinstance(x, dict) and x.get("n_ctx")]
        if ctx:
            s.ctx_per_slot = float(max(ctx))
    if props and props.get("total_slots"):
        s.slots = props["total_slots"]
    s.ctx_per_slot = s.ctx_per_slot or _ctx(props)
    return s


METRICS = MetricsAdapter("llamacpp", "llamacpp:", ("llamacpp:requests_processing",
                                                   "llamacpp:requests_deferred",
                                                   "llamacpp:kv_cache_usage_ratio",
                                                   "llamacpp:prompt_tokens_total",
                                                   "llamacpp:prompt_tokens_cached_total"), extract)


def _ctx(props: dict[str, Any] | None) -> float | None:
    """A slot's context (n_ctx) as /props names it."""
    gen = (props or {}).get("default_generation_settings")
    n = gen.get("n_ctx") if isinstance(gen, dict) else None
    return float(n) if isinstance(n, (int, float)) and not isinstance(n, bool) and n > 0 else None


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
            return MetricsPoller(METRICS, slots=(props or {}).get("total_slots"),
                                 ctx_per_slot=_ctx(props))
        props = await _props(get)
        if props is not None:
            return JsonPoller("/slots", lambda slots: extract_slots(slots, props))
        return None


ADAPTER = _Adapter()
