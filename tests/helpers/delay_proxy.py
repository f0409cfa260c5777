"""A TCP proxy that delays every byte by ``delay_s`` each way: a link with that one-way latency
(and no bandwidth limit) between llmbench and a server, on loopback.

What it models honestly: every exchange of data crosses it, so a request's first byte comes
back at least 2 x delay_s after it was written, and a TLS handshake (data too) pays its round
trips. What it cannot: the TCP handshake itself. The kernel completes it locally when llmbench
connects to the proxy (a userspace proxy cannot hold a SYN-ACK back), so a plain connection's
connect phase stays near zero here while a real 50 ms link would make it ~100 ms. The proxy
connects upstream only once the client's first bytes have crossed, so the server sees the
connection a one-way delay late, as it would.
"""

from __future__ import annotations

import asyncio
import threading
import time

from llmbench.servers.ports import free_port


class DelayProxy:
    def __init__(self, upstream_port: int, delay_s: float, host: str = "127.0.0.1") -> None:
        self.upstream = (host, upstream_port)
        self.delay_s = delay_s
        self.port = free_port()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._server: asyncio.AbstractServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _pipe(self, reader: asyncio.StreamReader, get_writer: "asyncio.Future",
                    ) -> None:
        """Copy reader -> writer, each read delivered delay_s after it arrived, in order."""
        q: asyncio.Queue = asyncio.Queue()

        async def deliver() -> None:
            writer = None
            while True:
                at, data = await q.get()
                wait = at - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                if writer is None:
                    writer = await get_writer
                if data is None:
                    try:
                        writer.write_eof()
                    except (OSError, RuntimeError):
                        pass
                    return
                writer.write(data)
                try:
                    await writer.drain()
                except OSError:
                    return

        task = asyncio.ensure_future(deliver())
        try:
            while True:
                data = await reader.read(65536)
                q.put_nowait((time.monotonic() + self.delay_s, data or None))
                if not data:
                    break
            await task
        except (OSError, asyncio.CancelledError):
            task.cancel()

    async def _handle(self, c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        up_writer: asyncio.Future = loop.create_future()
        c_writer_f: asyncio.Future = loop.create_future()
        c_writer_f.set_result(c_writer)
        up_reader_f: asyncio.Future = loop.create_future()

        async def connect_up() -> None:
            await asyncio.sleep(self.delay_s)      # the SYN's one-way trip
            try:
                r, w = await asyncio.open_connection(*self.upstream)
            except OSError as exc:
                up_writer.set_exception(exc)
                up_reader_f.set_exception(exc)
                c_writer.close()
                return
            up_writer.set_result(w)
            up_reader_f.set_result(r)

        asyncio.ensure_future(connect_up())
        up = asyncio.ensure_future(self._pipe(c_reader, up_writer))
        try:
            r = await up_reader_f
        except OSError:
            up.cancel()
            return
        down = asyncio.ensure_future(self._pipe(r, c_writer_f))
        await asyncio.gather(up, down, return_exceptions=True)
        for w in (c_writer, up_writer.result()):
            w.close()

    def _run(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._server = loop.run_until_complete(
            asyncio.start_server(self._handle, "127.0.0.1", self.port))
        self._ready.set()
        loop.run_forever()
        self._server.close()
        loop.run_until_complete(self._server.wait_closed())
        tasks = asyncio.all_tasks(loop)
        for t in tasks:
            t.cancel()
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        loop.close()

    def __enter__(self) -> "DelayProxy":
        self._thread = threading.Thread(target=self._run, daemon=True, name="delay-proxy")
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the delay proxy did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)
