"""Session metrics (issue 35 part 2) from records: checked against a hand computation from a
requests.jsonl written here line by line, and the same numbers from the file as in memory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmbench.analysis.sessions import sessions_of, step_sessions, summarize_sessions
from llmbench.records.record import Record, load_records
from llmbench.records.store import RecordStore


def line(rid, sid, step, parent, kind, start, token_s, done, prompt, cached, out=8, ok=True,
         tool=True, gap=None, ramp_step=0, error=None):
    """One requests.jsonl line of an agent call: token events at ``token_s`` seconds after
    ``start`` (its TTFT is the first, its E2EL the last)."""
    d = {"request_id": rid, "scheduled": start, "start": start, "done": done, "ok": ok,
         "status": 200 if ok else 500, "stream": True, "user": 0, "conversation": sid,
         "turn": 0, "step": ramp_step, "prompt_tokens": prompt, "cached_tokens": cached,
         "output_tokens": out, "max_tokens": out, "session_id": sid, "step_id": step,
         "parent_step_id": parent, "step_kind": kind,
         "token_us": [round(t * 1e6) for t in token_s]}
    if token_s:
        d["first_token"], d["end"] = start + token_s[0], start + token_s[-1]
    if tool and ok and token_s:
        d["first_tool"] = start + token_s[0]
    if gap is not None:
        d["tool_gap_ms"] = gap
    if error:
        d["error_kind"], d["error"] = error, "boom"
    return d


# Session A (complete): main calls 0 -> 1 -> 2 with a tool gap between each; call 0's reply
# starts a sub-agent (0.0/0, 0.0/1) that runs while the main agent's tool runs.
#   0:     [10.0, 10.5]  TTFT 0.2  prompt 1000 cached 0
#   0.0/0: [10.5, 10.8]  TTFT 0.1  prompt 300  cached 0      (sub-agent, overlaps the gap)
#   0.0/1: [11.0, 11.3]  TTFT 0.1  prompt 400  cached 288    (after its own 0.2 s gap)
#   1:     [11.5, 12.5]  TTFT 0.6  prompt 1200 cached 992    answered in TEXT (no tool call)
#   2:     [13.0, 13.4]  TTFT 0.1  prompt 1500 cached 1200   final answer
# duration 13.4 - 10.0 = 3.4 s; model time = union [10.0, 10.8] + [11.0, 11.3] + [11.5, 12.5]
# + [13.0, 13.4] = 0.8 + 0.3 + 1.0 + 0.4 = 2.5 s; tool = 0.9 s; calls 5; call steps that
# answered: 0 (call), 0.0/0 (call), 1 (call) -> 3, of which 1 in text; prompt 4400, cached 2480,
# prefilled 1920 over 5 calls = 384 a call; context (largest prompt) 1500; slowest call: 1
# (E2EL 1.0 s).
# Session B (complete): 0 [20.0, 20.3], 1 [20.8, 21.6] final; prompt 500 + 900, cached 0 + 496.
# duration 1.6, model 1.1, tool 0.5; slowest call 1 (0.8 s).
# Session C (failed): 0 [30.0, 30.2] ok, 1 [30.5, 30.6] HTTP 500.
ROWS = [
    line("r-1", "A", "0", None, "call", 10.0, [0.2, 0.5], 10.5, 1000, 0),
    line("r-2", "A", "0.0/0", "0", "call", 10.5, [0.1, 0.3], 10.8, 300, 0),
    line("r-3", "A", "0.0/1", "0.0/0", "answer", 11.0, [0.1, 0.3], 11.3, 400, 288, gap=200.0),
    line("r-4", "A", "1", "0", "call", 11.5, [0.6, 1.0], 12.5, 1200, 992, tool=False, gap=1000.0),
    line("r-5", "A", "2", "1", "final", 13.0, [0.1, 0.4], 13.4, 1500, 1200, gap=500.0),
    line("r-6", "B", "0", None, "call", 20.0, [0.1, 0.3], 20.3, 500, 0, ramp_step=1),
    line("r-7", "B", "1", "0", "final", 20.8, [0.2, 0.8], 21.6, 900, 496, gap=500.0,
         ramp_step=1),
    line("r-8", "C", "0", None, "call", 30.0, [0.1, 0.2], 30.2, 200, 0, ramp_step=1),
    line("r-9", "C", "1", "0", "call", 30.5, [], 30.6, 250, None, ok=False, gap=300.0,
         ramp_step=1, error="http_status"),
    # a request of no session (a chat user beside the agents) is not in any session
    {"request_id": "r-10", "scheduled": 11.0, "start": 11.0, "done": 11.2, "ok": True,
     "status": 200, "stream": True, "step": 0, "prompt_tokens": 50, "output_tokens": 4,
     "token_us": [100000, 200000]},
]


@pytest.fixture
def log(tmp_path: Path) -> Path:
    p = tmp_path / "requests.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return p


def test_each_session_matches_the_hand_computation(log):
    by = {s.session_id: s for s in sessions_of(load_records(log))}
    assert set(by) == {"A", "B", "C"}
    a = by["A"]
    assert a.complete and not a.failed and a.steps == 5
    assert a.duration_s == pytest.approx(3.4) and a.model_s == pytest.approx(2.5)
    assert a.tool_s == pytest.approx(0.9)
    assert (a.prompt_tokens, a.cached_tokens, a.prefilled_tokens) == (4400, 2480, 1920)
    assert a.context_tokens == 1500 and (a.call_steps, a.text_replies) == (3, 1)
    assert a.slowest_step == "1" and a.slowest_e2el_s == pytest.approx(1.0)
    b, c = by["B"], by["C"]
    assert b.complete and b.duration_s == pytest.approx(1.6) and b.model_s == pytest.approx(1.1)
    assert c.failed and not c.complete and c.steps == 2


def test_the_summary_over_sessions_matches_too(log):
    s = summarize_sessions(load_records(log))
    assert (s.started, s.completed, s.failed, s.cut_short) == (3, 2, 1, 0)
    # percentiles over the completed sessions only: durations 3.4 and 1.6 s
    assert s.duration.n == 2 and s.duration.median == pytest.approx(2500.0)
    assert s.duration.max == pytest.approx(3400.0) and s.duration.p95 == pytest.approx(3310.0)
    assert s.model.mean == pytest.approx((2500 + 1100) / 2)
    assert s.tool.mean == pytest.approx((900 + 500) / 2)
    assert s.steps.median == pytest.approx(3.5)                    # 5 and 2 calls
    # the calls' TTFT of every session (successful calls): 0.2 0.1 0.1 0.6 0.1 0.1 0.2 0.1
    assert s.step_ttft.n == 8 and s.step_ttft.max == pytest.approx(600.0)
    assert s.step_ttft.median == pytest.approx(100.0)
    # cached / prompt over the calls that said: A 2480/4400, B 496/1400, C 0/200
    assert s.cached_tokens == 2480 + 496 and s.prompt_tokens == 4400 + 1400 + 200
    assert s.cached_share == pytest.approx(2976 / 6000)
    assert s.prefilled_per_call == pytest.approx((6000 - 2976) / 8)
    # call steps answered: A 3 (one in text), B 1, C 1 (its failed call is not answered)
    assert s.call_steps == 5 and s.text_replies == 1 and s.text_reply_share == 0.2
    assert s.context_tokens == pytest.approx((1500 + 900) / 2)
    # 2 completed sessions over the window 10.0 .. 30.6 s
    assert s.sessions_per_min == pytest.approx(2 / (20.6 / 60))
    assert s.slowest.session_id == "A" and s.slowest.step_id == "1"


def test_from_the_file_and_from_memory_alike(log):
    recs = load_records(log)
    store = RecordStore.of(recs)
    assert summarize_sessions(store) == summarize_sessions(recs)
    assert summarize_sessions([Record.from_json(r) for r in ROWS]) == summarize_sessions(recs)


def test_a_steps_sessions_are_those_that_started_in_its_hold(log):
    recs = load_records(log)
    s0 = step_sessions(recs, 0, 9.0, 12.0)
    assert s0.started == 1 and s0.completed == 1 and s0.sessions_per_min == pytest.approx(20.0)
    s1 = step_sessions(recs, 1, 19.0, 31.0)
    assert (s1.started, s1.completed, s1.failed) == (2, 1, 1)
    assert step_sessions(recs, 1, 25.0, 31.0).completed == 0         # B started before it
    assert step_sessions(recs, 2, 0.0, 99.0) is None
    assert summarize_sessions([r for r in recs if r.session_id is None]) is None


def test_a_session_joined_mid_way_counts_its_calls_not_its_time(log, tmp_path):
    """--join spread: a ramp's agent that came in at call 3 of its session (its first record's
    turn is 3; the calls before were synthetic history). Its calls are the sessions' calls; its
    short time is not a whole session's: not started, completed or in the percentiles."""
    d1 = line("r-11", "D", "3", "2", "call", 40.0, [0.3, 0.4], 40.4, 2000, 0)
    d2 = line("r-12", "D", "4", "3", "final", 40.6, [0.2, 0.3], 40.9, 2100, 1900, gap=200.0)
    d1["turn"], d2["turn"] = 3, 4
    p = tmp_path / "joined.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in ROWS + [d1, d2]))
    recs = load_records(p)
    by = {s.session_id: s for s in sessions_of(recs)}
    assert by["D"].joined and by["D"].complete and not any(by[k].joined for k in "ABC")
    base, s = summarize_sessions(load_records(log)), summarize_sessions(recs)
    assert (s.started, s.completed, s.failed, s.joined) == (3, 2, 1, 1)
    assert s.duration == base.duration and s.steps == base.steps
    assert s.sessions_per_min == pytest.approx(2 / (40.9 - 10.0) * 60)
    # its two calls are the sessions': TTFT, prompt and cached tokens
    assert s.calls == base.calls + 2 and s.step_ttft.n == base.step_ttft.n + 2
    assert s.prompt_tokens == base.prompt_tokens + 4100
    assert s.cached_tokens == base.cached_tokens + 1900
