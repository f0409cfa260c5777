"""``llmbench record``'s reverse proxy: real clients talk to it instead of the server; every
request goes upstream unchanged and every reply comes back byte for byte as it arrives, while
the LLM requests are written to a recording (workload/recording.py).

The hot path does only this: read the request, send it on, and write each chunk of the reply to
the client the moment it arrives, noting its arrival time. Everything else (decoding the
stream, linking sessions, anonymising, writing the line) runs after the request finished, in
one writer thread, so the client's TTFT through the recorder is the server's plus one loopback
hop. Each line is written and flushed when its request finishes: a crash loses only the requests
in flight.

What is recorded: a POST with a JSON object body to an endpoint of a wire format llmbench
speaks (wire/registry.py). Anything else passes through, not recorded. Request headers are
forwarded to the upstream and never written anywhere (API keys travel in them).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import IO, Any, Callable
from urllib.parse import urlsplit, urlunsplit

from llmbench.wire import registry
from llmbench.wire.events import TOKEN, TOKEN_END, Usage
from llmbench.wire.format import WireFormat
from llmbench.workload.anonymise import Anonymiser, Counts, chunks
from llmbench.workload.synthetic import prepare_unit_words
from llmbench.workload.recording import (Linker, PrefixShare, header, max_tokens_of,
                                         messages_of, sampling_of)

HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
                 "trailer", "trailers", "transfer-encoding", "upgrade", "host", "content-length"})
_SUFFIXES = sorted(((s, f) for f in registry.FORMATS for s in f.url_suffixes),
                   key=lambda sf: len(sf[0]), reverse=True)
MAX_BODY_BYTES = 64 << 20            # a request body past this is passed on, not recorded


def format_of(method: str, path: str) -> WireFormat | None:
    if method != "POST":
        return None
    for suffix, fmt in _SUFFIXES:
        if path.endswith(suffix):
            return fmt
    return None


def public_url(url: str) -> str:
    """The upstream as the file may name it: no user:password, no query."""
    p = urlsplit(url)
    host = p.hostname or ""
    if p.port:
        host += f":{p.port}"
    return urlunsplit((p.scheme, host, p.path, "", ""))


@dataclass
class Exchange:
    """One LLM request as the proxy saw it: what the writer thread turns into a line."""

    rid: int
    fmt: WireFormat
    path: str
    body: dict[str, Any]
    arrival: float                       # perf_counter at the request's arrival
    status: int = 0
    chunks: list[tuple[float, bytes]] = field(default_factory=list)
    end: float = 0.0
    encoding: str = ""
    cancelled: bool = False


@dataclass
class Stats:
    """What `llmbench record` saw: requests recorded, passed through and failed."""
    requests: int = 0
    passed: int = 0                      # not LLM requests: passed through, not recorded
    failed: int = 0                      # upstream down (502s)
    ttft_ms: list[float] = field(default_factory=list)
    e2el_ms: list[float] = field(default_factory=list)
    itl_ms: list[float] = field(default_factory=list)
    prompt_tokens: int = 0
    output_tokens: int = 0


def _decode_body(ex: Exchange) -> bytes:
    raw = b"".join(c for _, c in ex.chunks)
    if ex.encoding in ("gzip", "deflate"):
        try:
            return zlib.decompress(raw, 16 + zlib.MAX_WBITS if ex.encoding == "gzip" else 0)
        except zlib.error:
            return b""
    return raw


def streamed(ex: Exchange) -> bool:
    """Whether the reply is a stream: as the body says; Ollama streams unless told not to."""
    return bool(ex.body.get("stream", ex.fmt.name == "ollama"))


def observe(ex: Exchange) -> dict[str, Any]:
    """Usage, reply text, the reply's id and the token times of one finished exchange."""
    stream = streamed(ex)
    usage = ref = finish = None
    tokens: list[float] = []
    reply: list[str] = []
    raw = _decode_body(ex) if ex.encoding in ("gzip", "deflate") or not stream else b""
    if stream and not raw:
        framer = ex.fmt.make_framer()
        got = [(t, payload) for t, chunk in ex.chunks for payload in framer.feed(chunk)]
        # what the framer holds at the end (no arrival time of its own) adds usage and id only
        for t, payload in got + [(None, payload) for payload in framer.flush()]:
            ev = ex.fmt.classify(payload)
            if t is not None:
                if ev.kind in (TOKEN, TOKEN_END):
                    tokens.append(t)
                    if ev.text and not ev.reasoning:
                        reply.append(ev.text)
                finish = ev.finish_reason or finish
            usage = _merge(usage, ev.usage)
            ref = ev.ref or ref
    else:
        try:
            obj = json.loads(raw) if raw else None
        except (ValueError, RecursionError):
            obj = None
        if isinstance(obj, dict):
            ev = ex.fmt.parse_full(obj)
            usage, ref, finish = ev.usage, ev.ref, ev.finish_reason
            if ev.text:
                reply.append(ev.text)
    ttft = (tokens[0] - ex.arrival) * 1000 if tokens else None
    itl = [(b - a) * 1000 for a, b in zip(tokens, tokens[1:])]
    return {"usage": usage, "ref": ref, "ttft_ms": ttft, "itl_ms": itl,
            "e2el_ms": (ex.end - ex.arrival) * 1000, "events": len(tokens),
            "reply": "".join(reply),
            # wire formats map their stop reasons to chat's (tool_use -> tool_calls)
            "tool_call": finish in ("tool_calls", "function_call")}


