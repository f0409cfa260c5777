"""Agent sessions in the sweep's page (issue 35): a sweep of agent ramps over the mock's slots;
the page has each setting's sessions at the common load and at the most it held, the same
figures as that ramp's run.json step (read back as the typed Run)."""

from __future__ import annotations

import html
import re

import llmbench
from llmbench.report import sweep_html
from llmbench.report.console import fmt_ms
from tests.helpers.api import SMALL_AGENT


def test_a_sweep_of_agents_shows_each_settings_sessions(tmp_path):
    sweep = llmbench.sweep(settings={"parallel": [1, 4]}, mock=True,
                           mock_options="--ttft-ms 5 --itl-ms 2", users=[1, 2], hold="1s",
                           ramp_in="0.2s", **{**SMALL_AGENT, "agent_steps": "3",
                                             "agent_tool_latency": "50ms"},
                           threshold=["session.p50<=60s"], out=tmp_path)
    page = sweep_html.render(sweep.path)
    assert "<h2>Agent sessions</h2>" in page
    table = page[page.index("<h2>Agent sessions</h2>"):]
    table = table[:table.index("</table>")]
    rows = {html.unescape(cells[0]): cells[1:] for cells in
            (re.findall(r"<td[^>]*>(.*?)</td>", r) for r in re.findall(r"<tr[^>]*>(.*?)</tr>", table))
            if cells}
    results = sweep.data["results"]
    common = sweep.data.get("common_load")
    assert common is not None
    for r in results:
        run = llmbench.load_run(sweep.path / r["run_dir"])
        for load in {common, r["held"]}:
            st = next(s for s in run.ladder() if s.load == load)
            label = f"{r['name']} at {load:g} " + ("user" if load == 1 else "users") + \
                (" (held)" if load == r["held"] else "")
            assert label in rows, (label, list(rows))
            x = st.sessions
            assert rows[label][0] == f"{x.completed} of {x.started}"
            assert rows[label][2] == fmt_ms(x.duration.median)
