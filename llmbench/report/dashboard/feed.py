"""What the dashboard shows of a run in progress, from the live state the harness keeps: the
finished records (``observe``: one deque append, as the Prometheus exporter and the terminal
view do), the token events as they arrive (``token``: one append a tenth of a second), and the
counters, load, step and generator state read once a second (load.observe.LiveNow).

``LiveSeries.tick`` runs in the dashboard's feeder thread, never on the event loop. It drains the
records into per-second buckets (a request counts in the second it finished, as a Prometheus
histogram observes it) and into the current step's figures so far (report.livestep, the
accumulator the terminal view shares); each second's token rate is the token events that
arrived in it, so a reply that streams for seconds is seen as it streams. Every figure is by
the summary's definitions, as report.livestep states them.
"""

from __future__ import annotations

import math
from array import array
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from llmbench.analysis import percentile
from llmbench.analysis.sessions import LiveSessions
from llmbench.load.observe import LiveNow
from llmbench.records.definitions import is_measured
from llmbench.records.record import Record
from llmbench.report.livestep import Steps, TokenRate, gaps_of, pcts_ms

OPEN_S = 3                       # seconds whose row is sent again (late records from workers)
# A row's latencies are over the requests finished in its last WINDOW_S seconds (the report's
# timeline's "last 10 s"): with replies longer than a second, most seconds see no request end,
# and a chart of each second's own would be scattered dots
WINDOW_S = 10
WINDOW_VALUES = 50_000           # a window's values past this are thinned evenly (a busy run)
# The feeder shares the interpreter lock with the event loop: it lets go of it this often
# (records drained), so the loop never waits behind a whole tick (the loop monitor's p99 is a
# second's worst wait)
YIELD_EVERY = 16
SEND_DELAY_WINDOW_S = 10.0       # the generator's send delay p99: the last 10 s, as Prometheus


def _ms(v: float | None) -> float | None:
    return None if v is None else v * 1000.0


@dataclass
class _Second:
    """One second of the dashboard's feed: counts and latencies."""
    n: int = 0
    ok: int = 0
    # compact (8 bytes a value): a second is kept WINDOW_S more for the windows
    ttft: array = field(default_factory=lambda: array("d"))
    gaps: array = field(default_factory=lambda: array("d"))
    errors: Counter = field(default_factory=Counter)
    state: dict[str, Any] | None = None          # the gauges at the second's end


def machine_now(samples: list[dict[str, Any]], now: float) -> dict[str, Any]:
    """The server's machine over the last few seconds, from its telemetry samples, by the
    report's own definitions (analysis.telemetry.recent: the live views' one window)."""
    from llmbench.analysis.telemetry import RECENT_S, recent
    w = recent(samples)
    if w is None:
        return {}
    out: dict[str, Any] = {"window_s": RECENT_S}
    if w.server is not None:
        out.update(server_cores=w.server.cores, server_rss_bytes=w.server.rss_bytes_max,
                   server_pid=w.server.pid)
    m = w.host or w.machine
    if m is not None:
        out.update(machine_busy_cores=m.busy_cores, machine_cpus=m.cpus,
                   machine_source=m.source)
    if w.gpu is not None:
        out.update(gpu_util_pct=w.gpu.util_pct_mean, gpu_power_w=w.gpu.power_w_mean,
                   gpu_mem_mib=w.gpu.fb_used_mib_max, gpu_name=w.gpu.name)
    return {k: v for k, v in out.items() if v is not None}


def error_label(rec: Record) -> str:
    """An error's kind as the page groups it: http_status with its status."""
    kind = rec.error_kind or "error"
    return f"{kind} {rec.status}" if kind == "http_status" and rec.status else kind


