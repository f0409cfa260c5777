"""Signal dispositions a parent leaves behind (issue 49). sh starts ``cmd &`` with SIGINT
ignored: ``kill -INT`` must still stop every command with its partial result (the suite, once
started that way, saw ``llmbench dashboard`` outlive its Ctrl-C). ``nohup`` leaves SIGHUP
ignored: the run must outlive the terminal, not stop as if it had been asked to."""

import json
import signal
import subprocess
import sys
import time

from tests.helpers import ENV, ROOT, as_from_a_terminal, busy, free_port, only_run


def _ignoring(*sigs: int):
    def pre() -> None:                  # in the child, before exec: as sh and nohup leave it
        for sig in sigs:
            signal.signal(sig, signal.SIG_IGN)
    return pre


def _start(args: list[str], *ignored: int, **kw) -> subprocess.Popen:
    kw.setdefault("preexec_fn", _ignoring(*ignored))
    return subprocess.Popen([sys.executable, "-m", "llmbench.cli", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
                            cwd=ROOT, **kw)


def _records(folder, at_least: int, proc: subprocess.Popen) -> None:
    """Wait (however long this machine takes to start) for ``at_least`` records on disk."""
    deadline = busy.Deadline(60)
    while not deadline.expired() and proc.poll() is None:
        logs = list(folder.glob("*/requests.jsonl"))
        if logs and len(logs[0].read_text().splitlines()) >= at_least:
            return
        time.sleep(0.1)
    raise AssertionError(f"no {at_least} records in {folder} (exit {proc.poll()})")


def _ignored_in(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("SigIgn:"):
            return int(line.split()[1], 16)
    raise AssertionError("no SigIgn line")


def test_dashboard_started_with_ctrl_c_ignored_still_ends_on_it(tmp_path, mock_factory):
    m = mock_factory(ttft_ms=5, itl_ms=1, tokens=4)
    r = busy.run([sys.executable, "-m", "llmbench.cli", "run", "--url", m.url + "/v1",
                  "--model", "mock", "--requests", "3", "--out", str(tmp_path)], 120,
                 env=ENV, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    p = _start(["dashboard", str(only_run(tmp_path)), "--port", str(free_port())], signal.SIGINT)
    try:
        busy.Lines(p).wait(r"Dashboard: (http://\S+)", 90)
        # the premise: this child was started as sh starts a background job
        assert _ignored_in(p.pid) & (1 << (signal.SIGINT - 1)) == 0, "llmbench took SIGINT back"
        p.send_signal(signal.SIGINT)
        busy.communicate(p, 30)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0


def test_run_started_with_ctrl_c_ignored_stops_on_it_with_a_partial_result(tmp_path,
                                                                            mock_factory):
    m = mock_factory(ttft_ms=20, itl_ms=20, tokens=50)
    p = _start(["run", "--url", m.url + "/v1", "--model", "mock", "--concurrency", "4",
                "--requests", "1000", "--output-tokens", "50", "--out", str(tmp_path)],
               signal.SIGINT)
    _records(tmp_path, 4, p)
    p.send_signal(signal.SIGINT)
    out, err = busy.communicate(p, 30)
    assert p.returncode == 130, err
    assert json.loads((only_run(tmp_path) / "run.json").read_text())["status"] == "partial"


def test_a_run_under_nohup_outlives_the_terminal(tmp_path, mock_factory):
    """SIGHUP ignored (nohup): the terminal closing mid-run changes nothing; the run measures
    to its end. Without nohup the same SIGHUP stops it, as Ctrl-C does."""
    m = mock_factory(ttft_ms=20, itl_ms=10, tokens=10)
    args = ["run", "--url", m.url + "/v1", "--model", "mock", "--concurrency", "2",
            "--requests", "40", "--output-tokens", "10"]
    kept = _start(args + ["--out", str(tmp_path / "nohup")], signal.SIGHUP)
    _records(tmp_path / "nohup", 2, kept)
    kept.send_signal(signal.SIGHUP)
    out, err = busy.communicate(kept, 120)
    assert kept.returncode == 0, err
    run = json.loads((only_run(tmp_path / "nohup") / "run.json").read_text())
    assert run["status"] == "complete" and run["summary"]["completed"] == 40

    hung_up = _start(args + ["--requests", "1000", "--out", str(tmp_path / "hup")],
                     preexec_fn=as_from_a_terminal)
    _records(tmp_path / "hup", 2, hung_up)
    hung_up.send_signal(signal.SIGHUP)
    out, err = busy.communicate(hung_up, 30)
    assert hung_up.returncode == 130, err
    assert json.loads((only_run(tmp_path / "hup") / "run.json").read_text())["status"] \
        == "partial"
