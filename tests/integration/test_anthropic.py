"""Anthropic's Messages API (--api anthropic): the body and headers it sends (history as
Messages, tools in its shape, x-api-key and anthropic-version), the event sequences the API and
llama.cpp's server send, classified; the client against scripted loopback servers (TTFT on the
first text delta, thinking as reasoning, tool use as tokens, usage from message_start and
message_delta, errors as the API shapes them, a cut, a whole body); multi-turn history; and
``llmbench run --api anthropic`` against the mock, streamed and not, with tools, with a key that
is never written."""

import json
from pathlib import Path

import pytest

from llmbench import ServerRefused
from llmbench import run as api_run
from llmbench import wire
from llmbench.client.target import detect_api, make_target
from llmbench.wire.anthropic import DEFAULT_MAX_TOKENS, VERSION
from llmbench.wire.events import END, ERROR, MALFORMED, OTHER, TOKEN, Usage
from tests.helpers import RawServer, only_run, run, send_one
from tests.helpers.api import records, run_exit_code

# every test here runs on both HTTP transports (conftest.transport)
pytestmark = pytest.mark.usefixtures("transport")

MSGS = [{"role": "user", "content": "hello there"}]
HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
        b"connection: close\r\n\r\n")


def ev(kind: str, **fields) -> bytes:
    """One event as the API frames it: an event line, then the JSON with the same type."""
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **fields})}\n\n".encode()


def start(input_tokens=7, cache_read=5, output_tokens=1) -> bytes:
    usage = {"input_tokens": input_tokens, "cache_creation_input_tokens": 0,
             "cache_read_input_tokens": cache_read, "output_tokens": output_tokens}
    return ev("message_start", message={"id": "msg_1", "type": "message", "role": "assistant",
                                        "content": [], "model": "m", "stop_reason": None,
                                        "usage": usage})


def block(index: int, kind: str, **extra) -> bytes:
    content = {"type": kind, **({kind: ""} if kind in ("text", "thinking") else {}), **extra}
    return ev("content_block_start", index=index, content_block=content)


def text(t: str, index: int = 0) -> bytes:
    return ev("content_block_delta", index=index, delta={"type": "text_delta", "text": t})


def end(stop="end_turn", output_tokens=3) -> bytes:
    return (ev("content_block_stop", index=0)
            + ev("message_delta", delta={"stop_reason": stop, "stop_sequence": None},
                 usage={"output_tokens": output_tokens})
            + ev("message_stop"))


def sent(server: RawServer, i: int = 0) -> tuple[str, dict]:
    head, body = server.requests[i].split(b"\r\n\r\n", 1)
    return head.decode("latin-1").lower(), json.loads(body)


