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
