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
