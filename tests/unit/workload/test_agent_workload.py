"""Agent sessions as a workload (issue 35 part 1): synthetic sessions from ranges, seeded; the
three trace formats read into the same shapes; bad input as one line naming file and line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from llmbench.wire.agents import AgentSpecError, load_tools
from llmbench.workload.agent_traces import read_sessions
from llmbench.workload.agents import AgentSpec, synthetic_sessions
from llmbench.workload.files import DatasetError
from llmbench.workload.tokenizer import load_tokenizer
from tests.helpers import ENV, ROOT

DATA = Path(ROOT) / "datasets"


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer("approx")


def shape(session):
    """A session's plan as plain numbers: per agent, (new tokens, reply, gap, sub-agents)."""
    return [(a.system_tokens, [(st.new_tokens, st.reply_tokens, round(st.gap_s, 3), len(st.spawn))
                               for st in a.steps]) for a in session.plan.walk()]


def test_synthetic_sessions_draw_every_knob_from_its_range_and_the_seed(tok):
    spec = AgentSpec(system_tokens=(500, 500), task_tokens=(30, 60), steps=(3, 6),
                     result_tokens=(100, 200), tool_latency_s=(0.1, 0.4), call_tokens=(10, 20),
                     answer_tokens=(50, 80), fanout_share=1.0, fanout_width=(2, 3),
                     sub_steps=(2, 2), tools=2)
    a = synthetic_sessions(tok, 20, spec, seed=7)
    assert [shape(s) for s in a] == [shape(s) for s in synthetic_sessions(tok, 20, spec, 7)]
    assert [shape(s) for s in a] != [shape(s) for s in synthetic_sessions(tok, 20, spec, 8)]
    for s in a:
        main = s.plan
        assert 3 <= len(main.steps) <= 6
        first, *calls, last = main.steps
        assert 30 <= first.new_tokens <= 60 and first.gap_s == 0
        assert 50 <= last.reply_tokens <= 80 and not last.spawn      # the answer starts nobody
        for st in calls:
            assert 100 <= st.new_tokens <= 200 and 0.1 <= st.gap_s <= 0.4
            assert 10 <= st.reply_tokens <= 20
        # fan-out share 1: every call before the answer starts 2-3 sub-agents of 2 calls, and
        # sub-agents start none (one level)
        for st in [first] + calls:
            assert 2 <= len(st.spawn) <= 3
            assert all(len(sub.steps) == 2 and not any(x.spawn for x in sub.steps)
                       for sub in st.spawn)
        assert main.calls == len(main.steps) + sum(len(sub.steps) for st in main.steps
                                                   for sub in st.spawn)
        assert [t["function"]["name"] for t in s.tools] == ["read_file", "run_command"]


def test_session_text_is_made_when_played_seeded_and_of_the_asked_size(tok):
    spec = AgentSpec(task_tokens=(40, 40), result_tokens=(300, 300), steps=(3, 3))
    a, b = synthetic_sessions(tok, 2, spec, seed=1)
    again = synthetic_sessions(tok, 2, spec, seed=1)[0]
    step = a.plan.steps[1]
    assert a.result_text(a.plan, step) == again.result_text(again.plan, step)
    assert len(a.result_text(a.plan, step).split()) == 300      # one-token words
    assert len(a.task_text(a.plan).split()) == 40
    # no two sessions' tasks share a first word past "Task": a prefix cache finds nothing
    assert a.task_text(a.plan).split()[:2] != b.task_text(b.plan).split()[:2]
    # one shared system prompt (one agent product), of about its size with the tools
    assert a.system == b.system and a.plan.system_tokens >= 2000


