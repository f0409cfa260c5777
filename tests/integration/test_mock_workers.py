"""``llmbench mock --workers N``: worker processes sharing one port (SO_REUSEPORT), each with its
own engine; one send-time log for all of them; /metrics and /admin/config covering every worker;
no process left behind however the mock ends."""

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

import aiohttp
import httpx
import pytest

from tests.helpers import ROOT
from llmbench.mock_server import MockProcess, make_config
from llmbench.mock_server.recorder import read_log
from llmbench.mock_server.server import REUSEPORT

pytestmark = pytest.mark.skipif(not REUSEPORT, reason="--workers needs Linux SO_REUSEPORT")


def children(pid: int) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = open(f"/proc/{d}/stat").read()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(d))
    return out


def alive(pid: int) -> bool:
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_gone(pids: list[int], timeout_s: float = 20.0) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


async def many(url: str, n: int) -> list[tuple[str, str]]:
    """n streamed requests at once, each on its own connection: (request id, serving worker)."""
    async def one(i: int) -> tuple[str, str]:
        rid = f"req-{i}"
        async with aiohttp.ClientSession() as s:      # a new connection: the kernel picks anew
            async with s.post(url + "/v1/chat/completions", headers={"x-request-id": rid}, json={
                    "model": "mock", "messages": [{"role": "user", "content": f"hi {i}"}],
                    "stream": True, "max_tokens": 4}) as r:
                assert r.status == 200
                await r.read()
                return rid, r.headers["x-llmbench-worker"]
    return await asyncio.gather(*(one(i) for i in range(n)))


def test_two_workers_share_the_port_and_one_log_holds_every_request_once(tmp_path):
    log = tmp_path / "send.jsonl"
    cfg = make_config(None, ttft_ms=5, itl_ms=2)
    with MockProcess(cfg, record=str(log), workers=2) as m:
        workers = children(m.proc.pid)
        assert len(workers) == 2
        served = asyncio.run(many(m.url, 60))
        # the kernel spread the connections over both processes (all 60 on one: p = 2**-59)
        assert set(w for _, w in served) == {"0", "1"}
        # /metrics on any worker shows every worker, one series each, that add up to the whole
        text = httpx.get(m.url + "/metrics").text
        ok = [line for line in text.splitlines()
              if line.startswith("vllm:request_success_total")]
        assert {line.split('engine="')[1].split('"')[0] for line in ok} == {"0", "1"}
        assert sum(float(line.split()[-1]) for line in ok) == 60
        assert text.count("# TYPE vllm:num_requests_running gauge") == 1    # one family
        assert httpx.get(m.url + "/props").json()["workers"] == 2
        # a config change reaches every worker, whichever one took the request
        assert httpx.post(m.url + "/admin/config", json={"ttft_ms": 77}).status_code == 200
        seen = {}
        for _ in range(60):
            with httpx.Client() as c:                 # a new connection each time
                body = c.get(m.url + "/admin/config").json()
            seen[body["worker"]] = body["ttft_ms"]
            if len(seen) == 2:
                break
        assert seen == {0: 77.0, 1: 77.0}
        bad = httpx.post(m.url + "/admin/config", json={"nonsense": 1})
        assert bad.status_code == 400 and "nonsense" in bad.json()["error"]
    assert wait_gone(workers) == []                   # stopped (SIGTERM) with the supervisor
    entries = read_log(log)
    by_worker = Counter(str(e["worker"]) for e in entries)
    assert sorted(e["request_id"] for e in entries) == sorted(rid for rid, _ in served)
    assert by_worker == Counter(w for _, w in served)      # each logged by the worker that served
    for e in entries:
        assert e["status"] == "ok" and len(e["event_ns"]) == 4
        assert e["arrival_ns"] <= e["slot_ns"] <= e["event_ns"][0]


def start_supervisor(tmp_path) -> tuple[subprocess.Popen, list[int], str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen([sys.executable, "-m", "llmbench.mock_server", "--workers", "2", "--port", "0",
                          "--announce", "--config-json", json.dumps({"ttft_ms": 1, "itl_ms": 1})],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                         cwd=tmp_path)
    line = p.stdout.readline()
    assert line.startswith("LISTENING "), p.stderr.read()
    url = json.loads(line[len("LISTENING "):])[0]
    return p, children(p.pid), url


@pytest.mark.parametrize("how", ["SIGINT", "SIGKILL", "a worker dies"])
def test_no_process_is_left_behind(tmp_path, how):
    p, workers, url = start_supervisor(tmp_path)
    try:
        assert len(workers) == 2
        assert httpx.get(url + "/health").status_code == 200
        if how == "a worker dies":
            os.kill(workers[1], signal.SIGKILL)
        else:
            os.kill(p.pid, getattr(signal, how))
        code = p.wait(30)
        assert wait_gone(workers) == []
        if how == "SIGINT":
            assert code == 0
        elif how == "a worker dies":
            assert code == 1 and "worker 1 exited" in p.stderr.read()
        with pytest.raises(httpx.TransportError):
            httpx.get(url + "/health", timeout=2)
    finally:
        for pid in [p.pid, *workers]:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        p.wait()


def test_a_port_another_reuseport_server_holds_is_refused_not_shared(tmp_path):
    # joining another server's SO_REUSEPORT group would silently split its traffic with ours
    import socket
    other = socket.socket()
    other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    other.bind(("127.0.0.1", 0))
    other.listen(8)
    port = other.getsockname()[1]
    try:
        r = subprocess.run([sys.executable, "-m", "llmbench.mock_server", "--workers", "2", "--port",
                            str(port), "--announce"], capture_output=True, text=True, timeout=60,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
    finally:
        other.close()
    assert r.returncode == 1 and "LISTENING" not in r.stdout
    assert r.stderr.startswith("error: mock:") and len(r.stderr.splitlines()) == 1


def test_cli_refuses_zero_workers():
    r = subprocess.run([sys.executable, "-m", "llmbench.cli", "mock", "--workers", "0"],
                       capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 2
    assert r.stderr.strip() == "error: --workers 0: must be at least 1"
