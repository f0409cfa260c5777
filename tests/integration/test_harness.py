"""One harness for every command: probe gets what run and ramp have (the generator monitor, the
interrupt grace period, the tokenizer, the --timeout-* options, connection resends, a start time
stamped at the start), and the live line, the timeline and the report agree on "TTFT p95"."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import urllib.request

from tests.helpers import ROOT
from tests.helpers.keepalive_server import KeepAliveServer
from tests.helpers import ENV, only_run
import llmbench
from tests.helpers.api import probe as probe_api
from tests.helpers import probe_cli as probe

from llmbench.analysis import timeline
from llmbench.load.harness import LiveView
from llmbench.load.session import Counters
from llmbench.analysis.metrics import summarize
from llmbench.records.record import Record
from llmbench.report.console import fmt_ms
from llmbench.load.shapes import LiveState
from llmbench.analysis.stats import recent_p95


def _records(ttfts_s: list[float], t0: float = 100.0) -> list[Record]:
    out = []
    for i, ttft in enumerate(ttfts_s):
        start = t0 + 0.3 * i
        times = [start + ttft + 0.01 * k for k in range(4)]
        out.append(Record(f"r{i}", scheduled=start, start=start, token_times=times, ok=True,
                          status=200, output_tokens=4, first_token=times[0], end=times[-1],
                          done=times[-1] + 0.001))
    return out


def test_live_ttft_p95_is_the_reports_ttft_p95_for_the_same_records():
    # ten requests whose first tokens all fall in the live line's 10 s window; a nearest-rank
    # p95 (the live line's old definition) gives the largest, 1000 ms; the linear one 955 ms
    recs = _records([0.1 * k for k in range(1, 11)])
    now = max(r.done for r in recs)
    pairs = [(r.first_token, r.first_token - r.start) for r in recs]   # what Session keeps
    live = recent_p95(pairs, now)
    report = summarize(recs).ttft.p95
    assert live is not None and abs(live * 1000 - report) < 1e-9 and abs(report - 955) < 1e-6
    # the timeline's column (the report's chart) is the same number at the same moment
    rows = timeline.build(recs, now - 1.0, now)
    assert abs(rows[-1]["ttft_p95_recent_ms"] - report) < 1e-9
    # and the ramp's live line prints it
    from llmbench.report.outcome import ramp_live_line as _live_line
    line = _live_line("users", 3)(LiveView(Counters(), LiveState(), None, pairs, 0, now))
    assert f"TTFT p95 {fmt_ms(report)}" in line


def test_recent_ttfts_are_the_last_30_s_of_first_tokens_in_the_order_they_came():
    """Session.recent_ttft (two float arrays) keeps exactly what the deque of pairs it replaced
    kept: every pair appended since the oldest one still within RECENT_KEEP_S of the newest
    first token, out-of-order first tokens included, across its compactions."""
    import random
    from collections import deque
    from llmbench.load.session import RECENT_KEEP_S, RecentTTFT
    rng = random.Random(4)
    mine, ref = RecentTTFT(), deque()
    t = 1000.0
    for i in range(30000):
        t += rng.expovariate(500.0)                  # ~500 first tokens a second
        first = t - rng.uniform(0, 0.5)              # finishing order is not first-token order
        ttft = rng.uniform(0.01, 2.0)
        mine.add(first, ttft)
        ref.append((first, ttft))
        while ref and ref[0][0] < first - RECENT_KEEP_S:
            ref.popleft()
        if i % 997 == 0 or i > 29990:
            assert list(mine) == list(ref) and len(mine) == len(ref)
    assert len(mine.times) < 2 * len(ref) + 4097      # what fell out of the window is freed


def test_probe_steps_carry_the_generators_lag_and_cpu_and_start_time(mock_factory, tmp_path):
    m = mock_factory(ttft_ms=10, itl_ms=2, tokens=10)
    before = time.time()
    probe_api(m.url + "/v1", m.url + "/v1", tmp_path, users="1,2")    # in this process
    after = time.time()
    run = json.loads((only_run(tmp_path) / "run.json").read_text())
    for step in run["steps"]:
        mon = step["monitor"]
        assert mon["lag_p99_ms"] >= 0 and mon["cpu_pct"] > 0 and "overloaded" in mon
    # stamped when the load began, not when it ended: 2 steps x 2 rounds x 2 paths x 2 s later
    assert before <= run["started_at"] <= after - 8 * 2.0 * 0.9
    assert run["connection_resends"] == 0 and "output_length" in run


def test_probe_takes_the_request_timeouts(mock_factory, tmp_path):
    m = mock_factory(ttft_ms=3000, itl_ms=2, tokens=10)
    r = probe(m.url + "/v1", m.url + "/v1", tmp_path, "--users", "1",
              "--timeout-first-token", "0.5", "--timeout-total", "7", "--no-progress")
    # --no-progress: a busy machine's "building prompts" line is not the error's
    assert r.returncode == 3, r.stdout + r.stderr
    assert "--timeout-first-token" in r.stderr and "0.5 s" in r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    run = json.loads((only_run(tmp_path) / "run.json").read_text())
    assert run["status"] == "failed"


def test_probe_and_ramp_record_the_timeouts_they_were_given(mock_factory, tmp_path):
    # the options reach run.json: in this process, through the API (it raises where the CLI
    # fails; a ramp's thresholds, exit 99 on the command line, are no exception)
    m = mock_factory(ttft_ms=5, itl_ms=1, tokens=5)
    probe_api(m.url + "/v1", m.url + "/v1", tmp_path / "p", users="1", slice_s="0.5s", rounds=1,
              timeout_connect=4, timeout_total=33, timeout_idle=22, timeout_first_token=11)
    t = json.loads((only_run(tmp_path / "p") / "run.json").read_text())["config"]["timeouts"]
    assert (t["connect_s"], t["first_token_s"], t["idle_s"], t["total_s"]) == (4, 11, 22, 33)
    llmbench.ramp(url=m.url + "/v1", model="mock", users="1", ramp_in="0", hold="1s",
                  think="0", turns=1, prompt_tokens=5, output_tokens=5, timeout_connect=4,
                  timeout_total=33, generator_lag_limit="10s", out=tmp_path / "r")
    t = json.loads((only_run(tmp_path / "r") / "run.json").read_text())["config"]["timeouts"]
    assert (t["connect_s"], t["total_s"]) == (4, 33)


def test_probe_counts_replies_with_the_tokenizer_it_was_given(mock_factory, tmp_path):
    # four tokens per event and no usage in the stream: the events cannot count the reply (2
    # for 8 tokens); the server's finish_reason "length" says it was the 8 asked (issue 45),
    # else a tokenizer counts it
    m = mock_factory(ttft_ms=5, itl_ms=2, tokens=8, chunk_tokens=4)
    probe_api(m.url + "/v1", m.url + "/v1", tmp_path, users="1", slice_s="1s", rounds=1,
              output_tokens=8, tokenizer="approx",
              extra_body='{"stream_options": {"include_usage": false}}')
    recs = [json.loads(line) for line in
            (only_run(tmp_path) / "requests.jsonl").read_text().splitlines()]
    ok = [d for d in recs if d["ok"]]
    assert ok and all(d["output_tokens_source"] in ("length", "tokenizer") for d in ok)
    assert all(d["output_tokens"] > len(d["token_us"]) for d in ok)


def _running(url: str) -> float:
    text = urllib.request.urlopen(url + "/metrics", timeout=5).read().decode()
    m = re.search(r"^vllm:num_requests_running(?:\{[^}]*\})? ([0-9.]+)", text, re.M)
    return float(m.group(1)) if m else 0.0


def test_probe_interrupt_gives_in_flight_requests_a_grace_period_then_stops(mock_factory,
                                                                            tmp_path):
    # each reply takes about 60 s; Ctrl-C must not wait for it: 3 s of grace, then the
    # request is cancelled and recorded as interrupted, and the probe exits 130
    m = mock_factory(ttft_ms=5, itl_ms=600, tokens=100)
    p = subprocess.Popen([sys.executable, "-m", "llmbench.cli", "probe", "--router", m.url + "/v1",
                          "--direct", m.url + "/v1", "--model", "mock", "--users", "1",
                          "--slice", "60s", "--rounds", "1", "--prompt-tokens", "5",
                          "--output-tokens", "100", "--out", str(tmp_path)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
                         cwd=ROOT)
    deadline = time.time() + 60
    while time.time() < deadline and _running(m.url) < 1:
        time.sleep(0.2)
    time.sleep(0.5)
    sent = time.time()
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    took = time.time() - sent
    assert p.returncode == 130, err
    assert "finishing in-flight requests" in err
    assert took < 40        # the reply itself would have taken about a minute
    recs = [json.loads(line) for line in
            (only_run(tmp_path) / "requests.jsonl").read_text().splitlines()]
    assert any(d["error_kind"] == "interrupted" for d in recs)
    run = json.loads((only_run(tmp_path) / "run.json").read_text())
    assert run["status"] == "partial" and "PARTIAL RESULT" in out


def test_probe_counts_connection_resends(tmp_path):
    with KeepAliveServer(close_after_reply=True) as srv:
        r = probe(srv.url, srv.url, tmp_path, "--users", "2", "--slice", "1s", "--rounds", "1",
                  "--server-probe", "off", model="m")
    assert r.returncode == 0, r.stdout + r.stderr
    run = json.loads((only_run(tmp_path) / "run.json").read_text())
    assert run["connection_resends"] >= 1
    assert "sent again on a new connection" in r.stdout


def test_run_reads_back_every_schema_1_folder_unchanged():
    """Run is the one writer of run.json; what it reads back from the run folders already on
    disk (schema 1) it writes out again key for key, common keys first."""
    from llmbench.results.schema import Run
    folders = [p.parent for p in (ROOT / "results" / "examples").rglob("run.json")]
    assert folders
    for d in folders:
        data = json.loads((d / "run.json").read_text(encoding="utf-8"))
        again = Run.load(d).to_dict()
        assert again == data, d
        assert list(again)[:4] == ["schema_version", "kind", "status", "started_at"]


def test_the_probes_overhead_of_a_constant_shift_is_that_shift():
    from llmbench.analysis.router_ab import overhead
    # the probe's overhead of a constant +20 ms is +20 ms, its interval excludes zero
    r, d = _records([0.12] * 30), _records([0.10] * 30)
    o = overhead(r, d, "ttft_p50")
    assert abs(o.overhead_ms - 20.0) < 1e-6 and o.ci_ms[0] > 0 and o.significant
