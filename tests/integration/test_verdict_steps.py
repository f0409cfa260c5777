"""Verdicts that explain the right step (issue 40 §2): the first step that broke after the last
that held, "not enough data" never a threshold failure, no step compared with itself, users
stated as whole numbers with real intervals, and a sweep setting that could not be judged is
not ranked. Pure cases on constructed steps where the wording is the point, and the mock where
the behaviour is."""

from __future__ import annotations


import llmbench
from llmbench.analysis.stepstats import knee
from llmbench.analysis.verdict import deciding_step, explain
from llmbench.results.schema import ramp_code
from llmbench.analysis.sweep_judge import answer
from llmbench.errors import EXIT_NOT_JUDGED, EXIT_OK, EXIT_THRESHOLD
from llmbench.records.record import Record
from llmbench.report.console import verdict_text
from llmbench.results.schema import Knee, Step, SweepSetting
from tests.helpers.api import ramp_exit_code, run_json

NED = "not enough data"


def _check(ok: bool, actual: float | None, insufficient: bool = False) -> dict:
    c = {"threshold": "ttft.p95<=2s", "ok": ok, "actual": actual, "limit": 2000.0,
         "metric": "ttft", "stat": "p95", "insufficient": insufficient}
    if insufficient:
        c["reason"] = "not enough data: 4 successful requests, p95 needs at least 5"
    return c


def _step(index: int, load: float, state: str, ttft95: float | None, itl50: float = 8.0,
          requests: int = 20) -> Step:
    t0 = 10.0 * index
    return Step.from_dict({"index": index, "load": load, "held": state == "held", "state": state,
            "hold_start": t0, "hold_end": t0 + 10, "ramp_start": t0, "monitor": {},
            "checks": [_check(state == "held", ttft95, insufficient=state == NED)],
            "summary": {"requests": requests, "completed": requests, "failed": 0,
                        "p95_ttft_ms": ttft95, "median_ttft_ms": None if ttft95 is None
                        else ttft95 / 2, "median_itl_ms": itl50, "p95_itl_ms": itl50 * 1.1,
                        "errors": {}, "error_statuses": {}, "error_samples": []}})


def test_the_verdict_explains_the_first_break_after_the_last_step_that_held():
    # issue 40: step 1 had 4 requests, 2 held, 4 broke with TTFT p95 4.43 s; the verdict read
    # "Held 2 users. At 1 users, not enough data ... Thresholds failed at the first step: exit 99"
    steps = [_step(0, 1, NED, 700.0, requests=4), _step(1, 2, "held", 765.0),
             _step(2, 4, "over", 4430.0)]
    samples = [{"t": 21.0 + i, "running": 2, "waiting": 2, "slots": 2} for i in range(5)]
    assert deciding_step(steps) is steps[2]
    v = explain(steps, [], "users", server_samples=samples, planned=3)
    assert v.text == "Held 2 users. At 4 users, TTFT p95 was 4.43 s, over 2.00 s."
    assert v.kind == "queuing" and v.compared == {"first_step": 2, "step": 4}
    text = verdict_text(v)
    assert "From 2 to 4 users: TTFT p95 765 ms -> 4.43 s" in text
    assert "It has 2 slots." in text and "Why: requests were queuing for slots." in text
    # the step with too few requests is said for what it is, never as a threshold failure
    assert "At 1 user, not enough data to decide" in text and "neither held nor broken" in text
    assert "From 1 " not in text and "too few requests to measure" not in text.split("Why")[1]
    # and the exit code follows the same step: a ramp that held and then broke answers, 0
    assert ramp_code(steps, v.kind) == EXIT_OK


def test_not_enough_data_is_never_a_threshold_failure():
    thin = [_step(0, 1, NED, 700.0, requests=4), _step(1, 2, NED, 800.0, requests=4)]
    v = explain(thin, [], "users")
    assert v.kind == "not_enough_data"
    assert v.text.startswith("No step could be judged. At 1 user, not enough data")
    # no answer at all (each step was held longer first): not 0, and not a threshold failure
    assert ramp_code(thin, v.kind) == EXIT_NOT_JUDGED
    # too few requests, then a step that broke with none held: that is a failed gate
    steps = [_step(0, 1, NED, 700.0, requests=4), _step(1, 2, "over", 3000.0)]
    v = explain(steps, [], "users")
    assert v.text == "Held 0 users. At 2 users, TTFT p95 was 3.00 s, over 2.00 s."
    assert ramp_code(steps, v.kind) == EXIT_THRESHOLD
    # a step that held after one that broke: nothing above the answer broke
    noisy = [_step(0, 1, "held", 500.0), _step(1, 2, "over", 2100.0),
             _step(2, 4, "held", 1900.0)]
    v = explain(noisy, [], "users")
    assert deciding_step(noisy) is None and v.kind == "held"
    assert v.text == "Held 4 users. No step above it broke."
    assert any("At 2 users a threshold broke" in e and "4 users held" in e
               for e in v.evidence)


