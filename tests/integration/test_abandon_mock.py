"""Users who give up (--abandon) against the mock over loopback, on both transports: the client
closes the connection (before a first token, or mid-stream), the record is its own outcome
("cancelled"), the mock counts every connection it saw closed mid-request and frees the slot;
a mock that goes on decoding for a closed connection keeps its slot (the finding the release
check reports)."""

from __future__ import annotations

import asyncio
import time

import pytest

from llmbench.client.abandon import Abandon
from llmbench.client.request import Client, RequestParams, Timeouts
from llmbench.client.target import make_target
from llmbench.records.record import Record
from tests.helpers import busy

pytestmark = pytest.mark.usefixtures("transport")


async def _send_all(url: str, n: int, abandon: Abandon | None, max_tokens: int = 40,
                    preflight: bool = False) -> list[Record]:
    target = make_target(url, "mock")
    async with Client(target, RequestParams(stream=True, abandon=abandon), Timeouts()) as c:
        async def one(i: int) -> Record:
            rec = Record(f"t-{i}", scheduled=time.perf_counter())
            await c.send([{"role": "user", "content": f"hello {i}"}], max_tokens, rec,
                         prompt_tokens_client=2, abandon=not preflight)
            return rec
        return list(await asyncio.gather(*(one(i) for i in range(n))))


def _wait_for(cond, timeout_s: float = 10.0) -> bool:
    """``cond`` holds within ``timeout_s`` (seconds on a quiet machine, stretched by the
    machine's measured slowdown: tests/helpers/busy.py)."""
    return busy.wait_for(cond, timeout_s)


def _closed(m) -> int:
    return sum(e.stats.closed_by_client_total for e in m.engines)


def _held(m) -> int:
    return sum(e.stats.running + e.stats.waiting for e in m.engines)


def test_users_who_wait_too_long_close_and_the_mock_counts_and_frees_them(mock_factory):
    # 2 slots, 6 users at once: the first two are answered after 50 ms of prefill each and
    # stream N tokens at 50 ms (N/20 s, longer on a busy machine, never shorter); the four
    # queued behind them see no first token within their patience and leave. The patience, 1 s
    # on a quiet machine, is also what the six requests have to reach the mock's queue and the
    # first two to see a token: the mock, the client and this test share one process, so the
    # patience is 1 s times the machine's measured slowdown (CI once counted 1 of 4 with 0.3 s),
    # and the two streams last a second longer than it
    patience_s = round(min(busy.slowdown(), 8.0), 1)
    m = mock_factory(ttft_ms=50, itl_ms=50, tokens=200, parallel=2)
    recs = asyncio.run(_send_all(m.url + "/v1", 6, Abandon(after_s=patience_s),
                                 max_tokens=max(40, int((patience_s + 1) * 20))))
    cancelled = [r for r in recs if r.error_kind == "cancelled"]
    assert len(cancelled) == 4, (patience_s, [(r.error_kind, r.error) for r in recs])
    assert all(not r.ok and not r.token_times
               and f"no first token within {patience_s:g} s" in r.error
               for r in cancelled), [r.error for r in cancelled]
    assert sum(r.ok for r in recs) == 2
    # the mock saw exactly those connections closed, and let go of them
    assert _wait_for(lambda: _closed(m) == 4), _closed(m)
    assert _wait_for(lambda: _held(m) == 0), _held(m)


def test_a_share_stopped_mid_stream_is_counted_by_the_mock(mock_factory):
    m = mock_factory(ttft_ms=20, itl_ms=10, tokens=200, parallel=8)
    recs = asyncio.run(_send_all(m.url + "/v1", 8, Abandon(share=1.0, after_tokens=3), 40))
    assert [r.error_kind for r in recs] == ["cancelled"] * 8
    assert all(len(r.token_times) == 3 and r.ttft is not None for r in recs)
    assert all("stopped the reply after 3 token events" in r.error for r in recs)
    assert _wait_for(lambda: _closed(m) == 8), _closed(m)
    assert _wait_for(lambda: _held(m) == 0), _held(m)
    assert _closed(m) == 8
    # the slots are free: a request after them is served at once. Had the mock kept decoding
    # for the closed connections, all 8 slots would stay taken for the ~37 tokens left of
    # each reply, and the request would queue (the mock's own queue time, which it sends)
    # that long at the pace its gaps were measured at here, a busy machine's included
    gap_ms = 1000.0 * sorted(g for r in recs for g in r.itls)[len(recs)]
    after = asyncio.run(_send_all(m.url + "/v1", 1, None, 5))
    assert after[0].ok and after[0].server_queue_ms is not None, after[0]
    assert after[0].server_queue_ms < 0.5 * 37 * gap_ms, (after[0].server_queue_ms, gap_ms)


def test_the_preflight_never_gives_up(mock_factory):
    m = mock_factory(ttft_ms=200, itl_ms=5, tokens=10)
    recs = asyncio.run(_send_all(m.url + "/v1", 1, Abandon(after_s=0.05), 3, preflight=True))
    assert recs[0].ok and _closed(m) == 0


def test_a_mock_that_decodes_for_closed_connections_keeps_the_slot(mock_factory):
    # decode_after_close: the server goes on with a request whose client left, as a server
    # that does not watch its connections does; its running count stays up after the cancel
    m = mock_factory(ttft_ms=20, itl_ms=50, tokens=400, parallel=4, decode_after_close=True)
    recs = asyncio.run(_send_all(m.url + "/v1", 2, Abandon(share=1.0, after_tokens=2), 40))
    assert [r.error_kind for r in recs] == ["cancelled"] * 2
    assert _wait_for(lambda: _closed(m) == 2), _closed(m)
    # 40 tokens at 50 ms: the slots stay taken for about 2 s after the users left
    time.sleep(0.3)
    assert _held(m) == 2
    assert _wait_for(lambda: _held(m) == 0, 10.0)
    assert _closed(m) == 2          # each closed connection counted once, not again at its end
