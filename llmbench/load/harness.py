"""The one engine every command runs on: ``Harness.run(shape, targets) -> Outcome``.

It owns everything with side effects around a load shape: one client per target, one preflight,
Ctrl-C/SIGTERM with a grace period for requests in flight (handlers removed afterwards), the
event-loop monitor, the server scrapers, the record log (requests.jsonl, appended as requests
finish), the live line, and the observers (load.observe: every live view). Shapes
(llmbench/load/shapes) only decide when requests go; commands (llmbench/commands) build a
shape, call ``run`` and turn the Outcome into run.json and text.

Part of the load layer: it must not import metrics, stats, thresholds, verdicts or reports
(tests/unit/test_architecture.py). The live line's text is a function handed in by the command.
"""

from __future__ import annotations

import asyncio
import importlib
import shutil
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Callable

from llmbench.client.request import Client, RequestParams, Timeouts, preload_transports
from llmbench.errors import EXIT_INTERRUPTED, EXIT_REFUSED, EXIT_UNREACHABLE, EXIT_USAGE
from llmbench.load import eventloop, release_collector
from llmbench.load.monitor import LoopMonitor, MonitorSample
from llmbench.load.observe import Attached, Drawn, LiveNow, Observer, ObserverError, Preflighted
from llmbench.load.session import Counters, Session
from llmbench.client.netconfig import certificate_problem, unreachable_hint
from llmbench.servers.refusal import empty_refusal
from llmbench.servers.scrape import ServerProbe, needs_aiohttp
from llmbench.records.ids import header_id
from llmbench.records.record import Record, RecordLog, clean
from llmbench.records.store import RecordStore, by_done
from llmbench.load.shapes.base import Drive, LiveState, LoadShape
from llmbench.client.target import Target

perf_counter = time.perf_counter

# A first request that failed for a reason that may pass (a 5xx, a 429, a cut stream) is tried
# this many times in all before the run stops; a timeout is not retried (it already waited).
PREFLIGHT_ATTEMPTS = 3
# Without a terminal nobody sees a spinner: one line after this long, then one every 30 s.
PREFLIGHT_NOTE_AFTER_S = 5.0
# token events are handed to the observers this often (a sum over the replies in flight, never
# a call per token: the hot path is unchanged); a 1 s rate read from them is within 10 %
TOKEN_TICK_S = 0.1
# --dashboard: the telemetry samples (about one a second per source) it is handed each second
TELEMETRY_KEEP = 6


class PreflightError(Exception):
    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass
class TargetSpec:
    """One server the shape sends to. ``name`` keys the Drive's sessions; ``path`` is stamped
    on every record (the probe's router/direct); ``strict``: the preflight does not retry, and
    says which of several targets failed (``who``)."""

    target: Target
    name: str = "main"
    path: str | None = None
    run_id: str | None = None
    server_probe: str = "auto"             # off | auto | a kind
    server_file: str = "server.jsonl"
    strict: bool = False
    who: str | None = None                 # "the router", "the direct backend"
    flag: str = "--url"                    # the option that gave this URL
    hints: dict[int, str] = field(default_factory=dict)   # status -> hint in the error line
    salt: Any = None                       # workload.salt.Salt: first in every conversation
    # --scenario: a traffic class's own target (its request options; its records stamped with
    # its name, kept in the store of the target named ``share_records`` with every class's)
    params: RequestParams | None = None
    # fields the first request sends too (an agent run's tools: a server that refuses tools
    # then fails there, in one line, not with every call of the run)
    preflight_extra: dict[str, Any] | None = None
    traffic_class: str | None = None
    share_records: str | None = None


@dataclass
class ServerSeen:
    """What the server probe saw during the load: its kind, a note, its samples."""
    kind: str | None
    note: str | None
    samples: list[dict[str, Any]]


@dataclass
class LiveView:
    """What the live line may show (``counters``: summed over targets; the rest as LiveNow's)."""

    counters: Counters
    live: LiveState
    monitor: MonitorSample | None
    recent_ttft: list[tuple[float, float]]     # (first token time, TTFT)
    events_last_s: int
    now: float
    telemetry: list[dict[str, Any]] = field(default_factory=list)
    agents_open: list[int | None] | None = None


