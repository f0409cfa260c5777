"""--workers N: the plan split over worker processes (real processes, the mock on loopback).

What must not change with workers: how many requests, the open-loop schedule, the ramp's
verdict, a session's turns in order, the reply token counts; and what each record says (its
worker). What workers add: a stop that reaches every worker (partial, marked run.json), a dead
worker named and the run failed (exit 4), the coordinator's own loop watched, `auto` adding a
worker as a ramp grows. Each CLI test spawns real processes: few requests, short holds. The
runs whose records and numbers are the point, not the command line's, are in
tests/integration/test_workers_api.py (the coordinator in the test's process).
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path


from llmbench.load.monitor import COORDINATOR, MonitorSample, busy
from llmbench.records.record import Record
from llmbench.workers.coordinator import counter_spec
from llmbench.workers import plan
from llmbench.workers.plan import auto_workers, cores, split_run
from llmbench.load.shapes import ClosedLoop, OpenLoop
from llmbench.workload import Conversation, Turn
from tests.helpers import ROOT
from tests.helpers import ENV

SMALL = ["--prompt-tokens", "10", "--output-tokens", "8"]
# Every assertion below holds on a busy machine: no tight timing, few requests, short holds.


def _records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "requests.jsonl").read_text().splitlines()]


def _wait_for_records(path: Path, n: int, deadline_s: float = 60) -> None:
    deadline = time.time() + deadline_s
    while time.time() < deadline:
        try:
            if len(path.read_text().splitlines()) >= n:
                return
        except FileNotFoundError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"fewer than {n} records in {path} after {deadline_s} s")


def _start(m, out: Path, *args: str, command: str = "run") -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "llmbench.cli", command, "--url",
                             m.url + "/v1", "--model", "mock", "--out", str(out), *SMALL,
                             *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=ENV, cwd=ROOT)


def _run_dir(parent: Path) -> Path:
    deadline = time.time() + 60
    while time.time() < deadline:
        dirs = [d for d in parent.iterdir() if d.is_dir()] if parent.exists() else []
        if dirs:
            return dirs[0]
        time.sleep(0.1)
    raise AssertionError(f"no run folder in {parent}")


def test_ctrl_c_with_workers_writes_a_partial_marked_run(mock_factory, tmp_path):
    m = mock_factory(ttft_ms=20, itl_ms=5)
    p = _start(m, tmp_path, "--concurrency", "4", "--duration", "60s", "--workers", "2")
    try:
        out_dir = _run_dir(tmp_path)
        _wait_for_records(out_dir / "requests.jsonl", 10)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, err
    run = json.loads((out_dir / "run.json").read_text())
    assert run["status"] == "partial" and "PARTIAL RESULT" in out
    recs = _records(out_dir)
    assert {r["worker"] for r in recs} == {0, 1}
    assert run["summary"]["completed"] >= 10


def _worker_pids(parent: int) -> list[int]:
    """The coordinator's worker processes (spawned children running spawn_main)."""
    pids = []
    for task in Path(f"/proc/{parent}/task").iterdir():
        kids = (task / "children").read_text().split()
        for k in kids:
            cmd = Path(f"/proc/{k}/cmdline").read_bytes().replace(b"\0", b" ")
            if b"spawn_main" in cmd:
                pids.append(int(k))
    return sorted(pids)


def _kill_a_worker(p: subprocess.Popen, out_dir: Path, after_records: int) -> tuple[str, str]:
    try:
        _wait_for_records(out_dir / "requests.jsonl", after_records)
        pids = _worker_pids(p.pid)
        assert len(pids) == 2, pids
        os.kill(pids[1], signal.SIGKILL)
        return p.communicate(timeout=90)
    finally:
        if p.poll() is None:
            p.kill()


def _assert_named(err: str, out_dir: Path) -> tuple[dict, dict]:
    """The dead worker named in one line on stderr and in run.json; its records kept."""
    lines = [line for line in err.splitlines() if "crashed" in line]
    assert len(lines) == 1 and "killed by SIGKILL" in lines[0], err
    assert lines[0].startswith("error: worker ")
    run = json.loads((out_dir / "run.json").read_text())
    dead = run["workers"]["crashed"]
    assert len(dead) == 1 and f"worker {dead[0]['worker']} crashed" in lines[0]
    assert run["status"] == "partial"
    kept = [r for r in _records(out_dir) if r["worker"] == dead[0]["worker"]]
    assert len(kept) == dead[0]["records"] > 0           # what it sent before dying is kept
    return run, dead[0]


