"""Knee with an interval and steady state per step (issue 14): golden tests on constructed
records where the point is the math, and the mock, whose knee can be computed on paper."""

import json

import numpy as np

from llmbench.records.record import Record
from llmbench.results.schema import Step
from llmbench.analysis.stepstats import knee, mann_whitney_greater, steady_state
import llmbench as llmbench_api
from tests.helpers import llmbench, only_run


def _rec(i: int, step: int, start: float, ttft_ms: float, tokens: int = 5,
         itl_ms: float = 10.0) -> Record:
    times = [start + ttft_ms / 1000 + k * itl_ms / 1000 for k in range(tokens)]
    return Record(f"r{step}-{i}", scheduled=start, start=start, first_token=times[0],
                  end=times[-1], done=times[-1], token_times=times, ok=True,
                  output_tokens=tokens, step=step)


def _steps(ttft_held, ttft_broke, loads=(4.0, 6.0), limit_ms=400.0):
    """Two steps 10 s apart, each hold window 10 s with one request per TTFT value."""
    records, steps = [], []
    for idx, (load, values) in enumerate(zip(loads, (ttft_held, ttft_broke))):
        t0 = 100.0 + 20 * idx
        for i, v in enumerate(values):
            records.append(_rec(i, idx, t0 + 10 * i / len(values), v))
        p95 = float(np.percentile(values, 95))
        ok = p95 <= limit_ms
        steps.append(Step.from_dict({
            "index": idx, "load": load, "hold_start": t0, "hold_end": t0 + 10, "held": ok,
            "summary": {}, "checks": [{"threshold": f"ttft.p95<={limit_ms:g}ms", "ok": ok,
                                       "actual": p95, "limit": limit_ms, "metric": "ttft",
                                       "stat": "p95"}]}))
    return steps, records


def _judged(step: Step, held: bool, actual: float | None = None) -> None:
    step.held, step.state = held, "held" if held else "over"
    step.checks[0].ok = held
    if actual is not None:
        step.checks[0].actual = actual


def test_knee_interpolates_between_the_steps_with_an_interval():
    rng = np.random.default_rng(0)
    held = 300 + rng.normal(0, 3, 200)          # p95 about 305 ms
    broke = 500 + rng.normal(0, 3, 200)         # p95 about 505 ms
    steps, records = _steps(held, broke)
    k = knee(steps, records)
    v0, v1 = np.percentile(held, 95), np.percentile(broke, 95)
    paper = 4 + (400 - v0) / (v1 - v0) * 2
    assert abs(k.estimate - paper) < 1e-9
    lo, hi = k.ci
    assert 4 < lo <= k.estimate <= hi < 6 and hi - lo < 0.3
    assert k.reason is None
    # users come in whole: the stated answer is the most users under the limit, and the same
    # of the interval's ends; the fraction stays for the chart (issue 40: "3.5 [3.5, 3.5]")
    n, n_lo, n_hi = (int(np.floor(v)) for v in (paper, lo, hi))
    assert k.users == n and k.users_ci == [n_lo, n_hi]
    how = "interpolated between 4 and 6 users, 95 % interval"
    assert k.text == (f"Holds about {n} users [{n_lo}, {n_hi}] at ttft.p95<=400ms ({how})."
                         if n_lo < n_hi else f"Holds {n} users at ttft.p95<=400ms ({how}: the "
                         f"limit is crossed between {n} and {n + 1}).")


def test_knee_says_when_the_steps_are_too_coarse():
    rng = np.random.default_rng(1)
    # few requests and wide spreads: the interval covers the gap
    steps, records = _steps(rng.gamma(2, 120, 12), rng.gamma(2, 160, 12))
    _judged(steps[0], True)
    _judged(steps[1], False)
    k = knee(steps, records)
    if k.estimate is not None:
        assert k.reason is not None and "too coarse" in k.text
        assert "between 4 and 6 users" in k.text


def test_knee_not_monotone_between_the_steps():
    rng = np.random.default_rng(2)
    # the broken step is over the limit only by chance: resampled, it is often no worse
    held = 395 + rng.normal(0, 40, 30)
    broke = 398 + rng.normal(0, 40, 30)
    steps, records = _steps(held, broke)
    _judged(steps[0], True, 399.0)
    _judged(steps[1], False, 401.0)
    k = knee(steps, records)
    assert k.estimate is None or k.reason is not None
    assert "between 4 and 6 users" in k.text and "Holds about" not in k.text


def test_mann_whitney_matches_scipy():
    from scipy.stats import mannwhitneyu
    rng = np.random.default_rng(4)
    for _ in range(5):
        a, b = np.round(rng.normal(1, 1, 15), 1), np.round(rng.normal(0, 1, 11), 1)
        want = mannwhitneyu(a, b, alternative="greater", method="asymptotic").pvalue
        assert abs(mann_whitney_greater(a, b) - want) < 1e-12


