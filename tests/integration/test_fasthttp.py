"""The fast HTTP/1.1 transport (llmbench.client.fasthttp): its parser under every split of a response,
and behaviours of both transports the other client tests do not reach (read-until-close and
interim responses, slow headers, the pool's limit, a request given up mid-stream, TLS)."""

from __future__ import annotations

import asyncio
import json
import shutil
import ssl
import subprocess
import time

import pytest

from tests.helpers import CHAT_ROLE, RawServer, chat_token, chunk, run, send_one
from tests.helpers.keepalive_server import KeepAliveServer

from llmbench.client import fasthttp
from llmbench.client.request import Client, RequestParams, Timeouts, choose_transport
from llmbench.records.record import Record
from llmbench.client.target import make_target

DONE = b"data: [DONE]\n\n"
HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nX-Llmbench-Replica: r-7\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n")


class _Dog:
    last = 0.0
    got_token = False
    stop_after = None

    def first_token(self) -> None:
        self.got_token = True

    def enough(self) -> None:
        raise AssertionError("no --abandon here")

    def stop(self) -> None:
        pass


class _Wire:
    """Stands in for the socket: the parser only aborts or closes it."""
    closed = False

    def abort(self) -> None:
        self.closed = True

    close = abort


def _feed(parts: list[bytes]) -> tuple[Record, list[str], fasthttp._Conn, list]:
    """Drive one connection's parser with ``parts`` as successive network reads."""
    released: list = []

    async def go():
        loop = asyncio.get_running_loop()
        client = Client(make_target("http://127.0.0.1:1/v1", "m"), transport="fast")
        pool = fasthttp._Pool(loop, "127.0.0.1", 1, None, 0, 1.0, client._on_head,
                              client._fmt)
        pool.release = released.append          # type: ignore[method-assign]
        conn = fasthttp._Conn(pool)
        conn.transport = _Wire()                 # type: ignore[assignment]
        rec, texts = Record("r", 0.0), []
        fut = loop.create_future()
        conn.start(rec, _Dog(), texts, fut)
        for i, p in enumerate(parts):
            conn.data_received(p)       # stamped; parsed when the pool reads its inbox
            pool.read_inbox()
        assert fut.done()
        fut.result()
        if conn.drain_timer is not None:
            conn.drain_timer.cancel()
        return rec, texts, conn

    rec, texts, conn = asyncio.run(go())
    return rec, texts, conn, released


def _response() -> bytes:
    body = (chunk(CHAT_ROLE) + chunk(chat_token("a") + chat_token("b")) + chunk(chat_token("c"))
            + chunk(DONE) + b"0;ext=1\r\ntrailer: x\r\n\r\n")
    return HEAD + body


def test_every_split_of_a_chunked_response_decodes_the_same():
    raw = _response()
    want, texts, _, released = _feed([raw])
    assert want.status == 200 and want.served_by == "r-7"
    assert "".join(texts) == "abc" and len(want.token_times) == 3 and released
    for cut in range(1, len(raw)):
        rec, texts, _, released = _feed([raw[:cut], raw[cut:]])
        assert "".join(texts) == "abc", cut
        assert rec.error_kind is None and released, (cut, rec.error)
    rec, texts, _, released = _feed([raw[i:i + 1] for i in range(len(raw))])
    assert "".join(texts) == "abc" and released


