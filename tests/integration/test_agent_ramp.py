"""Agent sessions against the mock over HTTP (issue 35): a ramp of agents on a KV budget for N
sessions holds N and names the cache; twice the budget holds about 2N; one slot with a huge
budget is queuing, not the cache. And agent sessions run over every API with tools.

The sizes, on paper (the mock counts a word as a token; its prefill costs 0.5 ms a token it
does not find cached): a session is 6 calls, its system prompt (shared by all sessions) ~50
tokens, its task 600, each call adds a 10-token reply and a 30-token tool result, so it grows
to ~875 tokens. Warm, a call after the first prefills its ~50 new tokens (~30 ms) and a session
takes ~0.8 s (the first call's task, five calls, five 50 ms tools); once its context is
evicted between calls, each later call prefills ~800 tokens again (~0.4 s) and a session takes
~2.5 s. The gate, a session's median under 1.4 s, lies between the two.
"""

from __future__ import annotations

import json

import pytest

import llmbench
from llmbench.analysis.sessions import summarize_sessions
from llmbench.mock_server import MockConfig, MockProcess, MockServer
from llmbench.records.record import load_records
from llmbench.report import console
from llmbench.report.html import render
from llmbench.report.text import to_markdown
from llmbench.results.schema import Step
from llmbench.results.sessions import CacheBound, Sessions
from tests.helpers.api import records, run_json

SESSION = 875                       # tokens a session grows to (measured by the mock's usage)
AGENT = dict(workload_type="agent", agent_steps="6", agent_system_tokens="50",
             agent_task_tokens="600", agent_result_tokens="30", agent_call_tokens="10",
             agent_answer_tokens="10", agent_tool_latency="50ms", agent_tools=1,
             tokenizer="approx")
GATE = ["session.p50<=1.4s"]


def agent_ramp(mock_factory, tmp_path, users: str, kv_tokens: int, parallel: int = 16,
               itl_ms: float = 1, gate: list[str] = GATE):
    m = mock_factory(ttft_ms=5, itl_ms=itl_ms, parallel=parallel, prefill_ms_per_token=0.5,
                     kv_tokens=kv_tokens)
    r = llmbench.ramp(url=m.url + "/v1", model="mock", users=users, hold="2s", ramp_in="0.3s",
                      threshold=gate, out=tmp_path, **AGENT)
    doc = run_json(r)
    held = max((s["load"] for s in doc["steps"] if s["held"]), default=0)
    # the typed contract reads the same folder back: the steps' sessions and the verdict's
    # cache finding are its typed fields
    run = llmbench.load_run(r.path)
    assert [s.sessions for s in run.steps] == [Sessions.from_dict(s.get("sessions"))
                                               for s in doc["steps"]]
    assert run.verdict.kind == doc["verdict"]["kind"]
    # and the reports have each step's sessions: the HTML's table, `--format md`'s
    page = render(r.path)
    assert "<h2>Agent sessions</h2>" in page and "step TTFT p95" in page
    md = to_markdown(r.path)
    assert "| agents | sessions done | session p50 |" in md
    for st in run.steps:
        if st.sessions is not None:
            x = st.sessions
            assert (f"| {st.load:g} | {x.completed} of {x.started} | "
                    f"{console.fmt_ms(x.duration.median)} |") in md
    assert run.verdict.cache == CacheBound.from_dict(doc["verdict"].get("cache"))
    return doc, held


def lone_session_s(mock_factory, out, kv_tokens: int, parallel: int = 16,
                   itl_ms: float = 1) -> float:
    """A lone agent's session median (s), here and now, on the mock settings a ramp will use:
    the mock and llmbench share this process and the machine, so on a busy machine a session
    takes longer than paper's and the gate has to move with it."""
    m = mock_factory(ttft_ms=5, itl_ms=itl_ms, parallel=parallel, prefill_ms_per_token=0.5,
                     kv_tokens=kv_tokens)
    solo = llmbench.run(url=m.url + "/v1", model="mock", concurrency=1, requests=12, out=out,
                        **AGENT)
    return Sessions.from_dict(run_json(solo)["sessions"]).duration.median / 1000.0


