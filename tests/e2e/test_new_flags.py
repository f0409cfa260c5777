"""The flags that watch a run and shape new workloads, through the command line: Prometheus
while `run --workers 2` lasts (both workers' requests, the port closed after), --quiet and
--verbose, shell completion, --tools / --response-format / --images / --api embeddings, and
report --format csv|parquet --per-request."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import ENV, ROOT, free_port, llmbench, only_run


def _closed(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def test_metrics_port_with_two_workers_serves_both_and_closes(mock_factory, tmp_path):
    m = mock_factory(ttft_ms=40, itl_ms=25, tokens=10, parallel=8)
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "llmbench.cli", "run", "--url", m.url + "/v1", "--model", "mock",
         "--concurrency", "8", "--duration", "6s", "--workers", "2", "--output-tokens", "10",
         "--prompt-tokens", "10", "--metrics-port", str(port), "--server-probe", "off",
         "--out", str(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=ROOT)
    seen = None
    deadline = time.time() + 60
    while time.time() < deadline and proc.poll() is None:
        try:
            body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        except OSError:
            time.sleep(0.1)
            continue
        fams = {f.name: f for f in text_string_to_metric_families(body)}
        ok = [s for s in fams["llmbench_requests"].samples if s.labels.get("outcome") == "ok"]
        flying = fams["llmbench_in_flight_requests"].samples
        if ok and ok[0].value >= 8 and flying and flying[0].value > 0:
            seen = fams
            break
        time.sleep(0.2)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, out + err
    assert seen is not None, "no scrape during the run saw finished requests and requests in flight"
    assert "llmbench_ttft_seconds" in seen and seen["llmbench_ttft_seconds"].type == "histogram"
    assert f"Prometheus metrics: http://127.0.0.1:{port}/metrics" in err
    assert _closed(port)
    # both workers' requests reached the one endpoint: the final exposition counts every record
    run_dir = only_run(tmp_path)
    recs = [json.loads(x) for x in (run_dir / "requests.jsonl").read_text().splitlines()]
    assert {r.get("worker") for r in recs if not r.get("warmup")} == {0, 1}
    final = {f.name: f for f in text_string_to_metric_families((run_dir / "metrics.prom").read_text())}
    ok = sum(s.value for s in final["llmbench_requests"].samples if s.labels["outcome"] == "ok")
    summary = json.loads((run_dir / "run.json").read_text())["summary"]
    assert ok == summary["completed"]


def test_quiet_and_verbose(mock_factory, tmp_path):
    m = mock_factory(ttft_ms=5, itl_ms=1)
    args = ("run", "--url", m.url + "/v1", "--model", "mock", "--requests", "6",
            "--output-tokens", "4", "--prompt-tokens", "8", "--out", str(tmp_path))
    q = llmbench(*args, "-q")
    assert q.returncode == 0, q.stderr
    lines = q.stdout.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("6 ok, 0 failed") and str(tmp_path) in lines[0]
    v = llmbench(*args, "--verbose")
    assert v.returncode == 0 and "Serving Benchmark Result" in v.stdout
    for what in ("tokenizer:", "transport:", "workers:", "resent on a new connection"):
        assert f"llmbench: " in v.stderr and what in v.stderr, v.stderr
    both = llmbench(*args, "-q", "-v")
    assert both.returncode == 2 and "--quiet and --verbose" in both.stderr


def test_shell_completion_is_on():
    """Typer's completion, through the installed `llmbench` (the name the shell completes)."""
    from pathlib import Path
    exe = Path(sys.executable).parent / "llmbench"
    assert exe.exists(), f"{exe}: install llmbench in this venv (pip install -e .)"
    # the shell named, not detected: typer's detection (shellingham) walks this process's
    # ancestors, and under a busy parallel suite it once found none ("Shell  not supported")
    r = subprocess.run([str(exe), "--show-completion", "bash"], capture_output=True, text=True,
                       env={**ENV, "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"},
                       cwd=ROOT)
    assert r.returncode == 0 and "_LLMBENCH_COMPLETE" in r.stdout.upper(), r.stdout
    c = subprocess.run([str(exe)], capture_output=True, text=True, cwd=ROOT,
                       env={**ENV, "_LLMBENCH_COMPLETE": "complete_bash",
                            "COMP_WORDS": "llmbench run --metrics-p", "COMP_CWORD": "2"})
    assert "--metrics-port" in c.stdout
    top = subprocess.run([str(exe)], capture_output=True, text=True, cwd=ROOT,
                         env={**ENV, "_LLMBENCH_COMPLETE": "complete_bash",
                              "COMP_WORDS": "llmbench ra", "COMP_CWORD": "1"})
    assert top.stdout.split() == ["ramp"]


