"""The search for the limit (``ramp --find``), as pure decisions: the pacer against a server
on paper (a closed-loop queue: P slots, service time S, no think time, so the mean time to a
first token is ttft + (N/P - 1) x S for N >= P users, by Little's law), and against servers
that mislead it (a wrong aim, noise, steps with too few requests, steps still drifting, a
budget, a ceiling, the load generator). No network: the engine that runs these plans is the
one every ramp uses (tests/integration/test_find.py runs it on the mock)."""

from __future__ import annotations

import math
import random

import pytest

from llmbench.analysis import stepstats
from llmbench.analysis.findlimit import duration, finish
from llmbench.analysis.verdict import lag_explains
from llmbench.load.shapes.pace import (AIM, BISECT, CONFIRM, GROW, LONGER, REPEAT, FixedSteps,
                                       StepPlan)
from llmbench.load.shapes.search import SearchPacer
from llmbench.results.schema import Check, Run, RunState, Steady, Step, Summary, ladder
from llmbench.results.search import Search, Trial


def queue_step(index: int, users: int, slots: int, limit_ms: float, s: float = 0.2,
               ttft: float = 0.05, stat: str = "mean", drifting: bool = False,
               requests: int = 100, overloaded: bool = False) -> Step:
    """A judged step of the closed-loop queue on paper (mean TTFT, ms), with its throughput."""
    mean = ttft + max(0.0, users / slots - 1) * s
    v = mean * 1000
    ok = v <= limit_ms
    if requests == 0:
        c = Check(threshold=f"ttft.{stat}<={limit_ms:g}ms", ok=False, actual=None,
                  limit=limit_ms, metric="ttft", stat=stat, op="<=", insufficient=True,
                  reason="not enough data: no request to measure")
        state = "not enough data"
    else:
        c = Check(threshold=f"ttft.{stat}<={limit_ms:g}ms", ok=ok, actual=v, limit=limit_ms,
                  metric="ttft", stat=stat, op="<=")
        state = "held" if ok else "over"
    summary = Summary(request_throughput=min(users, slots) / s, requests=requests,
                      completed=requests)
    mon = {"overloaded": True, "lag_p99_ms": 5000.0} if overloaded else {}
    return Step(index=index, load=float(users), held=state == "held", state=state,  # type: ignore[arg-type]
                checks=[c], summary=summary, monitor=mon, steady=Steady(drifting=drifting))


def limit_threshold(slots: int, limit: int, s: float = 0.2, ttft: float = 0.05) -> float:
    """The mean-TTFT limit (ms) halfway between ``limit`` and ``limit + 1`` users."""
    if limit < slots:
        raise ValueError("the paper limit of this queue is at least its slots")
    return (ttft + ((limit + 0.5) / slots - 1) * s) * 1000


def search(slots: int, limit_ms: float, aim: bool = True, **kw) -> tuple[SearchPacer, list[StepPlan]]:
    """Run a pacer to its end against the queue on paper; each step 'takes' 3 s."""
    step_fn = kw.pop("step_fn", None)
    p = SearchPacer(by="users", start=kw.pop("start", 1), ramp_in_s=1, hold_s=2,
                    aim=(lambda a, b: stepstats.aim(a, b, True)) if aim else None,
                    untrusted=lag_explains, **kw)
    plans = []
    plan = p.first()
    i = 0
    while plan is not None:
        plans.append(plan)
        st = (step_fn or (lambda i, n: queue_step(i, n, slots, limit_ms)))(i, int(plan.load))
        if not plan.extend:
            i += 1
        plan = p.after(st, i * 3.0)
    return p, plans


def searched(plans: list[StepPlan]) -> int:
    return sum(1 for pl in plans if pl.why != CONFIRM and not pl.extend)


@pytest.mark.parametrize("slots,limit", [(1, 1), (1, 3), (3, 5), (8, 8), (8, 12), (4, 40),
                                         (16, 48), (50, 200)])
