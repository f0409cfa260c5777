"""``llmbench record`` (issue 47): the recording proxy started as the CLI on a free loopback port,
in front of the mock; real clients (the ``openai`` and ``anthropic`` SDKs, pip extras of
``.[test]``) talk to it unchanged; the recording is checked line by line (sessions, turns, gaps,
usage, anonymised text, no key), then replayed with ``llmbench run --trace``."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from llmbench.mock_server import MockConfig, MockServer
from tests.helpers import ENV, ROOT, free_port, llmbench

try:
    import anthropic
    import openai
except ImportError as exc:        # a FAIL naming the fix, never a skip
    raise ImportError(f"{exc}: tests/integration/test_record.py needs the openai and anthropic "
                      "SDKs: pip install -e '.[test]' (scripts/install-test-deps.sh)") from None

KEY = "sk-test-SECRET-9f8e7d"
SYSTEM = ("You are a meticulous travel planner who writes itineraries for families visiting "
          "old European harbour towns in late autumn, with budgets and train times.")
ASKS = ["Plan three quiet days in Bergen for two adults and a toddler who naps at noon.",
        "Swap the second day for a ferry trip along the fjord if the weather forecast allows it.",
        "Now list what we should pack, given rain, wind and a folding pushchair."]
TOOL = {"type": "function", "function": {
    "name": "lookup_train_times", "description": "Finds departures between two stations today",
    "parameters": {"type": "object", "properties": {"origin": {"type": "string"},
                                                    "destination": {"type": "string"}},
                   "required": ["origin", "destination"]}}}


class Recorder:
    """``llmbench record`` as a child process; ``stop()`` sends Ctrl-C and returns its output."""

    def __init__(self, upstream: str, out: Path, *extra: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "llmbench.cli", "record", "--upstream", upstream,
             "--listen", "127.0.0.1:0", "--out", str(out), *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=ROOT)
        line = self.proc.stderr.readline()
        m = re.search(r"point clients at (http://\S+)", line)
        assert m, f"no listening line: {line!r}"
        self.url = m.group(1)

    def stop(self) -> tuple[str, str]:
        self.proc.send_signal(signal.SIGINT)
        out, err = self.proc.communicate(timeout=30)
        assert self.proc.returncode == 0, err
        return out, err


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def four_grams(text: str) -> set[tuple[str, ...]]:
    w = re.findall(r"[a-z]+", text.lower())
    return {tuple(w[i:i + 4]) for i in range(len(w) - 3)}


@pytest.fixture
def mock(mock_factory):
    return mock_factory(ttft_ms=15, itl_ms=2, tokens=12)


def chat_and_tools(base: str) -> list[str]:
    """A three-turn streamed chat and a two-step tool loop, as an application would."""
    c = openai.OpenAI(base_url=base + "/v1", api_key=KEY, max_retries=0)
    msgs = [{"role": "system", "content": SYSTEM}]
    replies = []
    for ask in ASKS:
        msgs.append({"role": "user", "content": ask})
        stream = c.chat.completions.create(model="mock", messages=msgs, stream=True,
                                           max_tokens=12, temperature=0.3,
                                           stream_options={"include_usage": True})
        text = "".join(ch.choices[0].delta.content or "" for ch in stream if ch.choices)
        replies.append(text)
        msgs.append({"role": "assistant", "content": text})
        time.sleep(0.05)                       # the person reads and types
    tmsgs = [{"role": "user", "content": "Which train gets me from Oslo to Bergen before noon?"}]
    r = c.chat.completions.create(model="mock", messages=tmsgs, tools=[TOOL], max_tokens=12,
                                  tool_choice="required")
    call = r.choices[0].message.tool_calls[0]
    tmsgs.append(r.choices[0].message.model_dump(exclude_none=True))
    tmsgs.append({"role": "tool", "tool_call_id": call.id,
                  "content": "Departures: 06:25 arriving 13:10, 08:25 arriving 15:05."})
    r2 = c.chat.completions.create(model="mock", messages=tmsgs, tools=[TOOL], max_tokens=12,
                                   tool_choice="none")
    replies.append(r2.choices[0].message.content or "")
    return replies


def test_openai_sdk_through_the_recorder_and_the_recording(mock, tmp_path):
    out = tmp_path / "traffic.jsonl"
    rec = Recorder(mock.url, out)
    replies = chat_and_tools(rec.url)
    assert all(r.strip() for r in replies), replies          # the replies came through
    # a request of no LLM API passes through, not recorded
    models = openai.OpenAI(base_url=rec.url + "/v1", api_key=KEY).models.list()
    assert [m.id for m in models.data] == ["mock"]
    stdout, stderr = rec.stop()

    head, *reqs = lines(out)
    assert head["llmbench_recording"] == 1 and head["text"] == "anonymised"
    assert len(reqs) == 5, reqs
    chat, tools = reqs[:3], reqs[3:]
    assert [(r["session_id"], r["turn"]) for r in chat] == [("s1", 0), ("s1", 1), ("s1", 2)]
    assert [(r["session_id"], r["turn"]) for r in tools] == [("s2", 0), ("s2", 1)]
    assert [r["new_from"] for r in chat] == [0, 3, 5]
    assert chat[0]["after_ms"] is None
    for r in chat[1:]:
        assert 40 <= r["after_ms"] < 5000               # the 50 ms the "person" took
        assert r["timestamp"] > 0
    for r in reqs:
        assert r["api"] == "openai-chat" and r["endpoint"] == "/v1/chat/completions"
        assert r["status"] == 200 and r["input_length"] > 0 and r["output_length"] == 12
        assert r["e2el_ms"] > 0
    for r in chat:
        assert r["stream"] and r["ttft_ms"] > 0 and len(r["itl_ms"]) >= 1
        assert r["sampling"] == {"temperature": 0.3} and r["max_tokens"] == 12
    assert tools[0]["tools"] == 1
    # the growing history keeps its structure: turn 0's messages open turn 1's verbatim
    m0, m1 = chat[0]["request"]["messages"], chat[1]["request"]["messages"]
    assert m1[:2] == m0 and m1[2]["role"] == "assistant"
    # anonymised: no 4-word run of what the clients sent, no key, no header
    text = out.read_text()
    sent = " ".join([SYSTEM, *ASKS, *replies, TOOL["function"]["description"],
                     "Departures: 06:25 arriving 13:10, 08:25 arriving 15:05."])
    assert not four_grams(sent) & four_grams(text)
    assert "lookup_train_times" not in text and "Bergen" not in text
    assert KEY not in text and "9f8e7d" not in text and "uthorization" not in text
    assert "Recorded 5 requests in 2 sessions" in stdout
    assert "Prompt tokens repeating an earlier prefix:" in stdout
    assert KEY not in stdout + stderr


def test_keep_text_and_the_anthropic_sdk(mock, tmp_path):
    out = tmp_path / "kept.jsonl"
    rec = Recorder(mock.url, out, "--keep-text")
    c = anthropic.Anthropic(base_url=rec.url, api_key=KEY, max_retries=0)
    history = [{"role": "user", "content": ASKS[0]}]
    with c.messages.stream(model="mock", max_tokens=12, system=SYSTEM,
                           messages=history) as s:
        first = "".join(s.text_stream)
    history += [{"role": "assistant", "content": first}, {"role": "user", "content": ASKS[1]}]
    second = c.messages.create(model="mock", max_tokens=12, system=SYSTEM, messages=history)
    assert first.strip() and second.content[0].text.strip()
    stdout, _ = rec.stop()
    head, *reqs = lines(out)
    assert head["text"] == "original" and "--keep-text" in head["note"]
    assert [(r["api"], r["session_id"], r["turn"]) for r in reqs] == [
        ("anthropic", "s1", 0), ("anthropic", "s1", 1)]
    assert reqs[0]["request"]["system"] == SYSTEM          # kept, as the file says
    assert reqs[0]["output_length"] == 12 and reqs[0]["input_length"] > 0
    text = out.read_text()
    assert KEY not in text and "x-api-key" not in text.lower()


def test_an_upstream_that_is_down_is_one_line_each_side(tmp_path):
    out = tmp_path / "none.jsonl"
    rec = Recorder(f"http://127.0.0.1:{free_port()}", out)
    c = openai.OpenAI(base_url=rec.url + "/v1", api_key=KEY, max_retries=0)
    with pytest.raises(openai.APIStatusError) as info:
        c.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert info.value.status_code == 502
    body = info.value.response.text
    assert body.count("\n") == 1 and "unreachable" in body
    stdout, stderr = rec.stop()
    logged = [x for x in stderr.splitlines() if "unreachable" in x]
    assert len(logged) == 1 and "Traceback" not in stderr and KEY not in stderr
    assert "1 failed: upstream down" in stdout


def test_a_recording_replays_to_the_same_sessions(mock, tmp_path):
    out = tmp_path / "traffic.jsonl"
    rec = Recorder(mock.url, out)
    chat_and_tools(rec.url)
    rec.stop()
    _, *reqs = lines(out)
    runs = tmp_path / "runs"
    p = llmbench("run", "--url", mock.url + "/v1", "--trace", str(out), "--same-prompts",
                 "--out", str(runs), "--quiet")
    assert p.returncode == 0, p.stderr
    folder = next(runs.iterdir())
    got = [json.loads(x) for x in (folder / "requests.jsonl").read_text().splitlines()]
    got = [g for g in got if not g.get("warmup")]
    assert len(got) == len(reqs)
    by_conv: dict[str, list[dict]] = {}
    for g in sorted(got, key=lambda g: g["start"]):
        by_conv.setdefault(g["conversation"], []).append(g)
    assert sorted(len(v) for v in by_conv.values()) == [2, 3]      # sessions and turns
    for turns in by_conv.values():
        assert [t["turn"] for t in turns] == list(range(len(turns)))
        for a, b in zip(turns, turns[1:]):
            assert b["start"] >= a["end"]                    # each turn after its reply
    assert all(g["output_tokens"] == r["output_length"] for g, r in zip(got, reqs))


def test_a_recorded_agent_run_replays_to_the_same_session_shape(mock, tmp_path):
    """``run --workload agent`` (tool loops, sub-agents fanned out) through the recorder: the
    sub-agents are sessions of their own with the spawning session as parent, and the replay
    sends the same sessions, turns and tool gaps (each turn no sooner than its gap after the
    live reply)."""
    out = tmp_path / "agents.jsonl"
    rec = Recorder(mock.url, out)
    p = llmbench("run", "--url", rec.url + "/v1", "--model", "mock", "--workload", "agent",
                 "--agent-fanout", "1", "--agent-steps", "3", "--agent-sub-steps", "2",
                 "--agent-tool-latency", "100ms", "--agent-system-tokens", "200",
                 "--agent-result-tokens", "50", "--concurrency", "1", "--requests", "12",
                 "--out", str(tmp_path / "orig"), "--quiet")
    assert p.returncode == 0, p.stderr
    rec.stop()
    orig = [json.loads(x) for x in next((tmp_path / "orig").iterdir()).joinpath(
        "requests.jsonl").read_text().splitlines()]
    _, *reqs = lines(out)
    # the run's own check before it starts (one token asked) is traffic too: recorded first
    assert reqs[0]["max_tokens"] == 1 and len(reqs) == len(orig) + 1
    subs = [r for r in reqs if r["turn"] == 0 and r["parent_session"] is not None]
    assert subs, "no sub-agent linked to the session that spawned it"
    gaps = [r["after_ms"] for r in reqs if r["turn"] > 0]
    assert gaps and all(g is not None and g >= 0 for g in gaps)
    assert max(gaps) >= 50                       # the tool's 100 ms (+-), not a reply's echo
    runs = tmp_path / "replay"
    p = llmbench("run", "--url", mock.url + "/v1", "--trace", str(out), "--same-prompts",
                 "--out", str(runs), "--quiet")
    assert p.returncode == 0, p.stderr
    got = [json.loads(x) for x in next(runs.iterdir()).joinpath(
        "requests.jsonl").read_text().splitlines()]
    shape = {}
    for r in reqs:
        shape[r["session_id"]] = shape.get(r["session_id"], 0) + 1
    replayed = {}
    for g in got:
        sid = g["conversation"].removeprefix("trace-s:")
        replayed[sid] = replayed.get(sid, 0) + 1
    assert replayed == shape                    # the same sessions, the same turns each
    by = {(g["conversation"].removeprefix("trace-s:"), g["turn"]): g for g in got}
    for r in reqs:
        if r["turn"] > 0:
            prev, this = by[(r["session_id"], r["turn"] - 1)], by[(r["session_id"], r["turn"])]
            # the recorded tool gap after the live reply (10 ms of slack for timers)
            assert this["start"] - prev["end"] >= r["after_ms"] / 1000 - 0.01


def test_a_full_disk_is_one_line_and_the_traffic_still_flows(mock, tmp_path):
    """/dev/full refuses every write (ENOSPC): the recorder says so once and keeps proxying."""
    rec = Recorder(mock.url, Path("/dev/full"))
    c = openai.OpenAI(base_url=rec.url + "/v1", api_key=KEY, max_retries=0)
    for ask in ASKS:
        r = c.chat.completions.create(model="mock", max_tokens=4,
                                      messages=[{"role": "user", "content": ask}])
        assert r.choices[0].message.content
    _, stderr = rec.stop()
    said = [x for x in stderr.splitlines() if "cannot write the recording" in x]
    assert len(said) == 1 and "Traceback" not in stderr, stderr


def test_ollama_responses_and_embeddings_pass_through_and_are_recorded(mock, tmp_path):
    """Ollama's /api/chat (NDJSON stream), the Responses API linked by previous_response_id,
    and embeddings (never streamed): each passes through and is one line of the recording."""
    import httpx
    out = tmp_path / "apis.jsonl"
    rec = Recorder(mock.url, out)
    with httpx.Client(base_url=rec.url, timeout=30) as h:
        with h.stream("POST", "/api/chat", json={
                "model": "mock", "messages": [{"role": "user", "content": ASKS[0]}],
                "options": {"num_predict": 6}}) as r:
            got = [json.loads(x) for x in r.iter_lines() if x]
        assert got[-1]["done"] and any(g.get("message", {}).get("content") for g in got)
        first = h.post("/v1/responses", json={"model": "mock", "input": ASKS[1],
                                               "max_output_tokens": 6, "store": True}).json()
        second = h.post("/v1/responses", json={
            "model": "mock", "input": ASKS[2], "max_output_tokens": 6,
            "previous_response_id": first["id"]})
        assert second.status_code == 200, second.text
        emb = h.post("/v1/embeddings", json={"model": "mock", "input": ["a b c", "d e"]})
        assert len(emb.json()["data"]) == 2
    rec.stop()
    _, *reqs = lines(out)
    assert [r["api"] for r in reqs] == ["ollama", "responses", "responses", "embeddings"]
    assert reqs[0]["output_length"] == 6 and reqs[0]["ttft_ms"] > 0
    assert reqs[0]["max_tokens"] == 6
    assert (reqs[1]["session_id"], reqs[2]["session_id"], reqs[2]["turn"]) == ("s2", "s2", 1)
    assert reqs[2]["request"]["previous_response_id"] == first["id"]   # structure, kept
    assert reqs[3]["stream"] is False and reqs[3]["input_length"] is not None


def test_ramp_trace_replays_the_recording_at_growing_scale(mock, mock_factory, tmp_path):
    """``ramp --trace FILE --users 1,2``: step 0 replays the recorded sessions once, step 1
    twice over (each copy with a salt of its own), over loopback HTTP against the mock; each
    session's turns in order, each after its reply; the table's load is users = the step's
    multiple x the recorded sessions; the run folder loads."""
    import llmbench as api
    out = tmp_path / "traffic.jsonl"
    rec = Recorder(mock.url, out)
    chat_and_tools(rec.url)
    rec.stop()
    _, *reqs = lines(out)
    sessions = {r["session_id"] for r in reqs}
    runs = tmp_path / "runs"
    cached = mock_factory(ttft_ms=15, itl_ms=2, tokens=12, prefix_cache=True)
    p = llmbench("ramp", "--url", cached.url + "/v1", "--model", "mock", "--trace", str(out),
                 "--users", "1,2", "--keep-going", "--threshold", "ttft.p95<=60s",
                 "--hold", "0.2s",
                 "--out", str(runs))
    assert p.returncode == 0, p.stderr
    folder = next(runs.iterdir())
    got = [json.loads(x) for x in (folder / "requests.jsonl").read_text().splitlines()]
    got = [g for g in got if not g.get("warmup") and g.get("step") is not None]
    per_step = [[g for g in got if g["step"] == k] for k in (0, 1)]
    assert [len(s) for s in per_step] == [len(reqs), 2 * len(reqs)]
    for k, step in enumerate(per_step):
        by_conv: dict[str, list[dict]] = {}
        for g in sorted(step, key=lambda g: g["start"]):
            by_conv.setdefault(g["conversation"], []).append(g)
        assert len(by_conv) == (k + 1) * len(sessions)     # each copy its own sessions
        for turns in by_conv.values():
            assert [t["turn"] for t in turns] == list(range(len(turns)))
            for a, b in zip(turns, turns[1:]):
                assert b["start"] >= a["end"]               # each turn after its reply
    # each copy's salt is its own: the first request of every copy, in either step, found
    # nothing of another copy's prompts in the mock's prefix cache (one salt for all would
    # have found step 0's whole first turn)
    firsts: dict[str, dict] = {}
    for g in sorted(got, key=lambda g: g["start"]):
        firsts.setdefault(g["conversation"].rsplit("~", 1)[1], g)
    assert len(firsts) == 3 and all(g["turn"] == 0 for g in firsts.values())
    assert [g["cached_tokens"] for g in firsts.values()] == [0, 0, 0], firsts
    run = api.load_run(folder)
    assert [s.load for s in run.steps] == [len(sessions), 2 * len(sessions)]
    # a step holds until its copies have played out: every request of the step is in its
    # window (--hold 0.2s is far shorter than the recording), so the table judges them all
    assert [s.summary.requests for s in run.steps] == [len(reqs), 2 * len(reqs)]
    assert run.load_unit == "users"
    assert run.config["ramp"]["trace"] == {"sessions": len(sessions), "multiples": [1, 2],
                                           "speed": 1.0}
    assert "Each step replays the recording's" in p.stdout + p.stderr
    # a recorded session is a user while its turns play: each comes in and leaves (none left
    # at the end), and step 1's two copies of the first session played at once
    ups = [n for _, n in run.findings.user_changes]
    assert ups[-1] == 0 and max(ups) >= 2
    # and it writes back the same bytes, as every run folder does
    (tmp_path / "again").mkdir()
    run.save(tmp_path / "again")
    assert (tmp_path / "again" / "run.json").read_text() == (folder / "run.json").read_text()
    # a bad multiple is one line naming the flag, no traceback
    for bad in ("0,1", "nan", "1,99999999"):
        p = llmbench("ramp", "--url", mock.url + "/v1", "--model", "mock", "--trace",
                     str(out), "--users", bad, "--out", str(tmp_path / "bad"))
        assert p.returncode != 0 and "--users" in p.stderr and "Traceback" not in p.stderr, \
            p.stderr
    p = llmbench("ramp", "--url", mock.url + "/v1", "--trace", str(out), "--trace-speed",
                 "-1", "--out", str(tmp_path / "bad"))
    assert p.returncode != 0 and "--trace-speed" in p.stderr and "Traceback" not in p.stderr
    broken = tmp_path / "broken.jsonl"
    broken.write_text(out.read_text() + "{not json\n")
    p = llmbench("ramp", "--url", mock.url + "/v1", "--model", "mock", "--trace", str(broken),
                 "--users", "1", "--out", str(tmp_path / "bad"))
    assert p.returncode != 0 and f"{broken}:{len(reqs) + 2}: not JSON" in p.stderr \
        and "Traceback" not in p.stderr, p.stderr


def test_a_replay_sends_each_request_as_recorded_in_its_own_api(mock, tmp_path):
    """The openai SDK's chat and tool loop and the anthropic SDK's chat, recorded, then
    replayed (with the run's salt) against a fresh mock that logs what it was sent: each
    request goes in the API it was recorded with (the Messages API's route, without --api),
    the tools go as tools in the body (the replayed tool turn's reply is a call again, and the
    next turn answers the live call's id), and every prompt is as long as recorded."""
    out = tmp_path / "mixed.jsonl"
    rec = Recorder(mock.url, out)
    chat_and_tools(rec.url)
    c = anthropic.Anthropic(base_url=rec.url, api_key=KEY, max_retries=0)
    history = [{"role": "user", "content": ASKS[0]}]
    with c.messages.stream(model="mock", max_tokens=12, system=SYSTEM, messages=history) as s:
        first = "".join(s.text_stream)
    history += [{"role": "assistant", "content": first}, {"role": "user", "content": ASKS[1]}]
    c.messages.create(model="mock", max_tokens=12, system=SYSTEM, messages=history)
    rec.stop()
    _, *reqs = lines(out)
    assert [r["api"] for r in reqs].count("anthropic") == 2 and len(reqs) == 7

    log = tmp_path / "sent.jsonl"
    runs = tmp_path / "replay"
    # the mock's log of what it was sent is complete once it stopped
    with MockServer(MockConfig(ttft_ms=5, itl_ms=1), record=str(log),
                    record_prompts=True) as target:
        p = llmbench("run", "--url", target.url + "/v1", "--trace", str(out), "--out",
                     str(runs))
    assert p.returncode == 0, p.stderr
    said = (p.stdout + p.stderr).count("replayed in the API it was recorded with")
    assert said == 1, p.stdout + p.stderr                     # said once
    got = [json.loads(x) for x in next(runs.iterdir()).joinpath(
        "requests.jsonl").read_text().splitlines()]
    by = {(g["conversation"].removeprefix("trace-s:"), g["turn"]): g for g in got}
    sent = {json.loads(x)["request_id"]: json.loads(x) for x in log.read_text().splitlines()}
    routes = {}
    for r in reqs:
        g = by[(r["session_id"], r["turn"])]
        assert g["ok"], g
        # the prompt as long as recorded: the salt took the place of as many tokens; after
        # a tool call, the live call's arguments (the server's choice) may take a token more
        # or less than the recorded call's
        after_call = r["turn"] > 0 and r["tools"]
        assert abs(g["prompt_tokens"] - r["input_length"]) <= (
            0.02 * r["input_length"] if after_call else 0), (r, g)
        assert g["output_tokens"] == r["output_length"]
        routes[(r["api"], r["session_id"], r["turn"])] = sent[g["request_id"]]["route"]
    assert {k: v for k, v in routes.items() if k[0] == "anthropic"} \
        and all(v == "messages" for k, v in routes.items() if k[0] == "anthropic")
    assert all(v == "chat" for k, v in routes.items() if k[0] == "openai-chat")
    # the tool loop: its first turn offered the tools with tool_choice required (a call
    # again), the second answers the live call by its id
    tool0 = next(r for r in reqs if r["tools"] and r["turn"] == 0)
    g0 = by[(tool0["session_id"], 0)]
    assert g0["first_tool"] is not None, g0
    g1 = by[(tool0["session_id"], 1)]
    msgs = sent[g1["request_id"]]["messages"]
    call = next(m for m in msgs if m["role"] == "assistant")["tool_calls"][0]
    answer = next(m for m in msgs if m["role"] == "tool")
    assert answer["tool_call_id"] == call["id"]
