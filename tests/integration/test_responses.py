"""OpenAI's Responses API (--api responses): the exact event sequences the real API sends,
classified; the client against scripted loopback servers (reasoning, tool calls, failures, a cut,
usage, a whole body); multi-turn history; and `llmbench run --api responses` against the mock."""

import json

import pytest

from llmbench import wire
from llmbench.client.target import detect_api, make_target
from llmbench.wire.events import END, ERROR, MALFORMED, OTHER, TOKEN, Usage
from llmbench import run as api_run
from tests.helpers import RawServer, only_run, run, send_one
from tests.helpers.api import run_exit_code

# every test here runs on both HTTP transports (conftest.transport)
pytestmark = pytest.mark.usefixtures("transport")

MSGS = [{"role": "user", "content": "hello there"}]
HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
        b"connection: close\r\n\r\n")


def ev(kind: str, **fields) -> bytes:
    """One event as the OpenAI API frames it: an event line, then the JSON with the same type."""
    data = json.dumps({"type": kind, "sequence_number": 0, **fields})
    return f"event: {kind}\ndata: {data}\n\n".encode()


RESP = {"id": "resp_1", "object": "response", "status": "in_progress", "model": "m", "output": []}
USAGE = {"input_tokens": 9, "input_tokens_details": {"cached_tokens": 4}, "output_tokens": 3,
         "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 12}


def opening() -> bytes:
    return (ev("response.created", response=RESP) + ev("response.in_progress", response=RESP)
            + ev("response.output_item.added", output_index=0,
                 item={"id": "msg_1", "type": "message", "role": "assistant", "content": []})
            + ev("response.content_part.added", item_id="msg_1", output_index=0, content_index=0,
                 part={"type": "output_text", "text": ""}))


def delta(text: str) -> bytes:
    return ev("response.output_text.delta", item_id="msg_1", output_index=0, content_index=0,
              delta=text, logprobs=[])


def completed(usage=USAGE, status="completed", **extra) -> bytes:
    return ev(f"response.{status}", response={**RESP, "status": status, "usage": usage, **extra})


def test_body_sends_the_conversation_as_input():
    b = wire.get("responses").body("m", MSGS, 16, True, {"temperature": 0.5})
    assert b == {"model": "m", "input": MSGS, "max_output_tokens": 16, "stream": True,
                 "temperature": 0.5, "store": False}
    whole = wire.get("responses").body("m", MSGS, None, False, {"extra_body": {"store": True}})
    assert "stream" not in whole and "max_output_tokens" not in whole and whole["store"] is True


def test_each_event_type_means_what_the_api_says():
    c = wire.get("responses").classify

    def one(raw: bytes):
        return c(raw.split(b"data: ", 1)[1].strip())
    assert one(ev("response.created", response=RESP)).kind == OTHER
    assert one(ev("response.in_progress", response=RESP)).kind == OTHER
    assert one(ev("response.output_item.added", output_index=0, item={})).kind == OTHER
    assert one(ev("response.output_text.done", text="abc")).kind == OTHER
    t = one(delta(" hi"))
    assert t.kind == TOKEN and t.text == " hi" and not t.reasoning
    for kind in ("response.reasoning_text.delta", "response.reasoning_summary_text.delta"):
        r = one(ev(kind, item_id="rs_1", delta="think"))
        assert r.kind == TOKEN and r.reasoning and r.text == ""
    tool = one(ev("response.function_call_arguments.delta", item_id="fc_1", delta='{"a"'))
    assert tool.kind == TOKEN and not tool.reasoning
    done = one(completed({**USAGE, "output_tokens_details": {"reasoning_tokens": 2}}))
    assert done.kind == END and done.finish_reason == "stop"
    assert done.usage == Usage(prompt_tokens=9, completion_tokens=3, cached_tokens=4,
                               reasoning_tokens=2)
    cut = one(completed(status="incomplete", incomplete_details={"reason": "max_output_tokens"}))
    assert cut.kind == END and cut.finish_reason == "length"
    failed = one(ev("response.failed", response={**RESP, "status": "failed",
                                                 "error": {"code": "server_error", "message": "boom"}}))
    assert failed.kind == ERROR and failed.error == "server_error: boom"
    err = one(ev("error", code="rate_limit_exceeded", message="slow down", param=None))
    assert err.kind == ERROR and err.error == "rate_limit_exceeded: slow down"
    assert c(b'{"type": "response.output_text.delta", "delta": ').kind == MALFORMED


def test_url_detection_and_forced_api():
    assert detect_api("http://h:8000/v1/responses") == ("responses", "http://h:8000/v1")
    t = make_target("http://h:8000/v1", "m", api="responses")
    assert t.endpoint == "http://h:8000/v1/responses"


def test_ttft_is_the_first_output_delta_not_the_created_event():
    script = [(0, HEAD + opening()), (0.08, delta("one")), (0.01, delta(" two")),
              (0.01, delta(" three")), (0, completed())]
    with RawServer(script) as s:
        rec, text = run(send_one(s.url + "/v1", api="responses", max_tokens=3))
    assert rec.ok, rec.error
    assert text == "one two three" and len(rec.token_times) == 3
    # the created/in_progress events came at once; the first token 80 ms later
    assert rec.ttft >= 0.075
    assert rec.output_tokens == 3 and rec.output_tokens_source == "server"
    assert rec.prompt_tokens == 9 and rec.cached_tokens == 4 and rec.finish_reason == "stop"
    sent = json.loads(s.requests[0].split(b"\r\n\r\n", 1)[1])
    assert s.requests[0].startswith(b"POST /v1/responses ")
    assert sent["input"] == [{"role": "user", "content": "hello there"}] and sent["stream"] is True


def test_reasoning_then_answer_gives_ttfo_and_reasoning_tokens():
    reasoning = (ev("response.output_item.added", output_index=0,
                    item={"id": "rs_1", "type": "reasoning", "summary": []})
                 + ev("response.reasoning_summary_text.delta", item_id="rs_1", delta="Let me"))
    usage = {**USAGE, "output_tokens": 4, "output_tokens_details": {"reasoning_tokens": 2}}
    script = [(0, HEAD + ev("response.created", response=RESP)), (0.02, reasoning),
              (0.01, ev("response.reasoning_summary_text.delta", item_id="rs_1", delta=" think")),
              (0.05, opening() + delta("Yes")), (0.01, delta(".")), (0, completed(usage))]
    with RawServer(script) as s:
        rec, text = run(send_one(s.url + "/v1", api="responses", max_tokens=8))
    assert rec.ok, rec.error
    assert len(rec.token_times) == 4 and text == "Yes."
    assert rec.reasoning_tokens == 2
    # the first answer token came ~50 ms after the first reasoning token
    assert rec.first_output - rec.first_token >= 0.045


def test_tool_call_arguments_are_tokens():
    script = [(0, HEAD + ev("response.created", response=RESP)
               + ev("response.output_item.added", output_index=0,
                    item={"id": "fc_1", "type": "function_call", "name": "get", "arguments": ""})),
              (0.02, ev("response.function_call_arguments.delta", item_id="fc_1", delta='{"city":')),
              (0.01, ev("response.function_call_arguments.delta", item_id="fc_1", delta='"Oslo"}')),
              (0, completed({**USAGE, "output_tokens": 2}))]
    with RawServer(script) as s:
        rec, _ = run(send_one(s.url + "/v1", api="responses", max_tokens=8))
    assert rec.ok and len(rec.token_times) == 2 and rec.output_tokens == 2


@pytest.mark.parametrize("failure, kind, message", [
    (ev("response.failed", response={**RESP, "status": "failed",
                                     "error": {"code": "server_error", "message": "GPU fell over"}}),
     "error_event", "server_error: GPU fell over"),
    (ev("error", code="invalid_prompt", message="too long", param=None), "error_event",
     "invalid_prompt: too long"),
    (None, "stream_cut", "response.completed"),
])
def test_failures_are_named(failure, kind, message):
    end = [(0, failure)] if failure is not None else []
    with RawServer([(0, HEAD + opening()), (0.01, delta("a"))] + end) as s:
        rec, _ = run(send_one(s.url + "/v1", api="responses", max_tokens=4))
    assert not rec.ok and rec.error_kind == kind and message in (rec.error or "")


def test_incomplete_is_a_clean_end_with_finish_length():
    script = [(0, HEAD + opening() + delta("a") + delta("b")),
              (0, completed(status="incomplete", incomplete_details={"reason": "max_output_tokens"}))]
    with RawServer(script) as s:
        rec, _ = run(send_one(s.url + "/v1", api="responses", max_tokens=2))
    assert rec.ok and rec.finish_reason == "length"


def test_not_streamed_reads_the_output_items():
    body = json.dumps({**RESP, "status": "completed", "usage": USAGE, "output": [
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "hm "}]},
        {"type": "message", "content": [{"type": "output_text", "text": "the answer"}]}]}).encode()
    head = (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n"
            b"content-length: " + str(len(body)).encode() + b"\r\n\r\n")
    with RawServer([(0.02, head + body)]) as s:
        rec, text = run(send_one(s.url + "/v1", api="responses", max_tokens=4, stream=False))
    assert rec.ok and text == "hm the answer" and rec.ttft == rec.e2el
    assert rec.output_tokens == 3 and rec.prompt_tokens == 9
    assert b'"stream"' not in s.requests[0]


