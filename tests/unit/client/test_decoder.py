"""The stream decoder with scripted chunks, no network: every event decodes the same whether it
arrives in a chunk or is left over when the connection ends, and usage is checked at the source."""

import json
import math

import pytest

from llmbench.client import decoder as d
from llmbench.client.request import Client
from llmbench.records.record import Record
from llmbench.client.target import make_target
from llmbench.wire import get
from llmbench.wire.events import Usage, count

CHAT = get("openai-chat")
OLLAMA = get("ollama")


def sse(obj) -> bytes:
    return b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"


def tok(text, **extra):
    return {"choices": [{"delta": {"content": text}, **extra}]}


def decode(fmt, chunks, close_at=None):
    """Feed (t, bytes) pairs; close at the end unless a chunk ended or failed the request."""
    rec, texts = Record("r", 0.0), []
    dec = d.StreamDecoder(fmt, rec, texts)
    results = []
    for t, chunk in chunks:
        r = dec.feed(t, chunk)
        results.append(r)
        if r in (d.ENDED, d.FAILED, d.WHOLE):
            if r == d.ENDED:
                dec.finish()
            return rec, texts, results
    dec.close(close_at if close_at is not None else (chunks[-1][0] if chunks else 0.0))
    return rec, texts, results


def test_tokens_get_their_chunk_arrival_time_and_done_ends():
    rec, texts, res = decode(CHAT, [(1.0, sse({"choices": [{"delta": {"role": "assistant"}}]})),
                                    (2.0, sse(tok("a")) + sse(tok("b"))),
                                    (3.0, b": keepalive\n\n"),
                                    (4.0, sse(tok("c", finish_reason="length"))),
                                    (5.0, sse({"choices": [], "usage": {"completion_tokens": 3,
                                                                        "prompt_tokens": 9}})
                                     + sse(b"[DONE]"))])
    assert res == [d.EVENTS, d.EVENTS, d.NOTHING, d.EVENTS, d.ENDED]
    assert rec.token_times == [2.0, 2.0, 4.0] and texts == ["a", "b", "c"]
    assert rec.output_tokens == 3 and rec.prompt_tokens == 9 and rec.finish_reason == "length"
    assert rec.error_kind is None


def test_a_partial_event_is_nothing_until_its_blank_line():
    rec, _, res = decode(CHAT, [(1.0, b'data: {"choices": [{"delta": {"cont'),
                                (2.0, b'ent": "x"}}]}\n\n'), (3.0, sse(b"[DONE]"))])
    assert res == [d.NOTHING, d.EVENTS, d.ENDED] and rec.token_times == [2.0]


# -- the end of a stream decodes by the same rules as its middle (the flush used to drift) ----

def test_an_error_event_left_at_connection_end_is_an_error_not_a_cut():
    rec, _, _ = decode(CHAT, [(1.0, sse(tok("a"))),
                              (2.0, b'data: {"error": {"message": "out of memory"}}')])
    assert rec.error_kind == "error_event" and rec.error == "out of memory"


def test_a_malformed_event_left_at_connection_end_is_malformed():
    rec, _, _ = decode(CHAT, [(1.0, sse(tok("a"))), (2.0, b'data: {"choices": [')])
    assert rec.error_kind == "malformed_event"


def test_counts_and_finish_reason_of_a_last_event_without_blank_line():
    u = {"completion_tokens": 1}
    last = {"choices": [{"delta": {"content": "b"}, "finish_reason": "stop"}],
            "usage": {"completion_tokens": 3}}
    rec, texts, _ = decode(CHAT, [(1.0, sse({**tok("a"), "usage": u})),
                                  (2.0, sse(b"[DONE]")[:0] + b"data: " + json.dumps(last).encode())],
                           close_at=2.5)
    # the stream never said [DONE]: a cut, but what arrived is all recorded
    assert rec.error_kind == "stream_cut"
    assert rec.token_times == [1.0, 2.5] and texts == ["a", "b"]
    assert rec.token_counts == [1, 2] and rec.finish_reason == "stop" and rec.output_tokens == 3


def test_done_without_blank_line_at_connection_end_is_a_clean_end():
    rec, _, _ = decode(CHAT, [(1.0, sse(tok("a"))), (2.0, b"data: [DONE]")])
    assert rec.error_kind is None and rec.token_times == [1.0]


def test_ollama_done_line_without_newline_carries_usage_and_timing():
    rec, texts, _ = decode(OLLAMA, [
        (1.0, b'{"message": {"content": "a"}, "done": false}\n'),
        (2.0, b'{"message": {"content": ""}, "done": true, "done_reason": "stop", "eval_count": 1,'
              b' "prompt_eval_count": 4, "total_duration": 10}')])
    assert rec.error_kind is None and rec.output_tokens == 1 and rec.prompt_tokens == 4
    assert rec.finish_reason == "stop" and rec.server_timing["total_duration"] == 10


