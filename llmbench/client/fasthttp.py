"""A lean HTTP/1.1 client for one thing: llmbench's POST and its (streamed) reply.

Why it exists: at 128 streams aiohttp's request building was most of the CPU of starting a
request, and its StreamReader plus one task wake-up per received chunk most of the CPU of a
token event (issue 12; scripts/bench_client_cpu.py --transport). Here the request is bytes
built once per request and handed to the socket in one ``transport.write``; the response is
parsed as it is read (status line, headers; chunked, Content-Length and read-until-close
bodies) and each received chunk goes, with its arrival time (client.rxstamp: the kernel's or
the read's), straight to the pure StreamDecoder. The request's task sleeps until the response
is over: the watchdog (request._Watchdog) keeps time with its own timer, and the
protocol moves its deadlines (``dog.last``, ``dog.first_token``) as events arrive.

What a response's status and headers mean is the client's ``on_head``, and the way to the
server netconfig's: the same for both transports (request.py's docstring). Errors are
exceptions at this seam only, classified once by the client: ``ServerDisconnected`` (the
connection ended before a status line: a stale kept-alive connection, sent again once),
``ResponseCut`` (ended mid-body), ``BadResponse`` (not HTTP), and the OS's own connect errors.
Both transports also read heads whose lines end in a bare LF, take a head over MAX_HEAD_BYTES
for not HTTP however it arrives, and decompress gzip/deflate error bodies (``body_text``).

Not covered (the aiohttp transport is used, see request.choose_transport): anything but
http:// and https:// URLs.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
import time
from collections import deque
from typing import Any, Callable, Protocol
from urllib.parse import quote, urlsplit

from llmbench.version import __version__
from llmbench.client import rxstamp
from llmbench.client.netconfig import Net, ProxyError
from llmbench.client.decoder import ENDED, EVENTS, FAILED, NOTHING, WHOLE, StreamDecoder, decode_whole
from llmbench.records.definitions import offset_us
from llmbench.records.trace import traceparent
from llmbench.records.ids import header_id
from llmbench.records.record import Record
from llmbench.wire.format import WireFormat

perf_counter = time.perf_counter

# How the client wants a response body read (its on_head callback says, from status/headers)
STREAM = 0          # token events: each chunk to the stream decoder
WHOLE_BODY = 1      # one JSON document (a non-streamed reply)
SOME = 2            # an error or HTML page: the first ERROR_BODY_READ_BYTES, then hang up
FOLLOW = 3          # a redirect the client may follow: read like SOME, then say where it points

MAX_HEAD_BYTES = 65536          # a status line and headers longer than this are not HTTP
# (both transports: aiohttp's per-line limits are set to it too, from its 8190 bytes, which
# refused a 10 KB header the fast transport read)
MAX_CHUNK_LINE_BYTES = 4096     # a chunk-size line (with extensions) longer than this is not HTTP
# How much of an error or HTML body is read: the record keeps 200 characters, and a server that
# answers 100 MB of error must not cost 100 MB per request in flight.
ERROR_BODY_READ_BYTES = 4096
# After the end marker ([DONE], done:true) the request is over; the rest of the response (the
# chunked terminator) is read for at most this long so the connection can be reused. A server
# that keeps the stream open after its end marker only loses that connection.
DRAIN_AFTER_END_S = 0.5
# A read stamped less than this after the previous one is taken for part of a burst (the
# reads of one poll come microseconds apart, ~10 µs with the parse of the one before): it is
# queued and parsed once the burst's reads are all stamped (_Conn.data_received)
BURST_S = 50e-6
# idle kept-alive connections older than this are closed rather than reused (aiohttp: 15 s)
KEEPALIVE_S = 15.0

# connection phases
_IDLE, _HEAD, _BODY, _DRAIN = 0, 1, 2, 3
# chunked-body parser states
_SIZE, _DATA, _DATA_END, _TRAILER = 0, 1, 2, 3


class ServerDisconnected(ConnectionResetError):
    """The connection ended before the response's status line arrived."""


class ResponseCut(Exception):
    """The connection ended before the response's body did."""


class BadResponse(Exception):
    """What the server sent is not an HTTP/1.x response."""


class Watchdog(Protocol):
    """What the protocol touches of request._Watchdog (typed here: request.py imports this)."""
    last: float
    got_token: bool
    stopped: bool
    stop_after: int | None          # --abandon: token events after which the user stops

    def first_token(self) -> None: ...

    def enough(self) -> None: ...

    def stop(self) -> None: ...

    def deadline(self) -> float: ...

    def expire(self) -> bool: ...