def _merge(a: Usage | None, b: Usage | None) -> Usage | None:
    """Usage reported in pieces (the Messages API: the prompt at the start, the output at the
    end): each count as last reported."""
    if a is None or b is None:
        return b or a
    return Usage(b.prompt_tokens if b.prompt_tokens is not None else a.prompt_tokens,
                 b.completion_tokens if b.completion_tokens is not None else a.completion_tokens,
                 b.cached_tokens if b.cached_tokens is not None else a.cached_tokens)


class Writer:
    """The recording file and everything done after a request finished (one thread)."""

    def __init__(self, out: IO[str], tokenizer: Callable[[str | None], Any], keep_text: bool,
                 upstream: str, log: Callable[[str], None], seed: int = 0) -> None:
        self.out, self.keep_text, self.log = out, keep_text, log
        self._make_tok = tokenizer
        self.tok: Any = None
        self.anon: Anonymiser | None = None
        self.linker = Linker()
        self.share: PrefixShare | None = None
        self.stats = Stats()
        self.upstream, self.seed = upstream, seed
        self.t0: float | None = None
        self.broken = False                  # the disk refused a write: said once
        self._ends: dict[int, float] = {}    # request -> when its reply ended (perf_counter)

    def _start(self, model: str | None, t0: float) -> None:
        self.tok = self._make_tok(model)
        if self.tok.server is not None:
            # a recorder runs for hours: the server tokenizer's budget is a workload's (30 s);
            # and one-token words make synthetic text of N tokens without asking the server
            self.tok.server._deadline = float("inf")
            prepare_unit_words(self.tok)
        self.counts = Counts(self.tok)
        self.anon = None if self.keep_text else Anonymiser(self.tok, self.seed, self.counts)
        self.share = PrefixShare(self.counts)
        self.t0 = t0
        started = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
        self._write(header(self.keep_text, self.tok.name, self.upstream, started))

    def _write(self, d: dict[str, Any]) -> None:
        if self.broken:
            return
        try:
            self.out.write(json.dumps(d, ensure_ascii=False) + "\n")
            self.out.flush()
        except OSError as exc:
            if not self.broken:
                self.log(f"llmbench record: cannot write the recording ({exc.strerror or exc}); "
                         "requests still pass through, unrecorded")
            self.broken = True

    def add(self, ex: Exchange) -> None:
        if self.tok is None:
            model = ex.body.get("model")
            self._start(model if isinstance(model, str) else None, ex.arrival)
        assert self.share is not None and self.t0 is not None
        seen = observe(ex)
        msgs = messages_of(ex.fmt.name, ex.body)
        prev_ref = ex.body.get("previous_response_id")
        link = self.linker.link(ex.rid, msgs, prev_ref if isinstance(prev_ref, str) else None,
                                seen["ref"], ex.arrival)
        self.linker.ended(link.session, ex.end, seen["tool_call"])
        self.counts.prime(c for m in msgs for c in chunks(m.text))
        self.share.add(msgs)
        u = seen["usage"]
        prompt = u.prompt_tokens if u else None
        output = u.completion_tokens if u else None
        if output is None and seen["events"]:
            output = seen["events"]
        s = self.stats
        s.requests += 1
        s.prompt_tokens += prompt or 0
        s.output_tokens += output or 0
        if seen["ttft_ms"] is not None:
            s.ttft_ms.append(seen["ttft_ms"])
        s.e2el_ms.append(seen["e2el_ms"])
        s.itl_ms.extend(seen["itl_ms"])
        body = ex.body if self.anon is None else self.anon.body(ex.body)
        tools = ex.body.get("tools")
        line = {"timestamp": round((ex.arrival - self.t0) * 1000, 3),
                "session_id": link.session, "turn": link.turn,
                "after_ms": None, "parent_session": link.parent,
                "api": ex.fmt.name, "endpoint": ex.path, "status": ex.status,
                "model": ex.body.get("model"), "stream": streamed(ex),
                "request": body, "new_from": link.new_from,
                "max_tokens": max_tokens_of(ex.body), "sampling": sampling_of(body),
                "tools": len(tools) if isinstance(tools, list) else 0,
                "input_length": prompt, "output_length": output,
                "cached_tokens": u.cached_tokens if u else None,
                "ttft_ms": None if seen["ttft_ms"] is None else round(seen["ttft_ms"], 3),
                "itl_ms": [round(x, 3) for x in seen["itl_ms"]],
                "e2el_ms": round(seen["e2el_ms"], 3)}
        if ex.cancelled:
            line["cancelled"] = True
        if link.prev_id is not None and link.prev_id in self._ends:
            line["after_ms"] = round((ex.arrival - self._ends[link.prev_id]) * 1000, 3)
        self._ends[ex.rid] = ex.end
        self._write(line)


