"""When a request arrived: the kernel's receive timestamp of its first bytes.

The mock's handler runs once its event loop gets round to the connection, after the other
requests read in the same wake-up: with 128 lock-step streams on 2 cores that was up to 28 ms
after the bytes were in (llmbench's own send delay was under 1 ms), and a stamp taken in the
handler counted that delay in the server's TTFT as if the client had been late. So the send-time
log and /metrics measure from the kernel's software receive timestamp (SO_TIMESTAMPING, which
Linux gives TCP sockets too: when the segment was queued to the socket), moved onto the
perf_counter (CLOCK_MONOTONIC) clock. Where there is none (another OS, or an event loop that
reads the socket itself, such as uvloop), the stamp is when the bytes reached the connection's
protocol, still before the handler.
"""

from __future__ import annotations

import socket
import struct
import time
from contextlib import suppress
from time import perf_counter_ns
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

SO_TIMESTAMPING = getattr(socket, "SO_TIMESTAMPING", 37)      # Linux value; Python lacks the name
SCM_TIMESTAMPING = SO_TIMESTAMPING
_RX_SOFTWARE = (1 << 3) | (1 << 4)     # SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE
_CMSG_SPACE = 64


class StampedConnection(socket.socket):
    """An accepted connection whose reads keep the kernel's receive time of what they returned
    (``rx_ns``, perf_counter nanoseconds; 0 when the kernel gave none). asyncio's selector
    transports read with ``recv``/``recv_into``, so those two are the ones replaced."""

    __slots__ = ("rx_ns",)

    def _stamp(self, ancdata: list[tuple[int, int, bytes]]) -> None:
        for level, kind, data in ancdata:
            if level == socket.SOL_SOCKET and kind == SCM_TIMESTAMPING and len(data) >= 16:
                sec, nsec = struct.unpack_from("qq", data)
                if sec or nsec:
                    # CLOCK_REALTIME -> CLOCK_MONOTONIC: both read now, so the offset is good to
                    # about a microsecond
                    self.rx_ns = sec * 1_000_000_000 + nsec - (time.time_ns() - perf_counter_ns())
                    return
        self.rx_ns = 0

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        data, anc, _, _ = self.recvmsg(bufsize, _CMSG_SPACE, flags)
        self._stamp(anc)
        return data

    def recv_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> int:
        view = memoryview(buffer)
        n, anc, _, _ = self.recvmsg_into([view[:nbytes] if nbytes else view], _CMSG_SPACE, flags)
        self._stamp(anc)
        return n


class StampingListener(socket.socket):
    """A listening socket whose connections are ``StampedConnection``s, receive timestamps on."""

    def accept(self) -> tuple[socket.socket, Any]:
        fd, addr = self._accept()         # type: ignore[attr-defined]
        conn = StampedConnection(self.family, self.type, self.proto, fileno=fd)
        conn.rx_ns = 0
        with suppress(OSError):  # no kernel stamps: the protocol's stamp stands in
            conn.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPING, _RX_SOFTWARE)
        if socket.getdefaulttimeout() is None and self.gettimeout():
            conn.setblocking(True)          # what socket.accept does
        return conn, addr


def stamping_listener(sock: socket.socket) -> socket.socket:
    """The same bound socket as a ``StampingListener`` (``sock`` is consumed)."""
    blocking = sock.getblocking()
    out = StampingListener(sock.family, sock.type, sock.proto, fileno=sock.detach())
    out.setblocking(blocking)
    return out


class ArrivalStampingHandler(RequestHandler):
    """aiohttp's connection protocol, stamping each request's arrival (``arrival_ns``) when its
    first bytes come in: the kernel's receive time where the socket has one, else now
    (routes._arrival_done clears it for the connection's next request)."""

    __slots__ = ("arrival_ns", "_conn")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.arrival_ns = 0
        self._conn: Any = None

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        wrapped = transport.get_extra_info("socket")
        conn = getattr(wrapped, "_sock", None)     # asyncio's TransportSocket holds the real one
        self._conn = conn if isinstance(conn, StampedConnection) else None

    def data_received(self, data: bytes) -> None:
        if not self.arrival_ns:
            now = perf_counter_ns()
            rx = self._conn.rx_ns if self._conn is not None else 0
            self.arrival_ns = rx if 0 < rx <= now else now
        super().data_received(data)


class _StampingServer(web.Server):
    def __call__(self) -> RequestHandler:
        return ArrivalStampingHandler(self, loop=self._loop, **self._kwargs)


def stamp_arrivals(runner: web.AppRunner) -> None:
    """After ``runner.setup()``: the runner's connections stamp their requests' arrival."""
    assert runner.server is not None
    runner.server.__class__ = _StampingServer
