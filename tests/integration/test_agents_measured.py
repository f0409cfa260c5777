"""Tools, structured output and embeddings, measured end to end against the mock in this
process: what share of replies called a tool and how soon, what share of structured replies
validated (invalid ones counted, not failed), and embeddings per second."""

from __future__ import annotations

import pytest

from llmbench.analysis.metrics import summarize
from llmbench.client.request import RequestParams, Timeouts
from llmbench.client.target import make_target
from llmbench.load.harness import Harness, TargetSpec
from llmbench.load.shapes.fixed import ClosedLoop
from llmbench.wire.agents import request_fields
from llmbench.workload import WorkloadSpec, build_workload, load_tokenizer

SCHEMA = {"type": "object", "required": ["city", "days"],
          "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1,
                                                              "maximum": 7}}}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": SCHEMA}}]


def run_against(url: str, api: str, params: RequestParams, n: int = 40, batch: int = 1):
    wl = build_workload(WorkloadSpec(count=n * batch, prompt_tokens=(12, 12), output_tokens=(64, 64),
                                     batch_size=batch), load_tokenizer("approx"))
    shape = ClosedLoop(wl.conversations, concurrency=4, requests=n)
    h = Harness(params, Timeouts(), None, progress=False)
    out = h.run(shape, [TargetSpec(make_target(url, "mock", api=api), server_probe="off")])
    return out, summarize(out.records)


@pytest.mark.parametrize("api", ["openai-chat", "responses"])
def test_tool_calls_share_and_time_to_first_tool_token(mock_factory, api):
    m = mock_factory(ttft_ms=20, itl_ms=3, tool_call_share=0.5, seed=5)
    params = RequestParams(extra_body=request_fields(api, TOOLS, None, None))
    out, s = run_against(m.url + "/v1", api, params)
    assert s.completed == 40 and s.failed == 0
    called = [r for r in out.records if r.first_tool is not None]
    assert 8 <= len(called) <= 32 and s.requests_with_tool_calls == len(called)
    assert s.tool_call_share == pytest.approx(len(called) / 40)
    # a tool call's first token is its reply's first token (the mock streams no text first)
    assert all(r.first_tool == r.first_token for r in called)
    assert s.ttft_tool.n == len(called) and s.ttft_tool.p50 >= 15
    assert s.value("tool_call_share") == s.tool_call_share      # what a threshold reads


@pytest.mark.parametrize("api", ["openai-chat", "responses"])
def test_structured_replies_counted_valid_or_not_never_failed(mock_factory, api):
    m = mock_factory(ttft_ms=5, itl_ms=1, invalid_json_share=0.25, seed=2)
    params = RequestParams(extra_body=request_fields(api, None, None, SCHEMA), structured=SCHEMA)
    out, s = run_against(m.url + "/v1", api, params)
    assert s.completed == 40 and s.failed == 0                  # invalid is not a failure
    checked = [r.output_valid for r in out.records]
    assert all(v is not None for v in checked) and 0 < checked.count(False) < 20
    assert s.structured_checked == 40
    assert s.valid_output_share == pytest.approx(checked.count(True) / 40)


def test_a_plain_run_has_none_of_these_keys(mock_factory):
    m = mock_factory(ttft_ms=5, itl_ms=1)
    out, s = run_against(m.url + "/v1", "openai-chat", RequestParams(), n=8)
    assert "tool_call_share" not in s.data and "valid_output_share" not in s.data
    assert "total_embeddings" not in s.data and s.tool_call_share is None
    assert all(r.to_json().keys().isdisjoint({"first_tool", "output_valid", "embeddings"})
               for r in out.records)


def test_embeddings_batches_latency_and_throughput(mock_factory):
    m = mock_factory(embed_ms=10, embed_ms_per_token=0.5, embedding_dim=8)
    out, s = run_against(m.url + "/v1", "embeddings", RequestParams(stream=False), n=12, batch=4)
    assert s.completed == 12 and s.failed == 0
    assert s.total_embeddings == 48 and all(r.embeddings == 4 for r in out.records)
    assert s.embeddings_throughput == pytest.approx(48 / s.duration_s)
    assert s.input_throughput == pytest.approx(s.total_input_tokens / s.duration_s)
    # 4 prompts of ~12 tokens: 10 ms + ~48 x 0.5 ms per request
    assert s.e2el.p50 >= 30 and s.non_streaming
    assert s.total_output_tokens == 0 and s.data["max_output_tokens_per_s"] == 0.0
    assert all(r.prompt_tokens_source == "server" and r.output_tokens == 0 for r in out.records)
