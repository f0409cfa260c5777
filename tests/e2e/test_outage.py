"""A server that goes down during a run: users back off, the outage is named once, the step
that contains it is over (issue 23, item 1)."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.helpers import ROOT, busy, free_port
from tests.helpers.field import wait_port
from llmbench.analysis import outages
from llmbench.load.session import BACKOFF_MAX_S
from llmbench.records.record import Record
from tests.helpers import ENV, only_run


def start_mock(port: int) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-m", "llmbench.cli", "mock", "--port", str(port),
                          "--ttft-ms", "20", "--itl-ms", "5", "--tokens", "10", "--parallel", "8"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV, cwd=ROOT)
    wait_port(port, 30, proc=p)
    return p


def _wait_steps(run_json: Path, n: int, deadline_s: float = 60) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        try:
            if len(json.loads(run_json.read_text()).get("steps") or []) >= n:
                return
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    raise AssertionError(f"fewer than {n} steps in {run_json} after {deadline_s} s")


def test_a_server_killed_and_restarted_during_a_ramp_is_an_outage(tmp_path):
    port = free_port()
    t = time.monotonic()
    mock = start_mock(port)
    start_s = time.monotonic() - t
    # the restart must land inside the second step's hold: the kill ~2 s into it, 3 s down,
    # a restart as slow as this first start was (measured; twice that for a busier moment)
    # and a backoff. 10 s on a quiet machine; CI at load 6-17 restarted after 10.5 s, past it
    hold_s = max(10.0, 2.0 + 3.0 + 2 * start_s + BACKOFF_MAX_S + 1.0)
    out = tmp_path / "out"
    ramp = subprocess.Popen(
        [sys.executable, "-m", "llmbench.cli", "ramp", "--url", f"http://127.0.0.1:{port}/v1",
         "--model", "mock", "--users", "2,4", "--ramp-in", "0.5s", "--hold", f"{hold_s:.1f}s",
         "--think", "0",
         "--turns", "1", "--prompt-tokens", "5", "--output-tokens", "10",
         "--threshold", "ttft.p95<=5s", "--generator-lag-limit", "2000ms", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=ROOT)
    restarted = None
    try:
        deadline = busy.Deadline(60)
        while not deadline.expired() and not list(out.glob("*/run.json")):
            time.sleep(0.05)
        _wait_steps(next(out.glob("*/run.json")), 1)   # the second step's ramp-in has begun
        time.sleep(1.5)
        killed = time.monotonic()
        mock.send_signal(signal.SIGKILL)                # gone: every connection refused
        mock.wait(10)
        time.sleep(3.0)
        # back on the same port; a fresh interpreter takes 0.5-4 s to listen (more on a busy
        # machine), so the outage's length is judged against the time it really was down
        restarted = start_mock(port)
        down_s = time.monotonic() - killed
        stdout, stderr = busy.communicate(ramp, 120)
    finally:
        for p in (mock, restarted, ramp):
            if p is not None and p.poll() is None:
                p.kill()
    run = json.loads((only_run(out) / "run.json").read_text())
    recs = [json.loads(x) for x in (only_run(out) / "requests.jsonl").read_text().splitlines()]
    refused = [r for r in recs if r.get("error_kind") in ("connect", "timeout_connect")]
    # backed off: a handful of attempts per user a second, not thousands (21,746 before)
    assert 4 <= len(refused) < 100, len(refused)
    assert all(r.get("backoff_ms", 0) <= BACKOFF_MAX_S * 1000 for r in refused)
    assert all(r.get("backoff_ms", 0) > 0 for r in refused)
    # named once, with its duration: from the first refused attempt (just after the kill) to
    # the first answered one (once the restarted mock listens, up to one backoff later)
    assert len(run["outages"]) == 1, run["outages"]
    o = run["outages"][0]
    assert down_s - 0.5 <= o["duration_s"] <= down_s + BACKOFF_MAX_S + 1.0, (o, down_s)
    assert o["attempts"] == len(refused) and not o["ongoing_at_end"]
    assert "the server refused connections from" in o["text"]
    # the step that contains it is over, with the outage as the reason
    steps = run["steps"]
    assert [s["held"] for s in steps] == [True, False]
    assert any(c.get("outage") for c in steps[1]["checks"])
    assert run["verdict"]["kind"] == "outage"
    assert ramp.returncode == 3, stdout + stderr
    assert "Why: the server went down" in stdout and f"OUTAGE: {o['text']}" in stdout
    # requests per second counts what the server answered, not the refused attempts
    s1 = steps[1]["summary"]
    assert s1["request_throughput"] * (steps[1]["hold_end"] - steps[1]["hold_start"]) \
        <= s1["completed"] + 1
    # and the timeline marks the seconds it was down
    rows = [json.loads(x) for x in (only_run(out) / "timeline.jsonl").read_text().splitlines()]
    down = [r["t"] for r in rows if r.get("outage")]
    assert 2 <= len(down) <= o["duration_s"] + 2


def _rec(i: int, start: float, kind: str | None, backoff_ms: float | None = None) -> Record:
    r = Record(f"r-{i}", scheduled=start, start=start, done=start + 0.01, ok=kind is None,
               status=200 if kind is None else None, error_kind=kind)
    r.backoff_ms = backoff_ms
    return r


def test_outages_from_records_alone():
    recs = [_rec(0, 1.0, None), _rec(1, 2.0, "connect", 50), _rec(2, 2.1, "connect", 100),
            _rec(3, 2.3, "timeout_connect", 200), _rec(4, 2.6, None), _rec(5, 3.0, "connect", 50),
            _rec(6, 4.0, None), _rec(7, 5.0, "connect", 60), _rec(8, 5.2, "connect", 90)]
    found = outages.find(recs)
    # one reset in a busy run is an error, not an outage; one still open at the end has no end
    assert [(o.start, o.end, o.attempts) for o in found] == [(2.0, 2.6, 3), (5.0, None, 2)]
    assert abs(found[0].backoff_s - 0.35) < 1e-9
    d = found[0].as_dict(t0=1.0)
    assert d == {"start_s": 1.0, "end_s": 1.6, "duration_s": 0.6, "ongoing_at_end": False,
                 "attempts": 3, "backoff_s": 0.35}
    assert outages.sentence(found[0], 1.0).startswith(
        "the server refused connections from 1.0 s to 1.6 s (0.6 s); 3 attempts failed")
    assert outages.step_check(recs, 3.5, 4.5) is None
    assert outages.step_check(recs, 2.5, 3.5).outage is True
    assert outages.find([_rec(0, 1.0, None), _rec(1, 2.0, "http_status")]) == []