class Transport(Protocol):
    """The seam between Client.send and an HTTP stack: one request, its response into ``rec``.

    Fills rec.sent, rec.status (through on_head) and whatever the body says; returns when the
    request is over: the Location of a redirect on_head said to FOLLOW, else None; raises only
    for the connection (classified by the client). ``fresh``: use a new connection (the resend
    after a stale kept-alive one). ``path``: the path and query to post to instead of the
    target's (a followed same-origin redirect)."""

    async def exchange(self, stream: bool, body: bytes, rec: Record, dog: Watchdog,
                       texts: list[str], fresh: bool,
                       path: str | None = None) -> str | None: ...

    async def aclose(self) -> None: ...


OnHead = Callable[[int, Any, Record], int]


class TransportFactory(Protocol):
    """What ``Client(transport=...)`` takes: a callable that makes the client's Transport (a
    transport class such as FastTransport, or mock_transport.MockTransport(handler)). The
    Transport it returns may have a ``clock`` (a callable giving seconds): the client then keeps
    its times on that clock and arms no timer, the transport moving the deadlines itself."""

    def __call__(self, urls: dict[bool, str], headers: dict[str, str], fmt: WireFormat,
                 on_head: OnHead, max_connections: int, connect_s: float,
                 stamp_sent: bool = True, net: Net | None = None) -> Transport: ...


def decoded(raw: bytes, encoding: str, limit: int = 0) -> bytes:
    """``raw`` decompressed when gzip- or deflate-encoded (a server or proxy that ignored
    ``accept-encoding: identity``), at most ``limit`` bytes (0: all); a body cut short by the
    read limit yields what it holds. Unchanged when not encoded or not decodable."""
    enc = encoding.strip().lower()
    if not raw or enc in ("", "identity"):
        return raw
    import zlib
    # 47: a gzip or zlib header, told apart by zlib; deflate is zlib-wrapped, rarely raw (-15)
    for wbits in ((47,) if enc in ("gzip", "x-gzip") else (47, -15) if enc == "deflate" else ()):
        try:
            return zlib.decompressobj(wbits).decompress(raw, limit)
        except zlib.error:
            continue
    return raw


def body_text(raw: bytes, encoding: str) -> str:
    """The start of an error or HTML body as text for the record: decompressed first, or
    named when it cannot be (brotli), never shown as binary."""
    data = decoded(raw, encoding, ERROR_BODY_READ_BYTES)
    if data is raw and encoding.strip().lower() not in ("", "identity"):
        return (f"(a {encoding.strip()[:20]}-compressed body of {len(raw)} bytes that "
                "llmbench cannot decompress)")
    return data.decode("utf-8", "replace")[:200]


def head_end(buf: bytes) -> tuple[int, int]:
    """(end of the head, start of the body) in ``buf``: the first empty line, whether lines
    end in CRLF or in a bare LF (as aiohttp's parser accepts); (-1, -1) when not there yet."""
    i = buf.find(b"\r\n\r\n")
    if i >= 0 and buf.find(b"\n\n", 0, i) < 0:
        return i, i + 4                 # the usual head: one bounded scan more
    ends = [(j, j + 2) for j in (buf.find(b"\n\n"),) if j >= 0]
    ends += [(j, j + 3) for j in (buf.find(b"\n\r\n"),) if j >= 0]
    if not ends:
        return -1, -1
    j, body = min(ends)
    return (j - 1 if j and buf[j - 1:j] == b"\r" else j), body


class _Headers:
    """A response's headers, looked up by (lower-case) name in their text: a client reads a
    handful of them, so parsing every line into a dict would be wasted work."""

    __slots__ = ("_low", "_text")

    def __init__(self, text: str) -> None:
        self._text = text               # status line and headers, CRLF-separated
        self._low = text.lower()

    def get(self, name: str, default: str = "") -> str:
        low = self._low
        key = f"\r\n{name}:"
        i = low.find(key)
        if i < 0:
            return default
        values = []
        while i >= 0:                   # a repeated header's values, comma-joined (RFC 9110)
            start = i + len(key)
            end = low.find("\r\n", start)
            values.append(self._text[start:end if end >= 0 else None].strip())
            i = low.find(key, start)
        return values[0] if len(values) == 1 else ", ".join(values)

    def __contains__(self, name: str) -> bool:
        return f"\r\n{name}:" in self._low

    def __getitem__(self, name: str) -> str:
        return self.get(name)


