"""The send-time log: one JSON line per request with the real send time of every event.

Times are ``time.perf_counter_ns()``: CLOCK_MONOTONIC on Linux, shared by every process on the
host, so a client in another process can compare its own arrival times with these.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class Recorder:
    def __init__(self, path: str | Path, prompts: bool = False) -> None:
        self.path = Path(path)
        self.prompts = prompts
        self._fh = open(self.path, "a", encoding="utf-8", buffering=1 << 16)
        self.count = 0

    def write(self, entry: dict[str, Any]) -> None:
        self._fh.write(json.dumps(entry, separators=(",", ":")) + "\n")
        self.count += 1
        if self.count % 64 == 0:
            self._fh.flush()

    def close(self) -> None:
        self._fh.flush()
        self._fh.close()


def read_log(path: str | Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]
