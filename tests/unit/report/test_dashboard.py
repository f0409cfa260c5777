"""The dashboard's pure parts: the per-second numbers (feed.LiveSeries, from records whose times
are known, against numpy on the same values), the page (every text from a server or a dataset
escaped), the live chart's rules, the child's store, and the address and option checks. The page
in a real browser is tests/e2e/test_dashboard.py."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

import llmbench
from llmbench.errors import UsageError
from llmbench.records.record import Record
from llmbench.report import charts
from llmbench.report.dashboard import page
from llmbench.report.dashboard.address import parse_address, url_of
from llmbench.report.dashboard.feed import OPEN_S, LiveSeries
from llmbench.report.dashboard.server import Store

T0 = 1000.0
EVIL = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def rec(i: int, start: float, ttft: float, gaps: list[float], step: int | None = 0,
        ok: bool = True, **kw) -> Record:
    times = [start + ttft]
    for g in gaps:
        times.append(times[-1] + g)
    r = Record(f"r{i}", scheduled=start, start=start, token_times=times if ok else [],
               ok=ok, step=step, done=times[-1] + 0.001, **kw)
    if ok:
        r.first_token, r.end = times[0], times[-1]
    return r


def gauges(t_s: float, **kw) -> SimpleNamespace:
    base = dict(t_s=t_s, started=0, done=0, failed=0, in_flight=0, events=0,
                users=2, load=2.0, step=0, phase="hold", lag_p99_ms=0.5, cpu_pct=10.0,
                busiest=None, server=None)
    return SimpleNamespace(**{**base, **kw})


def test_rows_hold_each_seconds_percentiles_as_numpy_computes_them():
    s = LiveSeries()
    s.tick(gauges(0.0), T0)                     # dispatch began at T0
    in_second_1 = [rec(i, T0 + 1.1 + 0.01 * i, 0.05 + 0.01 * i, [0.01, 0.02, 0.03 + 0.001 * i])
                   for i in range(10)]
    later = rec(99, T0 + 2.2, 0.3, [0.05])
    skipped = [rec(50, T0 + 1.2, 0.9, [0.1], warmup=True),
               rec(51, T0 + 1.2, 0.9, [0.1], ok=False, error_kind="interrupted")]
    failed = rec(52, T0 + 1.3, 0.0, [], ok=False, error_kind="http_status", status=503,
                 error=EVIL)
    for r in in_second_1 + skipped + [failed, later]:
        s.observe(r)
    msg = s.tick(gauges(3.3, users=4, step=0), T0 + 3.3)
    rows = {r["t"]: r for r in msg["rows"]}
    assert set(rows) == {1, 2, 3}               # seconds 0, 1, 2 have ended
    r1 = rows[2]                                # the second [T0 + 1, T0 + 2)
    ttfts = [r.ttft for r in in_second_1]
    gaps = np.concatenate([np.diff(r.token_times) for r in in_second_1])
    assert r1["requests"] == 11 and r1["ok"] == 10 and r1["failed"] == 1
    assert r1["ttft_p50_ms"] == pytest.approx(np.percentile(ttfts, 50) * 1000)
    assert r1["ttft_p95_ms"] == pytest.approx(np.percentile(ttfts, 95) * 1000)
    assert r1["itl_p95_ms"] == pytest.approx(np.percentile(gaps, 95) * 1000)
    assert r1["errors"] == {"http_status 503": 1}
    assert rows[3]["requests"] == 1 and rows[1]["requests"] == 0
    assert msg["errors"] == {"http_status 503": 1}
    assert msg["error_samples"]["http_status 503"] == EVIL[:200]
    # the step so far: step 0's measured requests, percentiles as numpy's over them
    so = msg["step_so_far"]
    assert so["done"] == 12 and so["failed"] == 1
    assert so["ttft_p95_ms"] == pytest.approx(np.percentile(ttfts + [later.ttft], 95) * 1000)
    # step 1 begins: nothing of it yet
    assert s.tick(gauges(3.4, step=1), T0 + 3.4)["step_so_far"]["done"] == 0


def test_a_late_record_revises_an_open_second_and_closed_ones_are_not_sent_again():
    s = LiveSeries()
    s.tick(gauges(0.0), T0)
    s.observe(rec(1, T0 + 0.2, 0.1, [0.01]))
    first = s.tick(gauges(1.3), T0 + 1.3)
    assert [r["t"] for r in first["rows"]] == [1] and first["rows"][0]["requests"] == 1
    s.observe(rec(2, T0 + 0.4, 0.1, [0.01]))    # finished in second 0, reached us later
    again = s.tick(gauges(2.3), T0 + 2.3)
    assert {r["t"]: r["requests"] for r in again["rows"]} == {1: 2, 2: 0}
    s.tick(gauges(OPEN_S + 2.3), T0 + OPEN_S + 2.3)   # sent a last time, then closed
    later = s.tick(gauges(OPEN_S + 3.3), T0 + OPEN_S + 3.3)
    assert [r["t"] for r in later["rows"]][0] > 1     # second 0 is final: not sent again


def test_the_page_escapes_every_text_from_a_server_or_a_dataset():
    state = {
        "meta": {"kind": "ramp", "unit": "users", "n_steps": 2, "step_s": 3.0, "model": EVIL,
                 "url": f"http://x/{EVIL}", "thresholds": ["ttft.p95<=2s"]},
        "status": "running", "version": 3,
        "tick": {"t_s": 4.0, "gauges": {"step": 0, "load": 2, "users": 2, "phase": "hold",
                                        "server": {"main": {"kind": EVIL, "models_loaded": [EVIL],
                                                            "running": 1.0}}},
                 "step_so_far": {"ttft_p95_ms": 120.0}, "errors": {EVIL: 2},
                 "error_samples": {EVIL: EVIL}},
        "steps": [], "verdict": {"result": EVIL, "evidence": [EVIL], "kind": "queuing"},
        "sweep": {"meta": {"settings": EVIL, "grid": [1, 2]}, "index": 0, "name": EVIL,
                  "results": [{"name": EVIL, "status": "running", "held": None,
                               "verdict": EVIL}]},
        "rows": [{"t": 1, "step": 0, "load": 2, "users": 2, "in_flight": 1}]}
    html_ = page.shell(state) + json.dumps(page.update(state))
    assert "<script>alert" not in html_ and "<img src=x" not in html_
    assert "&lt;script&gt;" in html_
    # the only script is the page's own, from the package
    assert html_.count("<script") == 1 and '<script src="/static/dashboard.js"' in html_


def test_the_thresholds_table_shows_judged_steps_and_the_step_in_progress():
    checks = [{"threshold": "ttft.p95<=2s", "ok": True, "actual": 812.0, "metric": "ttft"}]
    state = {"meta": {"kind": "ramp", "unit": "users", "thresholds": ["ttft.p95<=2s",
                                                                      "itl.p50<=10ms"]},
             "status": "running",
             "steps": [{"index": 0, "load": 1, "held": False, "state": "over",
                        "checks": checks + [{"threshold": "itl.p50<=10ms", "ok": False,
                                             "actual": 12.5, "metric": "itl"}]}],
             "tick": {"gauges": {"step": 1, "load": 2},
                      "step_so_far": {"ttft_p95_ms": 2500.0, "itl_p50_ms": 8.0}}}
    t = page.thresholds_table(state)
    assert "✓ 812ms" in t and "✗ 12.5ms" in t
    assert "✗ 2.50s so far" in t and "✓ 8.0ms so far" in t and "in progress" in t


def test_the_step_in_progress_is_judged_by_each_threshold_s_own_operator():
    """== and != too, as the step is judged when it ends (the live cell once read them as <=)."""
    state = {"meta": {"kind": "ramp", "unit": "users",
                      "thresholds": ["ttft.p95!=120ms", "itl.p50>5ms"]},
             "status": "running", "steps": [],
             "tick": {"gauges": {"step": 0, "load": 1},
                      "step_so_far": {"ttft_p95_ms": 120.0, "itl_p50_ms": 8.0}}}
    t = page.thresholds_table(state)
    assert "✗ 120ms so far" in t and "✓ 8.0ms so far" in t


def test_the_live_chart_starts_its_axes_at_zero_marks_the_steps_and_bins_a_long_run():
    rows = [{"t": i + 1, "step": i // 100, "load": 2 ** (i // 100), "users": 2 ** (i // 100),
             "in_flight": 3, "ttft_p50_ms": 100.0, "ttft_p95_ms": 200.0 + (900 if i == 250 else 0),
             "itl_p50_ms": 10.0, "itl_p95_ms": 12.0, "ok": 5, "failed": 0} for i in range(700)]
    c = charts.live_chart(rows, "users", {"ttft": (5000.0, "p95")})
    assert all(p.ylim[0] == 0.0 for p in c.panels)
    starts = sorted(m.at for m in c.panels[0].marks if getattr(m, "cls", "") == "step-boundary")
    assert starts == [0.0, 100.0, 200.0, 300.0, 400.0, 500.0, 600.0]
    p95 = next(t for t in c.panels[1].traces if t.label == "TTFT p95")
    assert len(p95.xs) <= charts.LIVE_POINTS
    assert max(y for y in p95.ys if y is not None) == 1100.0   # a bad second survives binning
    assert "a point: 3 s" in c.panels[-1].xlabel
    texts = [t.text for t in c.panels[1].texts]
    assert any("threshold" in t and "↑" in t for t in texts)   # far above: a note, no stretch


def test_the_store_keeps_rows_by_second_and_serves_the_report_at_the_end(tmp_path):
    s = Store()
    s.apply({"type": "begin", "meta": {"kind": "run", "unit": "users"}})
    s.apply({"type": "tick", "t_s": 1.2, "gauges": {"done": 3}, "rows": [{"t": 1, "ok": 3}]})
    s.apply({"type": "tick", "t_s": 2.2, "gauges": {"done": 5},
             "rows": [{"t": 1, "ok": 4}, {"t": 2, "ok": 1}]})
    u = s.render()
    assert u["text"]["done"] == "5" and u["text"]["status"] == "running" and not u["final"]
    assert s.rows == {1: {"t": 1, "ok": 4}, 2: {"t": 2, "ok": 1}}
    report = tmp_path / "report.html"
    report.write_text("<!DOCTYPE html><html><head><title>r</title></head><body><p>R</p></body></html>")
    s.apply({"type": "final", "report": str(report), "folder": str(tmp_path)})
    assert s.render()["final"]
    assert '<div class="meta" data-dashboard="final">' in s.page() and "<p>R</p>" in s.page()


def test_addresses_and_the_bare_flag():
    from llmbench.cli.app import _bare_dashboard
    assert parse_address("8080") == ("127.0.0.1", 8080)
    assert parse_address("0.0.0.0:9000") == ("0.0.0.0", 9000)
    assert parse_address("[::1]:9000") == ("::1", 9000)
    assert parse_address("auto") == parse_address(0) == ("127.0.0.1", 0)
    # every interface: the address another machine opens, not loopback (issue 49)
    from llmbench.report.dashboard.address import shown_host
    assert url_of("0.0.0.0", 5) == f"http://{shown_host('0.0.0.0')}:5/" != "http://127.0.0.1:5/"
    assert url_of("::1", 5) == "http://[::1]:5/"
    for bad in ("x", "70000", ":80", "host:"):
        with pytest.raises(UsageError, match="--dashboard"):
            parse_address(bad)
    assert _bare_dashboard(["ramp", "--dashboard"]) == ["ramp", "--dashboard", "auto"]
    assert _bare_dashboard(["ramp", "--dashboard", "--hold", "2s"]) == \
        ["ramp", "--dashboard", "auto", "--hold", "2s"]
    assert _bare_dashboard(["ramp", "--dashboard", "9000"]) == ["ramp", "--dashboard", "9000"]


def test_the_api_checks_the_options_before_anything_runs():
    with pytest.raises(UsageError, match="expected \\[HOST:\\]PORT"):
        llmbench.run(url="http://127.0.0.1:9/v1", model="m", dashboard="nope", requests=1)
    with pytest.raises(UsageError, match="--dashboard-linger goes with --dashboard"):
        llmbench.run(url="http://127.0.0.1:9/v1", model="m", dashboard_linger="5s", requests=1)


def test_a_port_that_is_taken_is_one_line_before_anything_runs():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(UsageError) as got:
            llmbench.run(url="http://127.0.0.1:9/v1", model="m", dashboard=f"127.0.0.1:{port}",
                         requests=1)
    text = str(got.value)
    assert f"--dashboard 127.0.0.1:{port}: cannot serve the page" in text
    assert "choose a free port" in text and "\n" not in text


def test_the_servers_machine_is_the_reports_figures_over_the_last_seconds():
    from llmbench.report.dashboard.feed import machine_now

    def local(t):            # telemetry's local sample: the server at 1.5 cores, the machine 1.9
        return {"source": "local", "t": t,
                "server": {"pid": 7, "pids": 1, "cpu_s": 1.5 * t, "rss_bytes": 2 << 30,
                           "threads": 5},
                "machine": {"cpus": 2, "busy_s": 1.9 * t, "idle_s": 0.1 * t, "steal_s": 0.0,
                            "total_s": 2.0 * t}}
    m = machine_now([local(float(t)) for t in range(0, 12)], 11.0)
    assert m["server_cores"] == pytest.approx(1.5) and m["machine_busy_cores"] == pytest.approx(1.9)
    assert m["machine_cpus"] == 2 and m["server_pid"] == 7
    assert machine_now([], 1.0) == {}
    rows = page._machine_rows(m)
    assert ["server process", "cores used (last 5 s)", "1.50"] in rows
    assert ["machine (proc)", "busy cores (last 5 s)", "1.90 of 2"] in rows


def test_the_browser_tests_fail_with_the_install_line_when_chromium_is_missing(monkeypatch):
    """Never a skip: a machine without chromium fails tests/e2e/test_dashboard.py saying how
    to install it (scripts/install-test-deps.sh installs it on CI)."""
    import os
    import shutil
    from tests.helpers import browser
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    with pytest.raises(pytest.fail.Exception) as exc:
        browser.Browser()
    assert "chromium is not installed" in str(exc.value)
    assert "scripts/install-test-deps.sh" in str(exc.value)


def test_a_command_waits_for_its_page_to_show_everything_it_sent():
    """The page's process answers a sync once every message before it is applied, so the page
    a command leaves up shows its end when the command returns."""
    from llmbench.report.dashboard.handle import Dashboard
    d = Dashboard("127.0.0.1", 0).open()
    try:
        d.send({"type": "begin", "meta": {"kind": "ramp", "model": "m"}})
        d.send({"type": "failed", "error": "E"})
        assert d.sync(timeout_s=30)
        import urllib.request
        with urllib.request.urlopen(d.url + "state.json", timeout=30) as r:
            state = json.loads(r.read())
        assert state["text"]["status"] == "failed"
        assert d.sync(timeout_s=30)             # a second one is answered too
    finally:
        d.close()
    assert not d.sync(timeout_s=1)              # closed: nobody to answer


def test_agent_sessions_on_the_page_are_this_steps_and_the_runs():
    s = LiveSeries()
    g = gauges(5.0, step=1, agents_open=[1, 0])
    s.tick(g, 100.0)
    for i, (sid, kind, start, step) in enumerate((("A", "call", 96.0, 0), ("A", "final", 97.0, 0),
                                                  ("B", "call", 98.0, 1))):
        r = Record(f"r{i}", scheduled=start, start=start, first_token=start + 0.1,
                   end=start + 0.5, done=start + 0.5, ok=True, status=200, step=step,
                   output_tokens=4, token_times=[start + 0.1, start + 0.5])
        r.session_id, r.step_id, r.step_kind, r.turn = sid, str(i), kind, i if sid == "A" else 0
        s.observe(r)
    tick = s.tick(g, 101.0)
    so = tick["sessions"]
    assert so["run"]["completed"] == 1 and so["run"]["running"] == 2      # the load's own count
    assert so["step"]["completed"] == 0 and so["step"]["running"] == 1
    assert so["run"]["duration_median_s"] == pytest.approx(1.5)
    html = page.sessions_html({"tick": tick})
    assert "<h2>Agent sessions</h2>" in html and "<td>this step</td><td>1</td>" in html
    assert "<td>the run</td><td>2</td><td>1</td>" in html and "1.50s" in html
    assert page.sessions_html({"tick": {"sessions": None}}) == ""
