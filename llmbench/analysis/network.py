"""The network's share of TTFT: a typed finding from the measured floor (results/network.py).

Every request pays at least one round trip before its first token: the request going out and
the first byte coming back. The floor (client/floor.py) measures it apart from the server: a
request the server answers at once, on a kept connection. When it is a large share of the
TTFT a user sees, the latency is the network's, not the server's queue or compute, and the
verdict's network rule (analysis/rules/ramp.py) says so instead of leaving a threshold broken
in the first step unexplained. A new connection's set-up (TCP, TLS) is told apart: it is paid
once per connection, by the requests that open one (records/phases.py). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmbench.results.network import NetworkFloor
from llmbench.results.schema import Summary

# Named when the round trip is at least this share of TTFT p50 and at least MIN_RTT_MS: a
# loopback's 0.2 ms, or 5 ms on a LAN under a 2 s TTFT, is not worth a line
NETWORK_SHARE = 0.3
MIN_RTT_MS = 5.0
# at this share the network alone explains a first step that broke a TTFT limit
NETWORK_EXPLAINS = 0.5


@dataclass(frozen=True)
class NetworkShare:
    """TTFT p50 and the round trip under it (both ms); what is left is the server's."""
    ttft_p50_ms: float
    rtt_ms: float
    connect_ms: float | None          # a new connection's TCP set-up
    tls_ms: float | None              # ... and its TLS handshake

    @property
    def share(self) -> float:
        return min(self.rtt_ms / self.ttft_p50_ms, 1.0) if self.ttft_p50_ms > 0 else 1.0

    @property
    def server_ms(self) -> float:
        return max(self.ttft_p50_ms - self.rtt_ms, 0.0)

    @property
    def sentence(self) -> str:
        text = (f"TTFT p50 {self.ttft_p50_ms:.0f} ms, of which about {self.rtt_ms:.0f} ms is "
                f"the network round trip: the server itself answers in about "
                f"{self.server_ms:.0f} ms.")
        setup = [f"{v:.0f} ms {name}" for name, v in (("TCP", self.connect_ms),
                                                       ("TLS", self.tls_ms))
                 if v is not None and v >= 1.0]
        if setup:
            text += (" A new connection costs " + " and ".join(setup) + " more, once "
                     "(kept-alive connections do not pay it).")
        return text


def network_share(ttft_p50_ms: float | None, floor: NetworkFloor | None) -> NetworkShare | None:
    """The finding when the network is a large share of TTFT p50 (NETWORK_SHARE, MIN_RTT_MS),
    else None (no floor, no TTFT, or a share not worth naming)."""
    if floor is None or floor.rtt_ms is None or ttft_p50_ms is None or ttft_p50_ms <= 0:
        return None
    rtt = floor.rtt_ms
    if rtt < MIN_RTT_MS or rtt / ttft_p50_ms < NETWORK_SHARE:
        return None
    return NetworkShare(ttft_p50_ms, rtt, floor.connect_ms, floor.tls_ms)


def of_summary(summary: Summary | None, floor: NetworkFloor | None) -> NetworkShare | None:
    """``network_share`` of a run's (or step's) TTFT median."""
    if summary is None:
        return None
    return network_share(summary.ttft.median, floor)
