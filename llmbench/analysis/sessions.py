"""Agent sessions from records, a pure function of them (docs/agents.md, "Session metrics",
defines each figure).

Every request of an agent session carries its session's and step's ids (load.agent stamps
them), so ``sessions_of(records)`` gives the same sessions from a run in memory or from its
requests.jsonl (tests/unit/test_sessions.py checks them against a hand computation).

A ramp step's sessions (``step_sessions``) are those whose first call started in the step's
hold window, with all their calls, whenever those came: cutting a session at the window's end
would count only its start. The ramp's drain waits for them (load.shapes.ramp).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from llmbench.analysis import percentile as percentile_mod
from llmbench.analysis.percentile import percentile
from llmbench.records.definitions import session_time, session_tool_time, started_in
from llmbench.records.record import Record, is_measured
from llmbench.records.store import RecordStore
from llmbench.results.contract import Value
from llmbench.results.sessions import DIST_STATS, Dist, Sessions, Slowest

PERCENTILES = (90.0, 95.0, 99.0)


@dataclass(frozen=True)
class SessionStat:
    """One session, from its records."""

    session_id: str
    conversation: str | None
    user: int | None
    ramp_step: int | None          # the ramp step its first call started in
    start: float                   # its first call's start
    end: float                     # when the client was done with its last call
    complete: bool                 # its answer (step_kind "final") came back
    failed: bool                   # a call failed (not our own stop)
    cut_short: bool                # our own stop interrupted a call of it, or it never finished
    steps: int                     # its model calls (every outcome)
    model_s: float                 # time at least one of its calls was in flight
    prompt_tokens: int
    cached_tokens: int | None      # None: no call reported cached tokens
    reported_prompt: int           # prompt tokens of the calls that reported cached tokens
    reported_calls: int            # those calls
    context_tokens: int            # its largest prompt
    call_steps: int                # calls that were to end in a tool call, answered
    text_replies: int              # of those, answered in text
    slowest_step: str | None
    slowest_e2el_s: float | None
    slowest_ttft_s: float | None
    ttfts: tuple[float, ...]       # its calls' TTFT (successful ones), seconds
    # joined mid-way (--join spread): its first call sent was not its first (its earlier
    # calls are synthetic history), so its time is not a whole session's
    joined: bool = False

    @property
    def duration_s(self) -> float:
        return session_time(self.start, self.end)

    @property
    def tool_s(self) -> float:
        return session_tool_time(self.duration_s, self.model_s)

    @property
    def prefilled_tokens(self) -> int | None:
        if self.cached_tokens is None:
            return None
        return self.reported_prompt - self.cached_tokens


def agent_records(records: Iterable[Record] | RecordStore) -> list[Record]:
    """The records of agent sessions (the others' cost nothing: a column store is searched by
    its sparse fields, not turned back into records)."""
    if isinstance(records, RecordStore):
        idx = [i for i, e in records.extras().items() if e.get("session_id") is not None]
        return records.records_at(sorted(idx)) if idx else []
    return [r for r in records if r.session_id is not None]


def _union_s(spans: list[tuple[float, float]]) -> float:
    total, cur_a, cur_b = 0.0, None, None
    for a, b in sorted(spans):
        if cur_b is None or a > cur_b:
            if cur_b is not None:
                total += cur_b - cur_a
            cur_a, cur_b = a, b
        elif b > cur_b:
            cur_b = b
    if cur_b is not None:
        total += cur_b - cur_a
    return total


def sessions_of(records: Iterable[Record] | RecordStore) -> list[SessionStat]:
    """Every agent session of the records, in the order their first calls started. Warm-up
    requests are not sessions' (they are not measured)."""
    by: dict[str, list[Record]] = {}
    for r in agent_records(records):
        if r.warmup:
            continue
        by.setdefault(r.session_id, []).append(r)       # type: ignore[arg-type]
    out = [_one(sid, recs) for sid, recs in by.items()]
    out.sort(key=lambda s: (s.start, s.session_id))
    return out


