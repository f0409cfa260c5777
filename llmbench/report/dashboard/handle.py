"""The load generator's end of ``--dashboard`` (see the package's docstring): the page's own
process, started and fed from here, and the feeder thread."""

from __future__ import annotations

import atexit
import json
import math
import os
import queue
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from llmbench.records.record import Record
from llmbench.report.dashboard.address import DEFAULT_HOST, DashboardError, url_of
from llmbench.load.observe import LiveNow
from llmbench.report.dashboard.feed import LiveSeries

if TYPE_CHECKING:
    from llmbench.results.schema import Run, Sweep

TICK_S = 1.0
TICK_GRACE_S = 0.25          # a tick comes this long after a second ends: its records are in
START_TIMEOUT_S = 30.0
SYNC_TIMEOUT_S = 10.0     # the page applies a message in microseconds; a busy machine is slower


class Dashboard:
    """One command's dashboard: its page's process, and the feeder thread that sends it the run."""

    def __init__(self, host: str = DEFAULT_HOST, port: int = 0) -> None:
        self.host, self.port = host, port
        self._proc: subprocess.Popen[bytes] | None = None
        self._out: queue.SimpleQueue[dict[str, Any] | None] = queue.SimpleQueue()
        self._writer: threading.Thread | None = None
        self._series: LiveSeries | None = None
        self._gauges: Callable[[], LiveNow] | None = None
        self._feeder: threading.Thread | None = None
        self._stop_feed = threading.Event()
        self._lock = threading.Lock()
        self.broken: str | None = None            # why the page stopped being fed
        self.in_sweep = False
        self.final = False
        self.linger_s: float | None = None        # --dashboard-linger (None: until Ctrl-C)
        self.view: Any = None                     # a notebook cell's view instead of a page
        self._closed = False
        self._syncs = 0

    @classmethod
    def in_cell(cls, view: Any) -> "Dashboard":
        """The same feed into a notebook cell's view (report/notebook.CellView) in this
        process: its ``send`` gets each message, in the writer thread, instead of a page."""
        d = cls("", 0)
        d.view = view
        d._writer = threading.Thread(target=d._write_loop, name="llmbench-cell-view",
                                     daemon=True)
        d._writer.start()
        return d

    # -- the child ------------------------------------------------------------------------------
    def open(self) -> "Dashboard":
        if self._proc is not None:
            return self
        cmd = [sys.executable, "-m", "llmbench.report.dashboard.server",
               "--host", self.host, "--port", str(self.port), "--feed"]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(Path(__file__).resolve().parents[3]), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
        self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      env=env)
        line = _read_line(self._proc, START_TIMEOUT_S)
        if not line.startswith("PORT "):
            self._proc.kill()
            self._proc.wait()
            self._proc = None
            why = line[len("ERROR "):] if line.startswith("ERROR ") else (
                line or "its process exited before listening")
            raise DashboardError(f"--dashboard {self.host}:{self.port}: cannot serve the page "
                                 f"({why}); choose a free port, or give none for any")
        self.port = int(line.split()[1])
        self._writer = threading.Thread(target=self._write_loop, name="llmbench-dashboard-out",
                                        daemon=True)
        self._writer.start()
        atexit.register(self.close)
        return self

    @property
    def url(self) -> str:
        return url_of(self.host, self.port)

    @property
    def alive(self) -> bool:
        if self.view is not None:
            return not self._closed
        return self._proc is not None and self._proc.poll() is None

    def send(self, msg: dict[str, Any]) -> None:
        """Queue a message for the page's process (never blocks: the writer thread writes)."""
        if (self._proc is not None or self.view is not None) and self.broken is None:
            self._out.put(msg)

    def sync(self, timeout_s: float = SYNC_TIMEOUT_S) -> bool:
        """Wait until the page's process has applied every message sent so far (it answers a
        ``sync`` with ``SYNC n`` on stdout): the page a command leaves up shows its end, not a
        moment before it, when the command returns. False if it did not answer in time."""
        proc = self._proc
        if proc is None or self.view is not None or self.broken is not None or not self.alive:
            return False
        self._syncs += 1
        n = self._syncs
        self.send({"type": "sync", "n": n})
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            line = _read_line(proc, left)
            if line == f"SYNC {n}":
                return True
            if not line:
                return False
        return False

    def _write_loop(self) -> None:
        if self.view is not None:
            self._to_view()
            return
        proc = self._proc
        assert proc is not None and proc.stdin is not None
        while True:
            msg = self._out.get()
            if msg is None:
                break
            try:
                data = json.dumps(msg, default=_jsonable, allow_nan=False,
                                  separators=(",", ":")).encode() + b"\n"
            except (TypeError, ValueError):
                data = json.dumps(_finite(msg), default=_jsonable,
                                  separators=(",", ":")).encode() + b"\n"
            try:
                proc.stdin.write(data)
                proc.stdin.flush()
            except (BrokenPipeError, OSError, ValueError):
                self._broke("the dashboard's process ended", "the run goes on without its page")
                break

    def _to_view(self) -> None:
        while True:
            msg = self._out.get()
            if msg is None:
                break
            try:
                self.view.send(_finite(msg))
            except Exception as exc:  # noqa: BLE001 - a cell's view must never stop a run
                self._broke(f"the live view failed ({type(exc).__name__}: {exc})")

    def _broke(self, why: str, goes_on: str = "the run goes on") -> None:
        """Why the page (or the cell's view) stopped being fed: said once, on stderr."""
        if self.broken is None:
            self.broken = why
            print(f"warning: {why}; {goes_on}", file=sys.stderr, flush=True)

    # -- a run ----------------------------------------------------------------------------------
    def begin(self, meta: dict[str, Any]) -> None:
        """A run (or a sweep's next ramp) starts: the page shows it from its first second."""
        self.stop_feed()
        self.final = False
        self._series = LiveSeries()
        self.send({"type": "begin", "meta": meta})

    def plan(self, **meta: Any) -> None:
        """More of the plan, known after ``begin`` (a ramp's thresholds)."""
        self.send({"type": "meta", "meta": meta})

    def observe(self, rec: Record) -> None:
        """On the event loop: every finished record (one deque append)."""
        s = self._series
        if s is not None:
            s.observe(rec)

    def token(self, now_s: float, n: int) -> None:
        """On the event loop: token events as they arrive (one append)."""
        s = self._series
        if s is not None:
            s.token(now_s, n)

    def attach(self, gauges: Callable[[], LiveNow]) -> None:
        """The harness's live state, read once a second by the feeder thread from now on."""
        self._gauges = gauges
        if self._series is None:
            self._series = LiveSeries()
        self._stop_feed = threading.Event()
        self._feeder = threading.Thread(target=self._feed, args=(self._stop_feed,),
                                        name="llmbench-dashboard-feed", daemon=True)
        self._feeder.start()

    def _feed(self, stop: threading.Event) -> None:
        while True:
            self._tick()
            series = self._series
            t0 = series.t0 if series is not None else None
            now = time.perf_counter()
            if t0 is None:
                wait = TICK_S
            else:        # just after the next second of the run ends
                wait = (math.floor(now - t0 - TICK_GRACE_S) + 1 + TICK_GRACE_S) - (now - t0)
                wait = wait if wait > 0.05 else wait + TICK_S
            if stop.wait(wait):
                return

    def _tick(self, last: bool = False) -> None:
        with self._lock:
            series, gauges = self._series, self._gauges
            if series is None or gauges is None:
                return
            try:
                msg = series.tick(gauges(), time.perf_counter(), last)
            except Exception as exc:  # noqa: BLE001 - a page must never stop a run
                self._broke(f"the dashboard's feed failed ({type(exc).__name__}: {exc})")
                return
            self.send({"type": "tick", **msg})

    def stop_feed(self) -> None:
        """The run's load is over: one last tick (every record in), then no more."""
        feeder = self._feeder
        if feeder is not None:
            self._stop_feed.set()
            feeder.join(timeout=5.0)
            self._feeder = None
            self._tick(last=True)
        self._gauges = None

    def step(self, step: dict[str, Any], verdict: dict[str, Any] | None = None) -> None:
        """A step was judged (its thresholds passed or failed), with the verdict so far."""
        self.send({"type": "step", "step": step, "verdict": verdict})

    def finished(self, run_dir: Path | None, run: "Run | None") -> None:
        """The run's end: its report.html (or, without a folder, its last state) is the page.
        In a sweep, one setting is done and the page goes on to the next."""
        self.stop_feed()
        report = str(Path(run_dir) / "report.html") if run_dir is not None else None
        if self.in_sweep:
            self.send({"type": "setting_done", "run": _brief(run), "report": report})
            return
        self.final = True
        self.send({"type": "final", "run": _brief(run), "report": report,
                   "folder": str(run_dir) if run_dir is not None else None})

    def failed(self, error: str) -> None:
        """Nothing was measured (the preflight failed): the page says why."""
        self.stop_feed()
        if self.in_sweep:
            self.send({"type": "setting_done", "run": {"status": "failed", "error": error}})
            return
        self.final = True
        self.send({"type": "failed", "error": error})

    def sweep(self, meta: dict[str, Any]) -> None:
        self.in_sweep = True
        self.send({"type": "sweep", "meta": meta})

    def sweep_setting(self, index: int, name: str, results: list[dict[str, Any]]) -> None:
        self.send({"type": "sweep_setting", "index": index, "name": name, "results": results})

    def sweep_finished(self, sweep_dir: Path, sweep: "Sweep") -> None:
        """The sweep is over: its report is the page."""
        doc = sweep.to_dict()
        self.in_sweep = False
        self.final = True
        self.send({"type": "final", "run": {"kind": "sweep", "answer": doc.get("answer"),
                                            "status": doc.get("status")},
                   "report": str(Path(sweep_dir) / "report.html"), "folder": str(sweep_dir)})

    # -- the end --------------------------------------------------------------------------------
    def linger(self, seconds: float | None) -> None:
        """Keep the page up for ``seconds`` (None: until Ctrl-C), then close it. Ctrl-C ends
        the wait, not the command: its exit code stays the run's."""
        if not self.alive:
            return
        how = "until Ctrl-C" if seconds is None else f"for {seconds:g} s (Ctrl-C to stop now)"
        if threading.current_thread() is threading.main_thread():
            # Ctrl-C is what ends the wait: whatever the run's loop left as SIGINT's handler
            # (issue 49: under load the linger once outlived a Ctrl-C sent during it)
            signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            # the line is inside the try: a Ctrl-C sent as soon as it is read ends the wait too
            print(f"Dashboard: {self.url} stays up {how}", file=sys.stderr, flush=True)
            deadline = None if seconds is None else time.monotonic() + seconds
            while self.alive:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    break
                time.sleep(0.25 if left is None else min(0.25, left))
        except KeyboardInterrupt:
            pass
        self.close()

    def close(self) -> None:
        self.stop_feed()
        if self.view is not None:
            if not self._closed:
                self._closed = True
                self._out.put(None)
                if self._writer is not None:
                    self._writer.join(timeout=5.0)
            return
        proc = self._proc
        if proc is None:
            return
        self._proc = None
        self._out.put(None)
        if self._writer is not None:
            self._writer.join(timeout=2.0)
        try:
            if proc.stdin is not None:
                proc.stdin.close()        # EOF: the page's process ends by itself
        except OSError:
            pass
        try:
            proc.wait(timeout=3.0)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        forget(self)


