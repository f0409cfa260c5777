"""The live views' shared parts (issue 44, 5; issue 45, 4): one per-step accumulator
(report.livestep) for the terminal board and the dashboard's feed, token events counted as
they arrive (Observer.token), and the live chart's latencies over a window, so a run whose
replies outlast a second draws lines, not scattered dots."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from llmbench.load.observe import Attached, Drawn, LiveNow, Observer
from llmbench.records.record import Record
from llmbench.report.dashboard.feed import WINDOW_S, DashboardFeed, LiveSeries
from llmbench.report.live import LiveBoard
from llmbench.report.livestep import Steps, TokenRate
from llmbench.report.prometheus import MetricsExporter

T0 = 1000.0


def reply(i: int, start: float, ttft: float, n: int, itl: float, step: int | None = 0) -> Record:
    times = [start + ttft + k * itl for k in range(n)]
    r = Record(f"r{i}", scheduled=start, start=start, token_times=times, ok=True, step=step,
               done=times[-1] + 0.001)
    r.first_token, r.end = times[0], times[-1]
    return r


def test_every_live_view_is_an_observer():
    views = [MetricsExporter(), LiveBoard(), DashboardFeed(SimpleNamespace())]
    assert all(isinstance(v, Observer) for v in views)
    # the exporter and the page read the live state in their own threads; only the board is
    # drawn on the terminal (the exporter's render() is its exposition, not a terminal view)
    assert [isinstance(v, Attached) for v in views] == [True, False, True]
    assert [isinstance(v, Drawn) for v in views] == [False, True, False]


def test_the_board_and_the_feed_share_one_accumulator_and_agree():
    recs = [reply(i, T0 + 0.1 * i, 0.05 + 0.01 * i, 8, 0.02 + 0.001 * i) for i in range(30)]
    feed, board = LiveSeries(), LiveBoard(kind="ramp", n_steps=2, step_s=10.0)
    feed.tick(LiveNow(t_s=0.0, step=0), T0)
    for r in recs:
        feed.observe(r)
        board.observe(r)
    so_far = feed.tick(LiveNow(t_s=8.0, step=0), T0 + 8.0)["step_so_far"]
    view = SimpleNamespace(now=T0 + 8.0, live=SimpleNamespace(step=0, users=2, load=2.0,
                                                             phase="hold"),
                           counters=SimpleNamespace(done=30, failed=0, in_flight=0),
                           monitor=None, events_last_s=0)
    row = board.lines(view, 8.0)[1]
    ttft = np.array([r.ttft for r in recs])
    want = np.percentile(ttft, [50, 95]) * 1000
    assert so_far["ttft_p50_ms"] == pytest.approx(want[0])
    assert so_far["ttft_p95_ms"] == pytest.approx(want[1])
    from llmbench.report.console import fmt_ms
    assert f"TTFT p50 {fmt_ms(so_far['ttft_p50_ms'])}  p95 {fmt_ms(so_far['ttft_p95_ms'])}" in row
    assert isinstance(board._steps, Steps) and isinstance(feed._steps, Steps)


def test_token_events_are_a_rate_while_they_arrive():
    rate = TokenRate()
    for k in range(50):                       # 4 token events every 0.1 s for 5 s
        rate.add(T0 + 0.1 * (k + 1), 4)
    assert rate.per_s(T0 + 5.0) == 40.0
    assert rate.count(T0, T0 + 1.0) == 40
    assert rate.per_s(T0 + 6.5) == 0.0       # nothing arrived in the last second


def test_rows_count_token_events_in_the_second_they_arrived():
    """A 3 s reply: each second's row has its own token events, not 0, 0, 64."""
    feed = LiveSeries()
    feed.tick(LiveNow(t_s=0.0), T0)
    for k in range(30):
        feed.token(T0 + 0.1 * (k + 1), 2)     # 20 token events a second
    feed.observe(reply(0, T0, 0.05, 60, 0.05))
    msg = feed.tick(LiveNow(t_s=4.0), T0 + 4.0, last=True)
    per_s = [r["tok_s"] for r in msg["rows"]]
    assert per_s[:3] == [20.0, 20.0, 20.0] and sum(per_s) == 60


def test_the_live_ttft_reads_continuously_when_replies_outlast_a_second():
    """Replies of 3 s, one ending every 3 s: a row per second holds the TTFT of the requests
    finished in its last WINDOW_S seconds, so every second after the first reply ends has a
    figure (before: two seconds in three had none, and the chart was dots)."""
    feed = LiveSeries()
    feed.tick(LiveNow(t_s=0.0), T0)
    rows: dict[int, dict] = {}
    for k in range(8):
        feed.observe(reply(k, T0 + 3.0 * k, 0.1 + 0.01 * k, 30, 0.1))
        for row in feed.tick(LiveNow(t_s=3.0 * (k + 1) + 0.25), T0 + 3.0 * (k + 1) + 0.25)["rows"]:
            rows[row["t"]] = row
    first_done = 4          # the first reply ends at 3.0 s: in the row of second 4
    seen = [rows[t]["ttft_p50_ms"] for t in sorted(rows) if t >= first_done]
    assert len(seen) >= 18 and all(v is not None for v in seen), seen
    # a row's figure is the window's: reply k ends in second 3k + 3 (its row 3k + 4); the row
    # of second 12 covers seconds 2..11, so replies 0, 1, 2 (TTFT 100, 110, 120 ms)
    assert WINDOW_S == 10
    assert rows[12]["ttft_p50_ms"] == pytest.approx(110.0)
    assert rows[13]["ttft_p50_ms"] == pytest.approx(115.0)     # seconds 3..12: replies 0-3


def test_the_banner_says_who_had_the_cpu_as_the_verdict_decides_it():
    """The dashboard's banner and the ramp's verdict decide "the machine was busy with other
    processes" against "llmbench itself was near its limit" with one function
    (analysis.verdict.generator_cause): a loop that lags at 2 % of a core waited for a core
    others had; at 95 % it was busy with its own work."""
    from llmbench.analysis.verdict import generator_cause
    from llmbench.report.dashboard import page

    def banner(lag_ms: float, cpu_pct: float) -> str:
        return page.notes({"tick": {"gauges": {"lag_p99_ms": lag_ms, "cpu_pct": cpu_pct}}})
    starved, busy, calm = banner(60.0, 2.0), banner(60.0, 95.0), banner(0.5, 10.0)
    assert generator_cause({"lag_p99_ms": 60.0, "cpu_pct": 2.0}) == "machine"
    assert "busy with other processes" in starved and "near its limit" not in starved
    assert generator_cause({"lag_p99_ms": 60.0, "cpu_pct": 95.0}) == "llmbench"
    assert "llmbench itself is near its limit" in busy and "other processes" not in busy
    assert calm == ""
