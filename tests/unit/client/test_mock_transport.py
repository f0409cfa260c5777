"""The client on MockTransport (llmbench/client/mock_transport.py): scripted replies on a virtual
clock, no socket. Decoding, every timeout and HTTP framing are decided here exactly and at no
wall time; what is about the network itself (two transports, kept-alive connections, TLS,
proxies) stays on real loopback servers (tests/integration/test_client.py, test_fasthttp.py)."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from llmbench.client import Client, MockReply, MockTransport, RequestParams, Timeouts
from llmbench.client.fasthttp import ServerDisconnected
from llmbench.client.target import make_target
from llmbench.records.ids import id_of
from llmbench.records.record import Record

DONE = "[DONE]"


def tok(text, **extra):
    return {"choices": [{"index": 0, "delta": {"content": text}, **extra}]}


def send(reply, timeouts=None, url="http://h/v1", api=None, stream=True, messages=None,
         max_tokens=8, **params):
    """One request through a Client on MockTransport: (record, reply text, transport). ``reply``
    is a MockReply, or a handler (request -> MockReply)."""
    handler = reply if callable(reply) else (lambda req: reply)
    mt = MockTransport(handler)

    async def go():
        async with Client(make_target(url, "m", api=api), RequestParams(stream=stream, **params),
                          timeouts or Timeouts(), transport=mt) as c:
            rec = Record("r-1", scheduled=mt.clock())
            text = await c.send(messages or [{"role": "user", "content": "hello"}], max_tokens, rec)
            return rec, text
    rec, text = asyncio.run(go())
    return rec, text, mt


# -- timing is the script's, exactly ------------------------------------------------------------

def test_token_times_are_the_scripted_virtual_times():
    rec, text, mt = send(MockReply.sse([tok("a"), tok("b"), tok("c"), DONE], first_s=0.25,
                                       gap_s=0.125))
    assert rec.ok and text == "abc"
    assert rec.ttft == pytest.approx(0.25) and rec.itls == pytest.approx([0.125, 0.125])
    assert rec.sent == rec.start                  # handed over at once: no send delay
    req = mt.requests[0]
    assert req.json()["model"] == "m" and req.json()["stream"] is True
    assert req.path == "/v1/chat/completions" and id_of(req.headers["x-request-id"]) == "r-1"


def test_a_300_s_first_token_timeout_takes_no_wall_time():
    t0 = time.monotonic()
    rec, _, _ = send(MockReply.sse([tok("late")], first_s=600.0),
                     Timeouts(first_token_s=300.0, idle_s=60.0, total_s=900.0))
    wall = time.monotonic() - t0
    assert rec.error_kind == "timeout_first_token" and not rec.token_times
    assert rec.done - rec.start == pytest.approx(300.0)      # exactly at the limit
    assert wall < 5.0, wall                                   # not 300 s: no wall clock


@pytest.mark.parametrize("reply, timeouts, kind, at_s, events", [
    # idle: a token, then a 100 s gap against a 60 s limit: fires 60 s after the token
    (MockReply.sse([tok("a"), tok("b")], first_s=1.0, gap_s=100.0), Timeouts(idle_s=60.0),
     "timeout_idle", 61.0, 1),
    # total: a token every 10 s for ever, 900 s total: 90 events, then the limit
    (MockReply.sse([tok("x")] * 200, first_s=10.0, gap_s=10.0),
     Timeouts(idle_s=60.0, total_s=900.0), "timeout_total", 900.0, 89),
    # nothing after the first token, the connection held open: idle
    (MockReply.sse([tok("a")], first_s=2.0, end="hang"), Timeouts(idle_s=30.0),
     "timeout_idle", 32.0, 1),
    # keep-alive comments are not events: they do not re-arm the idle limit
    (MockReply(chunks=[(0.0, b"data: " + json.dumps(tok("a")).encode() + b"\n\n")]
               + [(5.0, b": keepalive\n\n")] * 20), Timeouts(idle_s=30.0),
     "timeout_idle", 30.0, 1),
])
def test_each_limit_fires_at_its_virtual_time(reply, timeouts, kind, at_s, events):
    rec, _, _ = send(reply, timeouts)
    assert rec.error_kind == kind, rec.error
    assert rec.done - rec.start == pytest.approx(at_s)
    assert len(rec.token_times) == events


def test_a_first_token_that_comes_just_in_time_is_not_a_timeout():
    rec, _, _ = send(MockReply.sse([tok("a"), DONE], first_s=9.999), Timeouts(first_token_s=10.0))
    assert rec.ok and rec.ttft == pytest.approx(9.999)


# -- what the body says ---------------------------------------------------------------------------

def test_a_cut_stream_and_a_clean_close_without_done():
    rec, _, _ = send(MockReply.sse([tok("a"), tok("b")], end="cut"))
    assert rec.error_kind == "stream_cut" and len(rec.token_times) == 2
    rec, _, _ = send(MockReply.sse([tok("a")]))
    assert rec.error_kind == "stream_cut" and "[DONE]" in rec.error


def test_error_bodies_and_events():
    rec, _, _ = send(MockReply.json({"error": {"message": "x" * 500}}, status=404))
    assert rec.error_kind == "http_status" and rec.status == 404 and len(rec.error) == 200
    rec, _, _ = send(MockReply.sse([tok("a"), {"error": {"message": "CUDA out of memory"}}]))
    assert rec.error_kind == "error_event" and rec.error == "CUDA out of memory"
    rec, _, _ = send(MockReply.sse([{"choices": [{"delta": {"role": "assistant"}}]}, DONE]))
    assert rec.error_kind == "no_token"


# moved from tests/integration/test_client.py (they ran on both transports over loopback, each
# waiting out its limits in wall time; what they test is the decoder and the watchdog)

def test_a_malformed_event_ends_the_request_even_if_done_follows():
    rec, _, _ = send(MockReply(chunks=[b"data: " + json.dumps(tok("a")).encode() + b"\n\n",
                                       b'data: {"choices": [\n\n', b"data: [DONE]\n\n"]))
    assert rec.error_kind == "malformed_event" and "choices" in rec.error


def test_an_error_event_the_server_closes_on_is_an_error_not_a_cut():
    # the last event has no closing blank line: it is decoded when the connection ends, by the
    # same rules as any other event (the end-of-stream path once ignored errors)
    rec, _, _ = send(MockReply(chunks=[b"data: " + json.dumps(tok("a")).encode() + b"\n\n",
                                       b'data: {"error": {"message": "engine died"}}']))
    assert rec.error_kind == "error_event" and rec.error == "engine died"


def test_usage_missing_counts_with_the_tokenizer_and_marks_it():
    mt = MockTransport(lambda req: MockReply.sse([tok("one two"), tok(" three"), DONE]))

    async def go():
        async with Client(make_target("http://h/v1", "m"), RequestParams(), Timeouts(),
                          count_tokens=lambda t: len(t.split()), transport=mt) as c:
            rec = Record("r", scheduled=mt.clock())
            text = await c.send([{"role": "user", "content": "hello there"}], 8, rec,
                                prompt_tokens_client=2)
            return rec, text
    rec, text = asyncio.run(go())
    assert rec.ok and text == "one two three"
    assert rec.output_tokens_source == "tokenizer" and rec.output_tokens == 3
    assert rec.prompt_tokens == 2 and rec.prompt_tokens_source == "client"


def test_a_whole_body_and_usage():
    body = {"choices": [{"message": {"content": "whole reply"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2}}
    rec, text, _ = send(MockReply.json(body, after_s=0.5))
    assert rec.ok and text == "whole reply" and not rec.stream
    assert rec.ttft == rec.e2el == pytest.approx(0.5) and rec.output_tokens == 2


def test_a_stale_connection_is_sent_again_once_on_a_new_one():
    def handler(req):
        if req.index == 0:
            return MockReply(error=ServerDisconnected("closed before answering"))
        return MockReply.sse([tok("a"), DONE])
    rec, text, mt = send(handler)
    assert rec.ok and rec.retries == 1 and text == "a"
    assert [r.fresh for r in mt.requests] == [False, True]


def test_a_refused_connection_is_a_connect_error():
    rec, _, _ = send(MockReply(error=ConnectionRefusedError("refused"), after_s=0.01))
    assert rec.error_kind == "connect" and rec.status is None


def test_a_same_origin_redirect_is_followed_once():
    def handler(req):
        if req.path == "/v1/chat/completions":
            return MockReply(status=307, headers={"location": "/v2/chat/completions"})
        return MockReply.sse([tok("a"), DONE])
    rec, text, mt = send(handler)
    assert rec.ok and text == "a" and [r.path for r in mt.requests] == [
        "/v1/chat/completions", "/v2/chat/completions"]


# -- HTTP framing, through the fast transport's own parser --------------------------------------

def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
        b"transfer-encoding: chunked\r\n\r\n")
BODY = (_chunk(b"data: " + json.dumps(tok("a")).encode() + b"\n\n")
        + _chunk(b"data: " + json.dumps(tok("b")).encode() + b"\n\ndata: [DONE]\n\n")
        + b"0\r\n\r\n")


def test_every_split_of_a_raw_chunked_reply_decodes_the_same():
    raw = HEAD + BODY
    for cut in range(1, len(raw), 7):
        rec, text, _ = send(MockReply(raw=[raw[:cut], (0.5, raw[cut:])]))
        assert rec.ok and text == "ab", (cut, rec.error_kind, rec.error)


@pytest.mark.parametrize("raw", [
    b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\ncontent-length: 6\r\n\r\nhello!",
    b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\ncontent-length: 5\r\n\r\nhello",
    b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\ntransfer-encoding: chunked\r\n\r\n" + BODY,
    b"HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n",
    b"HTTP/1.1 abc OK\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
    b"SSH-2.0-OpenSSH_9.6\r\n\r\n",
    HEAD + _chunk(b"data: " + json.dumps(tok("a")).encode() + b"\n\n") + b"zz\r\n",
    HEAD + b"3\r\nabcdef\r\n",
], ids=["dup-length", "dup-length-same", "length-and-chunked", "negative-length",
        "bad-status", "header-without-colon", "not-http", "bad-chunk-size", "chunk-too-long"])
def test_malformed_http_is_a_protocol_error_not_a_connect_error(raw):
    rec, _, _ = send(MockReply(raw=[raw]))
    assert rec.error_kind == "protocol", (rec.error_kind, rec.error)
    assert not rec.ok and "\n" not in rec.error


# -- wrong JSON types fail one request, named (issue 40 §4 item 1) ------------------------------

# (api, url, the payload of one streamed event, what the error names)
WRONG_TYPES = [
    ("openai-chat", "/v1", tok(5), "delta.content is a number (5)"),
    ("openai-chat", "/v1", tok(["a"]), "delta.content is a list"),
    ("openai-chat", "/v1", {"choices": {"0": {}}}, "choices is an object"),
    ("openai-chat", "/v1", {"choices": ["x"]}, "choices[0] is a string"),
    ("openai-chat", "/v1", {"choices": [{"delta": "hi"}]}, "delta is a string"),
    ("openai-chat", "/v1", {"choices": [{"delta": {"reasoning_content": 1}}]},
     "reasoning_content is a number"),
    ("openai", "/v1", {"choices": [{"text": {"t": 1}}]}, "choices[0].text is an object"),
    ("responses", "/v1", {"type": "response.output_text.delta", "delta": 5}, "delta is a number"),
    ("responses", "/v1", {"type": ["x"]}, "type is a list"),
    ("anthropic", "/v1", {"type": "content_block_delta", "index": 0,
                          "delta": {"type": "text_delta", "text": 5}}, "delta.text is a number"),
    ("anthropic", "/v1", {"type": "content_block_delta", "index": 0, "delta": "x"},
     "content_block_delta's delta is a string"),
    ("anthropic", "/v1", {"type": "content_block_delta", "index": 0,
                          "delta": {"type": "thinking_delta", "thinking": 7}},
     "delta.thinking is a number"),
    ("anthropic", "/v1", {"type": "content_block_start", "index": 0,
                          "content_block": {"type": "text", "text": ["a"]}},
     "content_block.text is a list"),
]


@pytest.mark.parametrize("api, path, event, named", WRONG_TYPES,
                         ids=[f"{a}-{n[:24]}" for a, _, _, n in WRONG_TYPES])
def test_a_streamed_event_of_the_wrong_types_fails_its_request(api, path, event, named):
    url = "http://h" + path + ("/responses" if api == "responses" else "")
    good = {"responses": {"type": "response.output_text.delta", "delta": "a"},
            "openai": {"choices": [{"text": "a"}]},
            "anthropic": {"type": "content_block_delta", "index": 0,
                          "delta": {"type": "text_delta", "text": "a"}}}.get(api, tok("a"))
    rec, text, _ = send(MockReply.sse([good, event, DONE]), url=url, api=api)
    assert rec.error_kind == "malformed_event" and named in rec.error, rec.error
    assert not rec.ok and text == "a"


@pytest.mark.parametrize("line, named", [
    ({"message": {"content": 5}, "done": False}, "message.content is a number"),
    ({"message": [1], "done": False}, "message is a list"),
    ({"response": {"a": 1}, "done": False}, "response is an object"),
    ({"message": {"content": "", "thinking": 7}, "done": False}, "thinking is a number"),
])
def test_an_ollama_line_of_the_wrong_types_fails_its_request(line, named):
    rec, _, _ = send(MockReply.ndjson([{"message": {"content": "a"}, "done": False}, line,
                                       {"done": True}]), url="http://h", api="ollama")
    assert rec.error_kind == "malformed_event" and named in rec.error, rec.error


def test_an_anthropic_stop_reason_of_the_wrong_type_is_dropped_not_kept():
    events = [{"type": "message_start", "message": {"id": "m1", "usage": {"input_tokens": 3}}},
              {"type": "content_block_delta", "index": 0,
               "delta": {"type": "text_delta", "text": "a"}},
              {"type": "message_delta", "delta": {"stop_reason": 5}, "usage": {"output_tokens": 1}},
              {"type": "message_stop"}]
    rec, text, _ = send(MockReply.sse(events), api="anthropic")
    assert rec.ok and text == "a" and rec.finish_reason is None, (rec.error, rec.finish_reason)
    events[2]["delta"]["stop_reason"] = "max_tokens"
    rec, _, _ = send(MockReply.sse(events), api="anthropic")
    assert rec.ok and rec.finish_reason == "length"


def test_wrong_typed_figures_are_dropped_not_fatal():
    # an Ollama done line whose durations are strings, a finish_reason that is a number: the
    # request stands, the figures are not kept (the summary does arithmetic on them)
    rec, text, _ = send(MockReply.ndjson([
        {"message": {"content": "a"}, "done": False},
        {"done": True, "done_reason": 3, "total_duration": "10", "eval_duration": 5,
         "eval_count": "1"}]), url="http://h", api="ollama")
    assert rec.ok and text == "a" and rec.finish_reason is None
    assert rec.server_timing == {"eval_duration": 5} and "completion_tokens 1" in rec.note
    rec, _, _ = send(MockReply.sse([tok("a", finish_reason=7), {"choices": [], "timings": "x"},
                                    DONE]))
    assert rec.ok and rec.finish_reason is None and rec.server_timing is None


def test_a_tgi_token_of_the_wrong_type_fails_its_request():
    rec, _, _ = send(MockReply.sse([{"token": {"text": "a"}}, {"token": {"text": 5}}]),
                     url="http://h/generate_stream", api="tgi")
    assert rec.error_kind == "malformed_event" and "token.text is a number" in rec.error


def test_an_event_nested_too_deeply_is_malformed_not_a_recursion_error():
    deep = b'data: {"choices": ' + b"[" * 5000 + b"]" * 5000 + b"}\n\n"    # valid, 5001 deep
    rec, _, _ = send(MockReply(chunks=[b"data: " + json.dumps(tok("a")).encode() + b"\n\n",
                                       deep]))
    assert rec.error_kind == "malformed_event" and "nested too deeply" in rec.error


@pytest.mark.parametrize("body, named", [
    ({"choices": [{"message": {"content": 5}}]}, "message.content is a number"),
    ({"choices": [{"message": "hi"}]}, "message is a string"),
    ([1, 2], "not a JSON object"),
    ({"choices": [{"message": {"content": "x"}}], "timings": [1]}, None),
])
def test_a_whole_body_of_the_wrong_types(body, named):
    rec, _, _ = send(MockReply.json(body), stream=False)
    if named is None:
        assert rec.ok and rec.server_timing is None
    else:
        assert rec.error_kind == "malformed_event" and named in rec.error, rec.error


@pytest.mark.parametrize("api, url", [("openai-chat", "http://h/v1"), ("anthropic", "http://h/v1"),
                                      ("ollama", "http://h"), ("responses", "http://h/v1/responses"),
                                      ("embeddings", "http://h/v1")])
def test_a_whole_body_nested_too_deeply_is_malformed_for_every_api(api, url):
    deep = b'{"choices":[{"message":{"content":' + b"[" * 5000 + b"]" * 5000 + b"}}]}"
    rec, _, _ = send(MockReply.json(deep), url=url, api=api, stream=False)
    assert rec.error_kind == "malformed_event" and "JSON nested too deeply" in rec.error


# -- embeddings: one vector per input, or a failure of its own kind (item 13) -------------------

def _emb(vectors, **extra):
    return {"data": [{"index": i, "embedding": v} for i, v in enumerate(vectors)],
            "usage": {"prompt_tokens": 4}, **extra}


@pytest.mark.parametrize("vectors, inputs, ok", [
    ([[0.1, 0.2]], 1, True),
    ([[0.1, 0.2], [0.3, 0.4]], 2, True),
    ([None], 1, False),                      # a null vector
    ([[]], 1, False),                        # an empty one
    ([[0.1, 0.2]], 2, False),                # too few
    ([[0.1], [0.2], [0.3]], 2, False),       # too many
    ([[0.1, 0.2], [0.3]], 2, False),         # vectors of two dimensions
    ([["a", "b"]], 1, False),                # not numbers
])
def test_an_embeddings_reply_needs_one_vector_per_input(vectors, inputs, ok):
    messages = [{"role": "user", "content": f"text {i}"} for i in range(inputs)]
    rec, _, mt = send(MockReply.json(_emb(vectors)), url="http://h/v1/embeddings",
                      api="embeddings", stream=False, messages=messages)
    sent = mt.requests[0].json()["input"]
    assert (len(sent) if isinstance(sent, list) else 1) == inputs
    if ok:
        assert rec.ok and rec.embeddings == inputs, rec.error
    else:
        assert rec.error_kind == "bad_vectors" and not rec.ok, (rec.error_kind, rec.error)
        assert f"for {inputs} input" in rec.error


def test_an_embeddings_data_that_is_not_a_list_is_malformed():
    rec, _, _ = send(MockReply.json({"data": {"embedding": [1.0]}}), url="http://h/v1/embeddings",
                     api="embeddings", stream=False)
    assert rec.error_kind == "malformed_event" and "data is an object" in rec.error
