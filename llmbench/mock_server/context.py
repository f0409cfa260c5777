"""What every API handler of one replica shares: its engine, the send-time log, and which
worker and replica it is (for the headers every reply carries)."""

from __future__ import annotations

import copy
from typing import Any

from .engine import Engine
from .recorder import Recorder
from .shapes import _now_iso


class Context:
    def __init__(self, engine: Engine, recorder: Recorder | None = None, worker: int = 0,
                 workers: int = 1, index: int = 0) -> None:
        self.engine = engine
        self.recorder = recorder
        self.started_at = _now_iso()
        self.worker = worker
        self.workers = workers      # worker processes on this port (llmbench mock --workers)
        self.index = index          # which replica (port) of the worker's this is
        self._worker_header = str(worker)
        # requests that go on after their client left (MockConfig.decode_after_close): kept
        # here so the loop does not drop them mid-generation
        self.background: set[Any] = set()

    def headers(self, queue_ms: float | None = None) -> dict[str, str]:
        # the worker process that served the request (0 when the mock has one)
        h = {"x-llmbench-replica": self.engine.replica, "x-llmbench-worker": self._worker_header}
        if queue_ms is not None:
            h["x-llmbench-queue-ms"] = f"{queue_ms:.3f}"
        return h

    def authorized(self, request: Any) -> bool:
        """The request carries the configured key (or none is configured)."""
        key = self.engine.config.api_key
        if not key:
            return True
        given = request.headers.get("authorization") or request.headers.get("x-api-key") or ""
        return (given[7:] if given.startswith("Bearer ") else given) == key

    def apply_config(self, changes: Any) -> None:
        """The settings, all or none (ValueError naming the first bad one)."""
        if not isinstance(changes, dict):
            raise ValueError("send a JSON object of settings")
        copy.deepcopy(self.engine.config).update(changes)       # tried on a copy first
        self.engine.config.update(changes)
        self.engine.config_changed()
