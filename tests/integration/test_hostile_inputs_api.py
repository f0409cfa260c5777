"""From tests/e2e/test_hostile_inputs.py, the cases that need only the run's files or one
request: a server's hostile values stay valid JSON, and servers that send what their name says
(a wrong-typed event, malformed HTTP, an embeddings reply without its vectors, JSON nested too
deeply) fail one request of a named kind, on both transports, run in this process through the
API (llmbench.run) or the client (tests.helpers.send_one)."""

from __future__ import annotations

import json

import pytest

import llmbench
from tests.helpers import RawServer, chat_token
from tests.helpers.api import run_exit_code


def test_server_nan_header_and_negative_tokens_stay_valid(tmp_path):
    usage = (b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],'
             b'"usage":{"prompt_tokens":5,"completion_tokens":-7}}\n\n')
    head = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nx-llmbench-queue-ms: nan\r\n"
            b"connection: close\r\n\r\n")
    body = chat_token("a") + chat_token("b") + chat_token("c") + usage + b"data: [DONE]\n\n"
    with RawServer([(0, head + body)]) as s:
        r = llmbench.run(url=s.url + "/v1", model="m", requests=3, prompt_tokens=5,
                         output_tokens=3, out=tmp_path)
    assert run_exit_code(r) == 0
    run_dir = next(tmp_path.iterdir())
    assert run_dir == r.path

    def strict(line: str):
        return json.loads(line, parse_constant=lambda c: pytest.fail(f"bare {c} in JSON"))
    recs = [strict(x) for x in (run_dir / "requests.jsonl").read_text().splitlines()]
    assert len(recs) == 3 and all(x["ok"] for x in recs)
    assert all("server_queue_ms" not in x for x in recs)
    assert all(x["output_tokens"] == 3 and "completion_tokens -7" in x["note"] for x in recs)
    summary = strict((run_dir / "run.json").read_text())["summary"]
    assert summary["output_throughput"] > 0 and summary["total_output_tokens"] == 9


# -- issue 40 §4: servers that send what their name says, on both transports -----------------

def _recs(run) -> list[dict]:
    return [json.loads(x) for x in (run.path / "requests.jsonl").read_text().splitlines()]


def _answer(body: bytes, content_type: bytes = b"text/event-stream") -> bytes:
    return (b"HTTP/1.1 200 OK\r\ncontent-type: " + content_type + b"\r\ncontent-length: %d\r\n"
            b"connection: close\r\n\r\n%s") % (len(body), body)


GOOD = chat_token("a") + chat_token("b") + b"data: [DONE]\n\n"


@pytest.mark.parametrize("bad", [
    b'data: {"choices":[{"index":0,"delta":{"content":5}}]}\n\n',         # a number for text
    b'data: {"choices":{"0":{"delta":{"content":"x"}}}}\n\n',              # an object for a list
    b'data: {"choices":[{"delta":{"content":"x"}}],"timings":"fast"}\n\n'  # a string for timings
    b'data: {"choices":[{"delta":{"content":' + b"[" * 3000 + b"]" * 3000 + b"}}]}\n\n",  # deep
], ids=["content-5", "choices-object", "deep-event"])
def test_one_event_of_the_wrong_type_fails_that_request_not_the_run(bad, tmp_path, transport):
    """`"content": 5` in one delta crashed the run with a traceback and left run.json
    "running"; now that request is a malformed_event and the run goes on to its end."""
    chats = []                          # the server probes' GETs come in between

    def script(i: int):
        chats.extend([i] if s.requests[i].startswith(b"POST /v1/chat/") else [])
        second = chats[1:2] == [i]
        return [(0, _answer(chat_token("a") + bad + b"data: [DONE]\n\n" if second else GOOD))]
    with RawServer(script) as s:
        r = llmbench.run(url=s.url + "/v1", model="m", requests=6, prompt_tokens=5,
                         output_tokens=2, out=tmp_path)
    doc = json.loads((r.path / "run.json").read_text())
    assert doc["status"] == "complete"
    recs = _recs(r)
    bad_recs = [x for x in recs if not x["ok"]]
    assert len(recs) == 6 and len(bad_recs) == 1, [x.get("error") for x in recs]
    assert bad_recs[0]["error_kind"] == "malformed_event"
    assert doc["summary"]["errors"] == {"malformed_event": 1}