class _Conn(asyncio.Protocol):
    """One connection and the response it is reading; the state of one exchange at a time."""

    __slots__ = ("pool", "transport", "closed", "idle_since", "phase", "keep", "rec", "dog",
                 "texts", "fut", "dec", "mode", "acc", "acc_n", "head", "chunked", "cstate",
                 "remaining", "cbuf", "until_close", "drain_timer", "_on_head", "_fmt", "encoding",
                 "location", "clock", "stamps", "_inbox")

    def __init__(self, pool: "_Pool") -> None:
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        self.phase = _IDLE
        self.keep = False
        self.rec: Record | None = None
        self.fut: asyncio.Future | None = None
        self.drain_timer: asyncio.TimerHandle | None = None
        self.mode = STREAM
        self.location: str | None = None
        self.encoding: str | None = None
        self._on_head = pool.on_head
        self._fmt = pool.fmt
        # the time source of arrivals: the pool's (perf_counter; a virtual clock when
        # mock_transport feeds a scripted response through this parser)
        self.clock = pool.clock
        # the pool's reads stamped and not yet parsed (None: parse at once, as the virtual-
        # time transport's scripted pool wants)
        self._inbox: deque[tuple[_Conn, float, bytes]] | None = getattr(pool, "inbox", None)
        # a new connection's set-up (perf_counter: began, name resolved, TCP made, TLS done;
        # None where it had no such step), given to the first request it serves and then
        # dropped: a reused connection costs its requests nothing (records/phases.py)
        self.stamps: tuple[float, float | None, float, float | None] | None = None

    # -- asyncio.Protocol ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport      # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        if self._inbox:
            self.pool.read_inbox()      # what arrived before the close, first and in order
        self.closed = True
        phase = self.phase
        if phase == _HEAD:
            self._fail(ServerDisconnected(
                f"the server closed the connection before answering"
                f"{f' ({exc})' if exc else ''}"))
        elif phase == _BODY:
            if self.until_close or self.mode == SOME:
                self._body_end(self.clock())      # an error body keeps what came
            else:
                self._fail(ResponseCut("the connection closed before the response ended"
                                       f"{f' ({exc})' if exc else ''}"))
        elif phase == _DRAIN:
            self._resolve()
        self.phase = _IDLE
        if self.drain_timer is not None:
            self.drain_timer.cancel()
            self.drain_timer = None
        self.pool.lost(self)

    def data_received(self, data: bytes) -> None:
        t = self.clock()
        inbox = self._inbox
        if inbox is not None:
            pool = self.pool
            if inbox or t - pool.last_read < BURST_S:
                # a read right behind another (many streams' events in one poll): stamped
                # now, parsed after every read of this poll is stamped (_Pool.read_inbox), so
                # each stamp waits ~1 µs per read before it, not ~10 µs of parsing and
                # decoding each (10 ms at 1,024 streams, issue 50 §1). A read on its own is
                # parsed at once: the queue's turn costs CPU only where it buys accuracy.
                pool.last_read = t
                inbox.append((self, t, data))
                if len(inbox) == 1:
                    pool.loop.call_soon(pool.read_inbox)
                return
            pool.last_read = t
        self.receive(t, data)

    def receive(self, t: float, data: bytes) -> None:
        """``data``, which arrived at ``t``: the response parsed, its events decoded."""
        try:
            phase = self.phase
            if phase == _BODY:
                self._body(t, data)
            elif phase == _HEAD:
                self._head(t, data)
            elif phase == _DRAIN:
                self._body(t, data)
            else:                       # bytes nobody asked for: the connection is unusable
                self._abort()
        except Exception as exc:        # noqa: BLE001 - not HTTP (BadResponse), or a bug:
            # the request fails with it as aiohttp's would, classified by the client; after
            # the end marker the request is complete and only the connection is lost
            if self.phase == _DRAIN:
                self._resolve()
            else:
                self._fail(exc)
            self.phase = _IDLE
            self._abort()

    # -- one exchange ----------------------------------------------------------------------

    def start(self, rec: Record, dog: Watchdog, texts: list[str],
              fut: asyncio.Future) -> None:
        self.rec, self.dog, self.texts, self.fut = rec, dog, texts, fut
        self.phase = _HEAD
        self.head = b""
        self.dec = None
        self.acc = None
        self.mode = STREAM
        self.location = self.encoding = None

    def abandon(self) -> None:
        """The request's task gave up (cancelled: a timeout or the run's end) mid-response."""
        if self.phase != _IDLE:
            self.phase = _IDLE
            self._abort()
        self.rec = self.fut = None

    def _abort(self) -> None:
        self.keep = False
        t = self.transport
        if t is not None and not self.closed:
            t.abort()

    def _resolve(self) -> None:
        fut = self.fut
        if fut is not None and not fut.done():
            # a redirect's location goes back through the future: the connection may serve
            # another request before this one's task wakes
            fut.set_result(self.location if self.mode == FOLLOW and self.phase != _HEAD
                           else None)

    def _fail(self, exc: BaseException) -> None:
        self.phase = _IDLE
        self.keep = False
        fut = self.fut
        if fut is not None and not fut.done():
            fut.set_exception(exc)

    def _head(self, t: float, data: bytes) -> None:
        rec = self.rec
        if rec.first_byte_us is None:       # the response's first byte (records/phases.py)
            rec.first_byte_us = offset_us(rec.start, t)
        buf = self.head + data if self.head else data
        while True:
            i, body_at = head_end(buf)
            if i < 0 or i > MAX_HEAD_BYTES:
                if len(buf) > MAX_HEAD_BYTES:
                    raise BadResponse(f"the response's headers are over {MAX_HEAD_BYTES} bytes")
                self.head = buf
                return
            lines = buf[:i].decode("latin-1")
            if body_at - i != 4 or lines.count("\n") != lines.count("\r\n"):
                lines = lines.replace("\r\n", "\n").replace("\n", "\r\n")   # bare-LF lines
            buf = buf[body_at:]
            parts = lines.partition("\r\n")[0].split(" ", 2)
            version = parts[0]
            if len(parts) < 2 or not version.startswith("HTTP/1.") or not parts[1].isdigit():
                raise BadResponse(f"not an HTTP/1 response: {parts[0][:80]!r}")
            status = int(parts[1])
            if 100 <= status < 200 and status != 101:
                continue                # 100 Continue, 103 Early Hints: the answer follows
            break
        self.head = b""
        headers = _Headers(lines)
        if any(":" not in line for line in lines.split("\r\n")[1:]):
            # aiohttp refuses a header line without a name: so does this transport
            bad = next(x for x in lines.split("\r\n")[1:] if ":" not in x)
            raise BadResponse(f"a header line without a colon: {bad[:60]!r}")
        conn = headers.get("connection", "").lower()
        self.keep = ("close" not in conn) if version == "HTTP/1.1" else ("keep-alive" in conn)
        self.chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        self.until_close = False
        if self.chunked and "content-length" in headers:
            # RFC 9112 6.3: a message with both "ought to be handled as an error" (response
            # splitting); aiohttp refuses it, and both transports must agree
            raise BadResponse("both Transfer-Encoding and Content-Length")
        if self.chunked:
            self.cstate, self.cbuf, self.remaining = _SIZE, b"", 0
        elif status in (204, 304):
            self.remaining = 0
        elif "content-length" in headers:
            try:
                self.remaining = int(headers["content-length"])
            except ValueError:
                raise BadResponse(f"content-length {headers['content-length'][:40]!r}") from None
            if self.remaining < 0:
                raise BadResponse("negative content-length")
        else:
            self.until_close = True
            self.keep = False
        rec = self.rec
        assert rec is not None
        self.mode = self._on_head(status, headers, rec)
        self.phase = _BODY
        if self.mode == STREAM:
            self.dec = StreamDecoder(self._fmt, rec, self.texts)
        else:
            self.acc, self.acc_n = [], 0
            self.encoding = headers.get("content-encoding")
            if self.mode == FOLLOW:
                self.location = headers.get("location")
        if not self.chunked and not self.until_close and self.remaining == 0:
            self._body_end(t)
        elif buf:
            self._body(t, buf)

    def _body(self, t: float, data: bytes) -> None:
        """Unframe the body bytes of one network read and hand them on, once, with ``t``."""
        ended = False
        if self.chunked:
            payload, ended = self._dechunk(data)
        elif self.until_close:
            payload = data
        else:
            rem = self.remaining
            if len(data) >= rem:
                if len(data) > rem:     # bytes after the response: not a connection to reuse
                    self.keep = False
                payload = data[:rem] if len(data) > rem else data
                self.remaining = 0
                ended = True
            else:
                payload = data
                self.remaining = rem - len(data)
        if self.phase == _DRAIN:
            if payload and self.mode == STREAM:
                # a token event after the end marker fails the request (decoder.after_end)
                self.dec.after_end(payload)
            if ended:
                self._drained()
            return
        if payload:
            self._payload(t, payload, ended)
        if ended and self.phase == _BODY:
            self._body_end(t)

    def _dechunk(self, data: bytes) -> tuple[bytes, bool]:
        if self.cstate == _SIZE and not self.cbuf:
            # the usual read: exactly one whole chunk ("size CRLF data CRLF"), one event
            i = data.find(b"\r\n")
            if 0 < i < 10:
                try:
                    size = int(data[:i], 16)
                except ValueError:
                    size = 0
                if size > 0 and len(data) == i + size + 4 and data.endswith(b"\r\n"):
                    return data[i + 2:i + 2 + size], False
        if self.cbuf:
            data = self.cbuf + data
            self.cbuf = b""
        out: list[bytes] = []
        pos, n = 0, len(data)
        state = self.cstate
        while pos < n:
            if state == _DATA:
                rem = self.remaining
                end = pos + rem
                if end <= n:
                    out.append(data[pos:end] if pos or end < n else data)
                    pos = end
                    self.remaining = 0
                    state = _DATA_END
                else:
                    out.append(data[pos:] if pos else data)
                    self.remaining = rem - (n - pos)
                    pos = n
                continue
            i = data.find(b"\n", pos)
            if i < 0:
                if n - pos > MAX_CHUNK_LINE_BYTES:
                    raise BadResponse("a chunk-size line that never ended")
                self.cbuf = data[pos:]
                break
            line = data[pos:i]
            pos = i + 1
            if state == _SIZE:
                try:
                    size = int(line.split(b";", 1)[0].strip(), 16)
                except ValueError:
                    raise BadResponse(f"bad chunk size {line[:40]!r}") from None
                if size < 0:
                    raise BadResponse(f"bad chunk size {line[:40]!r}")
                if size:
                    self.remaining = size
                    state = _DATA
                else:
                    state = _TRAILER
            elif state == _DATA_END:
                if line.strip():
                    raise BadResponse("a chunk longer than its size")
                state = _SIZE
            elif not line.strip():      # _TRAILER: the blank line ends the body
                if pos < n:
                    self.keep = False
                self.cstate = _SIZE
                return (out[0] if len(out) == 1 else b"".join(out)), True
        self.cstate = state
        if not out:
            return b"", False
        return (out[0] if len(out) == 1 else b"".join(out)), False

    def _payload(self, t: float, payload: bytes, ended: bool) -> None:
        if self.mode == STREAM:
            dec = self.dec
            r = dec.feed(t, payload)
            if r == NOTHING:
                return
            if r == WHOLE:
                # the server ignored stream=true and answers one JSON body (request.py likewise)
                self.rec.stream = False
                self.mode = WHOLE_BODY
                self.acc, self.acc_n = [payload], len(payload)
                return
            dog = self.dog
            dog.last = t        # the idle limit is between events, so only events re-arm it
            if not dog.got_token and self.rec.token_times:
                dog.first_token()
            if r == EVENTS:
                # --abandon share=,after-tokens=: the user stops this reply here
                if dog.stop_after is not None and len(self.rec.token_times) >= dog.stop_after:
                    dog.enough()
                return
            if r == ENDED:
                # the end marker ends the request; the rest of the body (normally the chunked
                # terminator) is drained briefly so the connection is back in the pool before
                # the request's task (whose user may send its next request at once) wakes
                dog.stop()
                if not ended:
                    self.rec.done = self.clock()
                dec.finish()
                if ended:
                    self._finished()
                else:
                    self._start_drain()
            elif r == FAILED:
                self._request_over(ended)
            return
        acc = self.acc
        acc.append(payload)
        self.acc_n += len(payload)
        if self.mode >= SOME and self.acc_n >= ERROR_BODY_READ_BYTES:
            self._some_done()
            self._request_over(ended)

    def _body_end(self, t: float) -> None:
        """The body ended: its framing said so, or the connection closed a read-until-close one."""
        mode = self.mode
        rec = self.rec
        if mode == STREAM:
            self.dec.close(self.clock())
        elif mode == WHOLE_BODY:
            decode_whole(self._fmt, decoded(b"".join(self.acc), self.encoding or ""),
                         self.clock(), rec, self.texts)
        else:
            self._some_done()
        self._resolve()
        self._finished()

    def _some_done(self) -> None:
        if self.rec.error is None:          # what on_head said (a redirect, a compressed
            raw = b"".join(self.acc)[:ERROR_BODY_READ_BYTES]        # stream) is kept
            self.rec.error = body_text(raw, self.encoding or "")

    def _request_over(self, ended: bool) -> None:
        """The request is over; unless its body is too (``ended``), the connection is not reused."""
        self._resolve()
        if ended:
            self._finished()
        else:
            self.phase = _IDLE
            self._abort()

    def _start_drain(self) -> None:
        if self.closed:
            self._resolve()
            return
        if not self.keep:               # nothing to keep it for
            self._finished()
            return
        self.phase = _DRAIN
        self.drain_timer = self.pool.loop.call_later(DRAIN_AFTER_END_S, self._drain_late)

    def _drain_late(self) -> None:
        self.drain_timer = None
        if self._inbox:
            self.pool.read_inbox()      # the terminator may be read and not yet parsed
        if self.phase == _DRAIN:
            self.phase = _IDLE
            self._abort()
            self._resolve()

    def _drained(self) -> None:
        if self.drain_timer is not None:
            self.drain_timer.cancel()
            self.drain_timer = None
        self._finished()

    def _finished(self) -> None:
        self.phase = _IDLE
        self._resolve()
        if self.keep and not self.closed:
            self.pool.release(self)
        elif self.transport is not None and not self.closed:
            self.transport.close()


