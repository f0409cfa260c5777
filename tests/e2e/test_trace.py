"""run --trace: requests arrive at a loopback server on the trace's schedule, with its lengths."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.helpers import ROOT
from tests.helpers.trace_server import ArrivalServer, run_json, write_jsonl
from llmbench.workload.files import DatasetError
from llmbench.workload.tokenizer import approx_tokenizer
from llmbench.workload.traces import load_trace

ENV = {**os.environ, "PYTHONPATH": str(ROOT), "LLMBENCH_TOKENIZER": "approx"}


def llmbench(*args, timeout=180):
    return subprocess.run([sys.executable, "-m", "llmbench.cli", *args], capture_output=True,
                          text=True, timeout=timeout, env=ENV, cwd=ROOT)


def mooncake_rows(n: int, gap_ms: float) -> list[dict]:
    # every request shares block 1; pairs share block 2+i//2: the prefix cache's view of a trace
    return [{"timestamp": round(i * gap_ms, 3), "input_length": 700 + (i % 5) * 50,
             "output_length": 3 + i % 4, "hash_ids": [1, 2 + i // 2]} for i in range(n)]


def test_replay_at_50_per_s_arrives_on_schedule_with_the_trace_lengths(tmp_path):
    rows = mooncake_rows(150, 20.0)                 # 50 requests/s for 3 s
    trace = write_jsonl(tmp_path / "t.jsonl", rows)
    with ArrivalServer() as s:
        r = llmbench("run", "--url", s.url + "/v1", "--model", "m", "--trace", str(trace),
                     "--out", str(tmp_path / "out"))
        got = s.trace_requests()
    assert r.returncode == 0, r.stderr
    assert len(got) == 150
    tok = approx_tokenizer()
    # the lengths as a multiset: two requests due 20 ms apart may arrive in either order on
    # a busy machine (each its own connection), so pairing by arrival would compare neighbours
    sent = sorted((body["max_tokens"], tok.count(body["messages"][-1]["content"]))
                  for _, body in got)
    assert sent == sorted((row["output_length"], row["input_length"]) for row in rows)
    arr = np.sort(np.array([t for t, _ in got]))
    due = np.array([row["timestamp"] / 1000 for row in rows])
    off = arr - due          # the schedule placed where most requests arrived
    err_ms = np.abs(off - np.median(off)) * 1000
    p90 = float(np.percentile(err_ms, 90))
    run = run_json(tmp_path / "out")
    lag = run["trace"]["dispatch_lag"]
    assert lag["requests"] == 150 and lag["p50_ms"] is not None
    # the figure is 2 ms p99 on an idle machine (scripts/bench_trace_replay.py: 1.3 and
    # 1.5 ms). Here the test's own server thread shares a busy machine, so one or two of 150
    # arrivals can be tens of ms late after a punctual dispatch (seen in CI: 53 ms at p99 with a
    # 2 ms dispatch max). What must hold: nine in ten arrive within llmbench's reported lag plus
    # the loopback hop; a dispatcher off by one slot would put most of them 20 ms out.
    assert p90 <= lag["max_ms"] + 10.0, (p90, lag)
    assert float(np.median(err_ms)) < 5.0, err_ms
    assert "Dispatch lag vs trace: p50" in r.stdout
    assert run["config"]["load"]["trace"]["format"] == "mooncake"


def test_a_replay_that_cannot_keep_up_reports_its_lag(tmp_path):
    # Every request due at the same instant: a rate no machine keeps up with, since the k-th
    # start waits for the k-1 before it. How late that makes the p99 depends on the machine's
    # speed (a fixed 5,000/s was once kept up with on a quiet machine: issue 29), so this
    # checks the relation between the planned and the achieved schedule, and that the report
    # says what the records say; test_dispatch_lag_verdict checks the verdict on fixed numbers.
    n = 1500
    rows = [{"timestamp": 0, "input_length": 10, "output_length": 1} for _ in range(n)]
    trace = write_jsonl(tmp_path / "t.jsonl", rows)
    with ArrivalServer() as s:
        r = llmbench("run", "--url", s.url + "/v1", "--model", "m", "--trace", str(trace),
                     "--out", str(tmp_path / "out"))
        got = s.trace_requests()
    assert r.returncode == 0, r.stderr
    assert len(got) == n
    folder = next((tmp_path / "out").iterdir())
    recs = [json.loads(line) for line in (folder / "requests.jsonl").read_text().splitlines()]
    recs = [x for x in recs if not x.get("warmup")]
    assert len(recs) == n and len({x["scheduled"] for x in recs}) == 1   # one planned instant
    starts = sorted(x["start"] for x in recs)
    lags_ms = [(t - recs[0]["scheduled"]) * 1000.0 for t in starts]
    assert lags_ms[0] >= 0 and lags_ms[-1] > lags_ms[0]     # achieved: one after another
    lag = run_json(tmp_path / "out")["trace"]["dispatch_lag"]
    assert lag["requests"] == n
    assert lag["max_ms"] == pytest.approx(lags_ms[-1], abs=0.002)
    assert lag["p99_ms"] == pytest.approx(float(np.percentile(lags_ms, 99)), abs=0.002)
    assert lag["p50_ms"] == pytest.approx(float(np.percentile(lags_ms, 50)), abs=0.002)
    assert lag["behind"] == (lag["p99_ms"] > lag["behind_threshold_ms"]), lag
    assert ("could not keep up with the trace" in r.stdout) == lag["behind"], r.stdout
    assert f"p99 {lag['p99_ms']:.2f} ms" in r.stdout


def test_dispatch_lag_verdict():
    from types import SimpleNamespace as R

    from llmbench.analysis.finish import BEHIND_P99_MS, dispatch_lag
    from llmbench.report.outcome import trace_lines as console_lines
    trace = {"format": "plain", "path": "t.jsonl", "requests": 100, "span_s": 1.0}

    def recs(lags_ms):
        return [R(warmup=False, start=10.0 + ms / 1000, scheduled=10.0) for ms in lags_ms]
    late = dispatch_lag(recs([i * 0.3 for i in range(100)]))       # 0 .. 29.7 ms late
    assert late["behind"] is True and late["p99_ms"] > BEHIND_P99_MS
    assert any("could not keep up" in line for line in console_lines(trace, late, 1.0))
    on_time = dispatch_lag(recs([i * 0.05 for i in range(100)]))   # 0 .. 4.95 ms
    assert on_time["behind"] is False
    assert not any("could not keep up" in line for line in console_lines(trace, on_time, 1.0))
    # early starts are not negative lag, and warm-up requests are not counted
    early = dispatch_lag(recs([-5.0] * 10) + [R(warmup=True, start=20.0, scheduled=10.0)])
    assert early["requests"] == 10 and early["max_ms"] == 0.0 and early["behind"] is False


def test_mooncake_shared_hash_ids_give_identical_prefixes(tmp_path):
    trace = write_jsonl(tmp_path / "m.jsonl", [
        {"timestamp": 0, "input_length": 1300, "output_length": 5, "hash_ids": [7, 8, 9]},
        {"timestamp": 10, "input_length": 1100, "output_length": 5, "hash_ids": [7, 8, 10]},
        {"timestamp": 20, "input_length": 600, "output_length": 5, "hash_ids": [7, 11]},
        {"timestamp": 30, "input_length": 600, "output_length": 5, "hash_ids": [12, 13]}])
    tok = approx_tokenizer()
    tr = load_trace(str(trace), tok)
    ids = [tok.encode(i.conv.turns[0].user) for i in tr.items]
    assert [len(x) for x in ids] == [1300, 1100, 600, 600]
    assert ids[0][:1024] == ids[1][:1024] and ids[0][1024:1100] != ids[1][1024:1100]
    assert ids[0][:512] == ids[2][:512] and ids[0][512:600] != ids[2][512:600]
    assert ids[0][:512] != ids[3][:512]               # no shared block
    assert tr.format == "mooncake" and tr.blocks == 7


def test_sample_traces_of_each_format_load(tmp_path):
    out = tmp_path / "ds"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "make_trace_samples.py"), "--out",
                    str(out)], check=True, capture_output=True)
    for name in ("trace_mooncake_sample.jsonl", "trace_azure_sample.csv",
                 "trace_sessions_sample.jsonl"):
        # the script writes what is committed in datasets/
        assert (out / name).read_bytes() == (ROOT / "datasets" / name).read_bytes()
    tok = approx_tokenizer()
    az = load_trace(str(out / "trace_azure_sample.csv"), tok)
    assert az.format == "azure" and az.requests == 40
    lines = (out / "trace_azure_sample.csv").read_text().splitlines()[1:]
    first = lines[0].split(",")
    assert az.items[0].conv.turns[0].prompt_tokens == int(first[1])
    assert az.items[0].conv.turns[0].max_tokens == int(first[2])
    assert 5 < az.span_s < 20
    ses = load_trace(str(out / "trace_sessions_sample.jsonl"), tok)
    multi = [i for i in ses.items if len(i.conv.turns) > 1]
    assert multi and all(list(i.due_s) == sorted(i.due_s) for i in multi)
    win = load_trace(str(out / "trace_azure_sample.csv"), tok, window_s=(2.0, 5.0))
    assert 0 < win.requests < 40 and all(0 <= i.offset_s < 3.0 for i in win.items)


def test_bad_trace_line_is_one_line_with_file_and_line_exit_2(tmp_path):
    trace = tmp_path / "bad.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 5, "output_length": 2}\n'
                     '{"timestamp": 10, "input_length": "many"}\n')
    r = llmbench("run", "--url", "http://127.0.0.1:9/v1", "--model", "m", "--trace", str(trace))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{trace}:2" in lines[0] and "input_length" in lines[0], r.stderr
    try:
        load_trace(str(trace), approx_tokenizer())
    except DatasetError as exc:
        assert f"{trace}:2" in str(exc)
    csv = tmp_path / "bad.csv"
    csv.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.1,5,x\n")
    r = llmbench("run", "--url", "http://127.0.0.1:9/v1", "--model", "m", "--trace", str(csv))
    assert r.returncode == 2 and f"{csv}:2" in r.stderr
    r = llmbench("run", "--trace", str(csv), "--rate", "5")
    assert r.returncode == 2 and "--trace" in r.stderr


def test_absurd_lengths_are_bad_lines_not_a_hang(tmp_path):
    for i, row in enumerate([{"timestamp": 0, "input_length": 10**12, "output_length": 1},
                             {"timestamp": 0, "input_length": 5, "output_length": 1e400},
                             {"timestamp": "x", "input_length": 5}]):
        trace = write_jsonl(tmp_path / f"b{i}.jsonl", [row])
        try:
            load_trace(str(trace), approx_tokenizer())
        except DatasetError as exc:
            assert f"b{i}.jsonl:1" in str(exc)
        else:
            raise AssertionError(row)
