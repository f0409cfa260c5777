"""Traffic classes (--scenario) and users who give up (--abandon) end to end against the mock,
in this process through the API: the acceptance of issue 36 sections 3 and 4.

- A chat class and a long-prompt class on a 2-slot mock whose prefill costs per prompt token:
  the long prompts saturate it. The verdict blames the long-prompt class, and --isolate shows
  chat alone holding at the load it had (its TTFT alone far under its TTFT mixed).
- Abandonment: the cancelled requests of a run equal the connections the mock saw closed, and
  the release check passes; a mock that decodes on for closed connections is named."""

from __future__ import annotations

import collections

import pytest

import llmbench
from llmbench.workload.scenario import Scenario, TrafficClass
from tests.helpers.api import records, run_json

SCENARIO = """\
[defaults]
turns = 1
output_tokens = 8

[classes.chat]
share = 0.5
prompt_tokens = 32
thresholds = ["ttft.p95<=250ms"]

[classes.long]
share = 0.5
prompt_tokens = 3000
thresholds = ["ttft.p95<=600ms"]
"""


@pytest.fixture
def saturating_mock(mock_factory):
    # 2 slots; a 3000-token prompt takes 375 ms of prefill, a 32-token one 4 ms
    return mock_factory(ttft_ms=20, itl_ms=5, parallel=2, prefill_ms_per_token=0.125)


def test_the_long_prompts_are_blamed_and_chat_alone_holds(saturating_mock, tmp_path):
    path = tmp_path / "scenario.toml"
    path.write_text(SCENARIO)
    run = llmbench.ramp(url=saturating_mock.url + "/v1", model="mock", scenario=path,
                        isolate=True, users="2,8", hold="3s", ramp_in="0.5s", think="0s",
                        out=tmp_path / "res", server_probe="off")
    v = run.verdict
    assert v.kind != "held" and v.blamed == ["long"], (v.text, v.blamed)
    assert "long" in v.text
    assert v.classes["long"].broke
    # both classes at both steps, each with its own load and checks
    first, broke = run.steps
    assert {n: c.load for n, c in first.classes.items()} == {"chat": 1, "long": 1}
    assert {n: c.load for n, c in broke.classes.items()} == {"chat": 4, "long": 4}
    assert first.held and first.classes["chat"].held and first.classes["long"].held
    assert broke.classes["long"].state == "over"
    # --isolate: long breaks even alone; chat alone holds, far under its TTFT with long there
    iso = run.isolation
    assert iso is not None and iso.cause == ["long"], iso.text
    alone = {a.name: a for a in iso.classes}
    assert alone["chat"].held and not alone["long"].held
    (cmp,) = alone["chat"].compared
    assert cmp.metric == "ttft" and cmp.ok_alone and cmp.alone < cmp.mixed
    assert any("chat" in t and "alone" in t for t in iso.text)
    # every record carries its class; a class's step figures are its own records'
    recs = [r for r in records(run) if not r.get("warmup")]
    assert {r.get("traffic_class") for r in recs} == {"chat", "long"}
    by_class = collections.Counter(r["traffic_class"] for r in recs
                                   if r["step"] == broke.index and r["ok"]
                                   and broke.hold_start <= r["scheduled"] < broke.hold_end)
    for name in ("chat", "long"):
        assert broke.classes[name].summary.completed == by_class[name]
    # and it reads back from the folder, typed
    back = llmbench.load_run(run.path)
    assert back.verdict.blamed == ["long"] and back.isolation.cause == ["long"]
    assert run_json(run)["config"]["scenario"]["classes"][0]["name"] == "chat"


def test_a_scenario_from_python_and_grow(saturating_mock, tmp_path):
    sc = Scenario([TrafficClass("chat", share=1.0, options={"prompt_tokens": 16, "turns": 1}),
                   TrafficClass("batch", users=1, options={"prompt_tokens": 64, "turns": 1,
                                                           "output_tokens": 4})])
    run = llmbench.ramp(url=saturating_mock.url + "/v1", model="mock", scenario=sc,
                        grow="chat", users="1,2", hold="1s", ramp_in="0.2s", think="0s",
                        output_tokens=4, threshold=["ttft.p50<=5s"], out=tmp_path / "res",
                        server_probe="off")
    assert [{n: c.load for n, c in s.classes.items()} for s in run.steps] == [
        {"chat": 1, "batch": 1}, {"chat": 2, "batch": 1}]
    assert all(s.held for s in run.steps)


def _closed(m) -> int:
    return sum(e.stats.closed_by_client_total for e in m.engines)


def test_cancelled_equals_closed_by_client_and_the_server_let_go(mock_factory, tmp_path):
    m = mock_factory(ttft_ms=20, itl_ms=10, tokens=200, parallel=4)
    run = llmbench.run(url=m.url + "/v1", model="mock", concurrency=4, duration="2s",
                       prompt_tokens=16, output_tokens=40,
                       abandon="share=0.5,after-tokens=5", out=tmp_path / "res")
    s, a = run.summary, run.abandonment
    assert s.cancelled and s.cancelled == a.cancelled == a.streaming
    assert s.cancelled == _closed(m)
    assert s.failed == 0 and s.completed + s.cancelled == s.requests
    assert a.release.ok is True and a.release.samples > 0, a.release.text
    kinds = collections.Counter(r.get("error_kind") for r in records(run))
    assert kinds["cancelled"] == s.cancelled


def test_a_server_that_decodes_for_closed_connections_is_reported(mock_factory, tmp_path):
    # 2 slots, 4 users who stop every reply after 2 tokens (and give up after 0.3 s without
    # one): the mock goes on decoding each for 6 s, longer than the 3 s the check allows
    m = mock_factory(ttft_ms=20, itl_ms=40, tokens=400, parallel=2, decode_after_close=True)
    run = llmbench.run(url=m.url + "/v1", model="mock", concurrency=4, duration="7s",
                       prompt_tokens=16, output_tokens=150,
                       abandon="after=0.3s,share=1,after-tokens=2", out=tmp_path / "res")
    a = run.abandonment
    assert a.cancelled == _closed(m)
    assert a.release.ok is False, a.release.text
    assert "did NOT free" in a.release.text


def test_a_ramp_counts_its_cancelled_requests_per_step(mock_factory, tmp_path):
    m = mock_factory(ttft_ms=20, itl_ms=10, tokens=200, parallel=8)
    run = llmbench.ramp(url=m.url + "/v1", model="mock", users="2", hold="1.5s",
                        ramp_in="0.2s", think="0s", prompt_tokens=16, output_tokens=20,
                        turns=1, abandon="share=0.5,after-tokens=3",
                        threshold=["ttft.p50<=5s"], out=tmp_path / "res")
    (step,) = run.steps
    assert step.summary.cancelled and step.summary.failed == 0
    a = run.abandonment
    assert a is not None and a.cancelled == _closed(m) >= step.summary.cancelled
    assert a.release.ok is True, a.release.text