def test_a_run_that_loses_a_worker_names_it_keeps_its_records_and_fails(mock_factory,
                                                                       tmp_path):
    m = mock_factory(ttft_ms=20, itl_ms=5)
    p = _start(m, tmp_path, "--concurrency", "4", "--duration", "4s", "--workers", "2")
    out_dir = _run_dir(tmp_path)
    out, err = _kill_a_worker(p, out_dir, 10)
    run, dead = _assert_named(err, out_dir)
    # figures without a worker's share must never pass a gate: exit 4, and said so
    assert p.returncode == 4, out + err
    assert (f"PARTIAL RESULT: worker {dead['worker']} crashed (killed by SIGKILL); its share "
            "of the load stopped there, so the figures are incomplete (exit 4" in out), out


def test_a_ramp_that_loses_a_worker_says_its_figures_are_incomplete_and_fails(mock_factory,
                                                                             tmp_path):
    m = mock_factory(ttft_ms=20, itl_ms=5)
    # lenient thresholds: without the lost worker every step would hold (exit 0)
    p = _start(m, tmp_path, "--users", "4", "--ramp-in", "0.2s", "--hold", "2s", "--think",
               "0", "--turns", "1", "--threshold", "ttft.p95<=60s", "--generator-lag-limit",
               "2000ms", "--workers", "2", command="ramp")
    out_dir = _run_dir(tmp_path)
    out, err = _kill_a_worker(p, out_dir, 4)
    run, dead = _assert_named(err, out_dir)
    assert p.returncode == 4, out + err
    v = run["verdict"]
    assert v["incomplete"] is True and "INCOMPLETE: worker" in v["result"]
    assert "figures are incomplete" in out and "PARTIAL RESULT: worker" in out


# -- pieces, no processes --------------------------------------------------------------------
def _convs(n: int) -> list[Conversation]:
    return [Conversation(f"c{i}", (Turn("hi", 8),)) for i in range(n)]


def test_split_is_deterministic_and_covers_the_plan():
    shares = split_run(ClosedLoop(_convs(10), 5, requests=23), 2)
    assert [s.shape.uids for s in shares] == [(0, 2, 4), (1, 3)]
    assert sum(s.shape.requests for s in shares) == 23
    assert sorted(c.id for s in shares for c in s.shape.convs) == sorted(c.id for c in _convs(10))
    ol = OpenLoop(_convs(10), rate=10.0, requests=9, seed=1)
    shares = split_run(ol, 2)
    got = sorted(x for s in shares for x in s.shape.share)
    assert got == list(enumerate(ol.offsets()))
    assert len(split_run(ClosedLoop(_convs(3), 1, requests=5), 4)) == 1   # one user: one worker


def test_auto_uses_the_streams_and_at_most_the_cores():
    assert auto_workers(10, n_cores=8) == 1
    assert auto_workers(1000, n_cores=2) == 2
    assert auto_workers(1000, n_cores=64) > 2


def test_auto_leaves_the_busy_cores_and_one_for_the_server(monkeypatch):
    # given cores (a cluster's, a test's) are free unless said otherwise
    assert auto_workers(1000, n_cores=2, busy_cores=1.0) == 1
    assert auto_workers(1000, n_cores=8, busy_cores=2.5) == 5      # 5.5 cores free
    assert auto_workers(1000, n_cores=8, busy_cores=2.2) == 6      # a core 80 % free counts
    assert auto_workers(1000, n_cores=2, busy_cores=5.0) == 1      # never none
    # this host: what others keep busy, plus one core for the server and the coordinator
    monkeypatch.delenv("LLMBENCH_HOST_BUSY_CORES", raising=False)
    monkeypatch.setattr(plan, "cores", lambda: 2)
    monkeypatch.setattr(plan, "host_busy_cores", lambda *a: 0.0)
    assert auto_workers(1000) == 1                  # two cores, the server on one of them
    monkeypatch.setattr(plan, "cores", lambda: 8)
    assert auto_workers(1000) == 7
    monkeypatch.setattr(plan, "host_busy_cores", lambda *a: 3.0)
    assert auto_workers(1000) == 4
    assert auto_workers(10) == 1
    monkeypatch.setenv("LLMBENCH_HOST_BUSY_CORES", "0")
    assert auto_workers(1000) == 8
    monkeypatch.setenv("LLMBENCH_HOST_BUSY_CORES", "lots")
    assert auto_workers(1000) == 4                  # said once on stderr, then measured


