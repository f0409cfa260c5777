"""The salt and the cached share, as pure functions (issue 40 section 1): where the salt goes in
what is sent, that it keeps the seed's structure and the asked length, what the cache check
says and when, and the cached counts read from llama.cpp's timings and Ollama's short count."""

from __future__ import annotations


import pytest

from llmbench.analysis import checks
from llmbench.analysis.backends import router_counters, unidentified_sentence
from llmbench.records.record import Record
from llmbench.results.cache import CacheCounts, PromptCache
from llmbench.results.schema import Findings, RouterCounters, Run
from llmbench.workload import WorkloadSpec, build_workload
from llmbench.workload.salt import Salt, given_salt, new_salt, path_words
from llmbench.workload.tokenizer import approx_tokenizer

SALT = Salt("time year way day", 4, "per run")


def test_the_salt_goes_first_in_the_first_message_only():
    msgs = [{"role": "system", "content": "You help."}, {"role": "user", "content": "Hi there"}]
    out = SALT.apply(msgs)
    assert out[0]["content"] == "time year way day You help." and out[1] is msgs[1]
    assert msgs[0]["content"] == "You help."            # the turn's messages are not changed
    # content parts (an image turn): the salt leads the text part
    parts = [{"role": "user", "content": [{"type": "text", "text": "Look"},
                                          {"type": "image_url", "image_url": {"url": "x"}}]}]
    got = SALT.apply(parts)[0]["content"]
    assert got[0] == {"type": "text", "text": "time year way day Look"} and got[1]["type"] == "image_url"
    # a batch of inputs (embeddings): each is a prompt of its own
    batch = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    assert [m["content"] for m in SALT.apply(batch, batch=True)] == \
        ["time year way day a", "time year way day b"]
    assert Salt().apply(msgs) is msgs                     # no salt: nothing changes


def test_salts_are_new_each_run_and_paths_differ_from_their_first_token():
    tok = approx_tokenizer()
    a, b = new_salt(tok), new_salt(tok)
    assert a.text != b.text and a.tokens == b.tokens == 4 and a.source == "per run"
    words = path_words(tok, 2, a)
    r, d = a.with_word(words[0]), a.with_word(words[1])
    assert r.text.split()[0] != d.text.split()[0] and r.tokens == d.tokens == 5
    assert path_words(tok, 2, a) == words                 # the same salt: the same path words
    g = given_salt(tok, "my own words")
    assert (g.text, g.tokens, g.source) == ("my own words", 3, "--prompt-salt")


@pytest.mark.parametrize("kind", ["synthetic", "random"])
def test_the_seed_makes_the_same_structure_with_any_salt(kind):
    tok = approx_tokenizer()
    base = dict(dataset=kind, count=30, seed=7, prompt_tokens=(20, 60), output_tokens=(4, 40),
                turns=2, random_input_len=40, random_range_ratio=0.5)
    plain = build_workload(WorkloadSpec(**base), tok)
    salted = build_workload(WorkloadSpec(**base, salt_tokens=4), tok)
    for p, s in zip(plain.conversations, salted.conversations):
        assert [t.max_tokens for t in p.turns] == [t.max_tokens for t in s.turns]
        assert len(p.turns) == len(s.turns)
        # the first message leaves the salt's 4 tokens; with them it is as long as asked
        salt_text = SALT.apply([{"content": s.turns[0].user}])[0]["content"]
        assert tok.count(salt_text) == tok.count(p.turns[0].user)
        assert [t.prompt_tokens for t in p.turns[1:]] == [t.prompt_tokens for t in s.turns[1:]]
    assert plain.fingerprint != salted.fingerprint        # fewer words: other prompts


def _rec(i, prompt, cached, turn=0, path=None, ok=True):
    return Record(request_id=f"r-{i}", scheduled=float(i), start=float(i), ok=ok,
                  status=200 if ok else 500, prompt_tokens=prompt, cached_tokens=cached,
                  token_times=[i + 0.1] if ok else [], turn=turn, path=path, done=i + 0.2)


