"""The dashboard's exposure (issue 49): served beyond this machine it says so and prints the
address another machine opens; LLMBENCH_DASHBOARD_TOKEN makes every request carry a token;
half-open clients are dropped within the read timeout and never pile up threads, and the
page keeps answering. Over real sockets against the page's own process, for ``llmbench
dashboard`` and for the process a run's --dashboard starts."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from llmbench.report.dashboard.server import MAX_CONNECTIONS, READ_TIMEOUT_S
from tests.helpers import ENV, ROOT

FOLDER = next(p for p in sorted((ROOT / "results" / "examples" / "num_parallel").iterdir())
              if (p / "run.json").is_file())


def start(args: list[str], env: dict[str, str]) -> tuple[subprocess.Popen, int, str]:
    """``llmbench dashboard`` in a child: (process, port, what it printed before listening)."""
    p = subprocess.Popen([sys.executable, "-m", "llmbench.cli", "dashboard", *args],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    lines = []
    while True:
        line = p.stderr.readline()
        assert line, ("the dashboard exited", lines, p.stdout.read())
        lines.append(line)
        m = re.search(r"Dashboard: http://\S+:(\d+)/", line)
        if m:
            return p, int(m.group(1)), "".join(lines)


def get(port: int, path: str = "/", headers: dict[str, str] | None = None,
        timeout: float = 30) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def test_every_interface_warns_prints_the_real_address_and_sheds_half_open_clients():
    p, port, said = start([str(FOLDER), "--host", "0.0.0.0", "--port", "0"], ENV)
    try:
        assert "no authentication" in said and "LLMBENCH_DASHBOARD_TOKEN" in said, said
        url = re.search(r"Dashboard: (\S+)", said).group(1)
        assert "127.0.0.1" not in url and "0.0.0.0" not in url, url
        assert get(port)[0] == 200
        base = threads(p.pid)
        # 300 clients that connect and send nothing
        t0 = time.monotonic()
        socks = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(300)]
        peak = threads(p.pid)
        assert peak <= base + MAX_CONNECTIONS, peak
        # every one is closed by the server (EOF) within the read timeout, measured from
        # the moment they all were open, with the time their opening took as slack
        opened_s = time.monotonic() - t0
        closed = 0
        for s in socks:
            s.settimeout(READ_TIMEOUT_S + opened_s + 5)
            try:
                closed += s.recv(1) == b""
            except (ConnectionResetError, socket.timeout):
                closed += 0
            s.close()
        assert closed == 300
        # the page answers, and its threads are back to what they were
        assert get(port)[0] == 200
        assert threads(p.pid) <= base + 2
    finally:
        p.terminate()
        p.wait(timeout=30)


def test_a_token_is_asked_of_every_request_when_one_is_set():
    env = {**ENV, "LLMBENCH_DASHBOARD_TOKEN": "s3cret-token"}
    p, port, said = start([str(FOLDER), "--port", "0"], env)
    try:
        assert "?token=s3cret-token" in said and "no authentication" not in said, said
        assert get(port)[0] == 401
        assert get(port, "/state.json")[0] == 401
        assert get(port, "/", {"Authorization": "Bearer wrong"})[0] == 401
        code, headers, _ = get(port, "/?token=s3cret-token")
        assert code == 200 and "llmbench_dashboard=s3cret-token" in headers.get("Set-Cookie", "")
        # the page's own requests carry the cookie, a script the header
        assert get(port, "/state.json", {"Cookie": "llmbench_dashboard=s3cret-token"})[0] == 200
        assert get(port, "/state.json", {"Authorization": "Bearer s3cret-token"})[0] == 200
    finally:
        p.terminate()
        p.wait(timeout=30)


def test_the_runs_page_process_warns_too_and_a_loopback_one_does_not():
    """The process a run's --dashboard starts (the same server) says it on its stderr, which
    the run's console shows."""
    for host, warns in (("0.0.0.0", True), ("127.0.0.1", False)):
        p = subprocess.Popen([sys.executable, "-m", "llmbench.report.dashboard.server",
                              "--host", host, "--port", "0", "--feed"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
        try:
            assert p.stdout.readline().startswith("PORT ")
        finally:
            p.stdin.close()                  # its end: the feed closes
            p.wait(timeout=30)
        err = p.stderr.read()
        assert ("no authentication" in err) == warns, err
