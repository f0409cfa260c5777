"""What a search for the limit (``ramp --find``) says: the answer sentence, why the next load
broke, the interval, and what is left uncertain, from its trials and steps. Pure.

"Holds 11 users (12 broke: TTFT p95 was 2.40 s, over 2 s); confirmed for 5 min. Found in 8
steps (7 to search, 1 to confirm), 14 min 10 s."
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Sequence

from llmbench.analysis.verdict import amount, describe_check
from llmbench.results.schema import Knee, Step
from llmbench.results.search import Search


def duration(s: float) -> str:
    """'0.5 s', '45 s', '5 min', '14 min 10 s', '1 h 2 min'."""
    if s < 9.95:
        return f"{round(s, 1):g} s"                 # a short test's half-second ramp-in
    s = round(s)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        m, r = divmod(s, 60)
        return f"{m} min" + (f" {r} s" if r else "")
    h, r = divmod(s, 3600)
    return f"{h} h" + (f" {r // 60} min" if r // 60 else "")


def _load(x: float, unit: str) -> str:
    return f"{x:g}" if unit == "users" else f"{x:g} {unit}"


def because(step: Step) -> str | None:
    """Why a step broke, shortly: 'TTFT p95 was 2.40 s, over 2 s' (the first failed check;
    an outage first)."""
    failed = sorted(step.failed_checks, key=lambda c: (not c.outage, bool(c.reason)))
    if not failed:
        return None
    return describe_check(failed[0], step.summary.failed)


def finish(search: Search, ladder: Sequence[Step], knee: Knee | None, unit: str) -> Search:
    """The search with its answer: ``broke_because``, ``bracket``, ``interval`` (the knee's,
    when it lies between the limit and the load that broke), ``uncertain`` and ``text``."""
    out = replace(search)
    lim, top = out.limit, out.broke_at
    by_load = {float(s.load): s for s in ladder}
    broke_step = by_load.get(float(top)) if top is not None else None
    out.broke_because = because(broke_step) if broke_step is not None else None
    out.bracket = [lim, top] if top is not None else None
    whole = unit != "users" or (top is not None and math.ceil(top) - 1 > lim)
    if (knee is not None and knee.ci and knee.estimate is not None and knee.between
            and top is not None and knee.between == [lim, float(top)] and whole):
        # users come whole: between adjacent counts (1 held, 2 broke) a fractional crossing
        # says nothing the bracket does not; else the interval in whole users
        out.interval = ([float(x) for x in knee.users_ci] if unit == "users" and knee.users_ci
                        else [float(knee.ci[0]), float(knee.ci[1])])
        out.interval_method = (f"where {knee.threshold} is crossed, interpolated between "
                               f"{_load(lim, unit)} and {amount(top, unit)} from their "
                               "requests (95 % bootstrap interval)")
    return finish_text(out, unit, ladder)


def finish_text(search: Search, unit: str, steps: Sequence[Step] = ()) -> Search:
    """The search's ``uncertain`` and ``text`` from its fields (again, after a scenario's blame
    rewrote ``broke_because``: analysis.classes.search_blame); ``steps``: the ramp's, where
    the step the generator lagged at says who had the CPU."""
    out = replace(search)
    out.uncertain = _uncertain(out, unit, steps)
    out.text = _text(out, unit)
    return out


def _open(lim: float, top: float | None, unit: str, resolution: float) -> str | None:
    """The loads between the limit and the first that broke that were not tried."""
    if top is None:
        return None
    if unit == "users":
        a, b = int(lim) + 1, int(math.ceil(top)) - 1
        if b < a:
            return None
        return (f"{a} {'user' if a == 1 else 'users'}" if a == b
                else f"{a} to {b} users") + " not tried"
    if top <= lim * (1 + resolution) + 1e-12:
        return None
    return f"{lim:g} to {top:g} {unit} not narrowed to {resolution * 100:g} %"


def _lag_words(s: Search, steps: Sequence[Step]) -> str:
    """Who had the CPU when the generator lagged at the last step tried, as the verdict's
    rules decide it (``generator_cause``): a busy machine's other processes, or llmbench."""
    from llmbench.analysis.rules.words import generator_cause
    at = s.trials[-1].index if s.trials else None
    step = next((st for st in steps if st.index == at), None) if at is not None else None
    if step is not None and step.monitor and generator_cause(step.monitor) == "machine":
        return "other processes had the CPU, so its lag broke that step"
    return "its own lag broke that step"


