"""Send one request, time it, and fill one Record. Never raises for anything a server does.

No general HTTP library is on the hot path by default. Measured on this project's 2-core
machine: httpx's default transport delivered 128 concurrent 20 ms streams coalesced; httpx
over aiohttp's transport kept the gaps but cost ~525 us of CPU per request,
against ~230 us for the same request on aiohttp alone, and at 128 streams those costs arrive
in waves that delay token timestamps. scripts/bench_client_accuracy.py re-checks them.

Two transports sit behind one seam (fasthttp.Transport: one request in, its response into the
record): fasthttp's lean HTTP/1.1 protocol (the default for http:// and https://, for its CPU:
DEFAULT_TRANSPORT) and aiohttp; choose_transport picks (``LLMBENCH_TRANSPORT=aiohttp|fast``).
Everything else (the record, timeouts, the resend, the finish) is Client.send's, for both, and
so is the response policy both must agree on (``_on_head``): a same-origin 307/308 is followed
once per request and warned about (the URL should be fixed); 301/302/303, which turn a POST into
a GET, and other origins are not followed; a compressed stream is named, not read as a cut. Both
go to the server the target's way (netconfig.Net: proxy, TLS).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import sys
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Awaitable, Callable
from urllib.parse import urljoin, urlsplit

if TYPE_CHECKING:
    import aiohttp
    from multidict import CIMultiDictProxy
    from yarl import URL
else:
    # imported by the aiohttp transport when one is made (_load_aiohttp): a run on llmbench's
    # own transport never loads it, and aiohttp is 23 MB of a process's resident memory;
    # yarl with it (the URLs it is given)
    aiohttp = URL = None


def _load_aiohttp() -> Any:
    global aiohttp, URL
    if aiohttp is None:
        import aiohttp as module
        from yarl import URL as url_class
        aiohttp, URL = module, url_class
    return aiohttp


def preload_transports(base_urls: list[str]) -> None:
    """Import aiohttp now if a request to one of ``base_urls`` will go through it: before the
    event loop runs, not inside it, where the import stalls the loop for about a quarter of a
    second as the first requests go out."""
    if any(choose_transport(u) == "aiohttp" for u in base_urls):
        _load_aiohttp()

from llmbench.client import fasthttp, rxstamp
from llmbench.client.abandon import CANCELLED, Abandon
from llmbench.client.decoder import EVENTS, FAILED, NOTHING, WHOLE, StreamDecoder, decode_whole
from llmbench.client.fasthttp import DRAIN_AFTER_END_S, ERROR_BODY_READ_BYTES, FOLLOW, MAX_HEAD_BYTES, SOME, STREAM, WHOLE_BODY, Transport, TransportFactory, body_text, decoded
from llmbench.client.netconfig import Net
from llmbench.records.definitions import offset_us
from llmbench.records.trace import new_trace_id, traceparent
from llmbench.records.ids import header_id
from llmbench.records.record import Record
from llmbench.client.target import Target
from llmbench.wire.agents import Reply, check_reply, reply_text
from llmbench.wire.events import count

perf_counter = time.perf_counter

try:
    # orjson encodes a request body in a fraction of json.dumps's time (scripts/bench_client_cpu.py)
    from orjson import dumps as fast_dumps
except ImportError:         # pragma: no cover - orjson is a dependency, kept optional here
    fast_dumps = None


def encode_body(body: dict[str, Any]) -> bytes:
    """A request body as JSON bytes; what orjson cannot encode (an integer beyond 64 bits in
    --extra-body) goes through json."""
    fast = fast_dumps
    if fast is not None:
        try:
            return fast(body)
        except TypeError:
            pass
    return json.dumps(body).encode()


async def _stamp_sent(_session: aiohttp.ClientSession, ctx: Any, _params: Any) -> None:
    """aiohttp calls this just before it hands each piece of the request body to the socket
    (StreamWriter.write, which writes synchronously right after): the last call is when the
    request left llmbench. The time since ``rec.start`` is the client's own send delay."""
    rec = ctx.trace_request_ctx
    if rec is not None:
        rec.sent = perf_counter()


def _us(rec: Record) -> int:
    return offset_us(rec.start, perf_counter())


# A new connection's phases (records/phases.py): aiohttp calls these only when a request opens
# a connection (or resolves a name it had not cached), so a reused connection costs nothing.
# Its connect includes the TLS handshake: aiohttp has no hook between the two.
async def _stamp_conn(_session: Any, ctx: Any, _params: Any) -> None:
    rec = ctx.trace_request_ctx
    if rec is not None:
        rec.conn_us = _us(rec)
        rec.dns_us = rec.connect_us = None


def _stamp_phase(name: str) -> Callable[[Any, Any, Any], Awaitable[None]]:
    """The hook that stamps a new connection's phase ``name`` (dns_us, connect_us)."""
    async def stamp(_session: Any, ctx: Any, _params: Any) -> None:
        rec = ctx.trace_request_ctx
        if rec is not None and rec.conn_us is not None:
            setattr(rec, name, _us(rec))
    return stamp


