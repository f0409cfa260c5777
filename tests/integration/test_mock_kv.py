"""The mock under agents (issue 35 part 5): a KV budget shared by all sessions (--kv-tokens),
checked on paper over HTTP.

The model (llmbench/mock_server/kvcache.py): a request's cached tokens are the leading whole
16-token blocks of its prompt found in the cache; when it ends, its prompt and its reply (as the
next turn sends it back) stay cached; when the cache exceeds the budget, the least recently used
prefix is evicted whole. So for sessions that take turns (each turn: the history, the reply, a
new user message), with a budget for 4 sessions of 8k tokens:

- 4 sessions stay warm: every returning turn finds its whole previous context cached, i.e.
  ``16 * floor(L / 16)`` tokens where L = the previous prompt + the reply as sent back;
- 6 sessions thrash: each returning turn finds nothing (the 5 turns since its own evicted it)
  and re-prefills its whole context, at the mock's prefill cost per uncached token.

Every count below is computed here from the words sent (each word is one of the mock's tokens,
each message adds 5 for its ``<|role|>`` marker), never read back from the mock first.
"""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

from llmbench.mock_server.kvcache import Held, KvCache
from llmbench.servers.prometheus import parse_prometheus

BLOCK = 16
BUDGET = 4 * 8192               # room for 4 sessions of 8k tokens
REPLY = 32                      # tokens of every reply
FIRST, STEP, TURNS = 6000, 200, 4     # the first user message, each next one (a tool result)
MARK = 5                        # "<|user|>" is 5 of the mock's tokens: < | user | >


def words(tag: str, n: int) -> str:
    return " ".join(f"{tag}w{k}" for k in range(n))


class Session:
    """A conversation as an agent keeps it: its history, and the paper's counts."""

    def __init__(self, i: int) -> None:
        self.i = i
        self.messages = [{"role": "user", "content": words(f"s{i}t0", FIRST)}]
        self.prompt = MARK + FIRST          # tokens of the prompt the next request sends
        self.last_context = 0               # previous prompt + its reply, as sent back

    def answered(self, reply: str, turn: int) -> None:
        self.messages += [{"role": "assistant", "content": reply},
                          {"role": "user", "content": words(f"s{self.i}t{turn}", STEP)}]
        self.last_context = self.prompt + MARK + REPLY
        self.prompt = self.last_context + MARK + STEP


def ask(url: str, api: str, s: Session) -> tuple[int, int, str]:
    """One turn over ``api``: (prompt tokens, cached tokens, the reply's text), as the API's
    usage says them."""
    if api == "chat":
        r = httpx.post(url + "/v1/chat/completions", timeout=60, json={
            "model": "mock", "messages": s.messages, "max_tokens": REPLY}).json()
        u = r["usage"]
        return u["prompt_tokens"], u["prompt_tokens_details"]["cached_tokens"], \
            r["choices"][0]["message"]["content"]
    if api == "responses":
        r = httpx.post(url + "/v1/responses", timeout=60, json={
            "model": "mock", "input": s.messages, "max_output_tokens": REPLY}).json()
        u = r["usage"]
        return u["input_tokens"], u["input_tokens_details"]["cached_tokens"], \
            r["output"][0]["content"][0]["text"]
    if api == "messages":
        r = httpx.post(url + "/v1/messages", timeout=60, json={
            "model": "mock", "messages": s.messages, "max_tokens": REPLY}).json()
        u = r["usage"]
        # the API counts the uncached part as input_tokens
        return u["input_tokens"] + u["cache_read_input_tokens"], u["cache_read_input_tokens"], \
            r["content"][0]["text"]
    r = httpx.post(url + "/api/chat", timeout=60, json={
        "model": "mock", "messages": s.messages, "stream": False,
        "options": {"num_predict": REPLY}}).json()
    return r["prompt_eval_count"], r["prompt_eval_cached_count"], r["message"]["content"]


