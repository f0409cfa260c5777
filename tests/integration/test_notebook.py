"""The example notebook (docs/notebook.ipynb) executed in a real Jupyter kernel (nbclient and
ipykernel, the test extra) against the built-in mock: llmbench.ramp and llmbench.run work in a
cell (whose kernel runs an event loop already), the cell's live view is updated in place to its
closing line, and the cells' outputs hold what the Runs draw: the ramp's steps table with
run.json's numbers, a step's thresholds, the run's summary table."""

from __future__ import annotations

import json

import nbformat
from nbclient import NotebookClient

from llmbench.report.console import fmt_ms
from tests.helpers import ROOT


def _outputs(cell, kind: str) -> list[str]:
    return [o["data"]["text/html"] for o in cell.outputs
            if o.output_type == kind and "text/html" in o.get("data", {})]


class Recording(NotebookClient):
    """Keeps every update of a display (the live view's), by cell."""

    def process_message(self, msg, cell, cell_index):
        if msg["msg_type"] == "update_display_data":
            self.updates.setdefault(cell_index, []).append(msg["content"]["data"]["text/html"])
        return super().process_message(msg, cell, cell_index)


def test_the_example_notebook_runs_against_the_mock(tmp_path):
    nb = nbformat.read(ROOT / "docs" / "notebook.ipynb", as_version=4)
    client = Recording(nb, timeout=300, kernel_name="python3",
                       resources={"metadata": {"path": str(tmp_path)}})
    client.updates = {}
    client.execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    for c in code:
        assert not [o for o in c.outputs if o.output_type == "error"], c.outputs
    ramp_dir = next((tmp_path / "results").glob("*-ramp"))
    run_dir = next((tmp_path / "results").glob("*-run"))
    ramp = json.loads((ramp_dir / "run.json").read_text())
    # the live view: one display, updated in place from "starting" to the verdict
    live = _outputs(code[0], "display_data")
    assert len(live) == 1 and ramp["verdict"]["result"] in live[0] and "starting" not in live[0]
    # ... through the run: its steps and loads as they went, then the closing line
    seen = client.updates[nb.cells.index(code[0])]
    assert any("1/1 users" in u for u in seen) and any("3/3 users" in u for u in seen)
    assert any("so far" in u for u in seen) and seen[-1] == live[0]
    # the Run the cell returns: its report's body, run.json's numbers in its steps table
    html = _outputs(code[0], "execute_result")[0]
    assert "<h2>Steps</h2>" in html and 'data-chart="latency vs load"' in html
    for st in ramp["steps"]:
        s = st["summary"]
        assert (f"<td class=\"\">{st['load']:g}</td><td class=\"\">{s['requests']}</td>"
                f"<td class=\"\">{fmt_ms(s['median_ttft_ms'])}</td>"
                f"<td class=\"\">{fmt_ms(s['p95_ttft_ms'])}</td>") in html
    step = _outputs(code[1], "execute_result")[0]
    assert "ttft.p95&lt;=2s" in step and ">ttft<" in step
    held = max((st["load"] for st in ramp["steps"] if st["held"]), default=None)
    assert code[2].outputs[0]["data"]["text/plain"].startswith(f"({held}, '{ramp['verdict']['kind']}'")
    run = json.loads((run_dir / "run.json").read_text())
    html = _outputs(code[3], "execute_result")[0]
    assert "<h2>Summary (vLLM&#x27;s names)</h2>" in html or "<h2>Summary (vLLM's names)</h2>" in html
    assert f"<td class=\"l\">completed</td><td class=\"\">{run['summary']['completed']}</td>" in html
