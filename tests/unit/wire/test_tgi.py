"""TGI's native API (--api tgi): the events as TGI's router shapes them, the client against a
loopback TGI-like server, and `llmbench run --api tgi` end to end."""

import json

import pytest

from llmbench import wire
from llmbench.client.target import detect_api, make_target
from llmbench.wire.events import ERROR, MALFORMED, TOKEN, TOKEN_END, Usage
from tests.helpers import run, send_one
from tests.helpers import llmbench, only_run
from tests.helpers.tgi_server import TgiServer

# every test here runs on both HTTP transports (conftest.transport)
pytestmark = pytest.mark.usefixtures("transport")

MSGS = [{"role": "user", "content": "hello there"}]


def test_body_is_inputs_and_parameters():
    b = wire.get("tgi").body("ignored", MSGS, 16, True,
                        {"temperature": 0.7, "extra_body": {"parameters": {"top_k": 5}, "x": 1}})
    assert b == {"inputs": "hello there", "x": 1,
                 "parameters": {"details": True, "max_new_tokens": 16, "temperature": 0.7,
                                "do_sample": True, "top_k": 5}}
    # TGI rejects temperature 0: greedy is do_sample false
    assert wire.get("tgi").body("m", MSGS, None, True, {"temperature": 0})["parameters"] == \
        {"details": True, "do_sample": False}


def test_events_token_last_error():
    c = wire.get("tgi").classify
    ev = c(b'{"index":1,"token":{"id":5,"text":" a","logprob":-0.1,"special":false},'
           b'"generated_text":null,"details":null}')
    assert ev.kind == TOKEN and ev.text == " a"
    last = c(b'{"token":{"id":2,"text":"</s>","logprob":-0.1,"special":true},"generated_text":" a",'
             b'"details":{"finish_reason":"eos_token","generated_tokens":2,"input_length":7,"seed":null}}')
    assert last.kind == TOKEN_END and last.text == "" and last.finish_reason == "stop"
    assert last.usage == Usage(prompt_tokens=7, completion_tokens=2)
    err = c(b'{"error":"Request failed during generation","error_type":"generation"}')
    assert err.kind == ERROR and err.error.startswith("Request failed")
    assert c(b'{"token": ').kind == MALFORMED


def test_url_detection_and_forced_api():
    assert detect_api("http://h:8080/generate_stream") == ("tgi", "http://h:8080")
    t = make_target("http://h:8080/v1", "m", api="tgi")     # TGI's OpenAI route given, native asked
    assert t.endpoint == "http://h:8080/generate_stream" and t.endpoint_for(False) == "http://h:8080/generate"


def test_client_streams_tgi():
    with TgiServer(itl_s=0.005, ttft_s=0.03) as s:
        rec, text = run(send_one(s.url, api="tgi", max_tokens=6))
    assert rec.ok, rec.error
    assert len(rec.token_times) == 6 and rec.output_tokens == 6 and rec.output_tokens_source == "server"
    assert rec.prompt_tokens == 2 and rec.finish_reason == "length"
    assert rec.ttft >= 0.025 and text == " w0 w1 w2 w3 w4 w5"
    assert s.paths == ["/generate_stream"] and s.bodies[0]["parameters"]["max_new_tokens"] == 6


def test_eos_token_counts_as_an_event_but_not_as_text():
    with TgiServer(eos_at=3) as s:
        rec, text = run(send_one(s.url, api="tgi", max_tokens=10))
    assert rec.ok and len(rec.token_times) == 4 and rec.output_tokens == 4
    assert rec.finish_reason == "stop" and text == " w0 w1 w2"


def test_a_stream_that_dies_before_its_last_event_is_cut():
    with TgiServer(cut_after=3) as s:
        rec, _ = run(send_one(s.url, api="tgi", max_tokens=10))
    assert rec.error_kind == "stream_cut" and len(rec.token_times) == 3
    assert "generated_text" in rec.error


def test_in_stream_error_event():
    with TgiServer(error_after=2) as s:
        rec, _ = run(send_one(s.url, api="tgi", max_tokens=10))
    assert rec.error_kind == "error_event" and "CUDA OOM" in rec.error


def test_validation_error_status():
    with TgiServer() as s:
        rec, _ = run(send_one(s.url, api="tgi", temperature=0.0, extra_body={"inputs": 3}))
    assert rec.error_kind == "http_status" and rec.status == 422 and "inputs" in rec.error


def test_not_streamed_goes_to_generate():
    with TgiServer() as s:
        rec, text = run(send_one(s.url, api="tgi", max_tokens=5, stream=False))
    assert rec.ok and rec.output_tokens == 5 and rec.ttft == rec.e2el and text.strip() == "w0 w1 w2 w3 w4"
    assert s.paths == ["/generate"]


def test_llmbench_run_api_tgi_end_to_end(tmp_path):
    with TgiServer(itl_s=0.002, ttft_s=0.01) as s:
        # no --model: the model comes from TGI's /info
        r = llmbench("run", "--url", s.url, "--api", "tgi", "--concurrency", "3",
                     "--requests", "12", "--prompt-tokens", "20", "--output-tokens", "8",
                     "--server-probe", "off", "--out", str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Successful requests:                     12" in r.stdout
    run_dir = only_run(tmp_path)
    doc = json.loads((run_dir / "run.json").read_text())
    target = doc["config"]["target"]
    assert target["api"] == "tgi" and target["endpoint"] == s.url + "/generate_stream"
    assert target["model"] == "tgi/test-model"
    recs = [json.loads(x) for x in (run_dir / "requests.jsonl").read_text().splitlines()]
    assert len(recs) == 12 and all(x["ok"] and x["output_tokens"] == 8 for x in recs)
    assert all(x["output_tokens_source"] == "server" for x in recs)
    # the run's 12 requests (besides the preflight's one-token request)
    assert sum(b["parameters"]["max_new_tokens"] == 8 and isinstance(b["inputs"], str)
               for b in s.bodies) == 12
