"""How a ramp step's load splits between traffic classes (load.shapes.classes.split): shares by
largest remainder adding up to the step, fixed users and rates kept, --grow moving one class."""

from __future__ import annotations

import pytest

from llmbench.load.shapes.classes import ClassLoad, LoadClass, apportion, split


def _classes(*specs):
    return [LoadClass(name, [], share=share, users=users, rate=rate)
            for name, share, users, rate in specs]


@pytest.mark.parametrize("total", [1, 2, 3, 7, 10, 99])
def test_shares_add_up_to_the_step(total):
    got = apportion(total, [("chat", 0.7), ("rag", 0.2), ("batch", 0.1)])
    assert sum(got.values()) == total
    assert all(abs(got[n] - s * total) < 1 for n, s in (("chat", 0.7), ("rag", 0.2),
                                                         ("batch", 0.1)))


def test_largest_remainder_then_larger_share():
    assert apportion(3, [("a", 0.5), ("b", 0.5)]) == {"a": 2, "b": 1}
    assert apportion(10, [("chat", 0.7), ("rag", 0.3)]) == {"chat": 7, "rag": 3}
    assert apportion(4, [("chat", 0.7), ("rag", 0.3)]) == {"chat": 3, "rag": 1}


def test_fixed_users_and_rates_stay_whatever_the_step():
    cls = _classes(("chat", 1.0, None, None), ("cron", None, 2, None),
                   ("hook", None, None, 0.5))
    for n in (2, 8):
        got = split(cls, n)
        assert got["chat"] == ClassLoad(users=n)
        assert got["cron"] == ClassLoad(users=2) and got["hook"] == ClassLoad(rate=0.5)


def test_a_rate_ramp_splits_the_rate():
    got = split(_classes(("chat", 0.75, None, None), ("rag", 0.25, None, None)), 4.0, by="rate")
    assert got == {"chat": ClassLoad(rate=3.0), "rag": ClassLoad(rate=1.0)}
    assert got["chat"].unit == "req/s"


def test_grow_moves_one_class_and_keeps_the_first_steps_others():
    cls = _classes(("chat", 0.5, None, None), ("rag", 0.5, None, None))
    at_first = split(cls, 4, grow="rag", first=4)
    later = split(cls, 10, grow="rag", first=4)
    assert at_first == {"chat": ClassLoad(users=2), "rag": ClassLoad(users=4)}
    assert later == {"chat": ClassLoad(users=2), "rag": ClassLoad(users=10)}


def test_the_mixed_crowd_answers_every_call_the_ramp_makes_of_a_crowd():
    # the ramp's engine (load/shapes/ramp.py) drives either crowd through the same calls; one
    # missing on the class crowd is an AttributeError mid-ramp (leaving() was, after --find)
    import inspect
    import re
    from llmbench.load.shapes import ramp
    from llmbench.load.shapes.classes import MixedCrowd
    # (drive and the helpers it hands the crowd to: _users_to, _hold)
    calls = set(re.findall(r"\bcrowd\.(\w+)", inspect.getsource(ramp.Ramp)))
    assert {"add_users", "leaving", "pending"} <= calls        # the scan reads the engine
    missing = {n for n in calls if not hasattr(MixedCrowd, n)}
    assert not missing, missing


def test_floors_give_every_class_its_minimum_and_the_shares_split_the_rest():
    shares = [("chat", 0.9), ("rag", 0.1)]
    # 0.1 x 5 rounds to 0 rag users; its floor of 1 takes one, chat gets the other 4
    assert apportion(5, shares) == {"chat": 5, "rag": 0}
    assert apportion(5, shares, {"rag": 1}) == {"chat": 4, "rag": 1}
    # above the floor, the shares as without it
    assert apportion(20, shares, {"rag": 1}) == {"chat": 18, "rag": 2}
    # several floors: each pinned class gets its floor, the others split what is left
    three = [("a", 0.8), ("b", 0.1), ("c", 0.1)]
    assert apportion(6, three, {"b": 2, "c": 1}) == {"a": 3, "b": 2, "c": 1}
    # below the floors' sum: the floors
    assert apportion(1, three, {"b": 2, "c": 1}) == {"a": 0, "b": 2, "c": 1}
    for total in range(3, 40):
        got = apportion(total, three, {"b": 2, "c": 1})
        assert sum(got.values()) == total and got["b"] >= 2 and got["c"] >= 1


def test_split_passes_a_share_class_floor():
    cls = [LoadClass("chat", [], share=0.9), LoadClass("rag", [], share=0.1, min_users=1)]
    assert split(cls, 3) == {"chat": ClassLoad(users=2), "rag": ClassLoad(users=1)}


def test_a_search_over_classes_records_each_step_it_issues():
    # the search's pacer issues loads one at a time; the class ramp records them, so each
    # step's split (what the crowd runs and the judge reads) is the step's total's
    from types import SimpleNamespace
    from llmbench.load.shapes.classes import ClassRamp
    from llmbench.load.shapes.search import SearchPacer
    ramp = ClassRamp([], [], ramp_in_s=0.1, hold_s=1.0,
                     classes=[LoadClass("a", [], share=0.5), LoadClass("b", [], share=0.5)])
    ramp.pacer = SearchPacer(start=2, ramp_in_s=0.1, hold_s=1.0, ceiling=64)
    pacer = ramp.pace()
    assert ramp.searching and pacer is not ramp.pacer
    plan = pacer.first()
    assert ramp.steps == [2.0] and ramp.loads(0) == {"a": ClassLoad(users=1),
                                                     "b": ClassLoad(users=1)}
    step = SimpleNamespace(index=0, load=2.0, held=True, state="held", drifting=False)
    plan = pacer.after(step, 1.2)
    # (the first climb from the start is x4)
    assert plan is not None and plan.load == 8.0 and ramp.steps == [2.0, 8.0]
    assert ramp.loads(1) == {"a": ClassLoad(users=4), "b": ClassLoad(users=4)}
    # the connections to keep: the most the search may ask, split
    assert ramp.max_in_flight() == 64 + 16
