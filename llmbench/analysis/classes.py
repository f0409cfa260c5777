"""Traffic classes (``--scenario``): each class judged by its own thresholds on its own requests,
the verdict that names the class that broke, and the blame that ``--isolate`` measures.

Pure, from records (each carries its class, ``Record.traffic_class``) and the steps. A step
held only when every class that had load in it held; it broke (``over``) when any class broke.
A class's own verdict is the ramp's verdict (llmbench/analysis/verdict.py) read on that class's
requests alone, so "queuing" or "saturation" is about the class that broke, not diluted by the
others.

Blame (``isolation``): each class was run alone at the load it had in the first step that
broke. A class that breaks even alone is a cause (its own requests are the limit at that load);
one that broke only with the others present is a victim, and what the others added is its
statistic mixed minus alone. No class breaking alone means it is their sum.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Mapping, Sequence

from llmbench.analysis import verdict as verdict_mod
from llmbench.analysis.slo import parse_threshold
from llmbench.analysis.verdict import NAMES, _fmt_ms, _num, amount, describe_check
from llmbench.load.shapes.classes import ClassLoad, Isolated
from llmbench.load.shapes.ramp import StepWindow
from llmbench.records.record import Record
from llmbench.records.store import RecordStore
from llmbench.results.search import Search
from llmbench.results.schema import (HELD, NO_DATA, OVER, Check, ClassStep, ClassVerdict,
                                     Compared, IsolatedClass, Isolation, Knee, Step, Verdict,
                                     deciding_step, last_held)

Judge = Callable[[StepWindow], Step]


def class_records(records: Sequence[Record] | RecordStore, name: str) -> Any:
    """The records of one class (a store's are selected on its columns)."""
    if isinstance(records, RecordStore):
        import numpy as np
        i = records.str_id(name)
        if i < 0:
            return RecordStore()
        return records.select(records.col("traffic_class") == np.uint16(i))
    return [r for r in records if r.traffic_class == name]


def _tag(c: Check, name: str) -> Check:
    return replace(c, traffic_class=name, text=f"{name}: {c.text or c.threshold}")


def _class_step(st: Step, load: ClassLoad, name: str) -> ClassStep:
    return ClassStep(load=load.amount, unit=load.unit, held=st.held, state=st.state,
                     checks=[_tag(c, name) for c in st.checks], unfinished=st.unfinished,
                     steady=st.steady, summary=st.summary)


def combined_state(states: Sequence[str]) -> str:
    """A step's state from its classes': over when any broke, else not enough data when any
    lacked it, else held."""
    if OVER in states:
        return OVER
    if NO_DATA in states:
        return NO_DATA
    return HELD


def judge(whole: Judge, per_class: Mapping[str, Judge],
          loads: Callable[[int], Mapping[str, ClassLoad]]) -> Judge:
    """The ramp's judge for a scenario: ``whole`` (the ramp's judge with no thresholds of its
    own: the step's summary, outages, monitor, steady state) on every record, then each class's
    judge (its thresholds) on its own records at its load. A class with no load at a step (a
    share that rounds to 0 users) is not judged there."""
    def judge_step(w: StepWindow) -> Step:
        step = whole(w)
        at = loads(w.index)
        parts: dict[str, ClassStep] = {}
        for name, j in per_class.items():
            load = at.get(name)
            if load is None or load.idle:
                continue
            got = j(replace(w, load=load.amount, records=class_records(w.records, name)))
            parts[name] = _class_step(got, load, name)
        own = [c for c in step.checks if c.outage]          # the server was not there
        checks = own + [c for p in parts.values() for c in p.checks]
        states = [p.state for p in parts.values()] + ([OVER] if own else [])
        if not parts:
            states.append(step.state)
        state = combined_state(states)
        return replace(step, checks=checks, state=state, held=state == HELD, classes=parts)
    return judge_step


def isolation_judge(per_class: Mapping[str, Judge]) -> Callable[[Isolated], IsolatedClass]:
    """Judges a class run alone (load.shapes.classes: ClassRamp's --isolate)."""
    def judge_alone(x: Isolated) -> IsolatedClass:
        w = x.window
        st = per_class[x.name](replace(w, load=x.load.amount,
                                       records=class_records(w.records, x.name)))
        return IsolatedClass(name=x.name, load=x.load.amount, unit=x.load.unit, step=w.index,
                             ramp_start=w.ramp_start, hold_start=w.hold_start,
                             hold_end=w.hold_end, held=st.held, state=st.state,
                             checks=[_tag(c, x.name) for c in st.checks], summary=st.summary)
    return judge_alone


# -- the verdict ---------------------------------------------------------------------------------
def class_steps(steps: Sequence[Step], name: str) -> list[Step]:
    """One class's view of the ramp: a Step per step it had load in."""
    return [s.classes[name].as_step(s) for s in steps if name in s.classes]


def _loads_text(step: Step, unit: str) -> str:
    """'chat 4, rag 2' (each class's own load at the step)."""
    return ", ".join(f"{n} {c.load:g}" + ("" if c.unit == unit or unit != "users" else
                                          f" {c.unit}")
                     for n, c in step.classes.items())


def result_line(steps: Sequence[Step], unit: str, planned: int | None) -> str:
    """'Held 6 users (chat 4, rag 2). At 8 users (chat 6, rag 2), rag broke: TTFT p95 was 2.55
    s, over 2 s; chat held.'"""
    base = verdict_mod.result_line(steps, unit, planned)
    broke = deciding_step(steps)
    top = last_held(steps)
    head = base.split(". ", 1)[0].rstrip(".") + (f" ({_loads_text(top, unit)})"
                                                 if top is not None and top.classes else "")
    if broke is None or not broke.classes:
        rest = base.split(". ", 1)[1] if ". " in base else ""
        return f"{head}. {rest}".strip()
    parts = _class_parts(broke, lambda name, c: f"{name} broke: " + "; ".join(
        describe_check(x, c.summary.failed) for x in c.failed_checks[:2]))
    return (f"{head}. At {amount(broke.load, unit)} ({_loads_text(broke, unit)}), "
            + "; ".join(parts) + ".")


def _class_parts(broke: Step, said: Callable[[str, ClassStep], str | None]) -> list[str]:
    """What each class did in a step that broke, in the order a verdict says it: an outage
    first, then each class that broke (``said``: its words, None for nothing to say), those
    with too few requests, and those that held."""
    parts = [text for name, c in broke.classes.items() if c.state == OVER
             for text in [said(name, c)] if text]
    parts += [f"{n} had too few requests to judge" for n, c in broke.classes.items()
              if c.state == NO_DATA]
    held = [n for n, c in broke.classes.items() if c.state == HELD]
    if held:
        parts.append(f"{' and '.join(held)} held")
    down = [x for x in broke.checks if x.outage]
    if down:
        parts.insert(0, down[0].reason or "the server was down")
    return parts


def _class_verdicts(steps: list[Step], records: Sequence[Record] | RecordStore, unit: str,
                    server_samples: Sequence[dict[str, Any]], planned: int | None,
                    names: list[str]) -> tuple[dict[str, ClassVerdict], dict[str, Verdict]]:
    """Each class's own reading of the ramp (its verdict on its own requests), and what it did
    at the deciding step."""
    broke, top = deciding_step(steps), last_held(steps)
    per: dict[str, ClassVerdict] = {}
    readings: dict[str, Verdict] = {}
    for name in names:
        v = verdict_mod.explain(class_steps(steps, name), class_records(records, name), unit,
                                server_samples, planned, scope=name)
        readings[name] = v
        cs = broke.classes.get(name) if broke is not None else None
        broke_it = cs is not None and cs.state == OVER
        if broke_it:
            assert cs is not None and broke is not None
            text = (f"broke at {amount(broke.load, unit)} (its {amount(cs.load, cs.unit)}): "
                    + "; ".join(describe_check(x, cs.summary.failed) for x in cs.failed_checks[:2]))
        elif cs is not None and cs.state == NO_DATA:
            text = f"too few requests to judge at {amount(broke.load, unit)}"  # type: ignore
        elif cs is not None:
            text = f"held at {amount(broke.load, unit)} (its {amount(cs.load, cs.unit)})"  # type: ignore
        else:
            text = "held at every step" if all(
                s.classes[name].held for s in steps if name in s.classes) else v.text
        mine = top.classes.get(name) if top is not None else None
        per[name] = ClassVerdict(kind=v.kind, text=text, broke=broke_it,
                                 held_load=mine.load if mine is not None else None,
                                 unit=mine.unit if mine is not None else "users",
                                 evidence=list(v.evidence))
    return per, readings


def explain(steps: Sequence[Step], records: Sequence[Record] | RecordStore, unit: str = "users",
            server_samples: Sequence[dict[str, Any]] = (), planned: int | None = None,
            telemetry: Any = None, isolation: Isolation | None = None,
            circumstances: verdict_mod.Circumstances | None = None,
            server_kind: str | None = None, knee: Knee | None = None) -> Verdict:
    """The verdict of a scenario's ramp: the reading of the class that broke the deciding step
    (its kind, evidence, advice and knee, from its own requests; the cause ``isolation`` found
    first), a headline naming each class, and every class's own verdict. With --isolate's
    ``isolation``, its sentences are evidence and its blame is the verdict's."""
    steps = list(steps)
    c = circumstances or verdict_mod.Circumstances(planned=planned)
    whole = verdict_mod.explain(steps, records, unit, server_samples, telemetry=telemetry,
                                circumstances=c, server_kind=server_kind,
                                base=result_line(steps, unit, c.planned), knee=knee)
    names = list(dict.fromkeys(n for s in steps for n in s.classes))
    if not names:
        return whole
    broke = deciding_step(steps)
    per, readings = _class_verdicts(steps, records, unit, server_samples, c.planned, names)
    blamed = [n for n, cv in per.items() if cv.broke]
    measured = isolation is not None and bool(isolation.classes)
    out, advice = whole, list(whole.advice)
    if blamed and not (broke is not None and any(x.outage for x in broke.checks)):
        # a class that broke speaks for the step (its own trend and the server's view): the
        # cause --isolate found when there is one, else the first
        lead_name = next((n for n in (isolation.cause if isolation else ()) if n in blamed),
                         blamed[0])
        lead = readings[lead_name]
        rest = [n for n in blamed if n != lead_name]
        also = ([f"Also broke at this step: {', '.join(rest)} (each class's own reading is in "
                 "its verdict)."] if rest else [])
        # the class's own threshold crossed, on the whole crowd's axis: say whose
        knee = (replace(lead.knee, text=f"{lead_name}: {lead.knee.text}")
                if lead.knee is not None and lead.knee.text else lead.knee)
        out = replace(lead, evidence=[f"{lead_name}: {e}" for e in lead.evidence] + also,
                      knee=knee, text=whole.text, interrupted=whole.interrupted,
                      incomplete=whole.incomplete)
        after, keep = verdict_mod.aftermath(c)
        out.evidence += after
        advice = list(lead.advice) + keep
        if broke is not None and len(broke.classes) > 1 and not measured:
            others = [n for n in broke.classes if n not in blamed]
            advice.append(
                "Which class is the cause is measured, not guessed, with --isolate: each class "
                "runs alone at its load of this step" + (
                    f" (is {blamed[0]} slow on its own, or because of {', '.join(others)}?)"
                    if others else "") + ".")
    iso_lines: list[str] = []
    if isolation is not None:
        iso_lines = list(isolation.text) if measured else (
            [f"--isolate: {isolation.note}."] if isolation.note else [])
    return replace(out, classes=per, advice=advice, evidence=list(out.evidence) + iso_lines,
                   blamed=list(isolation.cause) if measured and isolation else blamed)


def search_blame(search: Search, ladder: Sequence[Step], unit: str = "users"
                 ) -> tuple[Search, str]:
    """A search over a scenario (``ramp --find --scenario``): the classes that broke at the
    least load that broke (``blamed``: the first to break as the crowd grew), why, and the
    answer's text with each class's load at the limit and there ("... At 4 users: chat 2,
    long 2; at 5: chat 3, long 2.")."""
    from llmbench.analysis.findlimit import finish_text
    by_load = {float(s.load): s for s in ladder}
    broke = by_load.get(float(search.broke_at)) if search.broke_at is not None else None
    top = by_load.get(float(search.limit)) if search.limit else None
    out = replace(search)
    if broke is not None and broke.classes:
        out.blamed = [n for n, c in broke.classes.items() if c.state == OVER]
        parts = _class_parts(broke, lambda n, c: f"in {n}, " + describe_check(
            c.failed_checks[0], c.summary.failed) if c.failed_checks else None)
        if parts:
            out.broke_because = "; ".join(parts)
    out = finish_text(out, unit, ladder)
    loads = []
    if top is not None and top.classes:
        loads.append(f"At {amount(top.load, unit)}: {_loads_text(top, unit)}")
    if broke is not None and broke.classes:
        loads.append(f"at {broke.load:g}: {_loads_text(broke, unit)}" if loads else
                     f"At {amount(broke.load, unit)}: {_loads_text(broke, unit)}")
    text = out.text + (f" {'; '.join(loads)}." if loads else "")
    out.text = text
    return out, text


# -- blame: each class alone -----------------------------------------------------------------
def _stat_of(c: Check) -> tuple[str | None, str | None]:
    try:
        t = parse_threshold(c.threshold)
    except ValueError:
        return c.metric, c.stat
    return t.metric, t.stat


def _name(metric: str | None, stat: str | None) -> str:
    base = NAMES.get(metric or "", metric or "?")
    if stat is None:
        return base
    return f"{base} {stat.removesuffix('_all')}" + (" incl. failures"
                                                    if stat.endswith("_all") else "")


def _value_text(metric: str | None, stat: str | None, v: float | None) -> str:
    if v is None:
        return "–"
    if stat is not None and stat != "within":
        return _fmt_ms(v)
    if metric in ("error_rate", "completed_share", "cancel_rate") or stat == "within":
        return f"{v * 100:.1f}%"
    return f"{v:g}"


def isolation(steps: Sequence[Step], alone: Sequence[IsolatedClass], unit: str = "users",
              note: str | None = None) -> Isolation:
    """What running each class alone says about the first step that broke (see the module's
    docstring); ``alone``: the isolated classes as their judge made them."""
    broke = deciding_step(steps)
    if broke is None or broke.state != OVER or not alone:
        return Isolation(note=note or "no step broke, so no class was run alone")
    out = Isolation(of_step=broke.index, load=broke.load)
    for a in alone:
        mixed = broke.classes.get(a.name)
        a = replace(a, broke_mixed=mixed is not None and mixed.state == OVER)
        if mixed is not None:
            by_threshold = {c.threshold: c for c in a.checks}
            for mc in mixed.checks:
                if mc.outage or mc.metric == "requests":
                    continue
                ac = by_threshold.get(mc.threshold)
                metric, stat = _stat_of(mc)
                m_v, a_v = _num(mc.actual), _num(ac.actual) if ac is not None else None
                a.compared.append(Compared(
                    threshold=mc.threshold, metric=metric, stat=stat, mixed=m_v, alone=a_v,
                    added=(m_v - a_v) if m_v is not None and a_v is not None
                    and m_v != float("inf") and a_v != float("inf") else None,
                    limit=_num(mc.limit), ok_mixed=mc.ok, ok_alone=ac.ok if ac else None))
        out.classes.append(a)
    out.cause = [a.name for a in out.classes if a.state == OVER]
    for a in out.classes:
        # a class that broke only with the others is said to be broken by those that break
        # alone; when none does, by no one class (the conclusion: it is their sum)
        a.text = _alone_sentence(a, [x.name for x in alone if x.name != a.name],
                                 [c for c in out.cause if c != a.name])
    out.victims = [a.name for a in out.classes if a.broke_mixed and a.state == HELD]
    out.text = [a.text for a in out.classes]
    out.text.append(_conclusion(out, broke, unit))
    return out


def _main_compared(a: IsolatedClass) -> Compared | None:
    """The statistic a sentence quotes: the first threshold that broke in the mixed step, else
    the first that was compared."""
    return next((c for c in a.compared if c.ok_mixed is False), None) or \
        next(iter(a.compared), None)


def _alone_sentence(a: IsolatedClass, others: list[str], causes: list[str]) -> str:
    who = ", ".join(others) if others else "the other classes"
    load = amount(a.load, a.unit)
    c = _main_compared(a)
    if c is None:
        return f"{a.name} alone at {load}: {a.state}."
    what = _name(c.metric, c.stat)
    mv, av = _value_text(c.metric, c.stat, c.mixed), _value_text(c.metric, c.stat, c.alone)
    added = ""
    if c.added is not None and c.stat not in (None, "within"):
        added = f"; the others added {_fmt_ms(c.added)}" if c.added > 0 else \
            "; the others added nothing to it"
    if a.state == OVER:
        return (f"{a.name} alone at the same load ({load}) still broke: {what} {av} (with "
                f"{who}: {mv}){added}. Its own requests are the limit at that load.")
    if a.state == NO_DATA:
        return (f"{a.name} alone at {load} had too few requests to judge ({what} with {who}: "
                f"{mv}, alone: {av}).")
    if a.broke_mixed:
        blame = f"{', '.join(causes)} caused it" if causes else \
            "it broke only from the load of all the classes together"
        return (f"With {who} present, {a.name}'s {what} was {mv}; alone at the same load "
                f"({load}) it is {av} and holds{added}: {blame}.")
    return (f"{a.name} held with {who} ({what} {mv}) and alone at {load} ({av}).")


def _conclusion(iso: Isolation, broke: Step, unit: str) -> str:
    if iso.cause and iso.victims:
        return (f"The cause is {', '.join(iso.cause)}: it breaks even alone at the load it "
                f"had at {amount(broke.load, unit)}, and {', '.join(iso.victims)} holds alone; "
                f"{', '.join(iso.victims)} broke only because {', '.join(iso.cause)} shared "
                "the server.")
    if iso.cause:
        return (f"The cause is {', '.join(iso.cause)}: it breaks even alone at the load it "
                f"had at {amount(broke.load, unit)}.")
    if iso.victims:
        return (f"No class breaks alone at the load it had at {amount(broke.load, unit)}: "
                f"{', '.join(iso.victims)} broke only with the others present, so it is their "
                "sum that the server cannot carry.")
    return "Every class held alone and, judged alone, none broke the step."
