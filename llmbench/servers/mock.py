"""llmbench's own mock: vLLM-named metrics plus llmbench_mock:slots (checked before vLLM)."""

from __future__ import annotations

from llmbench.servers.base import MetricsAdapter
from llmbench.servers.vllm import METRIC_NAMES, extract

ADAPTER = MetricsAdapter("mock", "llmbench_mock:", METRIC_NAMES, extract)
