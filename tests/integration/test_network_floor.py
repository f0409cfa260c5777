"""The network's share of TTFT, measured and named (issue 48): a delay proxy of 50 ms each way
(tests/helpers/delay_proxy.py: what it models and what it cannot) between llmbench and the
mock. TTFT rises by the round trip, the floor measures it apart from the server, and the
verdict names the network, not the server's queue or compute; without the delay it says
nothing about the network."""

from __future__ import annotations

import json

import llmbench
from tests.helpers import only_run
from tests.helpers.delay_proxy import DelayProxy

DELAY_S = 0.05
RAMP = dict(model="mock", users="1,2", ramp_in="0.5s", hold="3s", think="0", turns=1,
            prompt_tokens=10, output_tokens=4, threshold="ttft.p95<=80ms",
            generator_lag_limit="2000ms", network_floor="on")


def _ramp(url: str, out) -> dict:
    llmbench.ramp(url=url + "/v1", out=out, **RAMP)
    return json.loads((only_run(out) / "run.json").read_text())


def test_the_network_round_trip_is_named_and_not_blamed_on_the_server(mock_factory, tmp_path):
    m = mock_factory(ttft_ms=20, itl_ms=2)
    port = int(m.url.rsplit(":", 1)[1])
    direct = _ramp(m.url, tmp_path / "direct")
    with DelayProxy(port, DELAY_S) as proxy:
        far = _ramp(proxy.url, tmp_path / "far")
    # the floor: ~100 ms round trip through the proxy, under a millisecond without it
    rtt_far, rtt_direct = far["network"]["rtt_ms"], direct["network"]["rtt_ms"]
    assert 2 * DELAY_S * 1000 <= rtt_far < 2 * DELAY_S * 1000 + 60, far["network"]
    assert rtt_direct < 20
    # before the load, after each step (the ramp stopped at the step that broke) and after
    whens = [s["when"] for s in far["network"]["samples"]]
    assert whens[0] == "before" and whens[-1] == "after"
    assert sorted(whens[1:-1]) == [f"after step {st['index']}" for st in far["steps"]], whens
    # TTFT rose by about the round trip (the mock's own 20 ms is the same either way)
    t_far = far["steps"][0]["summary"]["median_ttft_ms"]
    t_direct = direct["steps"][0]["summary"]["median_ttft_ms"]
    assert abs((t_far - t_direct) - rtt_far) < 0.25 * rtt_far, (t_far, t_direct, rtt_far)
    # the requests' phases put it where it is: waiting for the first byte
    wait = far["steps"][0]["summary"]["phases_ms"]["wait"]["p50"]
    assert wait >= 2 * DELAY_S * 1000
    v = far["verdict"]
    assert v["kind"] == "network", v
    said = " ".join([v["result"], *v["evidence"], *v["advice"]])
    assert "network round trip" in said and f"of which about {rtt_far:.0f} ms" in said
    assert "queu" not in said.lower() and "saturat" not in said.lower(), said
    # without the delay: the ramp held, and nothing is said about the network
    dv = direct["verdict"]
    assert dv["kind"] == "held"
    assert "network" not in " ".join([dv["result"], *dv["evidence"], *dv["advice"]])
    # the ramp's report shows each step's phases; the far one's wait is the round trip
    from llmbench.report import html
    page = html.render(only_run(tmp_path / "far"))
    assert "Request phases per step (p50)" in page and "first byte" in page
    assert "Why: the network" not in html.render(only_run(tmp_path / "direct"))


def test_a_run_through_the_delay_names_the_network_in_its_report(mock_factory, tmp_path):
    from llmbench.report import html
    m = mock_factory(ttft_ms=20, itl_ms=2)
    with DelayProxy(int(m.url.rsplit(":", 1)[1]), DELAY_S) as proxy:
        llmbench.run(url=proxy.url + "/v1", model="mock", concurrency=2, requests=8,
                     prompt_tokens=10, output_tokens=4, network_floor="on", out=tmp_path)
    d = only_run(tmp_path)
    net = json.loads((d / "run.json").read_text())["network"]
    assert net["rtt_ms"] >= 2 * DELAY_S * 1000 and len(net["samples"]) == 2
    assert "is the network round trip: the server itself answers in about" in html.render(d)
