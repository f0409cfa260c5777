"""Connection reuse against servers that keep connections alive, or promise to and don't."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time

import pytest

from tests.helpers import ROOT
from tests.helpers.keepalive_server import KeepAliveServer

from llmbench.client.request import Client, RequestParams
from llmbench.records.record import Record
from llmbench.client.target import make_target

# every test here runs on both HTTP transports (conftest.transport)
pytestmark = pytest.mark.usefixtures("transport")


async def _users(url: str, users: int, turns: int) -> list[Record]:
    """``users`` virtual users sending ``turns`` requests back to back (no think time)."""
    recs: list[Record] = []
    async with Client(make_target(url, "m"), RequestParams()) as c:
        async def user(u: int) -> None:
            for t in range(turns):
                rec = Record(f"u{u}-{t}", scheduled=time.perf_counter())
                await c.send([{"role": "user", "content": "hi"}], 5, rec)
                recs.append(rec)
        await asyncio.gather(*(user(u) for u in range(users)))
    return recs


def test_a_server_that_closes_kept_alive_connections_loses_no_request():
    with KeepAliveServer(close_after_reply=True) as srv:
        recs = asyncio.run(_users(srv.url, users=2, turns=6))
    assert [r.error for r in recs if not r.ok] == []
    assert len(recs) == 12 and srv.replies == 12
    # requests that met a closed kept-alive connection were sent again, once each
    assert sum(r.retries for r in recs) == srv.dropped >= 4
    assert all(r.retries <= 1 for r in recs)


def test_connections_are_reused_where_the_server_allows_it():
    with KeepAliveServer(close_after_reply=False) as srv:
        recs = asyncio.run(_users(srv.url, users=2, turns=6))
    assert all(r.ok and r.retries == 0 for r in recs)
    assert srv.connections == 2          # one per user, kept for all six turns


def test_run_against_the_closing_server_counts_resends_in_the_run(tmp_path):
    with KeepAliveServer(close_after_reply=True) as srv:
        p = subprocess.run([sys.executable, "-m", "llmbench.cli", "run", "--url", srv.url, "--model", "m",
                            "--concurrency", "2", "--requests", "12", "--output-tokens", "5",
                            "--server-probe", "off", "--out", str(tmp_path)],
                           capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr
    run = json.loads(next(tmp_path.glob("*/run.json")).read_text())
    assert run["summary"]["completed"] == 12 and run["summary"]["failed"] == 0
    assert run["connection_resends"] >= 4
    assert "sent again on a new connection" in p.stdout
