"""GET a page over plain http://: what the server probes and the telemetry scrapers ask.

Why not aiohttp: importing it costs ~0.15 s of CPU (its connector builds SSL contexts at
import), half of a 1-request run's whole start-up (issue 50 §2), to fetch /metrics once a
second. This is asyncio streams and a page parser: HTTP/1.1, kept-alive connections (one
per concurrent GET, reused), bodies framed by Content-Length, chunks or the connection's end,
gzip/deflate decoded, same-origin redirects followed (as aiohttp's session did), a forward
proxy spoken to in absolute form with the proxy URL's credentials (netconfig.Net). https://
roots keep aiohttp (scrape.ServerProbe.session): TLS through a CONNECT tunnel and client
certificates are its job, and TLS loads an SSL context anyway.

Errors are OSErrors (``PageError``: not HTTP, too large, cut short) or the OS's own, so the
probes' ``except (..., OSError)`` catch them; the caller's deadline is asyncio.wait_for's.
"""

from __future__ import annotations

import asyncio
import sys
import zlib
from urllib.parse import urljoin, urlsplit

from llmbench.client.netconfig import Net

MAX_HEAD_BYTES = 64 << 10
MAX_REDIRECTS = 10
USER_AGENT = f"Python/{sys.version_info[0]}.{sys.version_info[1]} llmbench-probe"


class PageError(ConnectionError):
    """The answer was not a whole HTTP page within bounds; the message says how."""


class _Conn:
    __slots__ = ("reader", "writer", "reused")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer, self.reused = reader, writer, False

    def close(self) -> None:
        try:
            self.writer.close()
        except (OSError, RuntimeError):         # a loop already closed: nothing to free
            pass


class PlainSession:
    """GETs to one http:// root (scheme://host:port), as ``async with`` a session."""

    def __init__(self, root: str, net: Net | None = None) -> None:
        u = urlsplit(root)
        if u.scheme != "http":
            raise ValueError(f"{root}: not an http:// address")
        self.root = f"http://{u.netloc.rpartition('@')[2]}"
        self.host_header = u.netloc.rpartition("@")[2]
        self.proxy = net.proxy if net is not None and net.proxy else None
        self.proxy_auth = net.proxy_authorization if self.proxy else None
        where = urlsplit(self.proxy) if self.proxy else u
        self.addr = (where.hostname or "", where.port or 80)
        self._idle: list[_Conn] = []

    async def __aenter__(self) -> "PlainSession":
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        while self._idle:
            self._idle.pop().close()

    async def get(self, path: str, headers: dict[str, str], limit: int) -> tuple[int, str]:
        """(status, text) of GET root+path, following same-origin redirects; the body read
        to at most ``limit`` bytes (decoded), larger is a PageError."""
        for _ in range(MAX_REDIRECTS + 1):
            status, head, body = await self._get(path, headers, limit)
            where = head.get("location")
            if status not in (301, 302, 303, 307, 308) or not where:
                return status, _text(body, head.get("content-type", ""))
            url = urljoin(self.root + path, where)
            if not url.startswith(self.root + "/"):
                return status, _text(body, head.get("content-type", ""))
            path = url[len(self.root):]
        raise PageError(f"{self.root}{path}: more than {MAX_REDIRECTS} redirects")

    async def _get(self, path: str, headers: dict[str, str], limit: int
                   ) -> tuple[int, dict[str, str], bytes]:
        target = self.root + path if self.proxy else path
        given = {k.lower() for k in headers}
        lines = [f"GET {target} HTTP/1.1"] + [  # the caller's headers replace these (as aiohttp)
            f"{k}: {v}" for k, v in (("Host", self.host_header), ("Accept", "*/*"),
                                     ("Accept-Encoding", "gzip, deflate"),
                                     ("User-Agent", USER_AGENT)) if k.lower() not in given]
        if self.proxy_auth:
            lines.append(f"Proxy-Authorization: {self.proxy_auth}")
        lines += [f"{k}: {v}" for k, v in headers.items()]
        request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        while True:
            conn = self._idle.pop() if self._idle else await self._open()
            try:
                conn.writer.write(request)
                got = await _read(conn.reader, limit, self.root + path)
            except (ConnectionResetError, BrokenPipeError, asyncio.IncompleteReadError,
                    _Closed) as exc:
                conn.close()
                if conn.reused:         # a kept-alive connection the server had closed
                    continue
                if isinstance(exc, (_Closed, asyncio.IncompleteReadError)):
                    raise PageError(f"{self.root}{path}: the connection ended "
                                    "before the whole answer") from None
                raise
            except BaseException:       # a deadline, a bad page: the connection is unusable
                conn.close()
                raise
            status, head, body, keep = got
            if keep:
                conn.reused = True
                self._idle.append(conn)
            else:
                conn.close()
            return status, head, body

    async def _open(self) -> _Conn:
        reader, writer = await asyncio.open_connection(*self.addr, limit=MAX_HEAD_BYTES)
        return _Conn(reader, writer)


