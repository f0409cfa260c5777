"""A ramp's judgement in one call: its verdict (the rules over one evidence, a scenario's
classes and --isolate's blame included) and --find's finished answer, from the steps, the
records and what happened to the ramp. Nothing edits the verdict after this returns.
"""

from __future__ import annotations

from typing import Any, Sequence

from llmbench.analysis import classes as classes_mod
from llmbench.analysis import verdict as verdict_mod
from llmbench.analysis.findlimit import finish
from llmbench.analysis.rules.evidence import Circumstances
from llmbench.analysis.stepstats import knee
from llmbench.records.record import Record
from llmbench.results.network import NetworkFloor
from llmbench.results.schema import Isolation, Step, Verdict
from llmbench.results.search import Search


def judge_ramp(steps: Sequence[Step], records: Sequence[Record], unit: str,
               server_samples: Sequence[dict[str, Any]], *, planned: int | None,
               telemetry: dict[str, Any] | None = None, search: Search | None = None,
               interrupted: bool = False, lost: str | None = None, release: str | None = None,
               scenario: bool = False, isolation: Isolation | None = None,
               server_kind: str | None = None, going_on: bool = False,
               network: NetworkFloor | None = None
               ) -> tuple[Verdict, Search | None]:
    """The verdict and the finished search (None without --find). ``planned``: the steps a
    fixed ramp planned (None for a search); ``going_on``: the verdict so far of a ramp still
    running (each finished step's run.json, the dashboard's); the rest as ``Circumstances``."""
    steps = list(steps)
    kn = knee(steps, records, unit)
    if search is not None:
        search = finish(search, steps, kn, unit)
        if scenario:
            # which class broke the step above the limit, and the others' state there
            search, _ = classes_mod.search_blame(search, steps, unit)
    c = Circumstances(planned=planned, search=search, interrupted=interrupted, lost=lost,
                      release=release, going_on=going_on, network=network)
    if scenario:
        return classes_mod.explain(steps, records, unit, server_samples, telemetry=telemetry,
                                   isolation=isolation, circumstances=c,
                                   server_kind=server_kind, knee=kn), search
    return verdict_mod.explain(steps, records, unit, server_samples, telemetry=telemetry,
                               circumstances=c, server_kind=server_kind, knee=kn), search
