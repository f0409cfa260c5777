"""Prompts new to the server in every run (issue 40 section 1): the per-run salt on the bytes a
server receives, the cached share a second run reports with and without --same-prompts, the
probe's paths each with prompts of their own, worker processes salting as the plan says.

Against the mock's prefix cache (block-hashed, 16-token blocks: it reports
usage.prompt_tokens_details.cached_tokens and records the messages it received)."""

from __future__ import annotations

import pytest

import llmbench
from llmbench.mock_server import recorder
from llmbench.mock_server.recorder import read_log
from tests.helpers.api import probe as probe_api, records, run_json

PROMPT = 64


@pytest.fixture(autouse=True)
def _unbuffered_log(monkeypatch):
    """The mock writes each request's line at once: the tests read the log while it runs."""
    monkeypatch.setattr(recorder, "FLUSH_LINES", 1)


def _run(url, out, **kw):
    opts = dict(requests=8, concurrency=2, prompt_tokens=str(PROMPT), output_tokens="4",
                tokenizer="approx", server_probe="off", progress=False)
    return llmbench.run(url=url + "/v1", model="mock", out=out, **{**opts, **kw})


def _first_messages(log, n_before=0):
    """The first message's text of each measured request the mock received, in order (not
    the preflight's one-token "Hi")."""
    return [e["messages"][0]["content"] for e in read_log(log)[n_before:]
            if e.get("messages") and e["messages"][0]["content"] != "Hi"]


def test_a_second_run_finds_nothing_cached_unless_it_asks(mock_factory, tmp_path):
    log = tmp_path / "mock.jsonl"
    m = mock_factory(ttft_ms=5, itl_ms=1, prefix_cache=True, prefill_ms_per_token=0.2,
                     record=str(log), record_prompts=True)
    a = _run(m.url, tmp_path / "a")
    b = _run(m.url, tmp_path / "b")
    salt_a, salt_b = (run_json(r)["workload"]["salt"] for r in (a, b))
    assert salt_a["source"] == "per run" and salt_a["tokens"] == 4
    assert salt_a["text"] != salt_b["text"]
    # config.toml replays the options with a new salt; this run's is one uncommented line
    toml = (a.path / "config.toml").read_text()
    assert f'# prompt_salt = "{salt_a["text"]}"' in toml and "\nprompt_salt" not in toml
    # the bytes the server got: every conversation begins with its run's salt
    sent = _first_messages(log)
    assert len(sent) == 16
    assert all(s.startswith(salt_a["text"] + " ") for s in sent[:8])
    assert all(s.startswith(salt_b["text"] + " ") for s in sent[8:])
    # the same seed: the same structure (lengths, reply lengths), the asked length kept
    ra, rb = records(a), records(b)
    assert sorted(r["prompt_tokens"] for r in ra) == sorted(r["prompt_tokens"] for r in rb)
    assert run_json(a)["workload"]["fingerprint"] == run_json(b)["workload"]["fingerprint"]
    # the second run found nothing of the first in the cache, and says it measured that
    sb = b.summary
    assert sb.cached_reported == 8
    assert sb.cached_prompt_share is not None and sb.cached_prompt_share < 0.1
    assert run_json(b)["prompt_cache"]["message"] is None

    # --same-prompts: byte-identical prompts, the second run's from the cache, and a warning
    c = _run(m.url, tmp_path / "c", same_prompts=True)
    d = _run(m.url, tmp_path / "d", same_prompts=True)
    sent = _first_messages(log)[16:]
    assert sorted(sent[:8]) == sorted(sent[8:])
    assert run_json(c)["workload"]["salt"] == {"text": "", "tokens": 0,
                                               "source": "none (--same-prompts)"}
    assert d.summary.cached_prompt_share > 0.6
    msg = run_json(d)["prompt_cache"]["message"]
    assert "--same-prompts" in msg and "cache hits" in msg
    assert "cache hits by request" in (d.path / "report.html").read_text()
    # lengths as asked with or without a salt (the salt takes the place of prompt tokens)
    assert sorted(r["prompt_tokens"] for r in records(c)) == sorted(r["prompt_tokens"] for r in ra)

    # --prompt-salt replays the first run's prompts exactly (its cache state too)
    e = _run(m.url, tmp_path / "e", prompt_salt=salt_a["text"])
    assert sorted(_first_messages(log)[32:]) == sorted(_first_messages(log)[:8])
    assert run_json(e)["workload"]["salt"]["source"] == "--prompt-salt"
    assert e.summary.cached_prompt_share > 0.6


