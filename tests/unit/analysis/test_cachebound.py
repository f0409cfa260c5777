"""The "cache-bound" judgement on paper (issue 35 part 3): when the prompts' cache share fell and
each call prefilled its context again, from the records and the server's own counters; and
when it did not (queuing, a cache that never served much, a server whose counters disagree)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from llmbench.analysis.cachebound import ServerCache, StepCache, advice, finding, server_cache, step_cache
from llmbench.records.record import Record


def step(load, share, prefill, prompt=800.0, size=900.0):
    return StepCache(load=load, requests=40, told=40, cached_share=share,
                     prefilled_per_call=prefill, prompt_per_call=prompt, session_tokens=size,
                     sessions=int(load) * 3)


def test_the_cache_falling_and_prefill_growing_is_cache_bound():
    f = finding(step(2, 0.8, 160), step(3, 0.05, 760), None, None, "agents")
    assert f is not None and f.sessions_held == 2 and f.reprefill_tokens == 760
    assert f.sentence == ("The KV cache holds about 2 sessions of this size (~900 tokens each); "
                          "beyond that each call re-prefills about 760 tokens.")
    assert f.server_agrees is None                          # the server said nothing
    assert "80% of prompt tokens came from the cache" in f.evidence[0]


@pytest.mark.parametrize("warm, broke", [
    (step(2, 0.8, 160), step(3, 0.78, 170)),      # queuing: the cache held
    (step(2, 0.2, 640), step(3, 0.0, 800)),       # it never served much: not what ran out
    (step(2, 0.8, 160), step(3, 0.5, 200)),       # it fell, but the calls prefill about the same
])
def test_no_finding_when_the_cache_is_not_what_ran_out(warm, broke):
    assert finding(warm, broke, None, None) is None


def srv(hit, **kw):
    return ServerCache(kind=kw.pop("kind", "vllm"), hit_rate=hit, source="counters", **kw)


def test_the_servers_own_counters_decide_where_they_speak():
    warm, broke = step(2, 0.8, 160), step(3, 0.05, 760)
    # its counters say its cache held: the usage's fall is not the cache running out
    assert finding(warm, broke, srv(0.8), srv(0.79)) is None
    f = finding(warm, broke, srv(0.75), srv(0.02, kv_budget_tokens=1900.0))
    assert f is not None and f.server_agrees is True
    assert "The server's own counters agree: its prompt cache served 75%" in " ".join(f.evidence)
    assert f.capacity_tokens == 1900 and f.capacity_sessions == pytest.approx(1900 / 900)


def sample(t, **kw):
    return {"t": t, "kind": kw.pop("kind", "llamacpp"), **kw}


def test_server_cache_reads_each_servers_counters_over_the_window():
    # llama.cpp: prompt tokens computed and cached, counters: 300 cached of 1,000 in the window
    s = server_cache([sample(0.5, prefilled_tokens_total=100, cached_tokens_total=50),
                      sample(1.0, prefilled_tokens_total=200, cached_tokens_total=100, slots=2,
                             ctx_per_slot=2048),
                      sample(5.0, prefilled_tokens_total=900, cached_tokens_total=400)], 1.0, 4.0)
    assert s.hit_rate == pytest.approx(300 / 1000) and s.prefilled_tokens == 700
    assert "prompt_tokens_cached_total" in s.source and s.slots == 2 and s.ctx_per_slot == 2048
    # vLLM (and the mock): prefix-cache hits over queries
    v = server_cache([sample(1, kind="vllm", prefix_cache_queries=1000, prefix_cache_hits=100),
                      sample(2, kind="vllm", prefix_cache_queries=3000, prefix_cache_hits=1100)],
                     0, 2)
    assert v.hit_rate == pytest.approx(0.5) and v.source.startswith("vllm:prefix_cache_hits")
    # SGLang: its gauge, averaged
    g = server_cache([sample(1, kind="sglang", cache_hit_rate=0.2),
                      sample(2, kind="sglang", cache_hit_rate=0.4)], 0, 2)
    assert g.hit_rate == pytest.approx(0.3)
    # a counter that went back (the server restarted) says nothing
    r = server_cache([sample(1, prefilled_tokens_total=900, cached_tokens_total=400),
                      sample(2, prefilled_tokens_total=10, cached_tokens_total=0)], 0, 2)
    assert r.hit_rate is None
    assert server_cache([sample(9, cached_tokens_total=1)], 0, 2) is None


def test_step_cache_from_records():
    def rec(i, prompt, cached, sid):
        return Record(f"r{i}", 0.0, start=float(i), ok=True, prompt_tokens=prompt,
                      cached_tokens=cached, session_id=sid)
    c = step_cache([rec(1, 500, 0, "a"), rec(2, 900, 480, "a"), rec(3, 600, None, "b")], 2)
    assert c.told == 2 and c.cached_share == pytest.approx(480 / 1400)
    assert c.prefilled_per_call == pytest.approx(460) and c.session_tokens == pytest.approx(750)


@pytest.mark.parametrize("kind, words", [
    ("llamacpp", ["-np", "-c", "--cache-ram", "-ctk q8_0"]),
    ("vllm", ["--gpu-memory-utilization", "--kv-cache-dtype fp8", "--enable-prefix-caching",
              "--max-num-seqs"]),
    ("sglang", ["--mem-fraction-static", "--disable-radix-cache"]),
    ("ollama", ["OLLAMA_CONTEXT_LENGTH", "OLLAMA_NUM_PARALLEL", "OLLAMA_KV_CACHE_TYPE=q8_0"]),
    ("mock", ["--kv-tokens"]),
    (None, ["quantized KV cache", "prefix caching"]),
])
def test_what_moves_it_is_said_per_server_kind(kind, words):
    text = " ".join(advice(kind, 900.0))
    assert all(w in text for w in words), text


def test_an_agent_steps_cache_figures_are_the_tables():
    """The verdict quotes each step's sessions (the table's "from cache"), not a second count
    over the hold window's calls (issue 45: the two differed)."""
    from llmbench.analysis.cachebound import ramp_finding
    from llmbench.results.schema import Step

    def rec(i, step, cached):
        return Record(f"r{step}{i}", 0.0, start=10.0 * step + i, ok=True, prompt_tokens=1000,
                      cached_tokens=cached, session_id=f"s{step}{i % 2}", step=step)

    def st(index, held, share, prefilled):
        return Step.from_dict({
            "index": index, "load": index + 1, "held": held, "state": "held" if held else "over",
            "hold_start": 10.0 * index, "hold_end": 10.0 * index + 10, "summary": {"requests": 8},
            "sessions": {"started": 2, "completed": 2, "cached_share": share,
                         "prefilled_per_call": prefilled, "context_tokens": 1000.0}})
    # the windows' calls: 80% cached, then 10%; the sessions of each step: 70%, then 20%
    recs = [rec(i, 0, 800) for i in range(8)] + [rec(i, 1, 100) for i in range(8)]
    steps = [st(0, True, 0.7, 300.0), st(1, False, 0.2, 800.0)]
    f = ramp_finding(steps, recs, steps[1])
    assert f is not None
    assert (f.warm_share, f.broke_share, f.reprefill_tokens) == (0.7, 0.2, 800.0)
    assert "70% of prompt tokens came from the cache" in f.evidence[0]
    assert "at 2, 20%, and each call prefilled ~800" in f.evidence[0]
    # a chat ramp (no sessions) keeps the window's own count
    plain = [replace(s, sessions=None) for s in steps]
    g = ramp_finding(plain, recs, plain[1])
    assert g is not None and (g.warm_share, g.broke_share) == (0.8, 0.1)


def test_a_chat_ramp_counts_users_and_an_agent_ramp_agents():
    """People taking turns are users ("At 1 user", not "At 1 agent" as a chat ramp said on
    the real llama.cpp); sessions with ids are agents."""
    def rec(i, cached, sid=None):
        return Record(f"r{i}", 0.0, start=float(i), ok=True, prompt_tokens=1000,
                      cached_tokens=cached, session_id=sid, user=i % 2, conversation="c")
    for sid, noun in ((None, "user"), ("s", "agent")):
        warm = step_cache([rec(i, 800, sid) for i in range(6)], 1)
        broke = step_cache([rec(i, 0, sid) for i in range(6)], 2)
        assert warm.agents is (sid is not None)
        f = finding(warm, broke, None, None, "users")
        assert f is not None and f.evidence[0].startswith(f"At 1 {noun}, 80% of prompt tokens")
