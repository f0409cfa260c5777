"""Reasoning models (issue 16.2): servers stream reasoning before the answer, in
``reasoning_content`` (vLLM, SGLang), ``reasoning`` (Ollama's /v1) or ``thinking`` (Ollama
native). TTFT stays vLLM's (first token of any kind); TTFO is the answer's first token.

Golden tests: scripted chunks through the pure decoder, then metrics. End to end: the mock with
--reasoning-tokens over HTTP, and a TTFO threshold gating the exit code."""

import json

import pytest

from tests.helpers import run, send_one
from tests.helpers import llmbench, only_run

from llmbench.client import decoder as d
from llmbench.analysis.metrics import per_request, summarize
from llmbench.records.record import Record
from llmbench.analysis.slo import check_all, parse_threshold
from llmbench.wire import get

CHAT = get("openai-chat")
OLLAMA = get("ollama")


def sse(obj) -> bytes:
    return b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"


def delta(**fields) -> bytes:
    return sse({"choices": [{"delta": fields}]})


def nd(obj) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def decode(fmt, chunks, start=0.0):
    rec, texts = Record("r", 0.0, start=start), []
    dec = d.StreamDecoder(fmt, rec, texts)
    for t, chunk in chunks:
        if dec.feed(t, chunk) == d.ENDED:
            dec.finish()
            break
    else:
        dec.close(chunks[-1][0])
    rec.ok = rec.error_kind is None
    rec.first_token = rec.token_times[0] if rec.token_times else None
    rec.end = rec.token_times[-1] if rec.token_times else None
    rec.done = rec.end or 0.0
    if rec.output_tokens is None:
        rec.output_tokens = len(rec.token_times)
    return rec, texts


# The same timeline in each API's own field: start 0, reasoning at 1.0, 1.5, 2.5 s, the answer at
# 4.0, 4.25, 5.0 s. TTFT 1000 ms, TTFO 4000 ms, 3 reasoning tokens, reasoning 3000 ms, answer
# ITL 250 and 750 ms.
TIMES_R = (1.0, 1.5, 2.5)
TIMES_A = (4.0, 4.25, 5.0)


def openai_stream(field: str):
    chunks = [(0.5, delta(role="assistant", content=""))]
    chunks += [(t, delta(**{field: f"think{i} "})) for i, t in enumerate(TIMES_R)]
    chunks += [(t, delta(content=f"ans{i} ")) for i, t in enumerate(TIMES_A)]
    chunks[-1] = (chunks[-1][0], chunks[-1][1] + sse({"choices": [], "usage": {
        "prompt_tokens": 5, "completion_tokens": 6}}) + sse(b"[DONE]"))
    return chunks


def ollama_stream():
    chunks = [(t, nd({"message": {"role": "assistant", "content": "", "thinking": f"t{i} "},
                      "done": False})) for i, t in enumerate(TIMES_R)]
    chunks += [(t, nd({"message": {"role": "assistant", "content": f"a{i} "}, "done": False}))
               for i, t in enumerate(TIMES_A)]
    chunks[-1] = (chunks[-1][0], chunks[-1][1] + nd({"message": {"content": ""}, "done": True,
                                                     "eval_count": 6, "prompt_eval_count": 5}))
    return chunks


CASES = [("reasoning_content", CHAT, openai_stream("reasoning_content")),
         ("reasoning", CHAT, openai_stream("reasoning")),
         ("thinking", OLLAMA, ollama_stream())]


@pytest.mark.parametrize("name,fmt,chunks", CASES, ids=[c[0] for c in CASES])
def test_golden_ttfo_reasoning_tokens_and_answer_itl(name, fmt, chunks):
    rec, texts = decode(fmt, chunks)
    assert rec.error_kind is None
    assert rec.token_times == list(TIMES_R + TIMES_A)      # reasoning counts as tokens, as vLLM
    assert rec.reasoning_events == 3 and rec.reasoning_tokens == 3
    assert rec.reasoning_end == 2.5 and rec.output_from == 3 and rec.first_output == 4.0
    p = per_request(rec)
    assert p.ttft == pytest.approx(1.0)                    # vLLM's TTFT: the first reasoning token
    assert p.ttfo == pytest.approx(4.0)
    assert p.reasoning_s == pytest.approx(3.0)
    assert p.output_itls == pytest.approx([0.25, 0.75])
    s = summarize([rec]).flat()
    assert s["mean_ttft_ms"] == pytest.approx(1000.0)
    assert s["mean_ttfo_ms"] == pytest.approx(4000.0) and s["n_ttfo"] == 1
    assert s["mean_reasoning_time_ms"] == pytest.approx(3000.0)
    assert s["max_output_itl_ms"] == pytest.approx(750.0) and s["n_output_itl"] == 2
    assert s["mean_reasoning_tokens"] == 3 and s["total_reasoning_tokens"] == 3
    assert s["requests_with_reasoning"] == 1 and s["answered_after_reasoning"] == 1
    # the fields survive requests.jsonl (and records without them read as before)
    back = Record.from_json(json.loads(json.dumps(rec.to_json())))
    assert (back.reasoning_events, back.output_from) == (3, 3)
    assert back.first_output == pytest.approx(4.0)


