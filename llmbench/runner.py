"""The harness shared by ``run`` and ``ramp``: preflight, session, live line, interrupt, results.

It owns everything with side effects around a load shape, so the shapes stay small and the
CLI only parses flags into a plan.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable

from .client import Client, RequestParams, Timeouts
from .load.monitor import LoopMonitor
from .load.session import Session
from .probe.scrape import ServerProbe
from .records import Record, RecordLog
from .target import Target

perf_counter = time.perf_counter

from .exitcodes import (EXIT_EXPECTATION, EXIT_INTERRUPTED, EXIT_OK, EXIT_OVERLOADED,  # noqa: F401
                        EXIT_REFUSED, EXIT_UNREACHABLE, EXIT_USAGE)


class PreflightError(Exception):
    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def report_failed(exc: PreflightError, run_dir: Path | None, kind: str, target: Target) -> int:
    """One line on stderr, and a run.json that says why nothing was measured."""
    from .results import SCHEMA_VERSION, write_json
    print(f"error: {exc}", file=sys.stderr)
    if run_dir is not None:
        write_json(run_dir / "run.json", {"schema_version": SCHEMA_VERSION, "kind": kind,
                                          "status": "failed", "error": str(exc),
                                          "config": {"target": target.describe()}})
    return exc.exit_code


@dataclass
class Harness:
    target: Target
    params: RequestParams
    timeouts: Timeouts
    run_dir: Path | None
    max_connections: int
    count_tokens: Callable[[str], int] | None = None
    served_by_header: str | None = None
    progress: bool | None = None          # None: only on a terminal
    grace_s: float = 3.0
    interrupted: bool = False
    monitor: LoopMonitor = field(default_factory=LoopMonitor)
    t0_epoch: float = 0.0
    t0_perf: float = 0.0
    server_probe: str = "auto"
    server_samples: list[dict[str, Any]] = field(default_factory=list)
    server_kind: str | None = None
    server_note: str | None = None

    async def preflight(self, client: Client) -> None:
        """Fail fast with one clear line: nothing listening, wrong model, not an LLM API."""
        rec = Record("preflight", scheduled=perf_counter())
        await client.send([{"role": "user", "content": "Hi"}], 1, rec)
        url = self.target.endpoint
        if rec.error_kind in ("connect", "timeout_connect"):
            raise PreflightError(f"cannot reach {self.target.base_url}: {rec.error}. Is the server "
                                 "running, and is --url right?", EXIT_UNREACHABLE)
        if rec.error_kind == "http_status" and rec.status in (400, 401, 403, 404, 405, 422):
            hint = {404: " (wrong --model, or wrong --api/--url path?)",
                    401: " (set --api-key or OPENAI_API_KEY)", 403: " (check --api-key)",
                    405: " (wrong --api/--url path?)"}.get(rec.status or 0, "")
            raise PreflightError(f"POST {url} answered {rec.status}{hint}: {rec.error}",
                                 EXIT_REFUSED)
        if rec.error_kind == "malformed_event":
            raise PreflightError(f"POST {url} did not answer like an LLM API (not JSON events: "
                                 f"{(rec.error or '')[:80]!r}); check --url and --api", EXIT_REFUSED)
        if rec.error_kind in ("no_token",) and rec.status == 200:
            print(f"warning: the preflight request to {url} returned no token; going on",
                  file=sys.stderr)

    async def execute(self, body: Callable[[Session], Awaitable[Any]],
                      live: Callable[[Session, float], str] | None = None) -> tuple[Any, Session]:
        """Run ``body`` with a session; on Ctrl-C stop sending, give in-flight requests
        ``grace_s``, then cancel them (recorded as interrupted)."""
        log = RecordLog(self.run_dir / "requests.jsonl") if self.run_dir else None
        loop = asyncio.get_running_loop()
        async with Client(self.target, self.params, self.timeouts, self.max_connections,
                          self.served_by_header, self.count_tokens) as client:
            await self.preflight(client)
            session = Session(client, log, run_id=f"{int(time.time()) % 100000:05d}")
            main = asyncio.current_task()
            assert main is not None
            body_task = loop.create_task(body(session))
            signals = 0

            def on_sigint() -> None:
                nonlocal signals
                signals += 1
                self.interrupted = True
                session.stopping.set()
                if signals == 1:
                    print("\ninterrupted: finishing in-flight requests (Ctrl-C again to stop now)",
                          file=sys.stderr)
                    loop.call_later(self.grace_s, body_task.cancel)
                else:
                    body_task.cancel()
            installed = False
            try:
                loop.add_signal_handler(signal.SIGINT, on_sigint)
                loop.add_signal_handler(signal.SIGTERM, on_sigint)
                installed = True
            except (NotImplementedError, RuntimeError):
                pass
            self.monitor.start()
            probe_stop = asyncio.Event()
            probe = ServerProbe(self.target.server_root, self.server_probe,
                                headers={k: v for k, v in self.target.request_headers().items()
                                         if k != "content-type"})
            probe_task = (loop.create_task(probe.run(probe_stop, self.run_dir / "server.jsonl"
                                                     if self.run_dir else None))
                          if self.server_probe != "off" else None)
            printer = loop.create_task(self._live(session, live)) if live else None
            self.t0_epoch, self.t0_perf = time.time(), perf_counter()
            result = None
            try:
                result = await body_task
            except asyncio.CancelledError:
                if not self.interrupted:
                    raise
                # cancel what is still in flight so its records are written as interrupted
                for t in asyncio.all_tasks():
                    if t is not main and t is not printer and not t.done() and t is not self.monitor._task \
                        and t is not probe_task:
                        t.cancel()
                await asyncio.sleep(0.05)
            finally:
                if printer is not None:
                    printer.cancel()
                probe_stop.set()
                if probe_task is not None:
                    try:
                        await asyncio.wait_for(probe_task, 5)
                    except (asyncio.TimeoutError, asyncio.CancelledError):
                        pass
                self.server_samples, self.server_kind, self.server_note = \
                    probe.samples, probe.kind if probe.samples else None, probe.note
                await self.monitor.stop()
                if installed:
                    loop.remove_signal_handler(signal.SIGINT)
                    loop.remove_signal_handler(signal.SIGTERM)
                if log is not None:
                    log.close()
                if self._show_progress() and sys.stderr.isatty():
                    sys.stderr.write("\r\x1b[K")       # clear the live line; nothing stale stays
        return result, session

    def _show_progress(self) -> bool:
        return self.progress if self.progress is not None else sys.stderr.isatty()

    async def _live(self, session: Session, live: Callable[[Session, float], str]) -> None:
        show = self._show_progress()
        tty = sys.stderr.isatty()
        start = perf_counter()
        last_events = 0
        while True:
            await asyncio.sleep(1.0)
            if not show:
                continue
            events = session.counters.events
            line = live(session, events - last_events)
            last_events = events
            elapsed = perf_counter() - start
            text = f"[{elapsed:4.0f}s] {line}"
            if tty:
                # one row, never wrapped: a wrapped line leaves its first rows behind at every
                # redraw (\r only returns to the start of the last row)
                text = fit_width(text, shutil.get_terminal_size((80, 24)).columns)
            sys.stderr.write(("\r\x1b[K" + text) if tty else text + "\n")
            sys.stderr.flush()


def fit_width(text: str, columns: int) -> str:
    """Cut a one-row status line to the terminal: one column short of the edge, because
    writing the last column leaves some terminals about to wrap."""
    width = max(columns - 1, 10)
    return text if len(text) <= width else text[:width]