class RecorderProxy:
    """The aiohttp application: one handler for every path."""

    def __init__(self, upstream: str, writer: Writer, log: Callable[[str], None]) -> None:
        self.upstream = upstream.rstrip("/")
        self.writer = writer
        self.log = log
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="llmbench-record")
        self.session: Any = None
        self.rid = 0
        self.pending: set[asyncio.Future[Any]] = set()

    async def handle(self, request: Any) -> Any:
        from aiohttp import ClientError, web
        arrival = time.perf_counter()
        body = await request.read()
        fmt = format_of(request.method, request.path)
        ex: Exchange | None = None
        if fmt is not None and len(body) <= MAX_BODY_BYTES:
            try:
                obj = json.loads(body)
            except (ValueError, RecursionError):
                obj = None
            if isinstance(obj, dict):
                self.rid += 1
                ex = Exchange(self.rid, fmt, request.path, obj, arrival)
        if ex is None:
            self.writer.stats.passed += 1
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in HOP]
        url = self.upstream + request.path_qs
        try:
            up = await self.session.request(request.method, url, headers=headers, data=body,
                                            allow_redirects=False)
        except (ClientError, OSError, asyncio.TimeoutError) as exc:
            self.writer.stats.failed += 1
            why = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
            self.log(f"llmbench record: {request.method} {request.path}: upstream "
                     f"{public_url(self.upstream)} unreachable ({why})")
            return web.Response(status=502, text=f"llmbench record: the upstream "
                                f"{public_url(self.upstream)} is unreachable ({why})\n")
        try:
            resp = web.StreamResponse(status=up.status, reason=up.reason)
            for k, v in up.headers.items():
                if k.lower() not in HOP:
                    resp.headers.add(k, v)
            if up.content_length is not None and "Content-Encoding" not in up.headers:
                resp.content_length = up.content_length
            await resp.prepare(request)
            if ex is not None:
                ex.status, ex.encoding = up.status, up.headers.get("Content-Encoding", "")
            try:
                async for chunk in up.content.iter_any():
                    t = time.perf_counter()
                    await resp.write(chunk)
                    if ex is not None:
                        ex.chunks.append((t, chunk))
                await resp.write_eof()
            except (ConnectionResetError, ClientError, asyncio.CancelledError):
                if ex is not None:
                    ex.cancelled = True
                if ex is None or not ex.chunks:
                    raise
            return resp
        finally:
            up.release()
            if ex is not None:
                ex.end = time.perf_counter()
                if ex.status:
                    fut = asyncio.get_running_loop().run_in_executor(self.pool, self._add, ex)
                    self.pending.add(fut)
                    fut.add_done_callback(self.pending.discard)

    def _add(self, ex: Exchange) -> None:
        try:
            self.writer.add(ex)
        except Exception as exc:                # noqa: BLE001 - a request is lost, not the proxy
            self.log(f"llmbench record: request {ex.rid} ({ex.path}) not recorded: "
                     f"{type(exc).__name__}: {exc}")

    async def open(self) -> None:
        import aiohttp
        self.session = aiohttp.ClientSession(
            auto_decompress=False, connector=aiohttp.TCPConnector(limit=0),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
            skip_auto_headers=("User-Agent", "Accept-Encoding", "Content-Type"))

    async def close(self) -> None:
        if self.pending:
            await asyncio.gather(*list(self.pending), return_exceptions=True)
        if self.session is not None:
            await self.session.close()
        self.pool.shutdown(wait=True)


async def serve(upstream: str, host: str, port: int, writer: Writer,
                listening: Callable[[int], None], stop: asyncio.Event,
                log: Callable[[str], None] = lambda s: print(s, file=sys.stderr)) -> None:
    """Proxy until ``stop`` is set; then finish writing what finished."""
    from aiohttp import web
    # the writer thread's work (decoding, anonymising) may hold the GIL for a whole switch
    # interval (5 ms by default) while a reply's chunk waits on the event loop: a shorter one
    # bounds that wait, the hot path being the point of a recorder
    sys.setswitchinterval(0.0005)
    proxy = RecorderProxy(upstream, writer, log)
    await proxy.open()
    app = web.Application(client_max_size=MAX_BODY_BYTES * 4)
    app.router.add_route("*", "/{tail:.*}", proxy.handle)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
        bound = int(runner.addresses[0][1]) if runner.addresses else port
        listening(bound)
        await stop.wait()
    finally:
        await runner.cleanup()
        await proxy.close()