def _read_line(proc: subprocess.Popen[bytes], timeout_s: float) -> str:
    """The child's next line on stdout ("PORT n", "ERROR why", "SYNC n"), "" if it exits first."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    buf = b""
    fd = proc.stdout.fileno()
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            buf += chunk
            if b"\n" in buf:
                return buf.split(b"\n", 1)[0].decode("utf-8", "replace").strip()
        elif proc.poll() is not None:
            break
    return buf.decode("utf-8", "replace").strip()


def _finite(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def _jsonable(obj: Any) -> Any:
    if hasattr(obj, "item"):            # numpy scalars
        return obj.item()
    return str(obj)                     # a Path, or anything else json cannot write


def _brief(result: "Run | None") -> dict[str, Any] | None:
    """What the page says of a finished run before its report is read."""
    if result is None:
        return None
    run = result.to_dict()
    return {"kind": run.get("kind"), "status": run.get("status"),
            "verdict": run.get("verdict"), "steps": run.get("steps"),
            "summary": run.get("summary"), "thresholds": run.get("thresholds"),
            "router_bound": run.get("router_bound"), "error": run.get("error")}


# -- one per command ----------------------------------------------------------------------------
_SHARED: dict[tuple[str, int], Dashboard] = {}


def shared(address: tuple[str, int]) -> Dashboard:
    """The command's dashboard at ``address``, opened (and its URL printed) on first use; port
    0 takes the one already open on that host, if any."""
    host, port = address
    d = _SHARED.get((host, port))
    if d is None and port == 0:
        d = next((v for (h, _), v in _SHARED.items() if h == host), None)
    if d is not None and d.alive:
        return d
    d = Dashboard(host, port).open()
    _SHARED[(host, port)] = d
    _SHARED[(host, d.port)] = d
    print(f"Dashboard: {d.url} (live while the run lasts, then its report)", file=sys.stderr,
          flush=True)
    return d


def current() -> Dashboard | None:
    """The dashboard open in this process, if any."""
    return next((d for d in _SHARED.values() if d.alive), None)


def forget(d: Dashboard) -> None:
    """A dashboard that closed is no longer the command's."""
    for k, v in list(_SHARED.items()):
        if v is d:
            _SHARED.pop(k, None)