def cache_ramp(mock_factory, tmp_path, users: str, kv_tokens: int):
    """A ramp whose gate is set from a lone session measured first (``lone_session_s``): on
    paper a warm session takes ~0.8 s and one whose context was evicted ~2.5 s, ~1.7 s of
    re-prefill more (the mock's sleeps: at least that on a busy machine). The gate, 1.4 s on a
    quiet machine, is 1.75x the warm session measured, so a slower machine (whose CPU-bound
    work, the mock's and llmbench's in this process, slows with more agents) moves it up with
    the sessions, and at most the warm session + 1.2 s, so an evicted one still breaks it.
    The ramp's first step (below the budget: warm sessions) measures the pace again: when it
    differs from the gate's (1.5x), or the busy machine made a step untrustworthy
    (llmbench's own finding), the ramp runs again at the pace it measured (three tries).
    Returns (run.json, agents held, the gate in s)."""
    warm_s = lone_session_s(mock_factory, tmp_path / "solo", kv_tokens)
    for attempt in range(3):
        gate_s = max(1.4, min(1.75 * warm_s, warm_s + 1.2))
        doc, held = agent_ramp(mock_factory, tmp_path / str(attempt), users,
                               kv_tokens=kv_tokens, gate=[f"session.p50<={gate_s:.2f}s"])
        first = (doc["steps"][0].get("sessions") or {}).get("duration") or {}
        lone_s = (first.get("median") or 0.0) / 1000.0
        if warm_s / 1.5 <= lone_s <= warm_s * 1.5 and doc["verdict"]["kind"] not in (
                "not_enough_data", "load_generator"):
            break
        warm_s = lone_s or warm_s
    return doc, held, gate_s


def test_a_kv_budget_for_two_sessions_holds_two_agents_and_names_the_cache(mock_factory, tmp_path):
    doc, held, gate_s = cache_ramp(mock_factory, tmp_path, "1,2,3,4", kv_tokens=2 * SESSION + 150)
    v = doc["verdict"]
    if v["kind"] == "load_generator":
        # three tries on a machine busy enough that llmbench said so itself each time: that
        # finding is the honest answer (issue 49), and it must not be dressed as the cache
        assert v.get("generator_cause") in ("machine", "llmbench") and "cache" not in v, v
        return
    assert 1 <= held <= 3, v["result"]
    assert v["kind"] == "cache_bound", v
    assert v["result"].startswith(f"Held {held:g} agents.")
    cache = v["cache"]
    assert cache["sessions_held"] == held and 700 <= cache["session_tokens"] <= 1000
    assert cache["server_agrees"] is True                  # the mock's prefix-cache counters
    assert cache["capacity_tokens"] == 2 * SESSION + 150
    # the verdict's cache shares are the table's "from cache" of the two steps (one source)
    by_load = {s["load"]: s for s in doc["steps"]}
    broke = next(s for s in doc["steps"] if s["load"] > held and not s["held"])
    assert cache["warm_share"] == pytest.approx(by_load[held]["sessions"]["cached_share"])
    assert cache["broke_share"] == pytest.approx(broke["sessions"]["cached_share"])
    said = " ".join(v["evidence"])
    assert f"The KV cache holds about {held:g} sessions of this size" in said
    assert "re-prefills about" in said and "--kv-tokens" in " ".join(v["advice"])
    # each step judged its own sessions (those that started in its hold)
    first = doc["steps"][0]["sessions"]
    assert first["completed"] >= 1 and first["duration"]["median"] < gate_s * 1000
    # the ramp's table shows each step's sessions beside its calls' TTFT, in 80 columns with
    # the longest state ("not enough data"; a busy machine's note may run past, as chat's)
    rows = [console.agent_ramp_header()] + [console.agent_ramp_row(Step.from_dict(s))
                                             for s in doc["steps"]]
    assert all(len(x.split(" (")[0]) <= 80 - len("not enough data") + 4 for x in rows), rows
    assert rows[0].split()[:4] == ["Agents", "Done", "Sess", "p50"]
    assert rows[1].split()[:3] == ["1", str(first["completed"]),
                                   console.fmt_ms(first["duration"]["median"])]
    assert rows[-1].split()[-1].startswith("over")


