"""The terminal's live view during a real run (in this process, against the mock on loopback):
with agents (``--workload agent``) its rows say the sessions running, done and their median
time as they go, and with the server's machine sampled (``--server-pid auto``: the mock runs in
this process, so it is the machine's row) a row of the cores it used. stderr is made a terminal for the run (the view draws only on one); the
rows are read from what rich wrote there. Each row's text: tests/unit/test_live_board.py."""

from __future__ import annotations

import re
import sys

import llmbench
from tests.helpers.api import SMALL_AGENT


def test_the_live_view_shows_agent_sessions_and_the_server_machine_as_they_go(
        mock_factory, tmp_path, monkeypatch, capsys):
    m = mock_factory(ttft_ms=10, itl_ms=2, parallel=8)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    run = llmbench.run(url=m.url + "/v1", model="mock", concurrency=3, duration="2.5s",
                       **SMALL_AGENT, out=tmp_path,
                       progress=True)
    err = capsys.readouterr().err
    agents = re.findall(r"agents: (\d+) running(?: \(call \d+\))?  (\d+) done", err)
    # three agents at a time: under way from the first redraw (the load's own count, their
    # first call in flight included); sessions done as the run goes
    assert agents and int(agents[0][0]) >= 1, err[-2000:]
    done = [int(d) for _, d in agents]
    assert done == sorted(done) and done[-1] >= 1 and done[-1] <= run.findings.sessions.completed
    assert re.search(r"agents: .* done in p50 [\d.]+m?s, 4 calls", err), err[-2000:]
    # the server's machine: its busy cores of its CPUs
    assert re.search(r"server: .*machine [\d.]+/\d+ cores", err), err[-2000:]
