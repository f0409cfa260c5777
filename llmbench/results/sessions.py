"""Agent sessions in the results contract: what ``analysis.sessions`` builds from the records of
a run (``Run.sessions``) or of a ramp step (``Step.sessions``), as typed values.

A session is an agent's whole task (workload.agents): its model calls, its tool gaps, its
sub-agents. docs/agents.md ("Session metrics") defines each figure (``duration``, ``model``,
``tool``, ``steps``, ``slowest``...) and which sessions the statistics stand on (completed
ones: ``failed``, ``cut_short`` and ``joined`` sessions are counted apart).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from llmbench.results.contract import Value

DIST_STATS = ("n", "mean", "median", "std", "min", "max", "p90", "p95", "p99")


@dataclass(frozen=True)
class Dist(Value):
    """One distribution, in milliseconds (``steps``: in calls). n == 0: every statistic None."""

    n: int = 0
    mean: float | None = None
    median: float | None = None
    std: float | None = None
    min: float | None = None
    max: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None

    def value(self, stat: str) -> float | None:
        """A statistic by its threshold name (p50 is the median)."""
        stat = "median" if stat == "p50" else stat
        return getattr(self, stat) if stat in DIST_STATS else None


@dataclass(frozen=True)
class Slowest(Value):
    """The slowest completed session, and its slowest call."""

    session_id: str
    duration_ms: float
    step_id: str | None = None
    step_e2el_ms: float | None = None
    step_ttft_ms: float | None = None


@dataclass(frozen=True)
class Sessions(Value):
    """A run's (or a ramp step's) agent sessions, summarised."""

    started: int = 0                  # sessions with a call in the window
    completed: int = 0                # their answer came back
    failed: int = 0                   # a call failed
    cut_short: int = 0                # the run stopped them (or the drain gave up on them)
    # joined mid-way (ramp --join spread; earlier calls synthetic): in the call counts only
    joined: int = 0
    duration: Dist = field(default_factory=Dist)
    model: Dist = field(default_factory=Dist)
    tool: Dist = field(default_factory=Dist)
    steps: Dist = field(default_factory=Dist)          # model calls per session, not ms
    step_ttft: Dist = field(default_factory=Dist)      # TTFT of the sessions' calls
    calls: int = 0                    # model calls of the sessions (every outcome)
    call_steps: int = 0               # calls that were to end in a tool call, answered
    text_replies: int = 0             # of those, answered in text instead
    prompt_tokens: int = 0            # over the calls that reported a prompt
    cached_tokens: int | None = None  # over the calls that said (None: no call said)
    cached_share: float | None = None # cached / prompt over the calls that said
    prefilled_per_call: float | None = None    # uncached prompt tokens a call, on average
    context_tokens: float | None = None        # a completed session's largest prompt, mean
    sessions_per_min: float | None = None      # completed sessions a minute of the window
    window_s: float | None = None
    slowest: Slowest | None = None

    @property
    def text_reply_share(self) -> float | None:
        return self.text_replies / self.call_steps if self.call_steps else None

    def value(self, metric: str, stat: str | None = None) -> float | None:
        """A session metric as a threshold names it (analysis.slo): one of ``DISTS`` with a
        statistic, or one of ``SCALARS``."""
        if stat is not None:
            dist = DISTS.get(metric)
            return getattr(self, dist).value(stat) if dist else None
        return {"sessions_completed": float(self.completed),
                "sessions_per_min": self.sessions_per_min,
                "text_reply_share": self.text_reply_share,
                "session_cached_share": self.cached_share}.get(metric)

    def count(self, metric: str) -> int:
        """How many values a distribution of ``metric`` stands on."""
        dist = DISTS.get(metric)
        return getattr(self, dist).n if dist else 0

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "text_reply_share": self.text_reply_share}


# threshold names -> the distribution they read (all in ms but ``steps``)
DISTS = {"session": "duration", "session_model": "model", "session_tool": "tool",
         "step_ttft": "step_ttft", "session_steps": "steps"}
SCALARS = ("sessions_completed", "sessions_per_min", "text_reply_share", "session_cached_share")
SHARES = ("text_reply_share", "session_cached_share")


@dataclass(frozen=True)
class CacheBound(Value):
    """The verdict's finding that the KV cache was the limit (analysis.cachebound): it kept
    about ``sessions_held`` sessions of ``session_tokens`` warm, and beyond that each call
    prefilled about ``reprefill_tokens`` again; the cache's share of the prompt tokens at the
    last step that held and at the one that broke; the server's KV capacity where it said
    (tokens, and sessions of this size); whether its own counters agreed (None: it had none)."""

    sessions_held: float
    session_tokens: float
    reprefill_tokens: float
    warm_share: float | None = None
    broke_share: float | None = None
    capacity_tokens: float | None = None
    capacity_sessions: float | None = None
    server_agrees: bool | None = None
    sentence: str = ""
    evidence: tuple[str, ...] = ()
    advice: tuple[str, ...] = ()
