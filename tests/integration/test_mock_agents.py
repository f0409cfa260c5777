"""The mock serves what agents and RAG send (issue 26): /v1/embeddings (batches, cost per
token, slots shared with generation), image parts (prefill per image), tool calls streamed as the
real APIs stream them, and structured output that validates (or is cut, at a chosen share)."""

from __future__ import annotations

import base64
import json
import struct
import time

import httpx
import pytest

SCHEMA = {"type": "object", "properties": {
    "city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 7},
    "units": {"enum": ["metric", "imperial"]}, "tags": {"type": "array", "items": {"type": "string"},
                                                      "minItems": 2, "maxItems": 2}},
    "required": ["city", "days"]}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": SCHEMA}}]


def sse_events(text: str) -> list[dict]:
    return [json.loads(line[6:]) for line in text.splitlines()
            if line.startswith("data: ") and line != "data: [DONE]"]


def check(value: dict) -> None:
    """SCHEMA, checked by hand (no validator library in the mock's tests)."""
    assert isinstance(value["city"], str) and 1 <= value["days"] <= 7
    assert value["units"] in ("metric", "imperial") and len(value["tags"]) == 2


def test_embeddings_batch_vectors_usage_and_cost(mock_factory):
    m = mock_factory(embed_ms=20, embed_ms_per_token=1.0, embedding_dim=16)
    texts = ["one two three", "four five", "six"]
    t0 = time.perf_counter()
    r = httpx.post(m.url + "/v1/embeddings", json={"model": "mock", "input": texts}, timeout=10)
    took = time.perf_counter() - t0
    assert r.status_code == 200
    doc = r.json()
    assert [d["index"] for d in doc["data"]] == [0, 1, 2]
    assert all(len(d["embedding"]) == 16 for d in doc["data"])
    assert abs(sum(x * x for x in doc["data"][0]["embedding"]) - 1.0) < 1e-9
    assert doc["usage"] == {"prompt_tokens": 6, "total_tokens": 6}
    assert took >= 0.020 + 0.006                   # 20 ms + 6 tokens x 1 ms, the batch as one
    # the same text, the same vector; base64 is float32 little-endian
    again = httpx.post(m.url + "/v1/embeddings", json={"model": "mock", "input": "six",
                                                       "encoding_format": "base64"}).json()
    packed = base64.b64decode(again["data"][0]["embedding"])
    floats = struct.unpack(f"<{len(packed) // 4}f", packed)
    assert all(abs(a - b) < 1e-6 for a, b in zip(floats, doc["data"][2]["embedding"]))
    bad = httpx.post(m.url + "/v1/embeddings", json={"model": "mock", "input": 5})
    assert bad.status_code == 400 and "input" in bad.json()["error"]["message"]
    wrong = httpx.post(m.url + "/v1/embeddings", json={"model": "nope", "input": "x"})
    assert wrong.status_code == 404


def test_embeddings_wait_for_the_generation_slot_when_shared(mock_factory):
    m = mock_factory(parallel=1, ttft_ms=300, itl_ms=1, tokens=1, embed_ms=1)
    with httpx.Client(timeout=10) as c:
        import threading
        t = threading.Thread(target=lambda: c.post(m.url + "/v1/chat/completions", json={
            "model": "mock", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}))
        t.start()
        time.sleep(0.05)
        t0 = time.perf_counter()
        c.post(m.url + "/v1/embeddings", json={"model": "mock", "input": "x"})
        waited = time.perf_counter() - t0
        t.join()
    assert waited >= 0.2            # behind the chat request's 300 ms prefill in the one slot


