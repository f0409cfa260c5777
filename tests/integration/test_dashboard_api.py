"""--dashboard through the API with worker processes: the page shows the merged view (every
worker's records reach the coordinator, which feeds the page, as it feeds --metrics-port), its
totals are run.json's, and when the run is over it serves the run's report. In Python the page
stays up after the run (the next run reuses it) until it is closed."""

from __future__ import annotations

import json
import urllib.request

import llmbench
from llmbench.report.dashboard import handle
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
