"""Request bodies of each API, and which events count as tokens (METRICS.md)."""

import json

import pytest

from llmbench import wire
from llmbench.wire.events import END, ERROR, MALFORMED, OTHER, TOKEN, Usage
from llmbench.wire.framing import NdjsonFramer, SseFramer

MSGS = [{"role": "user", "content": "hi"}]


def test_chat_body_asks_for_usage_and_both_length_fields():
    b = wire.get("openai-chat").body("m", MSGS, 32, True,
                        {"temperature": 0.5, "ignore_eos": True, "extra_body": {"top_p": 0.9}})
    assert b == {"model": "m", "messages": MSGS, "max_tokens": 32, "max_completion_tokens": 32,
                 "stream": True, "stream_options": {"include_usage": True}, "temperature": 0.5,
                 "ignore_eos": True, "top_p": 0.9}
    only = wire.get("openai-chat").body("m", MSGS, 32, True, {"max_tokens_field": "max_completion_tokens"})
    assert only["max_completion_tokens"] == 32 and "max_tokens" not in only
    legacy = wire.get("openai-chat").body("m", MSGS, 32, True, {"max_tokens_field": "max_tokens"})
    assert legacy["max_tokens"] == 32 and "max_completion_tokens" not in legacy
    none = wire.get("openai-chat").body("m", MSGS, 32, True, {"max_tokens_field": "none"})
    assert "max_tokens" not in none and "max_completion_tokens" not in none


def test_completions_body_uses_max_tokens_and_prompt():
    b = wire.get("openai").body("m", MSGS, 16, True, {})
    assert b["prompt"] == "hi" and b["max_tokens"] == 16 and "max_completion_tokens" not in b
    assert b["stream_options"] == {"include_usage": True}
    multi = wire.get("openai").body("m", MSGS + [{"role": "assistant", "content": "yo"},
                                                   {"role": "user", "content": "more"}], 4, True, {})
    assert "User: hi" in multi["prompt"] and multi["prompt"].endswith("Assistant:")


def test_ollama_body_uses_num_predict_and_options():
    b = wire.get("ollama").body("m", MSGS, 8, True,
                        {"temperature": 0.1, "extra_body": {"options": {"num_ctx": 4096}, "keep_alive": "5m"}})
    assert b == {"model": "m", "messages": MSGS, "stream": True,
                 "options": {"num_predict": 8, "temperature": 0.1, "num_ctx": 4096},
                 "keep_alive": "5m"}
    assert "stream_options" not in b


def test_non_streaming_body_has_no_stream_options():
    b = wire.get("openai-chat").body("m", MSGS, 8, False, {})
    assert "stream" not in b and "stream_options" not in b


def ev(obj):
    return json.dumps(obj).encode()


def test_chat_token_events():
    c = wire.get("openai-chat").classify
    assert c(ev({"choices": [{"delta": {"role": "assistant", "content": ""}}]})).kind == OTHER
    assert c(ev({"choices": [{"delta": {"role": "assistant"}}]})).kind == OTHER
    # Ollama's /v1 sends role with every content chunk: content decides
    assert c(ev({"choices": [{"delta": {"role": "assistant", "content": "Hi"}}]})).kind == TOKEN
    assert c(ev({"choices": [{"delta": {"content": ""}}]})).kind == TOKEN
    assert c(ev({"choices": [{"delta": {"reasoning_content": "hmm"}}]})).kind == TOKEN
    assert c(ev({"choices": [{"delta": {"reasoning": "hmm"}}]})).kind == TOKEN
    assert c(ev({"choices": [{"delta": {"tool_calls": [{"index": 0}]}}]})).kind == TOKEN
    assert c(ev({"choices": [{"delta": {}, "finish_reason": "length"}]})).kind == OTHER
    u = c(ev({"choices": [], "usage": {"completion_tokens": 5}}))
    assert u.kind == OTHER and u.usage == Usage(completion_tokens=5)
    assert c(b"[DONE]").kind == END
    e = c(ev({"error": {"message": "boom"}}))
    assert e.kind == ERROR and e.error == "boom"
    assert c(b'{"choices": [').kind == MALFORMED


def test_completion_events_count_even_empty_text():
    c = wire.get("openai").classify
    assert c(ev({"choices": [{"text": ""}]})).kind == TOKEN
    assert c(ev({"choices": [], "usage": {}})).kind == OTHER


def test_ollama_lines():
    c = wire.get("ollama").classify
    assert c(ev({"message": {"content": "a"}, "done": False})).kind == TOKEN
    assert c(ev({"message": {"content": "", "thinking": "x"}, "done": False})).kind == TOKEN
    assert c(ev({"message": {"content": ""}, "done": False})).kind == OTHER
    assert c(ev({"response": "a", "done": False})).kind == TOKEN
    end = c(ev({"done": True, "eval_count": 7, "prompt_eval_count": 3, "total_duration": 10,
                "eval_duration": 4, "done_reason": "length"}))
    assert end.kind == END and end.usage == Usage(prompt_tokens=3, completion_tokens=7)
    assert end.server_timing["total_duration"] == 10 and end.finish_reason == "length"
    # Ollama 0.33 on: prompt tokens read from the cache, beside the whole prompt's count
    cached = c(ev({"done": True, "eval_count": 7, "prompt_eval_count": 30,
                   "prompt_eval_cached_count": 16}))
    assert cached.usage == Usage(prompt_tokens=30, completion_tokens=7, cached_tokens=16)
    assert c(ev({"error": "model not found"})).kind == ERROR


