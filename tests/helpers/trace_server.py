"""A loopback server that logs when each replayed request arrived, for the --trace tests
(tests/e2e/test_trace.py, tests/integration/test_trace_api.py)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.helpers import CHAT_ROLE, RawServer, chat_token, http_head

REPLY = http_head() + CHAT_ROLE + chat_token("ok") + b"data: [DONE]\n\n"


class ArrivalServer(RawServer):
    """Answers every chat request at once and logs when each arrived (its body read)."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.arrivals: list[float] = []
        super().__init__(self._script)
        self.delay_s = delay_s

    def _script(self, i: int):
        self.arrivals.append(time.perf_counter())
        return [(self.delay_s, REPLY)]

    def trace_requests(self) -> list[tuple[float, dict]]:
        """(arrival, body) of the replayed requests (the preflight's "Hi" left out)."""
        out = []
        for t, raw in zip(self.arrivals, self.requests):
            head, _, data = raw.partition(b"\r\n\r\n")
            if not head.startswith(b"POST") or not data:
                continue            # the CLI's probes of the server
            body = json.loads(data)
            if body["messages"][-1]["content"] != "Hi":
                out.append((t, body))
        return out


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def run_json(out: Path) -> dict:
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    return json.loads((run / "run.json").read_text())