# -- the request -------------------------------------------------------------------------------
def test_body_and_history_as_messages():
    b = wire.get("anthropic").body("m", MSGS, 16, True, {"temperature": 0.5})
    assert b == {"model": "m", "max_tokens": 16, "messages": MSGS, "stream": True,
                 "temperature": 0.5}
    assert b["messages"] is MSGS                      # plain turns go as they are, no copy
    whole = wire.get("anthropic").body("m", MSGS, None, False, {})
    assert "stream" not in whole and whole["max_tokens"] == DEFAULT_MAX_TOKENS   # required
    history = [{"role": "system", "content": "You are terse."},
               {"role": "user", "content": [{"type": "text", "text": "look"},
                                            {"type": "image_url",
                                             "image_url": {"url": "data:image/png;base64,AAAA"}}]},
               {"role": "assistant", "content": "Let me check.",
                "tool_calls": [{"id": "c1", "type": "function",
                                "function": {"name": "get", "arguments": '{"city": "Oslo"}'}}]},
               {"role": "tool", "tool_call_id": "c1", "content": "rain"},
               {"role": "user", "content": "and?"}]
    b = wire.get("anthropic").body("m", history, 8, True, {})
    assert b["system"] == "You are terse."
    assert b["messages"] == [
        {"role": "user", "content": [
            {"type": "text", "text": "look"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": "AAAA"}}]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": "c1", "name": "get", "input": {"city": "Oslo"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1",
                                      "content": "rain"}]},
        {"role": "user", "content": "and?"}]


def test_tools_and_tool_choice_in_the_messages_shape():
    from llmbench.wire.agents import request_fields
    tools = [{"type": "function", "function": {"name": "get", "description": "weather",
                                               "parameters": {"type": "object"}}}]
    assert request_fields("anthropic", tools, "required", None) == {
        "tools": [{"name": "get", "description": "weather", "input_schema": {"type": "object"}}],
        "tool_choice": {"type": "any"}}
    assert request_fields("anthropic", tools, "none", None)["tool_choice"] == {"type": "none"}
    assert "tool_choice" not in request_fields("anthropic", tools, None, None)


def test_url_detection_headers_and_the_key(monkeypatch):
    assert detect_api("http://h:8080/v1/messages") == ("anthropic", "http://h:8080/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-not-this-one")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    t = make_target("http://h:8080/v1", "m", api="anthropic")
    assert t.endpoint == "http://h:8080/v1/messages" and t.api_key is None
    h = t.request_headers()
    assert h["anthropic-version"] == VERSION and "authorization" not in h and "x-api-key" not in h
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-env")
    t = make_target("http://h:8080/v1", "m", api="anthropic")
    assert t.request_headers()["x-api-key"] == "sk-ant-from-env"
    assert "sk-ant-from-env" in t.secrets() and t.describe()["api_key"] == "set"
    assert make_target("http://h:8080/v1", "m", api="anthropic",
                       api_key="sk-flag").request_headers()["x-api-key"] == "sk-flag"
    # a --header of the same name wins over the format's own
    t = make_target("http://h:8080/v1", "m", api="anthropic", headers=["anthropic-version=2099-01-01"])
    assert t.request_headers()["anthropic-version"] == "2099-01-01"


# -- the reply ---------------------------------------------------------------------------------
def test_each_event_type_means_what_the_api_says():
    c = wire.get("anthropic").classify

    def one(raw: bytes):
        return c(raw.split(b"data: ", 1)[1].strip())
    s = one(start(input_tokens=7, cache_read=5, output_tokens=1))
    # the prompt is input + cache reads; message_start's output count is not the reply's
    assert s.kind == OTHER and s.usage == Usage(prompt_tokens=12, completion_tokens=None,
                                                cached_tokens=5) and s.ref == "msg_1"
    assert one(ev("ping")).kind == OTHER
    assert one(block(0, "text")).kind == OTHER
    t = one(text(" hi"))
    assert t.kind == TOKEN and t.text == " hi" and not t.reasoning and not t.tool
    th = one(ev("content_block_delta", index=0, delta={"type": "thinking_delta", "thinking": "hm"}))
    assert th.kind == TOKEN and th.reasoning and th.text == ""
    assert one(ev("content_block_delta", index=0,
                  delta={"type": "signature_delta", "signature": "x"})).kind == OTHER
    name = one(block(1, "tool_use", id="toolu_1", name="get", input={}))
    args = one(ev("content_block_delta", index=1,
                  delta={"type": "input_json_delta", "partial_json": '{"city": '}))
    assert name.kind == TOKEN and name.tool and args.kind == TOKEN and args.tool
    assert one(ev("content_block_stop", index=0)).kind == OTHER
    d = one(ev("message_delta", delta={"stop_reason": "max_tokens"}, usage={"output_tokens": 9}))
    assert d.kind == OTHER and d.finish_reason == "length" and d.usage == Usage(None, 9, None)
    for stop, finish in (("end_turn", "stop"), ("tool_use", "tool_calls"),
                         ("stop_sequence", "stop"), ("refusal", "refusal")):
        assert one(ev("message_delta", delta={"stop_reason": stop})).finish_reason == finish
    assert one(ev("message_stop")).kind == END
    err = one(ev("error", error={"type": "overloaded_error", "message": "Overloaded"}))
    assert err.kind == ERROR and err.error == "overloaded_error: Overloaded"
    # llama.cpp's in-stream error wraps its OpenAI-style error object the same way
    err = one(ev("error", error={"code": 500, "message": "context full", "type": "server_error"}))
    assert err.kind == ERROR and err.error == "server_error: context full"
    assert c(b'{"type": "content_block_delta", "delta": ').kind == MALFORMED


def test_ttft_is_the_first_text_delta_not_message_start():
    script = [(0, HEAD + start() + ev("ping")), (0.08, block(0, "text") + text("one")),
              (0.01, text(" two")), (0.01, text(" three")), (0, end())]
    with RawServer(script) as s:
        rec, reply = run(send_one(s.url + "/v1", api="anthropic", max_tokens=3))
    assert rec.ok, rec.error
    assert reply == "one two three" and len(rec.token_times) == 3
    assert rec.ttft >= 0.075                    # message_start came at once, the text 80 ms on
    assert rec.output_tokens == 3 and rec.output_tokens_source == "server"
    assert rec.prompt_tokens == 12 and rec.cached_tokens == 5 and rec.finish_reason == "stop"
    assert rec.response_id == "msg_1"
    head, body = sent(s)
    assert head.startswith("post /v1/messages ") and f"anthropic-version: {VERSION}" in head
    assert body["messages"] == MSGS and body["stream"] is True and body["max_tokens"] == 3


def test_thinking_then_text_gives_ttfo_and_reasoning():
    thinking = ev("content_block_delta", index=0, delta={"type": "thinking_delta", "thinking": "Let"})
    script = [(0, HEAD + start()), (0.02, block(0, "thinking") + thinking),
              (0.01, thinking), (0.05, ev("content_block_stop", index=0) + block(1, "text")
                                 + text("Yes", 1)),
              (0.01, text(".", 1)), (0, end(output_tokens=4))]
    with RawServer(script) as s:
        rec, reply = run(send_one(s.url + "/v1", api="anthropic", max_tokens=8))
    assert rec.ok, rec.error
    assert len(rec.token_times) == 4 and reply == "Yes."
    assert rec.reasoning_events == 2 and rec.reasoning_tokens == 2
    assert rec.first_output - rec.first_token >= 0.045     # the answer ~50 ms after thinking


def test_tool_use_is_output():
    script = [(0, HEAD + start()),
              (0.02, block(0, "tool_use", id="toolu_1", name="get", input={})),
              (0.01, ev("content_block_delta", index=0,
                        delta={"type": "input_json_delta", "partial_json": '{"city":'})),
              (0.01, ev("content_block_delta", index=0,
                        delta={"type": "input_json_delta", "partial_json": ' "Oslo"}'})),
              (0, end(stop="tool_use", output_tokens=5))]
    with RawServer(script) as s:
        rec, _ = run(send_one(s.url + "/v1", api="anthropic", max_tokens=8))
    assert rec.ok and len(rec.token_times) == 3 and rec.output_tokens == 5
    assert rec.first_tool == rec.token_times[0] and rec.finish_reason == "tool_calls"


ANT_ERROR = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}


