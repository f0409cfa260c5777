"""Users who give up (--abandon), the pure parts: the flag's values, cancelled requests in the
summary (their own outcome, kept in the failure-aware percentiles), and the check that the
server let go of what they held, on records and server samples built by hand."""

from __future__ import annotations

import pytest

from llmbench.analysis.abandon import RELEASE_WITHIN_S, abandonment, cancelled_counts, release_check
from llmbench.analysis.metrics import summarize
from llmbench.analysis.slo import check_all, parse_threshold
from llmbench.client.abandon import Abandon, parse_abandon
from llmbench.errors import UsageError
from llmbench.records.record import Record
from llmbench.results.schema import Findings, Run, RunState, Summary


def rec(i, start, times, ok=True, kind=None, done=None):
    r = Record(f"r-{i}", scheduled=start, start=start, token_times=list(times), ok=ok,
               error_kind=kind, status=200, output_tokens=len(times) or None)
    if times:
        r.first_token, r.end = times[0], times[-1]
    r.done = done if done is not None else ((times[-1] if times else start) + 0.001)
    return r


# -- the flag ------------------------------------------------------------------------------------
def test_the_two_behaviours_parse_alone_and_together():
    a = parse_abandon("after=2s")
    assert (a.after_s, a.share, a.after_tokens) == (2.0, 0.0, None)
    b = parse_abandon("share=0.2,after-tokens=20")
    assert (b.after_s, b.share, b.after_tokens) == (None, 0.2, 20)
    c = parse_abandon(["after=500ms", "share=25%,after_tokens=5", "seed=3"])
    assert (c.after_s, c.share, c.after_tokens, c.seed) == (0.5, 0.25, 5, 3)
    assert c.text() == "after=0.5s,share=0.25,after-tokens=5"
    assert parse_abandon(None) is None and parse_abandon([]) is None


@pytest.mark.parametrize("text, says", [
    ("2s", "has no value"),
    ("after=", "has no value"),
    ("after=soon", "--abandon after="),
    ("after=0", "must be above 0"),
    ("after=-1s", "must not be negative"),
    ("patience=2s", "unknown key 'patience'"),
    ("share=0.2", "add after-tokens=N"),
    ("after-tokens=10", "add share=P"),
    ("share=1.5,after-tokens=3", "at most 1"),
    ("share=0,after-tokens=3", "above 0"),
    ("share=abc,after-tokens=3", "is not a number"),
    ("share=0.2,after-tokens=0", "at least 1"),
    ("share=0.2,after-tokens=2.5", "not a whole number"),
    ("after=1s,after=2s", "given twice"),
    ("seed=1", "expected after=DURATION"),
])
def test_a_bad_value_is_one_line_naming_the_flag(text, says):
    with pytest.raises(UsageError) as e:
        parse_abandon(text)
    msg = str(e.value)
    assert msg.startswith("--abandon") and says in msg and "\n" not in msg, msg


def test_the_stop_draw_is_seeded_and_near_its_share():
    draw = Abandon(share=0.3, after_tokens=4, seed=7).chooser()
    picks = [draw.stop_after() for _ in range(2000)]
    again = Abandon(share=0.3, after_tokens=4, seed=7).chooser()
    assert picks == [again.stop_after() for _ in range(2000)]
    assert set(picks) == {None, 4}
    assert picks.count(4) / 2000 == pytest.approx(0.3, abs=0.04)


# -- the summary: their own outcome ------------------------------------------------------------
def _mixed():
    ok = [rec(i, 0.0, [0.1 + 0.01 * i + 0.01 * k for k in range(5)]) for i in range(10)]
    waited = rec(10, 0.0, [], ok=False, kind="cancelled", done=2.0)        # no first token
    stopped = rec(11, 0.0, [0.05, 0.06, 0.07], ok=False, kind="cancelled")  # pressed stop
    failed = rec(12, 0.0, [], ok=False, kind="http_status")
    return ok + [waited, stopped, failed]


def test_cancelled_requests_are_counted_apart_from_failures():
    s = summarize(_mixed())
    assert (s.requests, s.completed, s.failed) == (13, 10, 1)
    assert (s.cancelled, s.cancelled_waiting) == (2, 1)
    assert s.cancel_rate == pytest.approx(2 / 13)
    assert s.error_rate == pytest.approx(1 / 13)          # a user who gave up is no error
    assert s.errors == {"http_status": 1}
    d = s.to_dict()
    assert (d["cancelled"], d["cancelled_waiting"]) == (2, 1)
    # and it reads back
    back = Summary.from_dict(d)
    assert (back.cancelled, back.cancelled_waiting, back.cancel_rate) == (2, 1, d["cancel_rate"])


