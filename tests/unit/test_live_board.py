"""The live view's rows: this step's TTFT and ITL percentiles by the summary's definitions, errors
by kind, progress and ETA, every row within 80 columns."""

from __future__ import annotations

import numpy as np

from llmbench.load.harness import LiveView
from llmbench.load.monitor import MonitorSample
from llmbench.load.session import Counters
from llmbench.load.shapes import LiveState
from llmbench.records.record import Record
from llmbench.report.console import fmt_ms
from llmbench.report.live import LiveBoard


def rec(i: int, step: int, ttft: float, gap: float, ok: bool = True, kind: str | None = None) -> Record:
    start = 100.0 + i
    times = [start + ttft + gap * k for k in range(5)] if ok else []
    return Record(f"r{i}", scheduled=start, start=start, sent=start + 0.0002, ok=ok, step=step,
                  error_kind=kind, status=200 if ok else 500, token_times=times,
                  first_token=times[0] if ok else None, end=times[-1] if ok else None,
                  done=(times[-1] if ok else start + 0.01), output_tokens=5 if ok else None)


def view(step: int, now: float, done: int = 10, failed: int = 1) -> LiveView:
    live = LiveState(step=step, load=4.0, users=4, phase="hold")
    c = Counters(done=done, failed=failed, in_flight=4)
    return LiveView(c, live, MonitorSample(now, 0.4, 1.0, 23.0), [], 950, now)


def test_rows_hold_this_steps_percentiles_and_fit_80_columns():
    board = LiveBoard(kind="ramp", n_steps=4, step_s=20.0)
    ttfts = [0.1 * k for k in range(1, 11)]
    for i, t in enumerate(ttfts):
        board.observe(rec(i, 1, t, 0.02))
    board.observe(rec(50, 0, 9.0, 0.5))                 # the previous step: not in these numbers
    board.observe(rec(51, 1, 0, 0, ok=False, kind="timeout_idle"))
    warm = rec(52, 1, 30.0, 1.0)
    warm.warmup = True
    board.observe(warm)
    rows = board.lines(view(1, 1000.0), 30.0)
    assert len(rows) == 4 and all(len(r) <= 80 for r in rows), rows
    assert rows[0].startswith("ramp  step 2/4 hold  4/4 users")
    p50, p95 = np.percentile(ttfts, 50), np.percentile(ttfts, 95)
    assert f"p50 {fmt_ms(p50 * 1000)}" in rows[1] and f"p95 {fmt_ms(p95 * 1000)}" in rows[1], rows[1]
    assert f"ITL p95 {fmt_ms(20.0)}" in rows[1] and "this step: 11 done" in rows[1]
    assert "timeout_idle 1" in rows[2] and "in flight 4" in rows[2] and "~950 tok/s" in rows[2]
    assert "lag p99 0.4 ms" in rows[3] and "CPU 23%" in rows[3] and f"send delay p99 {fmt_ms(0.2)}" in rows[3]
    # ten seconds later the bar has moved and the ETA counts the two steps left
    later = board.lines(view(1, 1010.0), 40.0)[0]
    assert "10s of 20s" in later and "ETA 50s" in later and "[##########..........]" in later


def test_a_run_shows_requests_done_of_planned():
    board = LiveBoard(kind="run", requests=40)
    rows = board.lines(view(None, 50.0, done=10), 5.0)
    assert "10/40" in rows[0] and "ETA 15s" in rows[0] and "so far: 0 done" in rows[1]
    assert rows[1].startswith(f"TTFT p50 {fmt_ms(None)}")       # nothing measured yet


# -- agent sessions and the server's machine (issues 35 and 39 on the live view) --------------

def call(i: int, sid: str, call_no: int, start: float, kind: str = "call", step: int = 1,
         ok: bool = True) -> Record:
    """One call of agent session ``sid``: 0.1 s TTFT, 0.4 s long."""
    r = rec(i, step, 0.1, 0.075, ok=ok, kind=None if ok else "http_status")
    r.start = r.scheduled = start
    r.token_times = [start + 0.1 + 0.075 * k for k in range(5)] if ok else []
    r.first_token = r.token_times[0] if ok else None
    r.end = r.token_times[-1] if ok else None
    r.done = r.end if ok else start + 0.01
    r.session_id, r.step_id, r.step_kind, r.turn = sid, str(call_no), kind, call_no
    return r


def test_agent_sessions_running_done_and_their_medians_this_step():
    board = LiveBoard(kind="ramp", n_steps=4, step_s=20.0)
    # step 1: A done in 3 calls over 2.4 s, B in 5 calls over 4.4 s, C failed at its 2nd call,
    # D at its 2nd call still; E (step 0) done: not this step's
    for k, t in enumerate((10.0, 11.0, 12.0)):
        board.observe(call(k, "A", k, t, "final" if k == 2 else "call"))
    for k in range(5):
        board.observe(call(10 + k, "B", k, 20.0 + k, "final" if k == 4 else "call"))
    board.observe(call(20, "C", 0, 30.0))
    board.observe(call(21, "C", 1, 31.0, ok=False))
    board.observe(call(30, "D", 0, 40.0))
    board.observe(call(31, "D", 1, 41.0))
    board.observe(call(40, "E", 0, 1.0, "final", step=0))
    rows = board.lines(view(1, 1000.0), 30.0)
    agents = next(r for r in rows if r.startswith("agents:"))
    assert len(agents) <= 80, agents
    # running: the one with a call answered and no answer yet (D, 2 calls so far)
    # done: a completed session's time (first start to last end) and calls, medians of 2.4 and
    # 4.4 s, 3 and 5 calls
    assert agents == f"agents: 1 running (call 2)  2 done in p50 {fmt_ms(3400.0)}, 4 calls  " \
        "1 failed", agents
    # where the load says how many are under way (their first call in flight too), that count
    v = view(1, 1001.0)
    v.agents_open = [1, 1, 1, 0]
    assert "agents: 3 running" in " ".join(board.lines(v, 31.0))


def test_no_agent_row_for_chat_and_no_server_row_without_telemetry():
    board = LiveBoard(kind="ramp", n_steps=2, step_s=10.0)
    board.observe(rec(0, 1, 0.1, 0.02))
    rows = board.lines(view(1, 1000.0), 5.0)
    assert len(rows) == 4 and not any(r.startswith(("agents", "server:")) for r in rows)


def test_the_server_row_is_its_telemetry_over_the_last_5_seconds():
    from tests.helpers.telemetry import gpu_sample, local
    # the server at 1.5 cores and 1 GiB, the machine 1.9 of 2 busy; two GPUs at 80 % mean,
    # 400 W and 40,000 MiB used together
    samples = [local(t, 1.5 * t, 0.25 * t, 1.9 * t, 2.0 * t) for t in range(0, 11)]
    samples += [gpu_sample(t) for t in range(0, 11)]
    v = view(1, 1000.0)
    v.telemetry = samples
    board = LiveBoard(kind="ramp", n_steps=2, step_s=10.0)
    row = board.lines(v, 5.0)[-1]
    assert row == "server: 1.50 cores  RSS 1.0 GiB  machine 1.9/2 cores  GPU 80% 400 W 39.1 GiB", row
    assert len(row) <= 80
