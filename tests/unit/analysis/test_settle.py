"""analysis.settle on records made by hand, with the counts worked on paper: when a search's
step may end its hold early, and when it must not (censored requests, bursts, warm-up)."""

from __future__ import annotations

from llmbench.analysis import settle as st
from llmbench.analysis.slo import parse_threshold
from llmbench.records.record import Record

P95 = [parse_threshold("ttft.p95<500ms")]
SERVICE_S = 2.0


def rec(user: int, start: float, ttft_s: float | None, done: bool = True, ok: bool = True,
        step: int = 0) -> Record:
    """A request of ``user`` started at ``start``; ``ttft_s`` None: no token yet."""
    times = [] if ttft_s is None else [start + ttft_s, start + ttft_s + SERVICE_S]
    if not done and ttft_s is not None:
        times = times[:1]
    return Record(request_id=f"{user}-{start}", scheduled=start, start=start,
                  token_times=times, ok=ok and done, user=user, step=step,
                  done=times[-1] if done and times else 0.0,
                  error_kind=None if ok else "http")


def cycle(users: int, turns: int, ttft_s: float, gap_s: float = 3.0, t0: float = 0.0
          ) -> list[Record]:
    return [rec(u, t0 + 0.1 * u + k * gap_s, ttft_s) for u in range(users)
            for k in range(turns)]


def ask(records, active=(), users=4, now=100.0, why="grow", gates=P95):
    return st.settle(gates, records, active, 0, users, 0.0, now, why)


def test_binomial_bounds_on_paper():
    # 59 requests none over rule out 5 % at 95 % (0.95^59 = 0.048); 58 do not (0.051)
    assert st.share_test(0, 59, 0.05) is True
    assert st.share_test(0, 58, 0.05) is None
    # 4 over of 20: P(Bin(20, .05) >= 4) = 0.016 < 5 %; 3 of 20: 0.075
    assert st.share_test(4, 20, 0.05) is False
    assert st.share_test(3, 20, 0.05) is None


def test_a_growing_step_ends_held_so_far_once_each_user_has_two_turns_none_over():
    got = ask(cycle(4, 2, 0.3))
    assert got is not None and got.ended == st.HELD_SO_FAR
    assert "8 of 8 TTFTs under 500 ms" in got.why
    # one user with a single turn known: not yet (its first turn may come before a queue)
    assert ask(cycle(4, 2, 0.3)[:-1]) is None
    # a step aimed at the limit, or its confirmation, is never held so far
    assert ask(cycle(4, 2, 0.3), why="aim") is None
    assert ask(cycle(4, 2, 0.3), why="confirm") is None


def test_held_beyond_doubt_needs_59_requests_none_over_even_when_confirming():
    assert ask(cycle(4, 14, 0.3), why="confirm") is None              # 56 requests
    got = ask(cycle(4, 15, 0.3), why="confirm")                       # 60
    assert got is not None and got.ended == st.HELD and "at 95 %" in got.why


def test_a_request_still_waiting_past_the_limit_counts_over_and_a_fresh_one_not_at_all():
    done = cycle(4, 2, 0.3)
    waiting = rec(9, 99.0, None, done=False)      # 1 s without a first token: over
    got = ask(done, [waiting], users=5)
    assert got is None                            # user 9 has one turn; and one is over
    fresh = rec(9, 99.8, None, done=False)        # 0.2 s in: not known yet, not counted
    k = st.known(P95[0], done, [fresh], 100.0, 4)
    assert (k.n, k.over) == (8, 0)
    k = st.known(P95[0], done, [waiting], 100.0, 4)
    assert (k.n, k.over) == (9, 1)
    # a request that started less than the limit before now is left out even when finished
    # quick: else the quick ones would be read before the slow ones of the same moment
    quick = rec(3, 99.7, 0.1)
    assert st.known(P95[0], done + [quick], [], 100.0, 4).n == 8


def test_broken_beyond_doubt_ends_any_step_early():
    # 20 requests spread over a minute, 6 over, each wait alone: 6 independent misses
    recs = [rec(u, 3.0 * k + 0.5 * u, 0.9 if k % 3 == 0 and u < 3 else 0.3)
            for u in range(4) for k in range(5)]
    over = sum(1 for r in recs if r.ttft >= 0.5)
    assert over == 6
    got = ask(recs, why="confirm")
    assert got is not None and got.ended == st.BROKE and "6 of 20 TTFTs over" in got.why