def test_reads_of_one_poll_are_all_stamped_before_any_is_parsed(monkeypatch):
    """Issue 50 §1: many streams' events arriving in one poll (microseconds apart) are each
    stamped as uvloop hands them over, not after the parsing and decoding of the ones before
    (10 us each, 10 ms at 1,024 streams); the pool parses them afterwards, in arrival order,
    each with its own time. The first read of a burst is parsed at once (nothing is known to
    wait behind it), and so is a read on its own."""
    events: list[str] = []
    clock = iter(range(1, 1000))

    def tick() -> float:
        n = next(clock)
        events.append(f"stamp {n}")
        return n * 1e-6 if n <= 3 else 1.0 + n      # three reads 1 us apart, then a lone one
    real_feed = fasthttp.StreamDecoder.feed

    def feed(self, t, chunk):                    # the parse, logged with its read's number
        events.append(f"parse {round(t * 1e6) if t < 1 else round(t - 1.0)}")
        return real_feed(self, t, chunk)
    monkeypatch.setattr(fasthttp.StreamDecoder, "feed", feed)

    async def go():
        loop = asyncio.get_running_loop()
        client = Client(make_target("http://127.0.0.1:1/v1", "m"), transport="fast")
        pool = fasthttp._Pool(loop, "127.0.0.1", 1, None, 0, 1.0, client._on_head,
                              client._fmt)
        pool.clock = tick
        pool.release = lambda conn: None         # type: ignore[method-assign]
        recs = []
        for _ in range(3):
            conn = fasthttp._Conn(pool)
            conn.transport = _Wire()             # type: ignore[assignment]
            rec = Record("r", 0.0)
            conn.start(rec, _Dog(), [], loop.create_future())
            conn.data_received(HEAD + chunk(chat_token("x")))    # one poll, three sockets
            recs.append(rec)
        assert events == ["stamp 1", "parse 1", "stamp 2", "stamp 3"]
        await asyncio.sleep(0)                   # the next turn: the pool reads its inbox
        await asyncio.sleep(0)
        assert events[4:] == ["parse 2", "parse 3"]
        conn = fasthttp._Conn(pool)              # a read long after: parsed at once
        conn.transport = _Wire()                 # type: ignore[assignment]
        rec = Record("r", 0.0)
        conn.start(rec, _Dog(), [], loop.create_future())
        conn.data_received(HEAD + chunk(chat_token("x")))
        assert events[6:] == ["stamp 4", "parse 4"]
        return recs + [rec]
    recs = asyncio.run(go())
    assert [r.token_times for r in recs] == [[1e-6], [2e-6], [3e-6], [5.0]]


def test_bytes_after_the_end_or_a_bad_chunk_size_lose_the_connection_not_the_record():
    rec, texts, conn, released = _feed([_response() + b"HTTP/1.1 200 OK\r\n"])
    assert "".join(texts) == "abc" and not released and conn.transport.closed
    with pytest.raises(fasthttp.BadResponse):
        _feed([HEAD + b"zz\r\n"])


def test_garbage_after_the_end_marker_loses_the_connection_not_the_request():
    rec, texts, conn, released = _feed([HEAD + chunk(chat_token("a") + DONE), b"zz\r\n"])
    assert texts == ["a"] and rec.error_kind is None and not released and conn.transport.closed


def test_content_length_and_a_status_line_only_head():
    body = json.dumps({"choices": [{"message": {"content": "hi"}}]}).encode()
    rec, texts, _, released = _feed([b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(body),
                                     body[:5], body[5:]])
    # stream=true asked, one JSON body answered: recorded whole (client.py does the same)
    assert texts == ["hi"] and rec.stream is False and released
    rec, texts, _, released = _feed([b"HTTP/1.1 204 No Content\r\n\r\n"])
    assert rec.status == 204 and texts == [] and released


def test_a_read_until_close_stream(transport):
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n"
    script = [(0, head), (0, CHAT_ROLE + chat_token("a")), (0.02, chat_token("b") + DONE)]
    with RawServer(script) as s:
        rec, text = run(send_one(s.url + "/v1"))
    assert rec.ok and text == "ab", rec.error


def test_a_read_until_close_stream_cut_is_a_cut(transport):
    script = [(0, b"HTTP/1.0 200 OK\r\ncontent-type: text/event-stream\r\n\r\n"),
              (0, chat_token("a")), (0.02, None)]
    with RawServer(script) as s:
        rec, _ = run(send_one(s.url + "/v1"))
    assert rec.error_kind == "stream_cut" and len(rec.token_times) == 1