def _one(sid: str, recs: list[Record]) -> SessionStat:
    recs.sort(key=lambda r: r.start)
    first = recs[0]
    ends = [max(r.done, r.end or 0.0, r.start) for r in recs]
    complete = any(r.ok and r.step_kind == "final" for r in recs)
    failed = any(not r.ok and is_measured(r.warmup, r.error_kind) for r in recs)
    prompt = sum(r.prompt_tokens or 0 for r in recs if r.ok)
    told = [r for r in recs if r.ok and r.cached_tokens is not None]
    cached = sum(r.cached_tokens or 0 for r in told) if told else None
    slow, slow_e2el = None, None
    for r in recs:
        if r.ok and r.e2el is not None and (slow_e2el is None or r.e2el > slow_e2el):
            slow, slow_e2el = r, r.e2el
    calls = [r for r in recs if r.ok and r.step_kind == "call"]
    return SessionStat(
        session_id=sid, conversation=first.conversation, user=first.user, ramp_step=first.step,
        start=first.start, end=max(ends), complete=complete, failed=failed,
        cut_short=not complete and not failed, steps=len(recs),
        model_s=_union_s([(r.start, e) for r, e in zip(recs, ends)]),
        prompt_tokens=prompt, cached_tokens=cached,
        reported_prompt=sum(r.prompt_tokens or 0 for r in told), reported_calls=len(told),
        context_tokens=max((r.prompt_tokens or 0 for r in recs if r.ok), default=0),
        call_steps=len(calls), text_replies=sum(1 for r in calls if r.first_tool is None),
        slowest_step=slow.step_id if slow is not None else None, slowest_e2el_s=slow_e2el,
        slowest_ttft_s=slow.ttft if slow is not None else None,
        ttfts=tuple(r.ttft for r in recs if r.ok and r.ttft is not None),
        # the first call sent is the main agent's (sub-agents start after it): its index
        joined=first.turn > 0)


def _dist(values_s: Sequence[float], scale: float = 1000.0) -> Dist:
    s = percentile_mod.stats(values_s, PERCENTILES, scale)
    return Dist(n=int(s["count"] or 0), **{k: s[k] for k in DIST_STATS[1:]})


def _cache_figures(stats: Sequence[SessionStat]) -> dict[str, Any]:
    """The cache's figures over the calls whose usage said what was cached."""
    told = [s for s in stats if s.cached_tokens is not None]
    reported = sum(s.reported_prompt for s in told)
    cached = sum(s.cached_tokens or 0 for s in told) if told else None
    calls_told = sum(s.reported_calls for s in told)
    return dict(
        cached_tokens=cached,
        cached_share=(cached / reported) if cached is not None and reported else None,
        prefilled_per_call=((reported - (cached or 0)) / calls_told) if calls_told else None)


def _ms(v_s: float | None) -> float | None:
    return None if v_s is None else v_s * 1000.0


def _slowest(done: Sequence[SessionStat]) -> Slowest | None:
    slowest = max(done, key=lambda s: s.duration_s, default=None)
    if slowest is None:
        return None
    return Slowest(slowest.session_id, slowest.duration_s * 1000.0, slowest.slowest_step,
                   _ms(slowest.slowest_e2el_s), _ms(slowest.slowest_ttft_s))


def _window_s(stats: Sequence[SessionStat], window_s: float | None) -> float | None:
    if window_s is None and stats:
        return max(s.end for s in stats) - min(s.start for s in stats)
    return window_s


def summarize(stats: Sequence[SessionStat], window_s: float | None = None) -> Sessions:
    """The sessions' figures; ``window_s``: the minutes ``sessions_per_min`` is counted over
    (default: from the first session's start to the last one's end). Sessions joined mid-way
    count only in the calls' figures (step TTFT, tokens, the cache)."""
    whole = [s for s in stats if not s.joined]
    done = [s for s in whole if s.complete]
    window_s = _window_s(stats, window_s)
    return Sessions(
        started=len(whole), completed=len(done), failed=sum(1 for s in whole if s.failed),
        cut_short=sum(1 for s in whole if s.cut_short), joined=len(stats) - len(whole),
        duration=_dist([s.duration_s for s in done]), model=_dist([s.model_s for s in done]),
        tool=_dist([s.tool_s for s in done]), steps=_dist([s.steps for s in done], scale=1.0),
        step_ttft=_dist([t for s in stats for t in s.ttfts]),
        calls=sum(s.steps for s in stats), call_steps=sum(s.call_steps for s in stats),
        text_replies=sum(s.text_replies for s in stats),
        prompt_tokens=sum(s.prompt_tokens for s in stats), **_cache_figures(stats),
        context_tokens=(sum(s.context_tokens for s in done) / len(done)) if done else None,
        sessions_per_min=(len(done) / (window_s / 60.0)) if window_s and window_s > 0 else None,
        window_s=window_s, slowest=_slowest(done))


