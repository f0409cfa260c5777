"""The network's share of TTFT: a typed finding from the measured floor (results/network.py).

Every request pays at least one round trip before its first token: the request going out and
the first byte coming back. The floor (client/floor.py) measures it apart from the server: a
request the server answers at once, on a kept connection. When it is a large share of the
TTFT a user sees, the latency is the network's, not the server's queue or compute, and the
verdict says so (with_network) instead of leaving a threshold broken in the first step
unexplained. A new connection's set-up (TCP, TLS) is told apart: it is paid once per
connection, by the requests that open one (records/phases.py).

Pure functions of the floor and the summaries; the lead turns ``network_share`` into a verdict
rule at merge (issue 48).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from llmbench.results.network import NetworkFloor
from llmbench.results.schema import Step, Summary, Verdict, deciding_step

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


def with_network(verdict: Verdict, steps: Sequence[Step], floor: NetworkFloor | None
                 ) -> Verdict:
    """Today's verdict with the network's share named (the smallest hook until it is a rule):
    its sentence first among the evidence, judged at the step the verdict is about (the
    deciding one, else the last). A first step that broke with no lighter load to compare
    (kind "other") is the network's when the round trip is most of its TTFT: kind "network",
    and not a question of queuing or saturation. Queuing and saturation are judged on the
    growth between steps, which a constant round trip does not make; they stand."""
    broke = deciding_step(steps)
    subject = broke or (steps[-1] if steps else None)
    found = of_summary(subject.summary if subject is not None else None, floor)
    if found is None:
        return verdict
    verdict.evidence.insert(0, found.sentence)
    if verdict.kind == "other" and found.share >= NETWORK_EXPLAINS:
        verdict.kind = "network"
        verdict.evidence = [e for e in verdict.evidence
                            if "whether requests queued or the hardware" not in e]
        verdict.advice = [a for a in verdict.advice if not a.startswith("Start the ramp lower")]
        verdict.advice.append("Measure from closer to the server (the same region or network), "
                              "or set the TTFT limit above the round trip: no server setting "
                              "makes the network faster.")
    return verdict