def test_an_interim_response_before_the_answer_is_skipped(monkeypatch):
    monkeypatch.setenv("LLMBENCH_TRANSPORT", "fast")
    script = [(0, b"HTTP/1.1 103 Early Hints\r\nlink: </x>\r\n\r\n"),
              (0.01, HEAD), (0, chunk(chat_token("a") + DONE)), (0, b"0\r\n\r\n")]
    with RawServer(script) as s:
        rec, text = run(send_one(s.url + "/v1"))
    assert rec.ok and text == "a" and rec.status == 200


def test_a_redirect_to_another_origin_is_an_error_that_names_where_it_points(transport):
    script = [(0, b"HTTP/1.1 308 Permanent Redirect\r\nlocation: https://x.example/v1\r\n"
                  b"content-length: 0\r\n\r\n")]
    with RawServer(script) as s:
        rec, _ = run(send_one(s.url + "/v1"))
    assert rec.error_kind == "http_status" and rec.status == 308
    assert rec.error == "redirected to https://x.example/v1 (not followed: another origin)"
    assert len(s.requests) == 1                     # nothing was sent anywhere else


def test_headers_that_arrive_slowly_in_pieces(transport):
    pieces = [HEAD[:9], HEAD[9:30], HEAD[30:-2], HEAD[-2:]]
    script = [(0.05, p) for p in pieces] + [(0, chunk(chat_token("a") + DONE)), (0, b"0\r\n\r\n")]
    with RawServer(script) as s:
        rec, text = run(send_one(s.url + "/v1", timeouts=Timeouts(first_token_s=5)))
    assert rec.ok and text == "a" and rec.served_by == "r-7"


def test_not_http_at_all_is_a_protocol_error(transport):
    # an SSH server on the port answers: reached, but not HTTP (issue 40: once "connect")
    with RawServer([(0, b"SSH-2.0-OpenSSH_9.6\r\n\r\n"), (0.5, None)]) as s:
        rec, _ = run(send_one(s.url + "/v1", timeouts=Timeouts(first_token_s=5)))
    assert rec.error_kind == "protocol" and rec.status is None and not rec.ok


async def _many(url: str, n: int, limit: int, **kw) -> list[Record]:
    async with Client(make_target(url, "m"), RequestParams(), max_connections=limit, **kw) as c:
        async def one(i: int) -> Record:
            rec = Record(f"r{i}", scheduled=time.perf_counter())
            await c.send([{"role": "user", "content": "hi"}], 5, rec)
            return rec
        return await asyncio.gather(*(one(i) for i in range(n)))


def test_the_pool_opens_at_most_its_limit_and_reuses_them(transport):
    with KeepAliveServer(close_after_reply=False) as srv:
        recs = asyncio.run(_many(srv.url, 8, 2))
    assert all(r.ok and r.retries == 0 for r in recs), [r.error for r in recs]
    assert srv.connections == 2 and srv.replies == 8


def test_a_request_given_up_mid_stream_frees_its_connection(transport):
    # the first request stalls after one token (idle limit 0.3 s); with one connection allowed,
    # the second can only run if the abandoned one was closed and counted out of the pool
    def script(i: int) -> list:
        if i == 0:
            return [(0, HEAD), (0, chunk(chat_token("a"))), (5, None)]
        return [(0, HEAD), (0, chunk(chat_token("b") + DONE)), (0, b"0\r\n\r\n")]

    async def go(url: str) -> list[Record]:
        t = Timeouts(idle_s=0.3, total_s=10)
        async with Client(make_target(url + "/v1", "m"), max_connections=1, timeouts=t) as c:
            out = []
            for i in range(2):
                rec = Record(f"r{i}", scheduled=time.perf_counter())
                await c.send([{"role": "user", "content": "hi"}], 5, rec)
                out.append(rec)
            return out

    with RawServer(script) as s:
        first, second = asyncio.run(go(s.url))
    assert first.error_kind == "timeout_idle" and len(first.token_times) == 1
    assert second.ok, second.error


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    """A self-signed certificate for 127.0.0.1, made with the openssl command (no download)."""
    if shutil.which("openssl") is None:
        pytest.skip("no openssl command to make a test certificate")
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "cert.pem", d / "key.pem"
    p = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                        "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                        "-keyout", str(key), "-out", str(cert)], capture_output=True)
    if p.returncode != 0:
        pytest.skip(f"openssl could not make a certificate: {p.stderr[-200:]!r}")
    return cert, key