def test_a_step_is_never_compared_with_itself():
    # "From 1 to 1 users: TTFT p95 765 ms -> 765 ms"
    for steps in ([_step(0, 1, "over", 2765.0)], [_step(0, 1, "held", 765.0)]):
        v = explain(steps, [], "users")
        text = verdict_text(v)
        assert "From " not in text and "-> " not in text, text
    v = explain([_step(0, 1, "over", 2765.0)], [], "users")
    assert v.kind == "other" and "no lighter load to compare it with" in verdict_text(v)
    # a lighter step with too few requests to judge still has latencies: compared, said rough
    v = explain([_step(0, 1, NED, 765.0, requests=4), _step(1, 2, "over", 2765.0)], [], "users")
    text = verdict_text(v)
    assert ("From 1 to 2 users: TTFT p95 765 ms -> 2.77 s, time between tokens (median) 8.0 ms "
            "-> 8.0 ms (1 user had too few requests to judge by: its figures are rough).") in text
    assert v.kind == "queuing" and v.text.startswith("Held 0 users. At 2 users")


def _rec(i: int, step: int, start: float, ttft_ms: float) -> Record:
    times = [start + ttft_ms / 1000 + k * 0.01 for k in range(5)]
    return Record(f"r{step}-{i}", scheduled=start, start=start, first_token=times[0],
                  end=times[-1], done=times[-1], token_times=times, ok=True,
                  output_tokens=5, step=step)


def _knee_steps(loads: tuple[float, float], ttfts: tuple[float, float]):
    """Two steps whose every request has the same TTFT: every resample crosses at one place."""
    steps, records = [], []
    for idx, (load, ttft) in enumerate(zip(loads, ttfts)):
        t0 = 100.0 + 20 * idx
        records += [_rec(i, idx, t0 + i * 0.1, ttft) for i in range(50)]
        ok = ttft <= 100
        steps.append(Step.from_dict({"index": idx, "load": load, "hold_start": t0, "hold_end": t0 + 10,
                      "held": ok, "state": "held" if ok else "over", "monitor": {},
                      "summary": {"requests": 50, "completed": 50, "failed": 0,
                                  "p95_ttft_ms": ttft, "median_ttft_ms": ttft,
                                  "median_itl_ms": 10.0},
                      "checks": [{"threshold": "ttft.p95<=100ms", "ok": ok, "actual": ttft,
                                  "limit": 100.0, "metric": "ttft", "stat": "p95"}]}))
    return steps, records


def test_the_knee_states_whole_users_and_no_zero_width_interval():
    # "Holds about 3.5 users [3.5, 3.5]": 45 ms at 3 users, 196 ms at 4 (a reference server)
    steps, records = _knee_steps((3, 4), (45.0, 155.0))
    k = knee(steps, records)
    assert abs(k.estimate - 3.5) < 1e-6 and k.users == 3     # the chart's fraction
    assert k.text is None          # no count of users lies between 3 and 4
    v = explain(steps, records, "users")
    assert "3.5" not in verdict_text(v) and "[" not in verdict_text(v)
    # steps 2 and 8 with the limit crossed at 5.2: five users hold, six would not
    steps, records = _knee_steps((2, 8), (40.0, 140.0))
    k = knee(steps, records)
    assert abs(k.estimate - 5.6) < 1e-9 and k.users == 5 and k.users_ci == [5, 5]
    assert k.text == ("Holds 5 users at ttft.p95<=100ms (interpolated between 2 and 8 users,"
                         " 95 % interval: the limit is crossed between 5 and 6).")
    # a rate ramp keeps its fraction, without an interval of no width
    k = knee(steps, records, unit="req/s")
    assert k.text.startswith("Holds about 5.6 req/s at ttft.p95<=100ms") and "[" not in k.text


def _setting(value: str, held: float | None, knee_: dict | None = None,
             status: str = "complete") -> SweepSetting:
    return SweepSetting.from_dict({"setting": {"NP": value}, "name": f"NP={value}",
                                   "status": status, "held": held, "knee": knee_,
                                   "held_interval": None})


