"""servers/plainget.py: the server probes' and scrapers' GET over http:// (not aiohttp: issue 50
§2), against real servers on loopback: a scripted one (tests.helpers.RawServer, one answer per
connection) and a kept-alive one written here that counts its connections."""

from __future__ import annotations

import asyncio
import base64
import gzip
import threading

import pytest

from llmbench.client.netconfig import Net
from llmbench.servers.plainget import PageError, PlainSession
from tests.helpers import RawServer, chunk, free_port


def get(url: str, path: str, *, net: Net | None = None, limit: int = 1 << 20,
        times: int = 1, headers: dict[str, str] | None = None) -> list[tuple[int, str]]:
    async def go():
        async with PlainSession(url, net) as s:
            return [await asyncio.wait_for(s.get(path, headers or {}, limit), 5)
                    for _ in range(times)]
    return asyncio.run(go())


def test_chunked_gzip_and_a_charset_are_read_as_aiohttp_read_them():
    text = "vllm:num_requests_running 1\n# é\n"
    body = gzip.compress(text.encode("latin-1"))
    head = (b"HTTP/1.1 200 OK\r\ncontent-type: text/plain; charset=latin-1\r\n"
            b"content-encoding: gzip\r\ntransfer-encoding: chunked\r\n\r\n")
    with RawServer([(0, head + chunk(body[:7]) + chunk(body[7:]) + b"0\r\n\r\n")]) as s:
        assert get(s.url, "/metrics") == [(200, text)]
        sent = s.requests[0].decode("latin-1")
    assert sent.startswith("GET /metrics HTTP/1.1\r\n") and "Host: 127.0.0.1:" in sent


def test_a_body_to_the_connections_end_and_its_cap():
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n"
    with RawServer([(0, head + b'{"a": 1}')]) as s:
        assert get(s.url, "/props") == [(200, '{"a": 1}')]
    with RawServer([(0, head + b"x" * 5000)]) as s:
        with pytest.raises(PageError, match="larger than"):
            get(s.url, "/props", limit=4096)


def test_a_kept_alive_connection_the_server_closed_is_asked_again_on_a_new_one():
    # RawServer answers one request per connection, framed by length, without saying
    # "close": the second GET finds the kept connection closed and goes on a new one
    page = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"
    with RawServer([(0, page)]) as s:
        assert get(s.url, "/metrics", times=3) == [(200, "ok")] * 3
        assert len(s.requests) == 3


class KeptAlive:
    """A real HTTP/1.1 server that keeps connections open and counts them; / redirects."""

    def __init__(self) -> None:
        self.port = free_port()
        self.connections = 0
        self.lines: list[str] = []
        self.heads: list[str] = []

    async def handle(self, reader, writer):
        self.connections += 1
        while True:
            try:
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
            except (asyncio.IncompleteReadError, ConnectionError):
                break
            self.heads.append(head)
            line = head.split("\r\n", 1)[0]
            self.lines.append(line)
            target = line.split()[1]
            if target.endswith("/moved"):
                writer.write(b"HTTP/1.1 302 Found\r\nlocation: /metrics\r\ncontent-length: 0\r\n\r\n")
            elif target.endswith("/away"):
                writer.write(b"HTTP/1.1 302 Found\r\nlocation: http://example.invalid/x\r\n"
                             b"content-length: 0\r\n\r\n")
            else:
                body = f"page {target}".encode()
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
            await writer.drain()
        writer.close()

    def __enter__(self):
        ready = threading.Event()
        self.loop = asyncio.new_event_loop()

        def main():
            async def serve():
                self.server = await asyncio.start_server(self.handle, "127.0.0.1", self.port)
                ready.set()
            self.loop.run_until_complete(serve())
            self.loop.run_forever()
        self.thread = threading.Thread(target=main, daemon=True)
        self.thread.start()
        ready.wait(5)
        return self

    def __exit__(self, *exc):
        self.loop.call_soon_threadsafe(self.server.close)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def test_polls_reuse_one_connection_and_same_origin_redirects_are_followed():
    with KeptAlive() as srv:
        assert get(srv.url, "/metrics", times=5) == [(200, "page /metrics")] * 5
        assert srv.connections == 1
        # a same-origin redirect is followed (as aiohttp's session did); another origin's is
        # not: its 302 is the answer
        assert get(srv.url, "/moved") == [(200, "page /metrics")]
        assert get(srv.url, "/away") == [(302, "")]


def test_a_proxy_gets_the_absolute_form_and_the_proxy_urls_credentials():
    with KeptAlive() as proxy:
        net = Net(proxy=f"http://u:p%40ss@127.0.0.1:{proxy.port}", proxy_from="--proxy")
        got = get("http://server.invalid:8000", "/metrics", net=net,
                  headers={"Authorization": "Bearer t", "user-agent": "mine"})
        assert got == [(200, "page http://server.invalid:8000/metrics")]
        head = proxy.heads[0]
    assert head.startswith("GET http://server.invalid:8000/metrics HTTP/1.1\r\n")
    assert "Host: server.invalid:8000\r\n" in head and "Authorization: Bearer t\r\n" in head
    # a header the caller gives replaces the default one, never doubles it
    assert "user-agent: mine\r\n" in head and "User-Agent" not in head
    assert f"Proxy-Authorization: Basic {base64.b64encode(b'u:p@ss').decode()}\r\n" in head


@pytest.mark.parametrize("answer, says", [
    (b"SSH-2.0-OpenSSH_9.2\r\n", "not an HTTP answer"),
    (b"HTTP/1.1 200 OK\r\n: no name\r\n\r\n", "without a name"),
    (b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nshort", "ended before the whole answer"),
    (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n", "not hex"),
])
def test_what_is_not_a_whole_page_is_one_page_error(answer, says):
    with RawServer([(0, answer)]) as s:
        with pytest.raises(PageError, match=says) as err:
            get(s.url, "/metrics")
    # an OSError: the probes' and scrapers' except clauses catch it
    assert isinstance(err.value, OSError)