def test_the_cache_check_says_what_flatters_and_what_was_asked_for():
    recs = [_rec(i, 100, 90) for i in range(10)]
    per_run = {"source": "per run"}
    c = checks.prompt_cache(recs, per_run, 0.0)
    assert c.share == pytest.approx(0.9) and c.requests == 10
    assert "although this run's prompts were new" in c.message
    # a workload that shares 85% of each prompt on purpose: nothing to warn about
    assert checks.prompt_cache(recs, per_run, 0.85).message is None
    # files: what they share is unknown; the check still warns, naming the likely causes
    assert "repeated rows" in checks.prompt_cache(recs, per_run, None).message
    # later turns resend their history: a cache rightly holds it (first turns decide)
    multi = [_rec(i, 100, 2) for i in range(5)] + [_rec(i, 300, 280, turn=1) for i in range(5, 10)]
    c = checks.prompt_cache(multi, per_run, 0.0)
    assert c.share > 0.5 and c.first_turns.share < 0.05 and c.message is None
    # the same prompts on purpose: the numbers include cache hits, whatever the turn
    c = checks.prompt_cache(recs, {"source": "none (--same-prompts)"}, 0.0)
    assert "--same-prompts" in c.message and "cache hits" in c.message
    assert checks.prompt_cache([_rec(0, 100, None)], per_run) is None    # nobody reported
    c = checks.prompt_cache(recs, per_run, 0.0)
    # typed, and run.json's object under the names it always had, read back equal
    assert isinstance(c, PromptCache) and isinstance(c.first_turns, CacheCounts)
    d = c.to_dict()
    assert list(d) == ["requests", "cached_tokens", "prompt_tokens", "share", "first_turns",
                       "salt", "message"] and d["first_turns"]["requests"] == 10
    assert PromptCache.from_dict(d) == c and PromptCache.from_dict(d).to_dict() == d
    lines = checks.cache_lines(Run(findings=Findings(prompt_cache=c)))
    assert lines[0].startswith("Prompt cache: 90% of prompt tokens") and lines[1].startswith("WARNING")


def test_probe_paths_that_differ_in_cached_share_are_named():
    recs = [_rec(i, 100, 2, path="router") for i in range(6)] + \
        [_rec(i, 100, 80, path="direct") for i in range(6, 12)]
    c = checks.prompt_cache(recs, {"source": "per run"}, 0.0)
    assert c.by_path["router"].share == pytest.approx(0.02)
    assert "router 2%, direct 80%" in c.paths_differ
    even = [_rec(i, 100, 3, path=("router", "direct")[i % 2]) for i in range(12)]
    calm = checks.prompt_cache(even, {"source": "per run"}, 0.0)
    assert calm.paths_differ is None and "paths_differ" not in calm.to_dict()


def test_cached_tokens_from_llamacpp_timings_and_ollamas_short_count():
    from llmbench.load.session import _ollama_cached
    # Ollama evaluated 1 token of a 68-token prompt it had cached: 67 cached (a lower bound)
    r = _rec(0, 1, None)
    _ollama_cached(r, 68)
    assert (r.cached_tokens, r.prompt_tokens) == (67, 68)
    # a prompt it computed: the template makes its count larger than the client's, never half
    r = _rec(0, 75, None)
    _ollama_cached(r, 68)
    assert (r.cached_tokens, r.prompt_tokens) == (0, 75)
    r = _rec(0, 60, None)                   # a tokenizer that counts 10% more: not a hit
    _ollama_cached(r, 68)
    assert r.cached_tokens == 0


def test_router_counters_give_the_spread_when_no_reply_names_a_backend():
    samples = [{"backends_in_flight": {"http://a": 2, "http://b": 1}},
               {"backends_in_flight": {"http://a": 2, "http://b": 3}}, {"error": "HTTP 500"}]
    c = router_counters(samples)
    assert c["samples"] == 2 and c["backends"]["http://a"]["share"] == pytest.approx(0.5)
    typed = RouterCounters.of(c)
    assert typed is not None and typed.backends["http://b"].share == pytest.approx(0.5)
    assert typed.to_dict() == c and typed.samples == 2
    text = unidentified_sentence(typed)
    assert "2 backends taking http://a 50%, http://b 50%" in text and "--direct" in text
    assert router_counters([{"running": 3}]) is None
    assert "If the router has more than one backend" in unidentified_sentence(None)


def test_ollama_that_reports_no_cache_says_so_and_what_protects_the_run():
    recs = [_rec(i, 100, None) for i in range(4)]         # Ollama's /v1: no cached count
    per_run = {"source": "per run"}
    assert checks.prompt_cache(recs, per_run, 0.0, server_kind="vllm", api="openai-chat") is None
    c = checks.prompt_cache(recs, per_run, 0.0, server_kind="ollama", api="openai-chat")
    assert c.share is None and c.note == checks.OLLAMA_V1_NOTE and c.message is None
    assert checks.cache_lines(Run(findings=Findings(prompt_cache=c))) == [f"Prompt cache: {checks.OLLAMA_V1_NOTE}"]
    given = checks.prompt_cache(recs, {"source": "--prompt-salt"}, 0.0, server_kind="ollama")
    assert "--prompt-salt" in given.message and "does not say" in given.message
    # issue 45: --api tgi against a server that also answers Ollama's routes used no /v1 route
    assert checks.prompt_cache(recs, per_run, 0.0, server_kind="ollama", api="tgi") is None
    # the native API's inferred counts (session._ollama_cached): a note says they are inferred,
    # and when no first turn came back short, what that leaves unknown
    zero = [_rec(i, 100, 0) for i in range(4)]
    n = checks.prompt_cache(zero, per_run, 0.0, api="ollama")
    assert n.share == 0 and n.note == checks.OLLAMA_NATIVE_NOTE + checks.OLLAMA_NONE_SHORT
    hit = checks.prompt_cache([_rec(0, 100, 90)] + zero, per_run, 0.0, api="ollama")
    assert hit.note == checks.OLLAMA_NATIVE_NOTE
