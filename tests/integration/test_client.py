"""The client against real servers on loopback: the mock, and servers that misbehave on purpose.

What needs no network (how events decode, when each timeout fires, what usage means) is tested
on MockTransport, exactly and at no wall time (tests/unit/client/test_mock_transport.py); what is
here is about the network: both transports reading, cutting, timing out and hanging up on a
real socket."""

import json
import time

import pytest

from llmbench.client.request import Timeouts
from tests.helpers import (CHAT_ROLE, RawServer, chat_token, chunk, free_port, http_head, run,
                      send_one)

# every test here runs on both HTTP transports (conftest.transport)
pytestmark = pytest.mark.usefixtures("transport")


@pytest.mark.parametrize("api,path", [("openai-chat", "/v1"), ("openai", "/v1"), ("ollama", "")])
def test_each_api_against_mock(mock_factory, api, path):
    m = mock_factory(ttft_ms=30, itl_ms=5, tokens=50)
    rec, text = run(send_one(m.url + path, api=api, max_tokens=6))
    assert rec.ok, rec.error
    assert rec.status == 200
    assert len(rec.token_times) == 6 and rec.output_tokens == 6
    assert rec.output_tokens_source == "server"
    assert rec.served_by == "replica-0"
    assert rec.ttft >= 0.025
    assert rec.first_token == rec.token_times[0] and rec.end == rec.token_times[-1]
    assert len(text.split()) == 6
    if api == "ollama":
        assert rec.server_timing["eval_count"] == 6


def test_role_chunk_is_not_the_first_token(mock_factory):
    # the mock sends the role chunk at once and the first token after 150 ms of prefill
    m = mock_factory(ttft_ms=150, itl_ms=5)
    rec, _ = run(send_one(m.url + "/v1", max_tokens=3))
    assert rec.ttft >= 0.14


def test_non_streaming_ttft_equals_e2el(mock_factory):
    m = mock_factory(ttft_ms=20, itl_ms=5)
    rec, text = run(send_one(m.url + "/v1", stream=False, max_tokens=5))
    assert rec.ok and rec.ttft == rec.e2el and rec.output_tokens == 5 and text


def test_connect_error():
    rec, _ = run(send_one(f"http://127.0.0.1:{free_port()}/v1"))
    assert rec.error_kind == "connect" and not rec.ok


def test_http_status_keeps_first_200_chars_of_body():
    body = json.dumps({"error": {"message": "x" * 500}}).encode()
    with RawServer([(0, http_head("404 Not Found", "application/json", length=len(body)) + body)]) as s:
        rec, _ = run(send_one(s.url + "/v1"))
    assert rec.error_kind == "http_status" and rec.status == 404
    assert len(rec.error) == 200 and rec.error.startswith('{"error"')


def test_stream_cut_before_done():
    script = [(0, http_head(chunked=True)), (0, chunk(CHAT_ROLE + chat_token("a"))),
              (0.02, chunk(chat_token("b"))), (0.02, None)]
    with RawServer(script) as s:
        rec, _ = run(send_one(s.url + "/v1"))
    assert rec.error_kind == "stream_cut" and len(rec.token_times) == 2 and not rec.ok


def test_clean_close_without_done_is_a_cut():
    script = [(0, http_head(chunked=True)), (0, chunk(chat_token("a"))), (0, b"0\r\n\r\n")]
    with RawServer(script) as s:
        rec, _ = run(send_one(s.url + "/v1"))
    assert rec.error_kind == "stream_cut"


def test_first_token_timeout():
    script = [(0, http_head(chunked=True)), (0, chunk(CHAT_ROLE)), (2.0, chunk(chat_token("late")))]
    with RawServer(script) as s:
        rec, _ = run(send_one(s.url + "/v1", timeouts=Timeouts(first_token_s=0.3)))
    assert rec.error_kind == "timeout_first_token"
    assert 0.25 < rec.done - rec.start < 1.0


