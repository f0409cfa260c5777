"""Recordings (issue 47): the anonymiser (same length, consistent, no 4-word run of the
original, the shared-prefix share kept), the session linker (chat turns, tool loops, branches,
the Responses API's previous_response_id), and hostile recordings refused in one line naming
file and line."""

from __future__ import annotations

import json
import re

import pytest

from llmbench.workload.anonymise import Anonymiser
from llmbench.workload.files import DatasetError
from llmbench.workload.recording import Linker, PrefixShare, messages_of
from llmbench.workload.tokenizer import approx_tokenizer
from llmbench.workload.traces import load_trace

SYSTEM = ("You are the support assistant of a bicycle shop in Utrecht. Answer politely, quote "
          "prices in euros and never promise a repair date before a mechanic has seen the bike.")
TURNS = ["My rear derailleur skips gears when I climb the bridge near the station.",
         "It is a Shimano Deore, about four years old, ridden daily in the rain.",
         "Can you also check the brake pads while it is in the workshop?"]
REPLIES = ["That usually means the cable has stretched or the hanger is bent slightly.",
           "Four years of daily rain riding will have worn the chain and cassette as well.",
           "Yes, a brake pad check is free with any drivetrain service we do."]


def conversation() -> list[list[dict]]:
    """The requests a chat client sends: the whole history each turn."""
    out, msgs = [], [{"role": "system", "content": SYSTEM}]
    for ask, reply in zip(TURNS, REPLIES):
        msgs = msgs + [{"role": "user", "content": ask}]
        out.append(msgs)
        msgs = msgs + [{"role": "assistant", "content": reply}]
    return out


def grams(text: str) -> set[tuple[str, ...]]:
    w = re.findall(r"[a-z]+", text.lower())
    return {tuple(w[i:i + 4]) for i in range(len(w) - 3)}


def test_anonymised_text_keeps_lengths_and_structure_and_no_4_word_run():
    tok = approx_tokenizer()
    anon = Anonymiser(tok, seed=1)
    reqs = conversation()
    out = [anon.value({"messages": m, "model": "x"}) for m in reqs]
    original = " ".join([SYSTEM, *TURNS, *REPLIES])
    assert not grams(original) & grams(json.dumps(out))
    # the same text, the same replacement: the history grows with its earlier messages intact
    assert out[1]["messages"][:2] == out[0]["messages"]
    assert out[2]["messages"][:4] == out[1]["messages"]
    assert out[0]["model"] == "x" and [m["role"] for m in out[2]["messages"]] == [
        "system", "user", "assistant", "user", "assistant", "user"]
    # each text as many tokens as the original
    for a, b in zip(reqs[-1], out[-1]["messages"]):
        assert abs(tok.count(a["content"]) - tok.count(b["content"])) <= 1
    # another seed, other words
    assert Anonymiser(tok, seed=2).text(SYSTEM) != anon.text(SYSTEM)


def test_the_shared_prefix_share_survives_anonymising():
    """Shared system prompts, growing histories and a shared document opening two questions:
    the share of prompt tokens repeating an earlier prefix is the same before and after."""
    tok = approx_tokenizer()
    anon = Anonymiser(tok)
    doc = " ".join(f"clause {i} of the rental contract covers insurance and deposits" for i in
                   range(30))
    reqs = conversation() + [[{"role": "user", "content": doc + " Who pays for a flat tyre?"}],
                             [{"role": "user", "content": doc + " Can I return it late?"}]]
    before, after = PrefixShare(tok.count), PrefixShare(tok.count)
    for m in reqs:
        before.add(messages_of("openai-chat", {"messages": m}))
        after.add(messages_of("openai-chat", anon.value({"messages": m})))
    assert before.share is not None and before.share > 0.3
    assert abs(before.share - after.share) <= 0.02