def _anthropic_event(obj: dict) -> bytes:
    return b"event: %s\ndata: %s\n\n" % (obj["type"].encode(), json.dumps(obj).encode())


def test_one_messages_api_event_of_the_wrong_type_fails_that_request(tmp_path, transport):
    """The Messages API (--api anthropic) too: `"text": 5` in one text_delta is that request's
    malformed_event, the run goes on to its end."""
    start = _anthropic_event({"type": "message_start", "message": {"id": "m", "usage": {
        "input_tokens": 5}}})
    text = _anthropic_event({"type": "content_block_delta", "index": 0,
                             "delta": {"type": "text_delta", "text": "a"}})
    bad = _anthropic_event({"type": "content_block_delta", "index": 0,
                            "delta": {"type": "text_delta", "text": 5}})
    stop = _anthropic_event({"type": "message_stop"})
    posts = []

    def script(i: int):
        posts.extend([i] if s.requests[i].startswith(b"POST /v1/messages") else [])
        return [(0, _answer(start + text + (bad if posts[1:2] == [i] else text) + stop))]
    with RawServer(script) as s:
        r = llmbench.run(url=s.url + "/v1", model="m", api="anthropic", requests=4,
                         prompt_tokens=5, output_tokens=2, out=tmp_path)
    doc = json.loads((r.path / "run.json").read_text())
    assert doc["status"] == "complete"
    recs = _recs(r)
    assert len(recs) == 4 and [x.get("error_kind") for x in recs if not x["ok"]] == \
        ["malformed_event"], [x.get("error") for x in recs]
    assert "delta.text is a number (5)" in next(x["error"] for x in recs if not x["ok"])


@pytest.mark.parametrize("head", [
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: %d\r\n"
    b"content-length: %d\r\n\r\n",
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: %d\r\n"
    b"transfer-encoding: chunked\r\nx-len: %d\r\n\r\n",
], ids=["duplicate-content-length", "length-and-chunked"])
def test_malformed_http_is_a_protocol_error_on_both_transports(head, tmp_path, transport):
    from tests.helpers import run as arun, send_one
    raw = head % (len(GOOD), len(GOOD)) + GOOD
    with RawServer([(0, raw)]) as s:
        rec, _ = arun(send_one(s.url + "/v1"))
        assert rec.error_kind == "protocol" and rec.status is None, (rec.error_kind, rec.error)
        # the preflight names it, in one line: not "cannot reach"
        with pytest.raises(llmbench.ServerRefused, match="malformed HTTP"):
            llmbench.run(url=s.url + "/v1", model="m", requests=2, out=tmp_path)


@pytest.mark.parametrize("data, inputs, ok", [
    ([[0.5, 0.25]], 1, True),
    ([None], 1, False),
    ([[0.5, 0.25]], 2, False),
], ids=["one-vector", "null-vector", "too-few"])
def test_an_embeddings_reply_without_a_vector_per_input_fails(data, inputs, ok, transport):
    from tests.helpers import run as arun, send_one
    body = json.dumps({"data": [{"embedding": v, "index": i} for i, v in enumerate(data)],
                       "usage": {"prompt_tokens": 3}}).encode()
    messages = [{"role": "user", "content": f"text {i}"} for i in range(inputs)]
    with RawServer([(0, _answer(body, b"application/json"))]) as s:
        rec, _ = arun(send_one(s.url + "/v1/embeddings", api="embeddings", stream=False,
                               messages=messages))
    if ok:
        assert rec.ok and rec.embeddings == 1
    else:
        assert rec.error_kind == "bad_vectors" and not rec.ok, (rec.error_kind, rec.error)


