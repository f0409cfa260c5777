"""Thresholds on agent sessions (issue 35 part 2) through the one parser: session.p95<=120s,
step_ttft.p95<=5s and the session scalars, judged on the window's sessions."""

from __future__ import annotations

import pytest

from llmbench.analysis.slo import ThresholdError, check_all, parse_threshold, verdict_of
from llmbench.results.sessions import Dist, Sessions
from llmbench.results.schema import Summary


def sessions(n: int, median_ms: float, failed: int = 0) -> Sessions:
    d = Dist(n=n, mean=median_ms, median=median_ms, p90=median_ms * 1.5,
             p95=median_ms * 2 if n else None, max=median_ms * 3)
    return Sessions(started=n + failed, completed=n, failed=failed, duration=d,
                    step_ttft=Dist(n=n * 5, median=400.0, p95=1500.0), call_steps=20,
                    text_replies=3, sessions_per_min=4.0, cached_share=0.8)


def test_session_thresholds_parse_into_the_sessions_metrics():
    t = parse_threshold("session.p95<=120s")
    assert (t.metric, t.stat, t.value, t.on_sessions) == ("session", "p95", 120000.0, True)
    assert parse_threshold("step_ttft.p95<=5s").value == 5000.0
    assert parse_threshold("session.median<=2s").stat == "median"
    assert parse_threshold("text_reply_share<=10%").value == pytest.approx(0.1)
    assert parse_threshold("session_steps.max<=40").value == 40
    for bad, why in (("session.within(2s)>=90%", "within"), ("session_steps.p95<=4s", "no unit"),
                     ("sessions_per_min.p95>=2", "no statistic"), ("session.p97<=2s", "unknown statistic"),
                     ("sessions_completed>=2%", "% only fits")):
        with pytest.raises(ThresholdError, match=why):
            parse_threshold(bad)


def test_they_are_judged_on_the_windows_sessions():
    ts = [parse_threshold(x) for x in ("session.p95<=120s", "step_ttft.p95<=1s",
                                       "sessions_per_min>=2", "text_reply_share<=10%",
                                       "session_cached_share>=50%")]
    got = check_all(ts, Summary(), sessions(10, 40000.0))
    assert [c.ok for c in got] == [True, False, True, False, True]
    assert got[0].text == "session.p95<=120s: 80.00 s"
    assert got[3].text == "text_reply_share<=10%: 15.0%"
    # too few completed sessions for a p95 (5): not enough data, unless sessions failed
    few = check_all(ts[:1], Summary(), sessions(3, 40000.0))
    assert verdict_of(few) == "not enough data" and "3 completed sessions" in few[0].reason
    broke = check_all(ts[:1], Summary(), sessions(3, 40000.0, failed=2))
    assert verdict_of(broke) == "over" and "2 of 5 sessions failed" in broke[0].reason
    # a window with no agent session at all
    none = check_all(ts[:1], Summary(), None)
    assert verdict_of(none) == "not enough data" and "no agent session" in none[0].reason