def test_linker_chat_tool_loop_branch_and_responses():
    link = Linker()
    reqs = conversation()
    got = [link.link(i, messages_of("openai-chat", {"messages": m}), None, None)
           for i, m in enumerate(reqs)]
    assert [(g.session, g.turn, g.new_from) for g in got] == [("s1", 0, 0), ("s1", 1, 3),
                                                              ("s1", 2, 5)]
    # a tool loop: the assistant's call, then the tool's result
    ask = [{"role": "user", "content": "weather in Delft?"}]
    call = {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {
        "name": "weather", "arguments": "{\"city\": \"Delft\"}"}}]}
    t0 = link.link(10, messages_of("openai-chat", {"messages": ask}), None, None)
    t1 = link.link(11, messages_of("openai-chat", {"messages": ask + [call, {
        "role": "tool", "tool_call_id": "c1", "content": "rain"}]}), None, None)
    assert (t0.session, t1.session, t1.turn, t1.new_from) == ("s2", "s2", 1, 2)
    # the same history sent again (a retry, a branch): a session of its own, parented
    again = link.link(12, messages_of("openai-chat", {"messages": reqs[1]}), None, None)
    assert again.session == "s3" and again.parent == "s1"
    # the Responses API links by previous_response_id
    r0 = link.link(20, messages_of("responses", {"input": "hi"}), None, "resp_1")
    r1 = link.link(21, messages_of("responses", {"input": "more"}), "resp_1", "resp_2")
    assert r0.session == r1.session == "s4" and r1.turn == 1


def rec_line(ts, sid="s1", turn=0, **kw) -> str:
    d = {"timestamp": ts, "session_id": sid, "turn": turn, "api": "openai-chat",
         "request": {"messages": [{"role": "user", "content": "hello there"}]},
         "new_from": 0, "output_length": 4, **kw}
    return json.dumps(d)


HEAD = json.dumps({"llmbench_recording": 1, "text": "anonymised"})


@pytest.mark.parametrize("body, where, says", [
    ([HEAD, rec_line(0), "{not json"], 3, "not JSON"),
    ([HEAD, rec_line(-5)], 2, "finite number >= 0"),
    ([HEAD, rec_line(0), rec_line(10, turn=2)], 3, "turn 2 comes where turn 1"),
    ([HEAD, rec_line(0), rec_line(10, turn=1, after_ms=-3)], 3, "after_ms -3"),
    ([HEAD, rec_line(0, "a", parent_session="b"), rec_line(1, "b", parent_session="a")], 2,
     "form a cycle"),
    ([HEAD, rec_line(0), HEAD], 3, "header line in the middle"),
    ([HEAD, rec_line(0, new_from=9)], 2, "new_from 9 is above 1"),
])
def test_hostile_recordings_are_one_line_naming_file_and_line(tmp_path, body, where, says):
    f = tmp_path / "rec.jsonl"
    f.write_text("\n".join(body) + "\n")
    with pytest.raises(DatasetError) as info:
        load_trace(str(f), approx_tokenizer())
    msg = str(info.value)
    assert msg.startswith(f"{f}:{where}:") and says in msg and "\n" not in msg


def test_a_recording_loads_as_sessions_with_their_gaps(tmp_path):
    f = tmp_path / "rec.jsonl"
    m0 = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "one two"}]
    m1 = m0 + [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "three"}]
    f.write_text("\n".join([HEAD, rec_line(0, request={"messages": m0}, tools=0),
                            rec_line(500, turn=1, request={"messages": m1}, new_from=3,
                                     after_ms=250.0),
                            rec_line(100, "s2")]) + "\n")
    tr = load_trace(str(f), approx_tokenizer())
    assert tr.requests == 3 and len(tr.items) == 2
    first = tr.items[0]
    assert first.conv.system == "be brief"
    assert [t.user for t in first.conv.turns] == ["one two", "three"]
    assert first.due_s == (0.0, 0.5) and first.gaps_s == (None, 0.25)
    assert tr.items[1].offset_s == 0.1 and tr.items[1].gaps_s == ()


