"""--ray: workers as Ray actors, for real. One local Ray head on loopback for the whole module
(starting one takes 7-20 s on the project machine), no mock of Ray: the actors run the same
worker entry as --workers, and the numbers must agree with --workers 2 against the same mock.
"""

import asyncio
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.helpers import ROOT, busy, free_port
from tests.helpers import ENV, llmbench, only_run

ray = pytest.importorskip("ray")

# Ray's node address stays on loopback: the switch Ray uses on laptops (its name says Windows
# and macOS; on Linux it makes Ray pick 127.0.0.1 as it does there). The cluster gets a token
# of its own, so ~/.ray is never touched.
RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
           "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16)}
SMALL = ["--prompt-tokens", "10", "--output-tokens", "16"]


@pytest.fixture(scope="module")
def ray_head():
    """`ray start --head --block` on a free loopback port; stopped by its own pid after."""
    port = free_port()
    tmp = tempfile.mkdtemp(prefix="lbray")           # short: Ray's socket paths have a limit
    exe = Path(sys.executable).parent / "ray"
    cmd = ([str(exe)] if exe.exists() else
           [sys.executable, "-c", "from ray.scripts.scripts import main; main()"])
    env = {**ENV, **RAY_ENV}
    log = open(Path(tmp) / "head.log", "w+")
    proc = subprocess.Popen(
        cmd + ["start", "--head", "--node-ip-address", "127.0.0.1", "--port", str(port),
               "--num-cpus", "2", "--include-dashboard", "false", "--disable-usage-stats",
               "--temp-dir", tmp, "--block"],
        stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT, start_new_session=True)
    started = busy.Deadline(180)           # stretched on a busy machine
    try:
        while "Ray runtime started" not in Path(log.name).read_text():
            assert proc.poll() is None, Path(log.name).read_text()[-2000:]
            assert not started.expired(), f"the Ray head did not start in {started}"
            time.sleep(0.2)
        yield f"127.0.0.1:{port}"
    finally:
        proc.send_signal(signal.SIGTERM)          # --block: stops the head's processes
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)


def _run(m, out: Path, *args: str):
    p = llmbench("run", "--url", m.url + "/v1", "--model", "mock", "--out", str(out), *SMALL,
                 *args, timeout=300, env=RAY_ENV)
    assert p.returncode == 0, p.stderr[-3000:]
    d = only_run(out)
    recs = [json.loads(x) for x in (d / "requests.jsonl").read_text().splitlines()]
    return p, recs, json.loads((d / "run.json").read_text())


def _run_watched(m, out: Path, *args: str):
    """``_run`` with --dashboard: the page's state once it shows the end (read while the page
    lingers), then Ctrl-C ends the linger; the exit code stays the run's."""
    import urllib.request
    cmd = [sys.executable, "-m", "llmbench.cli", "run", "--url", m.url + "/v1", "--model", "mock",
           "--out", str(out), *SMALL, *args, "--dashboard", "0", "--dashboard-linger", "120s"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT, env={**ENV, **RAY_ENV})
    err = busy.Lines(proc)
    try:
        url = err.wait(r"Dashboard: (http://\S+)", 90)
        first = err.seen[-1]
        deadline = busy.Deadline(300)          # stretched on a busy machine
        while True:
            assert proc.poll() is None and not deadline.expired(), (first, str(deadline))
            try:
                with urllib.request.urlopen(url.group(1) + "state.json", timeout=30) as r:
                    state = json.loads(r.read())
            except OSError:
                state = {}
            if state.get("final"):
                break
            time.sleep(0.5)
        # the page is final before the command lingers: a Ctrl-C sent in between ends the
        # command (exit 130, no linger); the one that ends the linger waits for its line
        err.wait(r"Dashboard: \S+ stays up", 90)
    finally:
        proc.send_signal(signal.SIGINT)
        # the actors' records gathered, the report written, Ray let go of: 60 s on a quiet
        # machine, stretched by the slowdown measured while it goes (CI at load 6-17 took longer)
        _, rest = busy.communicate(proc, 60)
    stderr = "\n".join(err.seen) + "\n" + rest
    assert proc.returncode == 0, stderr[-3000:]
    d = only_run(out)
    recs = [json.loads(x) for x in (d / "requests.jsonl").read_text().splitlines()]
    return stderr, recs, json.loads((d / "run.json").read_text()), state