def test_a_models_list_nested_too_deeply_is_not_a_recursion_error(tmp_path, transport):
    from llmbench.errors import UsageError
    deep = b'{"data": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    with RawServer([(0, _answer(deep, b"application/json"))]) as s:
        with pytest.raises(UsageError, match="--model is required"):
            llmbench.run(url=s.url + "/v1", requests=2, out=tmp_path)


def test_a_host_header_is_sent_once_instead_of_the_transports_own(transport):
    """--header refuses the framing headers (tests/e2e/test_hostile_inputs.py); Host it
    takes, and both transports then send that one Host, not two."""
    import asyncio
    import time
    from llmbench.client.request import Client
    from llmbench.client.target import make_target
    from llmbench.records.record import Record

    async def go(url: str) -> Record:
        t = make_target(url + "/v1", "m", headers=["Host: api.example.com"])
        async with Client(t) as c:
            rec = Record("h-1", scheduled=time.perf_counter())
            await c.send([{"role": "user", "content": "hi"}], 3, rec)
            return rec
    with RawServer([(0, _answer(GOOD))]) as s:
        rec = asyncio.run(go(s.url))
        head = s.requests[0].split(b"\r\n\r\n")[0].decode().lower().split("\r\n")
    assert rec.ok, rec.error
    assert [x for x in head if x.startswith("host:")] == ["host: api.example.com"]
    assert len([x for x in head if x.startswith(("content-length:", "transfer-encoding:"))]) == 1


# -- the Python API in a thread and inside a running event loop (issue 40 §4 item 6) ----------

def test_the_api_runs_in_a_thread_and_inside_a_running_event_loop(mock_factory, tmp_path):
    """It failed in both (a signal handler installed off the main thread; an event loop run
    inside a running one), and so in Jupyter; now each is a complete run."""
    import asyncio
    import threading
    m = mock_factory(ttft_ms=1, itl_ms=1, models=["m"])

    def go(where: str):
        return llmbench.run(url=m.url + "/v1", model="m", requests=3, prompt_tokens=5,
                            output_tokens=2, out=tmp_path / where)
    got = {}
    t = threading.Thread(target=lambda: got.setdefault("thread", go("thread")))
    t.start()
    t.join(60)
    got["to_thread"] = asyncio.run(asyncio.to_thread(go, "to_thread"))

    async def in_a_coroutine():          # what a Jupyter cell is: a loop running in this thread
        return go("in_loop")
    got["in_loop"] = asyncio.run(in_a_coroutine())
    for where in ("thread", "to_thread", "in_loop"):
        r = got[where]
        assert r.status == "complete" and r.summary.completed == 3, where
    # and a ramp, whose steps are judged on the loop's own thread
    async def ramp():
        return llmbench.ramp(url=m.url + "/v1", model="m", users=[1], hold="1s", ramp_in="0",
                             think="0", prompt_tokens=5, output_tokens=2, out=tmp_path / "ramp")
    assert asyncio.run(ramp()).steps


def test_ctrl_c_reaches_a_run_inside_an_event_loop(tmp_path):
    """asyncio.run's own SIGINT handler only cancelled the task blocked in llmbench.run: a
    Ctrl-C waited for the whole run. Now it is the run's, as on the command line."""
    import signal
    import subprocess
    import sys
    import time
    from tests.helpers import ENV, ROOT
    script = ("import asyncio, llmbench\n"
              "async def main():\n"
              "    try:\n"
              f"        llmbench.run(duration='60s', concurrency=2, prompt_tokens=5, "
              f"output_tokens=20, out={str(tmp_path)!r})\n"
              "        print('not interrupted')\n"
              "    except llmbench.RunFailed as e:\n"
              "        print('interrupted', e.run.status, e.run.summary.completed)\n"
              "asyncio.run(main())\n")
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=ENV, cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:      # until some requests are on disk
            logs = list(tmp_path.glob("*/requests.jsonl"))
            if logs and logs[0].stat().st_size > 0:
                break
            time.sleep(0.1)
        t0 = time.monotonic()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=40)
        took = time.monotonic() - t0
    finally:
        if p.poll() is None:
            p.kill()
    assert out.startswith("interrupted partial"), (out, err[-2000:])
    assert int(out.split()[-1]) >= 1 and took < 30, took


