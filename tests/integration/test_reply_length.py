"""The reply length asked for reaches the server in a field it reads, and a run says when not."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.helpers import ROOT

ENV = {**os.environ, "PYTHONPATH": str(ROOT), "LLMBENCH_TOKENIZER": "approx"}


def _run(url: str, tmp_path, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    p = subprocess.run([sys.executable, "-m", "llmbench.cli", "run", "--url", url, "--model", "m",
                        "--concurrency", "2", "--requests", "4", "--output-tokens", "20",
                        "--server-probe", "off", "--out", str(tmp_path), *extra],
                       capture_output=True, text=True, cwd=ROOT, env=ENV, timeout=120)
    assert p.returncode == 0, p.stderr
    run = json.loads(next(tmp_path.glob("*/run.json")).read_text())
    return p, run


def _ollama_like(mock_factory):
    # Ollama's /v1 reads max_tokens only and has no ignore_eos (the mock's Ollama flavour)
    return mock_factory(flavour="ollama", models=["m"], ttft_ms=5, itl_ms=1, tokens=128)


def test_an_ollama_like_server_gets_the_asked_length(mock_factory, tmp_path):
    m = _ollama_like(mock_factory)
    # only the numbers (no message is the console's silence): in this process, through the API
    import llmbench
    from tests.helpers.api import run_exit_code, run_json
    r = llmbench.run(url=m.url + "/v1", model="m", concurrency=2, requests=4, output_tokens=20,
                     server_probe="off", out=tmp_path)
    assert run_exit_code(r) == 0
    run = run_json(r)
    assert run["summary"]["completed"] == 4
    assert run["summary"]["total_output_tokens"] == 4 * 20
    assert run["output_length"]["longer"] == 0 and run["output_length"]["message"] is None


def test_a_server_that_ignores_the_length_field_is_named(mock_factory, tmp_path):
    m = _ollama_like(mock_factory)
    p, run = _run(m.url + "/v1", tmp_path, "--max-tokens-field", "max_completion_tokens")
    check = run["output_length"]
    assert check["longer"] == 4 and check["received_mean"] == 128 and check["asked_mean"] == 20
    assert "4 of 4 replies were longer than asked" in p.stdout
    assert "--max-tokens-field max_tokens" in p.stdout


def test_ignore_eos_that_the_server_does_not_honour_is_named(mock_factory, tmp_path):
    m = mock_factory(flavour="ollama", models=["m"], ttft_ms=5, itl_ms=1, natural_tokens=6)
    p, run = _run(m.url + "/v1", tmp_path, "--ignore-eos")
    assert run["output_length"]["shorter"] == 4
    assert "does not honour it" in p.stdout


def test_the_vllm_flavour_honours_either_field_and_ignore_eos(mock_factory, tmp_path):
    m = mock_factory(flavour="vllm", models=["m"], ttft_ms=5, itl_ms=1, natural_tokens=6)
    # only the numbers: in this process, through the API
    import llmbench
    from tests.helpers.api import run_exit_code, run_json
    r = llmbench.run(url=m.url + "/v1", model="m", concurrency=2, requests=4, output_tokens=20,
                     server_probe="off", ignore_eos=True,
                     max_tokens_field="max_completion_tokens", out=tmp_path)
    assert run_exit_code(r) == 0
    run = run_json(r)
    assert run["summary"]["total_output_tokens"] == 4 * 20
    assert run["output_length"]["message"] is None
