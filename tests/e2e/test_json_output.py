"""--json on run and ramp: one JSON document on stdout, tables and progress on stderr."""

from __future__ import annotations

import json

from tests.helpers import free_port, llmbench

SHORT = ["--prompt-tokens", "8", "--output-tokens", "4"]


def test_run_json_is_the_summary_on_stdout(mock_factory, tmp_path):
    m = mock_factory(ttft_ms=5, itl_ms=1)
    r = llmbench("run", "--url", m.url + "/v1", "--model", "mock", "--requests", "6",
                 "--concurrency", "2", *SHORT, "--json", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["kind"] == "run" and doc["status"] == "complete" and doc["exit_code"] == 0
    assert doc["summary"]["completed"] == 6 and doc["summary"]["median_ttft_ms"] > 0
    assert doc["path"] and "Results:" in r.stderr and "Results:" not in r.stdout


def test_ramp_json_has_steps_held_and_verdict(mock_factory, tmp_path):
    m = mock_factory(ttft_ms=5, itl_ms=1)
    r = llmbench("ramp", "--url", m.url + "/v1", "--model", "mock", "--users", "1,2",
                 "--hold", "0.6s", "--ramp-in", "0.1s", "--think", "0", "--turns", "1",
                 "--threshold", "ttft.p95<=5s", "--generator-lag-limit", "2000ms", *SHORT,
                 "--json", "--out", str(tmp_path), timeout=120)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["kind"] == "ramp" and [s["load"] for s in doc["steps"]] == [1, 2]
    assert doc["held"] == 2 and all(s["held"] for s in doc["steps"])
    assert doc["verdict"]["kind"] and doc["verdict"]["result"]
    assert "Users" in r.stderr                                 # the table went to stderr


def test_json_when_nothing_was_measured(tmp_path):
    port = free_port()
    r = llmbench("run", "--url", f"http://127.0.0.1:{port}/v1", "--model", "m",
                 "--requests", "1", "--json", "--out", str(tmp_path))
    assert r.returncode == 3, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert doc["status"] == "failed" and doc["exit_code"] == 3 and "cannot reach" in doc["error"]