def test_image_parts_cost_prefill(mock_factory):
    # 1,000 image tokens x 0.5 ms: the image's 500 ms of prefill stands well above what a busy
    # machine adds to a request (CI saw a text-only request take 85 ms)
    m = mock_factory(ttft_ms=5, prefill_ms_per_token=0.5, image_tokens=1000, itl_ms=1, tokens=1)
    text = [{"role": "user", "content": "describe"}]
    img = [{"role": "user", "content": [{"type": "text", "text": "describe"},
                                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}]
    usage = []
    times = []
    # text, image, text, text: the text-only cost is the quickest of three (a busy machine or
    # the first request's connection can make any one of them slow; none can make it quick)
    for messages in (text, img, text, text):
        t0 = time.perf_counter()
        r = httpx.post(m.url + "/v1/chat/completions", json={"model": "mock", "messages": messages,
                                                             "max_tokens": 1}, timeout=10)
        times.append(time.perf_counter() - t0)
        usage.append(r.json()["usage"]["prompt_tokens"])
    assert usage[1] - usage[0] == 1000 and usage[0] == usage[2] == usage[3]
    text_s = min(times[0], times[2], times[3])
    assert times[1] >= 0.5                          # the mock waits at least its prefill
    assert times[1] - text_s >= 0.4, times          # 1,000 tokens x 0.5 ms, 80 % of it


def test_chat_tool_call_streams_arguments_that_validate(mock_factory):
    m = mock_factory(ttft_ms=5, itl_ms=1)
    r = httpx.post(m.url + "/v1/chat/completions", json={
        "model": "mock", "messages": [{"role": "user", "content": "weather?"}], "tools": TOOLS,
        "max_tokens": 200, "stream": True}, timeout=10)
    events = sse_events(r.text)
    calls = [e["choices"][0]["delta"]["tool_calls"][0] for e in events
             if e.get("choices") and e["choices"][0]["delta"].get("tool_calls")]
    assert calls[0]["id"].startswith("call_") and calls[0]["function"]["name"] == "get_weather"
    args = "".join(c["function"]["arguments"] for c in calls)
    check(json.loads(args))
    assert len(calls) > 5                           # streamed in pieces, not one event
    assert events[-1]["choices"][0]["finish_reason"] == "tool_calls"
    whole = httpx.post(m.url + "/v1/chat/completions", json={
        "model": "mock", "messages": [{"role": "user", "content": "weather?"}], "tools": TOOLS,
        "max_tokens": 200}).json()
    msg = whole["choices"][0]["message"]
    assert msg["content"] is None and json.loads(msg["tool_calls"][0]["function"]["arguments"])


def test_tool_call_share_and_tool_choice(mock_factory):
    m = mock_factory(ttft_ms=1, itl_ms=0, tool_call_share=0.3, seed=1)
    called = 0
    for i in range(60):
        r = httpx.post(m.url + "/v1/chat/completions", json={
            "model": "mock", "messages": [{"role": "user", "content": f"q{i}"}], "tools": TOOLS,
            "max_tokens": 50}).json()
        called += bool(r["choices"][0]["message"]["tool_calls"])
    assert 8 <= called <= 30                        # ~30 % of 60
    none = httpx.post(m.url + "/v1/chat/completions", json={
        "model": "mock", "messages": [{"role": "user", "content": "q"}], "tools": TOOLS,
        "tool_choice": "none", "max_tokens": 5}).json()
    assert not none["choices"][0]["message"]["tool_calls"]


def test_responses_tool_call_events(mock_factory):
    m = mock_factory(ttft_ms=5, itl_ms=1)
    tools = [{"type": "function", "name": "get_weather", "parameters": SCHEMA}]
    r = httpx.post(m.url + "/v1/responses", json={"model": "mock", "input": "weather?",
                                                  "tools": tools, "stream": True,
                                                  "max_output_tokens": 200}, timeout=10)
    events = sse_events(r.text)
    kinds = [e["type"] for e in events]
    assert "response.function_call_arguments.delta" in kinds and "response.output_text.delta" not in kinds
    args = "".join(e["delta"] for e in events if e["type"] == "response.function_call_arguments.delta")
    check(json.loads(args))
    done = events[-1]
    assert done["type"] == "response.completed"
    assert done["response"]["output"][0]["type"] == "function_call"
    assert done["response"]["output"][0]["arguments"] == args


@pytest.mark.parametrize("route, fmt", [
    ("/v1/chat/completions", {"response_format": {"type": "json_schema", "json_schema": {
        "name": "w", "schema": SCHEMA}}}),
    ("/v1/responses", {"text": {"format": {"type": "json_schema", "name": "w", "schema": SCHEMA}}}),
])
def test_structured_output_validates_and_an_invalid_share_is_cut(mock_factory, route, fmt):
    m = mock_factory(ttft_ms=1, itl_ms=0)
    key = "messages" if "chat" in route else "input"

    def reply(i: int, url: str) -> str:
        body = {"model": "mock", key: [{"role": "user", "content": f"q{i}"}], **fmt}
        body["max_tokens" if "chat" in route else "max_output_tokens"] = 300
        doc = httpx.post(url + route, json=body, timeout=10).json()
        if "chat" in route:
            return doc["choices"][0]["message"]["content"]
        return doc["output"][-1]["content"][0]["text"]
    for i in range(5):
        check(json.loads(reply(i, m.url)))
    bad = mock_factory(ttft_ms=1, itl_ms=0, invalid_json_share=1.0)
    with pytest.raises(ValueError):
        json.loads(reply(0, bad.url))