@pytest.mark.parametrize("script, kind, message", [
    ([(0, HEAD + start() + block(0, "text") + text("a")),
      (0.01, ev("error", error=ANT_ERROR["error"]))], "error_event", "overloaded_error: Overloaded"),
    ([(0, HEAD + start() + block(0, "text") + text("a"))], "stream_cut", "message_stop"),
    ([(0, b"HTTP/1.1 529 Overloaded\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n"
       + json.dumps(ANT_ERROR).encode())], "http_status", "overloaded_error: Overloaded"),
    ([(0, b"HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/plain\r\nconnection: close\r\n\r\n"
       b"upstream down")], "http_status", "upstream down"),
])
def test_failures_are_named_as_the_api_shapes_them(script, kind, message):
    with RawServer(script) as s:
        rec, _ = run(send_one(s.url + "/v1", api="anthropic", max_tokens=4))
    assert not rec.ok and rec.error_kind == kind and message in (rec.error or ""), rec.error
    if kind == "http_status":
        assert rec.error == message                # the message, not the raw JSON body


def test_not_streamed_reads_the_content_blocks():
    body = json.dumps({"id": "msg_2", "type": "message", "role": "assistant", "model": "m",
                       "content": [{"type": "thinking", "thinking": "hm "},
                                   {"type": "text", "text": "the answer"}],
                       "stop_reason": "max_tokens",
                       "usage": {"input_tokens": 4, "cache_read_input_tokens": 6,
                                 "output_tokens": 3}}).encode()
    head = (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n"
            b"content-length: " + str(len(body)).encode() + b"\r\n\r\n")
    with RawServer([(0.02, head + body)]) as s:
        rec, reply = run(send_one(s.url + "/v1", api="anthropic", max_tokens=4, stream=False))
    assert rec.ok and reply == "hm the answer" and rec.ttft == rec.e2el
    assert rec.output_tokens == 3 and rec.prompt_tokens == 10 and rec.cached_tokens == 6
    assert rec.finish_reason == "length" and b'"stream"' not in s.requests[0]