def test_request_sent_with_key_and_headers():
    script = [(0, http_head(chunked=True)), (0, chunk(chat_token("a") + b"data: [DONE]\n\n")),
              (0, b"0\r\n\r\n")]
    from llmbench.client.target import make_target
    from llmbench.client.request import Client
    from llmbench.records.record import Record
    import asyncio, time

    async def go(url):
        t = make_target(url + "/v1", "m", api_key="sk-secret", headers=["X-Tenant=blue"])
        async with Client(t) as c:
            r = Record("id-7", scheduled=time.perf_counter())
            await c.send([{"role": "user", "content": "hi"}], 3, r)
            return r

    with RawServer(script) as s:
        r = asyncio.run(go(s.url))
        raw = s.requests[0].decode()
    assert r.ok
    head, body = raw.split("\r\n\r\n", 1)
    assert "authorization: Bearer sk-secret" in head.lower().replace("bearer", "Bearer")
    assert "x-tenant: blue" in head.lower()
    assert "POST /v1/chat/completions" in head
    assert json.loads(body)["stream_options"] == {"include_usage": True}


def test_done_ends_the_request_even_if_the_server_keeps_the_stream_open():
    script = [(0, http_head(chunked=True)), (0, chunk(CHAT_ROLE + chat_token("a") + chat_token("b"))),
              (0, chunk(b"data: [DONE]\n\n")), (30, chunk(b": still here\n\n"))]
    with RawServer(script) as s:
        rec, text = run(send_one(s.url + "/v1", timeouts=Timeouts(idle_s=5, total_s=20)))
    assert rec.ok and text == "ab", rec.error
    assert rec.done - rec.start < 2.0


def test_ollama_done_line_ends_the_request_even_if_the_connection_stays_open():
    lines = (b'{"message":{"role":"assistant","content":"x"},"done":false}\n'
             b'{"message":{"role":"assistant","content":""},"done":true,"eval_count":1}\n')
    script = [(0, http_head(content_type="application/x-ndjson", chunked=True)), (0, chunk(lines)),
              (30, chunk(b"\n"))]
    with RawServer(script) as s:
        rec, text = run(send_one(s.url, api="ollama", timeouts=Timeouts(idle_s=5, total_s=20)))
    assert rec.ok and text == "x" and rec.done - rec.start < 2.0


@pytest.mark.parametrize("api,path,body", [
    ("openai-chat", "/v1", {"choices": [{"index": 0, "message": {"role": "assistant", "content": "whole reply"},
                                         "finish_reason": "stop"}],
                            "usage": {"prompt_tokens": 3, "completion_tokens": 2}}),
    ("ollama", "", {"message": {"role": "assistant", "content": "whole reply"}, "done": True,
                    "eval_count": 2, "prompt_eval_count": 3}),
])
def test_a_server_that_ignores_stream_true_is_recorded_whole_not_as_cut(api, path, body):
    raw = json.dumps(body).encode()
    with RawServer([(0, http_head(content_type="application/json", length=len(raw)) + raw)]) as s:
        rec, text = run(send_one(s.url + path, api=api))
    assert rec.ok, (rec.error_kind, rec.error)
    assert text == "whole reply" and rec.output_tokens == 2
    assert rec.stream is False and rec.ttft == rec.e2el


def test_a_huge_error_body_is_not_read_whole():
    size_mb = 64
    head = http_head("500 Internal Server Error", "text/plain", length=size_mb * 1024 * 1024)
    script = [(0, head)] + [(0, b"E" * (1024 * 1024)) for _ in range(size_mb)]
    with RawServer(script) as s:
        rec, _ = run(send_one(s.url + "/v1"))
        time.sleep(0.2)
        sent_mb = s.sent_bytes / 1024 / 1024
    assert rec.error_kind == "http_status" and rec.error == "E" * 200
    # the client reads a few kB and hangs up; what the server got out is its socket buffers
    assert sent_mb < size_mb / 2, sent_mb


def test_cached_tokens_from_llamacpp_timings_when_usage_names_none():
    # llama.cpp builds before prompt_tokens_details: the final chunk's timings say cache_n
    final = json.dumps({"choices": [], "usage": {"prompt_tokens": 70, "completion_tokens": 2},
                        "timings": {"cache_n": 64, "prompt_n": 6}}).encode()
    script = [(0, http_head(chunked=True)), (0, chunk(chat_token("one") + chat_token(" two"))),
              (0, chunk(b"data: " + final + b"\n\n" + b"data: [DONE]\n\n")), (0, b"0\r\n\r\n")]
    with RawServer(script) as s:
        rec, _ = run(send_one(s.url + "/v1"))
    assert rec.ok and rec.prompt_tokens == 70 and rec.cached_tokens == 64