def test_multi_turn_sends_the_history_and_the_run_measures_it(tmp_path):
    def script(i: int):
        return [(0, HEAD + opening()), (0.01, delta(f"reply{i}")), (0.005, delta(" more")),
                (0, completed({**USAGE, "output_tokens": 2}))]
    with RawServer(script) as s:
        r = api_run(url=s.url + "/v1", api="responses", model="m", concurrency=1, requests=3,
                    turns=3, think="0s", prompt_tokens=10, output_tokens=2, server_probe="off",
                    out=tmp_path)                               # in this process
        bodies = [json.loads(raw.split(b"\r\n\r\n", 1)[1]) for raw in s.requests]
    assert run_exit_code(r) == 0
    doc = json.loads((only_run(tmp_path) / "run.json").read_text())
    assert doc["config"]["target"]["api"] == "responses"
    assert doc["summary"]["completed"] == 3 and doc["summary"]["failed"] == 0
    # the conversation's turns: 1, 3 and 5 messages, the replies sent back as assistant turns
    turns = [b["input"] for b in bodies if len(b["input"]) > 1]
    assert [len(t) for t in turns][-2:] == [3, 5]
    assert turns[-1][1]["role"] == "assistant" and turns[-1][1]["content"].startswith("reply")


def test_llmbench_run_against_the_mock(mock_factory, tmp_path):
    m = mock_factory(ttft_ms=30, itl_ms=3, reasoning_tokens=2)
    r = api_run(url=m.url + "/v1", api="responses", model="mock", concurrency=2, requests=6,
                prompt_tokens=20, output_tokens=6, server_probe="off", out=tmp_path)
    assert run_exit_code(r) == 0
    run_dir = only_run(tmp_path)
    s = json.loads((run_dir / "run.json").read_text())["summary"]
    assert s["completed"] == 6 and s["failed"] == 0
    # the mock's 30 ms TTFT (reasoning first: the first token is a reasoning token)
    assert 25 <= s["median_ttft_ms"] <= 200
    recs = [json.loads(x) for x in (run_dir / "requests.jsonl").read_text().splitlines()]
    measured = [x for x in recs if not x.get("warmup")]
    assert all(x["reasoning_tokens"] == 2 and x["output_tokens_source"] == "server" for x in measured)


