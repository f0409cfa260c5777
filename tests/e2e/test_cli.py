"""The command line end to end, in a child process, against a mock on loopback."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import ENV, ROOT, free_port, llmbench, only_run


def test_run_closed_loop_writes_folder_and_vllm_summary(mock_factory, tmp_path):
    m = mock_factory(ttft_ms=10, itl_ms=2, models=["m1"])
    save = tmp_path / "vllm.json"
    r = llmbench("run", "--url", m.url + "/v1", "--model", "m1", "--concurrency", "4",
                 "--requests", "20", "--prompt-tokens", "20", "--output-tokens", "8",
                 "--out", str(tmp_path / "res"), "--api-key", "sk-TOPSECRET",
                 "--header", "X-Auth=hush", "--label", "name=base", "--label", "gpu=none",
                 "--save-result", "--result-filename", str(save), "--metric-percentiles", "50,99",
                 "--warmup", "2")
    assert r.returncode == 0, r.stderr
    assert "============ Serving Benchmark Result ============" in r.stdout
    assert "Successful requests:                     20" in r.stdout
    assert "P50 TTFT (ms):" in r.stdout and "P99 ITL (ms):" in r.stdout
    run_dir = only_run(tmp_path / "res")
    assert run_dir.name.endswith("-run-base")
    run = json.loads((run_dir / "run.json").read_text())
    assert run["schema_version"] == 1 and run["status"] == "complete"
    assert run["summary"]["completed"] == 20 and run["labels"] == {"name": "base", "gpu": "none"}
    lines = (run_dir / "requests.jsonl").read_text().splitlines()
    assert len(lines) == 22                            # warm-up requests are kept, marked
    assert sum(json.loads(x).get("warmup", False) for x in lines) == 2
    everything = (run_dir / "run.json").read_text() + "".join(lines) + r.stdout + r.stderr
    assert "sk-TOPSECRET" not in everything and "hush" not in everything
    result = json.loads(save.read_text())
    assert result["completed"] == 20 and "p50_ttft_ms" in result and "mean_tpot_ms" in result


def test_non_streaming_says_ttft_equals_e2el(mock_factory, tmp_path):
    m = mock_factory(ttft_ms=5, itl_ms=1)
    r = llmbench("run", "--url", m.url + "/v1", "--model", "mock", "--requests", "3",
                 "--no-stream", "--output-tokens", "4", "--prompt-tokens", "10",
                 "--out", str(tmp_path))
    assert r.returncode == 0 and "TTFT equals E2EL" in r.stdout


def test_unreachable_server_exit_3(tmp_path):
    r = llmbench("run", "--url", f"http://127.0.0.1:{free_port()}/v1", "--model", "m",
                 "--requests", "2", "--out", str(tmp_path))
    assert r.returncode == 3
    assert r.stderr.count("\n") == 1 and "cannot reach" in r.stderr and "Traceback" not in r.stderr


def test_wrong_model_shows_the_404_body(mock_factory, tmp_path):
    m = mock_factory(models=["real"])
    r = llmbench("run", "--url", m.url + "/v1", "--model", "fake", "--requests", "2",
                 "--out", str(tmp_path))
    assert r.returncode == 5
    assert "404" in r.stderr and "The model `fake` does not exist." in r.stderr
    assert "Traceback" not in r.stderr


def test_not_an_llm_server(tmp_path):
    from tests.helpers import RawServer, http_head
    body = b"<html>hello</html>"
    with RawServer([(0, http_head("200 OK", "text/html", length=len(body)) + body)]) as s:
        r = llmbench("run", "--url", s.url + "/v1", "--model", "m", "--requests", "2",
                     "--out", str(tmp_path))
    assert r.returncode == 5 and "did not answer like an LLM API" in r.stderr


@pytest.mark.parametrize("args,needle", [
    (["--concurrency", "0"], "--concurrency must be at least 1"),
    (["--rate", "fast"], "--rate 'fast'"),
    (["--extra-body", "{oops"], "--extra-body is not valid JSON"),
    (["--goodput", "ttft=5"], "--goodput"),
    (["--prompt-tokens", "9-3"], "--prompt-tokens"),
    (["--api", "grpc"], "--api 'grpc'"),
    (["--url", "ftp://x", "--model", "m"], "not an http(s) URL"),
    (["--url", "http://127.0.0.1:99999/v1"], "the port is not a number"),
    (["--dataset", "/no/such/file.json"], "no such file"),
    (["--duration", "soon"], "--duration"),
    (["--hf-column", "prompt"], "--hf-column 'prompt'"),
    (["--rate", "inf", "--duration", "10s"], "--rate inf sends everything at once"),
    (["--random-range-ratio", "2"], "--random-range-ratio"),
])
def test_invalid_flags_one_line_exit_2(args, needle, tmp_path):
    r = llmbench("run", *args, "--out", str(tmp_path))
    assert r.returncode == 2, r.stderr
    assert needle in r.stderr and "Traceback" not in r.stderr
    assert len([x for x in r.stderr.splitlines() if x.startswith("error")]) == 1


def test_interrupt_writes_partial_result_and_exits_130(mock_factory, tmp_path):
    m = mock_factory(ttft_ms=20, itl_ms=20, tokens=50)
    p = subprocess.Popen([sys.executable, "-m", "llmbench.cli", "run", "--url", m.url + "/v1",
                          "--model", "mock", "--concurrency", "4", "--requests", "1000",
                          "--output-tokens", "50", "--prompt-tokens", "10", "--out", str(tmp_path)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=ROOT)
    # interrupt once 4 requests are on disk, however long the start took on this machine
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and p.poll() is None:
        logs = list(tmp_path.glob("*/requests.jsonl"))
        if logs and len(logs[0].read_text().splitlines()) >= 4:
            break
        time.sleep(0.1)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 130, err
    assert "PARTIAL RESULT" in out
    run_dir = only_run(tmp_path)
    run = json.loads((run_dir / "run.json").read_text())
    assert run["status"] == "partial"
    lines = [json.loads(x) for x in (run_dir / "requests.jsonl").read_text().splitlines()]
    ok = [x for x in lines if x["ok"]]
    assert len(ok) >= 4 and run["summary"]["completed"] == len(ok)
    # every line is accounted for: measured, or marked interrupted (cancelled after the grace)
    interrupted = sum(1 for x in lines if x.get("error_kind") == "interrupted")
    assert run["summary"]["requests"] + interrupted == len(lines)


def test_run_with_no_url_is_a_one_minute_demo_and_says_so(tmp_path):
    # not 200 requests one at a time (~4 min): 60 s, announced; interrupted once it has begun
    p = subprocess.Popen([sys.executable, "-m", "llmbench.cli", "run", "--out", str(tmp_path)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
                         cwd=ROOT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and p.poll() is None:
        logs = list(tmp_path.glob("*/requests.jsonl"))
        if logs and logs[0].read_text().strip():
            break
        time.sleep(0.1)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=30)
    assert "a 60 s demo, one request at a time against the built-in mock" in err, err
    load = json.loads((only_run(tmp_path) / "run.json").read_text())["config"]["load"]
    assert load["duration_s"] == 60 and load["requests"] is None and load["concurrency"] == 1


def test_mock_command_serves(tmp_path):
    port = free_port()
    p = subprocess.Popen([sys.executable, "-m", "llmbench.cli", "mock", "--port", str(port),
                          "--ttft-ms", "300", "--profile", "ollama"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=ROOT)
    try:
        line = p.stdout.readline()
        assert f"127.0.0.1:{port}" in line
        import httpx
        t = time.perf_counter()
        r = httpx.post(f"http://127.0.0.1:{port}/api/chat", json={
            "model": "qwen2.5:0.5b", "messages": [{"role": "user", "content": "hi"}],
            "options": {"num_predict": 2}})
        assert r.status_code == 200 and time.perf_counter() - t >= 0.3
    finally:
        p.terminate()
        p.wait(5)


def test_mock_bad_flags():
    r = llmbench("mock", "--profile", "nonsense")
    assert r.returncode == 2 and "unknown profile" in r.stderr
    r = llmbench("mock", "--fault-500", "0.7", "--fault-cut", "0.7")
    assert r.returncode == 2 and "add up to more than 1" in r.stderr


def test_datasets_inspect():
    r = llmbench("datasets", "inspect", "datasets/sharegpt_sample.json", "--multi-turn", "--turns", "4")
    assert r.returncode == 0
    assert "conversations:  38" in r.stdout and "fingerprint:" in r.stdout
    r2 = llmbench("datasets", "inspect", "datasets/sharegpt_sample.json", "--multi-turn", "--turns", "4")
    fp = [x for x in r.stdout.splitlines() if x.startswith("fingerprint")]
    assert fp == [x for x in r2.stdout.splitlines() if x.startswith("fingerprint")]