def _send_stamps() -> list[aiohttp.TraceConfig]:
    tc = aiohttp.TraceConfig()
    tc.on_request_chunk_sent.append(_stamp_sent)
    tc.on_connection_create_start.append(_stamp_conn)
    tc.on_dns_resolvehost_end.append(_stamp_phase("dns_us"))
    tc.on_connection_create_end.append(_stamp_phase("connect_us"))
    return [tc]

# Response headers that name the backend which served a request, most specific first.
SERVED_BY_HEADERS = ("x-llmbench-replica", "x-inference-pod", "x-served-by", "x-backend-server",
                     "x-upstream-addr", "x-litellm-model-api-base")
QUEUE_HEADER = "x-llmbench-queue-ms"


@dataclass(frozen=True)
class Timeouts:
    """How long a request may wait: to connect, for its first token, between tokens, in all."""
    connect_s: float = 10.0
    first_token_s: float = 300.0
    idle_s: float = 60.0
    total_s: float = 900.0


# A request that failed on a reused connection before any reply is sent again this many times,
# each time on a new connection (so a second failure is the server's, not a stale pool's).
MAX_RESENDS = 1


def _stale_connection(exc: BaseException) -> bool:
    """The failure of a kept-alive connection the server closed: not a refused connect."""
    if aiohttp is not None and isinstance(exc, aiohttp.ClientConnectorError):
        return False        # could not connect at all: the server is down or the URL is wrong
    if aiohttp is not None and isinstance(exc, (aiohttp.ServerDisconnectedError,
                                                aiohttp.ClientOSError)):
        return True
    return isinstance(exc, (ConnectionResetError, BrokenPipeError))
    # fasthttp.ServerDisconnected is a ConnectionResetError; its connect errors are the OS's
    # (ConnectionRefusedError, socket.gaierror, TimeoutError), none of which is stale


def _malformed_http(exc: BaseException) -> bool:
    """A reply that broke HTTP/1.1's rules, as either transport reports it."""
    if isinstance(exc, fasthttp.BadResponse):
        return True
    if aiohttp is None:
        return False
    from aiohttp.http_exceptions import HttpProcessingError
    if isinstance(exc, aiohttp.ClientHttpProxyError):
        return False            # the proxy refused the tunnel (407, 502): a connect failure
    if isinstance(exc, (aiohttp.ClientResponseError, HttpProcessingError)):
        return True
    if isinstance(exc, aiohttp.ClientPayloadError):
        # "Response payload is not completed ... Not enough data": a cut; anything else the
        # parser refused (a bad chunk, a chunk longer than its size) is the protocol
        return "not enough data" not in str(exc).lower() and "not completed" not in str(exc)
    return False


TRANSPORT_ENV = "LLMBENCH_TRANSPORT"
TRANSPORTS = ("aiohttp", "fast")
# What "auto" means for http:// and https:// targets (other schemes always take aiohttp): the
# fast transport, which at 128 streams cost about half of aiohttp's CPU per request start and
# two thirds per token event, with a smaller TTFT error (docs/metrics.md, "Client cost")
DEFAULT_TRANSPORT = "fast"
_warned: set[str] = set()


def choose_transport(url: str, wanted: str | None = None) -> str:
    """'aiohttp' or 'fast' for requests to ``url``; ``wanted`` (else $LLMBENCH_TRANSPORT) is
    auto | aiohttp | fast. The fast transport speaks HTTP/1.1 over TCP or TLS only."""
    if wanted is None:
        wanted = os.environ.get(TRANSPORT_ENV, "").strip().lower() or "auto"
    if wanted not in TRANSPORTS and wanted != "auto":
        if wanted not in _warned:
            _warned.add(wanted)
            print(f"warning: {TRANSPORT_ENV}={wanted[:40]}: expected auto, aiohttp or fast; "
                  "using auto", file=sys.stderr)
        wanted = "auto"
    if wanted == "auto":
        wanted = DEFAULT_TRANSPORT
    if wanted == "fast" and urlsplit(url).scheme not in ("http", "https"):
        return "aiohttp"
    return wanted


def stamp_clock(url: str) -> str:
    """Which clock (rxstamp.KERNEL or READ) the stamps of token events from ``url`` come from."""
    return rxstamp.clock_of(urlsplit(url).scheme, choose_transport(url))


