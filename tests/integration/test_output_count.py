"""With no usage in the stream, the reply's length is counted exactly where the stream says it
(issue 45): finish_reason "length" is the length asked, and with only the approximate word
tokenizer the stream's token events count it (the words were 58-62 for a true 64)."""

import json
import time

from llmbench.client.request import Client, RequestParams, Timeouts
from llmbench.client.target import make_target
from llmbench.records.record import Record
from llmbench.workload.tokenizer import load_tokenizer
from tests.helpers import RawServer, run

HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")


def chunk(text, finish=None):
    c = {"id": "x", "object": "chat.completion.chunk", "model": "m",
         "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish}]}
    return b"data: " + json.dumps(c).encode() + b"\n\n"


# one token an event, as llama.cpp and llama-cpp-python stream; words that the approximate
# tokenizer counts as more or fewer tokens than they are
WORDS = ["Hel", "lo", ",", " wonder", "ful", " world", "!", " It's", " a", " fine"]


def _send(script, max_tokens):
    async def go():
        target = make_target(SERVER.url + "/v1", "m")
        tok = load_tokenizer("approx")
        async with Client(target, RequestParams(stream=True), Timeouts(),
                          count_tokens=tok.count) as c:
            rec = Record("t-1", scheduled=time.perf_counter())
            await c.send([{"role": "user", "content": "hi"}], max_tokens, rec,
                         prompt_tokens_client=2)
            return rec
    return run(go())


SERVER = None


def test_finish_reason_length_is_the_length_asked_and_events_count_the_rest():
    global SERVER
    length = [(0, HEAD)] + [(0.001, chunk(w)) for w in WORDS[:-1]] \
        + [(0.001, chunk(WORDS[-1], "length")), (0, b"data: [DONE]\n\n")]
    with RawServer(length) as s:
        SERVER = s
        rec = _send(length, max_tokens=10)
    assert rec.ok, rec.error
    assert rec.output_tokens == 10 and rec.output_tokens_source == "length"
    stop = [(0, HEAD)] + [(0.001, chunk(w)) for w in WORDS[:6]] \
        + [(0.001, chunk("", "stop")), (0, b"data: [DONE]\n\n")]
    with RawServer(stop) as s:
        SERVER = s
        rec = _send(stop, max_tokens=64)
    assert rec.ok, rec.error
    # six token events: six tokens (the word tokenizer would count the words and punctuation)
    assert rec.output_tokens == 6 and rec.output_tokens_source == "events"


def test_events_of_several_tokens_are_not_taken_for_one_each():
    global SERVER
    # a server that streams a few tokens an event: its events undercount, the text is counted
    many = [(0, HEAD), (0.001, chunk("Hello there, my wonderful")),
            (0.001, chunk(" friend, how are you today?")), (0.001, chunk("", "stop")),
            (0, b"data: [DONE]\n\n")]
    with RawServer(many) as s:
        SERVER = s
        rec = _send(many, max_tokens=64)
    assert rec.ok, rec.error
    assert rec.output_tokens_source == "tokenizer" and rec.output_tokens > 2