def summarize_sessions(records: Iterable[Record] | RecordStore,
                       window_s: float | None = None) -> Sessions | None:
    """The records' sessions summarised; None when no request belonged to a session."""
    stats = sessions_of(records)
    return summarize(stats, window_s) if stats else None


def step_sessions(records: Iterable[Record] | RecordStore, index: int, hold_start: float,
                  hold_end: float) -> Sessions | None:
    """A ramp step's sessions (the module says which), a minute counted over the hold, or None."""
    stats = [s for s in sessions_of(records)
             if s.ramp_step == index and started_in(s.start, hold_start, hold_end)]
    if not stats:
        return None
    return summarize(stats, hold_end - hold_start)


# -- sessions as a run goes (the live view, the dashboard) ----------------------------------------
@dataclass(frozen=True)
class SessionsNow(Value):
    """The sessions of a run in progress (or of its current step), from the records finished
    so far (``running`` as ``LiveSessions.now`` counts it)."""

    running: int = 0
    completed: int = 0
    failed: int = 0
    joined: int = 0
    steps_median: float | None = None           # calls of a completed session
    running_steps_median: float | None = None   # calls so far of a running one
    duration_median_s: float | None = None      # a completed session's time


@dataclass
class _Open:
    """A session still being read: its span so far, its step, its calls."""
    start: float
    end: float
    ramp_step: int | None
    joined: bool
    calls: int = 0


class LiveSessions:
    """Sessions rebuilt as their records come (``add``: one record, a few dict operations; a
    thread that draws calls ``now``), by ``sessions_of``'s definitions. Ended sessions keep
    only their time and calls, by the ramp step they started in."""

    def __init__(self) -> None:
        self._open: dict[str, _Open] = {}
        self._ended: set[str] = set()
        # by ramp step (None: a run's): (time s, calls) of each completed session
        self._done: dict[int | None, list[tuple[float, int]]] = {}
        self._failed: dict[int | None, int] = {}
        self._joined: dict[int | None, int] = {}

    def add(self, rec: Record) -> None:
        sid = rec.session_id
        if sid is None or rec.warmup or sid in self._ended:
            return                  # not a session's, or a background sub-agent's late call
        s = self._open.get(sid)
        end = max(rec.done, rec.end or 0.0, rec.start)
        if s is None:
            s = self._open[sid] = _Open(rec.start, end, rec.step, rec.turn > 0)
        s.calls += 1
        s.start, s.end = min(s.start, rec.start), max(s.end, end)
        if rec.ok and rec.step_kind == "final":
            del self._open[sid]
            self._ended.add(sid)
            if s.joined:
                self._joined[s.ramp_step] = self._joined.get(s.ramp_step, 0) + 1
            else:
                self._done.setdefault(s.ramp_step, []).append(
                    (session_time(s.start, s.end), s.calls))
        elif not rec.ok and is_measured(rec.warmup, rec.error_kind):
            del self._open[sid]
            self._ended.add(sid)
            self._failed[s.ramp_step] = self._failed.get(s.ramp_step, 0) + 1

    def now(self, step: int | None = None, every: bool = True,
            running: int | None = None) -> SessionsNow:
        """The sessions so far: of every step (``every``), or of the ramp step ``step`` (those
        whose first call started in it). ``running``: the sessions under way as the caller
        counts them (the load's own, its first call in flight included), else those with a
        call answered and no answer yet."""
        def mine(k: int | None) -> bool:
            return every or k == step
        done = [x for k, v in list(self._done.items()) if mine(k) for x in v]
        opened = [s for s in list(self._open.values()) if mine(s.ramp_step)]
        return SessionsNow(
            running=len(opened) if running is None else running,
            completed=len(done),
            failed=sum(v for k, v in list(self._failed.items()) if mine(k)),
            joined=sum(v for k, v in list(self._joined.items()) if mine(k)),
            steps_median=percentile([c for _, c in done], 50) if done else None,
            running_steps_median=percentile([s.calls for s in opened], 50) if opened else None,
            duration_median_s=percentile([t for t, _ in done], 50) if done else None)
