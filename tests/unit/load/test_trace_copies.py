"""ramp --trace's step: the recording k times over (load/shapes/trace.copies_of)."""

from llmbench.load.shapes.trace import copies_of
from llmbench.workload.model import Conversation, Turn
from llmbench.workload.traces import TraceItem


def item(cid: str, *due: float) -> TraceItem:
    turns = tuple(Turn(f"ask {cid} {k}", 8) for k in range(len(due)))
    return TraceItem(Conversation(cid, turns, system="shared system prompt"), tuple(due))


def test_each_copy_is_its_own_sessions_on_a_lap_of_its_own_in_arrival_order():
    rec = [item("s1", 0.0, 0.3), item("s2", 0.1)]
    got = copies_of(rec, 3, first_lap=4)
    assert [i.conv.id for i in got] == ["s1~4", "s1~5", "s1~6", "s2~4", "s2~5", "s2~6"]
    # a lap is a salt (Salt.for_lap): copies differ from each other and from earlier steps'
    assert [i.conv.lap for i in got] == [4, 5, 6, 4, 5, 6]
    # the recording's own text and times are kept: within a copy, what it shared stays shared
    assert {i.conv.system for i in got} == {"shared system prompt"}
    assert [i.due_s for i in got if i.conv.id.startswith("s1")] == [(0.0, 0.3)] * 3
    assert copies_of(rec, 0, 0) == []