def test_the_sweep_answer_reads_right():
    # "NP=1 and NP=4 both held 1 users; NP=4 holds more by the knee (...): 2.0 [1.9, 2.0]
    # vs 1 1.5 [1.5, 1.5]"
    a = _setting("1", 1, {"estimate": 1.5, "ci": [1.5, 1.5], "users": 1, "users_ci": [1, 1],
                          "threshold": "ttft.p95<=2s"})
    b = _setting("4", 1, {"estimate": 1.97, "ci": [1.9, 1.99], "users": 1, "users_ci": [1, 1],
                          "threshold": "ttft.p95<=2s"})
    text, best = answer([a, b], "users", {}, 2.0)
    assert text.startswith("NP=1 and NP=4 both held 1 user;"), text
    assert "1 users" not in text and "vs 1 " not in text and "[1.5, 1.5]" not in text
    # whole users, both 1: the knee does not separate them, so it is not said to
    assert "by the knee" not in text and best is None
    # held 2 each, the knee at 3 [3, 4] users against 2 [2, 2]: separated in whole users
    a.held = b.held = 2
    a.knee = Knee(estimate=2.1, ci=[2.0, 2.3], users=2, users_ci=[2, 2],
                  threshold="ttft.p95<=2s")
    b.knee = Knee(estimate=3.4, ci=[3.1, 4.2], users=3, users_ci=[3, 4],
                  threshold="ttft.p95<=2s")
    text, best = answer([a, b], "users", {}, 2.0)
    assert best is b and text.startswith("NP=1 and NP=4 both held 2 users; NP=4 holds more by "
                                         "the knee"), text
    assert "3 [3, 4] against 2 for NP=1" in text
    # [2, 3] meets [2, 2]: no decision by the knee
    b.knee.users_ci = [2, 3]
    assert "by the knee" not in answer([a, b], "users", {}, 2.0)[0]


def test_a_sweep_setting_that_could_not_be_judged_is_not_ranked(tmp_path):
    # issue 40: `sweep --setting itl_ms=10,150 --mock --users 1,2 --hold 5s ...` ranked the slow
    # setting, whose steps were all "not enough data", as "held 0" and let it lose. A step with
    # too few requests is held longer now (up to 4 holds: 6 s), so the slow setting's requests
    # take 7 s (600 ms x 12 tokens): none can be judged even held longest
    r = llmbench.sweep(setting=["itl_ms=10,600"], mock=True, users="1", hold="1500ms",
                       ramp_in="300ms", think="0", output_tokens=12, turns=1, prompt_tokens=10,
                       generator_lag_limit="2000ms", out=tmp_path, progress=False)
    slow = next(x for x in r.results if x.setting == {"itl_ms": "600"})
    fast = next(x for x in r.results if x.setting == {"itl_ms": "10"})
    assert slow.status == "not_judged" and slow.held is None, slow
    assert fast.held == 1
    assert "itl_ms=600 could not be judged" in r.answer and "held 0" not in r.answer
    assert r.answer.startswith("Only itl_ms=10 could be judged: it held 1 user "), r.answer
    assert r.exit_code == EXIT_OK


def test_a_sweep_that_judged_nothing_exits_7_saying_what_to_change(tmp_path):
    # issue 45: `sweep ... --users 1,2,4 --hold 10s` answered "No setting could be judged" and
    # exited 0; each step is held longer first (4 holds: 4 s), and with replies of ~7 s (600 ms
    # x 12 tokens) still none can be judged: no answer, exit 7, one line saying what to change
    r = llmbench.sweep(setting=["itl_ms=600"], mock=True, users="1", hold="1s",
                       ramp_in="300ms", think="0", output_tokens=12, turns=1, prompt_tokens=10,
                       generator_lag_limit="2000ms", out=tmp_path, progress=False)
    assert r.exit_code == EXIT_NOT_JUDGED
    assert r.answer.startswith("No setting could be judged."), r.answer
    assert "hold each step longer (--hold) or think less (--think)" in r.answer
    assert "\n" not in r.answer


