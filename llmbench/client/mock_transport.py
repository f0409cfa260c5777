"""MockTransport: the client with no socket and no wall clock, as httpx's MockTransport is.

``Client(target, transport=MockTransport(handler))`` hands every request to ``handler`` (a
function, or a coroutine function, of a MockRequest) and plays back the MockReply it returns:
a status, headers, and the body's chunks, each after a delay in *virtual* seconds. The client
keeps its times on the transport's clock (``MockTransport.clock``), so TTFT, ITL, E2EL and
every timeout (first token, idle, total) come out exactly as scripted, at no real wall time: a
300 s first-token timeout is decided in microseconds, and a busy machine cannot shift a number.

What is real: the client (its record, the stale-connection resend, the finish), its response
policy (``on_head``: error bodies, redirects, HTML, compression), the stream decoder and
``decode_whole`` (the same code both network transports feed), the SSE and NDJSON framers.
With ``raw=`` the reply is the HTTP bytes a server would send, parsed by the fast transport's
own parser (status line, headers, chunked and Content-Length framing, what it refuses), so HTTP
framing faults are tested without a socket too.

Virtual time is one clock per transport: requests sent one after another each see consistent
times. Requests sent concurrently each move the one clock as their script plays, so their times
relative to each other mean nothing; test concurrency on a real loopback server.

    def handler(request: MockRequest) -> MockReply:
        assert request.json()["model"] == "m"
        return MockReply.sse([{"choices": [{"delta": {"content": "hi"}}]}, "[DONE]"],
                             first_s=0.25, gap_s=0.02)

    async with Client(make_target("http://h/v1", "m"), transport=MockTransport(handler)) as c:
        await c.send([{"role": "user", "content": "hello"}], 8, rec)   # rec.ttft == 0.25
"""

from __future__ import annotations

import asyncio
import inspect
import json
import math
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Iterable, Sequence, Union

from llmbench.client import fasthttp
from llmbench.client.decoder import EVENTS, FAILED, NOTHING, WHOLE, StreamDecoder, decode_whole
from llmbench.client.fasthttp import (ERROR_BODY_READ_BYTES, FOLLOW, SOME, STREAM, OnHead,
                                      ResponseCut, Watchdog, _Headers, body_text, decoded)
from llmbench.client.netconfig import Net
from llmbench.records.ids import header_id
from llmbench.records.record import Record
from llmbench.wire.format import WireFormat

__all__ = ["MockReply", "MockRequest", "MockTransport", "VirtualClock"]

# a chunk: bytes at once, or (virtual seconds after the previous chunk, bytes)
Chunk = Union[bytes, "tuple[float, bytes]"]
ENDS = ("close", "cut", "hang")


class VirtualClock:
    """Seconds that pass only when a scripted reply says so. Callable, as perf_counter is."""

    __slots__ = ("now",)

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