def test_multi_turn_sends_the_history_as_messages(tmp_path):
    def script(i: int):
        return [(0, HEAD + start() + block(0, "text")), (0.01, text(f"reply{i}")),
                (0.005, text(" more")), (0, end(output_tokens=2))]
    with RawServer(script) as s:
        r = api_run(url=s.url + "/v1", api="anthropic", model="m", concurrency=1, requests=3,
                    turns=3, think="0s", prompt_tokens=10, output_tokens=2, server_probe="off",
                    out=tmp_path)
        bodies = [sent(s, i)[1] for i in range(len(s.requests))]
    assert run_exit_code(r) == 0
    doc = json.loads((only_run(tmp_path) / "run.json").read_text())
    assert doc["config"]["target"]["api"] == "anthropic"
    assert doc["summary"]["completed"] == 3 and doc["summary"]["failed"] == 0
    turns = [b["messages"] for b in bodies if len(b["messages"]) > 1]
    assert [len(t) for t in turns][-2:] == [3, 5]
    assert [m["role"] for m in turns[-1]] == ["user", "assistant", "user", "assistant", "user"]
    assert turns[-1][1]["content"].startswith("reply")


# -- against the mock --------------------------------------------------------------------------
@pytest.mark.parametrize("stream", [True, False])
def test_llmbench_run_against_the_mock(mock_factory, tmp_path, stream):
    m = mock_factory(ttft_ms=30, itl_ms=3, reasoning_tokens=2, prefix_cache=True)
    r = api_run(url=m.url + "/v1", api="anthropic", model="mock", concurrency=2, requests=6,
                prompt_tokens=20, output_tokens=6, server_probe="off", stream=stream,
                out=tmp_path)
    assert run_exit_code(r) == 0
    s = r.data["summary"]
    assert s["completed"] == 6 and s["failed"] == 0
    assert 25 <= s["median_ttft_ms"] <= 400
    measured = [x for x in records(r) if not x.get("warmup")]
    # usage from the mock: the reply's 6 tokens and 2 of thinking, the prompt as it counted it
    assert all(x["output_tokens"] == 8 and x["output_tokens_source"] == "server" and
               x["prompt_tokens"] >= 20 and x.get("cached_tokens") is not None for x in measured)
    if stream:
        assert all(x["reasoning_tokens"] == 2 for x in measured)


def test_tools_get_tool_use_blocks_from_the_mock(mock_factory, tmp_path):
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([{"type": "function", "function": {
        "name": "get_weather", "parameters": {"type": "object", "required": ["city"],
                                              "properties": {"city": {"type": "string"}}}}}]))
    m = mock_factory(ttft_ms=5, itl_ms=1, record=str(tmp_path / "sends.jsonl"),
                     record_prompts=True)
    r = api_run(url=m.url + "/v1", api="anthropic", model="mock", concurrency=1, requests=3,
                prompt_tokens=20, output_tokens=64, tools=tools, tool_choice="required",
                server_probe="off", out=tmp_path / "out")
    assert run_exit_code(r) == 0 and r.data["summary"]["completed"] == 3
    measured = [x for x in records(r) if not x.get("warmup")]
    assert all(x.get("first_tool") is not None and x["finish_reason"] == "tool_calls"
               for x in measured), measured[0]