def test_host_busy_cores_is_a_number_of_cores():
    from llmbench.workers.plan import host_busy_cores
    v = host_busy_cores(0.05)
    assert 0.0 <= v <= cores() + 0.5


def test_the_generator_check_names_a_busy_worker():
    calm = [MonitorSample(float(t), 1.0, 2.0, 20.0, worker=0) for t in range(5)]
    hot = [MonitorSample(float(t), 30.0, 40.0, 95.0, worker=1) for t in range(5)]
    b = busy(calm + hot)
    assert b["overloaded"] and b["worker"] == 1 and b["overloaded_workers"] == [1]
    from llmbench.analysis.verdict import generator_sentence
    assert "worker 1 of 2" in generator_sentence(b)
    assert not busy(calm)["overloaded"] and "worker" not in busy(calm[:2] and [
        MonitorSample(0.0, 1.0, 2.0, 20.0)])


def test_a_log_without_worker_ids_still_loads():
    d = Record("r-1", 1.0, start=1.0, done=2.0, ok=True).to_json()
    assert "worker" not in d and Record.from_json(d).worker is None
    assert Record.from_json({**d, "worker": 3}).worker == 3


def test_a_busy_coordinator_is_named():
    calm = [MonitorSample(float(t), 1.0, 2.0, 20.0, worker=w) for t in range(5) for w in (0, 1)]
    hot = [MonitorSample(float(t), 30.0, 40.0, 95.0, worker=COORDINATOR) for t in range(5)]
    b = busy(calm + hot)
    assert b["overloaded"] and b["worker"] == COORDINATOR and b["workers"] == 2
    assert b["overloaded_workers"] == [COORDINATOR]
    from llmbench.analysis.verdict import generator_sentence
    assert "(the coordinator of 2 workers)" in generator_sentence(b)
    worker_hot = [MonitorSample(float(t), 30.0, 40.0, 95.0, worker=1) for t in range(5)]
    both = busy(hot + worker_hot + calm[::2])
    assert both["overloaded_workers"] == [COORDINATOR, 1]
    assert "over its limits: the coordinator, 1" in generator_sentence(both)


def test_the_timeline_keeps_every_process_sample_and_names_the_worst():
    from llmbench.analysis import timeline
    t0 = 100.0
    recs = [Record("r-1", t0, start=t0, first_token=t0 + 0.1, end=t0 + 2.5, done=t0 + 2.5,
                   ok=True)]
    mon = [MonitorSample(t0 + 0.5, 3.0, 4.0, 30.0, worker=0),
           MonitorSample(t0 + 0.6, 25.0, 30.0, 50.0, worker=1),      # second 0's worst
           MonitorSample(t0 + 0.7, 2.0, 3.0, 60.0, worker=COORDINATOR),
           MonitorSample(t0 + 1.5, 1.0, 2.0, 95.0, worker=COORDINATOR),  # over its CPU limit
           MonitorSample(t0 + 1.6, 9.0, 9.5, 40.0, worker=0)]
    rows = timeline.build(recs, t0, t0 + 2.5, monitor=mon)
    assert rows[0]["lag_p99_ms"] == 25.0 and rows[0]["monitor_worker"] == 1
    assert rows[0]["monitor_by_worker"] == {"0": {"lag_p99_ms": 3.0, "cpu_pct": 30.0},
                                            "1": {"lag_p99_ms": 25.0, "cpu_pct": 50.0},
                                            "coordinator": {"lag_p99_ms": 2.0, "cpu_pct": 60.0}}
    assert rows[1]["monitor_worker"] == COORDINATOR and rows[1]["cpu_pct"] == 95.0
    # one process: the row as it always was
    one = timeline.build(recs, t0, t0 + 2.5, monitor=[MonitorSample(t0 + 0.5, 3.0, 4.0, 30.0)])
    assert one[0]["lag_p99_ms"] == 3.0 and "monitor_worker" not in one[0]


