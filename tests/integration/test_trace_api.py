"""From tests/e2e/test_trace.py, the replays whose arrivals and folder are the point, not the
command line's output: run in this process through the API (llmbench.run --trace)."""

import numpy as np

import llmbench
from tests.helpers.api import run_exit_code
from tests.helpers.trace_server import ArrivalServer, run_json, write_jsonl


def test_trace_speed_2_halves_the_gaps(tmp_path):
    rows = [{"timestamp": i * 100, "input_length": 20, "output_length": 2} for i in range(20)]
    trace = write_jsonl(tmp_path / "t.jsonl", rows)
    with ArrivalServer() as s:
        r = llmbench.run(url=s.url + "/v1", model="m", trace=trace, trace_speed=2,
                         out=tmp_path / "out")
        got = s.trace_requests()
    assert run_exit_code(r) == 0
    gaps_ms = np.diff([t for t, _ in got]) * 1000
    assert len(gaps_ms) == 19
    assert abs(float(np.median(gaps_ms)) - 50.0) < 5.0, gaps_ms
    assert abs((got[-1][0] - got[0][0]) - 0.95) < 0.05
    assert run_json(tmp_path / "out")["trace"]["speed"] == 2.0


def test_session_turns_follow_the_previous_reply_with_its_text(tmp_path):
    trace = write_jsonl(tmp_path / "s.jsonl", [
        {"timestamp": 0, "session_id": "a", "messages": [{"role": "user", "content": "first"}]},
        {"timestamp": 50, "session_id": "a", "messages": [{"role": "user", "content": "second"}]}])
    with ArrivalServer(delay_s=0.3) as s:
        r = llmbench.run(url=s.url + "/v1", model="m", trace=trace, out=tmp_path / "out")
        got = s.trace_requests()
    assert run_exit_code(r) == 0
    salt = run_json(tmp_path / "out")["workload"]["salt"]["text"] + " "   # first in the session
    assert [b["messages"][-1]["content"] for _, b in got] == [salt + "first", "second"]
    # due at 50 ms, but sent only after the 300 ms reply, with that reply as history
    assert got[1][0] - got[0][0] >= 0.29
    assert [m["content"] for m in got[1][1]["messages"]] == [salt + "first", "ok", "second"]
