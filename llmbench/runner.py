"""The harness shared by ``run`` and ``ramp``: preflight, session, live line, interrupt, results.

It owns everything with side effects around a load shape, so the shapes stay small and the
CLI only parses flags into a plan.
"""

from __future__ import annotations

import asyncio
import os
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
from .records import Record, RecordLog, clean
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
    from .results import SCHEMA_VERSION, environment, write_json
    message = target.redact(str(exc)) or ""
    print(f"error: {message}", file=sys.stderr)
    if run_dir is not None:
        status = "interrupted" if exc.exit_code == EXIT_INTERRUPTED else "failed"
        write_json(run_dir / "run.json", {"schema_version": SCHEMA_VERSION, "kind": kind,
                                          "status": status, "error": message,
                                          "started_at": time.time(),
                                          "environment": environment(),
                                          "config": {"target": target.describe()}})
    return exc.exit_code


def write_started(run_dir: Path | None, kind: str, target: Target, config: dict[str, Any],
                  labels: dict[str, str]) -> None:
    """run.json from the first moment, status "running": a run killed with SIGKILL still leaves
    a folder that says what it was, and ``report`` rebuilds its summary from requests.jsonl."""
    if run_dir is None:
        return
    from .results import SCHEMA_VERSION, environment, write_json
    write_json(run_dir / "run.json", {"schema_version": SCHEMA_VERSION, "kind": kind,
                                      "status": "running", "started_at": time.time(),
                                      "pid": os.getpid(),
                                      "labels": labels, "environment": environment(),
                                      "config": {"target": target.describe(), **config}})


# A first request that failed for a reason that may pass (a 5xx, a 429, a cut stream) is tried
# this many times in all before the run stops; a timeout is not retried (it already waited).
PREFLIGHT_ATTEMPTS = 3
# Without a terminal nobody sees a spinner: one line after this long, then one every 30 s.
PREFLIGHT_NOTE_AFTER_S = 5.0


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
        """Fail fast with one clear line: nothing listening, wrong model, not an LLM API, a
        server that fails or never answers. While it waits, it says so."""
        url = self.target.endpoint
        for attempt in range(1, PREFLIGHT_ATTEMPTS + 1):
            rec = await self._preflight_request(client)
            clean(rec, self.target.secrets())
            if rec.ok or rec.error_kind == "no_token":
                break
            if rec.error_kind in ("connect", "timeout_connect"):
                raise PreflightError(f"cannot reach {self.target.base_url}: {rec.error}. Is the "
                                     "server running, and is --url right?", EXIT_UNREACHABLE)
            if rec.error_kind == "http_status" and rec.status in (400, 401, 403, 404, 405, 422):
                hint = {404: " (wrong --model, or wrong --api/--url path?)",
                        401: " (set --api-key or OPENAI_API_KEY)", 403: " (check --api-key)",
                        405: " (wrong --api/--url path?)"}.get(rec.status or 0, "")
                raise PreflightError(f"POST {url} answered {rec.status}{hint}: {rec.error}",
                                     EXIT_REFUSED)
            if rec.error_kind == "malformed_event":
                raise PreflightError(f"POST {url} did not answer like an LLM API (not JSON events: "
                                     f"{(rec.error or '')[:80]!r}); check --url and --api",
                                     EXIT_REFUSED)
            if rec.error_kind in ("timeout_first_token", "timeout_total", "timeout_idle"):
                limit = {"timeout_first_token": ("first token", self.timeouts.first_token_s,
                                                 "--timeout-first-token"),
                         "timeout_total": ("whole reply", self.timeouts.total_s, "--timeout-total"),
                         "timeout_idle": ("next event", self.timeouts.idle_s, "--timeout-idle"),
                         }[rec.error_kind]
                raise PreflightError(
                    f"the first request to {url} got no {limit[0]} within {limit[1]:g} s "
                    f"({limit[2]}): the server is stalled or still loading; nothing was sent "
                    "after it (--wait-ready waits for a server that is starting)", EXIT_UNREACHABLE)
            if attempt == PREFLIGHT_ATTEMPTS:
                what = f"answered {rec.status}" if rec.error_kind == "http_status" else rec.error_kind
                raise PreflightError(f"the first request to {url} failed {PREFLIGHT_ATTEMPTS} times "
                                     f"({what}: {(rec.error or '')[:120]}); the load was not started",
                                     EXIT_UNREACHABLE)
            await asyncio.sleep(0.5 * attempt)
        if rec.error_kind == "no_token" and rec.status == 200:
            print(f"warning: the preflight request to {url} returned no token; going on",
                  file=sys.stderr)

    async def _preflight_request(self, client: Client) -> Record:
        """Send the one-token request; while it has not answered, say so now and then."""
        rec = Record("preflight", scheduled=perf_counter())
        task = asyncio.ensure_future(client.send([{"role": "user", "content": "Hi"}], 1, rec))
        waited, note_at = 0.0, PREFLIGHT_NOTE_AFTER_S
        limit = min(self.timeouts.first_token_s, self.timeouts.total_s)
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=note_at - waited)
                if done:
                    break
                waited = note_at
                note_at += 30.0
                print(f"waiting for the server to answer the first request ({waited:.0f} s so far; "
                      f"gives up after {limit:g} s, see --timeout-first-token)",
                      file=sys.stderr, flush=True)
        finally:
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        return rec

    async def _preflight_interruptible(self, client: Client) -> None:
        """Ctrl-C or SIGTERM during the preflight: stop, and say so in run.json (not an empty
        folder)."""
        loop = asyncio.get_running_loop()
        task = loop.create_task(self.preflight(client))
        stopped = []

        def on_signal() -> None:
            stopped.append(True)
            task.cancel()
        installed = []
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, on_signal)
                installed.append(sig)
            except (NotImplementedError, RuntimeError):
                pass
        try:
            await task
        except asyncio.CancelledError:
            if not stopped:
                raise
            raise PreflightError("interrupted during the preflight (the first request): nothing "
                                 "was measured", EXIT_INTERRUPTED)
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)

    async def execute(self, body: Callable[[Session], Awaitable[Any]],
                      live: Callable[[Session, float], str] | None = None) -> tuple[Any, Session]:
        """Run ``body`` with a session; on Ctrl-C stop sending, give in-flight requests
        ``grace_s``, then cancel them (recorded as interrupted)."""
        log = RecordLog(self.run_dir / "requests.jsonl") if self.run_dir else None
        loop = asyncio.get_running_loop()
        async with Client(self.target, self.params, self.timeouts, self.max_connections,
                          self.served_by_header, self.count_tokens) as client:
            await self._preflight_interruptible(client)
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
