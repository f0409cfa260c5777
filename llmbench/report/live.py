"""The live view on a terminal: what the run is doing, redrawn once a second, gone at the end.

    ramp  step 2/4 hold  4 users   [#########...........]  9s of 20s  ETA 51s
    TTFT p50 183 ms  p95 412 ms  ITL p95 21.3 ms   this step: 38 done
    ~950 tok/s  done 120  failed 2 (timeout_idle 1, http_status 1)  in flight 4
    generator: lag p99 0.4 ms  CPU 23%  send delay p99 0.3 ms
    agents: 3 running (call 4)  12 done in p50 1.21s, 6 calls  1 failed
    server: 1.85 cores  RSS 1.2 GiB  machine 1.9/2 cores  GPU 87% 310 W 29.3 GiB

Numbers are the summary's definitions over this step's finished requests so far (TTFT, every
inter-token gap: report.livestep, the accumulator the dashboard's feed shares), so the live p95
and the report's cannot disagree in kind. The board is an observer (load.observe): the event
loop only appends each finished record to a deque and each tick's token events to another; the
percentiles are computed at the redraw. The token rate counts token events as they arrive (a
reply still streaming counts), over the last second. Agent sessions (``--workload agent``) are
rebuilt from the same records (analysis.sessions.LiveSessions), the running count the load's
own where it is known; the server's machine is its telemetry's last 5 s
(analysis.telemetry.recent, the dashboard's and the metrics port's window). README's "The live
view" says which rows show when, and how the board is drawn and cleared.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from llmbench.analysis import percentile
from llmbench.analysis.sessions import LiveSessions, SessionsNow
from llmbench.analysis.telemetry import fmt_bytes, recent
from llmbench.records.record import Record
from llmbench.report.console import fmt_ms
from llmbench.report.livestep import StepSoFar, Steps, TokenRate

BAR = 20


def duration(s: float | None, unknown: str = "?") -> str:
    """Seconds as 42s, 3m05s or 1h02m (the terminal's ``unknown`` is "?", the page's "–")."""
    if s is None or s < 0:
        return unknown
    s = int(round(s))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else (
        f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s")


@dataclass
class LiveBoard:
    """``kind``: run | ramp | probe. A ramp passes its steps and each step's planned seconds
    (ramp-in + hold); a run its planned requests or seconds; the progress bar and ETA follow."""

    kind: str = "run"
    unit: str = "users"
    n_steps: int | None = None
    step_s: float | None = None
    requests: int | None = None
    duration_s: float | None = None
    _pending: deque = field(default_factory=deque)
    _steps: Steps = field(default_factory=Steps)
    _tokens: TokenRate = field(default_factory=TokenRate)
    _errors: Counter = field(default_factory=Counter)
    _send: deque = field(default_factory=lambda: deque(maxlen=2000))
    _current: int | None = None
    _sessions: LiveSessions = field(default_factory=LiveSessions)

    # -- on the event loop ---------------------------------------------------------------------
    def observe(self, rec: Record) -> None:
        self._pending.append(rec)

    def token(self, now_s: float, n: int) -> None:
        self._tokens.add(now_s, n)

    def close(self) -> None:
        self._pending.clear()

    # -- at a redraw ---------------------------------------------------------------------------
    def _drain(self, now: float) -> None:
        while self._pending:
            rec = self._pending.popleft()
            self._sessions.add(rec)
            if self._steps.add(rec, now) is None:
                continue
            if rec.send_delay is not None:
                self._send.append(rec.send_delay)
            if not rec.ok:
                self._errors[rec.error_kind or "error"] += 1
        self._steps.flush()

    def lines(self, view: Any, elapsed_s: float) -> list[str]:
        """The view's rows as plain text (what ``draw`` draws)."""
        now = view.now
        self._drain(now)
        live, c, m = view.live, view.counters, view.monitor
        step = live.step
        key = step if step is not None else -1
        st = self._steps.get(step, now)
        if self._current != key:
            self._current = key
            st.started = min(st.started, now)
        head, done_share, eta = self._progress(view, elapsed_s, st)
        bar = ""
        if done_share is not None:
            filled = int(round(max(0.0, min(1.0, done_share)) * BAR))
            bar = f"[{'#' * filled}{'.' * (BAR - filled)}]"
        rows = [f"{head}  {bar}  {eta}".rstrip()]
        p50, p95 = st.ttft.pcts_ms((50, 95))
        itl95, = st.gaps.pcts_ms((95,))
        scope = "this step" if step is not None else "so far"
        rows.append(f"TTFT p50 {fmt_ms(p50)}  p95 {fmt_ms(p95)}  ITL p95 {fmt_ms(itl95)}   "
                    f"{scope}: {st.done} done")
        errs = ", ".join(f"{k} {n}" for k, n in self._errors.most_common(3))
        # without token calls (a board drawn by hand): the view's count since the last redraw
        rate = self._tokens.per_s(now) if self._tokens.arrivals else view.events_last_s
        rows.append(f"~{rate:.0f} tok/s  done {c.done}  failed {c.failed}"
                    + (f" ({errs})" if errs else "") + f"  in flight {c.in_flight}")
        gen = "generator:"
        if m is not None:
            gen += f" lag p99 {m.lag_p99_ms:.1f} ms  CPU {m.cpu_pct:.0f}%"
        if self._send:
            p99 = percentile.percentile(np.fromiter(self._send, float, len(self._send)), 99)
            gen += f"  send delay p99 {fmt_ms(p99 * 1000)}"
        rows.append(gen)
        agents = self._agents_row(view, step)
        if agents:
            rows.append(agents)
        server = server_row(getattr(view, "telemetry", None) or [])
        if server:
            rows.append(server)
        return rows

    def _agents_row(self, view: Any, step: int | None) -> str | None:
        """This step's agent sessions (those that started in it, as the TTFT row's requests are
        this step's; a run's: every one)."""
        opened = getattr(view, "agents_open", None)
        running = None if opened is None else sum(1 for k in opened if step is None or k == step)
        now = self._sessions.now(step, every=step is None, running=running)
        if not (now.running or now.completed or now.failed or now.joined):
            return None
        return agents_text(now)

    def _progress(self, view: Any, elapsed_s: float, st: StepSoFar) -> tuple[str, float | None, str]:
        live = view.live
        if self.kind in ("ramp", "probe") and self.n_steps:
            step = live.step if live.step is not None else 0
            where = (f"{live.users}/{live.load:g} users" if self.unit == "users"
                     else f"{live.load:g} req/s")
            head = f"{self.kind}  step {step + 1}/{self.n_steps} {live.phase or 'ramp-in'}  {where}"
            if not self.step_s:
                return head, None, ""
            in_step = max(view.now - st.started, 0.0)
            share = in_step / self.step_s
            left = max(self.step_s - in_step, 0.0) + (self.n_steps - step - 1) * self.step_s
            return head, share, f"{duration(in_step)} of {duration(self.step_s)}  ETA {duration(left)}"
        head = f"{self.kind}  {duration(elapsed_s)}"
        if self.requests:
            share = view.counters.done / self.requests
            rate = view.counters.done / elapsed_s if elapsed_s > 0 else 0.0
            left = (self.requests - view.counters.done) / rate if rate > 0 else None
            return head, share, f"{view.counters.done}/{self.requests}  ETA {duration(left)}"
        if self.duration_s:
            return self.kind, elapsed_s / self.duration_s, \
                f"{duration(elapsed_s)} of {duration(self.duration_s)}  " \
                f"ETA {duration(self.duration_s - elapsed_s)}"
        return head, None, ""

    def draw(self, view: Any, elapsed_s: float, width: int) -> Any:
        """The rows as a rich renderable, each cut to ``width`` (never wrapped)."""
        from rich.text import Text
        rows = [r if len(r) < width else r[: max(width - 2, 1)] + "…" for r in self.lines(view, elapsed_s)]
        return Text("\n".join(rows), no_wrap=True, overflow="crop")


