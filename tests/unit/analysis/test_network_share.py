"""The network's share of TTFT (analysis/network.py): named when large, silent otherwise, and a
first step broken by the round trip is the network's, not a question of queuing."""

from __future__ import annotations

from llmbench.analysis.network import network_share
from llmbench.analysis.rules import ramp as rules
from llmbench.analysis.rules.evidence import Circumstances, Evidence
from llmbench.analysis.verdict import decide
from llmbench.client.floor import Floor
from llmbench.results.network import NetworkFloor
from llmbench.results.schema import Metric, Step, Summary


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


def _step(index: int, ttft_p50: float, held: bool) -> Step:
    s = Summary(ttft=Metric(name="ttft", median=ttft_p50))
    return Step(index=index, load=index + 1, summary=s, state="held" if held else "over",
                held=held)


def _ev(steps: list[Step], net: NetworkFloor | None, grew: bool = False) -> Evidence:
    broke = next((st for st in steps if not st.held), None)
    first = steps[0] if len(steps) > 1 else None
    return Evidence(steps=steps, broke=broke, subject=broke or steps[-1], first=first,
                    ttft_grew=grew, c=Circumstances(network=net))


def test_the_first_step_broken_by_the_round_trip_is_the_networks():
    ev = _ev([_step(0, 123.0, held=False)], floor(101.0))
    f = rules.network(ev)
    assert f is not None and f.kind == "network"
    assert any("closer to the server" in a for a in f.advice)
    found, notes = decide(ev)
    assert found.kind == "network"
    assert notes[-1].startswith("TTFT p50 123 ms, of which about 101 ms")
    assert not any("queued" in e for e in notes + found.evidence)


def test_queuing_stands_and_gets_the_note():
    # TTFT grew with the load: the queue's rule judges it; the network's share is a note
    ev = _ev([_step(0, 40.0, True), _step(1, 300.0, False)], floor(100.0), grew=True)
    assert rules.network(ev) is None
    assert rules._network_note(ev)[0].startswith("TTFT p50 300 ms, of which about 100 ms")
    # a share too small to name: no note, no finding
    small = _ev([_step(0, 40.0, True), _step(1, 900.0, False)], floor(100.0), grew=True)
    assert rules._network_note(small) == [] and rules.network(small) is None
    # no floor measured (a loopback target): the rule never fires
    assert rules.network(_ev([_step(0, 123.0, held=False)], None)) is None
