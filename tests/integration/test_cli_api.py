"""From tests/e2e/test_cli.py, the tests that need a run's numbers and folder, not the command
line's output: run in this process through the API (llmbench.run), against a mock on loopback."""

import llmbench
from tests.helpers import only_run
from tests.helpers.api import run_exit_code, run_json


def test_run_open_loop_rate(mock_factory, tmp_path):
    m = mock_factory(ttft_ms=5, itl_ms=1)
    r = llmbench.run(url=m.url + "/v1", model="mock", rate="20", requests=20, output_tokens=4,
                     prompt_tokens=10, out=tmp_path)
    assert run_exit_code(r) == 0
    assert only_run(tmp_path) == r.path
    run = run_json(r)
    # 20 arrivals at 20/s: the last is due at 1 s
    assert 0.9 <= run["summary"]["duration"] <= 2.5
    assert run["config"]["load"]["rate"] == 20


def test_ollama_native_url(mock_factory, tmp_path):
    m = mock_factory(ttft_ms=5, itl_ms=1, models=["qwen2.5:0.5b"])
    r = llmbench.run(url=m.url, model="qwen2.5:0.5b", requests=3, output_tokens=4,
                     prompt_tokens=10, out=tmp_path)
    assert run_exit_code(r) == 0
    assert only_run(tmp_path) == r.path
    run = run_json(r)
    assert run["config"]["target"]["api"] == "ollama"
    assert run["config"]["target"]["endpoint"].endswith("/api/chat")