def test_two_ray_actors_match_two_worker_processes(ray_head, mock_factory, tmp_path):
    m = mock_factory(ttft_ms=60, itl_ms=10)
    args = ("--concurrency", "8", "--requests", "64", "--seed", "5", "--workers", "2")
    _, local, run_l = _run(m, tmp_path / "local", *args)
    # watched on --dashboard: the page shows the merged view, every actor's requests
    stderr, remote, run_r, page = _run_watched(m, tmp_path / "ray", *args, "--ray", ray_head)
    assert "Ray: 1 node(s), 2 CPUs" in stderr
    assert page["text"]["done"] == "64" and page["series"]["finished"] == 64
    assert page["series"]["failed"] == run_r["summary"]["failed"] == 0
    # every request sent is a record, each naming its worker, all ok
    assert len(remote) == 64 and len({r["request_id"] for r in remote}) == 64
    assert {r["worker"] for r in remote} == {0, 1} and all(r["ok"] for r in remote)
    assert run_r["status"] == "complete" and run_r["summary"]["completed"] == 64
    w = run_r["workers"]
    assert w["count"] == 2 and not w["crashed"] and w["launcher"] == "RayLauncher"
    assert w["ray"]["nodes"] == 1 and set(w["ray"]["workers"]) == {"0", "1"}
    for info in w["ray"]["workers"].values():
        clock = info["clock"]
        assert clock["end"] is not None and clock["start"]["pings"] >= 8
        # one host shares CLOCK_MONOTONIC: the true offset is 0, so the estimate must be
        # within its own bound of it (the bound is what the NTP exchange guarantees)
        assert abs(clock["offset_ms"]) <= clock["uncertainty_ms"] + 1e-6
        assert abs(clock["end"]["offset_s"]) * 1e3 <= clock["end"]["uncertainty_ms"] + 1e-6
        assert 0 < clock["uncertainty_ms"] < 1000
    # the same numbers as two local worker processes, within noise (a busy machine: loose)
    sl, sr = run_l["summary"], run_r["summary"]
    assert sl["completed"] == sr["completed"] == 64
    assert sr["median_ttft_ms"] >= 60 and sl["median_ttft_ms"] >= 60
    # the mock (in this process) paces 10 ms gaps; k is how much slower it ran than that in
    # the slower of the two runs (CI at load 6-17: medians 82 and 108 ms apart by 26), and
    # the noise allowed grows with it
    k = max(1.0, sl["median_itl_ms"] / 10.0, sr["median_itl_ms"] / 10.0)
    assert abs(sr["median_ttft_ms"] - sl["median_ttft_ms"]) < 25 * k, (k, sl, sr)
    assert abs(sr["median_itl_ms"] - sl["median_itl_ms"]) < 5 * k, (k, sl, sr)
    assert sum(r["output_tokens"] for r in remote) == sum(r["output_tokens"] for r in local)


def test_a_ray_address_nobody_answers_is_one_line_and_exit_3(tmp_path):
    port = free_port()
    p = llmbench("run", "--url", "http://127.0.0.1:9/v1", "--model", "m", "--out",
                 str(tmp_path), "--ray", f"127.0.0.1:{port}", timeout=120, env=RAY_ENV)
    assert p.returncode == 3, p.stderr
    assert p.stderr.startswith(f"error: --ray 127.0.0.1:{port}: no Ray head answers there")
    assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr


def test_a_port_that_is_no_ray_head_gives_up_in_one_line_and_exit_3(mock_factory, tmp_path):
    m = mock_factory()                     # accepts TCP, speaks HTTP: ray.init would wait minutes
    port = int(m.url.rsplit(":", 1)[1])
    p = llmbench("run", "--url", m.url + "/v1", "--model", "mock", "--out", str(tmp_path),
                 "--ray", f"127.0.0.1:{port}", timeout=120,
                 env={**RAY_ENV, "LLMBENCH_RAY_JOIN_S": "7"})
    # 7 s: past the 5 s after which Ray's C++ client warns "Failed to connect to GCS" on
    # stderr (and every second after); llmbench's one line is all that shows
    assert p.returncode == 3, p.stderr
    assert p.stderr.strip() == (f"error: --ray 127.0.0.1:{port}: no Ray head answered within "
                                "7 s (is it the head's GCS port, 6379 unless --port was given?)")
    assert not any(tmp_path.iterdir())     # nothing was started


def test_bad_ray_values_and_missing_ray_are_one_line_and_exit_2(tmp_path):
    from llmbench.workers.ray_launcher import parse_address
    assert parse_address(" AUTO ") == "auto" and parse_address("head:6379") == "head:6379"
    for value, says in (("nonsense", "expected auto or the head's HOST:PORT"),
                        ("head:99999", "expected auto or the head's HOST:PORT"),
                        ("ray://head:10001", "Ray Client (ray://) is not supported")):
        with pytest.raises(ValueError, match=re.escape(says)):
            parse_address(value)
    p = llmbench("run", "--model", "m", "--ray", "nonsense", timeout=60)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert p.stderr.startswith("error: --ray 'nonsense': expected auto or the head's HOST:PORT")
    # Ray not installed (blocked in this child): the install hint, before anything starts
    code = ("import sys; sys.modules['ray'] = None; sys.argv = ['llmbench'] + sys.argv[1:]; "
            "from llmbench.cli.app import main; main()")
    p = subprocess.run([sys.executable, "-c", code, "run", "--model", "m", "--ray", "auto",
                        "--out", str(tmp_path)], capture_output=True, text=True, timeout=60,
                       env=ENV, cwd=ROOT)
    assert p.returncode == 2
    assert p.stderr.strip() == "error: --ray needs Ray: pip install 'llmbench[ray]'"


def test_the_actors_mailboxes_keep_order_and_batch_without_ray():
    """The actor's message plumbing as plain asyncio (no cluster): calls that overtake each
    other are put back in order; a poll returns everything queued, and says when it is over."""
    from llmbench.workers.ray_launcher import WorkerActor, _ActorChannel

    async def main() -> None:
        a = WorkerActor()
        await a.deliver(1, {"type": "b"})
        await a.deliver(0, {"type": "a"})
        await a.deliver(2, None)
        ch = _ActorChannel(a)
        assert [await ch.recv(), await ch.recv(), await ch.recv()] == \
            [{"type": "a"}, {"type": "b"}, None]
        t = time.perf_counter()
        assert await a.poll(0.05) == ([], False)          # nothing: waits, then empty
        assert time.perf_counter() - t >= 0.04
        for i in range(3):
            ch.send({"type": "records", "i": i})
        msgs, over = await a.poll(5.0)                      # at once, all three
        assert [m["i"] for m in msgs] == [0, 1, 2] and not over

        async def entry(spec, channel) -> None:
            channel.send({"type": "done"})
        await a.run(None, entry)
        assert await a.poll(5.0) == ([{"type": "done"}], True)
    asyncio.run(main())