class _Tunnel(asyncio.Protocol):
    """A CONNECT request's answer from the proxy: ``answered`` resolves on a 2xx head and
    fails with ProxyError otherwise (407: credentials wanted), then TLS starts over it."""

    def __init__(self, loop: asyncio.AbstractEventLoop, what: str) -> None:
        self.answered = loop.create_future()
        self.buf = b""
        self.what = what                # "the proxy http://h:3128", for the messages

    def data_received(self, data: bytes) -> None:
        if self.answered.done():
            return
        self.buf += data
        i, _ = head_end(self.buf)
        if i < 0:
            if len(self.buf) > MAX_HEAD_BYTES:
                self.answered.set_exception(ProxyError(f"{self.what} sent no HTTP answer"))
            return
        line = self.buf[:i].split(b"\n", 1)[0].decode("latin-1").strip()
        parts = line.split(" ", 2)
        if len(parts) >= 2 and parts[0].startswith("HTTP/1.") and parts[1][:1] == "2":
            self.answered.set_result(None)
            return
        why = (": put them in the proxy URL, http://USER:PASSWORD@host:port"
               if parts[1:2] == ["407"] else "")
        self.answered.set_exception(ProxyError(
            f"{self.what} refused the tunnel ({line[:80]}){why}"))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.answered.done():
            self.answered.set_exception(ProxyError(
                f"{self.what} closed the connection before answering CONNECT"))


