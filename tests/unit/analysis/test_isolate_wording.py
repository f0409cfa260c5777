"""--isolate's sentences (analysis.classes): a class that broke only with the others present is
blamed on the classes that break alone, and on no one class when none does (then the
conclusion says it is their sum); the two never contradict each other."""

from __future__ import annotations

from llmbench.analysis.classes import _alone_sentence
from llmbench.results.schema import HELD, Compared, IsolatedClass


def _victim() -> IsolatedClass:
    return IsolatedClass(name="chat", load=2, state=HELD, held=True, broke_mixed=True,
                         compared=[Compared(threshold="ttft.p95<=500ms", metric="ttft",
                                            stat="p95", mixed=706.0, alone=101.0, added=605.0,
                                            limit=500.0, ok_mixed=False, ok_alone=True)])


def test_a_class_that_breaks_alone_is_named_as_the_cause():
    text = _alone_sentence(_victim(), ["rag"], ["rag"])
    assert text.endswith("holds; the others added 605 ms: rag caused it."), text


def test_when_no_class_breaks_alone_none_is_named_as_the_cause():
    text = _alone_sentence(_victim(), ["rag"], [])
    assert "caused it" not in text, text
    # not one of the others either: the conclusion says it is their sum, and this agrees
    assert text.endswith("it broke only from the load of all the classes together."), text
    assert "sharing the server with rag" not in text
