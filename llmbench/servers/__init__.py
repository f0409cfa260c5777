"""Server adapters: one module per kind of server (detect, poll -> ServerSample), listed here.

Adding a scraper = a module with an ``ADAPTER`` plus one line in _MODULES. Auto-detection asks
them in this order, each path at most once (servers/scrape.py).
"""

from __future__ import annotations

from importlib import import_module

from llmbench.servers.base import Get, MetricsAdapter, Poller, ServerAdapter, ServerSample

__all__ = ["ADAPTERS", "KINDS", "Get", "MetricsAdapter", "Poller", "ServerAdapter",
           "ServerSample"]

# One line per server kind, in auto-detection order (the mock before vLLM: its page has both).
_MODULES = (
    "mock",         # llmbench's mock: vLLM-named metrics plus llmbench_mock:slots
    "vllm",         # /metrics vllm:*
    "sglang",       # /metrics sglang:*
    "tgi",          # /metrics tgi_*
    "nomyo",        # NOMYO router: /api/usage
    "llamacpp",     # /metrics llamacpp:* (with --metrics), else /props + /slots
    "lmstudio",     # LM Studio: /api/v0/models (its loaded models)
    "ollama",       # /api/version, then /api/ps
)
ADAPTERS: tuple[ServerAdapter, ...] = tuple(
    import_module(f".{m}", __package__).ADAPTER for m in _MODULES)
# --server-probe values
KINDS = ("auto", *(a.name for a in ADAPTERS), "off")