def test_twice_the_budget_holds_about_twice_the_agents(mock_factory, tmp_path):
    doc, held, _ = cache_ramp(mock_factory, tmp_path, "4,5,6", kv_tokens=4 * SESSION + 100)
    if doc["verdict"]["kind"] == "load_generator":         # as in the test above
        assert "cache" not in doc["verdict"], doc["verdict"]
        return
    assert 3 <= held <= 5, doc["verdict"]["result"]
    if held < 6:
        assert doc["verdict"]["kind"] == "cache_bound", doc["verdict"]


@pytest.fixture
def mock_process():
    """Mocks in child processes: their timers do not wait for this process's GIL, which the
    ramp's own load holds (two busy loops made a 1-slot mock's 5 ms gaps grow past the
    verdict's 1.5x, read as saturation)."""
    started: list[MockProcess] = []

    def start(**cfg) -> MockProcess:
        m = MockProcess(MockConfig(**cfg)).__enter__()
        started.append(m)
        return m
    yield start
    for m in started:
        m.__exit__(None, None, None)


def test_one_slot_and_a_huge_budget_is_queuing_not_the_cache(mock_process, tmp_path):
    mock_factory = mock_process
    # the mock runs in its own process (it ran in this one: on a busy machine, with the GIL shared)
    # 1 ms gaps grew past the verdict's +2 ms / 1.5x and read as compute saturation; 5 ms gaps
    # need a 7.5 ms median to count as grown, which a queue for one slot does not make (one
    # request decodes at a time), and cost a session only ~0.25 s more (60 tokens), under the
    # 1.4 s gate at 1 user
    # the gate lies between a lone agent's session and one queued behind another: on paper
    # ~1.05 s and over 1.5 s, so 1.4 s is 1.33x a lone session. The mock shares the machine
    # (and this process), so a lone session is measured first, on the same mock settings, and
    # a slower one moves the gate with it (CI at load 6-17: a lone session over 1.4 s broke
    # the first step). The ramp's first step measures a lone session again: when the machine
    # changed pace between the two (1.5x), or the lone agent broke it, the gate was not this
    # ramp's and it runs again with the lone session the ramp measured
    warm_s = lone_session_s(mock_factory, tmp_path / "solo", 1_000_000, parallel=1, itl_ms=5)
    for attempt in range(4):
        gate_s = max(1.4, 1.33 * warm_s)
        doc, held = agent_ramp(mock_factory, tmp_path / str(attempt), "1,2,3",
                               kv_tokens=1_000_000, parallel=1, itl_ms=5,
                               gate=[f"session.p50<={gate_s:.2f}s"])
        first = (doc["steps"][0].get("sessions") or {}).get("duration") or {}
        lone_s = (first.get("median") or 0.0) / 1000.0
        # a lone agent has the slot to itself: its session over the gate is the machine's
        # pace, not queuing, and the gate was not this ramp's either
        # and a step too slow to finish a session in its hold has not enough data to judge
        # and a step the busy machine made untrustworthy is not this test's evidence either
        # and one slot decodes one request at a time: gaps that grew are the busy machine's,
        # not this server's, and the test's premise (steady gaps) did not hold
        v = doc["verdict"]
        if held >= 1 and warm_s / 1.5 <= lone_s <= warm_s * 1.5 \
                and v["kind"] not in ("not_enough_data", "load_generator") \
                and not (v["kind"] == "saturation" and v.get("itl_grew")):
            break
        warm_s = lone_s or warm_s
    v = doc["verdict"]
    if v["kind"] == "load_generator":
        # four tries on a machine busy enough that llmbench said so itself each time: that
        # finding is the honest answer (issue 49), and it must not be dressed as the cache
        assert v.get("generator_cause") in ("machine", "llmbench") and "cache" not in v, v
        return
    assert held < 3 and v["kind"] == "queuing", (warm_s, v)
    assert v["itl_grew"] is False and v["ttft_grew"] is True, v
    assert "cache" not in v


