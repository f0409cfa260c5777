"""What a load shape is: a value the harness runs.

A shape gets a ``Drive``: one Session per target (by name), the stop event, the loop monitor
(read-only: shapes judge their own generator) and a small live state the live line reads. It
returns whatever its command needs (a start time, step results). It never prints, never writes
files and never imports metrics, thresholds, verdicts or reports: a ramp step is judged by a
function handed in from above (tests/unit/test_architecture.py keeps it so).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Protocol

from llmbench.load.monitor import LoopMonitor
from llmbench.load.session import Session


@dataclass
class LiveState:
    """What the shape is doing now, for the live line and the timeline."""

    step: int | None = None
    load: float = 0.0
    users: int = 0
    phase: str | None = None          # ramp-in | hold | drain | finishing
    user_changes: list[tuple[float, int]] = field(default_factory=list)   # (perf time, users)

    def users_changed(self, t: float, delta: int) -> None:
        self.users += delta
        self.user_changes.append((t, self.users))


@dataclass(eq=False)
class Drive:
    """What a shape drives: the sessions, the stop signal, the monitor and the live state."""
    sessions: dict[str, Session]
    stopping: asyncio.Event
    monitor: LoopMonitor
    live: LiveState
    # Worker processes (llmbench.workers): awaited after the warm-up, returns the time
    # measured dispatch starts at (every worker of a run shares it, and waits for it). None:
    # now, in this process.
    gate: Callable[[], Awaitable[float]] | None = None
    # The ramp's crowd / the probe's slices run by worker processes (llmbench.workers); None:
    # in this process
    remote: Any = None

    @property
    def session(self) -> Session:
        """The one session of a single-target shape."""
        return next(iter(self.sessions.values()))


class LoadShape(Protocol):
    kind: str                       # run | ramp | probe: the run folder's kind

    def max_in_flight(self) -> int:
        """Connections to keep per target."""
        ...

    async def drive(self, d: Drive) -> Any:
        ...