def test_a_ramp_on_the_mock_explains_the_step_after_the_last_that_held(mock_factory, tmp_path):
    # 2 slots, each request ~0.7 s (100 ms TTFT + 30 gaps of 20 ms), no think time, 2.5 s
    # holds: 1 user starts at most 4 requests in its hold (p95 needs 5: not enough data),
    # 2 users 6-7 on their own slots (held), 4 users wait a whole request for a slot (over)
    m = mock_factory(ttft_ms=100, itl_ms=20, parallel=2)
    r = llmbench.ramp(url=m.url + "/v1", model="mock", users="1,2,4", ramp_in="500ms",
                      hold="2500ms", think="0", turns=1, prompt_tokens=10, output_tokens=31,
                      threshold="ttft.p95<=350ms", keep_going=True,
                      generator_lag_limit="2000ms", out=tmp_path, progress=False)
    steps = run_json(r)["steps"]
    # the 1-user step had too few requests in 2.5 s: it was held longer (issue 45), up to 4
    # holds, until it could be judged, instead of being reported as "not enough data"
    assert [s["state"] for s in steps] == ["held", "held", "over"], [
        (s["state"], s["summary"]["requests"]) for s in steps]
    assert steps[0]["hold_end"] - steps[0]["hold_start"] >= 4.9
    assert steps[1]["hold_end"] - steps[1]["hold_start"] < 4.9
    v = r.verdict
    assert v.text.startswith("Held 2 users. At 4 users, TTFT p95 was"), v.text
    assert v.kind == "queuing"
    assert run_json(r)["verdict"] == v.to_dict()
    text = verdict_text(v)
    assert "It has 2 slots." in text, text
    assert ramp_exit_code(r) == EXIT_OK


def test_one_user_is_one_user_and_an_interval_has_width():
    # "Held 1 users", "At 1 users the step had not settled", "1 held 2 [2, 2]": a load of one
    # is singular in every sentence, and repeats that all held the same give no interval
    from llmbench.analysis.stepstats import drift_sentence
    from llmbench.analysis.sweep_judge import _fmt_held
    from llmbench.results.schema import HeldInterval, Steady, amount
    assert (amount(1), amount(4), amount(2.5, "req/s")) == ("1 user", "4 users", "2.5 req/s")
    held, broke = _step(0, 1, "held", 100.0), _step(1, 2, "over", 100.0)
    broke.checks[0].threshold, broke.checks[0].metric, broke.checks[0].stat = \
        "errors==0", "errors", None
    assert knee([held, broke], [], "users").text == "Held 1 user, broke at 2."
    held.steady = Steady(in_flight=[1.0, 3.0], ttft_p50_ms=[None, None],
                         ttft_p95_ms=[None, None], p_value=None, drifting=True, why="queue")
    assert drift_sentence(held, "users").startswith("At 1 user the step had not settled")
    same = _setting("1", 2)
    same.held_interval = HeldInterval(median=2, low=2, high=2)
    wide = _setting("4", 6)
    wide.held_interval = HeldInterval(median=6, low=5, high=7)
    assert (_fmt_held(same), _fmt_held(wide)) == ("2", "6 [5, 7]")
    text, best = answer([same, wide], "users", {}, 1.0)
    assert best is wide and text.startswith("NP=4 held the most users (6 [5, 7]); "), text
    assert text.endswith("; 1 held 2.") and "[2, 2]" not in text, text


def test_the_send_delay_has_its_median():
    # the summary writes the send delay's p50 ("p50_send_delay_ms"): its Metric had median None
    from llmbench.analysis.metrics import summarize
    recs = [Record(f"r{i}", scheduled=1.0 + i, start=1.0 + i, sent=1.0 + i + 0.001 * (i + 1),
                   token_times=[1.5 + i, 1.6 + i], first_token=1.5 + i, end=1.6 + i,
                   done=1.6 + i, ok=True, output_tokens=2) for i in range(9)]
    s = summarize(recs)
    assert s.send_delay.median is not None and abs(s.send_delay.median - 5.0) < 1e-6
    assert s.send_delay.median == s.send_delay.p50
    flat = s.to_dict()
    assert "p50_send_delay_ms" in flat and "median_send_delay_ms" not in flat
    assert type(s).from_dict(flat).send_delay.median == s.send_delay.median


def test_an_interrupted_setting_that_held_nothing_is_no_answer_not_held_0():
    # issue 45: an interrupted sweep said "held 0" for the setting it stopped in
    from llmbench.results.schema import SweepSetting
    done = SweepSetting(setting={"NP": "1"}, name="NP=1", status="complete", held=2.0)
    cut = SweepSetting(setting={"NP": "2"}, name="NP=2", status="interrupted", held=None)
    text, best = answer([done, cut], "users")
    assert "held 0" not in text and "NP=2 was interrupted before any step held" in text, text
    assert best is done
