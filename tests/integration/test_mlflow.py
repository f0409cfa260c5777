"""--mlflow (report/tracker.py) against a real `mlflow server` with a SQLite backend on
loopback: a ramp becomes an MLflow run with its steps as metrics (step = the step's load), the
verdict as a tag and the run folder (report.html included) as artifacts; a tracker that does
not answer or answers HTML is one line and the run's results are whole."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from llmbench.servers.ports import free_port
from tests.helpers import llmbench, only_run
from tests.helpers.field import wait_port
from tests.helpers.otlp_sink import OtlpSink

RAMP = ("--model", "mock", "--users", "1,2", "--ramp-in", "0.5s", "--hold", "2s", "--think", "0",
        "--prompt-tokens", "10", "--output-tokens", "4", "--threshold", "ttft.p95<=2s",
        "--no-progress")


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory):
    exe = shutil.which("mlflow") or str(Path(sys.executable).parent / "mlflow")
    if not os.access(exe, os.X_OK):
        pytest.fail("mlflow is not installed: pip install -e '.[test]' (or 'llmbench[mlflow]')",
                    pytrace=False)
    d = tmp_path_factory.mktemp("mlflow")
    port = free_port()
    proc = subprocess.Popen(
        [exe, "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
         "--backend-store-uri", f"sqlite:///{d / 'mlflow.db'}",
         "--artifacts-destination", str(d / "artifacts")],
        stdout=open(d / "server.log", "wb"), stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_port(port, timeout_s=120, proc=proc)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_a_ramp_becomes_an_mlflow_run_with_its_steps_verdict_and_report(
        mlflow_server, mock_factory, tmp_path):
    m = mock_factory(ttft_ms=10, itl_ms=2)
    p = llmbench("ramp", "--url", m.url + "/v1", *RAMP, "--out", str(tmp_path),
                 "--mlflow", mlflow_server, timeout=240)
    assert p.returncode == 0, p.stdout + p.stderr
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("MLflow: "))
    assert line.startswith("MLflow: logged as run "), line
    rid = line.split("run ")[1].split(" ")[0]
    data = json.loads((only_run(tmp_path) / "run.json").read_text())
    from mlflow.tracking import MlflowClient
    client = MlflowClient(tracking_uri=mlflow_server)
    run = client.get_run(rid)
    assert run.data.tags["llmbench.verdict"] == data["verdict"]["result"]
    assert run.data.tags["llmbench.kind"] == "ramp"
    assert run.data.params["target.model"] == "mock"
    hist = client.get_metric_history(rid, "median_ttft_ms")
    assert sorted(h.step for h in hist) == [1, 2]           # the steps' loads
    want = {st["load"]: st["summary"]["median_ttft_ms"] for st in data["steps"]}
    assert {h.step: h.value for h in hist} == pytest.approx(want)
    names = {a.path for a in client.list_artifacts(rid)}
    assert {"report.html", "run.json", "requests.jsonl"} <= names


def test_a_tracker_that_is_down_or_answers_html_is_one_line(mock_factory, tmp_path):
    m = mock_factory(ttft_ms=5, itl_ms=1)
    with OtlpSink("html") as html:
        for name, uri in (("refused", f"http://127.0.0.1:{free_port()}"), ("html", html.url)):
            t = time.monotonic()
            p = llmbench("run", "--url", m.url + "/v1", "--model", "mock", "--requests", "4",
                         "--no-progress", "--out", str(tmp_path / name), "--mlflow", uri,
                         timeout=240)
            took = time.monotonic() - t
            assert p.returncode == 0, (name, p.stderr)
            lines = [ln for ln in (p.stdout + p.stderr).splitlines() if "MLflow" in ln]
            assert len(lines) == 1 and lines[0].startswith("MLflow: not logged ("), (name, lines)
            assert "Traceback" not in p.stderr
            assert took < 90, (name, took)
            d = only_run(tmp_path / name)
            assert (d / "report.html").exists()
            assert json.loads((d / "run.json").read_text())["summary"]["completed"] == 4


def test_a_sweep_is_a_parent_run_with_a_child_per_setting(mlflow_server, tmp_path):
    mock = "--ttft-ms 20 --itl-ms 5 --jitter 0 --prefill-ms-per-token 0 --batch-slowdown 0"
    p = llmbench("sweep", "--setting", "parallel=1,2", "--mock", "--mock-options", mock,
                 "--users", "1,2", "--threshold", "ttft.p95<=2s", "--ramp-in", "0.3s",
                 "--hold", "1.5s", "--think", "0", "--turns", "1", "--prompt-tokens", "10",
                 "--output-tokens", "4", "--no-progress", "--out", str(tmp_path),
                 "--mlflow", mlflow_server, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("MLflow: the sweep"))
    parent = line.split("run ")[1].split(" ")[0]
    from mlflow.tracking import MlflowClient
    client = MlflowClient(tracking_uri=mlflow_server)
    exp = client.get_experiment_by_name("llmbench")
    children = client.search_runs([exp.experiment_id],
                                  filter_string=f"tags.mlflow.parentRunId = '{parent}'")
    assert len(children) == 2, [c.data.tags for c in children]
    assert all(c.data.tags["llmbench.kind"] == "ramp" for c in children)
    prun = client.get_run(parent)
    doc = json.loads((only_run(tmp_path) / "sweep.json").read_text())
    assert prun.data.tags["llmbench.answer"] == doc["answer"]
    assert "sweep.json" in {a.path for a in client.list_artifacts(parent)}
