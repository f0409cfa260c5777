"""Gates that must not pass a failed run (issue 11 "Gates and statistics that lie", issue 13 "CI
gates like k6"): missing statistics are missing, failures count in latency, compare sees a dead
candidate, errors outrank the load generator's own state, and a failed threshold exits 99.

Every server here is a real one on loopback: the mock, or a RawServer that misbehaves."""

import json
from pathlib import Path

from tests.helpers import CHAT_ROLE, RawServer, chat_token, chunk, http_head
from tests.helpers import llmbench, only_run
from tests.helpers.api import run_exit_code
from llmbench import run as api_run

FAST = ["--ramp-in", "0.5s", "--hold", "3s", "--think", "0", "--turns", "1",
        "--prompt-tokens", "10", "--output-tokens", "20"]
# headers, then nothing: every request times out waiting for its first token
SILENT = [(0, http_head(chunked=True)), (60, None)]
# every request answered 500 with a body
DEAD = [(0, http_head("500 Internal Server Error", "application/json",
                      length=len(b'{"error": "model crashed"}'))),
        (0, b'{"error": "model crashed"}')]


# The first request is llmbench's preflight, which now stops a run against a server that cannot
# answer at all (exit 3, issue 11.6). These servers answer that one and then fail, so the gates
# themselves are what is tested.
ANSWER = [(0, http_head(chunked=True)),
          (0, chunk(CHAT_ROLE + chat_token("ok") + b"data: [DONE]\n\n")), (0, b"0\r\n\r\n")]


def after_preflight(script: list):
    return lambda i: ANSWER if i == 0 else script


def strict_json(path: Path):
    """Parse as strict JSON: bare NaN/Infinity (invalid JSON) raise."""
    def bad(name):
        raise ValueError(f"{path} holds {name}, which is not JSON")
    return json.loads(path.read_text(), parse_constant=bad)


def test_ramp_where_every_request_timed_out_does_not_hold(tmp_path):
    # issue 11.1: "Held 2 users. Every step held.", TTFT p95 0.0 ms, exit 0
    with RawServer(after_preflight(SILENT)) as s:
        r = llmbench("ramp", "--url", s.url + "/v1", "--model", "m", "--users", "1,2",
                     "--threshold", "ttft.p95<=2s", "--timeout-first-token", "1", *FAST,
                     "--out", str(tmp_path), timeout=120)
    assert r.returncode == 99, r.stdout + r.stderr            # the first step failed its gate
    assert "Every step held" not in r.stdout and "held" not in r.stdout.splitlines()[1]
    assert "Held 0 users. At 1 user, ttft.p95<=2s: no successful request to measure" in r.stdout
    assert "0.0ms" not in r.stdout and "–" in r.stdout.splitlines()[1]
    run_dir = only_run(tmp_path)
    run = strict_json(run_dir / "run.json")
    step = run["steps"][0]
    assert step["held"] is False and step["state"] == "over"
    assert step["summary"]["p95_ttft_ms"] is None and step["summary"]["mean_e2el_ms"] is None
    assert step["summary"]["p95_all_ttft_ms"] == "inf"        # valid JSON, not bare Infinity
    assert run["verdict"]["kind"] == "errors"
    assert "timeout_first_token" in " ".join(run["verdict"]["evidence"])
    md = llmbench("report", str(run_dir), "--format", "md")
    row = next(x for x in md.stdout.splitlines() if x.startswith("| 1 |"))
    assert "| – | – |" in row and "0.0ms" not in row and "**over**" in row
    html = (run_dir / "report.html").read_text()
    assert "no successful request to measure" in html and "0.0ms" not in html


def test_429s_are_the_verdict_even_when_the_generator_is_called_busy(mock_factory, tmp_path):
    # issue 11.4: with a lag limit no loop can meet, the verdict was "load generator", exit 4,
    # and the 429s were not mentioned
    m = mock_factory(ttft_ms=5, itl_ms=2, fault_429=0.3, seed=3)
    r = llmbench("ramp", "--url", m.url + "/v1", "--model", "mock", "--users", "1",
                 "--generator-lag-limit", "0.001ms", *FAST, "--out", str(tmp_path))
    assert r.returncode == 99, r.stdout + r.stderr
    run = json.loads((only_run(tmp_path) / "run.json").read_text())
    v = run["verdict"]
    text = " ".join(v["evidence"])
    assert v["kind"] == "errors" and "HTTP 429" in text and "rate limit exceeded" in text
    assert "Why: errors" in r.stdout and "rate limit exceeded" in r.stdout
    # it names who was busy, and says it does not explain the errors
    assert ("llmbench itself was busy" in text) or ("busy with other processes" in text)
    assert "not trustworthy" not in r.stdout


def test_ramp_whose_first_step_fails_its_thresholds_exits_99(mock_factory, tmp_path):
    # issue 13: a ramp whose thresholds broke at once exited 0
    m = mock_factory(ttft_ms=100, itl_ms=2)
    r = llmbench("ramp", "--url", m.url + "/v1", "--model", "mock", "--users", "1,2",
                 "--threshold", "ttft.p95<=1ms", *FAST, "--out", str(tmp_path))
    assert r.returncode == 99, r.stdout + r.stderr
    assert "Held 0 users" in r.stdout and "exit 99" in r.stdout