def test_server_state_sends_previous_response_id_and_only_the_new_turn(tmp_path):
    def script(i: int):
        resp = {**RESP, "id": f"resp_{i}"}
        return [(0, HEAD + ev("response.created", response=resp) + opening()[
            len(ev("response.created", response=RESP)):]), (0.005, delta(f"reply{i}")),
                (0, ev("response.completed", response={**resp, "status": "completed", "usage": USAGE}))]
    with RawServer(script) as s:
        r = api_run(url=s.url + "/v1", api="responses", model="m", responses_state="server",
                    concurrency=1, requests=3, turns=3, think="0s", prompt_tokens=10,
                    output_tokens=2, server_probe="off", out=tmp_path)
        bodies = [json.loads(raw.split(b"\r\n\r\n", 1)[1]) for raw in s.requests]
    assert run_exit_code(r) == 0
    convo = [b for b in bodies if b.get("max_output_tokens") == 2][-3:]
    assert all(b["store"] is True for b in convo)
    first, second, third = convo
    assert "previous_response_id" not in first and len(first["input"]) == 1
    ids = [json.loads(line)["response_id"] for line in
           (only_run(tmp_path) / "requests.jsonl").read_text().splitlines()][-3:]
    assert second["previous_response_id"] == ids[0] and len(second["input"]) == 1
    assert third["previous_response_id"] == ids[1] and third["input"][0]["role"] == "user"


def test_the_mock_keeps_the_conversation_for_previous_response_id(mock_factory):
    import httpx
    m = mock_factory(ttft_ms=1, itl_ms=0, tokens=5)
    base = {"model": "mock", "max_output_tokens": 5, "store": True}
    one = httpx.post(m.url + "/v1/responses", json={**base, "input": "first question here"}).json()
    two = httpx.post(m.url + "/v1/responses", json={**base, "input": "and then",
                                                   "previous_response_id": one["id"]}).json()
    alone = httpx.post(m.url + "/v1/responses", json={**base, "input": "and then"}).json()
    # the stored history (question and reply) is prefilled with the new turn
    assert two["usage"]["input_tokens"] > alone["usage"]["input_tokens"] + 5
    gone = httpx.post(m.url + "/v1/responses", json={**base, "input": "x",
                                                    "previous_response_id": "resp_nope"})
    assert gone.status_code == 400 and "resp_nope" in gone.json()["error"]["message"]


def test_a_tool_result_after_previous_response_id_is_read_as_a_tool_turn(mock_factory):
    """An agent on server state (--responses-state server) sends its tool's output as a
    function_call_output item with previous_response_id: the mock reads it as a tool turn after
    the stored history (it once read the raw items there and refused them: 400)."""
    import httpx
    m = mock_factory(ttft_ms=1, itl_ms=0, tokens=5)
    base = {"model": "mock", "max_output_tokens": 5, "store": True}
    one = httpx.post(m.url + "/v1/responses", json={**base, "input": "look it up"}).json()
    output = {"type": "function_call_output", "call_id": "call_1",
              "output": "forty two results found in the index"}
    two = httpx.post(m.url + "/v1/responses", json={**base, "input": [output],
                                                   "previous_response_id": one["id"]})
    assert two.status_code == 200, two.text
    alone = httpx.post(m.url + "/v1/responses", json={**base, "input": [output]}).json()
    assert two.json()["usage"]["input_tokens"] > alone["usage"]["input_tokens"] + 5