def take_turns(url: str, api: str, n_sessions: int) -> list[tuple[int, int, int, int]]:
    """Round-robin turns of ``n_sessions`` sessions, one request at a time: per request
    (turn, session, cached tokens the server reported, what the paper says if warm)."""
    sessions = [Session(i) for i in range(n_sessions)]
    out = []
    for turn in range(1, TURNS + 1):
        for s in sessions:
            prompt, cached, reply = ask(url, api, s)
            assert prompt == s.prompt, (turn, s.i, prompt, s.prompt)    # the paper's count
            assert len(reply.split()) == REPLY
            warm = BLOCK * (s.last_context // BLOCK)
            out.append((turn, s.i, cached, warm))
            s.answered(reply, turn)
    return out


@pytest.mark.parametrize("api", ["chat", "messages"])
def test_a_budget_for_4_sessions_keeps_4_warm_and_6_thrash(mock_factory, api):
    # the largest context, at the last turn, fits 4 times in the budget; 6 first contexts do not
    last = MARK + FIRST + (TURNS - 1) * (MARK + REPLY + MARK + STEP) + MARK + REPLY
    assert 4 * last <= BUDGET < 6 * (MARK + FIRST + MARK + REPLY)
    warm = mock_factory(ttft_ms=0, itl_ms=0, kv_tokens=BUDGET)
    got = take_turns(warm.url, api, 4)
    assert [c for t, _, c, _ in got if t == 1] == [0] * 4           # nothing cached yet
    assert [(c, w) for t, _, c, w in got if t > 1] == [(w, w) for t, _, _, w in got if t > 1]
    assert all(c >= 6000 for t, _, c, _ in got if t > 1)
    thrash = mock_factory(ttft_ms=0, itl_ms=0, kv_tokens=BUDGET)
    got = take_turns(thrash.url, api, 6)
    # each session's prefix was evicted by the 5 turns since its own: it prefills it all again
    assert [c for _, _, c, _ in got] == [0] * len(got)
    m = metrics(thrash.url)
    assert m["llmbench_mock:kv_evicted_tokens_total"] > 0
    assert 0 < m["llmbench_mock:kv_cached_tokens"] <= BUDGET
    assert metrics(warm.url)["llmbench_mock:kv_evicted_tokens_total"] == 0


def metrics(url: str) -> dict[str, float]:
    text = httpx.get(url + "/metrics").text
    return {name: sum(v for _, v in series) for name, series in parse_prometheus(text).items()}


@pytest.mark.parametrize("api", ["chat", "responses", "messages", "ollama"])
def test_each_api_reports_the_cached_tokens_in_its_own_usage(mock_factory, api):
    m = mock_factory(ttft_ms=0, itl_ms=0, kv_tokens=BUDGET)
    s = Session(0)
    prompt, cached, reply = ask(m.url, api, s)
    assert (prompt, cached) == (MARK + FIRST, 0)
    s.answered(reply, 1)
    prompt, cached, _ = ask(m.url, api, s)
    assert prompt == s.prompt and cached == BLOCK * (s.last_context // BLOCK)
    # the server's own counters say the same: vLLM's prefix-cache queries and hits, in tokens
    got = metrics(m.url)
    assert got["vllm:prefix_cache_queries_total"] == MARK + FIRST + prompt
    assert got["vllm:prefix_cache_hits_total"] == cached


def test_a_returning_session_pays_the_prefill_of_what_was_evicted(mock_factory):
    """At 0.05 ms a token, the thrashing turn's whole-context prefill is at least ~300 ms of its
    TTFT; the same turn warm prefills its ~240 new tokens only (a lower bound each, the machine
    may be busy; the warm one is checked by its reported cached count)."""
    m = mock_factory(ttft_ms=0, itl_ms=0, kv_tokens=8192, prefill_ms_per_token=0.05)
    a, b = Session(0), Session(1)
    for s in (a, b):
        _, _, reply = ask(m.url, "chat", s)
        s.answered(reply, 1)
    start = time.perf_counter()
    _, cached, _ = ask(m.url, "chat", a)        # b's turn evicted a: a 6k budget holds one
    took = time.perf_counter() - start
    assert cached == 0 and took >= a.prompt * 0.05 / 1000 * 0.95


def test_counters_and_slots_while_a_request_runs(mock_factory):
    m = mock_factory(ttft_ms=0, itl_ms=30, kv_tokens=BUDGET, parallel=2)
    s = Session(0)
    _, _, reply = ask(m.url, "chat", s)
    s.answered(reply, 1)
    done = threading.Event()

    def slow() -> None:
        httpx.post(m.url + "/v1/chat/completions", timeout=60, json={
            "model": "mock", "messages": s.messages, "max_tokens": 20})
        done.set()
    threading.Thread(target=slow, daemon=True).start()
    deadline = time.time() + 20
    while time.time() < deadline:
        slots = httpx.get(m.url + "/slots").json()
        if slots[0]["is_processing"]:
            break
        time.sleep(0.01)
    assert len(slots) == 2 and slots[0]["is_processing"] and not slots[1]["is_processing"]
    first = slots[0]
    assert first["n_prompt_tokens"] == s.prompt
    assert first["n_prompt_tokens_cache"] == BLOCK * (s.last_context // BLOCK)
    assert first["n_prompt_tokens_processed"] == s.prompt - first["n_prompt_tokens_cache"]
    assert first["n_ctx"] == BUDGET // 2 and first["params"]["n_predict"] == 20
    got = metrics(m.url)
    # vLLM's usage counts the running request's KV; the mock's gauge all that the budget holds
    assert got["vllm:kv_cache_usage_perc"] == pytest.approx(
        (s.prompt + first["next_token"][0]["n_decoded"]) / BUDGET, abs=0.01)
    assert got["llmbench_mock:kv_cached_tokens"] >= BLOCK * (s.prompt // BLOCK)
    assert got["llmbench_mock:kv_budget_tokens"] == BUDGET
    assert done.wait(30)
    assert not httpx.get(m.url + "/slots").json()[0]["is_processing"]


def test_without_kv_tokens_the_mock_is_as_before(mock_factory):
    m = mock_factory(ttft_ms=0, itl_ms=0)
    s = Session(0)
    r = httpx.post(m.url + "/v1/chat/completions", json={
        "model": "mock", "messages": s.messages, "max_tokens": 4}).json()
    assert "prompt_tokens_details" not in r["usage"]
    o = httpx.post(m.url + "/api/chat", json={"model": "mock", "messages": s.messages,
                                               "stream": False}).json()
    assert "prompt_eval_cached_count" not in o
    text = httpx.get(m.url + "/metrics").text
    assert "llmbench_mock:kv_budget_tokens" not in text
    # the block-hashed prefix cache of --prefix-cache is unchanged: a whole repeated prompt hits
    p = mock_factory(ttft_ms=0, itl_ms=0, prefix_cache=True)
    for _ in range(2):
        u = httpx.post(p.url + "/v1/chat/completions", json={
            "model": "mock", "messages": s.messages, "max_tokens": 4}).json()["usage"]
    assert u["prompt_tokens_details"]["cached_tokens"] == BLOCK * (s.prompt // BLOCK)


def test_runtime_changes_and_a_bad_value(mock_factory):
    m = mock_factory(ttft_ms=0, itl_ms=0)
    assert httpx.post(m.url + "/admin/config", json={"kv_tokens": BUDGET}).status_code == 200
    s = Session(0)
    _, _, reply = ask(m.url, "chat", s)
    s.answered(reply, 1)
    assert ask(m.url, "chat", s)[1] > 0
    bad = httpx.post(m.url + "/admin/config", json={"kv_tokens": -1})
    assert bad.status_code == 400 and "kv_tokens" in bad.json()["error"]


# -- the model itself, pure --------------------------------------------------------------------
def one(kv: KvCache, prompt: list[str], reply: list[str]) -> int:
    keys = kv.keys(prompt)
    cached = kv.cached(keys, (len(prompt) - 1) // kv.block) * kv.block
    kv.hold(keys)
    held = Held(keys, prompt[len(keys) * kv.block:])
    kv.release(held, kv.keys(held.tail + reply, keys[-1] if keys else None))
    return cached


def test_the_last_prompt_token_is_always_computed():
    kv = KvCache(1024, 16)
    prompt = [f"t{i}" for i in range(64)]
    assert one(kv, prompt, ["r"]) == 0
    assert one(kv, prompt, ["r"]) == 48         # 64 cached, but the 64th token is computed


def test_a_shared_system_prompt_outlives_the_sessions_evicted_around_it():
    kv = KvCache(20 * 16, 16)                   # 20 blocks
    system = [f"sys{i}" for i in range(64)]     # 4 blocks every session shares
    sessions = {s: system + [f"{s}{i}" for i in range(96)] for s in "ABC"}   # 4 + 6 blocks each
    assert [one(kv, p, []) for p in sessions.values()] == [0, 64, 64]
    # A, B and C's own parts do not fit together (4 + 3 * 6 blocks > 20): C evicted A's own
    # part, never the shared system prompt
    assert one(kv, sessions["A"], []) == 64
    assert len(kv) <= 20


def test_held_blocks_are_never_evicted():
    kv = KvCache(4 * 16, 16)
    big = kv.keys([f"a{i}" for i in range(160)])       # 10 blocks, over the budget of 4
    kv.hold(big)
    other = kv.keys([f"b{i}" for i in range(32)])
    kv.hold(other)
    assert len(kv) == 12 and kv.pinned == 12           # over budget while they run
    kv.release(Held(other), [])
    kv.release(Held(big), [])
    assert len(kv) <= 4 and kv.pinned == 0


TOOLS = [{"type": "function", "function": {"name": "read_file", "parameters": {
    "type": "object", "required": ["path"], "properties": {"path": {"type": "string"}}}}}]


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_an_agent_step_finds_its_tool_call_cached(mock_factory, api):
    """A step that called a tool, then the tool's result: the next request's prompt holds the
    call as the model made it (the history renders it), so everything up to the result is a
    cached prefix."""
    from llmbench.mock_server.engine import mock_tokens
    m = mock_factory(ttft_ms=0, itl_ms=0, kv_tokens=BUDGET)
    task = words("task", 300)
    if api == "chat":
        r = httpx.post(m.url + "/v1/chat/completions", json={
            "model": "mock", "messages": [{"role": "user", "content": task}], "tools": TOOLS,
            "tool_choice": "required", "max_tokens": 200}).json()
        call = r["choices"][0]["message"]["tool_calls"][0]
        name, args = call["function"]["name"], call["function"]["arguments"]
        history = [{"role": "user", "content": task},
                   {"role": "assistant", "content": None, "tool_calls": [call]},
                   {"role": "tool", "tool_call_id": call["id"], "content": words("out", 100)}]
        r = httpx.post(m.url + "/v1/chat/completions", json={
            "model": "mock", "messages": history, "tools": TOOLS, "max_tokens": 8}).json()
        cached = r["usage"]["prompt_tokens_details"]["cached_tokens"]
    elif api == "responses":
        flat = [{"type": "function", **t["function"]} for t in TOOLS]
        r = httpx.post(m.url + "/v1/responses", json={
            "model": "mock", "input": [{"role": "user", "content": task}], "tools": flat,
            "tool_choice": "required", "max_output_tokens": 200}).json()
        item = r["output"][0]
        name, args = item["name"], item["arguments"]
        history = [{"role": "user", "content": task}, item,
                   {"type": "function_call_output", "call_id": item["call_id"],
                    "output": words("out", 100)}]
        r = httpx.post(m.url + "/v1/responses", json={
            "model": "mock", "input": history, "tools": flat, "max_output_tokens": 8}).json()
        cached = r["usage"]["input_tokens_details"]["cached_tokens"]
    else:
        tools = [{"name": "read_file", "input_schema": TOOLS[0]["function"]["parameters"]}]
        r = httpx.post(m.url + "/v1/messages", json={
            "model": "mock", "messages": [{"role": "user", "content": task}], "tools": tools,
            "tool_choice": {"type": "any"}, "max_tokens": 200}).json()
        use = r["content"][0]
        name, args = use["name"], json.dumps(use["input"])
        history = [{"role": "user", "content": task}, {"role": "assistant", "content": [use]},
                   {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use["id"],
                                                 "content": words("out", 100)}]}]
        r = httpx.post(m.url + "/v1/messages", json={
            "model": "mock", "messages": history, "tools": tools, "max_tokens": 8}).json()
        cached = r["usage"]["cache_read_input_tokens"]
    # the first prompt, then the call as the next prompt holds it: <|assistant|> name arguments
    context = MARK + 300 + MARK + len(mock_tokens(f"{name} {args}"))
    assert cached == BLOCK * (context // BLOCK) and cached > 300
