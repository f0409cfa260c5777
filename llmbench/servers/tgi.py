"""Hugging Face TGI: /metrics with tgi_* series (batch size is what runs, queue size what waits)."""

from __future__ import annotations

from llmbench.servers.base import Metrics, MetricsAdapter, ServerSample, total


def extract(m: Metrics) -> ServerSample:
    return ServerSample(running=total(m, "tgi_batch_current_size"), waiting=total(m, "tgi_queue_size"))


ADAPTER = MetricsAdapter("tgi", "tgi_", ("tgi_batch_current_size", "tgi_queue_size"), extract)