def test_the_three_trace_formats_read_into_the_same_sessions(tok):
    ours, w1, k1 = read_sessions(str(DATA / "agent_sessions_sample.jsonl"), tok, 0)
    weka, w2, k2 = read_sessions(str(DATA / "agent_weka_sample.jsonl"), tok, 0)
    otel, w3, k3 = read_sessions(str(DATA / "agent_otel_sample.jsonl"), tok, 0)
    assert (k1, k2, k3) == ("agent", "weka", "otel") and not w1 and not w2
    assert len(ours) == len(weka) == len(otel) == 6
    # llmbench's format and WEKA's: the same calls, new tokens, replies, gaps and sub-agents
    assert [shape(s) for s in ours] == [shape(s) for s in weka]
    for o, t in zip(ours, otel):
        so, st = shape(o), shape(t)
        assert len(so) == len(st)                     # the same agents
        for (_, a), (_, b) in zip(so, st):
            assert [x[1] for x in a] == [y[1] for y in b]            # the replies asked
            assert [x[3] for x in a] == [y[3] for y in b]            # who starts sub-agents
            # OTel records no system prompt's size (its first prompt is all new tokens) and
            # a call's gap as it was waited: the sub-agents' time included
            assert [x[0] for x in a[1:]] == [y[0] for y in b[1:]]    # the tool results
            after_subs = {i + 1 for i, x in enumerate(a) if x[3]}
            assert [x[2] for i, x in enumerate(a) if i not in after_subs] == \
                [y[2] for i, y in enumerate(b) if i not in after_subs]
    spawner = next(s for s in ours if any(st.spawn for st in s.plan.steps))
    subs = [sub for st in spawner.plan.steps for sub in st.spawn]
    assert len(subs) == 2 and all(sub.system_tokens == 600 for sub in subs)


def write(tmp_path: Path, name: str, rows: list) -> str:
    p = tmp_path / name
    p.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return str(p)


GOOD = [{"session": "s", "step": "0", "output_tokens": 10, "new_tokens": 5},
        {"session": "s", "step": "1", "parent": "0", "output_tokens": 10, "new_tokens": 5,
         "tool_gap_s": 0.5}]


@pytest.mark.parametrize("rows, line, words", [
    (GOOD + [{"session": "s", "step": "a", "parent": "b", "output_tokens": 3, "agent": "x"},
             {"session": "s", "step": "b", "parent": "a", "output_tokens": 3, "agent": "x"}],
     3, "form a cycle"),
    (GOOD[:1] + [{"session": "s", "step": "1", "parent": "0", "output_tokens": 0}], 2,
     "has no tokens"),
    (GOOD[:1] + [{"session": "s", "step": "1", "parent": "0", "output_tokens": 4,
                  "tool_gap_s": -1.5}], 2, "a tool gap cannot be negative"),
    (GOOD + [{"session": "s", "step": "2", "parent": "9", "output_tokens": 4}], 3,
     "parent 9 is not in the session"),
    (GOOD[:1] + ['{"session": "s", "step": "1", "output_tokens": 4'], 2, "not JSON"),
    (GOOD + [{"session": "s", "step": "1", "parent": "0", "output_tokens": 4}], 3,
     "appears twice"),
])
def test_a_bad_agent_trace_is_one_line_naming_the_file_and_line(tmp_path, tok, rows, line, words):
    path = write(tmp_path, "bad.jsonl", rows)
    with pytest.raises(DatasetError) as e:
        read_sessions(path, tok, 0, "agent")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{path}:{line}: ") and words in msg, msg


def test_weka_and_otel_faults_name_their_line_too(tmp_path, tok):
    weka = write(tmp_path, "w.jsonl", [
        {"id": "t1", "requests": [{"t": 0, "type": "s", "in": 100, "out": 5}]},
        {"id": "t2", "requests": [{"t": 0, "type": "s", "in": 100, "out": 5},
                                  {"t": 1, "type": "s", "in": 0, "out": 0}]}])
    with pytest.raises(DatasetError, match=r"w\.jsonl:2 \(trace t2, main call 2\): a call with no tokens"):
        read_sessions(weka, tok, 0)
    otel = write(tmp_path, "o.jsonl", [
        {"trace_id": "T", "span_id": "a", "parent_span_id": "b", "start_time": 1, "attributes": {
            "gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 10,
            "gen_ai.usage.output_tokens": 2}},
        {"trace_id": "T", "span_id": "b", "parent_span_id": "a", "start_time": 2,
         "attributes": {"gen_ai.operation.name": "invoke_agent"}}])
    with pytest.raises(DatasetError, match=r"o\.jsonl:\d: span \w: its parent links form a cycle"):
        read_sessions(otel, tok, 0)