def test_reasoning_tokens_from_per_event_counts():
    # vLLM with continuous usage: the counts say how many tokens each event carried
    u = lambda n: {"completion_tokens": n}  # noqa: E731
    chunks = [(1.0, sse({"choices": [{"delta": {"reasoning_content": "ab"}}], "usage": u(2)})),
              (2.0, sse({"choices": [{"delta": {"reasoning_content": "cde"}}], "usage": u(5)})),
              (3.0, sse({"choices": [{"delta": {"content": "x"}}], "usage": u(6)})
               + sse(b"[DONE]"))]
    rec, _ = decode(CHAT, chunks)
    assert rec.reasoning_events == 2 and rec.reasoning_tokens == 5 and rec.output_tokens == 6


def test_reasoning_tokens_the_server_reports_win():
    # usage.completion_tokens_details.reasoning_tokens (OpenAI's field) over counted events
    chunks = [(1.0, delta(reasoning_content="abc")), (2.0, delta(content="x")),
              (2.0, sse({"choices": [], "usage": {"completion_tokens": 9, "prompt_tokens": 1,
                                                  "completion_tokens_details": {
                                                      "reasoning_tokens": 8}}}) + sse(b"[DONE]"))]
    rec, _ = decode(CHAT, chunks)
    assert rec.reasoning_events == 1 and rec.reasoning_tokens == 8 and rec.output_tokens == 9


def test_a_reply_cut_off_while_reasoning_has_no_ttfo():
    chunks = [(1.0, delta(reasoning_content="a")), (2.0, delta(reasoning_content="b")),
              (2.0, sse({"choices": [{"delta": {}, "finish_reason": "length"}]}) + sse(b"[DONE]"))]
    rec, _ = decode(CHAT, chunks)
    assert rec.first_output is None and rec.output_from is None
    p = per_request(rec)
    assert p.ttfo is None and p.reasoning_s == pytest.approx(1.0) and p.output_itls == []
    s = summarize([rec]).flat()
    assert s["n_ttfo"] == 0 and s["p95_ttfo_ms"] is None and s["answered_after_reasoning"] == 0


def test_a_reply_without_reasoning_is_recorded_and_summarised_as_before():
    rec, _ = decode(CHAT, [(1.0, delta(content="a")), (2.0, delta(content="b") + sse(b"[DONE]"))])
    d_ = rec.to_json()
    assert not any(k.startswith("reasoning") or k in ("output_from", "first_output") for k in d_)
    s = summarize([rec])
    assert not any("ttfo" in k or "reasoning" in k or "output_itl" in k for k in s.to_dict())
    # a TTFO threshold on such a run reads TTFT (the first token is the answer's)
    c = check_all([parse_threshold("ttfo.max<=1s"), parse_threshold("output_itl.max<=1s")], s)
    assert [x.ok for x in c] == [True, True] and c[0].actual == pytest.approx(1000.0)


def test_thresholds_on_ttfo_and_reasoning_tokens():
    rec, _ = decode(CHAT, openai_stream("reasoning_content"))
    s = summarize([rec])
    ok = check_all([parse_threshold("ttfo.max<=5s"), parse_threshold("reasoning_tokens.max<=3"),
                    parse_threshold("reasoning_time.max<=3s")], s)
    assert all(c.ok for c in ok), ok
    bad = check_all([parse_threshold("ttfo.max<=3s"), parse_threshold("reasoning_tokens.max<3")], s)
    assert not any(c.ok for c in bad)
    assert bad[1].text == "reasoning_tokens.max<3: 3"


@pytest.mark.parametrize("bad", ["reasoning_tokens.p95<=3s", "reasoning_tokens.within(2s)>=1"])
def test_reasoning_tokens_is_a_count(bad):
    from llmbench.analysis.slo import ThresholdError
    with pytest.raises(ThresholdError):
        parse_threshold(bad)


# -- end to end: the mock with --reasoning-tokens, over HTTP ---------------------------------