def test_datasets_inspect_summarises_a_recording_and_an_agent_trace(tmp_path):
    from tests.helpers import llmbench
    rec = tmp_path / "rec.jsonl"
    reqs = conversation()
    rows = [HEAD] + [rec_line(i * 1000, "s1", i, request={"messages": m}, new_from=[0, 3, 5][i],
                              input_length=20 * (i + 1), after_ms=None if i == 0 else 400)
                     for i, m in enumerate(reqs)]
    rec.write_text("\n".join(rows) + "\n")
    p = llmbench("datasets", "inspect", str(rec))
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "requests:       3 over 2.0 s" in out and "sessions:       1 " in out
    assert "turns/session:  min 3" in out and "prompt tokens:  min 20" in out
    assert "APIs:           openai-chat 3" in out and "gaps:           min 400" in out
    share = float(re.search(r"shared prefix:\s+([\d.]+) %", out).group(1))
    assert share > 30          # the history repeats: turn 2 holds turn 1 and its reply
    agent = tmp_path / "agent.jsonl"
    agent.write_text("\n".join(json.dumps(r) for r in [
        {"session": "s", "step": "0", "output_tokens": 10, "new_tokens": 5},
        {"session": "s", "step": "1", "parent": "0", "output_tokens": 10, "new_tokens": 5,
         "tool_gap_s": 0.5},
        {"session": "s", "step": "2", "parent": "0", "agent": "sub", "output_tokens": 7,
         "new_tokens": 4}]) + "\n")
    p = llmbench("datasets", "inspect", str(agent))
    assert p.returncode == 0, p.stderr
    assert "agent trace, format agent" in p.stdout and "sessions:       1 (1 sub-agents)" in p.stdout
    assert "tool gaps:      min 500" in p.stdout
    bad = tmp_path / "bad.jsonl"
    bad.write_text(HEAD + "\n{oops\n")
    p = llmbench("datasets", "inspect", str(bad))
    assert p.returncode != 0 and f"{bad}:2: not JSON" in p.stderr
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_a_session_started_while_a_tool_call_is_out_is_its_sub_agent():
    link = Linker()
    main = messages_of("openai-chat", {"messages": [{"role": "user", "content": "fix the bug"}]})
    a = link.link(1, main, None, None, arrival=0.0)
    link.ended(a.session, 1.0, tool_call=True)
    sub = messages_of("openai-chat", {"messages": [{"role": "user", "content": "read a.py"}]})
    b = link.link(2, sub, None, None, arrival=1.2)
    assert b.session != a.session and b.parent == a.session
    link.ended(a.session, 1.0, tool_call=False)         # its reply was an answer: no tool out
    c = link.link(3, messages_of("openai-chat", {"messages": [{"role": "user", "content": "x"}]}),
                  None, None, arrival=5.0)
    assert c.parent is None


# -- replay: a recorded request as the replay sends it --------------------------------------------
def test_an_anthropic_request_replays_as_chat_messages_its_api_turns_back():
    from llmbench.wire.anthropic import body as messages_body
    from llmbench.workload.recording import replayed
    tools = [{"name": "tool_1", "description": "d", "input_schema": {"type": "object"}}]
    req = {"model": "m", "max_tokens": 8, "system": "be brief", "tools": tools,
           "tool_choice": {"type": "any"},
           "messages": [{"role": "user", "content": "find a train"},
                        {"role": "assistant", "content": [
                            {"type": "text", "text": "looking"},
                            {"type": "tool_use", "id": "tu_1", "name": "tool_1",
                             "input": {"a": 1}}]},
                        {"role": "user", "content": [
                            {"type": "tool_result", "tool_use_id": "tu_1",
                             "content": "06:25"}]}]}
    first = replayed("anthropic", req, 0, 0)
    assert first.api == "anthropic"
    assert first.extra == {"tools": tools, "tool_choice": {"type": "any"}}     # as recorded
    assert [m["role"] for m in first.own] == ["system", "user", "assistant", "tool"]
    assert first.own[2]["tool_calls"][0]["function"]["name"] == "tool_1"
    # the Messages body built from them is the recorded one's messages and system
    built = messages_body("m", list(first.own), 8, False, {})
    assert built["system"] == "be brief"
    assert built["messages"][1]["content"][-1] == req["messages"][1]["content"][-1]
    assert built["messages"][2] == req["messages"][2]
    # a later turn sends its own messages only (new_from 3: after system, user, reply)
    later = replayed("anthropic", req, 3, 1)
    assert [m["role"] for m in later.own] == ["tool"]