def test_a_tools_file_that_is_not_json_names_its_line(tmp_path):
    p = tmp_path / "tools.json"
    p.write_text('[\n  {"type": "function",\n   "function": {"name": "x",}}\n]\n')
    with pytest.raises(AgentSpecError) as e:
        load_tools(str(p))
    assert str(e.value).startswith(f"--tools {p}:3: not JSON") and "\n" not in str(e.value)


def test_the_command_line_says_it_in_one_line_and_exits_2(tmp_path):
    path = write(tmp_path, "cycle.jsonl", GOOD + [
        {"session": "s", "step": "a", "parent": "b", "output_tokens": 3, "agent": "x"},
        {"session": "s", "step": "b", "parent": "a", "output_tokens": 3, "agent": "x"}])
    p = subprocess.run([sys.executable, "-m", "llmbench.cli", "run", "--url",
                        "http://127.0.0.1:9/v1", "--model", "m", "--workload", "agent",
                        "--dataset", path, "--tokenizer", "approx", "--requests", "1",
                        "--out", str(tmp_path)], capture_output=True, text=True, env=ENV,
                       timeout=60)
    err = [line for line in p.stderr.splitlines() if line.strip()]
    assert p.returncode == 2, p.stderr
    assert len(err) == 1 and err[0].startswith(f"error: {path}:3: ") and "cycle" in err[0], err


def test_a_hold_shorter_than_a_typical_session_is_warned_about(tok, capsys):
    """A ramp step counts the sessions that start in its hold: a hold shorter than a session's
    tool time alone (here 9 gaps of 2 s = 18 s) gets one warning with the figure; a longer
    one none."""
    from llmbench.commands.spec import warn_short_hold
    from llmbench.workload.agents import agent_workload
    wl = agent_workload(AgentSpec(steps=(10, 10), tool_latency_s=(2.0, 2.0)), tok, 20, 0)
    warn_short_hold(wl, 5.0)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--hold 5s is shorter than a typical session" in err
    assert "(18 s)" in err
    warn_short_hold(wl, 60.0)
    assert capsys.readouterr().err == ""


def test_the_agent_options_are_typed_spec_fields_checked_in_one_line():
    """AgentOpts is a group of run's, ramp's and sweep's specs: Python values and the command
    line's texts make the same spec, the keyword is the flag's (workload=), and a bad value or
    a combination agents cannot take is one UsageError naming the flag."""
    from datetime import timedelta

    from llmbench.specs.ramp import RampSpec
    from llmbench.specs.run import RunSpec
    from llmbench.errors import UsageError
    typed = RampSpec.from_options({"url": "http://h:1/v1", "workload": "agent",
                                   "agent_steps": (2, 5), "agent_result_tokens": 300,
                                   "agent_tool_latency": (timedelta(milliseconds=100), 2)})
    texts = RampSpec(url="http://h:1/v1", workload_type="agent", agent_steps="2-5",
                     agent_result_tokens="300", agent_tool_latency="100ms-2s")
    assert typed == texts
    spec = typed.agent_spec()
    assert spec.steps == (2, 5) and spec.result_tokens == (300, 300)
    assert spec.tool_latency_s == (0.1, 2.0)
    # agents start their next task at once, and are held to a first token within 5 s
    assert typed.timing()[2] == (0.0, 0.0)
    assert [t.text for t in typed.gates()][0] == "ttft.p95_all<=5s"
    # --tool-choice needs no --tools FILE with agents: their sessions send tools
    assert RunSpec(workload_type="agent", tool_choice="required").tool_choice == "required"
    for kw, words in (({"workload_type": "robot"}, "--workload 'robot': choose chat or agent"),
                      ({"workload_type": "agent", "agent_steps": "0"}, "--agent-steps"),
                      ({"workload_type": "agent", "images": 2}, "--images: not with --workload"),
                      ({"workload_type": "agent", "dataset": "random"}, "--dataset random"),
                      ({"workload_type": "agent", "trace": "t.jsonl"}, "--trace replays"),
                      ({"tool_choice": "required"}, "--tool-choice needs --tools FILE")):
        with pytest.raises(UsageError) as exc:
            RunSpec(**kw)
        assert words in str(exc.value) and "\n" not in str(exc.value), (kw, str(exc.value))