class _Closed(Exception):
    """The connection ended before a status line (a stale kept-alive one: asked again)."""


async def _read(reader: asyncio.StreamReader, limit: int, url: str
                ) -> tuple[int, dict[str, str], bytes, bool]:
    """(status, headers in lower case, body, whether the connection can be kept)."""
    status, version, head = await _head(reader, url)
    while 100 <= status < 200:                  # 100 Continue and the like: the answer follows
        status, version, head = await _head(reader, url)
    keep = version != b"HTTP/1.0" and "close" not in head.get("connection", "").lower()
    if status in (204, 304):
        return status, head, b"", keep
    if "chunked" in head.get("transfer-encoding", "").lower():
        body = await _chunked(reader, limit, url)
    elif "content-length" in head:
        n = int(head["content-length"]) if head["content-length"].isdigit() else -1
        if n < 0:
            raise PageError(f"{url}: Content-Length {head['content-length'][:20]!r}")
        if n > limit:
            raise PageError(f"{url}: larger than {limit >> 20} MB")
        body = await reader.readexactly(n)
    else:
        keep = False
        body = await _to_end(reader, limit, url)
    return status, head, _decoded(body, head.get("content-encoding", ""), limit, url), keep


async def _head(reader: asyncio.StreamReader, url: str) -> tuple[int, bytes, dict[str, str]]:
    """(status, HTTP version, headers with lower-case names; repeated ones joined)."""
    line = await _line(reader, url)
    if not line:
        raise _Closed
    parts = line.split(None, 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        raise PageError(f"{url}: not an HTTP answer")
    head: dict[str, str] = {}
    size = len(line)
    while True:
        h = await _line(reader, url)
        size += len(h)
        if size > MAX_HEAD_BYTES:
            raise PageError(f"{url}: headers over {MAX_HEAD_BYTES >> 10} KB")
        if h in (b"\r\n", b"\n"):
            return int(parts[1]), parts[0], head
        if not h:
            raise asyncio.IncompleteReadError(b"", None)
        name, sep, value = h.decode("latin-1").partition(":")
        if not sep or not name.strip():
            raise PageError(f"{url}: not an HTTP answer (a header line without a name)")
        key = name.strip().lower()
        head[key] = f"{head[key]}, {value.strip()}" if key in head else value.strip()


async def _to_end(reader: asyncio.StreamReader, limit: int, url: str) -> bytes:
    """A body framed by the connection's end, to at most ``limit`` bytes."""
    chunks: list[bytes] = []
    total = 0
    while total <= limit:
        part = await reader.read(limit + 1 - total)
        if not part:
            return b"".join(chunks)
        chunks.append(part)
        total += len(part)
    raise PageError(f"{url}: larger than {limit >> 20} MB")


async def _line(reader: asyncio.StreamReader, url: str) -> bytes:
    try:
        return await reader.readline()
    except ValueError:                          # a line over the reader's limit
        raise PageError(f"{url}: a header line over {MAX_HEAD_BYTES >> 10} KB") from None


async def _chunked(reader: asyncio.StreamReader, limit: int, url: str) -> bytes:
    parts: list[bytes] = []
    total = 0
    while True:
        line = await _line(reader, url)
        if not line:
            raise asyncio.IncompleteReadError(b"", None)
        try:
            n = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise PageError(f"{url}: a chunk size that is not hex") from None
        if n == 0:
            while (await _line(reader, url)) not in (b"\r\n", b"\n", b""):
                pass                            # trailers: not used
            return b"".join(parts)
        total += n
        if total > limit:
            raise PageError(f"{url}: larger than {limit >> 20} MB")
        parts.append(await reader.readexactly(n))
        await _line(reader, url)                # the chunk's CRLF


def _decoded(body: bytes, encoding: str, limit: int, url: str) -> bytes:
    encoding = encoding.strip().lower()
    if not body or encoding not in ("gzip", "deflate", "x-gzip"):
        return body
    # gzip (wbits 31), zlib-wrapped deflate (15), or raw deflate (-15) as some servers send
    for wbits in ((31,) if "gzip" in encoding else (15, -15)):
        d = zlib.decompressobj(wbits)
        try:
            out = d.decompress(body, limit + 1)
        except zlib.error:
            continue
        if len(out) > limit or d.unconsumed_tail:
            raise PageError(f"{url}: larger than {limit >> 20} MB decompressed")
        return out
    raise PageError(f"{url}: a {encoding} body that does not decompress")


def _text(body: bytes, content_type: str) -> str:
    charset = "utf-8"
    for param in content_type.split(";")[1:]:
        k, _, v = param.partition("=")
        if k.strip().lower() == "charset" and v.strip():
            charset = v.strip().strip('"')
    try:
        return body.decode(charset, "replace")
    except LookupError:                         # a charset Python does not know
        return body.decode("utf-8", "replace")