def test_run_threshold_gates_the_exit_code(mock_factory, tmp_path):
    m = mock_factory(ttft_ms=30, itl_ms=2)
    args = ["run", "--url", m.url + "/v1", "--model", "mock", "--requests", "8",
            "--concurrency", "2", "--prompt-tokens", "10", "--output-tokens", "8"]
    r = llmbench(*args, "--threshold", "ttft.p95<=1ms", "--threshold", "errors==0",
                 "--out", str(tmp_path / "a"))
    assert r.returncode == 99, r.stdout + r.stderr
    assert "FAIL  ttft.p95<=1ms:" in r.stdout and "ok    errors==0: 0" in r.stdout
    run = json.loads((only_run(tmp_path / "a") / "run.json").read_text())
    assert [c["ok"] for c in run["thresholds"]] == [False, True]
    r = llmbench(*args, "--threshold", "ttft.p95_all<=10s", "--threshold",
                 "ttft.within(10s)>=99%", "--out", str(tmp_path / "b"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ok    ttft.within(10s)>=99%: 100.0%" in r.stdout
    r = llmbench(*args, "--threshold", "ttft.p95<=banana", "--out", str(tmp_path / "c"))
    assert r.returncode == 2 and "does not parse" in r.stderr and "Traceback" not in r.stderr


def test_run_against_a_silent_server_fails_its_threshold_and_stores_null(tmp_path):
    with RawServer(after_preflight(SILENT)) as s:
        r = llmbench("run", "--url", s.url + "/v1", "--model", "m", "--requests", "2",
                     "--timeout-first-token", "1", "--threshold", "ttft.p95<=2s",
                     "--out", str(tmp_path), timeout=60)
    assert r.returncode == 99, r.stdout + r.stderr
    assert "FAIL  ttft.p95<=2s: no successful request to measure (2 of 2 failed)" in r.stdout
    assert "Mean TTFT (ms):                          –" in r.stdout
    run = strict_json(only_run(tmp_path) / "run.json")
    s = run["summary"]
    assert s["p99_ttft_ms"] is None and s["n_ttft"] == 0 and s["p95_all_ttft_ms"] == "inf"
    assert "could not write report.html" not in r.stderr
    page = (only_run(tmp_path) / "report.html").read_text()
    assert "<td class=\"\">–</td>" in page and "∞" in page and "FAILED" in page
    listing = llmbench("runs", "--out", str(tmp_path))
    assert listing.returncode == 0 and "0 ok, 2 failed, TTFT p50 –" in listing.stdout


def test_compare_does_not_pass_a_dead_candidate(mock_factory, tmp_path):
    # issue 11.3: baseline all ok, candidate all failed -> "held: +0.0 %", exit 0
    m = mock_factory(ttft_ms=10, itl_ms=2)
    common = ["--requests", "20", "--concurrency", "2", "--prompt-tokens", "10",
              "--output-tokens", "8"]
    # the healthy baseline needs only its folder: made in this process, through the API
    base_run = api_run(url=m.url + "/v1", model="mock", requests=20, concurrency=2,
                       prompt_tokens=10, output_tokens=8, out=tmp_path / "base")
    assert run_exit_code(base_run) == 0
    with RawServer(after_preflight(DEAD)) as s:
        r = llmbench("run", "--url", s.url + "/v1", "--model", "mock", *common,
                     "--out", str(tmp_path / "cand"))
    assert r.returncode == 0, r.stdout + r.stderr           # no --threshold: no gate
    base, cand = only_run(tmp_path / "base"), only_run(tmp_path / "cand")
    r = llmbench("compare", str(base), str(cand), "--max-regression", "10%",
                 "--html", str(tmp_path / "c.html"))
    assert r.returncode == 1, r.stdout + r.stderr
    lines = [x for x in r.stdout.splitlines() if "REGRESSION" in x]
    assert any("error_rate" in x and "0/20 -> 20/20 failed" in x for x in lines), r.stdout
    assert any("completed" in x and "no request completed on the candidate" in x for x in lines)
    assert any("ttft.p95" in x and "cannot be computed on the candidate" in x for x in lines)
    assert any("output_throughput" in x for x in lines)
    # the same runs the other way round: the baseline is dead, nothing to regress from, but
    # every metric is still listed with the reason it has no change
    r = llmbench("compare", str(cand), str(base), "--max-regression", "10%",
                 "--html", str(tmp_path / "d.html"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "cannot be computed on the baseline" in r.stdout
    # identical healthy runs: the error-rate gate does not fire on noise
    r = llmbench("compare", str(base), str(base), "--max-regression", "10%",
                 "--html", str(tmp_path / "e.html"))
    assert r.returncode == 0 and "REGRESSION" not in r.stdout, r.stdout