# -- the load generator frozen (issue 40 §4 item 9) ----------------------------------------------

def _frozen_request(script, timeouts, freeze_at_s: float, freeze_s: float):
    """One request on llmbench's own event loop (uvloop, as a run), with the whole loop
    blocked for ``freeze_s`` at ``freeze_at_s``: what SIGSTOP does to it."""
    import asyncio
    import time
    from llmbench.client.request import Client, RequestParams
    from llmbench.client.target import make_target
    from llmbench.load import eventloop
    from llmbench.records.record import Record

    async def go(url: str) -> Record:
        asyncio.get_running_loop().call_later(freeze_at_s, time.sleep, freeze_s)
        async with Client(make_target(url + "/v1", "m"), RequestParams(), timeouts) as c:
            rec = Record("f-1", scheduled=time.perf_counter())
            await c.send([{"role": "user", "content": "hi"}], 8, rec)
            return rec
    with RawServer(script) as s:
        return eventloop.run(go(s.url))


def test_a_timeout_that_passed_while_llmbench_was_frozen_is_the_clients(transport):
    from llmbench.client.request import Timeouts
    from tests.helpers import http_head
    stalled = [(0, http_head(chunked=True)), (30, None)]
    rec = _frozen_request(stalled, Timeouts(first_token_s=1.0), 0.3, 3.0)
    assert rec.error_kind == "client_stall", (rec.error_kind, rec.error)
    assert "llmbench itself was frozen for" in rec.error
    # not frozen: the same silence is the server's
    rec = _frozen_request(stalled, Timeouts(first_token_s=1.0), 5.0, 0.0)
    assert rec.error_kind == "timeout_first_token"


def test_what_the_server_sent_during_the_freeze_is_read_before_any_timeout(transport):
    """uvloop runs due timers before it reads the sockets: after a freeze every request timed
    out although its tokens sat in the socket; they are read first now."""
    from llmbench.client.request import Timeouts
    from tests.helpers import chunk, http_head
    tokens = [(0.05, chunk(chat_token(f"t{i} "))) for i in range(40)]
    script = [(0, http_head(chunked=True))] + tokens + [(0, chunk(b"data: [DONE]\n\n")),
                                                        (0, b"0\r\n\r\n")]
    from llmbench.client.request import stamp_clock
    rec = _frozen_request(script, Timeouts(idle_s=1.0, first_token_s=5.0), 0.5, 3.0)
    assert rec.ok and len(rec.token_times) == 40, (rec.error_kind, rec.error)
    if stamp_clock("http://127.0.0.1/") == "kernel":
        # stamped on arrival (client.rxstamp): the server's 2 s of tokens are not made late
        # by a freeze that ends 3.5 s in
        assert rec.token_times[-1] - rec.scheduled < 3.3, rec.token_times[-1] - rec.scheduled
    else:
        assert max(rec.itls) > 2.5              # the freeze is in its timings, not a timeout