def test_ollama_done_line_with_text_and_no_tokens_is_a_whole_reply():
    rec, texts, res = decode(OLLAMA, [(1.0, b'{"message": {"content": "all"}, "done": true}\n')])
    assert res == [d.ENDED] and not rec.stream and rec.token_times == [1.0] and texts == ["all"]


def test_a_json_body_answering_a_stream_request_is_whole():
    _, _, res = decode(CHAT, [(1.0, b"  \n"), (2.0, b'{"choices": []}')])
    assert res == [d.NOTHING, d.WHOLE]


def test_events_after_an_error_in_the_same_chunk_are_ignored():
    rec, texts, res = decode(CHAT, [(1.0, sse({"error": "boom"}) + sse(tok("late")))])
    assert res == [d.FAILED] and rec.error_kind == "error_event" and texts == []


# -- usage is checked where it is read --------------------------------------------------------

@pytest.mark.parametrize("bad", [-1, "12", "x", True, None, 1.5, math.inf, math.nan, [], {}])
def test_unusable_counts_are_dropped(bad):
    assert count(bad) is None
    rec, _, _ = decode(CHAT, [(1.0, sse(tok("a"))),
                              (2.0, sse({"choices": [], "usage": {"completion_tokens": bad,
                                                                  "prompt_tokens": bad}})
                               + sse(b"[DONE]"))])
    assert rec.output_tokens is None and rec.prompt_tokens is None
    if bad is not None:
        # said in the note; the reply is then counted by its token events (Client._finish)
        assert f"completion_tokens {bad}" in rec.note and f"prompt_tokens {bad}" in rec.note
        assert rec.output_tokens_source == "events"


def test_a_good_count_after_a_bad_one_is_the_servers():
    rec, _, _ = decode(CHAT, [(1.0, sse({**tok("a"), "usage": {"completion_tokens": -1}})),
                              (2.0, sse({"choices": [], "usage": {"completion_tokens": 1}})
                               + sse(b"[DONE]"))])
    assert rec.output_tokens == 1 and rec.output_tokens_source == "server"


def test_good_counts_are_kept():
    assert count(3) == 3 and count(4.0) == 4 and count(0) == 0
    assert Usage.of(None, None, None) is None
    assert Usage.of(5, -7) == Usage(prompt_tokens=5, rejected=("completion_tokens -7",))


def test_cached_tokens_from_prompt_tokens_details():
    rec, _, _ = decode(CHAT, [(1.0, sse(tok("a"))),
                              (2.0, sse({"choices": [], "usage": {
                                  "prompt_tokens": 10, "completion_tokens": 1,
                                  "prompt_tokens_details": {"cached_tokens": 8}}}) + sse(b"[DONE]"))])
    assert rec.cached_tokens == 8 and rec.prompt_tokens == 10


def test_whole_body_usage_is_checked_too():
    rec, texts = Record("r", 0.0), []
    d.decode_whole(CHAT, json.dumps({"choices": [{"message": {"content": "hi"}}],
                                     "usage": {"completion_tokens": -4}}).encode(), 1.0, rec, texts)
    assert texts == ["hi"] and rec.token_times == [1.0] and rec.output_tokens is None


@pytest.mark.parametrize("value,kept", [("12.5", 12.5), ("0", 0.0), ("-3", None), ("nan", None),
                                        ("inf", None), ("-inf", None), ("soon", None)])
def test_queue_header_non_finite_or_negative_is_dropped(value, kept):
    c = Client(make_target("http://127.0.0.1:1/v1", "m"))
    rec = Record("r", 0.0)
    c._read_headers({"x-llmbench-queue-ms": value}, rec)
    assert rec.server_queue_ms == kept


def test_a_stream_with_empty_data_events_is_measured_on_both_transports(transport, tmp_path):
    """Over loopback, both transports: empty "data:" events between tokens are skipped, the
    request succeeds with its tokens, and a run's preflight accepts the server."""
    import llmbench
    from tests.helpers import CHAT_ROLE, RawServer, chat_token, http_head, run, send_one
    from tests.helpers.api import run_exit_code
    body = (CHAT_ROLE + b"data:\n\n" + chat_token("a") + b"data: \n\n" + chat_token("b")
            + b"data:\n\n" + b"data: [DONE]\n\n")
    with RawServer([(0, http_head() + body)]) as s:
        rec, text = run(send_one(s.url + "/v1", "m"))
        assert rec.ok, (rec.error_kind, rec.error)
        assert text == "ab" and len(rec.token_times) == 2
        # the preflight and a run, in this process through the API (it raises on a refusal)
        done = llmbench.run(url=s.url + "/v1", model="m", requests=3, out=tmp_path)
    assert run_exit_code(done) == 0