def test_a_turn_answers_the_live_call_and_the_salt_takes_the_first_words():
    from llmbench.wire.agents import ReplyText
    from llmbench.workload.recording import Replayed, replay_messages, trim_start
    t0 = Replayed("openai-chat", ({"role": "system", "content": "one two three four five"},
                                  {"role": "user", "content": "go"}))
    t1 = Replayed("openai-chat", ({"role": "tool", "tool_call_id": "call_recorded",
                                   "content": "result"},))
    live = ReplyText("", [{"id": "call_live", "type": "function",
                           "function": {"name": "f", "arguments": "{}"}}])
    msgs = replay_messages((t0, t1), 1, [live])
    assert msgs[2] == {"role": "assistant", "content": None,
                       "tool_calls": live.tool_calls}
    assert msgs[3] == {"role": "tool", "tool_call_id": "call_live", "content": "result"}
    # the live reply called no tool: the result is the user's text
    msgs = replay_messages((t0, t1), 1, ["plain answer"])
    assert msgs[2:] == [{"role": "assistant", "content": "plain answer"},
                        {"role": "user", "content": "result"}]
    # 2 tokens of salt: the first message loses its first 2 words (one token each here)
    trimmed = trim_start(t0.own, 2, lambda text: len(text.split()))
    assert trimmed[0]["content"] == "three four five" and trimmed[1] == t0.own[1]
    assert trim_start(t0.own, 0, len) is t0.own
    one = ({"role": "user", "content": "alone"},)
    assert trim_start(one, 4, lambda text: len(text.split())) == one   # a word stays


def test_a_recording_loads_with_its_turns_as_recorded(tmp_path):
    from llmbench.workload.traces import trace_workload
    body = {"model": "m", "messages": [{"role": "user", "content": "alpha beta gamma delta"}],
            "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "auto"}
    lines_ = [{"llmbench_recording": 1, "text": "anonymised"},
              {"timestamp": 0, "session_id": "s1", "turn": 0, "api": "anthropic",
               "request": {"model": "m", "max_tokens": 4, "system": "sys words here",
                           "messages": [{"role": "user", "content": "hi there"}]},
               "input_length": 9, "output_length": 4},
              {"timestamp": 5, "session_id": "s2", "turn": 0, "api": "openai-chat",
               "request": body, "input_length": 9, "output_length": 4}]
    path = tmp_path / "rec.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines_))
    tr, wl = trace_workload(str(path), approx_tokenizer(), reserve=1)
    a, b = tr.items
    assert a.recorded[0].api == "anthropic" and b.recorded[0].api == "openai-chat"
    assert a.recorded[0].own[0] == {"role": "system", "content": "words here"}   # salt's place
    assert b.recorded[0].extra == {"tools": body["tools"], "tool_choice": "auto"}
    said = [w for w in wl.warnings if "recorded with" in w]
    assert len(said) == 1 and "1 anthropic, 1 openai-chat" in said[0]


@pytest.mark.parametrize("api,body", [
    ("anthropic", {"system": [{"type": "text", "text": "s"}, 5], "messages": [
        "not a message", {"role": "user", "content": 7},
        {"role": "user", "content": [None, {"type": "tool_result"}, {"type": "image"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "input": None}]}]}),
    ("openai-chat", {"messages": ["x", {"role": "user", "content": None}], "tools": None,
                     "tool_choice": "auto"}),
    ("responses", {"instructions": "i", "input": [{"type": "function_call_output"}, 3]}),
    ("openai", {"prompt": ["a", "b"]}),
])
def test_an_odd_recorded_body_still_replays(api, body):
    """A recorded body of an odd shape (the server took it) becomes messages without a
    traceback: what cannot be a message is an empty user turn, what is not text is left out."""
    from llmbench.workload.recording import replay_messages, replayed
    r = replayed(api, body, 0, 0)
    assert all(isinstance(m, dict) and "role" in m for m in r.own)
    assert "tools" not in r.extra and "tool_choice" not in r.extra   # no tools: no choice
    msgs = replay_messages((r, r), 1, ["reply"])
    assert msgs[len(r.own)] == {"role": "assistant", "content": "reply"}
