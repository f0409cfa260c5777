"""``ramp --find`` with a percentile threshold: a step ends its hold as soon as its checks are
settled (analysis.settle), says how long it held and why, and the search still lands on the
paper limit. A closed loop (think 0) against P slots, each reply S long: P users are each
served at once (TTFT = the mock's ttft); N > P users wait (N/P - 1) x S each turn on average
(Little's law; with the replies' fixed length every request waits about that long). A p95
limit of ttft + S / (2P) (halfway between P and P + 1 users) holds at P and breaks at P + 1,
where most requests wait S / P: beyond doubt within a few turns. Talks HTTP to a real mock."""

from __future__ import annotations

import json

import pytest

import llmbench

TTFT_MS, ITL_MS, TOKENS = 50.0, 10.0, 40
SERVICE_MS = TTFT_MS + (TOKENS - 1) * ITL_MS


@pytest.mark.parametrize("slots", [1, 3, 8])
def test_find_settles_steps_early_says_why_and_lands_on_the_slots(mock_factory, tmp_path,
                                                                  slots):
    m = mock_factory(ttft_ms=TTFT_MS, itl_ms=ITL_MS, parallel=slots)
    limit_ms = TTFT_MS + SERVICE_MS / (2 * slots)
    hold_s = 20.0
    r = llmbench.ramp(url=m.url + "/v1", model="mock", find=True, output_tokens=TOKENS,
                      threshold=[f"ttft.p95<{limit_ms:.0f}ms"], out=tmp_path, ramp_in="0.5s",
                      hold=f"{hold_s:g}s", sustain="5s", think="0", turns=1, prompt_tokens=10,
                      generator_lag_limit="2000ms")
    s = r.search
    assert s is not None and s.stopped == "found", (s and s.text)
    assert abs(s.limit - slots) <= 1, s.text
    # every step says how its hold ended; a step that broke settled long before its 20 s
    trials = [(t.load, t.why, t.held, t.hold_s, t.ended, t.ended_why) for t in s.trials]
    assert all(t.ended in ("held", "held_so_far", "broke", "full") for t in s.trials), trials
    broke = [t for t in s.trials if t.held is False]
    assert broke, trials
    for t in broke:
        assert t.ended == "broke" and t.hold_s < hold_s / 2, trials
        assert t.ended_why.startswith("settled after ") and "TTFTs over" in t.ended_why
    # a step held in full says what its TTFTs stood at when its hold ran out
    for t in s.trials:
        if t.ended == "full":
            assert t.ended_why.startswith("held the full ") and " TTFTs " in t.ended_why, trials
    # only a step growing the load may end "held so far"; the confirmation never does
    for t in s.trials:
        assert t.ended != "held_so_far" or t.why == "grow", trials
    # each step's window in run.json is as long as the hold its trial says it had
    by_index = {st.index: st for st in r.steps}
    for t in s.trials:
        st = by_index[t.index]
        assert abs((st.hold_end - st.hold_start) - t.hold_s) < 0.6, (t.load, t.hold_s)
    # and run.json keeps it, typed, as the trial's fields
    doc = json.loads((r.path / "run.json").read_text())
    assert [t.get("ended") for t in doc["search"]["trials"]] == [t.ended for t in s.trials]
    # the report's table of the search's steps says it too
    html = (r.path / "report.html").read_text()
    assert html.count("settled after ") >= sum(1 for t in s.trials if t.ended != "full")
