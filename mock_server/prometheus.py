"""Prometheus text exposition for the mock, with vLLM's metric names."""

from __future__ import annotations

from .engine import Engine
from .histogram import Histogram

__all__ = ["Histogram", "render"]


def render(engine: Engine) -> str:
    s = engine.stats
    model = engine.config.models[0] if engine.config.models else "mock"
    labels = f'engine="0",model_name="{model}"'
    lines: list[str] = []

    def metric(name: str, kind: str, help_: str, value: float) -> None:
        lines.extend([f"# HELP {name} {help_}", f"# TYPE {name} {kind}", f"{name}{{{labels}}} {value}"])

    metric("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.",
           s.running)
    metric("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.",
           s.waiting)
    metric("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.",
           engine.kv_usage())
    metric("vllm:gpu_cache_usage_perc", "gauge", "GPU KV-cache usage (pre-0.10 name).",
           engine.kv_usage())
    metric("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.",
           s.prompt_tokens_total)
    metric("vllm:generation_tokens_total", "counter", "Number of generation tokens processed.",
           s.generation_tokens_total)
    metric("vllm:prefix_cache_queries_total", "counter",
           "Prefix cache queries, in terms of number of queried tokens.", s.cache_queries_total)
    metric("vllm:prefix_cache_hits_total", "counter",
           "Prefix cache hits, in terms of number of cached tokens.", s.cache_hits_total)
    metric("vllm:num_preemptions_total", "counter",
           "Cumulative number of preemptions from the engine.", s.preemptions_total)
    metric("llmbench_mock:kv_blocks_used", "gauge", "KV-cache blocks held by running requests.",
           s.kv_blocks)
    metric("llmbench_mock:kv_capacity_blocks", "gauge", "KV-cache capacity in blocks (0 = unlimited).",
           engine.kv_capacity_blocks())
    metric("llmbench_mock:rejected_total", "counter", "Requests rejected because the queue was full.",
           s.rejected_total)
    metric("llmbench_mock:slots", "gauge", "Configured parallel slots (0 = unlimited).",
           engine.config.parallel)
    lines += ["# HELP vllm:request_success_total Count of successfully processed requests.",
              "# TYPE vllm:request_success_total counter"]
    for reason, n in sorted(s.success_total.items()):
        lines.append(f'vllm:request_success_total{{{labels},finished_reason="{reason}"}} {n}')
    for name, hist, help_ in (
        ("vllm:time_to_first_token_seconds", engine.h_ttft, "Histogram of time to first token in seconds."),
        ("vllm:inter_token_latency_seconds", engine.h_itl, "Histogram of inter-token latency in seconds."),
        ("vllm:request_queue_time_seconds", engine.h_queue, "Histogram of time spent in WAITING phase for request."),
        ("vllm:e2e_request_latency_seconds", engine.h_e2e, "Histogram of e2e request latency in seconds."),
    ):
        lines += [f"# HELP {name} {help_}", f"# TYPE {name} histogram"]
        lines += hist.lines(name, labels)
    return "\n".join(lines) + "\n"
