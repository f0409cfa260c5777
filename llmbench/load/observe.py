"""Who watches a run while it goes: every live view is an ``Observer`` handed to the harness.

The engine (load.harness) streams what happens without knowing who reads it (as vegeta's
attack loop hands results to whoever ranges over them): the Prometheus exporter, the terminal
view, the dashboard's feed, the notebook's cell and the OTLP exporter all implement this one
protocol and are passed as ``Harness.observers``.

All three calls come on the event loop and must be cheap: an observer that needs work done
(percentiles, a page to draw) keeps what it is handed and does the work in its own thread or
at its own redraw.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, runtime_checkable

from llmbench.records.record import Record


@runtime_checkable
class Observer(Protocol):
    def observe(self, record: Record) -> None:
        """One finished request (every record, warm-up and failures too), as it finishes."""

    def token(self, now_s: float, n: int) -> None:
        """``n`` token events arrived by ``now_s`` (perf_counter seconds) since the last call:
        replies still streaming count here as they stream, not when they end. May be a no-op."""

    def close(self) -> None:
        """The load is over (its last record observed); release what the observer holds open."""


@runtime_checkable
class Preflighted(Protocol):
    """An observer that also wants the preflight's record (the one-token request before the
    load: no measurement, never in requests.jsonl): the OTLP exporter, whose span it is for
    the traceparent the preflight sent. Called on the event loop after each attempt: cheap."""

    def preflight(self, record: Record) -> None: ...


class ObserverError(Exception):
    """An observer cannot start (its port is taken): the message is the one line the user
    reads; the run stops before any load."""


@dataclass
class LiveNow:
    """The live state an observer may read from its own thread (``attach``'s provider): plain
    reads of ints and floats the loop writes, so a read may see a second-old value, never a
    torn one. ``events`` counts token events as they arrive (replies still streaming too)."""

    t_s: float | None = None             # seconds since dispatch began (None: not yet)
    started: int = 0
    done: int = 0
    failed: int = 0
    in_flight: int = 0
    events: int = 0                      # token events received so far
    users: int = 0                       # virtual users active now
    load: float = 0.0                    # the step's (or run's) users or requests/s
    step: int | None = None
    phase: str | None = None
    lag_p99_ms: float | None = None
    cpu_pct: float | None = None
    busiest: str | None = None           # --workers: which process the generator figures are
    # each server probe's last reading (the server's own state), by target name
    server: dict[str, dict[str, Any]] | None = None
    # the server machine's last telemetry samples (servers/telemetry.py: its process, the
    # machine, GPUs), counters as sampled
    telemetry: list[dict[str, Any]] = field(default_factory=list)
    # the ramp step of each agent session under way (None: with workers, not known here)
    agents_open: list[int | None] | None = None


@runtime_checkable
class Attached(Protocol):
    """An observer that also reads the live state in its own thread (the exporter at a scrape,
    the dashboard's feeder once a second): ``attach`` is called before dispatch begins and may
    raise ObserverError."""

    def attach(self, now: Callable[[], LiveNow]) -> None: ...


@runtime_checkable
class Drawn(Protocol):
    """The observer the harness draws on the terminal once a second (report.live.LiveBoard);
    it is handed records only when there is a terminal to draw on."""

    def draw(self, view: Any, elapsed_s: float, width: int) -> Any: ...
