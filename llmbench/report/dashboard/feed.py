"""What the dashboard shows of a run in progress, from the live state the harness keeps: the
finished records (``observe``, the only call made on the event loop: one deque append, as the
Prometheus exporter and the terminal view do) and the counters, load, step and generator state
read once a second (``Gauges``).

``LiveSeries.tick`` runs in the dashboard's feeder thread, never on the event loop. It drains the
records into per-second buckets (a request counts in the second it finished, as a Prometheus
histogram observes it) and into the current step's figures so far, and returns plain numbers:
the rows of the last few seconds (a record may reach the coordinator a little after it finished,
so the last ``OPEN_S`` seconds are sent again until they are closed) and the gauges. Nothing
here renders: the numbers go to the dashboard's own process, which draws them.

Definitions are the summary's (METRICS.md): TTFT = first token event - start, ITL = every gap
between two token events, over successful measured requests (not warm-up, not cut by our own
interrupt); percentiles are numpy's linear ones, as vLLM's.
"""

from __future__ import annotations

import math
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from llmbench.analysis import percentile
from llmbench.analysis.sessions import LiveSessions
from llmbench.records.definitions import is_measured
from llmbench.records.record import Record

OPEN_S = 3                       # seconds whose row is sent again (late records from workers)
MAX_GAPS = 20_000                # inter-token gaps kept for the current step's percentiles
MAX_TTFTS = 20_000               # ... and TTFTs (a run is one step: its newest requests)
# The feeder shares the interpreter lock with the event loop: it lets go of it this often
# (records drained), so the loop never waits behind a whole tick (the loop monitor's p99 is a
# second's worst wait)
YIELD_EVERY = 16
SEND_DELAY_WINDOW_S = 10.0       # the generator's send delay p99: the last 10 s, as Prometheus


@dataclass
class Gauges:
    """The live state at one tick, read by the harness's provider in the feeder thread (plain
    reads of ints and floats the loop writes: a tick may see a second-old value, never a torn
    one)."""

    t_s: float | None = None             # seconds since dispatch began (None: not yet)
    started: int = 0
    done: int = 0
    failed: int = 0
    in_flight: int = 0
    events: int = 0                      # token events received so far
    users: int = 0                       # virtual users active now
    load: float = 0.0                    # the step's (or run's) users or requests/s
    step: int | None = None
    phase: str | None = None
    lag_p99_ms: float | None = None
    cpu_pct: float | None = None
    busiest: str | None = None           # --workers: which process the generator figures are
    # each server probe's last reading (the server's own state), by target name
    server: dict[str, dict[str, Any]] | None = None
    # the server machine's last telemetry samples (servers/telemetry.py: its process, the
    # machine, GPUs), counters as sampled
    telemetry: list[dict[str, Any]] = field(default_factory=list)
    # the ramp step of each agent session under way (None: with workers, not known here)
    agents_open: list[int | None] | None = None


def _pct(values: Any, q: float) -> float | None:
    return percentile.percentile(values, q)


def _pcts_ms(values: Any, qs: tuple[float, ...]) -> list[float | None]:
    """Several percentiles of seconds, in ms, in one pass (one call: its overhead is most of
    the cost on a second's few hundred values), by the tool's one percentile rule."""
    if not len(values):
        return [None] * len(qs)
    return [v * 1000.0 for v in percentile.percentiles(values, qs)]


def _ms(v: float | None) -> float | None:
    return None if v is None else v * 1000.0


@dataclass
class _Second:
    n: int = 0
    ok: int = 0
    ttft: list[float] = field(default_factory=list)
    gaps: list[float] = field(default_factory=list)
    errors: Counter = field(default_factory=Counter)
    state: dict[str, Any] | None = None          # the gauges at the second's end
    row: dict[str, Any] | None = None            # its row as last sent (None: changed since)


@dataclass
class _Newest:
    """The newest ``cap`` values, in arrays (a million-request run keeps a bounded few MB)."""

    cap: int
    parts: deque = field(default_factory=deque)
    n: int = 0

    def add(self, values: np.ndarray) -> None:
        if not len(values):
            return
        self.parts.append(values)
        self.n += len(values)
        while len(self.parts) > 1 and self.n - len(self.parts[0]) >= self.cap:
            self.n -= len(self.parts.popleft())

    def values(self) -> np.ndarray:
        return np.concatenate(list(self.parts)) if self.parts else np.empty(0)