def test_a_shared_prefix_stays_shared_within_a_run_only(mock_factory, tmp_path):
    # the salt goes before the shared part: users of one run share it, two runs do not
    m = mock_factory(ttft_ms=5, itl_ms=1, prefix_cache=True)
    kw = dict(prompt_tokens="96", shared_prefix_tokens=64, requests=12)
    a = _run(m.url, tmp_path / "a", **kw)
    b = _run(m.url, tmp_path / "b", **kw)
    for r in (a, b):
        pc = run_json(r)["prompt_cache"]
        # the first request of the run computes the shared 64 tokens, the rest find them
        assert 0.4 < pc["share"] < 0.75
        assert pc["message"] is None            # asked for: shared on purpose
    assert run_json(a)["workload"]["salt"]["text"] != run_json(b)["workload"]["salt"]["text"]


def test_worker_processes_salt_their_share_as_the_plan_says(mock_factory, tmp_path):
    log = tmp_path / "mock.jsonl"
    m = mock_factory(ttft_ms=5, itl_ms=1, record=str(log), record_prompts=True)
    r = _run(m.url, tmp_path / "w", workers=2, requests=8, concurrency=4)
    salt = run_json(r)["workload"]["salt"]["text"]
    sent = _first_messages(log)
    assert len(sent) == 8 and {rec["worker"] for rec in records(r)} == {0, 1}
    assert all(s.startswith(salt + " ") for s in sent)


def test_probe_paths_get_prompts_of_their_own(mock_factory, tmp_path):
    log = tmp_path / "mock.jsonl"
    m = mock_factory(ttft_ms=10, itl_ms=2, tokens=6, prefix_cache=True, record=str(log),
                     record_prompts=True)
    url = m.url + "/v1"
    run = probe_api(url, url, tmp_path / "p", users="2", turns=2, rounds=3, slice_s="1s",
                    server_probe="off", tokenizer="approx")
    doc = run_json(run)
    by_target = doc["workload"]["salt"]["by_target"]
    assert set(by_target) == {"router", "direct"} and by_target["router"] != by_target["direct"]
    # both salts: the run's with a word of the path's own in front, the same token count
    assert by_target["router"].split()[1:] == by_target["direct"].split()[1:]
    by_path = {"router": set(), "direct": set()}
    for text in _first_messages(log):
        path = next(p for p, s in by_target.items() if text.startswith(s + " "))
        by_path[path].add(text)
    # same shape, different text: no first message went down both paths
    assert by_path["router"] and by_path["direct"]
    assert not by_path["router"] & by_path["direct"]
    # each path's cached share is measured and near equal (later turns hit their own history)
    pc = doc["prompt_cache"]
    assert set(pc["by_path"]) == {"router", "direct"}
    assert all(v["share"] is not None and v["share"] < 0.1 for v in pc["by_path"].values())
    assert "paths_differ" not in pc
    step = doc["steps"][0]
    assert step["router"]["cached_prompt_share"] is not None
    assert step["direct"]["cached_prompt_share"] is not None


def test_probe_with_the_same_prompts_says_one_path_read_the_others_cache(mock_factory, tmp_path):
    # --same-prompts: both paths send the very same prompts; whichever goes second in a round
    # finds the first one's in the backend's cache, and the probe's verdict says so
    m = mock_factory(ttft_ms=10, itl_ms=2, tokens=6, prefix_cache=True)
    url = m.url + "/v1"
    run = probe_api(url, url, tmp_path / "p", users="1", turns=1, rounds=1, slice_s="1s",
                    server_probe="off", tokenizer="approx", same_prompts=True,
                    prompt_tokens=64)
    pc = run_json(run)["prompt_cache"]
    shares = {k: v["share"] for k, v in pc["by_path"].items()}
    assert shares["router"] < 0.1 < 0.5 < shares["direct"], shares   # router went first
    assert "paths differ" in pc["paths_differ"]
    assert "--same-prompts" in pc["message"]


@pytest.mark.parametrize("bad,why", [("", "empty"), ("a\nb", "control character"),
                                     ("w " * 150, "characters")])
def test_a_bad_prompt_salt_is_one_line(bad, why):
    from llmbench.errors import UsageError
    with pytest.raises(UsageError, match=why):
        llmbench.run(url="http://127.0.0.1:9/v1", model="m", prompt_salt=bad, requests=1)


def test_prompt_salt_and_same_prompts_do_not_go_together():
    from llmbench.errors import UsageError
    with pytest.raises(UsageError, match="give one"):
        llmbench.run(url="http://127.0.0.1:9/v1", model="m", prompt_salt="a b", same_prompts=True,
                     requests=1)


# -- laps: a run that needs more conversations than its pool goes through it again ------------

