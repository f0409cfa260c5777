"""Workers as processes on this machine: ``LocalLauncher().launch(spec) -> WorkerLink``.

multiprocessing's "spawn" context, not fork: a forked child would inherit the parent's event
loop, its open aiohttp connections, its signal handlers and any threads (a test's mock server
runs in a thread; forking a threaded process can deadlock on a lock held at the fork). Spawn
starts a clean interpreter (the same on Linux and macOS); it costs an interpreter start and
imports per worker (a fraction of a second), paid once per run. "forkserver" would start
workers faster, but forks them from a server process started from this one, with the same
cost at first use and less obvious state; not worth it for a handful of workers per run.

One duplex Pipe per worker carries the messages both ways (pickled dicts); the asyncio side
of each end waits on the pipe's file descriptor (add_reader), so nothing blocks the loop.
Workers ignore SIGINT and SIGTERM: a Ctrl-C at the terminal reaches the whole process group,
and the coordinator decides when workers stop.
"""

from __future__ import annotations

import asyncio
import os
import multiprocessing
import signal
from contextlib import suppress
from multiprocessing.connection import Connection
from typing import Any

from llmbench.workers.protocol import WorkerSpec


class PipeEnd:
    """One end of a duplex Pipe as a channel: ``send`` and ``async recv`` (None: EOF)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self._queue: asyncio.Queue[dict[str, Any] | None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.closed = False

    def send(self, msg: dict[str, Any]) -> None:
        if self.closed:
            return
        try:
            self.conn.send(msg)
        except (OSError, EOFError, ValueError):
            self.closed = True            # the other side is gone; recv says so

    async def recv(self) -> dict[str, Any] | None:
        if self._queue is None:
            self._loop = asyncio.get_running_loop()
            self._queue = asyncio.Queue()
            if self.closed:
                return None
            self._loop.add_reader(self.conn.fileno(), self._readable)
            # uvloop makes a watched fd non-blocking; Connection.recv/send expect a blocking
            # one and fail with EAGAIN part way through a large message (a batch of records
            # at 128 streams), which read as a dead worker
            os.set_blocking(self.conn.fileno(), True)
        return await self._queue.get()

    def _readable(self) -> None:
        assert self._queue is not None and self._loop is not None
        try:
            while self.conn.poll():
                self._queue.put_nowait(self.conn.recv())
        except (EOFError, OSError, ValueError):
            self._eof()

    def _unwatch(self) -> None:
        """Stop watching the pipe (once) and mark this end closed."""
        if self._loop is not None and not self.closed:
            with suppress(OSError, ValueError):
                self._loop.remove_reader(self.conn.fileno())
        self.closed = True

    def _eof(self) -> None:
        self._unwatch()
        if self._queue is not None:
            self._queue.put_nowait(None)


def _child(spec: WorkerSpec, conn: Connection) -> None:
    """A worker process's main: the coordinator decides when to stop, not the terminal."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    from llmbench.workers.worker import run_worker
    end = PipeEnd(conn)
    try:
        run_worker(spec, end)
    finally:
        conn.close()


class LocalLink(PipeEnd):
    """The coordinator's end of a local worker process."""

    def __init__(self, worker_id: int, conn: Connection, proc: Any) -> None:
        super().__init__(conn)
        self.worker_id = worker_id
        self.clock_offset_s = 0.0          # one host: CLOCK_MONOTONIC is shared
        self.proc = proc

    def exit_note(self) -> str:
        code = self.proc.exitcode
        if code is None:
            return "still running"
        if code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exit code {code}"

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()

    async def close(self, timeout_s: float = 5.0) -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self.proc.join, timeout_s)
        if self.proc.is_alive():
            self.proc.kill()
            await loop.run_in_executor(None, self.proc.join, 2.0)
        self._unwatch()
        self.conn.close()


class LocalLauncher:
    """Worker processes on this machine (spawn context: see the module docstring)."""

    def __init__(self) -> None:
        self.ctx = multiprocessing.get_context("spawn")

    def launch(self, spec: WorkerSpec) -> LocalLink:
        ours, theirs = self.ctx.Pipe(duplex=True)
        proc = self.ctx.Process(target=_child, args=(spec, theirs), daemon=True,
                                name=f"llmbench-worker-{spec.worker_id}")
        proc.start()
        theirs.close()                     # the child has it; EOF reaches us when it exits
        return LocalLink(spec.worker_id, ours, proc)