def test_cancelled_stay_in_the_failure_aware_percentiles():
    s = summarize(_mixed())
    # TTFT incl. failures: 10 successes, the stopped reply's real 50 ms, and two +inf (the
    # failure and the user who gave up waiting): 13 values
    assert s.ttft.n_all == 13
    ttfts = sorted([100.0 + 10 * i for i in range(10)] + [50.0])
    # the median of 13 is the 7th value: the 11 known values' 7th
    assert s.ttft.all_percentiles[50.0] == pytest.approx(ttfts[6])
    assert s.ttft.all_percentiles[95.0] == float("inf")
    # E2EL incl. failures: both cancelled count as never answered in full (3 of 13 are +inf)
    e2els = sorted(100.0 + 10 * i + 40 for i in range(10))
    assert s.e2el.all_percentiles[50.0] == pytest.approx(e2els[6])
    # vLLM's successes-only figures do not see them
    assert s.ttft.n == 10
    assert s.ttft.max == pytest.approx(190.0)


def test_a_threshold_on_the_cancel_rate_and_the_failure_aware_p95_catch_them():
    s = summarize(_mixed())
    got = check_all([parse_threshold("cancel_rate<=10%"), parse_threshold("ttft.p95_all<=2s"),
                     parse_threshold("errors<=1")], s)
    assert [c.ok for c in got] == [False, False, True]


def test_a_run_with_no_cancellation_has_no_cancel_keys():
    s = summarize([rec(i, 0.0, [0.1, 0.2]) for i in range(3)])
    d = s.to_dict()
    assert not any("cancel" in k for k in d)


def test_counts_of_a_run():
    assert cancelled_counts(_mixed()) == (13, 2, 1, 1)


# -- the release check ---------------------------------------------------------------------------
def _samples(ts, running, waiting=0):
    return [{"t": t, "running": r, "waiting": waiting} for t, r in zip(ts, running)]


def test_a_server_that_frees_closed_requests_passes():
    # two users, each request 1 s; the second user's request at 3 s is cancelled after 0.2 s;
    # the server counts what llmbench has open
    recs = [rec(0, 0.1, [0.5, 1.0]), rec(1, 1.0, [1.5, 2.0]), rec(2, 2.0, [2.5, 3.0]),
            rec(3, 3.0, [], ok=False, kind="cancelled", done=3.2), rec(4, 4.0, [4.5, 5.0])]
    samples = _samples([0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5], [1, 1, 1, 0, 1, 0, 0, 0])
    rel = release_check(recs, samples, t0=0.0, kind="mock")
    assert rel.ok is True and rel.cancelled == 1 and rel.over_samples == 0
    assert "freed what they held within 3 s" in rel.text


def test_a_server_that_keeps_decoding_for_closed_connections_is_named():
    # the cancelled request at 3 s goes on at the server for 6 s more
    recs = [rec(0, 0.1, [0.5, 1.0]), rec(3, 3.0, [], ok=False, kind="cancelled", done=3.2)]
    samples = _samples([0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5, 9.5],
                       [1, 0, 0, 1, 1, 1, 1, 1, 1, 0])
    rel = release_check(recs, samples, t0=0.0, kind="llamacpp")
    assert rel.ok is False
    # open until 3.2: samples from 6.5 (3.2 + 3 s, the stated time) to 8.5 count one too many
    assert rel.over_samples == 3 and rel.max_excess == 1.0
    assert rel.longest_from_s == pytest.approx(6.5)
    assert "did NOT free" in rel.text and "llamacpp" in rel.text


def test_one_late_sample_is_a_race_not_a_finding():
    recs = [rec(0, 0.1, [0.5, 1.0]), rec(3, 3.0, [], ok=False, kind="cancelled", done=3.2)]
    samples = _samples([1.5, 6.5, 7.5], [0, 1, 0])
    assert release_check(recs, samples, t0=0.0).ok is True


def test_no_running_count_or_nothing_cancelled_is_said_not_guessed():
    recs = [rec(3, 3.0, [], ok=False, kind="cancelled", done=3.2)]
    rel = release_check(recs, [{"t": 1.0, "kind": "ollama"}])
    assert rel.ok is None and "could not be checked" in rel.text
    plain = release_check([rec(0, 0.0, [0.5])], _samples([1.0], [0]))
    assert plain.ok is None and "No request was cancelled" in plain.text


def test_the_run_part_round_trips():
    a = abandonment(Abandon(after_s=2.0), _mixed(), _samples([0.5, 1.5], [1, 0]), 0.0, "mock")
    assert a is not None and (a.cancelled, a.waiting, a.streaming) == (2, 1, 1)
    assert a.release.within_s == RELEASE_WITHIN_S
    run = Run(RunState(kind="run"), findings=Findings(abandonment=a))
    back = Run.from_dict(run.to_dict())
    assert back.findings.abandonment == a
    assert "Users gave up on 2 of 13 requests" in a.sentence()
    assert abandonment(None, _mixed(), []) is None
