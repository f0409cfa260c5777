"""The result contract's network floor (run.json's ``network``): the round trip to the server
measured without asking it to generate, before the load, after each ramp step and after the load
(client/floor.py), so the verdict can say what share of TTFT is the network (analysis/network.py).
None in runs made before it, and when not measured (through a forward proxy: the floor would be
the proxy's)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from llmbench.client.floor import Floor

from llmbench.results.contract import Part, part


@dataclass
class FloorSample(Part):
    """One measurement: a new connection's set-up (TCP, then TLS for https) and a request the
    server answers at once (``path``, its ``status``) sent ``rounds`` times on that connection:
    the median and least of those round trips. ``error``: why it could not be measured."""

    when: str = "before"                # "before" the load, "after step N", "after" it
    path: str = "/health"
    status: int | None = None
    connect_ms: float | None = None
    tls_ms: float | None = part(None, omit="none")
    rounds: int = 0
    rtt_ms: float | None = None          # median of the rounds on the kept connection
    rtt_min_ms: float | None = None
    error: str | None = part(None, omit="none")


@dataclass
class NetworkFloor(Part):
    """The samples, and their medians: what a reused connection's request costs before the
    server does anything (``rtt_ms``) and what a new connection adds (``connect_ms``,
    ``tls_ms``)."""

    samples: list[FloorSample] = field(default_factory=list)
    rtt_ms: float | None = None
    connect_ms: float | None = None
    tls_ms: float | None = part(None, omit="none")

    @classmethod
    def of(cls, floors: list[Floor]) -> "NetworkFloor":
        samples = [FloorSample(**asdict(f)) for f in floors]
        def med(xs: list[float]) -> float | None:
            xs = sorted(xs)
            n = len(xs)
            return None if not n else xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2
        return cls(samples=list(samples),
                   rtt_ms=med([s.rtt_ms for s in samples if s.rtt_ms is not None]),
                   connect_ms=med([s.connect_ms for s in samples if s.connect_ms is not None]),
                   tls_ms=med([s.tls_ms for s in samples if s.tls_ms is not None]))
