"""The send-time log: one JSON line per request with the real send time of every event.

Times are ``time.perf_counter_ns()``: CLOCK_MONOTONIC on Linux, shared by every process on the
host, so a client in another process can compare its own arrival times with these. A request's
``arrival_ns`` is when its first bytes came in (arrival.py), ``handler_ns`` when its handler
started: the difference is the mock's own intake queue.

With ``llmbench mock --workers N`` every worker process appends to the same file. The file is
opened O_APPEND and written only in whole lines, one ``os.write`` per batch: on a local Linux
filesystem each such write lands at the end of the file in one piece, so the lines of different
workers never interleave mid-line. One file (rather than one per worker, merged when read) keeps
the log where the user asked for it, readable by ``tail -f`` and by every existing reader, and a
crash loses only the batch not yet written. (NFS does not honour O_APPEND across clients: keep
the log on a local disk.) Each line names its ``worker``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

FLUSH_LINES = 64                 # lines per write(): few system calls, little lost on a crash
FLUSH_BYTES = 1 << 18


class Recorder:
    def __init__(self, path: str | Path, prompts: bool = False, worker: int = 0) -> None:
        self.path = Path(path)
        self.prompts = prompts
        self.worker = worker
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self.count = 0

    def write(self, entry: dict[str, Any]) -> None:
        entry["worker"] = self.worker
        line = (json.dumps(entry, separators=(",", ":")) + "\n").encode()
        self._pending.append(line)
        self._pending_bytes += len(line)
        self.count += 1
        if len(self._pending) >= FLUSH_LINES or self._pending_bytes >= FLUSH_BYTES:
            self.flush()

    def flush(self) -> None:
        if not self._pending:
            return
        data = b"".join(self._pending)
        self._pending.clear()
        self._pending_bytes = 0
        # a regular file takes the whole buffer in one write (short writes only when the disk
        # is full); loop anyway so nothing is dropped silently
        view = memoryview(data)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]

    def close(self) -> None:
        if self._fd < 0:
            return
        self.flush()
        os.close(self._fd)
        self._fd = -1


def read_log(path: str | Path) -> list[dict[str, Any]]:
    """Every entry, from every worker (they share the file)."""
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]
