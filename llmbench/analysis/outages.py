"""Server outages, from the records alone (pure): when the server refused or dropped every
connection before answering, from when to when, and how many attempts failed.

An outage starts at the first attempt that failed that way (``records.REFUSED_KINDS``) and
ends when an attempt started after it got through to the server (any answer, even an error
status); it is an outage only when at least MIN_ATTEMPTS failed in a row, so one reset in a
busy run stays an ordinary error. Its end is known to within the users' backoff (at most
``load.session.BACKOFF_MAX_S``): nobody tries while they wait. One still open when the run
ended has no end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from llmbench.records.record import REFUSED_KINDS, Record
from llmbench.records.store import RecordStore
from llmbench.results.schema import Check, OutageSpan

MIN_ATTEMPTS = 2


@dataclass(frozen=True)
class Outage:
    """One stretch the server refused every attempt: when it began and ended, how many tried."""
    start: float            # perf_counter: the first refused attempt's start
    end: float | None       # the first later attempt the server took; None: down to the end
    attempts: int           # attempts refused or dropped before any answer
    backoff_s: float        # what the users waited between those attempts, all together

    def overlaps(self, start: float, end: float) -> bool:
        return self.start < end and (self.end is None or self.end > start)

    def as_dict(self, t0: float, t_end: float | None = None) -> dict[str, Any]:
        """Times in seconds after ``t0`` (the run's start), as run.json and the console say."""
        end = self.end if self.end is not None else t_end
        return {"start_s": round(self.start - t0, 3),
                "end_s": None if self.end is None else round(self.end - t0, 3),
                "duration_s": None if end is None else round(end - self.start, 3),
                "ongoing_at_end": self.end is None, "attempts": self.attempts,
                "backoff_s": round(self.backoff_s, 3)}


def find(records: Sequence[Record] | RecordStore) -> list[Outage]:
    """Every outage in ``records`` (a run's store or any list), in time order."""
    st = RecordStore.of(records)
    n = len(st)
    if not n:
        return []
    kind = st.col("error_kind")
    keep = ~st.col("warmup")
    refused = np.zeros(n, dtype=bool)
    for k in REFUSED_KINDS:
        i = st.str_id(k)
        if i >= 0:
            refused |= kind == i
    if not (refused & keep).any():
        return []
    # measured (an interrupted request was stopped by llmbench: it says nothing) and answered
    through = st.measured_mask() & ~refused
    start = st.view("start")
    order = np.argsort(start[refused & keep], kind="stable")
    rows = np.nonzero(refused & keep)[0][order]
    r_start = start[rows]
    ok_start = np.sort(start[through])
    # each refused attempt belongs to the outage that the next attempt to get through ends
    nxt = np.searchsorted(ok_start, r_start, side="right")
    extras = st.extras()
    out = []
    for g in sorted(set(nxt.tolist())):     # not np.unique: it imports numpy.ma (start-up)
        members = rows[nxt == g]
        if len(members) < MIN_ATTEMPTS:
            continue
        waited = sum((extras.get(int(i)) or {}).get("backoff_ms") or 0.0 for i in members)
        out.append(Outage(float(start[members].min()),
                          float(ok_start[g]) if g < len(ok_start) else None,
                          int(len(members)), waited / 1000.0))
    return out


def sentence(o: Outage, t0: float, t_end: float | None = None, into: str = "") -> str:
    """"the server refused connections from 12.3 s to 15.4 s (3.1 s); 42 attempts failed".
    Times after ``t0``; ``into``: what they count from (" into the step"), the run's start when
    empty; ``t_end``: the run's end, for an outage still going on there."""
    d = o.as_dict(t0, t_end)
    if o.end is None:
        span = f"from {d['start_s']:.1f} s{into} to the end"
        span += f" ({d['duration_s']:.1f} s)" if d["duration_s"] is not None else ""
    else:
        span = f"from {d['start_s']:.1f} s to {d['end_s']:.1f} s{into} ({d['duration_s']:.1f} s)"
    return (f"the server refused connections {span}; {o.attempts} attempts failed "
            f"(users backed off between attempts, {o.backoff_s:.1f} s of waiting in all)")


def of_run(records: Sequence[Record] | RecordStore, t0: float) -> list[OutageSpan]:
    """run.json's "outages": each with its sentence, times after the run's start ``t0``."""
    st = RecordStore.of(records)
    t_end = float(st.col("done").max()) if len(st) else None
    return [OutageSpan(**o.as_dict(t0, t_end), text=sentence(o, t0, t_end)) for o in find(st)]


def step_check(records: Sequence[Record] | RecordStore, start: float, end: float
               ) -> Check | None:
    """A threshold-like check that fails a step in which the server was down (from ``start``,
    its ramp-in, to ``end``, its hold's end): that step's numbers are of a server that was not
    there, so it is over with the outage as the reason. None when there was none."""
    found = [o for o in find(records) if o.overlaps(start, end)]
    if not found:
        return None
    first = found[0]
    text = "; ".join(sentence(o, start, None, " into the step") for o in found)
    return Check(threshold="no outage", ok=False, metric="outage", stat=None,
                 actual=sum(o.attempts for o in found), limit=0, outage=True, reason=text,
                 text=f"outage: {text}", outages=[OutageSpan(**o.as_dict(start)) for o in found],
                 start_s=first.start - start)