@dataclass(frozen=True)
class RequestParams:
    """What every request's body asks for beyond its messages (stream, temperature, limits)."""
    stream: bool = True
    temperature: float | None = None
    ignore_eos: bool = False
    extra_body: dict[str, Any] = field(default_factory=dict)
    # Which body field carries the reply length on OpenAI chat: "auto" sends both max_tokens and
    # max_completion_tokens (Ollama's /v1 and LM Studio read only max_tokens; vLLM, SGLang,
    # llama.cpp and LiteLLM read either), except to api.openai.com, which rejects max_tokens
    # for some models and gets max_completion_tokens only.
    max_tokens_field: str = "auto"
    # --response-format: the JSON schema every reply should follow ({}: any JSON); a reply
    # that does not parse or validate is counted in Record.output_valid, not failed
    structured: dict[str, Any] | None = None
    # --responses-state: "client" sends a conversation's history every turn; "server" lets a
    # Responses API server keep it (store) and sends only the new turn with previous_response_id
    responses_state: str = "client"
    # --abandon: when users give up on a request (client.abandon); not part of any body
    abandon: Abandon | None = None
    # --otlp: a W3C trace id per request, kept in the record (records/trace.py); with
    # --traceparent also sent as the traceparent header so the server's spans join it
    trace_ids: bool = False
    traceparent: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"temperature": self.temperature, "ignore_eos": self.ignore_eos,
                "extra_body": self.extra_body, "max_tokens_field": self.max_tokens_field,
                "responses_state": self.responses_state}


# A timer that runs this much later than due means the event loop itself did not run (a loop
# lag in the seconds: the process was stopped, swapped out or its VM suspended), not a busy
# loop (whose lag is milliseconds: load.monitor). The monitor names the same freezes.
FROZEN_S = 2.0
# after such a freeze, how long a timeout waits for the loop to read what the sockets hold
REREAD_AFTER_FREEZE_S = 0.05


