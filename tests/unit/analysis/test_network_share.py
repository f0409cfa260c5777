"""The network's share of TTFT (analysis/network.py): named when large, silent otherwise, and a
first step broken by the round trip is the network's, not a question of queuing."""

from __future__ import annotations

from llmbench.analysis.network import network_share, with_network
from llmbench.client.floor import Floor
from llmbench.results.network import NetworkFloor
from llmbench.results.schema import Metric, Step, Summary, Verdict


def floor(rtt: float, connect: float = 0.3, tls: float | None = None) -> NetworkFloor:
    return NetworkFloor.of([Floor(rtt_ms=rtt, connect_ms=connect, tls_ms=tls, rounds=5,
                                  status=200)])


def test_a_large_share_is_named_with_the_servers_own_part():
    f = network_share(152.0, floor(145.0, connect=48.0, tls=97.0))
    assert f is not None and f.server_ms == 7.0
    assert f.sentence.startswith("TTFT p50 152 ms, of which about 145 ms is the network round "
                                 "trip: the server itself answers in about 7 ms.")
    assert "48 ms TCP and 97 ms TLS" in f.sentence


def test_a_small_share_or_a_loopback_floor_says_nothing():
    assert network_share(152.0, floor(20.0)) is None          # 13 %
    assert network_share(0.9, floor(0.3)) is None             # loopback: under MIN_RTT_MS
    assert network_share(None, floor(100.0)) is None
    assert network_share(120.0, None) is None
    assert network_share(120.0, NetworkFloor.of([Floor(error="refused")])) is None


def _step(ttft_p50: float, held: bool) -> Step:
    s = Summary(ttft=Metric(name="ttft", median=ttft_p50))
    return Step(index=0, load=1, summary=s, state="held" if held else "over")


def test_the_first_step_broken_by_the_round_trip_is_the_networks():
    v = Verdict(text="Broke at 1 user.", kind="other",
                evidence=["The first step with enough data (1 user) already broke ttft.p95, so "
                          "there is no lighter load to compare it with: whether requests queued "
                          "or the hardware saturated cannot be told from this ramp."],
                advice=["Start the ramp lower (fewer users in the first step), or loosen the "
                        "thresholds if this load is light for the server."])
    out = with_network(v, [_step(123.0, held=False)], floor(101.0))
    assert out.kind == "network"
    assert out.evidence[0].startswith("TTFT p50 123 ms, of which about 101 ms")
    assert not any("queued" in e for e in out.evidence)
    assert any("closer to the server" in a for a in out.advice)


def test_queuing_stands_and_gets_the_note():
    v = Verdict(text="Broke at 8 users.", kind="queuing", evidence=["Tokens stayed ..."])
    out = with_network(v, [_step(40.0, True), _step(300.0, False)], floor(100.0))
    assert out.kind == "queuing" and len(out.evidence) == 2 and "network" in out.evidence[0]
    # a share too small to name changes nothing
    v2 = Verdict(text="x", kind="queuing", evidence=["e"])
    assert with_network(v2, [_step(40.0, True), _step(900.0, False)], floor(100.0)).evidence == ["e"]