@dataclass
class Outcome:
    """What one load returned: the records, when it began, whether it was cut, the monitor."""
    result: Any                            # what the shape returned
    records: RecordStore                   # every finished request, all targets, by done
    started_at: float                      # epoch seconds when dispatch began
    t0_perf: float                         # perf_counter at the same moment
    interrupted: bool
    monitor: list[MonitorSample]
    servers: dict[str, ServerSeen]         # by target name
    live: LiveState
    workers: dict[str, Any] | None = None  # --workers N: how many, which crashed (else None)
    # requests.jsonl could not be written (disk full, too large, read-only): the load was
    # stopped then, as by Ctrl-C; the lines before are whole
    write_error: OSError | None = None
    # the server machine's samples, notes, identity (servers.telemetry.Telemetry); None: none
    telemetry: Any = None

    def server(self, name: str = "main") -> ServerSeen:
        return self.servers.get(name) or ServerSeen(None, None, [])


@dataclass
class Harness:
    """The engine's one entry: sessions, observers and records for any shape of load."""
    params: RequestParams
    timeouts: Timeouts
    run_dir: Path | None
    count_tokens: Callable[[str], int] | None = None
    served_by_header: str | None = None
    progress: bool | None = None          # None: only on a terminal
    grace_s: float = 3.0
    live_line: Callable[[LiveView], str] | None = None
    keep_texts: bool = False              # reply texts by request id (vLLM --save-detailed)
    texts: dict[str, str] = field(default_factory=dict)
    started_at: float = 0.0               # epoch seconds when dispatch began (0: not yet)
    t0_perf: float = 0.0                  # perf_counter at the same moment
    # Worker processes (llmbench.workers.Fleet, set by the command for --workers N > 1): the
    # shape is handed to it instead of being driven here. None: this process, as always.
    fleet: Any = None
    # Who watches the run (load.observe), built by the command; the ``Drawn`` one gets nothing
    # without a terminal (the one-line live_line is printed instead)
    observers: list[Observer] = field(default_factory=list)
    verbose: bool = False                 # -v: say what was decided along the way (resends)
    # a run's own harness: hold stop signals after the load until the command releases them
    # (see _HELD)
    hold_after: bool = False
    # The server's machine, sampled beside the server probes (servers.telemetry.Telemetry,
    # handed in by the command); its samples go to telemetry.jsonl
    telemetry: Any = None
    _sessions: dict[str, Session] = field(default_factory=dict)

    # -- public ---------------------------------------------------------------------------
    def show_progress(self) -> bool:
        return self.progress if self.progress is not None else sys.stderr.isatty()

    def say(self, text: str, file: Any = None) -> None:
        """Print a line (to stdout, or ``file``) without a half-drawn live line above it."""
        if self.show_progress() and sys.stderr.isatty():
            sys.stderr.write("\r\x1b[K")
        print(text, file=file, flush=True)

    def records_so_far(self) -> RecordStore:
        """Finished requests of the run in progress (a command writing a partial run.json)."""
        return by_done(_stores(self._sessions)) if self._sessions else RecordStore()

    def run(self, shape: LoadShape, targets: list[TargetSpec]) -> Outcome:
        """Run a shape to the end (or to Ctrl-C); raises PreflightError before any load."""
        if any(t.server_probe != "off" and needs_aiohttp(t.target.server_root)
               for t in targets) or (
                self.telemetry is not None and self.telemetry.spec.needs_aiohttp()):
            # an https:// server probe polls with aiohttp: loaded here, before the loop runs,
            # not by the probe's task inside it (a quarter-second stall as the first requests
            # went out); http:// ones go by servers/plainget.py and never load it
            importlib.import_module("aiohttp")
        preload_transports([t.target.base_url for t in targets])
        release_collector()             # the command line's start-up held it (cli.app.main)
        try:
            return eventloop.run(self.run_async(shape, targets))   # uvloop when installed
        finally:
            if self.hold_after:
                hold_signals()          # until the command's run.json is written

    async def run_async(self, shape: LoadShape, targets: list[TargetSpec]) -> Outcome:
        log = RecordLog(self.run_dir / "requests.jsonl") if self.run_dir else None
        loop = asyncio.get_running_loop()
        stopping = asyncio.Event()
        clients: dict[str, Client] = {}
        try:
            for spec in targets:
                client = Client(spec.target, spec.params or self.params, self.timeouts,
                                shape.max_in_flight(), self.served_by_header, self.count_tokens)
                clients[spec.name] = await client.__aenter__()
            for spec in targets:
                await self._interruptible(self.preflight(clients[spec.name], spec))
            if self.telemetry is not None:
                # once the server has answered, and before any load: its process found and
                # what it is asked (a server that fails its preflight is asked nothing more)
                await self._interruptible(self.telemetry.prepare())
            return await self._drive(shape, targets, clients, log, stopping, loop)
        finally:
            for c in clients.values():
                await c.__aexit__(None, None, None)
            if log is not None:
                log.close()
            if self.verbose and self._sessions:
                resent = sum(int(st.col("retries").sum()) for st in _stores(self._sessions)
                             if len(st))
                print(f"llmbench: requests resent on a new connection (a stale kept-alive one): "
                      f"{resent}", file=sys.stderr)

    # -- the run --------------------------------------------------------------------------
    async def _drive(self, shape: LoadShape, targets: list[TargetSpec], clients: dict[str, Client],
                     log: RecordLog | None, stopping: asyncio.Event,
                     loop: asyncio.AbstractEventLoop) -> Outcome:
        run_id = f"{int(time.time()) % 100000:05d}"
        sessions = self._open_sessions(targets, clients, log, stopping, run_id)
        observers = self._watching()
        hook = _one_hook([o.observe for o in observers])
        if hook is not None:
            for s in sessions.values():
                s.on_record = hook          # records from workers too (the coordinator calls it)
        monitor = LoopMonitor()
        live = LiveState()
        fleet = self.fleet
        # with workers, the generator check reads their samples, gathered by the fleet
        view = fleet.view if fleet is not None else monitor
        drive = Drive(sessions, stopping, view, live)
        scrapers: dict[str, ServerProbe] = {}
        events = [0]                    # token events so far, as they arrive (_tokens)
        for o in observers:             # before any load: a port taken stops the run here
            if isinstance(o, Attached):
                try:
                    o.attach(lambda: self._now(sessions, live, view, scrapers, events[0]))
                except ObserverError as exc:
                    for other in observers:
                        other.close()
                    raise PreflightError(str(exc), EXIT_USAGE) from None
        main = asyncio.current_task()
        interrupted = False
        if fleet is not None:
            fleet.grace_s = self.grace_s
            body_task = loop.create_task(fleet.drive(shape, drive, targets, self, run_id))
        else:
            body_task = loop.create_task(shape.drive(drive))
        signals = 0
        # workers stop themselves after the grace period and send their last records
        grace_s = self.grace_s + (fleet.extra_grace_s if fleet else 0.0)

        def on_signal() -> None:
            nonlocal signals, interrupted
            signals += 1
            interrupted = True
            stopping.set()
            if signals == 1:
                print("\ninterrupted: finishing in-flight requests (Ctrl-C again to stop now)",
                      file=sys.stderr)
                loop.call_later(grace_s, body_task.cancel)
            else:
                body_task.cancel()
        installed = _install(loop, on_signal)
        write_error: list[OSError] = []

        def on_write_error(exc: OSError) -> None:
            # nothing more can be kept: stop the load as Ctrl-C does (the in-flight requests
            # get the grace period, then are cut), and let the command say why
            nonlocal interrupted
            write_error.append(exc)
            if not stopping.is_set():
                interrupted = True
                stopping.set()
                loop.call_later(grace_s, body_task.cancel)
        if log is not None:
            log.on_error = on_write_error
        if fleet is None:
            monitor.start()
        probe_stop = asyncio.Event()
        own: set[asyncio.Task[Any]] = set()
        scrapers.update(self._start_probes(targets, loop, probe_stop, own))
        if not live.load:
            # a fixed load (a run) says its level here; a ramp or probe sets it per step
            live.load = float(getattr(shape, "concurrency", None) or getattr(shape, "rate", None) or 0.0)
        ticker = loop.create_task(self._tokens(sessions, observers, events))
        printer = loop.create_task(self._live(sessions, live, view)) \
            if self.live_line or self._board_of(observers) is not None else None
        if printer is not None:
            own.add(printer)
        t0_epoch, t0_perf = self.started_at, self.t0_perf = time.time(), perf_counter()
        result = None
        try:
            result = await body_task
        except asyncio.CancelledError:
            if not interrupted:
                raise
            # cancel what is still in flight so its records are written as interrupted
            for t in asyncio.all_tasks():
                if t is not main and not t.done() and t not in own and not monitor.owns(t):
                    t.cancel()
            await asyncio.sleep(0.05)
        finally:
            await self._wind_down(printer, ticker, sessions, observers, events, probe_stop,
                                  own, monitor)
            _remove(loop, installed, on_signal)
            # every record observed: each observer's last tick or scrape (in a thread: the
            # dashboard joins its feeder, the exporter waits for a watching scraper's last)
            for o in observers:
                await asyncio.to_thread(o.close)
            if self.show_progress() and sys.stderr.isatty():
                sys.stderr.write("\r\x1b[K")       # clear the live line; nothing stale stays
        records = by_done(_stores(sessions))
        servers = {name: ServerSeen(p.kind if p.samples else None, p.note, p.samples)
                   for name, p in scrapers.items()}
        if fleet is not None:
            live.user_changes.sort(key=lambda c: c[0])     # several workers' changes, merged
        return Outcome(result, records, t0_epoch, t0_perf, interrupted, view.samples, servers,
                       live, fleet.describe() if fleet is not None else None,
                       write_error[0] if write_error else None, self.telemetry)

    def _open_sessions(self, targets: list[TargetSpec], clients: dict[str, Client],
                       log: RecordLog | None, stopping: asyncio.Event,
                       run_id: str) -> dict[str, Session]:
        """One Session per target (traffic classes sharing one record store when asked)."""
        sessions: dict[str, Session] = {}
        for s in targets:
            shared = sessions[s.share_records].records if s.share_records in sessions else None
            sessions[s.name] = Session(clients[s.name], log, run_id=s.run_id or run_id,
                                       path=s.path, stopping=stopping, salt=s.salt,
                                       traffic_class=s.traffic_class,
                                       **({"records": shared} if shared is not None else {}))
        self._sessions = sessions
        if self.keep_texts:
            for s in sessions.values():
                s.texts = self.texts            # reply texts only when they will be written
        return sessions

    def _start_probes(self, targets: list[TargetSpec], loop: asyncio.AbstractEventLoop,
                      probe_stop: asyncio.Event, own: set[asyncio.Task[Any]]
                      ) -> dict[str, ServerProbe]:
        """The server probes and the server machine's telemetry, as tasks in ``own``."""
        scrapers: dict[str, ServerProbe] = {}
        for spec in targets:
            if spec.server_probe == "off":
                continue
            p = ServerProbe(spec.target.server_root, spec.server_probe,
                            headers={k: v for k, v in spec.target.request_headers().items()
                                     if k != "content-type"})
            if spec.server_probe != "auto":
                p.on_note = lambda text: self.say(f"warning: {text}", sys.stderr)
            scrapers[spec.name] = p
            own.add(loop.create_task(p.run(probe_stop, self.run_dir / spec.server_file
                                           if self.run_dir else None)))
        if self.telemetry is not None:
            own.add(loop.create_task(self.telemetry.run(
                probe_stop, self.run_dir / "telemetry.jsonl" if self.run_dir else None)))
        return scrapers

    async def _wind_down(self, printer: asyncio.Task[Any] | None, ticker: asyncio.Task[Any],
                         sessions: dict[str, Session], observers: list[Observer],
                         events: list[int], probe_stop: asyncio.Event,
                         own: set[asyncio.Task[Any]], monitor: LoopMonitor) -> None:
        """After the load (or its interruption): live views cleared, probes and monitor stopped."""
        if printer is not None:
            printer.cancel()
            # the live view clears its rows before anything else is printed
            await asyncio.wait({printer}, timeout=2.0)
        ticker.cancel()
        await asyncio.wait({ticker})
        self._hand_tokens(sessions, observers, events)      # the last ones, to the end
        probe_stop.set()
        for t in own - {printer}:
            try:
                await asyncio.wait_for(t, 5)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                pass
        await monitor.stop()

    def _recent_telemetry(self) -> list[dict[str, Any]]:
        """The server machine's last few seconds of samples (a slice of a list the loop appends
        to: a copy, never a torn read); what every live view reads its gauges from."""
        tel = self.telemetry
        return tel.samples[-3 * TELEMETRY_KEEP:] if tel is not None else []

    def _agents_open(self, sessions: dict[str, Session]) -> list[int | None] | None:
        """The ramp step of each agent session under way; None with workers (not known here)."""
        if self.fleet is not None:
            return None
        try:
            return [step for s in list(sessions.values())
                    for step, _ in list(s.agents_open.values())]
        except RuntimeError:            # changed while read from another thread: next time
            return None

    def _watching(self) -> list[Observer]:
        """The observers handed records: the terminal view only when it will be drawn (a
        terminal), else it would hold every record of the run for nothing (20k requests: +20 MB,
        scripts/bench_memory.py)."""
        drawn = self.show_progress() and sys.stderr.isatty()
        return [o for o in self.observers if drawn or not isinstance(o, Drawn)]

    @staticmethod
    def _board_of(observers: list[Observer]) -> Any:
        return next((o for o in observers if isinstance(o, Drawn)), None)

    async def _tokens(self, sessions: dict[str, Session], observers: list[Observer],
                      events: list[int]) -> None:
        """Every TOKEN_TICK_S, the token events since the last tick (``live_events``) handed to
        the observers; ``events[0]``, their total so far, is what every live rate reads."""
        while True:
            await asyncio.sleep(TOKEN_TICK_S)
            self._hand_tokens(sessions, observers, events)

    @staticmethod
    def _hand_tokens(sessions: dict[str, Session], observers: list[Observer],
                     events: list[int]) -> None:
        total = live_events(sessions)
        n = total - events[0]
        if n > 0:               # never back (workers' counts come by messages): none twice
            events[0] = total
            now = perf_counter()
            for o in observers:
                o.token(now, n)

    def _now(self, sessions: dict[str, Session], live: LiveState, monitor: Any,
             scrapers: dict[str, ServerProbe], events: int) -> LiveNow:
        """LiveNow for an attached observer (with workers, every worker's counters summed)."""
        total = Counters.summed(s.counters for s in list(sessions.values()))
        latest = monitor.latest
        server = {}
        for name, p in list(scrapers.items()):
            if p.samples:
                sample = p.samples[-1]
                server[name] = {k: v for k, v in sample.items() if k not in ("t", "wall")}
        return LiveNow(
            telemetry=self._recent_telemetry(), agents_open=self._agents_open(sessions),
            t_s=perf_counter() - self.t0_perf if self.t0_perf else None,
            started=total.started, done=total.done, failed=total.failed,
            in_flight=total.in_flight, events=max(events, total.events),
            users=live.users, load=live.load, step=live.step, phase=live.phase,
            lag_p99_ms=latest.lag_p99_ms if latest is not None else None,
            cpu_pct=latest.cpu_pct if latest is not None else None,
            busiest=None if latest is None or latest.worker is None else str(latest.worker),
            server=server or None)

    async def _live(self, sessions: dict[str, Session], live: LiveState,
                    monitor: Any) -> None:
        show = self.show_progress()
        tty = sys.stderr.isatty()
        board = self._board_of(self.observers)
        if show and tty and board is not None:
            await self._board(board, sessions, live, monitor)
            return
        if self.live_line is None or not show:
            return
        async for view, elapsed in _views(sessions, live, monitor):
            text = f"[{elapsed:4.0f}s] {self.live_line(view)}"
            if tty:
                # one row, never wrapped: a wrapped line leaves its first rows behind at every
                # redraw (\r only returns to the start of the last row)
                text = fit_width(text, shutil.get_terminal_size((80, 24)).columns)
            sys.stderr.write(("\r\x1b[K" + text) if tty else text + "\n")
            sys.stderr.flush()

    async def _board(self, board: Any, sessions: dict[str, Session], live: LiveState,
                     monitor: Any) -> None:
        """The multi-row live view, drawn in place by rich once a second and cleared when the
        run ends (cancelled with the printer task)."""
        from rich.console import Console
        from rich.live import Live
        console = Console(file=sys.stderr, highlight=False)
        with Live(console=console, auto_refresh=False, transient=True) as screen:
            try:
                async for view, elapsed in _views(sessions, live, monitor):
                    view.telemetry = self._recent_telemetry()
                    view.agents_open = self._agents_open(sessions)
                    width = shutil.get_terminal_size((80, 24)).columns
                    screen.update(board.draw(view, elapsed, width), refresh=True)
            finally:
                screen.update("", refresh=True)

    # -- preflight ------------------------------------------------------------------------
    async def _interruptible(self, coro: Any) -> None:
        """Ctrl-C or SIGTERM during the preflight: stop, and say so in run.json (not an empty
        folder)."""
        loop = asyncio.get_running_loop()
        task = loop.create_task(coro)
        stopped = []

        def on_signal() -> None:
            stopped.append(True)
            task.cancel()
        installed = _install(loop, on_signal)
        try:
            await task
        except asyncio.CancelledError:
            if not stopped:
                raise
            raise PreflightError("interrupted during the preflight (the first request): nothing "
                                 "was measured", EXIT_INTERRUPTED)
        finally:
            _remove(loop, installed, on_signal)

    async def preflight(self, client: Client, spec: TargetSpec) -> None:
        """Fail fast with one clear line: nothing listening, wrong model, not an LLM API, a
        server that fails or never answers. While it waits, it says so."""
        url = spec.target.endpoint
        who = f"{spec.who} " if spec.who else ""
        attempts = 1 if spec.strict else PREFLIGHT_ATTEMPTS
        for attempt in range(1, attempts + 1):
            rec = await self._preflight_request(client, spec.preflight_extra)
            clean(rec, spec.target.secrets())
            self._tell_preflight(rec)
            if rec.ok or (rec.error_kind == "no_token" and not spec.strict):
                break
            if rec.error_kind in ("connect", "timeout_connect"):
                # names the proxy used or bypassed, and a certificate problem as one
                net = spec.target.net
                route = f" ({net.route()})" if net.route() else ""
                raise PreflightError(f"cannot reach {who}{'at ' if who else ''}"
                                     f"{spec.target.base_url}{route}: {rec.error}. "
                                     f"{unreachable_hint(net, rec.error, spec.flag)}",
                                     EXIT_UNREACHABLE)
            key_env = spec.target.wire_format.key_env       # the API's own variable
            hints = {404: " (wrong --model, or wrong --api/--url path?)",
                     401: f" (set --api-key or {key_env})", 403: " (check --api-key)",
                     405: " (wrong --api/--url path?)",
                     407: " (the proxy wants credentials: http://USER:PASSWORD@host:port)",
                     **spec.hints}
            if rec.error_kind == "http_status" and rec.status == 500:
                # a router asked for a model none of its backends serves answers a bare 500
                # (NOMYO: "None of the configured endpoints ... advertise the model"): its
                # model list, as a server's, names what it serves
                served = await _served_hint(spec.target, spec.flag == "--url", spec.who)
                if served:
                    raise PreflightError(f"{who}POST {url} answered 500: {rec.error}{served}",
                                         EXIT_REFUSED)
            if certificate_problem(rec.error):      # nginx: "No required SSL certificate"
                hints[rec.status or 0] = f" ({certificate_problem(rec.error)})"
            elif spec.target.net.proxy and rec.status == 401:   # tinyproxy: wrong credentials
                hints[401] = (f" (set --api-key or {key_env}; or check the proxy's "
                              "credentials: http://USER:PASSWORD@host:port)")
            if rec.error_kind == "http_status" and (
                    rec.status in (400, 401, 403, 404, 405, 407, 422) or spec.strict):
                served = (await _served_hint(spec.target, spec.flag == "--url", spec.who)
                          if rec.status in (400, 404, 422) else "")
                hint = hints.get(rec.status or 0, "")
                if served and spec.flag == "--url":
                    hint = ""               # the list of served models says it better
                said = f": {rec.error}" if (rec.error or "").strip() else (empty_refusal(
                    rec.status, rec.error, spec.target.request_headers(),
                    client.body([{"role": "user", "content": "Hi"}], 1),
                    header_id(rec.request_id)) or "")
                raise PreflightError(f"{who}POST {url} answered {rec.status}{hint}{said}"
                                     f"{served}", EXIT_REFUSED)
            if rec.error_kind == "protocol":
                raise PreflightError(f"{who}POST {url} answered with malformed HTTP "
                                     f"({(rec.error or '')[:120]}): the server, or a proxy in "
                                     f"the way, breaks HTTP/1.1; check that {spec.flag} is an "
                                     "HTTP server's address", EXIT_REFUSED)
            if rec.error_kind == "malformed_event" or (
                    spec.strict and rec.error_kind in ("no_token", "stream_cut")):
                raise PreflightError(f"{who}POST {url} did not answer like an LLM API "
                                     f"({rec.error_kind}: {(rec.error or '')[:80]!r}); check "
                                     f"{spec.flag} and --api", EXIT_REFUSED)
            if rec.error_kind in ("timeout_first_token", "timeout_total", "timeout_idle"):
                raise self._timed_out(rec.error_kind, url)
            if spec.strict:
                raise PreflightError(f"{who}failed its first request: {rec.error_kind}: "
                                     f"{rec.error}", EXIT_REFUSED)
            if attempt == attempts:
                what = f"answered {rec.status}" if rec.error_kind == "http_status" else rec.error_kind
                raise PreflightError(f"the first request to {url} failed {attempts} times "
                                     f"({what}: {(rec.error or '')[:120]}); the load was not started",
                                     EXIT_UNREACHABLE)
            await asyncio.sleep(0.5 * attempt)
        if rec.error_kind == "no_token" and rec.status == 200:
            print(f"warning: the preflight request to {url} returned no token; going on",
                  file=sys.stderr)

    def _tell_preflight(self, rec: Record) -> None:
        """--otlp: the preflight sent a traceparent too, so it has a span."""
        for o in self.observers:
            if isinstance(o, Preflighted):
                o.preflight(rec)

    def _timed_out(self, kind: str, url: str) -> PreflightError:
        """The preflight's one line for a request that timed out (``kind``: its error kind)."""
        what, limit_s, flag = {
            "timeout_first_token": ("first token", self.timeouts.first_token_s,
                                    "--timeout-first-token"),
            "timeout_total": ("whole reply", self.timeouts.total_s, "--timeout-total"),
            "timeout_idle": ("next event", self.timeouts.idle_s, "--timeout-idle")}[kind]
        return PreflightError(
            f"the first request to {url} got no {what} within {limit_s:g} s "
            f"({flag}): the server is stalled or still loading; nothing was sent "
            "after it (--wait-ready waits for a server that is starting)", EXIT_UNREACHABLE)

    async def _preflight_request(self, client: Client,
                                 extra: dict[str, Any] | None = None) -> Record:
        """Send the one-token request; while it has not answered, say so now and then."""
        rec = Record("preflight", scheduled=perf_counter())
        task = asyncio.ensure_future(client.send([{"role": "user", "content": "Hi"}], 1, rec,
                                                extra=extra, abandon=False))
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