def test_the_key_reaches_the_server_and_is_never_written(mock_factory, tmp_path, capsys,
                                                         monkeypatch):
    secret = "sk-ant-do-not-write-7f3a91"
    m = mock_factory(ttft_ms=1, itl_ms=0, api_key=secret)
    common = dict(url=m.url + "/v1", api="anthropic", model="mock", concurrency=1, requests=2,
                  prompt_tokens=10, output_tokens=3, server_probe="off")
    # without it: refused before the load, as the API words it, naming the API's variable
    with pytest.raises(ServerRefused, match="401 .set --api-key or ANTHROPIC_API_KEY.: "
                                            "authentication_error: "):
        api_run(**common, out=tmp_path / "none")
    ok = api_run(**common, api_key=secret, out=tmp_path / "flag")
    monkeypatch.setenv("ANTHROPIC_API_KEY", secret)
    env = api_run(**common, out=tmp_path / "env")
    for r in (ok, env):
        assert r.data["summary"]["completed"] == 2 and r.data["summary"]["failed"] == 0
        assert r.data["config"]["target"]["api_key"] == "set"
    out = capsys.readouterr()
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(written) >= 6
    assert not [p for p in written if secret.encode() in p.read_bytes()]
    assert secret not in out.out + out.err


def test_the_mock_speaks_the_messages_api(mock_factory):
    import httpx
    m = mock_factory(ttft_ms=1, itl_ms=0, tokens=5, prefix_cache=True)
    url = m.url + "/v1/messages"
    base = {"model": "mock", "max_tokens": 40,
            "system": [{"type": "text", "text": "You answer with a tool."}],
            "messages": [{"role": "user", "content": "weather in Oslo?"}]}
    tools = [{"name": "get_weather", "input_schema": {
        "type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}}},
        {"name": "other", "input_schema": {"type": "object"}}]
    whole = httpx.post(url, json={**base, "tools": tools,
                                  "tool_choice": {"type": "tool", "name": "get_weather"}}).json()
    assert whole["type"] == "message" and whole["stop_reason"] == "tool_use"
    (use,) = whole["content"]
    assert use["type"] == "tool_use" and use["name"] == "get_weather" and "city" in use["input"]
    u = whole["usage"]
    assert u["input_tokens"] + u["cache_read_input_tokens"] > 5 and u["output_tokens"] > 3
    # the same prompt again: the prefix cache serves it, and the usage says so
    again = httpx.post(url, json={**base, "tools": tools, "tool_choice": {"type": "any"}}).json()
    assert again["usage"]["cache_read_input_tokens"] >= 16
    assert again["usage"]["input_tokens"] + again["usage"]["cache_read_input_tokens"] == \
        u["input_tokens"] + u["cache_read_input_tokens"]
    plain = httpx.post(url, json={**base, "tools": tools, "tool_choice": {"type": "none"}}).json()
    assert plain["content"][0]["type"] == "text" and plain["stop_reason"] == "max_tokens"
    for body, status, kind in (({**base, "max_tokens": None}, 400, "invalid_request_error"),
                               ({**base, "model": "nope"}, 404, "not_found_error"),
                               ({**base, "messages": []}, 400, "invalid_request_error"),
                               ({**base, "tool_choice": {"type": "tool", "name": "x"},
                                 "tools": tools}, 400, "invalid_request_error")):
        r = httpx.post(url, json=body)
        assert r.status_code == status and r.json()["type"] == "error"
        assert r.json()["error"]["type"] == kind, r.json()


def test_the_mock_asks_for_its_key_on_every_api(mock_factory):
    import httpx
    m = mock_factory(ttft_ms=1, itl_ms=0, tokens=2, api_key="sk-mock-key-1")
    messages = {"model": "mock", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}
    chat = {"model": "mock", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}
    r = httpx.post(m.url + "/v1/messages", json=messages)
    assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"
    r = httpx.post(m.url + "/v1/chat/completions", json=chat)
    assert r.status_code == 401 and "message" in r.json()["error"]
    assert httpx.post(m.url + "/v1/messages", json=messages,
                      headers={"x-api-key": "sk-mock-key-1"}).status_code == 200
    assert httpx.post(m.url + "/v1/chat/completions", json=chat,
                      headers={"authorization": "Bearer sk-mock-key-1"}).status_code == 200
    assert httpx.post(m.url + "/v1/chat/completions", json=chat,
                      headers={"authorization": "Bearer wrong"}).status_code == 401
    # the key is never shown by the mock either
    assert httpx.get(m.url + "/admin/config").json()["api_key"] == "set"
