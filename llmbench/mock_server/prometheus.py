"""Prometheus text exposition for the mock, with vLLM's metric names.

One series per engine, labelled ``engine="<i>"``, the way vLLM's data-parallel API server exposes
its engines: with ``llmbench mock --workers N`` any worker answers /metrics with every worker's
series (gathered from its peers), so a scraper that sums over label sets (as llmbench's probe
does, and as a Prometheus ``sum by (model_name)`` does) sees the whole server, and one that looks
at ``engine="0"`` alone sees one worker, named as such.
"""

from __future__ import annotations

from typing import Any

from .engine import Engine
from .histogram import Histogram

__all__ = ["Histogram", "render_many", "snapshot"]

_HISTOGRAMS = (
    ("vllm:time_to_first_token_seconds", "h_ttft", "Histogram of time to first token in seconds."),
    ("vllm:inter_token_latency_seconds", "h_itl", "Histogram of inter-token latency in seconds."),
    ("vllm:request_queue_time_seconds", "h_queue",
     "Histogram of time spent in WAITING phase for request."),
    ("vllm:e2e_request_latency_seconds", "h_e2e", "Histogram of e2e request latency in seconds."),
)


def snapshot(engine: Engine) -> dict[str, Any]:
    """What /metrics shows of one engine, as plain JSON (it crosses processes)."""
    s = engine.stats
    snap: dict[str, Any] = {
        "model": engine.config.models[0] if engine.config.models else "mock",
        "running": s.running, "waiting": s.waiting, "kv_usage": engine.kv_usage(),
        "prompt_tokens_total": s.prompt_tokens_total,
        "generation_tokens_total": s.generation_tokens_total,
        "cache_queries_total": s.cache_queries_total, "cache_hits_total": s.cache_hits_total,
        "preemptions_total": s.preemptions_total, "kv_blocks": s.kv_blocks,
        "kv_capacity_blocks": engine.kv_capacity_blocks(), "rejected_total": s.rejected_total,
        "slots": engine.config.parallel, "success_total": dict(s.success_total),
        "closed_by_client_total": s.closed_by_client_total,
        "kv_budget_tokens": engine.config.kv_tokens,
        "kv_cached_tokens": engine.kv.tokens if engine.kv is not None else 0,
        "kv_evicted_tokens_total": (engine.kv.evicted_total * engine.kv.block
                                    if engine.kv is not None else 0)}
    for _name, attr, _help in _HISTOGRAMS:
        h: Histogram = getattr(engine, attr)
        snap[attr] = {"bounds": h.bounds, "counts": h.counts, "total": h.total, "count": h.count}
    return snap


def render_many(engines: list[tuple[str, dict[str, Any]]]) -> str:
    """One exposition: each metric family once, one series per (engine label, snapshot)."""
    lines: list[str] = []

    def labels(label: str, snap: dict[str, Any]) -> str:
        return f'engine="{label}",model_name="{snap["model"]}"'

    def metric(name: str, kind: str, help_: str, key: str) -> None:
        lines.extend([f"# HELP {name} {help_}", f"# TYPE {name} {kind}"])
        for label, snap in engines:
            lines.append(f"{name}{{{labels(label, snap)}}} {snap[key]}")

    metric("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.",
           "running")
    metric("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.",
           "waiting")
    metric("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.",
           "kv_usage")
    metric("vllm:gpu_cache_usage_perc", "gauge", "GPU KV-cache usage (pre-0.10 name).", "kv_usage")
    metric("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.",
           "prompt_tokens_total")
    metric("vllm:generation_tokens_total", "counter", "Number of generation tokens processed.",
           "generation_tokens_total")
    metric("vllm:prefix_cache_queries_total", "counter",
           "Prefix cache queries, in terms of number of queried tokens.", "cache_queries_total")
    metric("vllm:prefix_cache_hits_total", "counter",
           "Prefix cache hits, in terms of number of cached tokens.", "cache_hits_total")
    metric("vllm:num_preemptions_total", "counter",
           "Cumulative number of preemptions from the engine.", "preemptions_total")
    metric("llmbench_mock:kv_blocks_used", "gauge", "KV-cache blocks held by running requests.",
           "kv_blocks")
    metric("llmbench_mock:kv_capacity_blocks", "gauge",
           "KV-cache capacity in blocks (0 = unlimited).", "kv_capacity_blocks")
    metric("llmbench_mock:rejected_total", "counter",
           "Requests rejected because the queue was full.", "rejected_total")
    metric("llmbench_mock:slots", "gauge", "Configured parallel slots (0 = unlimited).", "slots")
    metric("llmbench_mock:requests_closed_by_client_total", "counter",
           "Generation requests whose client closed the connection before the reply ended.",
           "closed_by_client_total")
    if any(snap.get("kv_budget_tokens") for _, snap in engines):
        metric("llmbench_mock:kv_budget_tokens", "gauge",
               "KV budget shared by all sessions, in tokens (--kv-tokens).", "kv_budget_tokens")
        metric("llmbench_mock:kv_cached_tokens", "gauge",
               "Tokens whose KV the budget holds: running prompts and cached prefixes.",
               "kv_cached_tokens")
        metric("llmbench_mock:kv_evicted_tokens_total", "counter",
               "Cached prefix tokens evicted to fit the KV budget.", "kv_evicted_tokens_total")
    lines += ["# HELP vllm:request_success_total Count of successfully processed requests.",
              "# TYPE vllm:request_success_total counter"]
    for label, snap in engines:
        for reason, n in sorted(snap["success_total"].items()):
            lines.append(f'vllm:request_success_total{{{labels(label, snap)},'
                         f'finished_reason="{reason}"}} {n}')
    for name, attr, help_ in _HISTOGRAMS:
        lines += [f"# HELP {name} {help_}", f"# TYPE {name} histogram"]
        for label, snap in engines:
            h = Histogram(snap[attr]["bounds"])
            h.counts, h.total, h.count = snap[attr]["counts"], snap[attr]["total"], snap[attr]["count"]
            lines += h.lines(name, labels(label, snap))
    return "\n".join(lines) + "\n"
