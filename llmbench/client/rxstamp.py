"""A token's time is when its bytes reached this machine, not when the event loop read them.

Why (issue 50 §1): the fast transport stamps a read on entry to ``data_received``, and the loop
reads only between its turns; anything that holds a turn (1,024 users starting their next
request together, a busy machine descheduling the process) made every token that arrived
meanwhile late by that long (+123 ms at 1,024 lock-step streams). Linux stamps each TCP
segment as it is received (a software receive timestamp) and, with ``SO_TIMESTAMPING``
(``SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE``), hands the time of the last byte
a read returns to ``recvmsg`` as ancillary data (``SCM_TIMESTAMPING``). asyncio's and uvloop's
transports read with ``recv`` and drop it, so a plain TCP connection is read here instead: the
loop's ``add_reader`` on the socket, one ``recvmsg`` per readiness, and the bytes go to the
protocol's ``receive(t, data)`` with the kernel's time.

The kernel's time is CLOCK_REALTIME; records are on ``perf_counter`` (CLOCK_MONOTONIC). The two
differ by an offset that only a step of the realtime clock changes (NTP slews both alike), so
it is measured (``_Offset``: the monotonic clock read between two realtime reads, the closest
pair of a few) once a second and subtracted. Measured per read instead, a process preempted
between its two clock reads put the arrival that long too early (13 µs in 2,000 reads on a busy
machine). A converted time after the read or implausibly old (a step since the last
measurement) is measured again, and if it still is, the read time stands.

What stays late (docs/metrics.md): events left unread together take the time of the last
byte a read returns (reading promptly still matters: load.pacing); TLS (the ssl module reads
the socket itself), a CONNECT tunnel, the aiohttp transport and other platforms than Linux
stamp on read: ``clock_of`` says which clock a target's stamps come from
(client.request.stamp_clock).
"""

from __future__ import annotations

import asyncio
import os
import platform
import socket
import struct
import sys
import time
from typing import Any, Protocol

perf_counter = time.perf_counter
perf_counter_ns = time.perf_counter_ns
time_ns = time.time_ns

# asm-generic values (socket.h), the same on these 64-bit Linux machines; other architectures
# (sparc, parisc, alpha, mips) number them differently and 32-bit ones have a _NEW variant with
# another layout: those stamp on read
SO_TIMESTAMPING = 37
SCM_TIMESTAMPING = SO_TIMESTAMPING
SOF_TIMESTAMPING_RX_SOFTWARE = 1 << 3
SOF_TIMESTAMPING_SOFTWARE = 1 << 4
_MACHINES = ("x86_64", "amd64", "aarch64", "arm64", "riscv64", "ppc64le", "s390x")
# three struct timespec (software, deprecated, hardware); the software one first
_TS = struct.Struct("qq")
_unpack = _TS.unpack_from
_SOL_SOCKET = socket.SOL_SOCKET
ANC_BYTES = socket.CMSG_SPACE(3 * _TS.size) if hasattr(socket, "CMSG_SPACE") else 0
READ_BYTES = 65536          # as asyncio's and uvloop's transports read
# a converted arrival older than this is not a segment waiting in the queue but a realtime
# clock step since the offset was measured
MAX_AGE_S = 60.0
# how often the realtime - monotonic offset is measured again (a step is caught sooner: the
# arrival it makes implausible)
OFFSET_EVERY_S = 1.0
# how often uvloop's stamped sockets are looked at for an error its reader missed (_ErrorWatch)
ERROR_CHECK_S = 0.05

# The clocks a stamp can come from, as run.json's generator health names them
KERNEL = "kernel"           # the kernel's receive time of the read's last byte
READ = "read"               # perf_counter when the event loop read the bytes
CLOCK_ENV = "LLMBENCH_STAMP_CLOCK"   # auto | read: "read" forces the read time (to compare)

_supported: bool | None = None


def supported() -> bool:
    """Can this process take kernel receive times for TCP reads (probed once: Linux, a known
    64-bit machine, the option accepted, and not turned off by $LLMBENCH_STAMP_CLOCK)?"""
    global _supported
    if os.environ.get(CLOCK_ENV, "").strip().lower() == READ:
        return False
    if _supported is None:
        ok = (sys.platform.startswith("linux") and platform.machine().lower() in _MACHINES
              and ANC_BYTES > 0 and hasattr(socket.socket, "recvmsg"))
        if ok:
            try:
                with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                    _enable(s)
            except OSError:
                ok = False
        _supported = ok
    return _supported


