"""The first wave's connections are opened before the clock starts (issue 28)."""

from __future__ import annotations

import asyncio

from tests.helpers.keepalive_server import KeepAliveServer

from llmbench.client.request import Client, RequestParams
from llmbench.client.target import make_target
from llmbench.load.session import Session
from llmbench.load.shapes.fixed import run_closed
from llmbench.workload import WorkloadSpec, build_workload, load_tokenizer


def _wave(url: str, users: int, transport: str) -> tuple[list, int]:
    async def go():
        wl = build_workload(WorkloadSpec(count=users, prompt_tokens=(8, 8),
                                         output_tokens=(3, 3)), load_tokenizer("approx"))
        async with Client(make_target(url, "m"), RequestParams(), max_connections=users + 8,
                          transport=transport) as c:
            s = Session(c, None)
            await run_closed(s, wl.conversations, users, users, None)
            opened = await c.preconnect(users)          # all there already: none more
            return list(s.records), opened
    return asyncio.run(go())


def test_the_first_wave_finds_its_connections_open():
    with KeepAliveServer(close_after_reply=False) as srv:
        recs, more = _wave(srv.url, 8, "fast")
    assert len(recs) == 8 and all(r.ok and r.retries == 0 for r in recs)
    assert srv.connections == 8 and more == 0        # one per user, opened before the wave
    # no connect inside any request: each went out on a connection opened before the wave (a
    # request that connected carries the connection's phase stamps, records/phases.py)
    assert [(r.conn_us, r.connect_us) for r in recs] == [(None, None)] * 8


def test_preconnect_is_bounded_by_the_pool_and_harmless_on_aiohttp():
    async def go(url):
        async with Client(make_target(url, "m"), RequestParams(), max_connections=3,
                          transport="fast") as c:
            a = await c.preconnect(10)
        async with Client(make_target(url, "m"), RequestParams(), transport="aiohttp") as c:
            b = await c.preconnect(10)
        return a, b
    with KeepAliveServer(close_after_reply=False) as srv:
        assert asyncio.run(go(srv.url)) == (3, 0)


def test_preconnect_to_nothing_listening_opens_nothing():
    async def go():
        async with Client(make_target("http://127.0.0.1:9/v1", "m"), RequestParams(),
                          transport="fast") as c:
            return await c.preconnect(4)
    assert asyncio.run(go()) == 0


def test_a_server_that_closes_preopened_connections_loses_no_request():
    with KeepAliveServer(close_after_reply=True) as srv:
        recs, _ = _wave(srv.url, 4, "fast")
    assert len(recs) == 4 and all(r.ok for r in recs)