@pytest.mark.parametrize("flavour,path,api,field", [
    ("vllm", "/v1", None, "reasoning_content"), ("ollama", "/v1", None, "reasoning"),
    ("ollama", "", "ollama", "thinking")])
def test_mock_streams_reasoning_before_the_answer(transport, mock_factory, flavour, path, api,
                                                  field):
    m = mock_factory(ttft_ms=5, itl_ms=20, reasoning_tokens=4, flavour=flavour,
                     record=None)
    rec, text = run(send_one(m.url + path, api=api, max_tokens=3))
    assert rec.ok, rec.error
    assert rec.reasoning_events == 4 and rec.reasoning_tokens == 4
    assert rec.output_from == 4 and len(rec.token_times) == 7
    assert rec.output_tokens == 7                   # reasoning counts, as vLLM counts it
    assert rec.first_output == rec.token_times[4] and rec.ttfo > rec.ttft
    # the answer is the text; four decode steps of 20 ms came before it
    assert len(text.split()) == 3 and rec.ttfo - rec.ttft >= 0.07


def test_mock_reasoning_field_on_the_wire(transport, mock_factory):
    import urllib.request
    m = mock_factory(ttft_ms=1, itl_ms=1, reasoning_tokens=2, flavour="ollama")
    body = json.dumps({"model": "mock", "messages": [{"role": "user", "content": "hi"}],
                       "stream": True, "max_tokens": 1}).encode()
    with urllib.request.urlopen(urllib.request.Request(
            m.url + "/v1/chat/completions", body, {"content-type": "application/json"})) as r:
        raw = r.read().decode()
    deltas = [json.loads(x[6:])["choices"][0]["delta"] for x in raw.split("\n\n")
              if x.startswith("data: {") and json.loads(x[6:])["choices"]]
    fields = [k for dl in deltas for k in dl if k != "role" and dl[k]]
    assert fields == ["reasoning", "reasoning", "content"]


def test_cli_run_reports_ttfo_and_a_ttfo_threshold_gates_the_exit_code(mock_factory, tmp_path):
    m = mock_factory(ttft_ms=5, itl_ms=30, reasoning_tokens=5)
    args = ["run", "--url", m.url + "/v1", "--model", "mock", "--concurrency", "2",
            "--requests", "6", "--prompt-tokens", "10", "--output-tokens", "4",
            "--threshold", "ttft.p95<=10s"]
    # five 30 ms reasoning steps come before the answer: TTFO is about 150 ms after TTFT
    r = llmbench(*args, "--threshold", "ttfo.p95<=50ms", "--out", str(tmp_path / "a"))
    assert r.returncode == 99, r.stdout + r.stderr
    assert "TTFO" in r.stdout and "Reasoning tokens" in r.stdout
    run_dir = only_run(tmp_path / "a")
    s = json.loads((run_dir / "run.json").read_text())["summary"]
    assert s["requests_with_reasoning"] == 6 and s["mean_reasoning_tokens"] == 5
    assert s["p95_ttfo_ms"] >= 100 and s["p95_ttfo_ms"] > s["p95_ttft_ms"] + 80
    recs = [json.loads(x) for x in (run_dir / "requests.jsonl").read_text().splitlines()]
    assert all(x["reasoning_events"] == 5 and x["output_from"] == 5 for x in recs
               if not x.get("warmup"))
    html = llmbench("report", str(run_dir))
    assert html.returncode == 0, html.stderr
    assert "TTFO" in (run_dir / "report.html").read_text()
    r = llmbench(*args, "--threshold", "ttfo.p95<=30s", "--out", str(tmp_path / "b"))
    assert r.returncode == 0, r.stdout + r.stderr


def test_tokenizer_count_includes_reasoning_when_the_server_reports_no_usage(transport,
                                                                            mock_factory):
    # stream_options.include_usage off: the mock sends no usage, the client's tokenizer counts
    # the answer's text (one token per word here) and adds the reasoning tokens
    import time
    from llmbench.client.request import Client, RequestParams, Timeouts
    from llmbench.client.target import make_target
    m = mock_factory(ttft_ms=1, itl_ms=1, reasoning_tokens=4)

    async def go():
        params = RequestParams(extra_body={"stream_options": {"include_usage": False}})
        async with Client(make_target(m.url + "/v1", "mock"), params, Timeouts(),
                          count_tokens=lambda t: len(t.split())) as c:
            rec = Record("t", scheduled=time.perf_counter())
            text = await c.send([{"role": "user", "content": "hi"}], 3, rec)
            return rec, text
    rec, text = run(go())
    assert rec.ok and rec.output_tokens_source == "tokenizer" and len(text.split()) == 3
    assert rec.reasoning_tokens == 4 and rec.output_tokens == 7
