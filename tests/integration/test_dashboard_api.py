"""--dashboard through the API: with worker processes the page shows the merged view (every
worker's records reach the coordinator, which feeds the page, as it feeds --metrics-port), its
totals are run.json's, and when the run is over it serves the run's report; a sweep feeds one
page with every setting's ramp and ends on the sweep's report; a probe's page counts both paths
and ends on the probe's report. In Python the page stays up after the command (the next one
reuses it) until it is closed. A ramp in a real browser: tests/e2e/test_dashboard.py."""

from __future__ import annotations

import json
import urllib.request

import llmbench
from llmbench.report.dashboard import handle
from llmbench.report.dashboard.page import final_page
from tests.helpers.api import SMALL_AGENT
from tests.helpers import only_run


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.read()


def test_with_two_workers_the_page_counts_every_workers_requests(mock_factory, tmp_path):
    m = mock_factory(ttft_ms=20, itl_ms=5, tokens=6, parallel=8)
    try:
        run = llmbench.run(url=m.url + "/v1", model="mock", concurrency=4, requests=24,
                           workers="2", prompt_tokens=10, output_tokens=6, out=tmp_path,
                           dashboard=0)
        board = handle.current()
        assert board is not None and board.alive and board.final
        state = json.loads(_get(board.url + "state.json"))
        page = _get(board.url).decode()
    finally:
        if handle.current() is not None:
            handle.current().close()
    d = only_run(tmp_path)
    doc = json.loads((d / "run.json").read_text())
    lines = (d / "requests.jsonl").read_text().splitlines()
    assert {json.loads(x).get("worker") for x in lines} == {0, 1}
    s = doc["summary"]
    assert state["final"] and state["text"]["status"] == "final"
    assert state["text"]["done"] == str(s["completed"] + s["failed"]) == "24"
    assert state["series"]["finished"] == 24 and state["series"]["failed"] == s["failed"]
    assert 'data-dashboard="final"' in page and run.path is not None
    assert "dashboard" not in (d / "config.toml").read_text()    # a replay opens no page
    assert handle.current() is None            # closed: its process is gone


def _final_state(board) -> tuple[dict, str]:
    """The page's numbers and its HTML at the end of the command (it returns once the page
    shows its end: handle.Dashboard.sync)."""
    assert board is not None and board.alive and board.final
    return json.loads(_get(board.url + "state.json")), _get(board.url).decode()


def test_a_sweep_feeds_one_page_for_every_setting_and_ends_on_the_sweeps_report(tmp_path):
    try:
        sweep = llmbench.sweep(settings={"parallel": [1, 2]}, mock=True,
                               mock_options="--ttft-ms 20 --itl-ms 5 --tokens 6", users=[1],
                               hold="0.5s", ramp_in="0.2s", think="0", turns=1, prompt_tokens=10,
                               output_tokens=6, out=tmp_path, dashboard=0)
        board = handle.current()
        state, page = _final_state(board)
    finally:
        if handle.current() is not None:
            handle.current().close()
    assert sweep.kind == "sweep" and state["final"]
    # one page for the whole sweep: the sweep's report (its settings and answer), not a ramp's
    report = (sweep.path / "report.html").read_text()
    assert 'data-dashboard="final"' in page and page == final_page(report)
    assert [r["name"] for r in sweep.data["results"]] == ["parallel=1", "parallel=2"]
    assert all(r["name"] in page for r in sweep.data["results"])
    # every ramp of the sweep was fed to the same page: one process, one URL, for both
    assert len({p.parent for p in sweep.path.glob("*/run.json")}) == 2


def test_a_probe_on_the_page_ends_as_its_report_with_its_steps(mock_factory, tmp_path):
    m = mock_factory(ttft_ms=20, itl_ms=5, tokens=6, parallel=8)
    try:
        run = llmbench.probe(router=m.url + "/v1", direct=m.url + "/v1", model="mock",
                             users="1,2", slice_s="0.5s", rounds=1, turns=1, prompt_tokens=8,
                             output_tokens=4, out=tmp_path, dashboard=0)
        state, page = _final_state(handle.current())
    finally:
        if handle.current() is not None:
            handle.current().close()
    doc = json.loads((run.path / "run.json").read_text())
    assert state["final"] and state["text"]["status"] == "final"
    # every request of both paths, both steps, is counted on the page as in run.json
    sent = sum(st[path]["completed"] + st[path]["failed"] for st in doc["steps"]
               for path in ("router", "direct"))
    assert sent > 0 and state["text"]["done"] == str(sent) and state["series"]["finished"] == sent
    assert len((run.path / "requests.jsonl").read_text().splitlines()) == sent
    # and it ends as the probe's report: its steps with the router's overhead
    assert 'data-dashboard="final"' in page and len(doc["steps"]) == 2
    assert page == final_page((run.path / "report.html").read_text())


def _session_rows(fragment: str) -> dict[str, list[str]]:
    """The page's agent-sessions table: its rows' cells by their first ("this step", "the run")."""
    import html as _html
    import re
    rows = {}
    for row in re.findall(r"<tr>(.*?)</tr>", fragment):
        cells = [_html.unescape(c) for c in re.findall(r"<td>(.*?)</td>", row)]
        if cells:
            rows[cells[0]] = cells[1:]
    return rows


def test_agent_sessions_on_the_page_while_they_run_and_at_the_end_as_run_json(mock_factory,
                                                                               tmp_path):
    """--workload agent on the page (issue 35): sessions running while the run goes, read over
    HTTP from the page's own process; at the end the sessions done and their median time are
    run.json's."""
    import threading
    import time
    m = mock_factory(ttft_ms=10, itl_ms=2, parallel=8)
    seen: list[dict[str, list[str]]] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            board = handle.current()
            if board is not None and board.alive:
                try:
                    s = json.loads(_get(board.url + "state.json"))
                    rows = _session_rows(s["html"].get("sessions") or "")
                    if rows:
                        seen.append(rows)
                except OSError:
                    pass
            time.sleep(0.2)
    t = threading.Thread(target=watch, daemon=True)
    t.start()
    try:
        run = llmbench.run(url=m.url + "/v1", model="mock", concurrency=3, duration="3s",
                           **SMALL_AGENT, out=tmp_path,
                           dashboard=0)
        stop.set()
        t.join(10)
        state, _ = _final_state(handle.current())
    finally:
        stop.set()
        if handle.current() is not None:
            handle.current().close()
    # cells: running, done, failed, joined mid-way, calls so far (running, p50), calls (done,
    # p50), session time (done, p50)
    # while it ran: sessions under way (3 agents at a time), some calls into them
    assert any(int(r["the run"][0]) >= 1 for r in seen), seen[:3]
    # at the end: run.json's sessions, done and their median time
    s = run.findings.sessions
    assert s is not None and s.completed >= 3
    end = _session_rows(state["html"]["sessions"])["the run"]
    assert end[1] == str(s.completed) and end[2] == str(s.failed)
    from llmbench.report.console import fmt_ms
    assert end[6] == fmt_ms(s.duration.median) and end[5] == f"{s.steps.median:g}"
