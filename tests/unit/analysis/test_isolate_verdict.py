"""--isolate's blame is part of the verdict's evidence, said once (issue 44 §4, 45): when no
class breaks alone, the verdict does not also blame one ("it broke only from sharing the
server with rag" beside "it is their sum" beside "Blamed: chat" was the contradiction)."""

from __future__ import annotations

from llmbench.analysis import classes
from llmbench.report.console import verdict_text
from llmbench.results.schema import Check, ClassStep, IsolatedClass, Step, Summary


def _check(ok: bool, v: float, limit: float = 2000.0) -> Check:
    return Check(threshold=f"ttft.p95<={limit / 1000:g}s", ok=ok, actual=v, limit=limit,
                 metric="ttft", stat="p95", op="<=")


def _summary(ttft: float) -> Summary:
    s = Summary.from_dict({"requests": 20, "completed": 20, "failed": 0, "p95_ttft_ms": ttft,
                           "median_ttft_ms": ttft / 2, "median_itl_ms": 8.0,
                           "p95_itl_ms": 9.0})
    return s


def _step(i: int, load: float, chat: float, rag: float) -> Step:
    cs = {"chat": ClassStep(load=load * 2 / 3, held=chat <= 2000, state="held" if chat <= 2000
                            else "over", checks=[_check(chat <= 2000, chat)],
                            summary=_summary(chat)),
          "rag": ClassStep(load=load / 3, held=rag <= 4000, state="held" if rag <= 4000
                           else "over", checks=[_check(rag <= 4000, rag, 4000.0)],
                           summary=_summary(rag))}
    held = all(c.held for c in cs.values())
    return Step(index=i, load=load, held=held, state="held" if held else "over",
                hold_start=10.0 * i, hold_end=10.0 * i + 10, ramp_start=10.0 * i,
                checks=[c for x in cs.values() for c in x.checks],
                summary=_summary(max(chat, rag)), classes=cs)


def test_no_class_breaking_alone_is_their_sum_and_nobody_is_blamed():
    steps = [_step(0, 3, 600.0, 2500.0), _step(1, 6, 2600.0, 3500.0)]
    alone = [IsolatedClass(name="chat", load=4, held=True, state="held",
                           checks=[_check(True, 900.0)], summary=_summary(900.0)),
             IsolatedClass(name="rag", load=2, held=True, state="held",
                           checks=[_check(True, 3000.0, 4000.0)], summary=_summary(3000.0))]
    iso = classes.isolation(steps, alone, "users")
    assert iso.cause == [] and iso.victims == ["chat"]
    v = classes.explain(steps, [], "users", isolation=iso)
    text = verdict_text(v)
    assert v.blamed == [] and "Blamed:" not in text, text
    assert "their sum" in text and "sharing the server with rag" not in text, text
    assert "rag caused it" not in text and "--isolate: each class runs alone" not in text


def test_a_class_that_breaks_alone_is_the_one_cause():
    steps = [_step(0, 3, 600.0, 2500.0), _step(1, 6, 2600.0, 5000.0)]
    alone = [IsolatedClass(name="chat", load=4, held=True, state="held",
                           checks=[_check(True, 900.0)], summary=_summary(900.0)),
             IsolatedClass(name="rag", load=2, held=False, state="over",
                           checks=[_check(False, 4900.0, 4000.0)], summary=_summary(4900.0))]
    iso = classes.isolation(steps, alone, "users")
    v = classes.explain(steps, [], "users", isolation=iso)
    text = verdict_text(v)
    assert v.blamed == ["rag"] and text.count("Blamed: rag.") == 1, text
    assert "The cause is rag" in text and "rag caused it" in text
    # the reading that speaks for the step is the cause's own
    assert any(e.startswith("rag: ") for e in v.evidence), v.evidence
