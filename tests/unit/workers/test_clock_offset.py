"""The NTP-style clock-offset estimate used for workers on other hosts (llmbench.workers.clock)."""

import asyncio

import pytest

from llmbench.workers.clock import ClockMap, Offset, Ping, estimate, measure


def _ping(t0: float, up_s: float, handle_s: float, down_s: float, offset_s: float) -> Ping:
    """A ping with given one-way delays against a worker clock ``offset_s`` ahead."""
    t1 = t0 + up_s + offset_s
    t2 = t1 + handle_s
    t3 = t2 - offset_s + down_s
    return Ping(t0, t1, t2, t3)


def test_symmetric_delays_give_the_offset_exactly_and_the_worker_time_is_left_out():
    p = _ping(100.0, 0.002, 0.5, 0.002, offset_s=-3600.25)
    assert p.offset_s == pytest.approx(-3600.25, abs=1e-9)
    assert p.round_trip_s == pytest.approx(0.004, abs=1e-9)     # 0.5 s of handling not counted


def test_asymmetric_delays_stay_within_the_uncertainty():
    for up, down in ((0.010, 0.001), (0.001, 0.010), (0.0, 0.02)):
        off = estimate([_ping(5.0, up, 0.001, down, offset_s=42.0)])
        assert off.offset_s != pytest.approx(42.0, abs=1e-6)     # the estimate is biased ...
        assert abs(off.offset_s - 42.0) <= off.uncertainty_s + 1e-12   # ... but bounded


def test_best_of_k_keeps_the_shortest_round_trip():
    pings = [_ping(0.0, 0.030, 0.0, 0.001, 7.0),      # queued one way: biased by 14.5 ms
             _ping(1.0, 0.0005, 0.0, 0.0005, 7.0),    # the clean one
             _ping(2.0, 0.001, 0.0, 0.040, 7.0)]
    off = estimate(pings)
    assert off.offset_s == pytest.approx(7.0, abs=1e-9)
    assert off.uncertainty_s == pytest.approx(0.0005, abs=1e-9)
    assert off.pings == 3 and off.at_s == pytest.approx(1.0 + 0.0005, abs=1e-9)
    with pytest.raises(ValueError):
        estimate([])


def test_drift_between_start_and_end_is_measured_with_its_bound():
    # the worker's clock gains 50 ppm: +10 s offset at t=0, +10.005 s at t=100
    start = Offset(10.0, 0.001, 0.0, 8)
    end = Offset(10.005, 0.002, 100.0, 8)
    m = ClockMap(start, end)
    assert m.drift_ppm == pytest.approx(50.0)
    assert m.uncertainty_s == 0.002
    d = m.as_dict()
    assert d["offset_ms"] == pytest.approx(10000.0) and d["uncertainty_ms"] == pytest.approx(2.0)
    assert d["drift_ppm"] == pytest.approx(50.0) and d["end"]["pings"] == 8
    # the two bounds (1 ms + 2 ms) over 100 s: a drift under 30 ppm would be noise
    assert d["drift_uncertainty_ppm"] == pytest.approx(30.0)


def test_one_estimate_means_a_constant_offset_and_no_drift():
    m = ClockMap(Offset(-2.0, 0.0001, 10.0, 4))
    assert m.drift_ppm is None and m.as_dict()["end"] is None
    assert m.drift_uncertainty_ppm is None


def test_measure_pings_through_the_given_exchange_on_the_given_clock():
    now = [0.0]

    def clock() -> float:
        now[0] += 0.001                 # each reading 1 ms later
        return now[0]

    async def exchange() -> tuple[float, float]:
        t = now[0] + 500.0              # the worker's clock is 500 s ahead
        return t, t
    off = asyncio.run(measure(exchange, k=5, clock=clock))
    assert off.pings == 5
    assert abs(off.offset_s - 500.0) <= off.uncertainty_s + 1e-9
    assert off.uncertainty_s == pytest.approx(0.0005)
