"""NOMYO router: /api/usage lists requests in flight per backend and model.

What its counters mean (its router.py, v0.7): ``usage_counts[endpoint][model]`` is raised when
``choose_endpoint`` reserves an endpoint for a request and lowered when the reply has been
streamed back, so it counts requests the router has handed to that backend and not finished:
running there or waiting in the backend's own queue (once every endpoint holds
``max_concurrent_connections``, NOMYO sends the next request to the least busy one anyway).
It is the router's in-flight count, not the backend's running count: behind NOMYO, 4 users
on a 2-slot llama.cpp read 4 while 2 ran and 2 waited. So it is recorded as ``in_flight``
(and per backend), never as ``running``. NOMYO names no backend in its replies."""

from __future__ import annotations

from typing import Any

from llmbench.servers.base import JsonAdapter, ServerSample


def extract(obj: dict[str, Any]) -> ServerSample:
    counts = obj.get("usage_counts") or {}
    backends = {}
    for endpoint, per_model in counts.items():
        if isinstance(per_model, dict):
            backends[endpoint] = sum(v for v in per_model.values() if isinstance(v, (int, float)))
        elif isinstance(per_model, (int, float)):
            backends[endpoint] = per_model
    return ServerSample(backends_in_flight=backends, in_flight=sum(backends.values()))


ADAPTER = JsonAdapter("nomyo", ("/api/usage",), lambda text, forced: "usage_counts" in text,
                      extract)