def _uncertain(s: Search, unit: str, steps: Sequence[Step] = ()) -> str | None:
    lim, top = s.limit, s.broke_at
    gap = _open(lim, top, unit, s.resolution)
    sustain = duration(s.sustain_s)
    if s.stopped == "found":
        return None
    if s.stopped == "ceiling":
        return (f"every step held up to {amount(lim, unit)}, the most this search may ask "
                "(--up-to): the limit lies higher")
    if s.stopped == "none_held":
        return None
    if s.stopped == "load_generator":
        # the step it lagged at is the last tried (never a bound: the server did not break
        # it), not the least load that broke
        lagged = s.trials[-1].load if s.trials else (top or lim)
        return (f"the load generator could not hold {amount(lagged, unit)} "
                f"({_lag_words(s, steps)}): the server's limit is at least "
                f"{amount(lim, unit)}, not measured above")
    if s.stopped == "unconfirmed":
        return (f"each limit the search found broke when held for {sustain}: the server "
                "does not hold a steady load there (a longer --hold, or --repeat, tells more)")
    why = {"budget": f"the budget ({duration(s.budget_s or 0)}) ran out",
           "no_data": "a step had too few requests even when held longest",
           "max_steps": f"the search stopped after {s.steps_taken} steps",
           "interrupted": "the search was interrupted"}.get(s.stopped, s.stopped)
    if top is None:
        return f"{why} before any step broke: the limit lies above {amount(lim, unit)}"
    if gap is not None:
        return f"{why}: the limit lies between {amount(lim, unit)} and {amount(top, unit)} ({gap})"
    if s.confirmed is None:
        return f"{why} before the limit was held for {sustain} to confirm it"
    return why


def _text(s: Search, unit: str) -> str:
    lim, top = s.limit, s.broke_at
    n, confirm = s.steps_taken, n_confirm(s)
    took = (f"{n} step{'s' if n != 1 else ''} ({n - confirm} to search, {confirm} to confirm)"
            if confirm else f"{n} step{'s' if n != 1 else ''}") + f", {duration(s.elapsed_s)}"
    broke = ""
    if top is not None:
        broke = f" ({_load(top, unit)} broke" + (f": {s.broke_because}" if s.broke_because
                                                 else "") + ")"
    if s.stopped == "none_held":
        lightest = top if top is not None else s.start
        return (f"No load held: {amount(lightest, unit)} already broke"
                + (f" ({s.broke_because})" if s.broke_because else "")
                + f". Searched in {took}.")
    if s.stopped == "found":
        last = next((t for t in reversed(s.trials) if t.why == "confirm"), None)
        confirmed = f"confirmed for {duration(s.sustain_s)}"
        if last is not None and last.ended == "held":
            # its confirmation settled before the sustain was out (analysis.settle)
            confirmed = f"confirmed in {duration(last.hold_s)} (held beyond doubt at 95 %)"
        elif last is None and s.confirmed:
            # the limit's own step held a whole hold of the sustain or more (load.shapes.
            # search: its verdict known, it is not measured again)
            own = next((t for t in reversed(s.trials) if t.load == lim and t.held), None)
            held_s = own.hold_s if own is not None else s.sustain_s
            confirmed = (f"its step held its whole {duration(held_s)}, the sustain, so it "
                         "was not held again to confirm it")
        return f"Holds {amount(lim, unit)}{broke}; {confirmed}. Found in {took}."
    head = f"Holds {amount(lim, unit)}{broke}" if lim else (
        f"No load held yet{broke}" if top is not None else "No step finished")
    return f"{head}; {s.uncertain or s.stopped}. Searched in {took}."


def n_confirm(s: Search) -> int:
    return sum(1 for t in s.trials if t.why == "confirm")
