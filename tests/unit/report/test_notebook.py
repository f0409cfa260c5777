"""Results in Jupyter (llmbench/report/notebook.py): ``Run._repr_html_`` and ``Step._repr_html_``
draw the report's body (verdict, tables, inline SVG charts; no script, no network) in a block
whose styles apply to it alone, and escape every text that came from a server or a dataset.
From saved folders (results/examples), with hostile texts written into them; the example
notebook executed in a kernel is tests/integration/test_notebook.py."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

import llmbench
from llmbench.report import notebook
from llmbench.results.schema import Run
from tests.helpers import ROOT

EVIL = '<script>alert("x")</script><img src=x onerror=alert(1)>'
EXAMPLES = ROOT / "results" / "examples"


def _no_markup_from_data(html: str) -> None:
    assert "<script" not in html and "<img" not in html        # no tag from the data
    assert "&lt;script&gt;" in html                             # shown as text


def _hostile_ramp(tmp_path: Path) -> Path:
    src = next((EXAMPLES / "num_parallel").glob("*ramp*=1"))
    dst = tmp_path / src.name
    shutil.copytree(src, dst)
    run = json.loads((dst / "run.json").read_text())
    run["config"]["target"]["model"] = EVIL
    run["config"]["target"]["url"] = f"http://x/{EVIL}"
    run["labels"] = {"name": EVIL}
    run["verdict"]["result"] = EVIL
    run["verdict"]["evidence"] = [EVIL]
    run["steps"][0]["summary"]["error_samples"] = [
        {"kind": "http_status", "status": 500, "count": 1, "error": EVIL}]
    run["steps"][0]["checks"][0]["text"] = EVIL
    (dst / "run.json").write_text(json.dumps(run))
    return dst


def test_a_ramp_draws_its_report_in_a_cell_and_escapes_what_came_from_outside(tmp_path):
    run = llmbench.load_run(_hostile_ramp(tmp_path))
    html = run._repr_html_()
    _no_markup_from_data(html)
    assert html.startswith('<div class="llmbench-nb"><style>')
    for part in ("<h2>Steps</h2>", 'data-chart="latency vs load"', 'data-chart="timeline"',
                 "<svg", "<h2>Errors</h2>"):
        assert part in html, part
    # the report's body, the same function: every step of run.json in its table
    assert html.count('<tr class="held">') + html.count('<tr class="over">') >= len(run.steps)
    step = run.steps[0]._repr_html_()
    _no_markup_from_data(step)
    assert "threshold" in step and ">ttft<" in step


def test_a_run_without_a_folder_shows_what_run_json_holds():
    data = {"schema_version": 1, "kind": "run", "status": "complete",
            "config": {"target": {"model": EVIL, "url": "http://h/v1"}},
            "summary": {"completed": 3, "failed": 1, "requests": 4, "median_ttft_ms": 12.5,
                        "p95_ttft_ms": 30.0, "output_throughput": 10.0},
            "thresholds": [{"threshold": "ttft.p95<=1s", "ok": True, "text": EVIL}]}
    html = Run.from_dict(data)._repr_html_()
    _no_markup_from_data(html)
    assert ">ttft<" in html and "12.50" in html and "succeeded" in html


def test_a_sweep_draws_its_answer_settings_and_chart(tmp_path):
    dst = tmp_path / "sweep"
    shutil.copytree(EXAMPLES / "sweep", dst)
    doc = json.loads((dst / "sweep.json").read_text())
    doc["results"][0]["verdict"] = EVIL
    doc["answer"] = EVIL + " " + doc["answer"]
    (dst / "sweep.json").write_text(json.dumps(doc))
    sweep = llmbench.Sweep.load(dst)
    assert sweep.kind == "sweep"
    html = sweep._repr_html_()
    _no_markup_from_data(html)
    assert 'data-chart="held per setting"' in html and "<h2>Per setting</h2>" in html


def test_the_styles_apply_to_the_block_only():
    from llmbench.report.html import CSS
    css = notebook.scoped(CSS)
    rules = re.findall(r"([^{}]+)\{", css)
    assert rules and all(sel.strip().startswith(".llmbench-nb") for r in rules
                         for sel in r.split(","))
    assert ".llmbench-nb{font-family" in css and "body" not in css


def test_the_cells_live_view_is_asked_for_or_on_by_default_in_a_kernel(monkeypatch, capsys):
    """progress="notebook" (a keyword or the spec's field) asks for the cell's view; in a
    kernel it is on unless progress was given; outside one "notebook" is the console's view,
    with a note; the command line's --progress stays a flag."""
    from llmbench.api import _in_cell
    from llmbench.errors import UsageError
    from llmbench.report import notebook
    spec = llmbench.RunSpec(url="http://127.0.0.1:9/v1", progress="notebook")
    monkeypatch.setattr(notebook, "in_notebook", lambda: False)
    s, cell = _in_cell(spec, True)
    assert (s.progress, cell) == (True, False) and "needs a Jupyter kernel" in capsys.readouterr().err
    monkeypatch.setattr(notebook, "in_notebook", lambda: True)
    s, cell = _in_cell(spec, True)
    assert (s.progress, cell) == (False, True)
    quiet = llmbench.RunSpec(url="http://127.0.0.1:9/v1")
    assert _in_cell(quiet, False)[1] and not _in_cell(quiet, True)[1]
    assert not _in_cell(llmbench.RunSpec(url="http://127.0.0.1:9/v1", progress=True), True)[1]
    with pytest.raises(UsageError, match="--progress 'cell'"):
        llmbench.RunSpec(url="http://127.0.0.1:9/v1", progress="cell")