class _Pool:
    """Kept-alive connections to one host:port, at most ``limit`` open (0: no limit).
    ``tunnel``: the CONNECT request to send first (host:port is then the proxy's) and the
    host TLS is for."""

    def __init__(self, loop: asyncio.AbstractEventLoop, host: str, port: int,
                 ssl_ctx: ssl.SSLContext | None, limit: int, connect_s: float,
                 on_head: OnHead, fmt: WireFormat,
                 tunnel: tuple[bytes, str, str] | None = None) -> None:
        self.loop = loop
        self.host, self.port, self.ssl = host, port, ssl_ctx
        self.tunnel = tunnel
        self.limit = limit
        self.connect_s = connect_s
        self.on_head = on_head
        self.fmt = fmt
        self.clock = perf_counter
        # plain TCP read by rxstamp.StampedSocket: each read stamped with the kernel's receive
        # time (TLS and tunnels go through asyncio's transports, stamped on read)
        self.kernel = ssl_ctx is None and tunnel is None and rxstamp.supported()
        # an IP address needs no name resolved: connect to it at once (as asyncio does)
        self.addrs: list[tuple[Any, ...]] | None = None
        try:
            ip = ipaddress.ip_address(host)
            self.addrs = [(socket.AF_INET6 if ip.version == 6 else socket.AF_INET,
                           socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (host, port))]
        except ValueError:
            pass
        self.idle: list[_Conn] = []
        # reads stamped on arrival and not yet parsed, in arrival order (_Conn.data_received)
        self.inbox: deque[tuple[_Conn, float, bytes]] = deque()
        self.last_read = float("-inf")      # the stamp of the last read (BURST_S)
        self.open = 0
        self.waiters: deque[asyncio.Future] = deque()
        self.all: set[_Conn] = set()

    def read_inbox(self) -> None:
        """Parse the reads stamped so far, in the order they arrived."""
        inbox = self.inbox
        while inbox:
            conn, t, data = inbox.popleft()
            conn.receive(t, data)       # catches what it raises; a close it causes comes
                                        # later (asyncio and uvloop call connection_lost soon)

    async def acquire(self, fresh: bool) -> _Conn:
        while True:
            idle = self.idle
            if idle and not fresh:
                now = perf_counter()
                while idle:
                    c = idle.pop()          # the most recent: the least likely to be stale
                    if c.closed:
                        continue
                    if now - c.idle_since > KEEPALIVE_S:
                        c._abort()
                        continue
                    return c
            if self.limit <= 0 or self.open < self.limit:
                return await self._connect()
            if idle:                        # fresh wanted and the pool is full: make room
                idle.pop(0)._abort()
                continue
            w = self.loop.create_future()
            self.waiters.append(w)
            try:
                await w
            except BaseException:
                if w in self.waiters:
                    self.waiters.remove(w)
                elif w.done() and not w.cancelled():
                    self._wake()            # pass the turn on
                raise

    async def _connect(self) -> _Conn:
        self.open += 1
        conn = _Conn(self)
        try:
            await asyncio.wait_for(self._open(conn), self.connect_s)
        except BaseException:
            if conn.transport is not None and not conn.closed:
                conn.transport.abort()      # connection_lost then counts it out
            else:
                self.open -= 1
                self._wake()
            raise
        self.all.add(conn)
        return conn

    async def _open(self, conn: _Conn) -> None:
        """Connect, step by step so that each step is timed (conn.stamps): the name resolved,
        then the TCP connection (each address in turn, as asyncio's create_connection does),
        then TLS over it. The same sockets and errors as create_connection's."""
        loop = self.loop
        began = perf_counter()
        if self.tunnel is None:
            addrs, dns = self.addrs, None
            if addrs is None:
                addrs = await loop.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
                dns = perf_counter()
                if not addrs:
                    raise OSError("getaddrinfo() returned empty list")
            sock = await self._tcp(addrs)
            tcp = perf_counter()
            if self.kernel:
                try:
                    rxstamp.StampedSocket(loop, sock, conn)
                    conn.stamps = (began, dns, tcp, None)
                    return
                except OSError:         # refused on this socket: asyncio's transport reads
                    pass
            try:
                await loop.create_connection(lambda: conn, sock=sock, ssl=self.ssl,
                                             server_hostname=self.host if self.ssl else None)
            except BaseException:
                sock.close()
                raise
            conn.stamps = (began, dns, tcp, perf_counter() if self.ssl else None)
            return
        request, server_hostname, what = self.tunnel
        tr, tun = await loop.create_connection(lambda: _Tunnel(loop, what), self.host,
                                               self.port)
        tcp = perf_counter()                # to the proxy; its CONNECT answer counts as TLS
        try:
            tr.write(request)
            await tun.answered
            tls = await loop.start_tls(tr, conn, self.ssl, server_hostname=server_hostname)
        except BaseException:
            tr.abort()
            raise
        conn.stamps = (began, None, tcp, perf_counter())
        conn.connection_made(tls)       # start_tls does not call it

    async def _tcp(self, addrs: list[tuple[Any, ...]]) -> socket.socket:
        errors: list[OSError] = []
        for family, type_, proto, _, address in addrs:
            sock = socket.socket(family, type_, proto)
            try:
                sock.setblocking(False)
                await self.loop.sock_connect(sock, address)
                return sock
            except OSError as exc:
                sock.close()
                errors.append(exc)
            except BaseException:
                sock.close()
                raise
        if len(errors) == 1:
            raise errors[0]
        if len({str(e) for e in errors}) == 1:
            raise errors[0]
        raise OSError(f"Multiple exceptions: {', '.join(str(e) for e in errors)}")

    async def preconnect(self, n: int, batch: int = 64) -> int:
        """Open connections until ``n`` are open (within the limit), and leave them idle for
        the first requests: how many were opened. In batches, so a server's accept backlog
        (128 by default in aiohttp and asyncio) is not overrun by one burst of SYNs (a dropped
        SYN is retried by the kernel after a second). A connection that fails is not an
        error here: the request that needs one finds out itself."""
        want = (n if self.limit <= 0 else min(n, self.limit)) - self.open
        made = 0
        while want > 0:
            k = min(want, batch)
            want -= k
            got = await asyncio.gather(*(self._connect() for _ in range(k)),
                                       return_exceptions=True)
            for c in got:
                if isinstance(c, _Conn):
                    if c.closed:
                        continue
                    c.stamps = None         # opened before the load: no request's cost
                    made += 1
                    self.release(c)
                elif isinstance(c, asyncio.CancelledError):
                    raise c
            if made == 0:
                break                       # the server is not answering: no use going on
        return made

    def release(self, conn: _Conn) -> None:
        conn.rec = conn.fut = None
        conn.idle_since = perf_counter()
        self.idle.append(conn)
        self._wake()

    def lost(self, conn: _Conn) -> None:
        self.open -= 1
        self.all.discard(conn)
        if conn in self.idle:
            self.idle.remove(conn)
        self._wake()

    def _wake(self) -> None:
        while self.waiters:
            w = self.waiters.popleft()
            if not w.done():
                w.set_result(None)
                return

    def close(self) -> None:
        for c in list(self.all):
            c._abort()
        self.idle.clear()