class Tee:
    """The page and a notebook cell's view fed as one: every call goes to each."""

    def __init__(self, boards: list[Dashboard]) -> None:
        self.boards = boards

    def __getattr__(self, name: str) -> Any:
        calls = [getattr(b, name) for b in self.boards]

        def each(*args: Any, **kw: Any) -> Any:
            out = None
            for c in calls:
                out = c(*args, **kw)
            return out
        return each


_CELL: list[Dashboard] = []        # the live view of the notebook cell running now, if any


def set_cell_view(board: Dashboard | None) -> None:
    """The API's notebook view for the call in progress (None: the call is over)."""
    _CELL[:] = [board] if board is not None else []


def for_run(address: tuple[str, int] | None, linger_s: float | None = None) -> Any:
    """What a run feeds: the --dashboard page at ``address`` (opened on first use), a notebook
    cell's live view, both (a Tee), or None."""
    boards = []
    if address is not None:
        d = shared(address)
        d.linger_s = linger_s
        boards.append(d)
    return _fed(boards + [b for b in _CELL if b.alive])


def for_end() -> Any:
    """What a command's end tells (the page open in this process, a cell's view), or None."""
    return _fed([d for d in (current(),) if d is not None] + [b for b in _CELL if b.alive])


def _fed(boards: list[Dashboard]) -> Any:
    """None, the one board, or a Tee of them."""
    return None if not boards else boards[0] if len(boards) == 1 else Tee(boards)


def end_of_command(cli: bool, interrupted: bool = False) -> None:
    """A command is over: the command line's page lingers (``Dashboard.linger``), Python's only
    with ``dashboard_linger`` (else it stays up for the next run). A command a stop signal
    ended (``interrupted``: Ctrl-C during the load or its closing output) does not linger: that
    Ctrl-C was the one that ends the wait, and the user, who pressed it once, would otherwise
    wait out the linger (``llmbench dashboard RUN`` serves the folder later)."""
    d = current()
    if d is None:
        return
    try:
        d.sync()
        if cli and interrupted:
            d.close()
        elif cli or d.linger_s is not None:
            d.linger(d.linger_s)
    except KeyboardInterrupt:           # Ctrl-C while the page caught up: the wait is over
        d.close()