def _one_hook(watchers: list[Callable[[Record], Any]]) -> Callable[[Record], Any] | None:
    """The observers' ``observe`` calls as one callable per record (None: nobody watches)."""
    if not watchers:
        return None
    if len(watchers) == 1:
        return watchers[0]
    if len(watchers) == 2:
        return lambda rec, a=watchers[0], b=watchers[1]: (a(rec), b(rec))
    return lambda rec, ws=tuple(watchers): [w(rec) for w in ws]


def _stores(sessions: dict[str, Session]) -> list[RecordStore]:
    """The sessions' record stores, each once (traffic classes share one)."""
    return list({id(s.records): s.records for s in sessions.values()}.values())


def live_events(sessions: dict[str, Session]) -> int:
    """Token events received so far: the finished requests' and those of the replies still
    streaming (a record's token times grow as its chunks arrive; ``Session._finish`` moves its
    count to the counters in the same step it leaves ``active``, so the sum never goes back)."""
    return sum(s.counters.events + sum(len(r.token_times) for r in s.active)
               for s in sessions.values())


async def _views(sessions: dict[str, Session], live: LiveState,
                 monitor: Any) -> AsyncIterator[tuple[LiveView, float]]:
    """What the live line or view shows, once a second, with the seconds since it began."""
    start = perf_counter()
    last_events = 0
    while True:
        await asyncio.sleep(1.0)
        view = _view(sessions, live, monitor, last_events)
        last_events = view.counters.events
        yield view, view.now - start


