"""Laps through a run's pool of conversations (workload.model.draw) and the salt of each
(workload.salt.Salt.for_lap): pure, no server."""

from __future__ import annotations

from llmbench.workload import Conversation, Turn, draw, load_tokenizer
from llmbench.workload.salt import SALT_WORDS, Salt, given_salt, new_salt


def _pool(n=3):
    return [Conversation(f"c{i}", (Turn(f"question {i}", 4, 2),)) for i in range(n)]


def test_a_pool_of_three_drawn_seven_times_goes_round_it_in_laps():
    pool = _pool()
    got = [draw(pool, i) for i in range(7)]
    assert [c.id for c in got] == ["c0", "c1", "c2", "c0", "c1", "c2", "c0"]
    assert [c.lap for c in got] == [0, 0, 0, 1, 1, 1, 2]
    assert all(got[i] is pool[i] for i in range(3))        # the first lap: the pool itself
    assert got[3].turns is pool[0].turns                     # a lap copies no prompt


def test_each_lap_has_its_own_salt_of_the_same_length_drawn_from_the_runs():
    tok = load_tokenizer("approx")
    base = new_salt(tok)
    laps = [base.for_lap(k) for k in range(6)]
    assert laps[0] is base
    assert len({s.text for s in laps}) == 6
    assert all(s.text.split()[0] != base.text.split()[0] for s in laps[1:])
    assert all(s.tokens == base.tokens == SALT_WORDS and len(s.text.split()) == SALT_WORDS
               and tok.count(s.text) == base.tokens for s in laps)
    assert all(s.source == "per run" for s in laps)
    # the same salt given again (--prompt-salt: a replay) draws the same laps
    again = given_salt(tok, base.text)
    assert [again.for_lap(k).text for k in range(6)] == [s.text for s in laps]
    # no salt (--same-prompts) stays none on every lap
    none = Salt(source="none (--same-prompts)")
    assert none.for_lap(3) is none and not none.for_lap(3)


def test_a_given_salt_of_many_tokens_keeps_its_length_on_every_lap():
    tok = load_tokenizer("approx")
    s = given_salt(tok, "run-2026-12-02 baseline")
    lap = s.for_lap(1)
    assert lap.tokens == s.tokens and len(lap.text.split()) == s.tokens
    assert lap.text != s.text


def test_an_agent_session_drawn_again_keeps_its_plan_and_tools():
    from llmbench.workload.agents import AgentSession, is_agent
    s = AgentSession("a0", (Turn("", 4, 2),), plan=object(), tools=({"type": "function"},),
                     vocab=("x",), seed=5)
    again = draw([s], 2)
    assert again.lap == 2 and is_agent(again) and again.plan is s.plan
    assert (again.tools, again.vocab, again.seed) == (s.tools, s.vocab, s.seed)
