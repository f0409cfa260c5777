"""Requests sent one after another on one client, for the tests that read their phases
(tests/integration/test_phases.py, test_otlp_thread.py; a test file is never imported by another)."""

from __future__ import annotations

import time

from llmbench.client.netconfig import NetOptions
from llmbench.client.request import Client, RequestParams, Timeouts
from llmbench.client.target import make_target
from llmbench.records.record import Record


async def send_many(url: str, n: int, net: NetOptions | None = None) -> list[Record]:
    """``n`` requests one after another on one client: the first opens the connection, the
    others reuse it."""
    target = make_target(url, "mock", net=net)
    t = Timeouts(connect_s=10, first_token_s=10, idle_s=10, total_s=30)
    out = []
    async with Client(target, RequestParams(), t) as c:
        for i in range(n):
            rec = Record(f"p-{i}", scheduled=time.perf_counter())
            await c.send([{"role": "user", "content": "hello"}], 4, rec)
            out.append(rec)
    return out
