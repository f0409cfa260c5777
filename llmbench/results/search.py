"""The search for the limit (``ramp --find``) as the result contract holds it: ``Run.search``
(None for a ramp over fixed steps). The steps themselves are the run's ``steps``, in the order
they ran (``Trial.index`` is a step's index)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from llmbench.results.contract import Part, part

TrialWhy = Literal["grow", "aim", "bisect", "longer", "repeat", "confirm"]
# why a search ended (llmbench.load.shapes.search): the bracket closed and the limit held for
# the sustain; the budget; every step held up to the ceiling; not even the lightest load held;
# a narrowing step had too few requests; the load generator broke a step; the step cap; each
# limit found broke in its sustain; a signal (Ctrl-C)
# why a search's step ended its hold (llmbench.analysis.settle): its checks settled held beyond
# doubt, held so far (a step growing the load, checked again from above), broke beyond doubt,
# or not settled sooner (the full hold)
TrialEnd = Literal["held", "held_so_far", "broke", "full"]
Stopped = Literal["found", "budget", "ceiling", "none_held", "no_data", "load_generator",
                  "max_steps", "unconfirmed", "interrupted"]


@dataclass
class Trial(Part):
    """One step the search ran: ``index`` (the step in ``Run.steps``), its load, why it ran,
    how it was judged (``state``), whether the search counted it (a drifting step run again
    does not, nor one with too few requests passed over), its hold (longer holds included;
    shorter when its checks settled early: ``ended`` and ``ended_why`` say how)."""

    index: int | None = None
    load: float = 0.0
    why: TrialWhy = "grow"
    state: str | None = None
    held: bool | None = None
    counted: bool = True
    hold_s: float = 0.0
    note: str | None = part(None, omit="none")
    # None: a search that does not settle its steps, and folders written before it
    ended: TrialEnd | None = part(None, omit="none")
    ended_why: str | None = part(None, omit="none")


@dataclass
class Search(Part):
    """What ``ramp --find`` found and how.

    ``limit``: the most load that held (users are whole; 0 when none did); ``broke_at`` the
    least that broke, ``broke_because`` what broke there ("TTFT p95 was 2.40 s, over 2 s");
    ``bracket`` [limit, broke_at]. ``interval``: where the threshold is crossed between them
    (the knee's bootstrap interval, in load) or, over ``--repeat``, the repeats' limits
    (min-max); ``interval_method`` says which. ``confirmed``: the limit held for ``sustain_s``
    (None: not tried). ``stopped`` why the search ended; ``uncertain`` what it leaves open
    (None when the bracket closed and the limit held its sustain); ``text`` the answer as the
    console says it; ``blamed`` (``--scenario``) the classes that broke at ``broke_at``."""

    by: str = "users"
    start: float = 1.0
    factor: float = 2.0
    ceiling: float | None = None
    resolution: float = 1.0
    hold_s: float = 0.0
    sustain_s: float = 0.0
    budget_s: float | None = None
    trials: list[Trial] = field(default_factory=list)
    limit: float = 0.0
    broke_at: float | None = None
    broke_because: str | None = None
    bracket: list[float] | None = None
    interval: list[float] | None = None
    interval_method: str | None = None
    confirmed: bool | None = None
    stopped: Stopped = "found"
    uncertain: str | None = None
    elapsed_s: float = 0.0
    text: str = ""
    # the first to break as the crowd grew (each step's per-class figures: ``Step.classes``)
    blamed: list[str] = part(default_factory=list, omit="empty")

    @property
    def steps_taken(self) -> int:
        """Steps the search ran (each hold counted once; a step held longer is one step)."""
        return len(self.trials)

    @property
    def search_steps(self) -> int:
        """Steps before the confirmation hold."""
        return sum(1 for t in self.trials if t.why != "confirm")