def test_the_monitor_names_a_freeze_and_counts_what_it_touched():
    from llmbench.load.monitor import MonitorSample, busy, with_freezes
    from llmbench.records.record import Record
    from llmbench.records.store import RecordStore
    samples = [MonitorSample(float(t), 1.0, 2.0, 5.0) for t in range(1, 10)]
    assert not busy(samples)["overloaded"]
    samples.insert(5, MonitorSample(20.0, 1.0, 15000.0, 1.0))     # frozen 5.0 .. 20.0
    mon = busy(samples)
    assert mon["overloaded"] and mon["frozen_s"] == 15.0 and mon["freezes"] == 1
    recs = [Record("a", 0.0, start=4.0, done=21.0, ok=True),
            Record("b", 0.0, start=6.0, done=20.1, error_kind="client_stall"),
            Record("c", 0.0, start=21.0, done=22.0, ok=True)]
    store = RecordStore()
    for r in recs:
        store.append(r)
    got = with_freezes(mon, samples, store, t0=2.0)
    assert got["freeze_spans"] == [{"at_s": 3.0, "frozen_s": 15.0}]
    assert got["frozen_requests"] == 2 and got["client_stalls"] == 1
    from llmbench.analysis.verdict import generator_sentence
    text = generator_sentence(got)
    assert "frozen for 15.0 s" in text and "1 that timed out while it was frozen is llmbench's" \
        in text


@pytest.mark.parametrize("split", [False, True], ids=["one-chunk", "deltas-later"])
def test_a_messages_stream_that_ends_then_sends_deltas_is_a_protocol_error(split, tmp_path,
                                                                         transport):
    """Issue 49: message_stop first, then text deltas: not a reply recorded ok (it had 0
    tokens at its end and went on); each such request fails, the stream's protocol broken
    (malformed_event), in the chunk of the end marker or in what the transport drains after
    it. The first request (the preflight) is a good reply, so the run goes on."""
    start = _anthropic_event({"type": "message_start", "message": {"id": "m", "usage": {
        "input_tokens": 5}}})
    stop = _anthropic_event({"type": "message_stop"})
    deltas = b"".join(_anthropic_event({"type": "content_block_delta", "index": 0,
                                        "delta": {"type": "text_delta", "text": w}})
                      for w in ("a", "b"))
    first, later = start + stop, deltas
    head = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: %d\r\n"
            b"\r\n") % (len(first) + len(later))

    good = start + deltas + stop
    posts: list[int] = []

    def script(i: int):
        if not s.requests[i].startswith(b"POST /v1/messages"):
            return [(0, _answer(b'{"data": []}', b"application/json"))]
        posts.append(i)
        if len(posts) == 1:
            return [(0, _answer(good))]
        return [(0, head + first), (0.2, later)] if split else [(0, head + first + later)]
    with RawServer(script) as s:
        r = llmbench.run(url=s.url + "/v1", model="m", api="anthropic", requests=3,
                         prompt_tokens=5, output_tokens=2, out=tmp_path)
    recs = _recs(r)
    bad = [x for x in recs if not x["ok"]]
    assert len(recs) == 3 and len(bad) >= 2, recs
    assert {x.get("error_kind") for x in bad} == {"malformed_event"}
    assert all("after the stream's end marker (message_stop)" in x["error"] for x in bad)


def test_run_scenario_of_own_users_and_a_class_of_agents(mock_factory, tmp_path):
    """Issue 49's misleading messages, made to work: ``run --scenario`` whose classes have
    their own users (once refused in a ramp's words: nothing grows in one held load), one of
    them ``workload = "agent"`` (once an unknown key, though the docstring promised it)."""
    mock = mock_factory(ttft_ms=5, itl_ms=1, parallel=4)
    path = tmp_path / "scenario.toml"
    path.write_text('[classes.chat]\nusers = 1\n'
                    '[classes.agents]\nusers = 1\nworkload = "agent"\nagent_steps = 2\n'
                    'agent_system_tokens = 200\nagent_tool_latency = "50ms"\n')
    r = llmbench.run(url=mock.url + "/v1", model="mock", scenario=path, duration=2,
                     out=tmp_path / "res")
    recs = _recs(r)
    by = {c: [x for x in recs if x.get("traffic_class") == c] for c in ("chat", "agents")}
    assert by["chat"] and by["agents"], recs
    # the agents' requests are steps of sessions, the chat's are not
    assert all(x.get("session_id") for x in by["agents"])
    assert not any(x.get("session_id") for x in by["chat"])
    assert json.loads((r.path / "run.json").read_text())["status"] in ("complete", "partial")
