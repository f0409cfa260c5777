"""``llmbench chat``: one user, a few turns, against loopback servers the test starts."""

from __future__ import annotations

import re

from tests.helpers import RawServer, http_head, llmbench
from tests.helpers.engines import EngineServer


def test_three_turns_show_their_figures_and_the_cache_taking_the_history(mock_factory):
    # a KV budget: each conversation's prefix stays cached and usage reports the hits
    mock = mock_factory(ttft_ms=5, itl_ms=2, prefill_ms_per_token=0.01, kv_tokens=100_000,
                        models=["m"])
    r = llmbench("chat", "--url", mock.url + "/v1", "--replies", "3", "--reply-tokens", "12")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    turns = [line for line in lines if line.startswith("turn ")]
    assert len(turns) == 3
    got = [re.match(r"turn (\d): TTFT (\d+) ms, ([\d.]+) tokens/s, prompt (\d+) tokens "
                    r"\((\d+) cached\), (\d+) out$", t) for t in turns]
    assert all(got), turns
    prompts = [int(m.group(4)) for m in got]
    cached = [int(m.group(5)) for m in got]
    assert [int(m.group(6)) for m in got] == [12, 12, 12]
    assert prompts[0] < prompts[1] < prompts[2]          # the history grows
    assert cached[0] == 0                                # a new session: nothing of it cached
    assert 0 < cached[1] < prompts[1] and prompts[1] <= cached[2] < prompts[2]
    assert lines[-1] == (f"turns 2-3 found {cached[1]}, {cached[2]} prompt tokens in the "
                         "server's cache: their history")
    # each turn's reply, quoted after its figures
    assert all(lines[lines.index(t) + 1].startswith('  "') for t in turns)
    assert all(len(line) <= 80 for line in lines)


def test_a_server_that_cannot_stream_fails_in_one_line(mock_factory):
    page = b"<html><body>Welcome to nginx</body></html>"
    with RawServer([(0, http_head("200 OK", "text/html", length=len(page)) + page)]) as srv:
        r = llmbench("chat", "--url", f"http://127.0.0.1:{srv.port}/v1", "--model", "m")
    assert r.returncode == 1
    errors = [x for x in r.stderr.splitlines() if x.startswith("error:")]
    assert errors == [f"error: http://127.0.0.1:{srv.port}/v1/chat/completions: it answered an "
                      "HTML page, not an LLM API: check --url (the API is often at /v1)"]
    # a server that sends the reply whole although a stream was asked for
    body = (b'{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":'
            b'"assistant","content":"hello there"},"finish_reason":"stop"}],"usage":'
            b'{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}')
    with RawServer([(0, http_head("200 OK", "application/json", length=len(body)) + body)]) \
            as srv:
        r = llmbench("chat", "--url", f"http://127.0.0.1:{srv.port}/v1", "--model", "m")
    assert r.returncode == 1
    assert "it sent the reply whole although a stream was asked for: it cannot stream" in r.stderr


def test_a_server_with_no_cache_count_says_so():
    with EngineServer("llama-cpp-python") as srv:
        r = llmbench("chat", "--url", srv.root + "/v1", "--model", "gemma-3-270m",
                     "--replies", "2", "--reply-tokens", "4")
    assert r.returncode == 0, r.stderr
    assert "(cache not reported)" in r.stdout
    assert r.stdout.splitlines()[-1] == ("the server reports no cached prompt tokens, so "
                                         "whether later turns reused the history cannot be seen")


def test_bad_values_are_one_line():
    for args, line in ((["--replies", "0"], "error: --replies 0: give 1 to 50"),
                       (["--reply-tokens", "0"], "error: --reply-tokens 0: give 1 to 100000 tokens")):
        r = llmbench("chat", "--url", "http://127.0.0.1:9/v1", *args)
        assert r.returncode == 2 and r.stderr.strip() == line, r.stderr
