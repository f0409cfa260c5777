"""Whole histories prefilled again (one KV state thrashed between users, issue 45): read from
each later turn's cached tokens against its conversation's previous call, at the step
explained against the lighter one. No cache counts, no word: plain queuing looks the same."""

from __future__ import annotations

from llmbench.analysis.cachebound import reprefill
from llmbench.records.record import Record
from llmbench.results.schema import Step

PROMPT, REPLY = 100, 32


def _conversation(user: int, step: int, t0: float, turns: int, keep: bool | None,
                  ttft_s: float = 0.5, timings: bool = False) -> list[Record]:
    """One user's turns, one a second from t0: each prompt is the history (the previous
    prompt and reply) plus a new message; ``keep`` whether the cache kept the history (None:
    the server said nothing of its cache)."""
    out, prompt = [], PROMPT
    for turn in range(turns):
        history = prompt - PROMPT
        cached = None if keep is None else (history if keep else 0)
        start = t0 + turn
        timing = ({"prompt_n": prompt - (cached or 0), "prompt_ms": 0.5 * (prompt - (cached or 0))}
                  if timings else None)
        out.append(Record(f"u{user}s{step}t{turn}", start, start=start, ok=True,
                          first_token=start + ttft_s, end=start + 0.9, done=start + 0.9,
                          token_times=[start + ttft_s, start + 0.9], prompt_tokens=prompt,
                          output_tokens=REPLY, cached_tokens=cached, user=user,
                          conversation=f"c{user}-{step}", turn=turn, step=step,
                          server_timing=timing))
        prompt += REPLY + PROMPT
    return out


def _step(index: int, load: float) -> Step:
    return Step.from_dict({"index": index, "load": load, "held": index == 0,
                           "state": "held" if index == 0 else "over",
                           "hold_start": 100.0 * index, "hold_end": 100.0 * index + 10,
                           "ramp_start": 100.0 * index, "summary": {"requests": 1}})


def _ramp(keep_light, keep_heavy, timings=False):
    light, heavy = _step(0, 1), _step(1, 4)
    recs = _conversation(0, 0, 0.0, 5, keep_light, timings=timings)
    for u in range(4):
        recs += _conversation(u, 1, 100.0 + u * 0.1, 5, keep_heavy, timings=timings)
    return recs, light, heavy


def test_histories_lost_at_the_heavy_step_and_kept_at_the_light_one_are_said():
    recs, light, heavy = _ramp(True, False)
    r = reprefill(recs, heavy, light)
    assert r is not None
    # 4 users x 4 later turns, every one prefilled its whole history again
    assert (r.later_turns, r.lost, r.light_lost_share) == (16, 16, 0.0)
    # histories of 132, 264, 396, 528 tokens (the previous prompt and its 32-token reply)
    assert r.lost_tokens == (132 + 264 + 396 + 528) / 4
    said = r.sentence()
    assert said.startswith("At 4 users, 16 of 16 later turns re-prefilled their whole history")
    assert "at 1 user 0% did" in said and "one KV state thrashed between users" in said
    # no timings from the server: no share of TTFT is claimed
    assert r.ttft_share is None and "% of their TTFT" not in said


def test_with_the_servers_timings_the_share_of_ttft_is_the_re_prefills_time():
    recs, light, heavy = _ramp(True, False, timings=True)
    r = reprefill(recs, heavy, light)
    assert r is not None and r.ms_per_token == 0.5
    # each later turn re-prefilled its history at 0.5 ms a token, over a 0.5 s TTFT
    assert abs(r.ttft_share - (0.5 * (132 + 264 + 396 + 528) / 4 / 500.0)) < 1e-9
    assert "about 33% of their TTFT (0.50 ms a token, the server's timings)" in r.sentence()


def test_no_cache_counts_no_sentence():
    # plain queuing looks the same from TTFT alone: without cached tokens nothing is said
    recs, light, heavy = _ramp(None, None)
    assert reprefill(recs, heavy, light) is None


def test_a_cache_that_kept_every_history_is_not_thrashing():
    recs, light, heavy = _ramp(True, True)
    assert reprefill(recs, heavy, light) is None


def test_a_server_with_no_cache_loses_histories_at_one_user_too_so_it_is_not_sharing():
    recs, light, heavy = _ramp(False, False)
    assert reprefill(recs, heavy, light) is None