def test_sse_framer_splits_across_chunks_and_crlf():
    f = SseFramer()
    assert f.feed(b"data: {\"a\"") == []
    assert f.feed(b": 1}\r\n\r\n: comment\n\ndata: [DO") == [b'{"a": 1}']
    assert f.feed(b"NE]\n\n") == [b"[DONE]"]
    f2 = SseFramer()
    assert f2.feed(b"data: x\n") == []
    assert f2.flush() == [b"x"]


def test_ndjson_framer():
    f = NdjsonFramer()
    assert f.feed(b'{"a":1}\n{"b"') == [b'{"a":1}']
    assert f.feed(b':2}\n') == [b'{"b":2}']
    assert f.feed(b'{"c":3}') == []
    assert f.flush() == [b'{"c":3}']


def _frame_all(framer, chunks):
    out = []
    for c in chunks:
        out += framer.feed(c)
    return out + framer.flush()


def test_sse_random_chunkings_give_the_same_events_with_crlf_and_multiline_events():
    import random
    # Spec streams: CRLF line ends, a multi-line event, a bare "data" field (empty line of data),
    # comments and other fields that carry nothing.
    stream = (b": keepalive\r\n\r\n"
              b"data: {\"a\":1}\r\n\r\n"
              b"event: message\r\nid: 7\r\ndata: line one\r\ndata: line two\r\n\r\n"
              b"data\r\ndata: after-empty\r\n\r\n"
              b"retry: 100\r\ndata: [DONE]\r\n\r\n")
    expected = [b'{"a":1}', b"line one\nline two", b"\nafter-empty", b"[DONE]"]
    assert _frame_all(SseFramer(), [stream]) == expected
    rng = random.Random(7)
    for _ in range(500):
        cuts = sorted(rng.sample(range(1, len(stream)), rng.randint(1, 12)))
        chunks = [stream[a:b] for a, b in zip([0] + cuts, cuts + [len(stream)])]
        assert _frame_all(SseFramer(), chunks) == expected, chunks
    # every single split point, including each CR|LF boundary
    for i in range(1, len(stream)):
        assert _frame_all(SseFramer(), [stream[:i], stream[i:]]) == expected, i


def test_sse_lf_and_cr_only_line_ends():
    assert _frame_all(SseFramer(), [b"data: x\n\ndata: y\n\n"]) == [b"x", b"y"]
    assert _frame_all(SseFramer(), [b"data: x\r\rdata: y\r\r"]) == [b"x", b"y"]


def test_the_registry_drives_names_help_and_detection():
    from llmbench.client import target
    from llmbench.wire import registry
    assert target.API_FLAVOURS == registry.names()
    assert all(n in target.api_help() for n in registry.names())
    # every format's own endpoint path, at the end of a URL, names that format
    for fmt in registry.FORMATS:
        for suffix in fmt.url_suffixes:
            assert target.detect_api("http://h:1/x" + suffix) == (fmt.name, "http://h:1/x")
    with pytest.raises(target.TargetError, match="choose one of " + ", ".join(registry.names())):
        target.make_target("http://h:1/v1", "m", api="nope")


def test_forcing_an_api_moves_the_base_url_between_roots():
    from llmbench.client.target import make_target
    assert make_target("http://h:1/v1", "m", api="ollama").endpoint == "http://h:1/api/chat"
    assert make_target("http://h:1", "m", api="openai").endpoint == "http://h:1/v1/completions"
    assert make_target("http://h:1/foo", "m", api="openai").endpoint == "http://h:1/foo/completions"
    assert make_target("http://h:1/v1", "m", api="openai").endpoint == "http://h:1/v1/completions"


def test_an_empty_data_event_is_not_dispatched():
    # "data:" alone (some proxies' keep-alive) is an empty message: the SSE spec does not
    # dispatch it and vLLM's client skips it; it once failed the preflight as malformed
    f = SseFramer()
    got = f.feed(b'data:\n\ndata: {"a":1}\n\ndata: \n\ndata\n\n:\n\n')
    assert got == [b'{"a":1}']
    f.feed(b"data:")
    assert f.flush() == []


def test_a_target_in_another_api_of_the_same_server():
    """A recording's replay sends a request in the API it was recorded with: the target moved
    to that API's root, endpoint and key header; the same target for its own API."""
    from llmbench.client.target import make_target
    t = make_target("http://127.0.0.1:8080/v1", "m", api_key="sk-abc")
    m = t.for_api("anthropic")
    assert m.endpoint == "http://127.0.0.1:8080/v1/messages"
    assert m.request_headers()["x-api-key"] == "sk-abc" and "authorization" not in \
        m.request_headers()
    o = t.for_api("ollama")
    assert o.endpoint == "http://127.0.0.1:8080/api/chat"
    assert t.for_api("openai-chat") is t
