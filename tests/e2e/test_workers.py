"""--workers N: the plan split over worker processes (real processes, the mock on loopback).

What must not change with workers: how many requests, the open-loop schedule, the ramp's
verdict, a session's turns in order, the reply token counts; and what each record says (its
worker). What workers add: a stop that reaches every worker (partial, marked run.json), a dead
worker named and the run failed (exit 4), the coordinator's own loop watched, `auto` adding a
worker as a ramp grows. Each CLI test spawns real processes: few requests, short holds.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from llmbench.load import arrivals
from llmbench.load.monitor import COORDINATOR, MonitorSample, busy
from llmbench.records.record import Record
from llmbench.workers.coordinator import counter_spec
from llmbench.workers import plan
from llmbench.workers.plan import auto_workers, cores, split_run
from llmbench.load.shapes import ClosedLoop, OpenLoop
from llmbench.workload import Conversation, Turn
from tests.helpers import ROOT
from mock_server import MockConfig, MockServer
from tests.helpers import ENV, llmbench, only_run

SMALL = ["--prompt-tokens", "10", "--output-tokens", "8"]
# Every assertion below holds on a busy machine: no tight timing, few requests, short holds.


@pytest.fixture(scope="module")
def quick_mock():
    """One fast mock for the tests that only need replies (3 tokens per event, so a reply's
    token events are not its token count)."""
    m = MockServer(MockConfig(ttft_ms=5, itl_ms=1, chunk_tokens=3))
    m.__enter__()
    yield m
    m.__exit__(None, None, None)


def _records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "requests.jsonl").read_text().splitlines()]


def _run(m, out: Path, *args: str, env: dict | None = None):
    p = llmbench("run", "--url", m.url + "/v1", "--model", "mock", "--out", str(out), *SMALL,
                 *args, timeout=180, env=env)
    assert p.returncode == 0, p.stderr
    d = only_run(out)
    return d, _records(d), json.loads((d / "run.json").read_text())


def test_closed_loop_with_two_workers_sends_the_same_requests_and_counts_the_same_tokens(
        quick_mock, tmp_path):
    # Replies without usage (asked so) are counted by the client: --tokenizer server counts
    # them with its local tokenizer in one process, and so must every worker (the same
    # counter, rebuilt there), not by token events (3 tokens each here). HF_HUB_OFFLINE: the
    # local counter comes from the caches only, nothing downloads.
    no_usage = ["--concurrency", "4", "--requests", "12", "--tokenizer", "server",
                "--extra-body", '{"stream_options": {"include_usage": false}}']
    env = {"HF_HUB_OFFLINE": "1"}
    _, one, run1 = _run(quick_mock, tmp_path / "one", *no_usage, env=env)
    _, two, run2 = _run(quick_mock, tmp_path / "two", *no_usage, "--workers", "2", env=env)
    assert len(one) == len(two) == 12
    assert all("worker" not in r for r in one)            # one process: the log as before
    assert "workers" not in run1
    assert {r["worker"] for r in two} == {0, 1} and all(r["ok"] for r in two)
    assert len({r["request_id"] for r in two}) == 12
    assert run2["workers"]["count"] == 2 and not run2["workers"]["crashed"]
    assert run2["summary"]["completed"] == 12
    # 8 one-word tokens per reply in 3 events: counted as tokens, the same in both runs
    for recs in (one, two):
        assert all(r["output_tokens_source"] == "tokenizer" for r in recs), recs[0]
        assert all(len(r["token_us"]) == 3 for r in recs)
    assert [r["output_tokens"] for r in one] == [r["output_tokens"] for r in two] == [8] * 12
    assert run2["workers"]["count_tokens"] in ("approx", "tiktoken:o200k_base")
    assert run2["summary"]["total_output_tokens"] == run1["summary"]["total_output_tokens"]


def test_open_loop_with_two_workers_keeps_the_schedule(quick_mock, tmp_path):
    # 48 requests at 25/s: a schedule of ~1.9 s, so the coordinator's once-a-second loop
    # sample is taken whatever the machine's speed (24 left it 0.2 s of margin)
    d, recs, run = _run(quick_mock, tmp_path, "--rate", "25", "--requests", "48", "--seed", "3",
                        "--workers", "2")
    assert len(recs) == 48 and {r["worker"] for r in recs} == {0, 1}
    # one schedule, computed once: the scheduled times are exactly its offsets from one t0
    sched = sorted(r["scheduled"] for r in recs)
    want = arrivals.schedule(48, 25.0, 1.0, 3, "gamma")
    assert all(abs((s - sched[0]) - (w - want[0])) < 1e-6 for s, w in zip(sched, want))
    # ... and dispatched on time by either worker (nearly all; a busy machine delays a few)
    late = [r["start"] - r["scheduled"] for r in recs]
    assert sum(x < 0.05 for x in late) >= 44, sorted(late)[-5:]
    # the coordinator watched its own loop too, and every sample names its process
    sources = {s["worker"] for s in run["monitor"]["samples"]}
    assert "coordinator" in sources and sources <= {"coordinator", 0, 1}


def test_ramp_auto_adds_a_worker_as_steps_grow_and_reaches_the_verdict_of_one(mock_factory,
                                                                             tmp_path):
    # One slot at ~100 ms per reply: 1 and 2 users hold a 250 ms TTFT p95 (TTFT ~40 and
    # ~140 ms), 4 users queue past it (~340 ms). With auto planning 2 streams per process
    # ($LLMBENCH_STREAMS_PER_PROCESS, for tests), steps 1 and 2 run in one worker and the
    # third step adds a second: its verdict must be judged over both workers' records.
    if cores() < 2:
        pytest.skip("auto runs at most one worker per core: this needs two")
    m = mock_factory(ttft_ms=40, itl_ms=5, parallel=1)
    common = ["ramp", "--url", m.url + "/v1", "--model", "mock", "--users", "1,2,4",
              "--ramp-in", "0.2s", "--hold", "1.5s", "--think", "0", "--turns", "1",
              "--prompt-tokens", "10", "--output-tokens", "12", "--threshold",
              "ttft.p95<=250ms", "--generator-lag-limit", "2000ms"]
    runs = {}
    for n in ("1", "auto"):
        out = tmp_path / n
        p = llmbench(*common, "--out", str(out), "--workers", n, timeout=180,
                     env={"LLMBENCH_STREAMS_PER_PROCESS": "2",
                          # plan for both cores, whatever else keeps this machine busy
                          "LLMBENCH_HOST_BUSY_CORES": "0"})
        assert p.returncode == 0, p.stdout + p.stderr
        runs[n] = json.loads((only_run(out) / "run.json").read_text())
        assert [s["held"] for s in runs[n]["steps"]] == [True, True, False], runs[n]["steps"]
        assert runs[n]["verdict"]["kind"] == "queuing"
    assert "workers" not in runs["1"]                     # 1: this process, as without it
    run = runs["auto"]
    assert run["workers"]["count"] == 2 and not run["workers"]["crashed"]
    recs = _records(only_run(tmp_path / "auto"))
    for s in run["steps"]:
        # each step judged over every record of its hold window, whichever worker sent it
        window = [r for r in recs if r["step"] == s["index"] and not r.get("warmup")
                  and s["hold_start"] <= r["start"] < s["hold_end"]]
        assert s["summary"]["requests"] == len(window) > 0, s["index"]
        workers = {r["worker"] for r in recs if r["step"] == s["index"]}
        assert workers == ({0} if s["index"] < 2 else {0, 1}), (s["index"], workers)
        if s["index"] == 2:
            assert {r["worker"] for r in window} == {0, 1}


def test_trace_with_two_workers_keeps_each_session_in_order_on_one_worker(quick_mock,
                                                                          tmp_path):
    m = quick_mock
    rows = []
    for s in range(6):
        for t in range(3):
            rows.append({"timestamp": s * 40 + t * 60, "session_id": f"s{s}",
                         "messages": [{"role": "user", "content": f"turn {t} of {s}"}],
                         "output_length": 4})
    rows.sort(key=lambda r: r["timestamp"])
    trace = tmp_path / "t.jsonl"
    trace.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    p = llmbench("run", "--url", m.url + "/v1", "--model", "mock", "--out", str(out),
                 "--trace", str(trace), "--workers", "2", timeout=180)
    assert p.returncode == 0, p.stderr
    recs = _records(only_run(out))
    assert len(recs) == 18 and {r["worker"] for r in recs} == {0, 1}
    by_conv: dict[str, list[dict]] = {}
    for r in recs:
        by_conv.setdefault(r["conversation"], []).append(r)
    assert len(by_conv) == 6
    for turns in by_conv.values():
        assert len({r["worker"] for r in turns}) == 1           # a session stays on one worker
        turns.sort(key=lambda r: r["turn"])
        assert [r["turn"] for r in turns] == [0, 1, 2]
        for a, b in zip(turns, turns[1:]):
            assert b["start"] >= a["done"] - 1e-6                # each after the previous reply


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


def test_probe_with_two_workers_drives_both_paths_from_both(mock_factory, tmp_path):
    m = mock_factory(ttft_ms=5, itl_ms=1)
    p = llmbench("probe", "--router", m.url + "/v1", "--direct", m.url + "/v1", "--model",
                 "mock", "--users", "2", "--slice", "1s", "--rounds", "1", "--turns", "1",
                 *SMALL, "--workers", "2", "--out", str(tmp_path), timeout=180)
    assert p.returncode == 0, p.stderr
    d = only_run(tmp_path)
    recs = _records(d)
    seen = {(r["path"], r["worker"]) for r in recs}
    assert seen == {("router", 0), ("router", 1), ("direct", 0), ("direct", 1)}
    run = json.loads((d / "run.json").read_text())
    assert run["status"] == "complete" and run["steps"][0]["router"]["requests"] > 0


def test_a_busy_coordinator_is_named():
    calm = [MonitorSample(float(t), 1.0, 2.0, 20.0, worker=w) for t in range(5) for w in (0, 1)]
    hot = [MonitorSample(float(t), 30.0, 40.0, 95.0, worker=COORDINATOR) for t in range(5)]
    b = busy(calm + hot)
    assert b["overloaded"] and b["worker"] == COORDINATOR and b["workers"] == 2
    assert b["overloaded_workers"] == [COORDINATOR]
    from llmbench.report.console import worker_names
    from llmbench.analysis.verdict import generator_sentence
    assert "(the coordinator of 2 workers)" in generator_sentence(b)
    assert worker_names(b) == " (the coordinator of 2 workers)"
    worker_hot = [MonitorSample(float(t), 30.0, 40.0, 95.0, worker=1) for t in range(5)]
    both = busy(hot + worker_hot + calm[::2])
    assert both["overloaded_workers"] == [COORDINATOR, 1]
    assert worker_names(both) == " (the coordinator and worker 1 of 2)"
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