@dataclass(eq=False)
class _StepSoFar:
    done: int = 0
    failed: int = 0
    ttft: _Newest = field(default_factory=lambda: _Newest(MAX_TTFTS))
    gaps: _Newest = field(default_factory=lambda: _Newest(MAX_GAPS))


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
    _steps: dict[int, _StepSoFar] = field(default_factory=dict)
    errors: Counter = field(default_factory=Counter)
    error_samples: dict[str, str] = field(default_factory=dict)    # kind -> a first body
    _send: deque = field(default_factory=deque)                    # (done, send delay)
    _last_events: int = 0
    _last_t: float | None = None
    t0: float | None = None                  # perf_counter when dispatch began
    sessions: LiveSessions = field(default_factory=LiveSessions)     # agent sessions so far

    # -- on the event loop ---------------------------------------------------------------------
    def observe(self, rec: Record) -> None:
        self._pending.append(rec)

    # -- in the feeder thread ------------------------------------------------------------------
    def _drain(self) -> None:
        pending = self._pending
        t0 = self.t0
        # this tick's values per step, added as one array each (not one per request)
        ttfts: dict[_StepSoFar, list[float]] = {}
        gaps: dict[_StepSoFar, list[float]] = {}
        n = 0
        while pending:
            rec = pending.popleft()
            n += 1
            if n % YIELD_EVERY == 0:
                time.sleep(0)               # the loop takes the lock if it waits for it
            if rec.session_id is not None:
                self.sessions.add(rec)
            if not is_measured(rec.warmup, rec.error_kind):
                continue
            if t0 is None:
                continue                     # the preflight's records (none are observed)
            sec = max(int(math.floor(rec.done - t0)), self._closed_before)
            b = self._seconds.get(sec)
            if b is None:
                b = self._seconds[sec] = _Second()
            st = self._steps.get(-1 if rec.step is None else rec.step)
            if st is None:
                st = self._steps[-1 if rec.step is None else rec.step] = _StepSoFar()
            b.n += 1
            b.row = None
            st.done += 1
            if rec.send_delay is not None:
                self._send.append((rec.done, rec.send_delay))
            if not rec.ok:
                label = error_label(rec)
                b.errors[label] += 1
                st.failed += 1
                self.errors[label] += 1
                if label not in self.error_samples and rec.error:
                    self.error_samples[label] = rec.error[:200]
                continue
            b.ok += 1
            ttft = rec.ttft
            if ttft is not None:
                b.ttft.append(ttft)
                ttfts.setdefault(st, []).append(ttft)
            times = rec.token_times
            if len(times) > 1:
                # plain floats: a numpy call per request costs more than the subtraction
                g = [y - x for x, y in zip(times, times[1:])]
                b.gaps.extend(g)
                gaps.setdefault(st, []).extend(g)
        for st, values in ttfts.items():
            st.ttft.add(np.asarray(values, dtype=float))
        for st, values in gaps.items():
            st.gaps.add(np.asarray(values, dtype=float))

    def tick(self, g: Gauges, now: float, last: bool = False) -> dict[str, Any]:
        """Drain what finished, and return this tick's message: the gauges, the rows of the
        seconds still open (final ones once, then no more), the step so far and the errors.
        ``last``: the run is over, so the second in progress is its last row."""
        if self.t0 is None and g.t_s is not None:
            self.t0 = now - g.t_s
        self._drain()
        tok_s = None
        if self._last_t is not None and now > self._last_t:
            tok_s = (g.events - self._last_events) / (now - self._last_t)
        self._last_events, self._last_t = g.events, now
        cutoff = now - SEND_DELAY_WINDOW_S
        while self._send and self._send[0][0] < cutoff:
            self._send.popleft()
        send = [d for _, d in self._send]
        machine = machine_now(getattr(g, "telemetry", None) or [], now)
        # the server's own state: the backend's probe (a probe's direct path), else the first
        probes = g.server or {}
        server = probes.get("direct") or probes.get("main") or next(iter(probes.values()), {})
        state = {"users": g.users, "load": g.load, "step": g.step, "phase": g.phase,
                 "in_flight": g.in_flight, "tok_s": tok_s,
                 "lag_p99_ms": g.lag_p99_ms, "cpu_pct": g.cpu_pct,
                 "send_delay_p99_ms": _ms(_pct(send, 99)),
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
                if b.state is None:
                    b.state = state      # the first tick after the second ended
                rows.append(self._row(sec, b))
            # a second is final OPEN_S seconds after it ended (records reach us by then)
            close = max(current - OPEN_S, self._closed_before)
            for sec in range(self._closed_before, close):
                self._seconds.pop(sec, None)
            self._closed_before = close
        key = -1 if g.step is None else g.step
        for old in [k for k in self._steps if k < key]:
            del self._steps[old]            # a step that is over: its figures are judged
        st = self._steps.get(key) or _StepSoFar()
        time.sleep(0)
        t50, t95, t99 = _pcts_ms(st.ttft.values(), (50, 95, 99))
        time.sleep(0)
        i50, i95, i99 = _pcts_ms(st.gaps.values(), (50, 95, 99))
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

    def _sessions_now(self, g: Gauges) -> dict[str, Any] | None:
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
        if b.row is not None:
            return b.row                         # nothing new in that second
        t50, t95 = _pcts_ms(b.ttft, (50, 95))
        i50, i95 = _pcts_ms(b.gaps, (50, 95))
        b.row = {**(b.state or {}), "t": sec + 1, "requests": b.n, "ok": b.ok,
                 "failed": b.n - b.ok, "ttft_p50_ms": t50, "ttft_p95_ms": t95,
                 "itl_p50_ms": i50, "itl_p95_ms": i95, "errors": dict(b.errors)}
        return b.row
