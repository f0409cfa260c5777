"""An agent's history carries the model's real tool calls (issue 35 part 1): the decoder collects
them from each API's stream (chat's tool_calls deltas, the Responses API's function_call items,
Messages' tool_use blocks), and each API's body sends them back in its own shape."""

from __future__ import annotations

import json

from llmbench.client import decoder as d
from llmbench.records.record import Record
from llmbench.wire import get
from llmbench.wire.agents import Reply, ReplyText, reply_text, tool_calls_of
from llmbench.wire.anthropic import messages_of
from llmbench.wire.responses import body as responses_body


def sse(obj) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def decode(api: str, events: list) -> tuple[Record, str]:
    rec, reply = Record("r", 0.0), Reply()
    dec = d.StreamDecoder(get(api), rec, reply)
    for i, ev in enumerate(events):
        dec.feed(float(i), ev if isinstance(ev, bytes) else sse(ev))
    dec.close(float(len(events)))
    return rec, reply_text(reply)


CALL = {"id": "call_7", "type": "function",
        "function": {"name": "read_file", "arguments": '{"path": "a.py"}'}}


def test_chat_tool_call_deltas_join_into_the_call():
    rec, text = decode("openai-chat", [
        {"choices": [{"delta": {"role": "assistant"}}]},
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "call_7", "type": "function",
                                                "function": {"name": "read_file",
                                                             "arguments": ""}}]}}]},
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"pa'}}]}}]},
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": 'th": "a.py"}'}}]},
                      "finish_reason": "tool_calls"}]},
        b"data: [DONE]\n\n"])
    assert rec.error_kind is None and rec.first_tool is not None and len(rec.token_times) == 3
    assert isinstance(text, ReplyText) and text == ""
    assert tool_calls_of(text) == [CALL]


def test_responses_function_call_items_join_into_the_call():
    rec, text = decode("responses", [
        {"type": "response.created", "response": {"id": "resp_1"}},
        {"type": "response.output_item.added", "output_index": 0,
         "item": {"type": "function_call", "id": "fc_1", "call_id": "call_7",
                  "name": "read_file", "arguments": ""}},
        {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": '{"path"'},
        {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": ': "a.py"}'},
        {"type": "response.completed", "response": {"id": "resp_1", "usage": {
            "input_tokens": 10, "output_tokens": 4}}}])
    # the item naming the call is not a token event (METRICS.md): its arguments are
    assert rec.error_kind is None and len(rec.token_times) == 2
    assert tool_calls_of(text) == [CALL]


def test_messages_tool_use_blocks_join_into_the_call():
    rec, text = decode("anthropic", [
        {"type": "message_start", "message": {"id": "m", "usage": {"input_tokens": 10}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta",
                                                              "text": "Let me look."}},
        {"type": "content_block_start", "index": 1, "content_block": {
            "type": "tool_use", "id": "call_7", "name": "read_file", "input": {}}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta",
                                                              "partial_json": '{"path": '}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta",
                                                              "partial_json": '"a.py"}'}},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"},
         "usage": {"output_tokens": 9}},
        {"type": "message_stop"}])
    assert rec.error_kind is None and rec.finish_reason == "tool_calls"
    assert text == "Let me look." and tool_calls_of(text) == [CALL]


def test_a_reply_without_calls_is_a_plain_string():
    rec, text = decode("openai-chat", [{"choices": [{"delta": {"content": "hi"}}]},
                                       b"data: [DONE]\n\n"])
    assert type(text) is str and tool_calls_of(text) == []


HISTORY = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"},
           {"role": "assistant", "content": None, "tool_calls": [CALL]},
           {"role": "tool", "tool_call_id": "call_7", "content": "file text"}]


def test_the_history_goes_back_in_each_apis_shape():
    items = responses_body("m", HISTORY, 16, True, {})["input"]
    assert items[2:] == [{"type": "function_call", "call_id": "call_7", "name": "read_file",
                          "arguments": '{"path": "a.py"}'},
                         {"type": "function_call_output", "call_id": "call_7",
                          "output": "file text"}]
    system, turns = messages_of(HISTORY)
    assert system == "sys"
    assert turns[1] == {"role": "assistant", "content": [
        {"type": "tool_use", "id": "call_7", "name": "read_file", "input": {"path": "a.py"}}]}
    assert turns[2] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "call_7", "content": "file text"}]}
