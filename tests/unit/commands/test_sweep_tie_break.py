"""The sweep's tie-break sentence when a comparison was computed the other way round and must
be flipped: a bound of the change at -100 % (a bootstrap draw of 0) has no finite inverse."""

from __future__ import annotations

from llmbench.analysis.compare import AtLoad
from llmbench.analysis.sweep_judge import _break_tie, _inverse
from llmbench.results.schema import SweepSetting


def test_a_change_and_its_inverse():
    assert abs(_inverse(-0.5) - 1.0) < 1e-12 and abs(_inverse(1.0) + 0.5) < 1e-12
    assert _inverse(-1.0) is None and _inverse(-1.5) is None and _inverse(None) is None


def test_a_flipped_interval_reaching_minus_100_percent_is_unbounded_not_a_zero_division():
    # only (B, A) was computed: A's TTFT p95 is 100 ms against B's 800, the change's interval
    # reaches -100 %; read with A as the base, B's change is +700 % [+100 %, unbounded]
    tied = [SweepSetting(name="A"), SweepSetting(name="B")]
    pairs = {("B", "A"): {"ttft.p95": AtLoad("ttft.p95", base=800.0, other=100.0,
                                             change=-0.875, ci=[-1.0, -0.5], better="other")}}
    best, text = _break_tie(tied, "users", 2, lambda r: r.name, pairs, 2.0)
    assert best is tied[0], text
    assert "A did better: TTFT p95 100ms vs 800ms for B (+700 % against A, 95 % interval " \
           "+100 % to unbounded)" in text, text