class _Watchdog:
    """One timer per request, re-armed only when it fires, so token events cost nothing extra.

    It cancels the request's task when a deadline passed; ``fired`` says which. ``clock``: the
    client's time source; ``timers=False`` for a transport that keeps virtual time
    (mock_transport.MockTransport): no timer is armed, the transport calls ``expire`` as its
    clock passes ``deadline()``, so a timeout costs no wall time."""

    __slots__ = ("_loop", "_task", "_t", "start", "last", "got_token", "fired", "_handle",
                 "_clock", "_timers", "stopped", "_due", "frozen_s", "_rechecking",
                 "patience_s", "stop_after", "flush")

    def __init__(self, task: asyncio.Task, timeouts: Timeouts, start: float,
                 clock: Callable[[], float] = perf_counter, timers: bool = True,
                 patience_s: float | None = None, stop_after: int | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = task
        self._t = timeouts
        self.start = start
        self.last = start
        self.got_token = False
        self.fired: str | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._clock = clock
        self._timers = timers
        self.stopped = False
        self._due = 0.0                 # when the armed timer is due (its lateness: a freeze)
        self.frozen_s = 0.0             # how long the loop was frozen past a deadline
        self._rechecking = False
        # --abandon (client.abandon): the user gives up without a first token after
        # patience_s; stops the reply after stop_after token events (the transports check it)
        self.patience_s = patience_s
        self.stop_after = stop_after
        # the transport's reads stamped but not yet parsed, parsed before a deadline is
        # judged (fasthttp._Pool.read_inbox): a token that arrived is never a timeout
        self.flush: Callable[[], None] | None = None
        self._arm()

    def deadline(self) -> float:
        """When, on the client's clock, the next limit passes (first token, idle or total)."""
        t = self._t
        d = self.last + t.idle_s if self.got_token else self.start + t.first_token_s
        if not self.got_token and self.patience_s is not None:
            d = min(d, self.start + self.patience_s)
        return min(d, self.start + t.total_s)

    def _arm(self) -> None:
        if not self._timers:
            return
        now = self._clock()
        delay = max(self.deadline() - now, 0.0)
        self._due = now + delay
        self._handle = self._loop.call_later(delay, self._check)

    def _expired(self) -> str | None:
        now = self._clock()
        t = self._t
        if now >= self.start + t.total_s:
            return "timeout_total"
        if not self.got_token and self.patience_s is not None \
                and now >= self.start + self.patience_s:
            return CANCELLED            # the user gave up waiting for a first token
        if not self.got_token and now >= self.start + t.first_token_s:
            return "timeout_first_token"
        if self.got_token and now >= self.last + t.idle_s:
            return "timeout_idle"
        return None

    def _check(self) -> None:
        if self.flush is not None:
            firing = self._handle
            self.flush()
            if self.stopped or self._handle is not firing:
                return                  # what was parsed ended the request, or re-armed it
        late = self._clock() - self._due
        if late > FROZEN_S and not self._rechecking:
            # The timer ran FROZEN_S+ late, a freeze: uvloop runs due timers before it reads
            # the sockets, so what the server sent meanwhile is unread: decide after a turn of
            # the loop that reads it; a limit that still passed is then the client's.
            self.frozen_s = late
            self._rechecking = True
            self._handle = self._loop.call_later(REREAD_AFTER_FREEZE_S, self._check)
            self._due = self._clock() + REREAD_AFTER_FREEZE_S
            return
        self.fired = self._expired()
        if self.fired:
            if self._rechecking and self.fired != CANCELLED:
                self.fired = "client_stall"
            self._handle = None
            self._task.cancel()
        else:
            self._rechecking = False    # the server's bytes were there: it goes on
            self._arm()

    def expire(self) -> bool:
        """A virtual-time transport's clock reached ``deadline()``: fire as the timer would
        (the request's task is cancelled, ``fired`` names the limit). False when none passed."""
        if self.stopped or self.fired:
            return bool(self.fired)
        self.fired = self._expired()
        if self.fired:
            self._task.cancel()
        return bool(self.fired)

    def first_token(self) -> None:
        """The deadline switches from first-token to idle: re-arm once if it came closer."""
        self.got_token = True
        if self._handle is not None and self.deadline() < self._handle.when() - self._loop.time() + perf_counter():
            self._handle.cancel()
            self._arm()

    def stop(self) -> None:
        self.stopped = True
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def enough(self) -> None:
        """The user stops the reply here (``stop_after`` token events came): cancel the
        request, which closes its connection, as pressing stop does."""
        if self.fired is None:
            self.fired = CANCELLED
            self.stop()
            self._task.cancel()


class AiohttpTransport:
    """The aiohttp transport (fasthttp.Transport): used for what the fast one does not cover,
    or when LLMBENCH_TRANSPORT=aiohttp."""

    def __init__(self, urls: dict[bool, str], headers: dict[str, str], fmt: Any,
                 on_head: Callable[[int, Any, Record], int], max_connections: int,
                 connect_s: float, stamp_sent: bool = True, net: Net | None = None) -> None:
        _load_aiohttp()
        self._fmt = fmt
        self._on_head = on_head
        self._headers = headers
        self._connect_s = connect_s
        self._stamp = stamp_sent
        self._net = net or Net()
        proxy_kw, proxy_headers = self._net.aiohttp_proxy(urls[True].startswith("https:"))
        self._headers = {**headers, **proxy_headers}
        self._fresh: aiohttp.ClientSession | None = None
        self._http = self._session(limit=max_connections, limit_per_host=0, ttl_dns_cache=300)
        # parsed once: aiohttp parses a str URL on every request
        self._urls = {stream: URL(u) for stream, u in urls.items()}
        self._origin = URL(urls[True]).origin()
        # the way (proxy) and the response policy the fast transport has too: no redirect
        # followed by aiohttp itself (the client decides), the environment not read again
        self._kw = {"allow_redirects": False, **proxy_kw}
        self.traceparent = False        # --traceparent: send each request's (records/trace.py)

    def _session(self, **connector: Any) -> aiohttp.ClientSession:
        return aiohttp.ClientSession(
            connector=self._net.aiohttp_connector(**connector), auto_decompress=False,
            trust_env=False, max_line_size=MAX_HEAD_BYTES, max_field_size=MAX_HEAD_BYTES,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=self._connect_s),
            trace_configs=_send_stamps() if self._stamp else None)

    def _fresh_session(self) -> aiohttp.ClientSession:
        """A session that opens a new connection for every request: used for resends only."""
        if self._fresh is None:
            self._fresh = self._session(force_close=True, limit=0)
        return self._fresh

    async def aclose(self) -> None:
        for http in (self._http, self._fresh):
            if http is not None:
                await http.close()

    async def exchange(self, stream: bool, body: bytes, rec: Record, dog: "_Watchdog",
                       texts: list[str], fresh: bool, path: str | None = None) -> str | None:
        http = self._fresh_session() if fresh else self._http
        # a UUID that carries the record's id: servers parse the header (records.ids)
        headers = {**self._headers, "x-request-id": header_id(rec.request_id)}
        if self.traceparent and rec.trace_id is not None:
            headers["traceparent"] = traceparent(rec.trace_id)
        url = self._urls[stream] if path is None else self._origin.join(URL(path, encoded=True))
        async with http.post(url, data=body, headers=headers, trace_request_ctx=rec,
                             **self._kw) as resp:
            if rec.first_byte_us is None:   # the head is in (records/phases.py)
                rec.first_byte_us = _us(rec)
            mode = self._on_head(resp.status, resp.headers, rec)
            if mode >= SOME:
                text = await self._read_some(resp)
                if rec.error is None:       # what on_head said (a redirect, a compressed
                    rec.error = text        # stream) is kept
                return resp.headers.get("location") if mode == FOLLOW else None
            if mode == STREAM:
                await self._read_stream(resp, rec, dog, texts)
            else:
                await self._read_whole(resp, rec, texts)
        return None

    @staticmethod
    async def _read_some(resp: aiohttp.ClientResponse) -> str:
        raw = await resp.content.read(ERROR_BODY_READ_BYTES)
        return body_text(raw, resp.headers.get("content-encoding", ""))

    async def _read_stream(self, resp: aiohttp.ClientResponse, rec: Record, dog: _Watchdog,
                           texts: list[str]) -> None:
        """The transport: each chunk is timestamped on arrival and handed, with its time, to
        the stream decoder, which fills the record; this loop only keeps the watchdog and the
        connection."""
        undo = _surface_parser_error(resp)
        try:
            await self._stream_body(resp, rec, dog, texts)
        finally:
            if undo is not None:
                undo()

    async def _stream_body(self, resp: aiohttp.ClientResponse, rec: Record, dog: _Watchdog,
                           texts: list[str]) -> None:
        dec = StreamDecoder(self._fmt, rec, texts)
        times = rec.token_times
        content = resp.content
        async for chunk in content.iter_any():
            t = perf_counter()
            r = dec.feed(t, chunk)
            if r == NOTHING:
                continue
            if r == WHOLE:
                rec.stream = False
                await self._read_whole(resp, rec, texts, first=chunk)
                return
            dog.last = t        # the idle limit is between events, so only events re-arm it
            if not dog.got_token and times:
                dog.first_token()
            if r == EVENTS:
                if dog.stop_after is not None and len(times) >= dog.stop_after:
                    dog.enough()
                continue
            if r == FAILED:
                return
            # ENDED: the end marker ends the request, whether or not the server closes the
            # stream; the rest is drained as DRAIN_AFTER_END_S says.
            dog.stop()
            if not content.is_eof():
                rec.done = perf_counter()
                try:
                    # a token event after the end marker fails the request (decoder.after_end)
                    dec.after_end(await asyncio.wait_for(content.read(), DRAIN_AFTER_END_S))
                except (asyncio.TimeoutError, aiohttp.ClientError):
                    resp.close()
            dec.finish()
            return
        dec.close(perf_counter())

    async def _read_whole(self, resp: aiohttp.ClientResponse, rec: Record, texts: list[str],
                          first: bytes = b"") -> None:
        raw = first + await resp.read() if first else await resp.read()
        decode_whole(self._fmt, decoded(raw, resp.headers.get("content-encoding", "")),
                     perf_counter(), rec, texts)