def agents_text(now: SessionsNow) -> str:
    """The sessions' row, the most telling first (a row is cut at the terminal's width)."""
    done = f"{now.completed} done"
    if now.duration_median_s is not None and now.steps_median is not None:
        done += f" in p50 {fmt_ms(now.duration_median_s * 1000)}, {now.steps_median:.0f} calls"
    out = [f"agents: {now.running} running"
           + (f" (call {now.running_steps_median:.0f})" if now.running_steps_median else ""),
           done]
    if now.failed:
        out.append(f"{now.failed} failed")
    if now.joined:
        out.append(f"{now.joined} joined")
    return "  ".join(out)


def server_row(samples: list[dict[str, Any]]) -> str | None:
    """The server's machine over its telemetry's last seconds; None when nothing was sampled."""
    t = recent(samples)
    if t is None:
        return None
    out = ["server:"]
    p = t.server
    if p is not None:
        if p.cores is not None:
            out.append(f"{p.cores:.2f} cores")
        if p.rss_bytes_max is not None:
            out.append(f"RSS {fmt_bytes(p.rss_bytes_max)}")
    m = t.host or t.machine
    if m is not None and m.busy_cores is not None:
        out.append(f"machine {m.busy_cores:.1f}" + (f"/{m.cpus}" if m.cpus else "") + " cores")
    g = t.gpu
    if g is not None:
        parts = [f"{g.util_pct_mean:.0f}%" if g.util_pct_mean is not None else None,
                 f"{g.power_w_mean:.0f} W" if g.power_w_mean is not None else None,
                 fmt_bytes(g.fb_used_mib_max * 2**20) if g.fb_used_mib_max is not None else None]
        if any(parts):
            out.append("GPU " + " ".join(x for x in parts if x))
    return "server: " + "  ".join(out[1:]) if len(out) > 1 else None