def _view(sessions: dict[str, Session], live: LiveState, monitor: Any, last_events: int) -> LiveView:
    """What the live line or view shows now; ``last_events``: the token events at the last
    redraw."""
    total = Counters.summed(s.counters for s in sessions.values())
    recent = [pair for s in sessions.values() for pair in s.recent_ttft]
    total.events = live_events(sessions)
    return LiveView(total, live, monitor.latest, recent, total.events - last_events, perf_counter())


# The Ctrl-C handlers of the runs in progress in this process, with their loops. A signal
# reaches the main thread only, and only there can a loop install a handler: a run on another
# thread (llmbench.run() inside a running event loop, as in Jupyter, or in asyncio.to_thread)
# has its handler here, and the thread that waits for it delivers an interrupt
# (``interrupt_runs``: llmbench/api.py on KeyboardInterrupt).
_ACTIVE: list[tuple[asyncio.AbstractEventLoop, Callable[[], None]]] = []


def interrupt_runs() -> bool:
    """Deliver one Ctrl-C to every run in progress (thread-safe); False when there is none."""
    for loop, handler in list(_ACTIVE):
        try:
            loop.call_soon_threadsafe(handler)
        except RuntimeError:            # its loop has just closed
            pass
    return bool(_ACTIVE)


# What stops a run: Ctrl-C, SIGTERM, and SIGHUP (the terminal closed), all alike
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP")
                     if hasattr(signal, name))