def _enable(sock: socket.socket) -> None:
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPING,
                    SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE)


def clock_of(scheme: str, transport: str) -> str:
    """Which clock the stamps of a target's token events come from: KERNEL for plain TCP
    (http://, straight or through a forward proxy) through the fast transport where the
    platform gives receive times, else READ (https:// is TLS, through a proxy a tunnel)."""
    if transport == "fast" and scheme == "http" and supported():
        return KERNEL
    return READ


def late_where(clock: str) -> str:
    """Where a stamp on ``clock`` may still be late, for the generator's health."""
    if clock == KERNEL:
        return ("events left unread together take the last one's arrival time: late by at "
                "most the loop's lag (lag_max_ms)")
    return "each stamp is taken when the loop reads it: late by up to the loop's lag"


class _Offset:
    """CLOCK_REALTIME - CLOCK_MONOTONIC in ns, measured now and then (see the docstring)."""

    __slots__ = ("ns", "at")

    def __init__(self) -> None:
        self.ns = 0
        self.at = float("-inf")         # perf_counter of the last measurement

    def measure(self) -> None:
        best = None
        for _ in range(5):
            a = time_ns()
            m = perf_counter_ns()
            b = time_ns()
            if best is None or b - a < best[0]:
                best = (b - a, (a + b) // 2 - m)
        assert best is not None
        self.ns = best[1]
        self.at = perf_counter()

    def arrival(self, kernel_ns: int, now: float) -> float:
        """The perf_counter time of the kernel's realtime stamp ``kernel_ns``, read at
        ``now``: never after ``now``; ``now`` itself when the conversion is not plausible."""
        if now - self.at > OFFSET_EVERY_S:
            self.measure()
        t = (kernel_ns - self.ns) * 1e-9
        if now - MAX_AGE_S < t <= now:
            return t
        self.measure()                  # a realtime step since: measured again, once
        t = (kernel_ns - self.ns) * 1e-9
        if now - MAX_AGE_S < t:
            return min(t, now)          # a few ns after ``now``: the two reads' rounding
        return now


OFFSET = _Offset()


class _ErrorWatch:
    """The stamped sockets of one (uvloop) loop in an epoll set of their own with no events
    asked, so that it reports only errors: looked at every ERROR_CHECK_S while any is open,
    one syscall for all of them, where asking each socket after each read cost ~1 µs a read.
    A reset that came with a response's last bytes ends it within ERROR_CHECK_S."""

    _of: "dict[asyncio.AbstractEventLoop, _ErrorWatch]" = {}

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        import select
        self._loop = loop
        self._ep = select.epoll()
        self._err = select.EPOLLERR
        self._socks: dict[int, StampedSocket] = {}
        self._timer: asyncio.TimerHandle | None = None

    @classmethod
    def of(cls, loop: asyncio.AbstractEventLoop) -> "_ErrorWatch":
        w = cls._of.get(loop)
        if w is None:
            w = cls._of[loop] = cls(loop)
        return w

    def add(self, s: "StampedSocket") -> None:
        self._ep.register(s._fd, 0)
        self._socks[s._fd] = s
        if self._timer is None:
            self._timer = self._loop.call_later(ERROR_CHECK_S, self._check)

    def discard(self, s: "StampedSocket") -> None:
        if self._socks.get(s._fd) is s:
            del self._socks[s._fd]
            if not self._ep.closed:
                self._ep.unregister(s._fd)
        if not self._socks and not self._ep.closed:
            self._close()

    def _close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._ep.close()
        if self._of.get(self._loop) is self:
            del self._of[self._loop]

    def _check(self) -> None:
        self._timer = None
        if self._loop.is_closed():
            self._close()
            return
        for fd, events in self._ep.poll(0):
            s = self._socks.get(fd)
            if s is not None and events & self._err:
                s.failed()
        if self._socks and self._timer is None and not self._ep.closed:
            self._timer = self._loop.call_later(ERROR_CHECK_S, self._check)


class Stamped(Protocol):
    """What the socket reader feeds: the protocol's own entry points."""

    def connection_made(self, transport: Any) -> None: ...

    def receive(self, t: float, data: bytes) -> None: ...

    def connection_lost(self, exc: Exception | None) -> None: ...


class StampedSocket:
    """A plain TCP connection read with ``recvmsg`` (the kernel's receive time of each read)
    and written with ``send``: the few transport methods fasthttp._Conn uses (write, close,
    abort, is_closing), with asyncio's order of callbacks (connection_lost once, soon after the
    end, never inside a write)."""

    __slots__ = ("_sock", "_fd", "_loop", "_proto", "_wbuf", "_closing", "_done", "_watch")

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket,
                 proto: Stamped) -> None:
        """``sock``: connected, non-blocking; the receive timestamps are switched on here (an
        OSError if the kernel refuses: the caller falls back to asyncio's transport)."""
        _enable(sock)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)   # as asyncio does
        self._sock, self._fd, self._loop, self._proto = sock, sock.fileno(), loop, proto
        self._wbuf = bytearray()
        self._closing = self._done = False
        # uvloop (libuv) runs a reader once on a socket error (a reset) and then drops it
        # without a word: a reset that came with the last data would leave the response
        # waiting for its timeout (tinyproxy answers a wrong password with 530 bytes and a
        # reset). There an _ErrorWatch finds such sockets; asyncio's selector loop calls the
        # reader again, which finds the error itself.
        self._watch = (None if isinstance(loop, asyncio.selector_events.BaseSelectorEventLoop)
                       else _ErrorWatch.of(loop))
        if self._watch is not None:
            self._watch.add(self)
        proto.connection_made(self)
        loop.add_reader(self._fd, self._read)

    def _read(self) -> None:
        try:
            data, anc, _flags, _addr = self._sock.recvmsg(READ_BYTES, ANC_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._end(exc)
            return
        if not data:                    # the server closed its side: the end of this one
            self._end(None)
            return
        t = now = perf_counter()
        if anc:
            level, kind, ts = anc[0]
            if kind == SCM_TIMESTAMPING and level == _SOL_SOCKET and len(ts) >= 16:
                sec, nsec = _unpack(ts)
                kns = sec * 1_000_000_000 + nsec
                off = OFFSET                # OFFSET.arrival's usual case, inline (per read)
                t = (kns - off.ns) * 1e-9
                if not (now - off.at <= OFFSET_EVERY_S and now - MAX_AGE_S < t <= now):
                    t = off.arrival(kns, now)
        self._proto.receive(t, data)

    def failed(self) -> None:
        """The socket has an error (_ErrorWatch): the rest read, the connection ended."""
        if not self._done:
            err = self._sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            self._rest(OSError(err, os.strerror(err)) if err else ConnectionResetError())

    def _rest(self, exc: OSError) -> None:
        """The socket failed: what is still queued is read (stamped on read: the last bytes
        of a failed connection), then the connection ends with ``exc``."""
        while not self._done:
            try:
                data = self._sock.recv(READ_BYTES)
            except OSError:
                break
            if not data:
                break
            self._proto.receive(perf_counter(), data)
        self._end(exc)

    # -- the transport methods _Conn uses ---------------------------------------------------

    def write(self, data: bytes) -> None:
        if self._closing or self._done:
            return
        if not self._wbuf:
            try:
                n = self._sock.send(data)
            except (BlockingIOError, InterruptedError):
                n = 0
            except OSError as exc:
                self._end(exc)
                return
            if n == len(data):
                return
            data = data[n:]
            self._loop.add_writer(self._fd, self._write)
        self._wbuf += data

    def _write(self) -> None:
        try:
            n = self._sock.send(self._wbuf)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._end(exc)
            return
        del self._wbuf[:n]
        if not self._wbuf:
            self._loop.remove_writer(self._fd)
            if self._closing:
                self._end(None)

    def is_closing(self) -> bool:
        return self._closing or self._done

    def close(self) -> None:
        """Close once what is written has gone (asyncio's close)."""
        if self._closing or self._done:
            return
        self._closing = True
        self._loop.remove_reader(self._fd)
        if not self._wbuf:
            self._end(None)

    def abort(self) -> None:
        self._end(None)

    def _end(self, exc: Exception | None) -> None:
        if self._done:
            return
        self._done = True
        loop = self._loop
        if self._watch is not None:
            self._watch.discard(self)
        loop.remove_reader(self._fd)
        if self._wbuf:
            self._wbuf.clear()
            loop.remove_writer(self._fd)
        self._sock.close()
        loop.call_soon(self._proto.connection_lost, exc)
