"""SGLang: /metrics with sglang:* gauges."""

from __future__ import annotations

from llmbench.servers.base import Metrics, MetricsAdapter, ServerSample, biggest, total


def extract(m: Metrics) -> ServerSample:
    return ServerSample(running=total(m, "sglang:num_running_reqs"),
                        waiting=total(m, "sglang:num_queue_reqs"),
                        kv_cache_usage=biggest(m, "sglang:token_usage"),
                        cache_hit_rate=biggest(m, "sglang:cache_hit_rate"))


ADAPTER = MetricsAdapter("sglang", "sglang:", ("sglang:num_running_reqs", "sglang:num_queue_reqs",
                                               "sglang:token_usage", "sglang:cache_hit_rate"), extract)