def test_workers_rebuild_the_counter_of_one_process(tmp_path):
    from llmbench.workload.tokenizer import Tokenizer, approx_tokenizer, from_tiktoken
    assert counter_spec(None) is None
    assert counter_spec(approx_tokenizer().count) == "approx"
    # --tokenizer server counts replies with its local tokenizer: so do the workers
    server = Tokenizer("server:m", len, str, server=object(), local=approx_tokenizer())
    assert counter_spec(server.count) == "approx"

    class Enc:
        name = "o200k_base"
        decode = str
    assert counter_spec(from_tiktoken(Enc(), "o200k_base").count) == "tiktoken:o200k_base"
    folder = Tokenizer("hf:tok", len, str, source=f"folder {tmp_path}")
    assert counter_spec(folder.count) == str(tmp_path)
    hub = Tokenizer("hf:Org/Model", len, str, source="Hugging Face cache /x/snapshots/abc")
    assert counter_spec(hub.count) == "Org/Model"
    assert counter_spec(len) is None                      # not a tokenizer: token events


def test_auto_capacity_can_be_set_for_a_machine_or_a_test(monkeypatch, capsys):
    monkeypatch.setenv("LLMBENCH_STREAMS_PER_PROCESS", "2")
    assert [auto_workers(n, n_cores=8) for n in (1, 2, 3, 4, 5)] == [1, 1, 2, 2, 3]
    monkeypatch.setenv("LLMBENCH_STREAMS_PER_PROCESS", "many")
    assert auto_workers(64, n_cores=8) == 1 and auto_workers(65, n_cores=8) == 2
    assert "LLMBENCH_STREAMS_PER_PROCESS='many'" in capsys.readouterr().err


def test_a_regenerated_workload_crosses_to_workers_as_a_recipe(monkeypatch):
    """--workers with a synthetic workload that is not held (more than LAZY_FROM
    conversations): each worker's share pickles as the generator's recipe (a few KB), not as
    its prompts, and unpickles to the very conversations of the unsplit workload."""
    import importlib
    import pickle
    from llmbench.workload import WorkloadSpec, build_workload, load_tokenizer
    syn = importlib.import_module("llmbench.workload.synthetic")
    monkeypatch.setattr(syn, "LAZY_FROM", 100)
    monkeypatch.setattr(syn.Regenerated, "BLOCK", 256)
    spec = WorkloadSpec(count=3000, tokenizer="approx", prompt_tokens=(40, 60),
                        output_tokens=(4, 9), turns=2, shared_prefix_tokens=5, prefixes=3)
    convs = build_workload(spec, load_tokenizer("approx")).conversations
    assert isinstance(convs, syn.Regenerated)
    shares = split_run(ClosedLoop(convs, concurrency=4, requests=3000), 2)
    blobs = [pickle.dumps(s) for s in shares]
    held = pickle.dumps(list(convs))
    assert blobs == [pickle.dumps(s) for s in shares]            # deterministic
    for blob in blobs:        # 12 generator states of ~3 KB; the prompts are ~1 MB
        assert len(blob) < 64_000 < len(held) / 10
    back = [pickle.loads(b).shape.convs for b in blobs]
    assert [len(b) for b in back] == [1500, 1500]
    for w, mine in enumerate(back):
        for i in (0, 1, 255, 700, 1499, -1):
            k = w + 2 * (i % 1500)
            assert mine[i] == convs[k]
    assert list(back[1])[::97] == [convs[k] for k in range(1, 3000, 2)][::97]


def test_a_large_batch_crosses_the_pipe_whole_on_the_chosen_event_loop():
    # uvloop makes a watched fd non-blocking; multiprocessing's recv then failed with EAGAIN
    # part way through a batch of records at 128 streams (megabytes), which read as a crash
    import asyncio
    import multiprocessing
    import threading
    from llmbench.load import eventloop
    from llmbench.workers.local import PipeEnd

    ours, theirs = multiprocessing.get_context("spawn").Pipe(duplex=True)
    batch = {"type": "records", "records": [{"request_id": f"r-{i}", "token_us": list(range(400))}
                                            for i in range(2000)]}

    async def main():
        end = PipeEnd(ours)
        got = asyncio.ensure_future(end.recv())
        await asyncio.sleep(0.05)                 # the reader is registered with the loop
        threading.Thread(target=theirs.send, args=(batch,), daemon=True).start()
        msg = await asyncio.wait_for(got, 60)
        assert not end.closed
        return msg

    msg = eventloop.run(main())
    assert msg is not None and len(msg["records"]) == 2000
    assert msg["records"][-1]["token_us"][-1] == 399
