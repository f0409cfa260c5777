"""``ramp --join spread`` with agents (``--workload agent``): agents come in the way chat users
do (one at a random time in each equal slice of the ramp-in: Crowd.join_times, the one path),
each at a random call of its session (load.shapes.user.mid_conversation's draw, the same as a
chat user's turn) with the calls and tool results before it in its first prompt, while the
sub-agents of the calls it does send fan out as their plan says.

Against the mock over HTTP; the mock logs each request's messages, so the history a joined
agent sent is read from what the server received."""

from __future__ import annotations

import json

import llmbench
from llmbench.analysis.sessions import sessions_of
from llmbench.mock_server import MockConfig, MockServer
from llmbench.records.record import load_records
from tests.helpers.api import run_json

USERS = 6
RAMP_IN_S = 1.2
AGENT = dict(workload_type="agent", agent_steps="6", agent_system_tokens="30",
             agent_task_tokens="20", agent_result_tokens="15", agent_call_tokens="8",
             agent_answer_tokens="8", agent_tool_latency="20ms", agent_tools=1,
             agent_fanout=1.0, agent_fanout_width="1", agent_sub_steps="2",
             tokenizer="approx")


def _ramp(tmp_path, join: str):
    log = tmp_path / f"mock-{join}.jsonl"
    with MockServer(MockConfig(ttft_ms=2, itl_ms=1, parallel=16), record=str(log),
                    record_prompts=True) as m:
        r = llmbench.ramp(url=m.url + "/v1", model="mock", users=str(USERS),
                          ramp_in=f"{RAMP_IN_S}s", hold="1s", join=join,
                          threshold=["session.p50<=60s"], generator_lag_limit="2000ms",
                          out=tmp_path / join, **AGENT)
    sent = [json.loads(x) for x in log.read_text().splitlines() if x.strip()]
    return r, sent


def _first_sessions(r):
    """Each user's first session (the one it joined with), by user."""
    first: dict[int, object] = {}
    for s in sessions_of(load_records(r.path / "requests.jsonl")):
        if s.user is not None:
            first.setdefault(s.user, s)
    return first


def test_agents_join_spread_over_the_ramp_in_at_random_calls_with_their_history(tmp_path):
    r, sent = _ramp(tmp_path, "spread")
    doc = run_json(r)
    assert doc["config"]["ramp"]["join"] == "spread"
    step = doc["steps"][0]
    first = _first_sessions(r)
    assert sorted(first) == list(range(USERS))
    # one agent at a random time in each equal slice of the ramp-in: user k's first call
    # starts in slice k (its send is a moment after its time, never before), not on the grid
    width = RAMP_IN_S / USERS
    offsets = {u: s.start - step["ramp_start"] for u, s in first.items()}
    for u, off in offsets.items():
        assert u * width <= off < (u + 1) * width + 0.5, offsets
    assert any(abs(off - u * width) > 0.02 for u, off in offsets.items()), offsets
    # each at a drawn call: six users at call 0 of six has odds 1 in 46,656 (the seed is fixed)
    recs = load_records(r.path / "requests.jsonl")
    by_session = {}
    for x in sorted(recs, key=lambda x: x.start):
        if x.session_id and not x.warmup:
            by_session.setdefault(x.session_id, []).append(x)
    joined = {u: s for u, s in first.items() if s.joined}
    assert joined, {u: by_session[s.session_id][0].turn for u, s in first.items()}
    for u, s in joined.items():
        calls = by_session[s.session_id]
        k = calls[0].turn
        assert k > 0 and calls[0].tool_gap_ms is None
        # its first request carried the k calls before it as the agent's history: k tool calls
        # of the session's first tool (synthetic ids: the server never made them), each
        # followed by its tool result
        mine = [x["messages"] for x in sent
                if any(c.get("id", "").startswith(f"call_{s.session_id}_")
                       for msg in x.get("messages") or () for c in msg.get("tool_calls") or ())]
        assert mine, s.session_id
        head = min(mine, key=len)
        made = [msg for msg in head if msg["role"] == "assistant"]
        assert len(made) == k and all(
            c["id"].startswith(f"call_{s.session_id}_") and c["function"]["name"] == "read_file"
            for msg in made for c in msg["tool_calls"])
        # a synthetic call is of the asked length (8 one-token words in its argument)
        args = json.loads(made[0]["tool_calls"][0]["function"]["arguments"])
        assert len(next(iter(args.values())).split()) == 8
        assert sum(1 for msg in head if msg["role"] == "tool") == k
        # the calls it did send fan out as planned (fan-out 1.0: every call step starts one
        # sub-agent), each sub-agent from its own first call, after the call that started it
        subs = [x for x in calls if x.step_id and "/" in x.step_id]
        mains = [x for x in calls if x.step_id and "/" not in x.step_id]
        assert {x.parent_step_id for x in subs if x.turn == 0} <= {x.step_id for x in mains}
        if s.complete:
            # one sub-agent for each call step it sent (each of its 2 calls), none for the
            # calls it skipped
            starts = [x for x in subs if x.turn == 0]
            assert len(starts) == sum(1 for x in mains if x.step_kind == "call"), \
                [(x.step_id, x.parent_step_id) for x in calls]
            assert len(subs) == 2 * len(starts)
    assert any(s.complete for s in joined.values())     # the fan-out check above ran
    # the joined sessions are counted apart, the whole ones as before
    whole = [s for s in first.values() if not s.joined]
    assert all(not s.joined for s in sessions_of(recs) if s not in first.values())
    assert len(joined) + len(whole) == USERS
    # the report says how the agents joined
    assert "Agents join mid-session (--join spread)" in (r.path / "report.html").read_text()


def test_agents_join_start_at_their_first_call_on_the_even_grid(tmp_path):
    r, _ = _ramp(tmp_path, "start")
    step = run_json(r)["steps"][0]
    first = _first_sessions(r)
    assert sorted(first) == list(range(USERS)) and not any(s.joined for s in first.values())
    width = RAMP_IN_S / USERS
    for u, s in first.items():
        off = s.start - step["ramp_start"]
        assert u * width - 0.001 <= off < u * width + 0.5