def _pool(tmp_path, n=3):
    """A dataset of ``n`` conversations: the pool a run of more requests goes round."""
    import json
    from llmbench.workload.words import WORDS
    p = tmp_path / "pool.jsonl"
    p.write_text("".join(json.dumps({"prompt": f"Question {i}: " + " ".join(
        WORDS[(7 * i + k) % len(WORDS)] for k in range(60))}) + "\n" for i in range(n)))
    return str(p)


def _split(text, n):
    words = text.split(" ")
    return " ".join(words[:n]), " ".join(words[n:])


def test_each_lap_through_the_pool_gets_its_own_salt_and_a_replay_repeats_them(mock_factory,
                                                                                 tmp_path):
    from llmbench.workload import load_tokenizer
    from llmbench.workload.salt import given_salt
    log = tmp_path / "mock.jsonl"
    m = mock_factory(ttft_ms=1, itl_ms=1, record=str(log), record_prompts=True)
    pool = _pool(tmp_path)
    a = _run(m.url, tmp_path / "a", dataset=pool, requests=7, concurrency=1)
    salt = run_json(a)["workload"]["salt"]
    assert salt["per_lap"] is True and salt["tokens"] == 4
    sent = _first_messages(log)
    assert len(sent) == 7                       # one user: in the order drawn, 3 + 3 + 1
    heads, bodies = zip(*(_split(s, salt["tokens"]) for s in sent))
    # the same three conversations every lap, each lap beginning with a salt of its own
    assert bodies[3:6] == bodies[:3] and bodies[6] == bodies[0] and len(set(bodies)) == 3
    assert heads[0] == salt["text"] and len(set(heads[:3])) == len(set(heads[3:6])) == 1
    assert len({heads[0], heads[3], heads[6]}) == 3
    assert len({h.split()[0] for h in (heads[0], heads[3], heads[6])}) == 3   # not one token
    # each lap's salt is the run's salt's for_lap (the rule the docs give), the length kept
    tok = load_tokenizer("approx")
    assert heads[3] == given_salt(tok, salt["text"]).for_lap(1).text
    assert heads[6] == given_salt(tok, salt["text"]).for_lap(2).text
    lengths: dict[str, set[int]] = {}
    for r in records(a):
        lengths.setdefault(r["conversation"], set()).add(r["prompt_tokens"])
    assert len(lengths) == 3 and all(len(v) == 1 for v in lengths.values()), lengths
    # --prompt-salt with the run's salt replays every lap byte for byte
    _run(m.url, tmp_path / "b", dataset=pool, requests=7, concurrency=1,
         prompt_salt=salt["text"])
    assert _first_messages(log)[7:] == sent
    # --same-prompts: no salt on any lap (the very rows, again and again)
    _run(m.url, tmp_path / "c", dataset=pool, requests=7, concurrency=1, same_prompts=True)
    plain = _first_messages(log)[14:]
    assert plain[3:6] == plain[:3] and plain[0].startswith("Question 0:")


def test_a_run_that_goes_round_its_pool_finds_no_more_cached_than_one_that_does_not(
        mock_factory, tmp_path):
    # before laps had salts of their own, every lap after the first was the first lap's prompts
    # again: 12 requests over 3 conversations found 3/4 of their prompt tokens cached
    m = mock_factory(ttft_ms=1, itl_ms=1, prefix_cache=True)
    pool = _pool(tmp_path)
    once = _run(m.url, tmp_path / "once", dataset=pool, requests=3, concurrency=1)
    laps = _run(m.url, tmp_path / "laps", dataset=pool, requests=12, concurrency=2)
    assert once.summary.cached_reported == 3 and laps.summary.cached_reported == 12
    assert laps.summary.cached_prompt_share < once.summary.cached_prompt_share + 0.1
    assert laps.summary.cached_prompt_share < 0.15
    assert run_json(laps)["prompt_cache"]["message"] is None


def test_a_ramp_past_its_pool_keeps_its_prompts_new_to_the_cache(mock_factory, tmp_path):
    # the case: a long ramp that needs more conversations than were built (a 3-row
    # dataset here, the synthetic 2,000 past 2,000): every lap's first turns computed again
    m = mock_factory(ttft_ms=2, itl_ms=1, tokens=4, prefix_cache=True)
    r = llmbench.ramp(url=m.url + "/v1", model="mock", out=tmp_path / "r",
                      dataset=_pool(tmp_path), users=[2], hold="1s", ramp_in="0s", think="0",
                      output_tokens="4", tokenizer="approx", server_probe="off",
                      progress=False)
    pc = run_json(r)["prompt_cache"]
    assert pc["first_turns"]["requests"] > 12          # round the pool of 3 many times
    assert pc["first_turns"]["share"] < 0.15, pc