class FastTransport:
    """Transport for http:// and https:// targets: see the module's docstring."""

    def __init__(self, urls: dict[bool, str], headers: dict[str, str], fmt: WireFormat,
                 on_head: OnHead, max_connections: int, connect_s: float,
                 stamp_sent: bool = True, net: Net | None = None) -> None:
        self._fmt = fmt
        self._on_head = on_head
        self._limit = max_connections
        self._connect_s = connect_s
        self._stamp = stamp_sent
        self._pool: _Pool | None = None
        self._net = net = net or Net()
        first = urlsplit(urls[True])
        self._scheme = first.scheme
        self._host = first.hostname or ""
        self._port = first.port or (443 if first.scheme == "https" else 80)
        hostport = first.netloc.rpartition("@")[2]
        # through a proxy, an http:// request names the whole URL (absolute form); https://
        # goes through a CONNECT tunnel and looks as without a proxy inside it
        self._origin = (f"http://{hostport}" if net.proxy and self._scheme == "http" else "")
        # everything but the request id and the length, encoded once for the run
        names = {k.lower() for k in headers}
        fixed = {} if "host" in names else {"host": hostport}
        if "user-agent" not in names:
            fixed["user-agent"] = f"llmbench/{__version__}"
        if "accept" not in names:
            fixed["accept"] = "*/*"
        fixed.update({k: v for k, v in headers.items() if k.lower() != "content-length"})
        if self._origin and net.proxy_authorization:
            fixed["proxy-authorization"] = net.proxy_authorization
        self._lines = "".join(f"{k}: {v}\r\n" for k, v in fixed.items()).encode("utf-8")
        self._heads = {s: self._head_for(_path_qs(u)) for s, u in urls.items()}
        self._other_heads: dict[str, bytes] = {}        # redirects followed, by path
        self.traceparent = False        # --traceparent: send each request's (records/trace.py)

    def _head_for(self, path_qs: str) -> bytes:
        return f"POST {self._origin}{path_qs} HTTP/1.1\r\n".encode("latin-1") + self._lines

    def _tunnel(self) -> tuple[bytes, str, str] | None:
        net = self._net
        if not net.proxy or self._scheme != "https":
            return None
        where = f"{self._host}:{self._port}" if ":" not in self._host else \
            f"[{self._host}]:{self._port}"
        auth = (f"proxy-authorization: {net.proxy_authorization}\r\n"
                if net.proxy_authorization else "")
        request = (f"CONNECT {where} HTTP/1.1\r\nhost: {where}\r\n"
                   f"user-agent: llmbench/{__version__}\r\n{auth}\r\n").encode("latin-1")
        return request, self._host, f"the proxy {net.proxy_shown}"

    def _get_pool(self) -> _Pool:
        pool = self._pool
        if pool is None:
            net = self._net
            ctx = net.ssl_context() if self._scheme == "https" else None
            host, port = ((net.proxy_host, net.proxy_port) if net.proxy
                          else (self._host, self._port))
            pool = self._pool = _Pool(asyncio.get_running_loop(), host, port, ctx,
                                      self._limit, self._connect_s, self._on_head, self._fmt,
                                      self._tunnel())
        return pool

    async def exchange(self, stream: bool, body: bytes, rec: Record, dog: Watchdog,
                       texts: list[str], fresh: bool, path: str | None = None) -> str | None:
        pool = self._pool or self._get_pool()
        conn = await pool.acquire(fresh)
        if conn.closed:         # the server hung up on a new connection before it was used
            raise ServerDisconnected("the server closed the connection before the request")
        stamps = conn.stamps
        if stamps is not None:              # this request opened it (records/phases.py)
            conn.stamps = None
            start = rec.start
            began, dns, tcp, tls = stamps
            rec.conn_us = offset_us(start, began)
            rec.dns_us = None if dns is None else offset_us(start, dns)
            rec.connect_us = offset_us(start, tcp)
            rec.tls_us = None if tls is None else offset_us(start, tls)
        fut = pool.loop.create_future()
        conn.start(rec, dog, texts, fut)
        if hasattr(dog, "flush"):
            dog.flush = pool.read_inbox     # type: ignore[attr-defined]
        if path is None:
            head = self._heads[stream]
        else:
            head = self._other_heads.get(path) or self._other_heads.setdefault(
                path, self._head_for(path))
        if self.traceparent and rec.trace_id is not None:
            head += b"traceparent: %s\r\n" % traceparent(rec.trace_id).encode("ascii")
        data = b"%sx-request-id: %s\r\ncontent-length: %d\r\n\r\n%s" % (
            head, header_id(rec.request_id).encode("ascii"), len(body), body)
        if self._stamp:
            # handed to the socket: stamped just before, as the reply's kernel receive time
            # (rxstamp) can come before ``write`` returns (over loopback the server may answer
            # while the kernel preempts this process on its way out of ``send``)
            rec.sent = perf_counter()
        conn.transport.write(data)
        try:
            return await fut
        finally:
            if conn.rec is rec:
                conn.abandon()

    async def preconnect(self, n: int) -> int:
        return await (self._pool or self._get_pool()).preconnect(n)

    async def aclose(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None
            await asyncio.sleep(0)          # let the transports' connection_lost run


def _path_qs(url: str) -> str:
    """The request target of ``url`` as sent, as yarl's ``raw_path_qs`` makes it, without
    importing yarl for the usual URL (~7 ms of a run's start-up): the path and query
    percent-encoded, a space in the query as ``+``. A URL with an escape or a dot segment
    goes by yarl itself (it normalizes both)."""
    parts = urlsplit(url)
    if "%" in url or "/." in parts.path:
        from yarl import URL
        return URL(url).raw_path_qs
    safe = "/:@!$&'()*+,;=~"
    path = quote(parts.path, safe=safe) or "/"
    if not parts.query:
        return path
    return path + "?" + quote(parts.query, safe=safe + "? ").replace(" ", "+")