def test_steady_state_golden():
    # a queue that grows: TTFT climbs through the hold, requests pile up in flight
    growing = [_rec(i, 0, 10 + i * 0.1, 50 + 40 * i, tokens=3) for i in range(100)]
    s = steady_state(growing, 0, 10.0, 20.0)
    assert s.drifting and s.p_value < 0.01 and s.in_flight[1] > s.in_flight[0]
    rng = np.random.default_rng(5)
    flat = [_rec(i, 0, 10 + i * 0.1, 50 + rng.normal(0, 5), tokens=3) for i in range(100)]
    assert not steady_state(flat, 0, 10.0, 20.0).drifting


COMMON = ["--model", "m", "--think", "0", "--turns", "1", "--prompt-tokens", "10",
          "--ramp-in", "0.3s", "--hold", "2s"]
COMMON_API = dict(model="m", think="0", turns=1, prompt_tokens=10, ramp_in="0.3s", hold="2s")


def test_knee_on_the_mock_lies_where_paper_puts_it(mock_factory, tmp_path):
    # 1 slot, fixed TTFT and ITL, no think time: with U users each request waits for the U-1
    # ahead of it, so TTFT = (U-1) * S + ttft, S = ttft + (tokens-1) * itl = 20 + 9*20 = 200 ms.
    # TTFT p50 <= 580 ms is crossed at U = 1 + (580-20)/200 = 3.8 users, between 3 and 4 (the
    # median: every TTFT is the same on paper, and the median shrugs off a busy machine's tail).
    m = mock_factory(ttft_ms=20, itl_ms=20, parallel=1, models=["m"])
    # the numbers, in this process through the API
    r = llmbench_api.ramp(url=m.url + "/v1", **COMMON_API, users="2,3,4", output_tokens=10,
                          threshold="ttft.p50<=580ms", out=tmp_path)
    # 4: a busy CI machine made the load generator lag; the knee is computed all the same
    assert r.exit_code in (0, 4), r.verdict
    run = json.loads((only_run(tmp_path) / "run.json").read_text())
    k = run["verdict"]["knee"]
    assert k["between"] == [3.0, 4.0] and k["threshold"] == "ttft.p50<=580ms", run["verdict"]
    lo, hi = k["ci"]
    assert 3.0 <= lo <= k["estimate"] <= hi <= 4.0
    # on paper 3.8; loopback and a busy machine add to each service time (a 15 % longer S puts
    # the crossing at 3.4, 25 % at 3.2), so the knee is judged against the service time the
    # mock delivered (from TTFT at 2 users: S + ttft), tightly, and it must stay above 3
    s_ms = run["steps"][0]["summary"]["median_ttft_ms"] - 20
    assert s_ms >= 200 - 10, s_ms                   # late timers make S longer, never shorter
    assert abs(k["estimate"] - (1 + (580 - 20) / s_ms)) < 0.25, (k, s_ms)
    # 3 held and 4 broke: no count of users lies between, so the knee states nothing more
    # than the verdict (the fraction is for the chart), and never "3.8 [3.8, 3.8] users"
    assert k["users"] == 3 and k["text"] is None, k
    said = json.dumps(run["verdict"])
    assert "Holds about" not in said and "Held 3 users. At 4 users" in run["verdict"]["result"]
    # a closed loop with a fixed number of users settles: no step is flagged as drifting
    assert not any(s["steady"]["drifting"] for s in run["steps"])


def test_an_overloaded_open_loop_step_is_flagged_as_still_drifting(mock_factory, tmp_path):
    # 1 slot serving ~60 ms requests (about 16/s): 4 req/s is comfortable, 40 req/s is not
    # and its queue grows for the whole hold
    m = mock_factory(ttft_ms=20, itl_ms=10, parallel=1, models=["m"])
    r = llmbench("ramp", "--url", m.url + "/v1", *COMMON, "--by", "rate", "--users", "4,40",
                 "--output-tokens", "5", "--threshold", "errors==0", "--keep-going",
                 "--out", str(tmp_path), timeout=180)
    assert r.returncode in (0, 4), r.stdout + r.stderr
    run = json.loads((only_run(tmp_path) / "run.json").read_text())
    calm, over = run["steps"]
    assert not calm["steady"]["drifting"], calm["steady"]
    assert over["steady"]["drifting"], over["steady"]
    assert run["verdict"]["drifting"] == [40.0]
    assert "At 40 req/s the step had not settled" in r.stdout
    assert "still drifting" in r.stdout