# Python-level handlers the loop's replaced, restored when it is done with them (asyncio sets
# SIG_DFL back, which lost the command's own SIGTERM/SIGHUP handling after the load)
_PREVIOUS: dict[int, Any] = {}


def _install(loop: asyncio.AbstractEventLoop, handler: Callable[[], None]) -> list[int]:
    installed: list[int] = []
    _ACTIVE.append((loop, handler))
    if threading.current_thread() is not threading.main_thread():
        return installed                # signal handlers are the main thread's (see _ACTIVE)
    for sig in STOP_SIGNALS:
        previous = signal.getsignal(sig)
        if previous == signal.SIG_IGN:  # nohup's SIGHUP (cli.app): the run outlives the terminal
            continue
        try:
            loop.add_signal_handler(sig, handler)
            installed.append(sig)
            _PREVIOUS.setdefault(sig, previous)
        except (NotImplementedError, RuntimeError, ValueError):
            pass
    return installed


def _remove(loop: asyncio.AbstractEventLoop, installed: list[int],
            handler: Callable[[], None] | None = None) -> None:
    for sig in installed:
        loop.remove_signal_handler(sig)
        previous = _PREVIOUS.pop(sig, None)
        if previous is not None:
            try:
                signal.signal(sig, previous)
            except (ValueError, TypeError, OSError):
                pass
    for i in range(len(_ACTIVE) - 1, -1, -1):
        if _ACTIVE[i][0] is loop and (handler is None or _ACTIVE[i][1] is handler):
            del _ACTIVE[i]
            break