@dataclass(frozen=True)
class MockRequest:
    """One request as the transport got it."""

    method: str
    url: str
    path: str                       # path and query, as on the request line
    headers: dict[str, str]         # lower-case names
    body: bytes
    stream: bool                    # the client asked for a streamed reply
    fresh: bool                     # sent on a new connection (the resend after a stale one)
    index: int                      # 0 for the transport's first request, then 1, 2...

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class MockReply:
    """A scripted answer. ``after_s``: virtual seconds before the status line and headers
    arrive. ``chunks``: the body, each chunk bytes or (seconds after the previous one, bytes).
    ``end``: after the last chunk, "close" (the body is complete), "cut" (the connection drops
    mid-body: a cut stream) or "hang" (nothing more ever comes: virtual time runs on until a
    timeout fires). ``error``: raised after ``after_s`` instead of any answer, as the network
    would (ConnectionRefusedError: a connect error; fasthttp.ServerDisconnected: a kept-alive
    connection the server had closed, which the client sends again once; TimeoutError...).
    ``raw``: instead of status, headers and chunks, the response's HTTP bytes in chunks."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=lambda: {"content-type": "text/event-stream"})
    chunks: Sequence[Chunk] = ()
    after_s: float = 0.0
    end: str = "close"
    error: BaseException | None = None
    raw: Sequence[Chunk] | None = None

    def __post_init__(self) -> None:
        if self.end not in ENDS:
            raise ValueError(f"MockReply end={self.end!r}: one of {', '.join(ENDS)}")

    @classmethod
    def sse(cls, events: Iterable[Any], first_s: float = 0.0, gap_s: float = 0.0,
            **kw: Any) -> "MockReply":
        """Server-sent events, one chunk each: a dict or list is sent as JSON, a str or bytes
        as the data line's payload ("[DONE]"). The first arrives ``first_s`` after the head,
        each next one ``gap_s`` after the one before."""
        chunks: list[Chunk] = []
        for i, ev in enumerate(events):
            payload = ev if isinstance(ev, bytes) else ev.encode() if isinstance(ev, str) \
                else json.dumps(ev).encode()
            chunks.append((first_s if i == 0 else gap_s, b"data: " + payload + b"\n\n"))
        return cls(chunks=chunks, **kw)

    @classmethod
    def ndjson(cls, lines: Iterable[Any], first_s: float = 0.0, gap_s: float = 0.0,
               **kw: Any) -> "MockReply":
        """One JSON object a line (Ollama's stream), one chunk each."""
        chunks: list[Chunk] = [(first_s if i == 0 else gap_s,
                                (obj if isinstance(obj, bytes) else json.dumps(obj).encode())
                                + b"\n") for i, obj in enumerate(lines)]
        kw.setdefault("headers", {"content-type": "application/x-ndjson"})
        return cls(chunks=chunks, **kw)

    @classmethod
    def json(cls, obj: Any, status: int = 200, after_s: float = 0.0, **kw: Any) -> "MockReply":
        """One JSON body (a whole reply, an error, an embeddings answer)."""
        kw.setdefault("headers", {"content-type": "application/json"})
        body = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
        return cls(status=status, chunks=[body], after_s=after_s, **kw)


Handler = Callable[[MockRequest], Union[MockReply, Awaitable[MockReply]]]


def _timed(chunks: Sequence[Chunk]) -> list[tuple[float, bytes]]:
    out = []
    for c in chunks:
        delay, data = (0.0, c) if isinstance(c, (bytes, bytearray)) else c
        if not (isinstance(delay, (int, float)) and math.isfinite(delay) and delay >= 0):
            raise ValueError(f"MockReply: a chunk's delay must be seconds >= 0, not {delay!r}")
        out.append((float(delay), bytes(data)))
    return out


class MockTransport:
    """``Client(target, transport=MockTransport(handler))``: see the module's docstring.
    ``requests``: every MockRequest it got, in order; ``clock``: its virtual clock."""

    name = "mock"

    def __init__(self, handler: Handler, clock: VirtualClock | None = None) -> None:
        self.handler = handler
        self.clock = clock or VirtualClock()
        self.requests: list[MockRequest] = []

    def __call__(self, urls: dict[bool, str], headers: dict[str, str], fmt: WireFormat,
                 on_head: OnHead, max_connections: int, connect_s: float,
                 stamp_sent: bool = True, net: Net | None = None) -> "_Bound":
        """What the client calls as it opens (fasthttp.TransportFactory)."""
        return _Bound(self, urls, headers, fmt, on_head, stamp_sent)


class _Bound:
    """A MockTransport bound to one client: its URLs, headers, wire format and policy."""

    def __init__(self, owner: MockTransport, urls: dict[bool, str], headers: dict[str, str],
                 fmt: WireFormat, on_head: OnHead, stamp_sent: bool) -> None:
        self.owner = owner
        self.clock = owner.clock
        self._urls = urls
        self._headers = {k.lower(): v for k, v in headers.items()}
        self._fmt = fmt
        self._on_head = on_head
        self._stamp = stamp_sent

    async def aclose(self) -> None:
        pass

    # -- virtual time ------------------------------------------------------------------------

    async def _wait(self, delay: float, dog: Watchdog) -> None:
        """Let ``delay`` virtual seconds pass; a deadline on the way fires there (the task is
        cancelled, as the watchdog's timer does on a real transport)."""
        clock = self.clock
        until = clock.now + delay
        if not dog.stopped:
            d = dog.deadline()
            if d <= until:
                clock.now = max(clock.now, d)
                if dog.expire():
                    await asyncio.sleep(0)          # the cancellation is raised here
        if math.isinf(until):
            raise RuntimeError("MockReply end='hang' with no deadline to end it")
        clock.now = until
        await asyncio.sleep(0)                      # other tasks run, as between two reads

    # -- one exchange --------------------------------------------------------------------------

    async def exchange(self, stream: bool, body: bytes, rec: Record, dog: Watchdog,
                       texts: list[str], fresh: bool, path: str | None = None) -> str | None:
        owner = self.owner
        url = self._urls[stream]
        if path is not None:
            from urllib.parse import urljoin
            url = urljoin(url, path)
        from urllib.parse import urlsplit
        parts = urlsplit(url)
        req = MockRequest("POST", url, (parts.path or "/") + (f"?{parts.query}" if parts.query else ""),
                          {**self._headers, "x-request-id": header_id(rec.request_id),
                           "content-length": str(len(body))},
                          body, stream, fresh, len(owner.requests))
        owner.requests.append(req)
        reply = owner.handler(req)
        if inspect.isawaitable(reply):
            reply = await reply
        if not isinstance(reply, MockReply):
            raise TypeError(f"the MockTransport handler returned {type(reply).__name__}, "
                            "not a MockReply")
        if self._stamp:
            rec.sent = self.clock()
        await self._wait(reply.after_s, dog)
        if reply.error is not None:
            raise reply.error
        if reply.raw is not None:
            return await self._raw(reply, rec, dog, texts)
        head = f"HTTP/1.1 {reply.status} X\r\n" + "".join(
            f"{k}: {v}\r\n" for k, v in reply.headers.items())
        headers = _Headers(head)
        mode = self._on_head(reply.status, headers, rec)
        chunks = _timed(reply.chunks)
        encoding = headers.get("content-encoding", "")
        if mode >= SOME:
            got = b""
            for delay, data in chunks:
                if len(got) >= ERROR_BODY_READ_BYTES:
                    break                           # read the start of it, then hang up
                await self._wait(delay, dog)
                got += data
            if rec.error is None:                   # what on_head said is kept
                rec.error = body_text(got[:ERROR_BODY_READ_BYTES], encoding)
            return headers.get("location") if mode == FOLLOW else None
        if mode == STREAM:
            return await self._stream(chunks, reply.end, rec, dog, texts, encoding)
        await self._rest(chunks, reply.end, dog)
        decode_whole(self._fmt, decoded(b"".join(d for _, d in chunks), encoding),
                     self.clock(), rec, texts)
        return None

    async def _rest(self, chunks: list[tuple[float, bytes]], end: str, dog: Watchdog) -> None:
        """A whole body: all of it arrives, then it ends as the reply says."""
        for delay, _ in chunks:
            await self._wait(delay, dog)
        await self._end(end, dog)

    async def _end(self, end: str, dog: Watchdog) -> None:
        if end == "cut":
            raise ResponseCut("the connection closed before the response ended")
        if end == "hang":
            await self._wait(math.inf, dog)

    async def _stream(self, chunks: list[tuple[float, bytes]], end: str, rec: Record,
                      dog: Watchdog, texts: list[str], encoding: str) -> None:
        """The aiohttp transport's loop (request.AiohttpTransport._read_stream), on the clock."""
        dec = StreamDecoder(self._fmt, rec, texts)
        clock = self.clock
        for i, (delay, data) in enumerate(chunks):
            await self._wait(delay, dog)
            t = clock()
            r = dec.feed(t, data)
            if r == NOTHING:
                continue
            if r == WHOLE:
                rec.stream = False
                rest = chunks[i + 1:]
                await self._rest(rest, end, dog)
                decode_whole(self._fmt, decoded(data + b"".join(d for _, d in rest), encoding),
                             clock(), rec, texts)
                return None
            dog.last = t
            if not dog.got_token and rec.token_times:
                dog.first_token()
            if r == EVENTS:
                continue
            if r == FAILED:
                return None
            dog.stop()                              # ENDED: the end marker ends the request
            dec.finish()
            return None
        await self._end(end, dog)
        dec.close(clock())
        return None

    async def _raw(self, reply: MockReply, rec: Record, dog: Watchdog,
                   texts: list[str]) -> str | None:
        """HTTP bytes through the fast transport's parser (fasthttp._Conn), on the clock."""
        loop = asyncio.get_running_loop()
        pool = _Pool(loop, self._on_head, self._fmt, self.clock)
        conn = fasthttp._Conn(pool)                 # type: ignore[arg-type]
        wire = _Wire()
        conn.transport = wire                       # type: ignore[assignment]
        fut = loop.create_future()
        conn.start(rec, dog, texts, fut)
        try:
            for delay, data in _timed(reply.raw or ()):
                if fut.done():
                    break
                await self._wait(delay, dog)
                if wire.closed:
                    break
                conn.data_received(data)
            if not fut.done():
                if conn.phase == fasthttp._DRAIN:
                    conn._drain_late()              # the end marker came; the rest did not
                elif reply.end == "hang":
                    await self._wait(math.inf, dog)
                else:
                    conn.connection_lost(ConnectionResetError("reset by peer")
                                         if reply.end == "cut" else None)
            return fut.result()
        finally:
            if conn.drain_timer is not None:
                conn.drain_timer.cancel()
            if conn.rec is rec:
                conn.abandon()


class _Pool:
    """What a fasthttp._Conn reads of its pool, for one scripted response."""

    def __init__(self, loop: asyncio.AbstractEventLoop, on_head: OnHead, fmt: WireFormat,
                 clock: VirtualClock) -> None:
        self.loop, self.on_head, self.fmt, self.clock = loop, on_head, fmt, clock

    def release(self, conn: Any) -> None:
        conn.rec = conn.fut = None

    def lost(self, conn: Any) -> None:
        pass


class _Wire:
    """Stands in for the socket: the parser only aborts or closes it."""

    closed = False

    def abort(self) -> None:
        self.closed = True

    close = abort