def test_https_streams_and_checks_the_certificate(certificate, monkeypatch):
    # the fast transport only: aiohttp builds its default TLS context when it is imported, so
    # the trust store cannot be pointed at the test's certificate afterwards
    monkeypatch.setenv("LLMBENCH_TRANSPORT", "fast")
    cert, key = certificate
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    script = [(0, HEAD), (0, chunk(chat_token("a"))), (0.01, chunk(chat_token("b") + DONE)),
              (0, b"0\r\n\r\n")]
    with RawServer(script, ssl_ctx=ctx) as s:
        rec, _ = run(send_one(s.url + "/v1"))          # not trusted: refused
        assert rec.error_kind == "connect" and "certificate" in rec.error.lower(), rec.error
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # trusted, as a private CA would be
        rec, text = run(send_one(s.url + "/v1"))
    assert rec.ok and text == "ab", rec.error


def test_choose_transport(monkeypatch, capsys):
    monkeypatch.delenv("LLMBENCH_TRANSPORT", raising=False)
    from llmbench.client import request as client
    assert choose_transport("http://h/v1") == client.DEFAULT_TRANSPORT
    assert choose_transport("https://h/v1", "fast") == "fast"
    assert choose_transport("http://h/v1", "aiohttp") == "aiohttp"
    monkeypatch.setenv("LLMBENCH_TRANSPORT", "fast")
    assert choose_transport("http://h/v1") == "fast"
    assert choose_transport("unix://sock/v1") == "aiohttp"      # only HTTP over TCP/TLS
    monkeypatch.setenv("LLMBENCH_TRANSPORT", "quic")
    assert choose_transport("http://h/v1") == client.DEFAULT_TRANSPORT
    assert "LLMBENCH_TRANSPORT=quic" in capsys.readouterr().err


def test_a_token_read_but_not_yet_parsed_is_no_first_token_timeout():
    """The watchdog's deadline can come due in the turn between a read's stamp and its parse
    (reads of a burst are parsed a turn later): it parses the queue first, and the token that
    arrived in time is a token, not a timeout_first_token."""
    from llmbench.client.request import _Watchdog

    async def go():
        loop = asyncio.get_running_loop()
        client = Client(make_target("http://127.0.0.1:1/v1", "m"), transport="fast")
        pool = fasthttp._Pool(loop, "127.0.0.1", 1, None, 0, 1.0, client._on_head,
                              client._fmt)
        pool.release = lambda conn: None         # type: ignore[method-assign]
        now = [100.0]
        pool.clock = lambda: now[0]
        conn = fasthttp._Conn(pool)
        conn.transport = _Wire()                 # type: ignore[assignment]
        rec, texts = Record("r", 0.0), []
        rec.start = 100.0
        dog = _Watchdog(asyncio.current_task(), Timeouts(first_token_s=0.5), 100.0,
                        clock=lambda: now[0])
        dog.flush = pool.read_inbox
        conn.start(rec, dog, texts, loop.create_future())
        now[0] = 100.2
        pool.last_read = now[0]                  # a read right behind another: queued
        conn.data_received(HEAD + chunk(chat_token("x")))
        assert rec.token_times == []             # stamped, not parsed yet
        now[0] = 100.7                           # the first-token deadline passed
        dog._check()                             # its timer runs before the queue's turn
        dog.stop()
        return rec, dog
    rec, dog = asyncio.run(go())
    assert dog.fired is None
    assert rec.token_times == [100.2] and rec.error_kind is None