def test_the_search_lands_on_the_paper_limit_in_about_log2_plus_3_steps(slots, limit):
    p, plans = search(slots, limit_threshold(slots, limit))
    assert p.stopped == "found" and p.confirmed is True
    assert p.limit == limit
    assert p.hi is not None and p.hi.load == limit + 1      # the bracket closed to one user
    # growth to the first break, then about two aimed steps, then the confirmation
    assert searched(plans) <= math.ceil(math.log2(max(limit, 2))) + 3, [x.load for x in plans]
    assert plans[-1].why == CONFIRM and plans[-1].load == limit
    assert all(pl.load == int(pl.load) for pl in plans)          # users are whole


def test_every_limit_up_to_64_is_found_exactly():
    for limit in range(1, 65):
        slots = max(1, limit // 2)
        p, plans = search(slots, limit_threshold(slots, limit))
        assert (p.limit, p.stopped) == (limit, "found"), (limit, [x.load for x in plans])
        assert searched(plans) <= math.ceil(math.log2(max(limit, 2))) + 3, (limit, plans)


def test_without_an_aim_it_bisects_and_still_lands_on_the_limit():
    for limit in (3, 12, 48, 200):
        p, plans = search(1, limit_threshold(1, limit), aim=False)
        assert p.limit == limit and p.stopped == "found"
        assert {pl.why for pl in plans} <= {GROW, BISECT, CONFIRM}
        grown = [pl.load for pl in plans if pl.why == GROW]
        gap = grown[-1] - grown[-2]         # between the last two growth steps
        assert searched(plans) <= len(grown) + math.ceil(math.log2(gap)), \
            [x.load for x in plans]


def test_an_aim_that_is_always_wrong_costs_bisections_not_the_answer():
    limit = 37

    def wrong(lo, hi):            # always right under the step that broke
        return hi.load - 0.5
    p = SearchPacer(by="users", hold_s=2, ramp_in_s=1, aim=wrong)
    plan, i, plans = p.first(), 0, []
    while plan is not None:
        plans.append(plan)
        plan = p.after(queue_step(i, int(plan.load), 1, limit_threshold(1, limit)), i * 3.0)
        i += 1
    assert p.limit == limit and p.stopped == "found"
    whys = [pl.why for pl in plans]
    # an aim that came out the other way than aimed is followed by a bisection
    for a, b in zip(whys, whys[1:]):
        if a == AIM:
            assert b in (AIM, BISECT, CONFIRM)
    assert BISECT in whys
    assert searched(plans) <= 7 + 2 * math.ceil(math.log2(32))


def test_noise_near_the_limit_moves_the_bracket_to_the_newest_measurement():
    # the paper limit is 10; the step at 11 holds once by luck, later 11 breaks
    seen: dict[int, int] = {}

    def noisy(i, n):
        seen[n] = seen.get(n, 0) + 1
        st = queue_step(i, n, 5, limit_threshold(5, 10))
        if n == 11 and seen[n] == 1:
            st.held, st.state = True, "held"
        return st
    p, plans = search(5, limit_threshold(5, 10), step_fn=noisy)
    assert p.stopped == "found" and p.limit in (10, 11)
    assert [pl.load for pl in plans][-1] == p.limit


def test_a_step_with_too_few_requests_is_held_longer_then_passed_over_while_growing():
    def sparse(i, n):
        return queue_step(i, n, 4, limit_threshold(4, 6), requests=0 if n == 1 else 100)
    p, plans = search(4, limit_threshold(4, 6), step_fn=sparse)
    first = plans[:3]
    assert [(pl.why, pl.extend, pl.hold_s) for pl in first] == [
        (GROW, False, 2), (LONGER, True, 2), (LONGER, True, 4)]          # 2 s, then 4, then 8
    assert p.trials[0].hold_s == 8 and not p.trials[0].counted
    assert "neither held nor broken" in (p.trials[0].note or "")
    assert p.limit == 6 and p.stopped == "found"


def test_a_narrowing_step_with_no_data_even_held_longest_ends_the_search_saying_so():
    def sparse(i, n):
        return queue_step(i, n, 4, limit_threshold(4, 6), requests=0 if n not in (1, 2, 4, 8) else 100)
    p, plans = search(4, limit_threshold(4, 6), step_fn=sparse)
    assert p.stopped == "no_data" and p.limit == 4 and p.hi.load == 8
    s = finish(_result(p), [], None, "users")
    assert "between 4 users and 8 users (5 to 7 users not tried)" in (s.uncertain or "")


def test_a_drifting_step_is_run_once_more_before_it_counts():
    calls: dict[int, int] = {}

    def drift(i, n):
        calls[n] = calls.get(n, 0) + 1
        return queue_step(i, n, 2, limit_threshold(2, 3), drifting=n == 4)
    p, plans = search(2, limit_threshold(2, 3), step_fn=drift)
    at4 = [pl for pl in plans if pl.load == 4]
    assert [pl.why for pl in at4] == [GROW, REPEAT] and at4[1].ramp_in_s == 0
    assert calls[4] == 2                                      # repeated once, not again
    t4 = [t for t in p.trials if t.load == 4]
    assert [t.counted for t in t4] == [False, True]
    assert p.limit == 3 and p.stopped == "found"


def test_a_limit_that_breaks_its_sustain_is_searched_for_below_and_confirmed_there():
    def sustain_breaks(i, n):
        st = queue_step(i, n, 4, limit_threshold(4, 6))
        return st
    p = SearchPacer(by="users", hold_s=2, ramp_in_s=1, sustain_s=30,
                    aim=lambda a, b: stepstats.aim(a, b, True))
    plan, i, plans = p.first(), 0, []
    while plan is not None:
        plans.append(plan)
        st = sustain_breaks(i, int(plan.load))
        if plan.why == CONFIRM and plan.load == 6:
            st.held, st.state = False, "over"        # 6 users hold 2 s, not 30
        plan = p.after(st, i * 3.0)
        i += 1
    confirms = [pl for pl in plans if pl.why == CONFIRM]
    assert [c.load for c in confirms] == [6, 5] and confirms[0].hold_s == 30
    assert p.limit == 5 and p.confirmed is True and p.confirm_failures == 1
    assert p.hi.load == 6


def test_the_budget_stops_the_search_before_a_step_that_would_not_fit():
    p, plans = search(8, limit_threshold(8, 12), budget_s=11.0)
    # each step takes 3 s here (1 in, 2 held): the fourth (1, 4, 8, then 16) would end at 12 s
    assert p.stopped == "budget" and len(p.trials) == 3
    s = finish(_result(p), [], None, "users")
    assert "the budget (11 s) ran out before any step broke" in s.uncertain
    assert s.text.startswith("Holds 8 users; the budget (11 s) ran out")


def test_a_server_that_never_breaks_stops_at_the_ceiling():
    p, plans = search(1000, 1e9, ceiling=40)
    assert [pl.load for pl in plans] == [1, 4, 8, 16, 32, 40]      # x4 from the start
    assert p.stopped == "ceiling" and p.limit == 40


def test_when_one_user_already_breaks_no_load_held():
    p, plans = search(1, 10.0)         # 10 ms mean TTFT: even one user (50 ms) breaks
    assert [pl.load for pl in plans] == [1] and p.stopped == "none_held" and p.limit == 0
    s = finish(_result(p), [], None, "users")
    assert s.text.startswith("No load held: 1 user already broke")


def test_a_start_above_the_limit_goes_down():
    p, plans = search(2, limit_threshold(2, 3), start=16)
    assert [pl.load for pl in plans][:3] == [16, 8, 4]
    assert p.limit == 3 and p.stopped == "found"


def test_a_step_the_load_generator_broke_ends_the_search():
    # from 16 users on, llmbench's own event loop lagged 5 s (p99): a miss of a few tens of ms
    # at 16 is the generator's, not the server's, so the search stops there instead of
    # bisecting on a number it cannot trust
    def busy(i, n):
        return queue_step(i, n, 8, limit_threshold(8, 12), overloaded=n >= 16)
    p, plans = search(8, limit_threshold(8, 12), step_fn=busy)
    assert p.stopped == "load_generator" and p.limit == 8 and p.hi is None
    assert [pl.load for pl in plans] == [1, 4, 8, 16]
    assert "load generator" in (p.trials[-1].note or "")
    s = finish(_result(p), [], None, "users")
    assert "the server's limit is at least 8 users" in (s.uncertain or "")


def test_by_rate_narrows_to_five_percent():
    cap = 13.7                       # req/s the server holds on paper

    def rate_step(i, r):
        ok = r <= cap
        v = 100.0 if ok else 100.0 + (r - cap) * 500
        c = Check(threshold="ttft.p95<=300ms", ok=v <= 300, actual=v, limit=300.0,
                  metric="ttft", stat="p95", op="<=")
        return Step(index=i, load=r, held=c.ok, state="held" if c.ok else "over", checks=[c],
                    summary=Summary(requests=50, completed=50, request_throughput=min(r, cap)))
    p = SearchPacer(by="rate", start=1.0, hold_s=2, ramp_in_s=1,
                    aim=lambda a, b: stepstats.aim(a, b, False))
    plan, i = p.first(), 0
    loads = []
    while plan is not None:
        loads.append(plan.load)
        plan = p.after(rate_step(i, plan.load), i * 3.0)
        i += 1
    true = cap + 200 / 500          # where the threshold is crossed
    assert p.stopped == "found"
    assert p.hi.load <= p.limit * 1.05 + 1e-9
    assert p.limit <= true < p.hi.load
    assert len(loads) <= 12, loads


def test_worst_case_steps_is_growth_plus_twice_the_bisection_plus_the_confirmation():
    p = SearchPacer(by="users", start=1, ceiling=64)
    # growth 1, 4, 8 .. 64 (6 steps), the last gap 32..64 bisected (5), twice, and the
    # confirmation
    assert p.worst_case_steps() == 6 + 2 * 5 + 1


def test_fixed_steps_stop_at_the_first_that_breaks_unless_keep_going():
    held = Step(load=2.0, held=True, state="held")
    over = Step(load=4.0, held=False, state="over")
    f = FixedSteps([2.0, 4.0, 8.0], ramp_in_s=1, hold_s=5)
    assert f.first() == StepPlan(2.0, 5, 1)
    assert f.after(held, 6).load == 4.0
    assert f.after(over, 12) is None
    g = FixedSteps([2.0, 4.0, 8.0], ramp_in_s=1, hold_s=5, keep_going=True)
    g.first()
    g.after(held, 6)
    assert g.after(over, 12).load == 8.0 and g.planned() == 3 and g.peak() == 8.0


def test_a_fixed_step_with_too_few_requests_is_held_longer_up_to_four_holds():
    # issue 45: a fixed ramp (and so a sweep) ended at its first "not enough data" step, where
    # --find holds such a step longer: now both do, doubling, up to 4 holds in all
    thin = Step(load=1.0, held=False, state="not enough data")
    held = Step(load=1.0, held=True, state="held")
    f = FixedSteps([1.0, 2.0], ramp_in_s=1, hold_s=5)
    f.first()
    longer = f.after(thin, 6)
    assert longer == StepPlan(1.0, 5, 0.0, LONGER, extend=True)     # 10 s in all
    assert f.after(thin, 12) == StepPlan(1.0, 10, 0.0, LONGER, extend=True)   # 20 s
    assert f.after(thin, 23) is None          # 20 s of 5: the bound reached, said as it is
    # judged once held longer: the list goes on, and the next step starts with one hold
    g = FixedSteps([1.0, 2.0], ramp_in_s=1, hold_s=5)
    g.first()
    g.after(thin, 6)
    assert g.after(held, 12) == StepPlan(2.0, 5, 1)
    assert g.after(thin, 18).extend          # the new step may be held longer too
    # a rate's arrivals stop with its window: a fixed list of rates is not extended
    r = FixedSteps([1.0, 2.0], ramp_in_s=1, hold_s=5, extend=False)
    r.first()
    assert r.after(thin, 6) is None


# -- the result ---------------------------------------------------------------------------------

def _result(p: SearchPacer) -> Search:
    return Search(by=p.by, start=p.start, ceiling=p.top, resolution=p.resolution,
                  hold_s=p.hold_s, sustain_s=p.sustain, budget_s=p.budget_s,
                  trials=[Trial(index=t.index, load=t.load, why=t.why, state=t.state,  # type: ignore[arg-type]
                                held=t.held, counted=t.counted, hold_s=t.hold_s, note=t.note)
                          for t in p.trials],
                  limit=p.limit, broke_at=p.hi.load if p.hi is not None else None,
                  confirmed=p.confirmed, stopped=p.stopped or "interrupted",  # type: ignore[arg-type]
                  elapsed_s=p.spent_s)


def test_the_answer_names_the_limit_what_broke_next_and_the_confirmation():
    limit_ms = limit_threshold(8, 11)
    seen: list[Step] = []

    def keep(i, n):
        st = queue_step(i, n, 8, limit_ms)
        seen.append(st)
        return st
    p, plans = search(8, limit_ms, step_fn=keep, sustain_s=300)
    s = finish(_result(p), ladder(seen, _result(p)), None, "users")
    assert s.limit == 11 and s.broke_at == 12 and s.bracket == [11, 12]
    assert s.broke_because == "TTFT mean was 150 ms, over 138 ms"   # 12 users on paper
    assert s.text.startswith("Holds 11 users (12 broke: TTFT mean was ")
    assert "; confirmed for 5 min. Found in " in s.text
    assert s.uncertain is None and s.stopped == "found"
    # the typed result reads back as written
    again = Search.from_dict(s.to_dict())
    assert again.to_dict() == s.to_dict() and again.trials[0].why == GROW


def test_a_run_with_a_search_reads_its_limit_and_ladder_from_the_search():
    steps = [Step(index=i, load=float(n), held=h, state="held" if h else "over")
             for i, (n, h) in enumerate([(1, True), (2, True), (4, False), (3, True),
                                         (3, False)])]
    trials = [Trial(index=0, load=1, why="grow", held=True),
              Trial(index=1, load=2, why="grow", held=True),
              Trial(index=2, load=4, why="grow", held=False),
              Trial(index=3, load=3, why="aim", held=True),
              Trial(index=4, load=3, why="confirm", held=False)]
    run = Run(RunState(kind="ramp"), steps=steps, search=Search(trials=trials, limit=2, broke_at=3,
                                                      stopped="found"))
    # the confirmation at 3 broke: the ladder holds it for 3, and the answer is the search's
    assert [(s.load, s.held) for s in run.ladder()] == [(1, True), (2, True), (3, False),
                                                      (4, False)]
    assert run.held == 2
    back = Run.from_dict(run.to_dict())
    assert back.search is not None and back.search.limit == 2 and back.held == 2


def test_durations_read_as_a_person_says_them():
    assert [duration(x) for x in (0.5, 2, 45, 300, 850, 3720)] == [
        "0.5 s", "2 s", "45 s", "5 min", "14 min 10 s", "1 h 2 min"]


def test_a_seeded_noisy_queue_still_lands_within_one_user():
    rng = random.Random(7)
    for _ in range(30):
        slots = rng.choice([1, 2, 3, 5, 8])
        limit = rng.randint(slots, 6 * slots)
        limit_ms = limit_threshold(slots, limit)

        def noisy(i, n):
            st = queue_step(i, n, slots, limit_ms)
            c = st.checks[0]
            v = c.actual * (1 + rng.uniform(-0.03, 0.03))
            st.checks[0] = Check(threshold=c.threshold, ok=v <= c.limit, actual=v,
                                 limit=c.limit, metric="ttft", stat="mean", op="<=")
            st.held = v <= c.limit
            st.state = "held" if st.held else "over"
            return st
        p, plans = search(slots, limit_ms, step_fn=noisy)
        assert abs(p.limit - limit) <= 1, (slots, limit, [x.load for x in plans])
        assert len(plans) <= 2 * math.ceil(math.log2(max(limit, 2))) + 6


def test_a_floor_is_the_lightest_step_the_search_tries():
    # a scenario whose classes' min_users add up to 3: no step of fewer (it would run 3)
    p, plans = search(1, limit_threshold(1, 1), least=3, start=1)
    assert plans[0].load == 3 and min(pl.load for pl in plans) == 3
    assert p.stopped == "none_held" and p.limit == 0
    # from higher up, bisecting down stops at the floor, never below it
    p, plans = search(1, limit_threshold(1, 1), least=3, start=8)
    assert [pl.load for pl in plans] == [8, 4, 3] and p.stopped == "none_held"
    # a limit above the floor is found as without it
    p, plans = search(4, limit_threshold(4, 9), least=3, start=1)
    assert p.stopped == "found" and p.limit == 9 and min(pl.load for pl in plans) >= 3


def test_the_generators_lag_is_named_at_the_step_it_lagged_by_rate():
    # --find --by rate: 8 req/s broke (the server's), then 6 held, then llmbench lagged at 7:
    # the step to name is 7, the last tried, not 8, the least load that broke
    trials = [Trial(index=0, load=2, why="grow", held=True),
              Trial(index=1, load=4, why="grow", held=True),
              Trial(index=2, load=8, why="grow", held=False),
              Trial(index=3, load=6, why="aim", held=True),
              Trial(index=4, load=7, why="aim", held=False)]
    s = finish(Search(by="rate", trials=trials, limit=6, broke_at=8, stopped="load_generator",
                      resolution=0.05), [], None, "req/s")
    assert "could not hold 7 req/s" in (s.uncertain or ""), s.uncertain


def test_find_states_no_fractional_crossing_between_adjacent_users():
    # 1 held, 2 broke: a knee "1.83 to 2.00 users" says nothing the bracket does not
    from llmbench.results.schema import Knee
    k = Knee(between=[1.0, 2.0], estimate=1.9, ci=[1.83, 2.0], users=1, users_ci=[1, 1],
             threshold="ttft.p95<=2s")
    s = finish(Search(limit=1, broke_at=2, stopped="found"), [], k, "users")
    assert s.interval is None
    # with whole users between the limit and the break: the interval in whole users
    k = Knee(between=[2.0, 8.0], estimate=5.4, ci=[4.8, 6.1], users=5, users_ci=[4, 6],
             threshold="ttft.p95<=2s")
    s = finish(Search(limit=2, broke_at=8, stopped="found"), [], k, "users")
    assert s.interval == [4.0, 6.0]


def test_the_generators_lag_names_who_had_the_cpu_as_the_verdict_does():
    # a starved --find: the step the search stopped at lagged while llmbench used 2% of a
    # core: other processes had the CPU (the verdict's words), not "its own lag"
    trials = [Trial(index=0, load=1, why="grow", held=True),
              Trial(index=1, load=2, why="grow", held=False)]

    def step(cpu_pct):
        return Step.from_dict({"index": 1, "load": 2, "held": False, "state": "over",
                               "monitor": {"overloaded": True, "lag_p99_ms": 40.0,
                                           "cpu_pct": cpu_pct}, "summary": {"requests": 9}})
    for cpu, words in ((2.0, "other processes had the CPU, so its lag broke that step"),
                       (97.0, "its own lag broke that step")):
        s = finish(Search(by="users", trials=trials, limit=1, broke_at=None,
                          stopped="load_generator"), [step(cpu)], None, "users")
        assert f"could not hold 2 users ({words})" in (s.uncertain or ""), s.uncertain


def test_the_first_climb_is_bolder_x4_from_the_start_then_doubling():
    # from one user (the default start) to 4, then 8, 16 ...; from a start of 3, to 12, 24
    p, plans = search(1000, 1e9, ceiling=64)
    assert [pl.load for pl in plans if pl.why == GROW] == [1, 4, 8, 16, 32, 64]
    p, plans = search(1000, 1e9, ceiling=64, start=3)
    assert [pl.load for pl in plans if pl.why == GROW] == [3, 12, 24, 48, 64]
    # and a rate still doubles from its start
    p = SearchPacer(by="rate", start=1.0, hold_s=2, ramp_in_s=1)
    assert p._grow(1.0).load == 2.0


def _windowed(st: Step, hold_s: float) -> Step:
    """The step as the engine judges it: its hold window ``hold_s`` long."""
    st.hold_start, st.hold_end = 100.0, 100.0 + hold_s
    return st


def test_a_limit_whose_own_step_just_held_the_sustain_is_not_measured_again():
    # 4 slots, paper limit 6: growth 1, 4, 8 (broke), then the aim lands on 6, which holds its
    # whole 2 s hold (the sustain, one more hold), and 7 breaks: the bracket 6..7 closes on a
    # limit whose verdict is known from a whole window, so no confirmation re-measures it
    lim = limit_threshold(4, 6)
    p, plans = search(4, lim, step_fn=lambda i, n: _windowed(queue_step(i, n, 4, lim), 2.0))
    assert p.stopped == "found" and p.confirmed is True and p.limit == 6
    assert CONFIRM not in [pl.why for pl in plans]
    assert [(t.load, t.held) for t in p.trials] == [(1, True), (4, True), (8, False),
                                                    (6, True), (7, False)]
    assert "not held again" in (p.trials[3].note or "")
    s = finish(_result(p), [], None, "users")
    assert "; its step held its whole 2 s, the sustain, so it was not held again to " \
           "confirm it. Found in 5 steps, " in s.text, s.text
    assert "to confirm)" not in s.text and s.stopped == "found"


@pytest.mark.parametrize("case", ["window short of the sustain", "longer sustain"])
def test_the_limit_is_confirmed_when_its_own_step_did_not_hold_the_sustain(case):
    lim = limit_threshold(4, 6)
    hold = 1.5 if case == "window short of the sustain" else 2.0   # ended early: held
    sustain = 30.0 if case == "longer sustain" else None

    def step(i, n):
        st = _windowed(queue_step(i, n, 4, lim), hold)
        return st
    kw = {"sustain_s": sustain} if sustain else {}
    p, plans = search(4, lim, step_fn=step, **kw)
    assert plans[-1].why == CONFIRM and plans[-1].load == 6
    assert plans[-1].hold_s == (sustain or 2)
    assert p.stopped == "found" and p.limit == 6


def test_after_a_failed_confirmation_every_limit_is_confirmed_again():
    # 6 held beyond doubt before its hold was out (so it is confirmed), but broke its sustain:
    # the limit found below it (5) is held again although its own step held a whole hold
    lim = limit_threshold(4, 6)
    p = SearchPacer(by="users", hold_s=2, ramp_in_s=1, aim=lambda a, b: stepstats.aim(a, b, True))
    plan, i, plans = p.first(), 0, []
    while plan is not None:
        plans.append(plan)
        early = plan.load == 6 and plan.why != CONFIRM
        st = _windowed(queue_step(i, int(plan.load), 4, lim), 1.5 if early else 2.0)
        if plan.why == CONFIRM and plan.load == 6:
            st.held, st.state = False, "over"
        plan = p.after(st, i * 3.0)
        i += 1
    assert p.limit == 5 and p.confirmed is True and p.confirm_failures == 1
    assert plans[-1].why == CONFIRM and plans[-1].load == 5