# -- after the load: the result is written whole -------------------------------------------------
# From the end of a command's load until it has written its run.json (results.writer.
# final), a stop signal is held, then raised: a Ctrl-C, or a Ctrl-C and a SIGTERM 50 ms
# later, no longer cut the final write and left run.json "running".
_HELD: list[int] = []
_HOLDING: dict[int, Any] = {}


def hold_signals() -> None:
    """Hold the stop signals (main thread only) until ``release_signals``."""
    if _HOLDING or threading.current_thread() is not threading.main_thread():
        return
    for sig in STOP_SIGNALS:
        if signal.getsignal(sig) == signal.SIG_IGN:     # ignored stays ignored (see _install)
            continue
        try:
            _HOLDING[sig] = signal.signal(sig, lambda s, _f: _HELD.append(s))
        except (ValueError, OSError):
            pass


def release_signals(raise_held: bool = True) -> None:
    """The handlers from before ``hold_signals``; a signal that came meanwhile is raised now
    (KeyboardInterrupt, or errors.Interrupted naming SIGTERM or SIGHUP)."""
    from llmbench.errors import Interrupted
    for sig, previous in list(_HOLDING.items()):
        try:
            signal.signal(sig, previous)
        except (ValueError, TypeError, OSError):
            pass
    _HOLDING.clear()
    held = _HELD[:1]
    _HELD.clear()
    if held and raise_held:
        raise Interrupted(signal.Signals(held[0]).name)


def fit_width(text: str, columns: int) -> str:
    """Cut a one-row status line to the terminal: one column short of the edge, because
    writing the last column leaves some terminals about to wrap."""
    width = max(columns - 1, 10)
    return text if len(text) <= width else text[:width]


async def _served_hint(target: Any, say_flag: bool = True, who: str | None = None) -> str:
    """"; the server serves: a, b; pass --model a" when the asked model is not among the ones
    the server lists (a 404 for a model name is the commonest first mistake: the README's
    examples against the built-in mock, which serves "mock"); "" when that cannot be told."""
    from llmbench.servers.discover import DiscoverError, served_models
    try:
        names = await asyncio.to_thread(served_models, target, 3.0)
    except (DiscoverError, OSError, ValueError):
        return ""
    if not names or target.model in names:
        return ""
    shown = ", ".join(names[:12]) + (f", ... ({len(names)} in all)" if len(names) > 12 else "")
    return (f"; {who or 'the server'} serves: {shown}"
            + (f"; pass --model {names[0]}" if say_flag else f"; --model {target.model!r} is not "
               "among them"))