@pytest.mark.parametrize("api", ["openai-chat", "responses", "anthropic"])
def test_agent_sessions_run_over_every_api_with_tools(tmp_path, api):
    """The model's real calls go back in the history (the mock logs each request's messages),
    a sub-agent's calls are the session's, and run.json's sessions are those requests.jsonl
    gives again when read back."""
    log = tmp_path / "mock.jsonl"
    # the mock's log is whole once the mock stops (it buffers its lines)
    with MockServer(MockConfig(ttft_ms=2, itl_ms=1), record=str(log), record_prompts=True) as m:
        r = llmbench.run(url=m.url + "/v1", model="mock", api=api, concurrency=2, requests=40,
                         out=tmp_path, agent_fanout=1.0, agent_fanout_width="2",
                         **{**AGENT, "agent_steps": "3", "agent_task_tokens": "20",
                            "agent_sub_steps": "2"})
    doc = run_json(r)
    assert doc["summary"]["failed"] == 0
    recs = records(r)
    assert all(x["session_id"] for x in recs) and {x["step_kind"] for x in recs} == {
        "call", "answer", "final"}
    assert any("/" in x["step_id"] for x in recs)           # sub-agents' calls
    s = Sessions.from_dict(doc["sessions"])
    assert s.completed >= 2 and s.text_replies == 0 and s.call_steps > 0
    assert s.steps.max >= 3 + 2 * 2                         # 3 main calls, 2 sub-agents of 2
    # requests.jsonl read back gives the same sessions run.json holds
    again = summarize_sessions(load_records(r.path / "requests.jsonl"),
                               window_s=doc["summary"]["duration"])
    assert again == s
    # and load_run reads run.json's sessions back as the typed value, the same numbers
    assert llmbench.load_run(r.path).findings.sessions == s
    assert f"| sessions_completed | {s.completed} of {s.started} |" in to_markdown(r.path)
    assert f">{s.completed} of {s.started}</td>" in render(r.path)
    if api == "openai-chat":
        # a call step's reply (a tool call) is in the next request's history as it came
        logged = [json.loads(x) for x in log.read_text().splitlines()]
        calls = [msg for x in logged for msg in (x.get("messages") or [])
                 if msg.get("role") == "assistant" and msg.get("tool_calls")]
        results = [msg for x in logged for msg in (x.get("messages") or [])
                   if msg.get("role") == "tool"]
        assert calls and results
        ids = {c["id"] for msg in calls for c in msg["tool_calls"]}
        assert {t["tool_call_id"] for t in results} <= ids
        assert all(c["id"].startswith("call_") and c["function"]["name"] == "read_file"
                   for msg in calls for c in msg["tool_calls"])
        # the run's salt goes first in the shared system prompt: every call of every session
        # (sub-agents have their own system prompt) starts with it, and the main agents' calls
        # share one prefix
        salt = doc["workload"]["salt"]["text"]
        sent = [x["messages"] for x in logged if len(x.get("messages") or []) > 1]  # no preflight
        assert salt and sent and all(m[0]["role"] == "system"
                                     and m[0]["content"].startswith(salt + " ") for m in sent)
        mains = {m[0]["content"] for m in sent if " main:" in m[1]["content"]}
        assert len(mains) == 1          # one agent product: every main agent's prefix is one


def test_a_server_that_answers_in_text_still_moves_the_session_and_says_how_often(
        mock_factory, tmp_path):
    m = mock_factory(ttft_ms=2, itl_ms=1, tool_call_share=0.5)
    r = llmbench.run(url=m.url + "/v1", model="mock", concurrency=2, requests=30, out=tmp_path,
                     **{**AGENT, "agent_steps": "4", "agent_task_tokens": "20"})
    s = Sessions.from_dict(run_json(r)["sessions"])
    assert s.completed >= 3 and 0 < s.text_replies < s.call_steps
    assert s.text_reply_share == s.text_replies / s.call_steps
    # --tool-choice required: every call step calls a tool, and the answer is asked as text
    m2 = mock_factory(ttft_ms=2, itl_ms=1, tool_call_share=0.5)
    r2 = llmbench.run(url=m2.url + "/v1", model="mock", concurrency=2, requests=30,
                      out=tmp_path, tool_choice="required",
                      **{**AGENT, "agent_steps": "4", "agent_task_tokens": "20"})
    s2 = Sessions.from_dict(run_json(r2)["sessions"])
    assert s2.text_replies == 0 and s2.completed >= 3
    finals = [x for x in records(r2) if x["step_kind"] == "final"]
    assert finals and not any(x.get("first_tool") for x in finals)