def test_one_burst_of_overlapping_waits_is_not_taken_for_many_misses():
    # 40 requests, 4 over, all four waiting at the same moment (one queue episode): as 4
    # independent misses of 40 it would not break (P = 0.14), but neither may it hold: it
    # is one burst, so n counts as 40 / 4 = 10 with 1 miss
    base = cycle(4, 10, 0.3)
    burst = [rec(10 + i, 50.0 + 0.05 * i, 0.8) for i in range(4)]
    k = st.known(P95[0], base + burst, [], 100.0, 4)
    assert (k.over, k.bursts) == (4, 1)
    # a server overloaded throughout is many bursts, one per service time (the median E2EL,
    # 3.5 s), not one: waits from 0 to 30.8 s are 9 of them
    flood = [rec(u, 1.0 * k + 0.1 * u, 1.5) for u in range(4) for k in range(30)]
    k = st.known(P95[0], flood, [], 100.0, 4)
    assert k.over == 120 and k.bursts == 9
    got = ask(flood, why="grow")
    assert got is not None and got.ended == st.BROKE


def test_a_failure_breaks_errors_at_once_and_other_thresholds_keep_a_step_from_holding():
    gates = [parse_threshold(x) for x in ("ttft.p95<500ms", "errors==0")]
    recs = cycle(4, 2, 0.3) + [rec(2, 50.0, None, ok=False)]
    got = ask(recs, gates=gates)
    assert got is not None and got.ended == st.BROKE and "1 request failed" in got.why
    mean = [parse_threshold(x) for x in ("ttft.p95<500ms", "ttft.mean<400ms")]
    assert ask(cycle(4, 20, 0.3), gates=mean, why="confirm") is None


def test_the_answer_says_a_confirmation_that_settled_early_held_beyond_doubt():
    from llmbench.analysis.findlimit import finish_text
    from llmbench.results.search import Search, Trial
    trials = [Trial(index=0, load=4, why="grow", held=True, hold_s=21.0, ended="held_so_far"),
              Trial(index=1, load=5, why="grow", held=False, hold_s=3.2, ended="broke"),
              Trial(index=2, load=4, why="confirm", held=True, hold_s=42.7, ended="held")]
    s = Search(trials=trials, limit=4, broke_at=5, confirmed=True, sustain_s=60.0,
               stopped="found", elapsed_s=100.0)
    assert "confirmed in 43 s (held beyond doubt at 95 %)" in finish_text(s, "users").text
    trials[-1].ended = "full"
    assert "confirmed for 1 min." in finish_text(s, "users").text


def test_the_default_thresholds_end_a_growing_step_held_so_far_and_no_other():
    gates = [parse_threshold(x) for x in
                         ("ttft.p95_all<=2s", "itl.p95<=200ms", "errors==0")]
    recs = cycle(4, 2, 0.3)
    for r in recs:                       # 10 token events 20 ms apart
        r.token_times[:] = [r.start + 0.3 + 0.02 * k for k in range(10)]
    got = ask(recs, gates=gates)
    assert got is not None and got.ended == st.HELD_SO_FAR
    assert "every token gap of 8 replies within 200 ms" in got.why
    # no bound is claimed on the gaps: a step aimed at the limit holds in full
    assert ask(recs, gates=gates, why="aim") is None
    # one reply with a gap over the limit (rec's two events, 2 s apart): not settled
    assert ask(recs + [rec(1, 20.0, 0.3)], gates=gates) is None


def test_a_hold_that_runs_out_says_what_its_checks_stood_at():
    def final(records, why="aim", users=4, gates=P95):
        return st.settle(gates, records, (), 0, users, 0.0, 100.0, why, final=True)
    # 40 requests none over, aimed at the limit: not held beyond doubt (59 needed), so full
    got = final(cycle(4, 10, 0.3))
    assert got is not None and got.ended == st.FULL and abs(got.after_s - 100.0) < 1e-9
    assert got.text == ("held the full 100.0 s: 0 of 40 TTFTs over 500 ms: under the 59 that "
                        "rule out 5 % at 95 %")
    # the same asked before the hold ran out: not settled, nothing to say yet
    assert ask(cycle(4, 10, 0.3), why="aim") is None
    # 2 of 40 over (two bursts, far apart): 5 % is neither ruled out nor exceeded
    recs = cycle(4, 10, 0.3)
    recs[0] = rec(0, 0.0, 0.9)
    recs[-1] = rec(3, recs[-1].start, 0.9)
    got = final(recs)
    assert got.ended == st.FULL and "2 of 40 TTFTs over 500 ms: neither over nor under 5 % " \
        "beyond doubt at 95 %" in got.why, got.why
    # too few to judge at all
    got = final(cycle(1, 3, 0.3), users=1)
    assert got.why == "3 TTFTs known, under the 5 a p95 needs"
    # a threshold this module cannot bound says so
    mean = [parse_threshold("ttft.mean<500ms")]
    got = final(cycle(4, 10, 0.3), gates=mean)
    assert got.ended == st.FULL and got.why == "ttft.mean<500ms is judged on the whole hold only"
    # settled at the last ask: how it settled, not full
    got = final(cycle(4, 2, 0.3), why="grow")
    assert got.ended == st.HELD_SO_FAR and got.text.startswith("settled after 100.0 s: ")
