"""A token's stamp is when it arrived, not when the event loop read it (client.rxstamp, issue
50 §1): against the mock over real loopback HTTP, with the mock's own send log as the truth,
the test stalls the client's event loop while the first token arrives, and the stamp must be
near the mock's send, not after the stall. The same with the read clock forced shows the test
can tell the two apart."""

from __future__ import annotations

import asyncio
import platform
import socket
import struct
import sys
import threading
import time

import pytest

from llmbench.client import rxstamp
from llmbench.client.request import Client, RequestParams
from llmbench.client.target import make_target
from llmbench.load.eventloop import run
from llmbench.mock_server import MockProcess, make_config
from llmbench.mock_server.recorder import read_log
from llmbench.records.record import Record

LINUX = sys.platform.startswith("linux") and platform.machine().lower() in rxstamp._MACHINES
pytestmark = pytest.mark.skipif(not LINUX, reason="kernel receive times: Linux on 64-bit only "
                                "(elsewhere every stamp is the read time, and says so)")

TTFT_MS = 300.0
# token 2 comes after the stall: one event in the read, stamped with its own arrival (events
# left unread together take the last one's)
STALL_S = 1.0           # the loop blocked this long from just after the send: token 1 arrives


def _stalled_request(url: str, loop: str) -> tuple[Record, float]:
    """One streamed request whose first token arrives while the loop is blocked: the record
    and the perf_counter time the stall ended (when the loop could first read)."""
    async def go() -> tuple[Record, float]:
        c = Client(make_target(url + "/v1", "mock"), RequestParams(), transport="fast")
        async with c:
            rec = Record("req-stall", time.perf_counter())
            task = asyncio.ensure_future(c.send([{"role": "user", "content": "hi"}], 3, rec))
            while rec.sent is None:             # until the request has left
                await asyncio.sleep(0.002)
            time.sleep(STALL_S)                 # the loop is blocked: nothing is read
            stall_end = time.perf_counter()
            await task
            return rec, stall_end
    return run(go(), loop)


def _one(tmp_path, monkeypatch, clock: str, loop: str = "auto"):
    monkeypatch.setenv(rxstamp.CLOCK_ENV, clock)
    log = tmp_path / "send.jsonl"
    cfg = make_config(None, ttft_ms=TTFT_MS, itl_ms=1500.0, tokens=2)
    with MockProcess(cfg, record=str(log)) as m:
        rec, stall_end = _stalled_request(m.url, loop)
    sent = {e["request_id"]: e for e in read_log(log)}[rec.request_id]
    first_send = sent["event_ns"][0] / 1e9          # CLOCK_MONOTONIC, as perf_counter
    assert rec.ok, rec.error
    assert first_send < stall_end - 0.2, (
        f"the mock sent the first token {first_send - stall_end:+.3f} s after the stall ended: "
        "it did not arrive during the stall, so this run cannot tell the clocks apart")
    return rec, first_send, stall_end


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_kernel_clock_stamps_arrival_not_read(tmp_path, monkeypatch, loop):
    assert rxstamp.supported(), "SO_TIMESTAMPING refused on this Linux machine"
    rec, first_send, stall_end = _one(tmp_path, monkeypatch, "auto", loop)
    stamp = rec.token_times[0]
    # the read came after the stall; the stamp is the arrival, a loopback hop after the send
    # (the conversion from the kernel's realtime stamp may differ by microseconds)
    assert stamp >= first_send - 0.001, (stamp, first_send)
    assert stamp - first_send < (stall_end - first_send) / 10, (
        f"stamped {1000 * (stamp - first_send):.1f} ms after the mock's send and "
        f"{1000 * (stall_end - stamp):.1f} ms before the loop could read: the read time")


def test_read_clock_is_late_by_the_stall(tmp_path, monkeypatch):
    """The counterpart: with the read clock forced the same stall shows in the stamp, so the
    test above fails if the kernel's time is not what is taken."""
    rec, first_send, stall_end = _one(tmp_path, monkeypatch, "read")
    assert rec.token_times[0] >= stall_end


def test_a_body_larger_than_the_socket_buffer_is_sent_whole(tmp_path, monkeypatch):
    """A long prompt does not fit the socket's send buffer in one send: the rest is written as
    the socket drains (rxstamp.StampedSocket.write), and the mock answers the whole of it."""
    monkeypatch.setenv(rxstamp.CLOCK_ENV, "auto")
    cfg = make_config(None, ttft_ms=10.0, itl_ms=1.0, tokens=3)
    prompt = "word " * 1_000_000                    # 5 MB

    async def go(url: str) -> Record:
        c = Client(make_target(url + "/v1", "mock"), RequestParams(), transport="fast")
        async with c:
            rec = Record("req-big", time.perf_counter())
            await c.send([{"role": "user", "content": prompt}], 3, rec)
            return rec
    with MockProcess(cfg) as m:
        rec = run(go(m.url))
    assert rec.ok, rec.error
    assert len(rec.token_times) == 3


def _reset_after(answer: bytes) -> tuple[int, "threading.Thread"]:
    """A server that reads the start of one request, sends ``answer`` and resets the
    connection (SO_LINGER 0), as tinyproxy answers a wrong password: the answer and the reset
    reach the client together."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)

    def serve() -> None:
        with srv:
            conn, _ = srv.accept()
            conn.recv(16)                           # the rest of the request stays unread
            conn.sendall(answer)
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()
    th = threading.Thread(target=serve, daemon=True)
    th.start()
    return srv.getsockname()[1], th


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_an_answer_that_comes_with_a_reset_ends_the_request(monkeypatch, loop):
    """uvloop drops a reader after one call on a socket error: the answer read in that call
    and the reset must still end the request at once (not at its first-token timeout)."""
    monkeypatch.setenv(rxstamp.CLOCK_ENV, "auto")
    body = b"<html>wrong password</html>" + b" " * 400
    port, th = _reset_after(b"HTTP/1.0 401 Unauthorized\r\nContent-Type: text/html\r\n"
                            b"Content-Length: %d\r\n\r\n%s" % (len(body) + 2000, body))

    async def go() -> Record:
        c = Client(make_target(f"http://127.0.0.1:{port}/v1", "m"), RequestParams(),
                   transport="fast")
        async with c:
            rec = Record("req-reset", time.perf_counter())
            await asyncio.wait_for(c.send([{"role": "user", "content": "hi " * 2000}], 3, rec),
                                   30)
            return rec
    t0 = time.perf_counter()
    rec = run(go(), loop)
    th.join(5)
    assert rec.status == 401 and "wrong password" in (rec.error or ""), rec.to_json()
    assert time.perf_counter() - t0 < 25
