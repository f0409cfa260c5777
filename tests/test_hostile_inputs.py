"""Bad input, as a new user or a broken file gives it: one line on stderr, the documented exit
code, never a traceback. Each case runs the CLI in a child process (as a user would); none
reaches a server, so the table stays fast. Cases that need a server follow the table.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from conftest import ROOT, RawServer, chat_token, free_port, http_head

ENV = {**os.environ, "PYTHONPATH": str(ROOT), "LLMBENCH_TOKENIZER": "approx"}
DEAD = f"http://127.0.0.1:{free_port()}/v1"       # nothing listens: no case may get that far


def llmbench(*args: str, timeout: float = 60, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "llmbench.cli", *args], capture_output=True,
                          text=True, timeout=timeout, env=ENV, cwd=cwd)


def one_error_line(r: subprocess.CompletedProcess) -> str:
    out = r.stdout + r.stderr
    assert "Traceback" not in out, out
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("error: "), lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("hostile")
    (d / "latin1.jsonl").write_bytes(b'{"prompt": "ok"}\n{"prompt": "caf\xe9"}\n')
    (d / "bom-ff.jsonl").write_bytes(b'\xff\xfe{"prompt": "x"}\n')
    (d / "strconv.json").write_text('[{"conversations": "hello there"}]')
    (d / "intconv.json").write_text('[{"conversations": [1, 2]}]')
    (d / "list").mkdir()
    (d / "list" / "run.json").write_text("[1, 2]")
    (d / "ramp-nosummary").mkdir()
    (d / "ramp-nosummary" / "run.json").write_text(json.dumps(
        {"schema_version": 1, "kind": "ramp", "status": "complete",
         "steps": [{"index": 0, "load": 2, "held": True}], "verdict": {"result": "x"}}))
    (d / "refused").mkdir()     # what a run that failed its preflight leaves
    (d / "refused" / "run.json").write_text(json.dumps(
        {"schema_version": 1, "kind": "run", "status": "failed",
         "error": "POST http://h/v1/chat/completions answered 404", "config": {}}))
    (d / "nosummary").mkdir()   # killed before any request finished
    (d / "nosummary" / "run.json").write_text(json.dumps(
        {"schema_version": 1, "kind": "run", "status": "running"}))
    (d / "nosummary" / "requests.jsonl").write_text("")
    (d / "empty").mkdir()
    (d / "afile").write_text("x")
    return d


# (command line, exit code, text the one error line must contain); {d} is the files folder
CASES = [
    # hangs: numbers that never end, or mean nothing
    (["run", "--url", DEAD, "--model", "m", "--duration", "nan"], 2, "--duration 'nan'"),
    (["run", "--url", DEAD, "--model", "m", "--duration", "inf"], 2, "--duration 'inf'"),
    (["run", "--url", DEAD, "--model", "m", "--duration", "-5s"], 2, "must not be negative"),
    (["run", "--url", DEAD, "--model", "m", "--duration", "1m30x"], 2, "--duration '1m30x'"),
    (["run", "--url", DEAD, "--model", "m", "--timeout-first-token", "-1"], 2, "--timeout-first-token"),
    (["run", "--url", DEAD, "--model", "m", "--timeout-total", "0"], 2, "--timeout-total"),
    (["run", "--url", DEAD, "--model", "m", "--timeout-connect", "nan"], 2, "--timeout-connect"),
    (["run", "--url", DEAD, "--model", "m", "--timeout-idle", "inf"], 2, "--timeout-idle"),
    (["run", "--url", DEAD, "--model", "m", "--warmup", "-3"], 2, "--warmup -3"),
    (["run", "--url", DEAD, "--model", "m", "--rate", "5", "--max-concurrency", "0"], 2, "--max-concurrency 0"),
    (["run", "--url", DEAD, "--model", "m", "--rate", "5", "--max-concurrency", "-2"], 2, "--max-concurrency -2"),
    (["run", "--url", DEAD, "--model", "m", "--limit", "0"], 2, "--limit 0"),
    (["run", "--url", DEAD, "--model", "m", "--requests", "0"], 2, "--requests"),
    (["run", "--url", DEAD, "--model", "m", "--concurrency", "-1"], 2, "--concurrency"),
    (["run", "--url", DEAD, "--model", "m", "--rate", "nan"], 2, "--rate"),
    (["run", "--url", DEAD, "--model", "m", "--rate", "5", "--burstiness", "nan"], 2, "--burstiness"),
    (["run", "--url", DEAD, "--model", "m", "--temperature", "nan"], 2, "--temperature"),
    (["run", "--url", DEAD, "--model", "m", "--goodput", "ttft:nan"], 2, "--goodput"),
    (["run", "--url", DEAD, "--model", "m", "--turns", "0"], 2, "--turns"),
    (["run", "--url", DEAD, "--model", "m", "--think", "5s-1s"], 2, "--think"),
    (["run", "--url", DEAD, "--model", "m", "--wait-ready", "nan"], 2, "--wait-ready"),
    (["ramp", "--url", DEAD, "--model", "m", "--ramp-in", "-1s"], 2, "--ramp-in '-1s'"),
    (["ramp", "--url", DEAD, "--model", "m", "--users", "nan"], 2, "--users 'nan'"),
    (["ramp", "--url", DEAD, "--model", "m", "--users", "inf"], 2, "--users 'inf'"),
    (["ramp", "--url", DEAD, "--model", "m", "--users", "1.5"], 2, "whole numbers"),
    (["ramp", "--url", DEAD, "--model", "m", "--users", "4,2"], 2, "increasing"),
    (["ramp", "--url", DEAD, "--model", "m", "--hold", "nan"], 2, "--hold"),
    (["ramp", "--url", DEAD, "--model", "m", "--think", "nan"], 2, "--think"),
    (["ramp", "--url", DEAD, "--model", "m", "--start", "nan"], 2, "--start"),
    (["ramp", "--url", DEAD, "--model", "m", "--expect-users", "nan"], 2, "--expect-users"),
    (["ramp", "--url", DEAD, "--model", "m", "--generator-lag-limit", "-1ms"], 2, "--generator-lag-limit"),
    (["ramp", "--url", DEAD, "--model", "m", "--timeout-first-token", "0"], 2, "--timeout-first-token"),
    (["mock", "--port", "99999"], 2, "--port 99999"),
    (["mock", "--ttft-ms", "nan"], 2, "--ttft-ms"),
    (["mock", "--fault-500", "1.5"], 2, "--fault-500"),
    (["mock", "--parallel", "-1"], 2, "--parallel"),
    # target: usage errors, not "cannot reach"
    (["run", "--url", "http://127.0.0.1:99999/v1", "--model", "m"], 2, "port"),
    (["run", "--url", "http://[::1/v1", "--model", "m"], 2, "not a valid URL"),
    (["run", "--url", "http://:8000/v1", "--model", "m"], 2, "no host name"),
    (["run", "--url", DEAD, "--model", "m", "--header", "X-A: b\r\nX-Evil: 1"], 2, "line break"),
    (["run", "--url", DEAD, "--model", "m", "--header", "X-A: b\nc"], 2, "line break"),
    (["run", "--url", DEAD, "--model", "m", "--header", "NoSeparatorHere"], 2, "KEY=VALUE"),
    (["run", "--url", DEAD, "--model", "m", "--header", "Bad Name: v"], 2, "not a valid header name"),
    # result paths, checked before the run
    (["run", "--url", DEAD, "--model", "m", "--save-result", "--result-dir", "{d}/afile/sub"], 2, "--result-dir"),
    (["run", "--url", DEAD, "--model", "m", "--trace", "datasets/trace_mooncake_sample.jsonl", "--prefix-hit-ratio", "0.5"], 2, "--prefix-hit-ratio"),
    (["run", "--url", DEAD, "--model", "m", "--save-result", "--result-filename", "{d}"], 2, "is a folder"),
    (["run", "--url", DEAD, "--model", "m", "--save-result", "--result-filename", "{d}/afile/r.json"], 2, "--result-filename"),
    # files
    (["run", "--url", DEAD, "--model", "m", "--dataset", "{d}/latin1.jsonl"], 2, "latin1.jsonl:2: not UTF-8"),
    (["datasets", "inspect", "{d}/latin1.jsonl"], 2, "latin1.jsonl:2: not UTF-8"),
    (["datasets", "inspect", "{d}/bom-ff.jsonl"], 2, "bom-ff.jsonl:1: not UTF-8"),
    (["run", "--url", DEAD, "--model", "m", "--dataset", "{d}/strconv.json"], 2, "'conversations' is a str"),
    (["datasets", "inspect", "{d}/strconv.json"], 2, "'conversations' is a str"),
    (["datasets", "inspect", "{d}/strconv.json", "--multi-turn"], 2, "strconv.json:1"),
    (["datasets", "inspect", "{d}/intconv.json", "--multi-turn"], 2, "no conversation has a human"),
    # run folders
    (["report", "{d}/list"], 2, "holds a JSON list"),
    (["compare", "{d}/list", "{d}/list"], 2, "holds a JSON list"),
    (["report", "{d}/ramp-nosummary"], 2, "step 1 in run.json has no summary"),
    (["compare", "{d}/refused", "{d}/ramp-nosummary"], 2, "failed before measuring anything"),
    (["report", "{d}/refused"], 2, "failed before measuring anything"),
    (["compare", "{d}/nosummary", "{d}/refused"], 2, "before any request finished"),
    (["report", "{d}/empty"], 2, "no run.json"),
]


@pytest.fixture(scope="module")
def outcomes(files, tmp_path_factory) -> dict[int, tuple[subprocess.CompletedProcess, Path]]:
    """Every case of the table, run four at a time (each is a short child process)."""
    from concurrent.futures import ThreadPoolExecutor

    def one(i: int) -> tuple[subprocess.CompletedProcess, Path]:
        out = tmp_path_factory.mktemp(f"case{i}")
        argv = [a.replace("{d}", str(files)) for a in CASES[i][0]]
        if argv[0] in ("run", "ramp"):
            argv += ["--out", str(out / "res")]
        if argv[0] == "compare":
            argv += ["--html", str(out / "c.html")]
        return llmbench(*argv), out
    with ThreadPoolExecutor(4) as pool:
        return dict(zip(range(len(CASES)), pool.map(one, range(len(CASES)))))


@pytest.mark.parametrize("i", range(len(CASES)),
                         ids=[" ".join(c[0][:1] + c[0][-2:])[:60] for c in CASES])
def test_bad_input_is_one_line(i, outcomes):
    _, code, needle = CASES[i]
    r, out = outcomes[i]
    assert r.returncode == code, (r.returncode, r.stderr)
    line = one_error_line(r)
    assert needle in line, line
    # a usage error leaves no run folder behind
    assert not (out / "res").exists() or not any((out / "res").iterdir())


def test_runs_lists_an_unreadable_folder_and_goes_on(files):
    r = llmbench("runs", "--out", str(files))
    assert r.returncode == 0 and "Traceback" not in r.stdout + r.stderr
    assert "list  (unreadable:" in r.stdout and "holds a JSON list" in r.stdout
    assert "1970" not in r.stdout            # failed runs have no start time: not the epoch


# -- cases that need a server ---------------------------------------------------------------------

def test_model_optional_when_one_model_and_listed_when_several(mock_factory, tmp_path):
    one = mock_factory(ttft_ms=1, itl_ms=1, models=["only-one"])
    r = llmbench("run", "--url", one.url + "/v1", "--requests", "2", "--prompt-tokens", "5",
                 "--output-tokens", "2", "--out", str(tmp_path / "a"))
    assert r.returncode == 0, r.stderr
    assert "only-one" in r.stderr
    run = json.loads(next((tmp_path / "a").iterdir()).joinpath("run.json").read_text())
    assert run["config"]["target"]["model"] == "only-one"
    many = mock_factory(models=["a1", "b2", "c3"])
    for url in (many.url + "/v1", many.url):            # OpenAI /v1/models and Ollama /api/tags
        r = llmbench("run", "--url", url, "--out", str(tmp_path / "b"))
        assert r.returncode == 2
        line = one_error_line(r)
        assert "a1, b2, c3" in line and "--model" in line


def test_model_discovery_against_nothing_is_cannot_reach(tmp_path):
    r = llmbench("run", "--url", DEAD, "--out", str(tmp_path))
    assert r.returncode == 3 and "cannot reach" in one_error_line(r)


def test_wait_ready_waits_for_a_server_that_starts_late(tmp_path):
    port = free_port()
    p = subprocess.Popen([sys.executable, "-m", "llmbench.cli", "run", "--url",
                          f"http://127.0.0.1:{port}/v1", "--requests", "2", "--prompt-tokens", "5",
                          "--output-tokens", "2", "--wait-ready", "1m", "--out", str(tmp_path)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=ROOT)
    try:
        time.sleep(2.0)
        assert p.poll() is None          # still waiting: nothing listens yet
        mock = subprocess.Popen([sys.executable, "-m", "llmbench.cli", "mock", "--port", str(port),
                                 "--ttft-ms", "1", "--itl-ms", "1"], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, env=ENV, cwd=ROOT)
        try:
            out, err = p.communicate(timeout=60)
        finally:
            mock.terminate()
            mock.wait(10)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err
    assert "waiting up to 60 s" in err


def test_wait_ready_gives_up_with_exit_3(tmp_path):
    r = llmbench("run", "--url", DEAD, "--model", "m", "--wait-ready", "1s", "--out", str(tmp_path))
    assert r.returncode == 3 and "Traceback" not in r.stderr
    assert "not ready after 1 s" in r.stderr.splitlines()[-1]


def stalled() -> RawServer:
    """Headers, then nothing: a server stuck before its first token."""
    return RawServer([(0, http_head(chunked=True)), (60, None)])


def test_preflight_against_a_stalled_server_says_it_waits_and_stops(tmp_path):
    with stalled() as s:
        t = time.monotonic()
        r = llmbench("run", "--url", s.url + "/v1", "--model", "m", "--requests", "50",
                     "--timeout-first-token", "7", "--out", str(tmp_path))
        took = time.monotonic() - t
        assert len(s.requests) == 1             # the load never started
    assert r.returncode == 3, r.stderr
    assert "Traceback" not in r.stderr
    lines = r.stderr.splitlines()
    assert lines[0].startswith("waiting for the server to answer the first request")
    assert lines[-1].startswith("error: ") and "no first token within 7 s" in lines[-1]
    assert took < 30
    run = json.loads(next(tmp_path.iterdir()).joinpath("run.json").read_text())
    assert run["status"] == "failed" and "no first token" in run["error"]


def test_sigterm_during_preflight_leaves_an_explained_folder(tmp_path):
    with stalled() as s:
        p = subprocess.Popen([sys.executable, "-m", "llmbench.cli", "run", "--url", s.url + "/v1",
                              "--model", "m", "--out", str(tmp_path)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=ENV, cwd=ROOT)
        deadline = time.monotonic() + 30
        while not s.requests and time.monotonic() < deadline:
            time.sleep(0.05)
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=30)
    assert p.returncode == 130 and "Traceback" not in err
    assert err.splitlines()[-1].startswith("error: interrupted during the preflight")
    run = json.loads(next(tmp_path.iterdir()).joinpath("run.json").read_text())
    assert run["status"] == "interrupted" and "preflight" in run["error"]


class EchoAuth(BaseHTTPRequestHandler):
    """Answers the first request with a good stream, and every later one with a 401 whose body
    echoes the Authorization header, as some proxies do."""

    calls = 0

    def do_GET(self) -> None:                  # /v1/models: one model
        body = b'{"data": [{"id": "echo"}]}'
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        type(self).calls += 1
        if type(self).calls == 1:
            body = (b'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n'
                    b"data: [DONE]\n\n")
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
        else:
            body = json.dumps({"error": f"bad credentials: {self.headers.get('authorization')} "
                                        f"key {self.headers.get('x-api-key')}"}).encode()
            self.send_response(401)
            self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.send_header("connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a) -> None:
        pass


@pytest.mark.parametrize("how", ["basic-header", "bearer-key", "url-password", "header-equals"])
def test_secrets_never_written_or_printed(how, tmp_path):
    EchoAuth.calls = 0
    srv = ThreadingHTTPServer(("127.0.0.1", 0), EchoAuth)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    port = srv.server_address[1]
    url = f"http://127.0.0.1:{port}/v1"
    secret = "dXNlcjpTRUNSRVQxMjM0NTY3OA=="          # base64, '=' inside the value
    args = {"basic-header": ["--header", f"Authorization: Basic {secret}"],
            "bearer-key": ["--api-key", secret],
            "url-password": [],
            "header-equals": ["--header", f"X-Api-Key={secret}"]}[how]
    if how == "url-password":
        url = f"http://user:{secret}@127.0.0.1:{port}/v1"
    try:
        r = llmbench("run", "--url", url, "--model", "echo", "--requests", "4", "--prompt-tokens",
                     "5", "--output-tokens", "2", "--out", str(tmp_path / "res"), *args)
    finally:
        srv.shutdown()
    assert r.returncode == 0, r.stderr
    run_dir = next((tmp_path / "res").iterdir())
    listing = llmbench("runs", "--out", str(tmp_path / "res"))
    report = llmbench("report", str(run_dir))
    assert report.returncode == 0, report.stderr
    saved = "".join(p.read_text() for p in run_dir.iterdir() if p.is_file())
    everything = r.stdout + r.stderr + listing.stdout + report.stdout + report.stderr + saved
    assert "bad credentials" in saved and "***" in saved    # the error body is kept, redacted
    for leak in (secret, secret[:-2], "SECRET12345678", "user:"):
        assert leak not in everything, (leak, how)


def test_server_nan_header_and_negative_tokens_stay_valid(tmp_path):
    usage = (b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],'
             b'"usage":{"prompt_tokens":5,"completion_tokens":-7}}\n\n')
    head = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nx-llmbench-queue-ms: nan\r\n"
            b"connection: close\r\n\r\n")
    body = chat_token("a") + chat_token("b") + chat_token("c") + usage + b"data: [DONE]\n\n"
    with RawServer([(0, head + body)]) as s:
        r = llmbench("run", "--url", s.url + "/v1", "--model", "m", "--requests", "3",
                     "--prompt-tokens", "5", "--output-tokens", "3", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    run_dir = next(tmp_path.iterdir())

    def strict(line: str):
        return json.loads(line, parse_constant=lambda c: pytest.fail(f"bare {c} in JSON"))
    recs = [strict(x) for x in (run_dir / "requests.jsonl").read_text().splitlines()]
    assert len(recs) == 3 and all(x["ok"] for x in recs)
    assert all("server_queue_ms" not in x for x in recs)
    assert all(x["output_tokens"] == 3 and "completion_tokens -7" in x["note"] for x in recs)
    summary = strict((run_dir / "run.json").read_text())["summary"]
    assert summary["output_throughput"] > 0 and summary["total_output_tokens"] == 9


def test_sigkill_leaves_no_mock_and_report_rebuilds(tmp_path):
    p = subprocess.Popen([sys.executable, "-m", "llmbench.cli", "run", "--requests", "300",
                          "--concurrency", "2", "--prompt-tokens", "5", "--output-tokens", "20",
                          "--out", str(tmp_path)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=ROOT)
    line = p.stderr.readline()                          # "No --url given: ... at http://..."
    port = int(line.rsplit(":", 1)[1])
    log = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:                  # until some requests are on disk
        logs = list(tmp_path.glob("*/requests.jsonl"))
        if logs and len(logs[0].read_text().splitlines()) >= 3:
            log = logs[0]
            break
        time.sleep(0.1)
    p.kill()
    p.wait(10)
    assert log is not None
    run_dir = log.parent
    assert json.loads((run_dir / "run.json").read_text())["status"] == "running"
    deadline = time.monotonic() + 10                    # the mock dies with its parent
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except OSError:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the built-in mock outlived a SIGKILLed llmbench")
    listing = llmbench("runs", "--out", str(tmp_path))
    assert "killed?" in listing.stdout and "1970" not in listing.stdout
    r = llmbench("report", str(run_dir))
    assert r.returncode == 0, r.stderr
    assert "rebuilt from requests.jsonl" in r.stderr
    run = json.loads((run_dir / "run.json").read_text())
    assert run["status"] == "partial" and run["summary"]["completed"] >= 3


def test_interrupted_ramp_does_not_say_every_step_held(mock_factory, tmp_path):
    m = mock_factory(ttft_ms=2, itl_ms=1, models=["mock"])
    p = subprocess.Popen([sys.executable, "-m", "llmbench.cli", "ramp", "--url", m.url + "/v1",
                          "--model", "mock", "--users", "1,2,3", "--hold", "2s", "--ramp-in", "0",
                          "--think", "0", "--prompt-tokens", "5", "--output-tokens", "3",
                          # a busy machine must not end the ramp at step 1 (its own generator
                          # check) before the signal is sent: the point is the interruption
                          "--generator-lag-limit", "2000ms",
                          "--out", str(tmp_path)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=ROOT)
    lines = []
    for line in p.stdout:                 # the header, then the first step's row
        lines.append(line)
        if line.rstrip().endswith("held") or "broke" in line:
            break
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    out = "".join(lines) + out
    assert p.returncode == 130, (err, out)
    assert "Every step held" not in out and "before the ramp was interrupted" in out
    run = json.loads(next(tmp_path.iterdir()).joinpath("run.json").read_text())
    assert run["status"] == "partial" and "interrupted" in run["verdict"]["result"]