@dataclass
class LiveSeries:
    """Per-second rows and the current step's figures, fed by ``observe`` and ``tick``."""

    _pending: deque = field(default_factory=deque)
    _seconds: dict[int, _Second] = field(default_factory=dict)
    _closed_before: int = 0                  # rows below this second are final (sent)
    _steps: Steps = field(default_factory=Steps)
    _tokens: TokenRate = field(default_factory=TokenRate)
    errors: Counter = field(default_factory=Counter)
    error_samples: dict[str, str] = field(default_factory=dict)    # kind -> a first body
    _send: deque = field(default_factory=deque)                    # (done, send delay)
    t0: float | None = None                  # perf_counter when dispatch began
    sessions: LiveSessions = field(default_factory=LiveSessions)     # agent sessions so far

    # -- on the event loop ---------------------------------------------------------------------
    def observe(self, rec: Record) -> None:
        self._pending.append(rec)

    def token(self, now_s: float, n: int) -> None:
        self._tokens.add(now_s, n)

    # -- in the feeder thread ------------------------------------------------------------------
    def _drain(self) -> None:
        pending = self._pending
        t0 = self.t0
        n = 0
        while pending:
            rec = pending.popleft()
            n += 1
            if n % YIELD_EVERY == 0:
                time.sleep(0)               # the loop takes the lock if it waits for it
            if rec.session_id is not None:
                self.sessions.add(rec)
            if t0 is None or not is_measured(rec.warmup, rec.error_kind):
                continue                     # (t0 None: the preflight's, none are observed)
            sec = max(int(math.floor(rec.done - t0)), self._closed_before)
            b = self._seconds.get(sec)
            if b is None:
                b = self._seconds[sec] = _Second()
            self._steps.add(rec)
            b.n += 1
            if rec.send_delay is not None:
                self._send.append((rec.done, rec.send_delay))
            if not rec.ok:
                label = error_label(rec)
                b.errors[label] += 1
                self.errors[label] += 1
                if label not in self.error_samples and rec.error:
                    self.error_samples[label] = rec.error[:200]
                continue
            b.ok += 1
            if rec.ttft is not None:
                b.ttft.append(rec.ttft)
            if len(rec.token_times) > 1:
                b.gaps.extend(gaps_of(rec))
        self._steps.flush()

    def tick(self, g: LiveNow, now: float, last: bool = False) -> dict[str, Any]:
        """Drain what finished, and return this tick's message: the gauges, the rows of the
        seconds still open (final ones once, then no more), the step so far and the errors.
        ``last``: the run is over, so the second in progress is its last row."""
        if self.t0 is None and g.t_s is not None:
            self.t0 = now - g.t_s
        self._drain()
        tok_s = self._tokens.per_s(now)     # token events as they arrive, the last second
        cutoff = now - SEND_DELAY_WINDOW_S
        while self._send and self._send[0][0] < cutoff:
            self._send.popleft()
        send = [d for _, d in self._send]
        machine = machine_now(getattr(g, "telemetry", None) or [], now)
        # the server's own state: the backend's probe (a probe's direct path), else the first
        probes = g.server or {}
        server = probes.get("direct") or probes.get("main") or next(iter(probes.values()), {})
        # a fixed run's shape counts no users (its concurrency is its load): none drawn, not 0
        users = g.users if g.users or g.step is not None else None
        state = {"users": users, "load": g.load, "step": g.step, "phase": g.phase,
                 "in_flight": g.in_flight, "tok_s": tok_s,
                 "lag_p99_ms": g.lag_p99_ms, "cpu_pct": g.cpu_pct,
                 "send_delay_p99_ms": _ms(percentile.percentile(send, 99)),
                 **{f"server_{k}": server[k] for k in ("running", "waiting", "kv_cache_usage")
                    if isinstance(server.get(k), (int, float))},
                 **{k: machine[k] for k in ("server_cores", "machine_busy_cores", "gpu_util_pct")
                    if machine.get(k) is not None}}
        rows: list[dict[str, Any]] = []
        if self.t0 is not None:
            current = int(math.floor(now - self.t0))       # the second in progress
            if last:
                current = max(current + 1, max(self._seconds, default=-1) + 1)
            for sec in range(self._closed_before, current):
                b = self._seconds.get(sec)
                if b is None:
                    b = self._seconds[sec] = _Second()
                if b.state is None:      # the first tick after the second ended
                    # its own token events: those that arrived in that second
                    b.state = {**state, "tok_s": float(self._tokens.count(
                        self.t0 + sec, self.t0 + sec + 1))}
                rows.append(self._row(sec, b))
            # a second is final OPEN_S seconds after it ended (records reach us by then)
            close = max(current - OPEN_S, self._closed_before)
            for sec in [k for k in self._seconds if k < close - WINDOW_S]:
                del self._seconds[sec]          # out of every open row's window
            self._closed_before = close
        self._steps.forget_before(g.step)   # a step that is over: its figures are judged
        st = self._steps.get(g.step)
        time.sleep(0)
        t50, t95, t99 = st.ttft.pcts_ms((50, 95, 99))
        time.sleep(0)
        i50, i95, i99 = st.gaps.pcts_ms((50, 95, 99))
        return {
            "t_s": g.t_s, "gauges": {
                "started": g.started, "done": g.done, "failed": g.failed,
                "in_flight": g.in_flight, "users": g.users,
                "load": g.load, "step": g.step, "phase": g.phase, "tok_s": tok_s,
                "lag_p99_ms": g.lag_p99_ms, "cpu_pct": g.cpu_pct, "busiest": g.busiest,
                "send_delay_p99_ms": state["send_delay_p99_ms"], "server": g.server,
                "machine": machine or None},
            "rows": rows,
            "step_so_far": {
                "step": g.step, "done": st.done, "failed": st.failed,
                "ttft_p50_ms": t50, "ttft_p95_ms": t95, "ttft_p99_ms": t99,
                "itl_p50_ms": i50, "itl_p95_ms": i95, "itl_p99_ms": i99},
            "errors": dict(self.errors.most_common()),
            "error_samples": dict(self.error_samples),
            "sessions": self._sessions_now(g),
        }

    def _sessions_now(self, g: LiveNow) -> dict[str, Any] | None:
        """Agent sessions so far: this step's (those that started in it) and the run's; None
        when none ran."""
        opened = getattr(g, "agents_open", None)
        whole = self.sessions.now(running=None if opened is None else len(opened))
        if not (whole.running or whole.completed or whole.failed or whole.joined):
            return None
        out = {"run": whole.to_dict()}
        if g.step is not None:
            mine = None if opened is None else sum(1 for k in opened if k == g.step)
            out["step"] = self.sessions.now(g.step, every=False, running=mine).to_dict()
        return out

    def _row(self, sec: int, b: _Second) -> dict[str, Any]:
        """Second ``sec``'s row: its requests, and the latencies of the last WINDOW_S seconds
        (open rows are drawn again each tick: a late record changes the windows after it)."""
        seconds = [w for k in range(sec - WINDOW_S + 1, sec + 1)
                   if (w := self._seconds.get(k)) is not None]
        t50, t95 = pcts_ms(_window([w.ttft for w in seconds]), (50, 95))
        i50, i95 = pcts_ms(_window([w.gaps for w in seconds]), (50, 95))
        return {**(b.state or {}), "t": sec + 1, "requests": b.n, "ok": b.ok,
                "failed": b.n - b.ok, "ttft_p50_ms": t50, "ttft_p95_ms": t95,
                "itl_p50_ms": i50, "itl_p95_ms": i95, "errors": dict(b.errors)}


def _window(parts: list[Any]) -> np.ndarray:
    """The seconds' values as one array, at most WINDOW_VALUES of them (every k-th: its
    percentiles within a hair of the whole's)."""
    values = np.concatenate([np.asarray(p, float) for p in parts]) if parts else np.empty(0)
    k = -(-len(values) // WINDOW_VALUES)
    return values[::k] if k > 1 else values


@dataclass
class DashboardFeed:
    """The dashboard as an observer (load.observe) of one run, feeding ``board`` (handle.for_run's:
    the page, a cell's view or both); ``close`` ends this run's feed, not the page."""

    board: Any

    def observe(self, rec: Record) -> None:
        self.board.observe(rec)

    def token(self, now_s: float, n: int) -> None:
        self.board.token(now_s, n)

    def attach(self, now: Callable[[], LiveNow]) -> None:
        self.board.attach(now)

    def close(self) -> None:
        self.board.stop_feed()        # its last tick, with every record
