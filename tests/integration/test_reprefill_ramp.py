"""Whole histories re-prefilled (one KV state thrashed between users, issue 45) against the
mock over HTTP: a multi-turn ramp on 2 slots whose KV budget keeps one user's history warm;
and plain queuing on 1 slot whose budget keeps every history, where nothing of it is said.

On paper (the mock counts a word as a token and prefills at 1 ms a token it finds uncached):
a conversation of 4 turns of 80 tokens with 32-token replies grows to ~450 tokens, so a 500-
token budget keeps one user's history; with 2 or 4 users each later turn finds its history
evicted by the others and prefills it again (112 to 336 tokens). 2 users have a slot each
(held under the 700 ms gate, their histories already lost, so the cache did not fall between
the steps: not the cache's verdict); 4 queue for the 2 slots (over it): queuing, with the
re-prefill said beside it. With a budget of 100,000 every history stays; 4 users on 1 slot
queue, and every later turn finds its history cached.
"""

from __future__ import annotations

import llmbench
from llmbench.analysis.cachebound import reprefill
from llmbench.records.record import load_records

CHAT = dict(turns=4, prompt_tokens="80", output_tokens="32", think="0", hold="6s",
            ramp_in="0.3s", tokenizer="approx", keep_going=True)


def _ramp(mock_factory, tmp_path, parallel: int, kv_tokens: int, **mock):
    m = mock_factory(ttft_ms=20, itl_ms=10, tokens=32, parallel=parallel,
                     prefill_ms_per_token=1.0, kv_tokens=kv_tokens, **mock)
    r = llmbench.ramp(url=m.url + "/v1", model="mock", users="1,2,4", out=tmp_path,
                      threshold=["ttft.p95_all<=700ms"], **CHAT)
    run = llmbench.load_run(r.path)
    recs = load_records(r.path / "requests.jsonl")
    return run, reprefill(recs, run.steps[-1], run.steps[0])


def test_histories_evicted_between_users_are_said_with_their_tokens(mock_factory, tmp_path):
    run, found = _ramp(mock_factory, tmp_path, parallel=2, kv_tokens=500)
    assert found is not None, run.verdict.evidence
    # most later turns at 4 users lost their history; at 1 user the budget kept it
    assert found.lost >= 0.5 * found.later_turns and found.light_lost_share <= 0.2
    # a lost history is one of 112, 224 or 336 tokens
    assert 112 <= found.lost_tokens <= 336, found
    # the mock sends no timings: no share of TTFT is claimed
    assert found.ttft_share is None
    said = " ".join(run.verdict.evidence)
    if run.verdict.kind in ("queuing", "saturation", "other"):
        assert found.sentence() in said
    elif run.verdict.kind == "cache_bound":
        # the cache is the verdict: it says the re-prefill itself, the note stays quiet
        assert "re-prefilled their whole history" not in said
    else:
        # a busy machine's own finding (the lag) leads; the reading above is still made
        assert run.verdict.kind in ("load_generator", "not_enough_data"), run.verdict


def test_plain_queuing_with_every_history_cached_says_nothing_of_it(mock_factory, tmp_path):
    run, found = _ramp(mock_factory, tmp_path, parallel=1, kv_tokens=100_000)
    assert found is None
    assert "re-prefilled" not in " ".join(run.verdict.evidence), run.verdict


def test_the_same_thrashing_with_no_cache_counts_says_nothing(mock_factory, tmp_path):
    # the histories are evicted as above, but the replies say nothing of cached tokens
    # (Ollama's /v1 before 0.34): from TTFT alone it looks like plain queuing, so no word
    run, found = _ramp(mock_factory, tmp_path, parallel=2, kv_tokens=500, cache_report="none")
    assert found is None
    assert "re-prefilled" not in " ".join(run.verdict.evidence), run.verdict
