"""llmbench's own mock: vLLM-named metrics plus llmbench_mock:slots (checked before vLLM)."""

from __future__ import annotations

from .base import MetricsAdapter
from .vllm import METRIC_NAMES, extract

ADAPTER = MetricsAdapter("mock", "llmbench_mock:", METRIC_NAMES, extract)
