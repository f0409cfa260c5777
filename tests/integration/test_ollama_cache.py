"""What a run says of Ollama's prompt cache (issue 40's loose end): its OpenAI-compatible /v1
reported no cached prompt tokens before 0.34, so the run said nothing at all; now it says so in
one line (run.json ``prompt_cache.note`` and the console) and names what protects it (the
salt). Its native /api/chat: cached tokens read from prompt_eval_cached_count (0.34 on) or
inferred from a prompt_eval_count that counts only what was evaluated (0.30-0.33).

Against the mock as Ollama (flavour ollama, its block-hashed prefix cache), with
``cache_report`` saying what its replies report: "none" (Ollama's /v1 before 0.34),
"evaluated" (/api's short prompt_eval_count), "usage" (the counts, as 0.34 on)."""

from __future__ import annotations

import llmbench
from llmbench.analysis.checks import (OLLAMA_NATIVE_NOTE, OLLAMA_NONE_SHORT, OLLAMA_V1_NOTE,
                                      cache_lines)
from tests.helpers.api import run_json

OPTS = dict(requests=6, concurrency=1, prompt_tokens="64", output_tokens="4",
            tokenizer="approx", progress=False)


def _ollama(mock_factory, report):
    return mock_factory(ttft_ms=1, itl_ms=1, prefix_cache=True, flavour="ollama",
                        cache_report=report)


def test_ollama_v1_says_it_reports_no_cache_hits_and_what_protects_the_run(mock_factory,
                                                                          tmp_path):
    m = _ollama(mock_factory, "none")
    # found as the server probes find Ollama (/api/version): no cached count in any reply
    r = llmbench.run(url=m.url + "/v1", model="mock", out=tmp_path / "a", server_probe="ollama",
                     **OPTS)
    pc = run_json(r)["prompt_cache"]
    assert pc["server"] == "ollama" and pc["share"] is None and pc["requests"] == 0
    assert pc["note"] == OLLAMA_V1_NOTE and pc["message"] is None
    assert r.summary.cached_prompt_share is None
    # the console's lines after the summary (report.outcome.print_closing prints these)
    assert cache_lines(r) == [f"Prompt cache: {OLLAMA_V1_NOTE}"]
    assert "does not report cached prompt tokens" in (r.path / "report.html").read_text()
    # --same-prompts: hits it cannot see, said as the warning
    s = llmbench.run(url=m.url + "/v1", model="mock", out=tmp_path / "s", server_probe="ollama",
                     same_prompts=True, **OPTS)
    msg = run_json(s)["prompt_cache"]["message"]
    assert "--same-prompts" in msg and "does not say how many it found cached" in msg
    # not Ollama: nothing reported is nothing said, as before
    v = llmbench.run(url=m.url + "/v1", model="mock", out=tmp_path / "v", server_probe="off",
                     **OPTS)
    assert run_json(v)["prompt_cache"] is None


def test_ollama_native_counts_cached_tokens_from_its_short_prompt_eval_count(mock_factory,
                                                                            tmp_path):
    m = _ollama(mock_factory, "evaluated")
    kw = dict(url=m.url, api="ollama", model="mock", server_probe="off", same_prompts=True,
              **OPTS)
    a = llmbench.run(out=tmp_path / "a", **kw)
    b = llmbench.run(out=tmp_path / "b", **kw)        # the very prompts: from the cache
    pa, pb = run_json(a)["prompt_cache"], run_json(b)["prompt_cache"]
    assert pa["first_turns"]["requests"] == pb["first_turns"]["requests"] == 6
    assert pa["share"] < 0.1
    assert pa["note"] == OLLAMA_NATIVE_NOTE + OLLAMA_NONE_SHORT     # nothing was short
    assert pb["share"] > 0.6 and pb["note"] == OLLAMA_NATIVE_NOTE
    assert b.summary.cached_prompt_share > 0.6
    assert "--same-prompts" in pb["message"]


def test_ollama_native_that_counts_its_cache_needs_no_inference(mock_factory, tmp_path):
    m = mock_factory(ttft_ms=1, itl_ms=1, flavour="ollama", kv_tokens=100_000)
    kw = dict(url=m.url, api="ollama", model="mock", server_probe="off", same_prompts=True,
              **OPTS)
    llmbench.run(out=tmp_path / "a", **kw)
    b = llmbench.run(out=tmp_path / "b", **kw)
    pb = run_json(b)["prompt_cache"]
    assert pb["share"] > 0.6 and "note" not in pb
