"""A loopback streaming server that promises keep-alive and may close the connection anyway.

llama.cpp's llama-server (cpp-httplib) answers ``Keep-Alive: timeout=5, max=100`` and, after a
streamed reply, closes the connection; a client that sends its next request on that connection
before it sees the close loses the request ("Can not write request body", or a reset). With
``close_after_reply=True`` this server does the same, deterministically: it closes (RST) when
the next request arrives on a connection that already carried one reply.
"""

from __future__ import annotations

import asyncio
import json
import threading

from tests.helpers import free_port


class KeepAliveServer:
    def __init__(self, close_after_reply: bool, tokens: int = 5) -> None:
        self.close_after_reply = close_after_reply
        self.tokens = tokens
        self.port = free_port()
        self.connections = 0
        self.replies = 0            # requests the server really read and answered
        self.dropped = 0            # requests that arrived on a connection it had given up
        self._loop: asyncio.AbstractEventLoop | None = None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        served = 0
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                if served and self.close_after_reply:
                    self.dropped += 1
                    writer.transport.abort()         # unread data: the kernel answers RST
                    return
                length = 0
                for line in head.decode("latin-1").lower().split("\r\n"):
                    if line.startswith("content-length:"):
                        length = int(line.split(":")[1])
                await reader.readexactly(length)
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                             b"transfer-encoding: chunked\r\nkeep-alive: timeout=5, max=100\r\n\r\n")
                for i in range(self.tokens):
                    ev = {"choices": [{"index": 0, "delta": {"content": f"t{i} "}}]}
                    self._chunk(writer, b"data: " + json.dumps(ev).encode() + b"\n\n")
                    await writer.drain()
                    await asyncio.sleep(0.002)
                usage = {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": self.tokens}}
                self._chunk(writer, b"data: " + json.dumps(usage).encode() + b"\n\ndata: [DONE]\n\n")
                writer.write(b"0\r\n\r\n")
                await writer.drain()
                served += 1
                self.replies += 1
        except (ConnectionError, asyncio.CancelledError):
            pass

    @staticmethod
    def _chunk(writer: asyncio.StreamWriter, data: bytes) -> None:
        writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

    def __enter__(self) -> "KeepAliveServer":
        ready = threading.Event()

        def main() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop

            async def start() -> None:
                self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)
                ready.set()

            loop.run_until_complete(start())
            loop.run_forever()

        self._thread = threading.Thread(target=main, daemon=True)
        self._thread.start()
        assert ready.wait(5)
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __exit__(self, *exc: object) -> None:
        async def stop() -> None:
            self._server.close()
            for t in [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]:
                t.cancel()

        assert self._loop is not None
        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
