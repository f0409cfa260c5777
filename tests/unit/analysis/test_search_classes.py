"""A search over traffic classes (``ramp --find --scenario``), its answer on paper
(analysis.classes.search_blame): the class that broke at the least load that broke is blamed,
with why and what the others did there, and each class's users at the limit and there."""

from __future__ import annotations

from llmbench.analysis.classes import search_blame
from llmbench.analysis.findlimit import finish
from llmbench.results.schema import Check, ClassStep, Step
from llmbench.results.search import Search, Trial


def _check(name: str, ok: bool, actual: float) -> Check:
    return Check(threshold="ttft.p95<=600ms", ok=ok, actual=actual, limit=600.0,
                 metric="ttft", stat="p95", traffic_class=name,
                 text=f"{name}: ttft.p95<=600ms: {actual:g} ms")


def _step(index: int, load: int, parts: dict[str, tuple[int, str, float]]) -> Step:
    classes = {n: ClassStep(load=u, held=state == "held", state=state,
                            checks=[_check(n, state == "held", v)])
               for n, (u, state, v) in parts.items()}
    state = "over" if any(c.state == "over" for c in classes.values()) else "held"
    return Step(index=index, load=load, held=state == "held", state=state,
                checks=[c for p in classes.values() for c in p.checks], classes=classes)


def _search(trials: list[tuple[int, str, str]], limit: float, broke_at: float | None) -> Search:
    return Search(trials=[Trial(index=i, load=load, why=why, state=state,
                                held=state == "held") for i, (load, why, state)
                          in enumerate(trials)],
                  limit=limit, broke_at=broke_at, confirmed=True, stopped="found",
                  sustain_s=2.0, hold_s=2.0, elapsed_s=30.0)


def test_the_class_that_broke_at_the_least_load_that_broke_is_blamed():
    # 8 broke on both classes; 5 broke on rag only; 4 held: rag broke first as the crowd grew
    ladder = [_step(0, 2, {"chat": (1, "held", 100), "rag": (1, "held", 200)}),
              _step(1, 4, {"chat": (3, "held", 300), "rag": (1, "held", 500)}),
              _step(3, 5, {"chat": (3, "held", 350), "rag": (2, "over", 900)}),
              _step(2, 8, {"chat": (6, "over", 700), "rag": (2, "over", 1500)})]
    s = _search([(2, "grow", "held"), (4, "grow", "held"), (8, "grow", "over"),
                 (5, "bisect", "over"), (4, "confirm", "held")], 4.0, 5.0)
    s = finish(s, ladder, None, "users")
    out, text = search_blame(s, ladder, "users")
    assert out.blamed == ["rag"]
    assert out.broke_because == "in rag, TTFT p95 was 900 ms, over 600 ms; chat held"
    assert text == out.text
    assert text.startswith("Holds 4 users (5 broke: in rag, TTFT p95 was 900 ms, over 600 ms; "
                           "chat held); confirmed for 2 s.")
    assert text.endswith("At 4 users: chat 3, rag 1; at 5: chat 3, rag 2.")


def test_several_classes_broke_there_and_none_held():
    ladder = [_step(0, 1, {"chat": (1, "held", 100)}),
              _step(1, 2, {"chat": (1, "over", 700), "rag": (1, "over", 800)})]
    s = finish(_search([(1, "grow", "held"), (2, "grow", "over"), (1, "confirm", "held")],
                       1.0, 2.0), ladder, None, "users")
    out, text = search_blame(s, ladder, "users")
    assert out.blamed == ["chat", "rag"]
    assert "(2 broke: in chat, TTFT p95 was 700 ms, over 600 ms; in rag, TTFT p95 was 800 ms" \
        in text
    assert text.endswith("At 1 user: chat 1; at 2: chat 1, rag 1.")


def test_a_search_with_nothing_broken_blames_no_class():
    ladder = [_step(0, 2, {"chat": (1, "held", 100), "rag": (1, "held", 100)})]
    s = _search([(2, "grow", "held")], 2.0, None)
    s.stopped = "ceiling"
    s = finish(s, ladder, None, "users")
    out, text = search_blame(s, ladder, "users")
    assert out.blamed == [] and "broke" not in text
    assert text.endswith("At 2 users: chat 1, rag 1.")
