"""Clock offsets between a coordinator and workers on other hosts, NTP-style.

Hosts do not share ``time.perf_counter()`` (each counts from its own boot); a request's
latencies stay on its worker's clock, and only its records' placement on the run's timeline
needs the offset (the package docstring's CLOCKS).

One ping: the coordinator stamps ``t0`` and sends; the worker stamps ``t1`` on receipt and
``t2`` when it answers; the coordinator stamps ``t3`` on receipt. With symmetric one-way
delays the worker's clock minus the coordinator's is ``((t1 - t0) + (t2 - t3)) / 2``; however
asymmetric the delays, the true offset lies within half the round trip
(``((t3 - t0) - (t2 - t1)) / 2``) of it. Of k pings the one with the shortest round trip is kept
(the least queuing, so the tightest bound). Pings at the start and the end of a run give the
drift between the two clocks, which run.json states (records are placed with the start's
offset, ``WorkerSpec.clock_offset_s``: a run's drift is parts per million).

Pure functions over numbers; no I/O, no Ray.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Awaitable, Callable, Sequence


@dataclass(frozen=True)
class Ping:
    """One exchange, each stamp in seconds on the clock of whoever took it."""

    t0: float          # coordinator: sent
    t1: float          # worker: received
    t2: float          # worker: answered
    t3: float          # coordinator: answer received

    @property
    def round_trip_s(self) -> float:
        """Time on the wire and in queues, the worker's own handling left out."""
        return max((self.t3 - self.t0) - (self.t2 - self.t1), 0.0)

    @property
    def offset_s(self) -> float:
        return ((self.t1 - self.t0) + (self.t2 - self.t3)) / 2.0


@dataclass(frozen=True)
class Offset:
    """The worker's clock minus the coordinator's, at coordinator time ``at_s``."""

    offset_s: float
    uncertainty_s: float       # the true offset lies within ± this (half the best round trip)
    at_s: float                # coordinator clock, middle of the best ping
    pings: int

    def as_dict(self) -> dict[str, float]:
        return {"offset_s": self.offset_s, "uncertainty_ms": self.uncertainty_s * 1e3,
                "at_s": self.at_s, "pings": self.pings}


def estimate(pings: Sequence[Ping]) -> Offset:
    """Best of k: the ping with the shortest round trip gives the offset and its bound."""
    if not pings:
        raise ValueError("no pings to estimate a clock offset from")
    best = min(pings, key=lambda p: p.round_trip_s)
    return Offset(best.offset_s, best.round_trip_s / 2.0, (best.t0 + best.t3) / 2.0, len(pings))


@dataclass(frozen=True)
class ClockMap:
    """A worker's clock against the coordinator's: the estimate at the start and, once the run
    ended, at the end (drift between them is taken as linear)."""

    start: Offset
    end: Offset | None = None

    @property
    def drift_ppm(self) -> float | None:
        """How fast the worker's clock gains on the coordinator's, in parts per million;
        None with one estimate, or two taken too close together to tell."""
        if self.end is None or self.end.at_s - self.start.at_s <= 0:
            return None
        return (self.end.offset_s - self.start.offset_s) / (self.end.at_s - self.start.at_s) * 1e6

    @property
    def drift_uncertainty_ppm(self) -> float | None:
        """How far off drift_ppm may be: both bounds over the time between the estimates
        (a drift within it is noise; over a short run it usually is)."""
        if self.end is None or self.end.at_s - self.start.at_s <= 0:
            return None
        return ((self.start.uncertainty_s + self.end.uncertainty_s)
                / (self.end.at_s - self.start.at_s) * 1e6)

    @property
    def uncertainty_s(self) -> float:
        """The larger of the two bounds: anywhere in the run is at least this well known."""
        return max(self.start.uncertainty_s,
                   self.end.uncertainty_s if self.end is not None else 0.0)

    def as_dict(self) -> dict[str, object]:
        """What run.json stores per worker."""
        return {"offset_ms": self.start.offset_s * 1e3,
                "uncertainty_ms": self.uncertainty_s * 1e3,
                "drift_ppm": self.drift_ppm,
                "drift_uncertainty_ppm": self.drift_uncertainty_ppm,
                "start": self.start.as_dict(),
                "end": self.end.as_dict() if self.end is not None else None}


async def measure(exchange: Callable[[], Awaitable[tuple[float, float]]], k: int = 8,
                  clock: Callable[[], float] = time.perf_counter) -> Offset:
    """Run k pings through ``exchange`` (which asks the worker for its (received, answered)
    stamps) and keep the best. The caller supplies the transport (a Ray actor call)."""
    pings = []
    for _ in range(k):
        t0 = clock()
        t1, t2 = await exchange()
        t3 = clock()
        pings.append(Ping(t0, t1, t2, t3))
    return estimate(pings)