def test_tools_format_images_and_embeddings_flags(mock_factory, tmp_path):
    m = mock_factory(ttft_ms=5, itl_ms=1, tool_call_share=1.0)
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([{"type": "function", "function": {
        "name": "lookup", "parameters": {"type": "object", "properties": {"q": {"type": "string"}},
                                         "required": ["q"]}}}]))
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps({"type": "object", "properties": {"n": {"type": "integer"}},
                                  "required": ["n"]}))
    base = ("run", "--url", m.url + "/v1", "--model", "mock", "--requests", "6",
            "--output-tokens", "40", "--prompt-tokens", "8", "--server-probe", "off")
    r = llmbench(*base, "--tools", str(tools), "--out", str(tmp_path / "t"))
    assert r.returncode == 0, r.stderr
    assert "Replies that called a tool:              6 of 6 (100%)" in r.stdout
    r = llmbench(*base, "--response-format", str(schema), "--out", str(tmp_path / "f"))
    assert r.returncode == 0 and "Structured replies valid:                100.0% of 6" in r.stdout
    r = llmbench(*base, "--images", "2", "--image-size", "32x32", "--out", str(tmp_path / "i"))
    assert r.returncode == 0, r.stderr
    doc = json.loads((only_run(tmp_path / "i") / "run.json").read_text())
    assert doc["workload"]["params"]["images"]["per_turn"] == 2
    r = llmbench("run", "--url", m.url + "/v1", "--model", "mock", "--api", "embeddings",
                 "--batch-size", "3", "--requests", "5", "--prompt-tokens", "8",
                 "--server-probe", "off", "--out", str(tmp_path / "e"))
    assert r.returncode == 0, r.stderr
    assert "Total embeddings:                        15" in r.stdout
    assert "Time to First Token" not in r.stdout and "End-to-end Latency" in r.stdout
    for bad, needle in ((("--api", "openai", "--images", "1"), "sends text only"),
                        (("--api", "tgi", "--tools", str(tools)), "no tools"),
                        (("--batch-size", "4",), "batches are for --api embeddings"),
                        (("--tool-choice", "required",), "--tool-choice needs --tools"),
                        (("--responses-state", "server"), "keeps no conversation"),
                        (("--api", "responses", "--responses-state", "both"), "choose client or server"),
                        (("--images", "0",), "from 1 to 64"),
                        (("--response-format", str(tmp_path / "nope.json")), "no such file; check the path")):
        r = llmbench(*base, *bad, "--out", str(tmp_path / "bad"))
        assert r.returncode == 2 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_report_csv_and_parquet_per_request(mock_factory, tmp_path):
    m = mock_factory(ttft_ms=5, itl_ms=1)
    r = llmbench("run", "--url", m.url + "/v1", "--model", "mock", "--requests", "7",
                 "--output-tokens", "4", "--prompt-tokens", "8", "--out", str(tmp_path))
    assert r.returncode == 0
    d = only_run(tmp_path)
    rows = llmbench("report", str(d), "--format", "csv", "--per-request").stdout.splitlines()
    assert len(rows) == 1 + 7 and "ttft_ms" in rows[0].split(",")
    out = tmp_path / "r.parquet"
    p = llmbench("report", str(d), "--format", "parquet", "--per-request", "--output", str(out))
    assert p.returncode == 0, p.stderr
    import pandas as pd
    df = pd.read_parquet(out)
    assert len(df) == 7 and df["ok"].all()
    need = llmbench("report", str(d), "--format", "parquet")
    assert need.returncode == 2 and "--output FILE" in need.stderr
