"""vLLM: /metrics with vllm:* gauges and counters (the pre-0.10 gpu_* names too)."""

from __future__ import annotations

from llmbench.servers.base import Metrics, MetricsAdapter, ServerSample, biggest, total

METRIC_NAMES = ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
                "vllm:gpu_cache_usage_perc", "vllm:request_queue_time_seconds_sum",
                "vllm:request_queue_time_seconds_count", "vllm:prefix_cache_queries_total",
                "vllm:gpu_prefix_cache_queries_total", "vllm:prefix_cache_hits_total",
                "vllm:gpu_prefix_cache_hits_total", "vllm:num_preemptions_total",
                "llmbench_mock:slots", "llmbench_mock:kv_budget_tokens",
                "llmbench_mock:kv_evicted_tokens_total")


def extract(m: Metrics) -> ServerSample:
    slots = total(m, "llmbench_mock:slots")
    return ServerSample(
        running=total(m, "vllm:num_requests_running"),
        waiting=total(m, "vllm:num_requests_waiting"),
        kv_cache_usage=biggest(m, "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
        queue_time_sum_s=total(m, "vllm:request_queue_time_seconds_sum"),
        queue_time_count=total(m, "vllm:request_queue_time_seconds_count"),
        prefix_cache_queries=total(m, "vllm:prefix_cache_queries_total",
                                   "vllm:gpu_prefix_cache_queries_total"),
        prefix_cache_hits=total(m, "vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
        preemptions=total(m, "vllm:num_preemptions_total"),
        slots=slots or None,
        # the mock's KV budget (--kv-tokens) and its evictions; a vLLM server has neither
        kv_budget_tokens=total(m, "llmbench_mock:kv_budget_tokens") or None,
        kv_evicted_tokens_total=total(m, "llmbench_mock:kv_evicted_tokens_total"))


ADAPTER = MetricsAdapter("vllm", "vllm:", METRIC_NAMES, extract)
