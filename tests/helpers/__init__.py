"""What the tests share: the repository's paths, the CLI in a child process, one request sent
in-process, and a misbehaving raw HTTP server. Fixtures are in tests/conftest.py."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from llmbench.client.request import Client, RequestParams, Timeouts
from llmbench.client.target import make_target
from llmbench.records.record import Record
from llmbench.servers.ports import free_port

ROOT = Path(__file__).resolve().parent.parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
# No test may download: tiktoken's encoding is a download, so tests count approximately unless
# they build a tokenizer themselves.
os.environ.setdefault("LLMBENCH_TOKENIZER", "approx")
# No test may find what happens to listen on this machine's usual LLM ports (a helper's
# llama.cpp on 8080): a command with no --url looks nowhere and runs the demo, unless a test
# points discovery at servers of its own (servers/local.py's LLMBENCH_LOCAL_PORTS)
os.environ["LLMBENCH_LOCAL_PORTS"] = "none"

__all__ = ["ENV", "FIXTURES", "ROOT", "RawServer", "as_from_a_terminal", "free_port", "llmbench", "only_run", "probe_cli",
           "run", "send_one"]

def as_from_a_terminal() -> None:
    """``preexec_fn`` for a child that a test hangs up or interrupts as a terminal would: the
    suite itself may run under ``nohup`` or as ``cmd &``, which leave SIGHUP and SIGINT ignored
    in every child, and llmbench keeps nohup's SIGHUP ignored (tests/e2e/test_inherited_signals.py)."""
    import signal
    for sig in (signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)


ENV = {**os.environ, "PYTHONPATH": str(ROOT), "LLMBENCH_TOKENIZER": "approx",
       "LLMBENCH_LOCAL_PORTS": "none"}


def _transport() -> dict[str, str]:
    """The HTTP transport a test chose (conftest.transport), for the CLI it starts."""
    t = os.environ.get("LLMBENCH_TRANSPORT")
    return {"LLMBENCH_TRANSPORT": t} if t else {}


def llmbench(*args, timeout=120, env=None):
    """The CLI in a child process. ``timeout``: seconds on a quiet machine, stretched by the
    slowdown measured while it runs (tests/helpers/busy.py), so a loaded machine is not a
    hang and a hang still ends."""
    from tests.helpers import busy
    return busy.run([sys.executable, "-m", "llmbench.cli", *args], timeout, capture_output=True,
                    text=True, env={**ENV, **_transport(), **(env or {})}, cwd=ROOT)


def probe_cli(router: str, direct: str, out: Path, *extra: str, model: str = "mock",
              timeout: float = 180) -> subprocess.CompletedProcess:
    """``llmbench probe`` on the command line, for the tests of its wording and exit codes, with
    the defaults tests/helpers/api.py's ``probe`` has: 2 s slices, 2 rounds, 20 prompt and 10
    output tokens, 3 turns."""
    return llmbench("probe", "--router", router, "--direct", direct, "--model", model,
                    "--slice", "2s", "--rounds", "2", "--prompt-tokens", "20",
                    "--output-tokens", "10", "--turns", "3", "--out", str(out), *extra,
                    timeout=timeout)


def only_run(out: Path) -> Path:
    runs = [p for p in out.iterdir() if p.is_dir()]
    assert len(runs) == 1
    return runs[0]



async def send_one(url: str, model: str = "mock", api: str | None = None,
                   messages: list | None = None, max_tokens: int | None = 8,
                   timeouts: Timeouts | None = None, stream: bool = True,
                   **params) -> tuple[Record, str]:
    target = make_target(url, model, api=api)
    async with Client(target, RequestParams(stream=stream, **params), timeouts or Timeouts()) as c:
        rec = Record("t-1", scheduled=time.perf_counter())
        text = await c.send(messages or [{"role": "user", "content": "hello there"}], max_tokens,
                            rec, prompt_tokens_client=2)
        return rec, text


def run(coro):
    return asyncio.run(coro)


class RawServer:
    """A misbehaving HTTP server: answers every request with the bytes a script gives it.

    ``script`` is a list of (delay_s, bytes | None); None closes the connection abruptly. It may
    also be a function of the request's index (0, 1, ...) that returns such a list."""

    def __init__(self, script: list, port: int | None = None, ssl_ctx=None) -> None:
        self.script = script
        self.ssl_ctx = ssl_ctx          # serve TLS with this context
        self.port = port or free_port()
        self._loop = None
        self._thread = None
        self.requests: list[bytes] = []
        self.sent_bytes = 0         # bytes the client took (drained into the socket)

    def __enter__(self) -> "RawServer":
        ready = threading.Event()

        def main() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop

            async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
                data = await reader.readuntil(b"\r\n\r\n")
                headers = data.decode("latin-1").lower()
                length = 0
                for line in headers.split("\r\n"):
                    if line.startswith("content-length:"):
                        length = int(line.split(":")[1])
                body = await reader.readexactly(length) if length else b""
                self.requests.append(data + body)
                script = (self.script(len(self.requests) - 1) if callable(self.script)
                          else self.script)
                try:
                    for delay, chunk in script:
                        if delay:
                            await asyncio.sleep(delay)
                        if chunk is None:
                            writer.transport.abort()
                            return
                        writer.write(chunk)
                        await writer.drain()
                        self.sent_bytes += len(chunk)
                    writer.close()
                except (ConnectionError, asyncio.CancelledError):
                    pass

            async def serve() -> None:
                self._server = await asyncio.start_server(handle, "127.0.0.1", self.port,
                                                          ssl=self.ssl_ctx)
                ready.set()

            loop.run_until_complete(serve())
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=main, daemon=True)
        self._thread.start()
        ready.wait(5)
        return self

    @property
    def url(self) -> str:
        return f"{'https' if self.ssl_ctx else 'http'}://127.0.0.1:{self.port}"

    def __exit__(self, *exc) -> None:
        async def shutdown() -> None:
            self._server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        if self._loop is not None:
            asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(5)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)


def http_head(status: str = "200 OK", content_type: str = "text/event-stream",
              chunked: bool = False, length: int | None = None) -> bytes:
    h = f"HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\n"
    if chunked:
        h += "transfer-encoding: chunked\r\n"
    elif length is not None:
        h += f"content-length: {length}\r\n"
    h += "connection: close\r\n\r\n"
    return h.encode()


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


CHAT_ROLE = b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n'


def chat_token(text: str) -> bytes:
    import json
    return b"data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": text}}]}).encode() + b"\n\n"