# -- issue 49: the trace readers' bounds ---------------------------------------------------------

def test_a_trace_with_a_utf8_bom_is_read_as_a_chat_dataset_is(tmp_path, tok):
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + "\n".join(json.dumps(r) if isinstance(r, dict) else r
                                                 for r in GOOD).encode() + b"\n")
    sessions, _, kind = read_sessions(str(path), tok, 0)
    assert kind == "agent" and len(sessions) == 1


def test_sub_agents_nested_past_the_bound_are_one_line_not_a_recursion(tmp_path, tok):
    """WEKA markers nested 100 deep (JSON that json reads: ~300 levels) and a chain of 200
    sub-agents in llmbench's format: each one line naming where, read without recursing
    past MAX_AGENT_DEPTH (64)."""
    from llmbench.workload.agents import MAX_AGENT_DEPTH
    node: list = [{"type": "n", "in": 10, "out": 4}]
    for i in range(100):
        node = [{"type": "n", "in": 10, "out": 4},
                {"type": "subagent", "agent_id": f"a{i}", "requests": node}]
    weka = write(tmp_path, "w.jsonl", [{"id": "t", "requests": node}])
    with pytest.raises(DatasetError, match=rf"w\.jsonl:1: trace t: sub-agents nested over "
                                           rf"{MAX_AGENT_DEPTH} levels"):
        read_sessions(weka, tok, 0)
    rows = [{"session": "s", "step": str(i), "agent": f"a{i}", "output_tokens": 4,
             **({"parent": str(i - 1)} if i else {})} for i in range(200)]
    chain = write(tmp_path, "c.jsonl", rows)
    with pytest.raises(DatasetError, match=rf"c\.jsonl:{MAX_AGENT_DEPTH + 2}: session s: "
                                           "sub-agents nested over"):
        read_sessions(chain, tok, 0)
    # at the bound itself the chain reads, every level a sub-agent
    ok = write(tmp_path, "ok.jsonl", rows[:MAX_AGENT_DEPTH + 1])
    sessions, _, _ = read_sessions(ok, tok, 0)
    assert len(sessions[0].plan.walk()) == MAX_AGENT_DEPTH + 1


@pytest.mark.parametrize("row, words", [
    ({"tool_gap_s": 30 * 86400 + 1}, "tool_gap_s 2.592e+06: over 30 days"),
    ({"t": 1e300}, "waits 1e+300 s after step 1: over 30 days"),
    ({"new_tokens": 2_000_001}, "new_tokens 2000001: over 2,000,000 tokens"),
    ({"output_tokens": 1.5}, "output_tokens 1.5: expected a whole number"),
    ({"output_tokens": "9" * 5000}, "output_tokens '999999999999999999999999999999999999...: expected"),
])
def test_a_number_past_its_ceiling_is_one_line_naming_its_line(tmp_path, tok, row, words):
    first = {"session": "s", "step": "1", "output_tokens": 4, "t": 0, "duration_s": 1}
    path = write(tmp_path, "n.jsonl", [first, {"session": "s", "step": "2", "parent": "1",
                                               "output_tokens": 4, "t": 2, **row}])
    with pytest.raises(DatasetError) as e:
        read_sessions(path, tok, 0)
    assert str(e.value).startswith(f"{path}:2: ") and words in str(e.value), str(e.value)