def _surface_parser_error(resp: Any) -> Callable[[], None] | None:
    """aiohttp (3.14) puts a parser error found mid-body (a bad chunk size) on the connection's
    protocol, not on the body's stream, closes the socket and leaves the body waiting: the
    request then ends at the idle limit as the server's timeout. When the connection closes
    with such an error, hand it to the body, so it ends there as the protocol error it is."""
    conn = resp.connection
    proto = getattr(conn, "protocol", None) if conn is not None else None
    closed = getattr(proto, "closed", None)
    if closed is None or not hasattr(proto, "exception"):
        return None
    content = resp.content

    def lost(_: Any) -> None:
        exc = proto.exception()
        if exc is not None and not content.is_eof() and content.exception() is None:
            content.set_exception(exc)
    closed.add_done_callback(lost)
    # the connection outlives the request (kept alive): the hook must not
    return lambda: closed.remove_done_callback(lost)


class Client:
    """One HTTP client for a run; ``send`` is called concurrently by the load shape."""

    def __init__(self, target: Target, params: RequestParams | None = None,
                 timeouts: Timeouts | None = None, max_connections: int = 1024,
                 served_by_header: str | None = None,
                 count_tokens: Callable[[str], int] | None = None,
                 transport: "str | TransportFactory | None" = None) -> None:
        self.target = target
        self.params = params or RequestParams()
        self.timeouts = timeouts or Timeouts()
        self._served_by = (served_by_header.lower(),) if served_by_header else SERVED_BY_HEADERS
        self._count_tokens = count_tokens
        self._fmt = target.wire_format
        self._headers = {**target.request_headers(), "accept-encoding": "identity"}
        self._max_connections = max_connections
        self._tr: Transport | None = None
        origin = urlsplit(target.base_url)
        self._origin = (origin.scheme, origin.hostname, origin.port)
        self._redirect_warned = False
        # An injected transport (a TransportFactory: MockTransport(handler), or a transport
        # class), else "aiohttp" or "fast" (choose_transport)
        self._factory: TransportFactory | None = None
        if transport is not None and not isinstance(transport, str):
            self._factory = transport
            self.transport = str(getattr(transport, "name", None) or type(transport).__name__)
        else:
            self.transport = choose_transport(target.base_url, transport)
        self._clock: Callable[[], float] = perf_counter
        self._timers = True
        # stamp rec.sent (the client's own send delay); off only to measure what it costs
        self.send_stamps = True
        self._trace_ids = self.params.trace_ids or self.params.traceparent
        ab = self.params.abandon
        self._patience_s = ab.after_s if ab is not None else None
        self._stops = ab.chooser() if ab is not None else None
        # clients for other APIs on the same server (send's ``api``: a recording's replay)
        self._others: dict[str, Client] = {}
        if self.params.max_tokens_field == "auto":
            host = urlsplit(target.base_url).hostname or ""
            field_ = "max_completion_tokens" if host.endswith("api.openai.com") else "both"
            self.params = replace(self.params, max_tokens_field=field_)

    async def __aenter__(self) -> "Client":
        kind: TransportFactory = self._factory or (
            fasthttp.FastTransport if self.transport == "fast" else AiohttpTransport)
        urls = {stream: self.target.endpoint_for(stream) for stream in (True, False)}
        self._tr = kind(urls, self._headers, self._fmt, self._on_head, self._max_connections,
                        self.timeouts.connect_s, self.send_stamps, net=self.target.net)
        if self.params.traceparent:
            self._tr.traceparent = True     # type: ignore[attr-defined]
        clock = getattr(self._tr, "clock", None)
        if clock is not None:           # virtual time: the transport moves the deadlines
            self._clock, self._timers = clock, False
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._tr is not None:
            await self._tr.aclose()
        self._tr = None
        others, self._others = self._others, {}
        for c in others.values():
            await c.__aexit__(*exc)

    async def _for_api(self, api: str) -> "Client":
        """This client for another API of the same server (its own format, endpoint and
        headers; the same options), opened on first use."""
        c = self._others.get(api)
        if c is None:
            c = Client(self.target.for_api(api), self.params, self.timeouts,
                       self._max_connections, None if self._served_by is SERVED_BY_HEADERS
                       else self._served_by[0], self._count_tokens, self._factory or self.transport)
            c.send_stamps = self.send_stamps
            await c.__aenter__()
            self._others[api] = c
        return c

    async def preconnect(self, n: int) -> int:
        """Open up to ``n`` connections before the load starts (the fast transport; aiohttp
        opens them on demand): how many were opened. Connecting is not part of sending: in a
        wave of N users starting together, N connects in the one event loop put a whole wave's
        worth of llmbench's own work between each request's start and its bytes on the wire
        (256 streams: 22 ms send delay p50 in the first wave, scripts/bench_wire.py)."""
        tr = self._tr
        pre = getattr(tr, "preconnect", None)
        if pre is None or n <= 0:
            return 0
        return await pre(min(n, self._max_connections))

    def body(self, messages: list[dict[str, str]], max_tokens: int | None,
             extra: dict[str, Any] | None = None) -> dict[str, Any]:
        body = self._fmt.body(self.target.model, messages, max_tokens, self.params.stream,
                              self.params.as_dict())
        if extra:
            body.update(extra)
        return body

    async def send(self, messages: list[dict[str, str]], max_tokens: int | None, rec: Record,
                   prompt_tokens_client: int | None = None,
                   extra: dict[str, Any] | None = None, abandon: bool = True,
                   api: str | None = None) -> str:
        """Send one request and fill ``rec``; return the reply text (for multi-turn history;
        a wire.agents.ReplyText with its tool calls when it made any). ``extra``: fields for
        this request's body only (previous_response_id, an agent step's tools). ``abandon``
        False: the user never gives up on this one (the preflight), whatever --abandon says.
        ``api``: send it in this API instead of the target's (a recording's replay)."""
        if api is not None and api != self.target.api:
            other = await self._for_api(api)
            return await other.send(messages, max_tokens, rec, prompt_tokens_client, extra,
                                    abandon)
        tr = self._tr
        assert tr is not None, "use 'async with Client(...)'"
        body = self.body(messages, max_tokens, extra)
        content = encode_body(body)
        expect = self._fmt.items_expected
        items = expect(body) if expect is not None else None
        task = asyncio.current_task()
        assert task is not None
        texts: list[str] = Reply()      # the text pieces, and the tool calls' (an agent's history)
        rec.max_tokens = max_tokens
        if self._trace_ids and rec.trace_id is None:
            rec.trace_id = new_trace_id()
        clock = self._clock
        rec.start = clock()
        stops = self._stops if abandon else None
        dog = _Watchdog(task, self.timeouts, rec.start, clock, self._timers,
                        self._patience_s if abandon else None,
                        stops.stop_after() if stops is not None else None)
        stream = self.params.stream
        path: str | None = None         # where a followed redirect pointed
        while True:
            try:
                moved = await tr.exchange(stream, content, rec, dog, texts, rec.retries > 0,
                                          path)
                if moved is not None and path is None:
                    path = self._follow(moved, rec, stream)
                    continue
                dog.stop()
            except asyncio.CancelledError:
                dog.stop()
                if dog.fired is None:
                    rec.error_kind, rec.error = "interrupted", "the run was stopped"
                    rec.done = clock()
                    raise
                if hasattr(task, "uncancel"):
                    task.uncancel()
                rec.error_kind = dog.fired
                rec.error = f"no {'event' if dog.got_token else 'token'} within the limit"
                if dog.fired == CANCELLED:
                    # the user gave up and closed the connection (--abandon)
                    rec.error = (f"the user stopped the reply after {len(rec.token_times)} "
                                 "token events" if dog.got_token else
                                 f"the user gave up: no first token within "
                                 f"{self._patience_s:g} s")
                if dog.fired == "client_stall":
                    limit = "idle" if dog.got_token else "first-token"
                    rec.error = (f"llmbench itself was frozen for {dog.frozen_s:.1f} s (its event "
                                 f"loop did not run) when the {limit} limit passed: not "
                                 "counted against the server")
            except Exception as exc:  # noqa: BLE001 - the client must never raise for a server fault
                if rec.status is None and rec.retries < MAX_RESENDS and _stale_connection(exc):
                    # A kept-alive connection the server had already closed (llama.cpp's closes
                    # after each streamed reply while its headers promise keep-alive): the
                    # request never reached it. Resent (MAX_RESENDS); it keeps its first start.
                    rec.retries += 1
                    continue
                dog.stop()
                self._transport_error(exc, rec)
            break
        if not rec.done:            # set at the end marker when the rest was drained after it
            rec.done = clock()
        self._finish(rec, texts, prompt_tokens_client, items)
        return reply_text(texts)

    def _on_head(self, status: int, headers: Any, rec: Record) -> int:
        """The response's status and headers are in: record them, and say how to read the body
        (a fasthttp mode: STREAM, WHOLE_BODY, SOME or FOLLOW). Both transports call it."""
        rec.status = status
        self._read_headers(headers, rec)
        if status >= 400:
            rec.error_kind = "http_status"
            return SOME
        if 300 <= status < 400 and status != 304:
            # say where it points (a target should be the URL that answers); the policy is the
            # module docstring's: only a same-origin 307/308 keeps the method and body
            location = headers.get("location", "")
            rec.error_kind = "http_status"
            same = status in (307, 308) and location and self._same_origin(location)
            why = "" if same or status not in (307, 308) else ": another origin"
            rec.error = f"redirected to {location[:150] or '?'} (not followed{why})"
            return FOLLOW if same else SOME
        if "html" in headers.get("content-type", ""):
            # a web page, not an API: a wrong URL or a login/proxy page in the way
            rec.error_kind = "malformed_event"
            return SOME
        encoding = headers.get("content-encoding", "")
        if self.params.stream and encoding and encoding.lower() != "identity":
            # token times through a compressor are the compressor's flushes, not the
            # server's events: named, not decoded (and not read as a cut stream)
            rec.error_kind = "malformed_event"
            rec.error = (f"the stream is compressed (content-encoding: {encoding[:20]}) although "
                         "llmbench asked for none (accept-encoding: identity): a proxy or the "
                         "server compresses it; turn compression off for this path")
            return SOME
        return STREAM if self.params.stream else WHOLE_BODY

    def _same_origin(self, location: str) -> bool:
        u = urlsplit(urljoin(self.target.endpoint, location))
        try:
            return (u.scheme, u.hostname, u.port) == self._origin
        except ValueError:
            return False

    def _follow(self, location: str, rec: Record, stream: bool) -> str:
        """Follow a same-origin 307/308 once: the path (and query) to send to, the record reset
        for the new answer and marked, and a warning once per client to fix the URL."""
        url = urljoin(self.target.endpoint_for(stream), location)
        parts = urlsplit(url)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        status = rec.status
        rec.status = rec.error_kind = rec.error = rec.served_by = None
        rec.note = f"followed a {status} redirect to {self.target.shown(path)}"
        if not self._redirect_warned:
            self._redirect_warned = True
            suffix = self._fmt.path(stream)
            fix = (f"--url {parts.scheme}://{parts.netloc}{parts.path[:-len(suffix)]}"
                   f"{'?' + parts.query if parts.query else ''}"
                   if parts.path.endswith(suffix) else f"--endpoint {parts.path}")
            fix = self.target.shown(fix)
            print(f"warning: POST {self.target.shown(self.target.endpoint_for(stream))} "
                  f"answered {status}, a redirect to {self.target.shown(url)}: followed once "
                  f"per request (an extra round trip in every TTFT); pass {fix} instead",
                  file=sys.stderr, flush=True)
        return path

    def _read_headers(self, headers: CIMultiDictProxy[str], rec: Record) -> None:
        for name in self._served_by:
            value = headers.get(name)
            if value:
                rec.served_by = value[:120]
                break
        q = headers.get(QUEUE_HEADER)
        if q:
            try:
                ms = float(q)
            except ValueError:
                return
            if math.isfinite(ms) and ms >= 0:       # a broken header is dropped, not stored
                rec.server_queue_ms = ms

    @staticmethod
    def _transport_error(exc: Exception, rec: Record) -> None:
        name = type(exc).__name__
        if _malformed_http(exc):
            # not well-formed HTTP/1.1 (contradictory framing headers, a bad chunk size): the
            # server or a proxy broke the protocol; not a connect failure, not a cut
            rec.error_kind = "protocol"
        elif rec.status is not None:
            rec.error_kind = "stream_cut"       # the response had begun: it was cut short
        elif isinstance(exc, asyncio.TimeoutError) or (
                aiohttp is not None and isinstance(exc, aiohttp.ServerTimeoutError)):
            rec.error_kind = "timeout_connect"
        else:
            rec.error_kind = "connect"
        rec.error = " ".join(f"{name}: {exc}".split())[:200]      # aiohttp's span lines

    def _finish(self, rec: Record, texts: list[str], prompt_tokens_client: int | None,
                items: int | None = None) -> None:
        if rec.error_kind == "http_status" and rec.error and self._fmt.error_text is not None:
            # an error body as the API shapes it: its own type and message (the Messages API)
            rec.error = self._fmt.error_text(rec.error) or rec.error
        times = rec.token_times
        if times:
            rec.first_token = times[0]
            rec.end = times[-1]
        if rec.prompt_tokens is None and prompt_tokens_client is not None:
            rec.prompt_tokens = prompt_tokens_client
            rec.prompt_tokens_source = "client"
        if rec.cached_tokens is None and isinstance(rec.server_timing, dict):
            # llama.cpp's timings: cache_n prompt tokens reused from the slot's cache, prompt_n
            # computed (its usage names no cached tokens in older builds)
            rec.cached_tokens = count(rec.server_timing.get("cache_n"))
        if rec.output_tokens is None:
            self._count_output(rec, times, texts)
        if rec.error_kind is None and rec.status is not None and rec.status < 400:
            self._judge(rec, times, texts, items)

    def _count_output(self, rec: Record, times: list[float], texts: list[str]) -> None:
        """The reply's output tokens when the server gave none, and their source."""
        if times and rec.output_tokens_source == "events":
            # the server's completion count was not a count (decoder.apply_usage): its token
            # events are the count, as records.record.clean does for old logs
            rec.output_tokens = len(times)
            rec.note = f"{rec.note}, counted {len(times)} token events instead"
        elif rec.embeddings is not None:
            rec.output_tokens, rec.output_tokens_source = 0, "server"   # vectors, not tokens
        elif times and rec.finish_reason == "length" \
                and rec.max_tokens and len(times) <= rec.max_tokens \
                and not rec.reasoning_tokens:
            # no usage, but the server says it stopped at the length asked: that is the count,
            # exactly (a word tokenizer was 3-9 % off a true 64)
            rec.output_tokens, rec.output_tokens_source = rec.max_tokens, "length"
        elif times and _approximate(self._count_tokens) \
                and _one_token_each(texts):
            # no usage and only an approximate tokenizer: where each event is a token's worth
            # of text (llama.cpp and llama-cpp-python's servers stream one token an event),
            # the events are the better count; the last may carry only the finish reason
            rec.output_tokens = sum(1 for x in texts if x)
            rec.output_tokens_source = "events"
        elif times:
            text = "".join(texts)
            if self._count_tokens is not None:
                # the text is the answer's; reasoning counts as output, as in vLLM's usage
                rec.output_tokens = self._count_tokens(text) + (rec.reasoning_tokens or 0)
            else:
                rec.output_tokens = len(times)
            rec.output_tokens_source = "tokenizer"

    def _judge(self, rec: Record, times: list[float], texts: list[str],
               items: int | None) -> None:
        """A reply the server answered without error (status < 400): ok, or why not."""
        if not times:
            rec.error_kind, rec.error = "no_token", "the response carried no token"
        elif items is not None and rec.embeddings != items:
            # an embeddings reply with a null or empty vector, or not one per input: it
            # did not do the work asked, whatever its status
            rec.error_kind = "bad_vectors"
            rec.error = (f"the reply held {rec.embeddings or 0} vectors for {items} "
                         f"input{'s' if items != 1 else ''} (a null or empty vector, or "
                         "too few or too many)")
        else:
            rec.ok = True
            if self.params.structured is not None and rec.first_tool is None:
                rec.output_valid = check_reply("".join(texts), self.params.structured or None)


def _approximate(count_tokens: Any) -> bool:
    """Whether the client's token counter is an approximate one (the word tokenizer): a bound
    ``Tokenizer.count`` says so; any other counter is taken as exact."""
    owner = getattr(count_tokens, "__self__", None)
    return bool(getattr(owner, "approximate", False))


# an event whose text averages this many characters or fewer carries one token (English
# averages about 4 characters a token; a server that streams 4 tokens an event sends ~16)
ONE_TOKEN_CHARS = 6.0


def _one_token_each(texts: list[str]) -> bool:
    full = [x for x in texts if x]
    return bool(full) and sum(len(x) for x in full) / len(full) <= ONE_TOKEN_CHARS
