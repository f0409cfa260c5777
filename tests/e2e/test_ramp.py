"""The ramp against the mock, where paper predicts the answer; the verdict and the thresholds."""

import json
import signal
import subprocess
import sys
import time

import pytest

from llmbench.records.record import Record
from llmbench.analysis.slo import ThresholdError, check_all, parse_threshold
from llmbench.analysis.stats import served_at_once
from llmbench.analysis.verdict import explain, result_line
from llmbench.results.schema import Step, Summary
from tests.helpers import ROOT, free_port
from tests.helpers import ENV, llmbench, only_run
from tests.helpers.busy import said_busy, unless_busy

FAST = ["--ramp-in", "0.5s", "--hold", "3s", "--think", "0", "--turns", "1",
        "--prompt-tokens", "10", "--output-tokens", "20"]
# Tests that are not about the load generator's own verdict must not depend on an idle machine:
# on a shared CI box other processes lag llmbench's event loop by tens of ms (exit 4 otherwise).
BUSY_OK = ["--generator-lag-limit", "2000ms"]


def test_one_slot_stops_where_paper_predicts_and_says_queuing(mock_factory, tmp_path):
    # S = 50 ms + 19 x 10 ms = 240 ms; with think 0, N users wait (N-1) x S for the slot:
    # TTFT ~ 50, 290, 530, 770 ms for 1..4 users -> 3 hold a median under 650 ms, 4 do not.
    # The limit is half way (120 ms, 18%, either side) and on the median: it moves with the
    # pace measured before the ramp (below), which may read a few % off the one the ramp's
    # gaps then show (two busy loops: 1.12 against 1.03, and a p95 limit of 740 ms x 1.12 let
    # 4 users hold at ~790 ms), and a busy machine's stalls land in the p95 of a 3 s hold
    # (3 users' p95 over 770 ms at a pace of 1.2), not in its median. A ramp whose steps'
    # pace strays more than 15% from the limit's runs again (three tries).
    # It must not depend on an idle machine: another process compiling once made the generator
    # lag and the verdict "load generator" (exit 4). A lag limit no event loop can meet makes
    # every step "busy" on purpose; a limit broken by far more than the lag still stands.
    # The mock runs in this process: on a busy machine its sleeps wake late and S grows (CI
    # at load 6-17: 10 ms gaps at 26 ms, 3 users over 740 ms). S is measured (k times paper)
    # and the limit moves with it; each step measures the pace again (its gaps), and when
    # the machine changed pace during the ramp (1.3x) it runs again at the pace it measured.
    m = mock_factory(ttft_ms=50, itl_ms=10, parallel=1)
    k = _pace(m, tmp_path / "pace", 240.0, *FAST[6:])
    for attempt in range(3):
        out = tmp_path / str(attempt)
        r = llmbench("ramp", "--url", m.url + "/v1", "--model", "mock", "--users",
                     "1,2,3,4,5,6", "--threshold", f"ttft.p50<={650 * k:.0f}ms",
                     "--expect-users", "5", *FAST, "--generator-lag-limit", "0.001ms",
                     "--out", str(out), timeout=180)
        run = json.loads((only_run(out) / "run.json").read_text())
        steps = run["steps"]
        # each step's pace: its gaps' median against the mock's 10 ms
        paces = [max(1.0, st["summary"]["median_itl_ms"] / 10.0) for st in steps
                 if st["summary"].get("median_itl_ms")]
        if steady_pace(paces, k, within=1.15):
            break
        k = sorted(paces)[len(paces) // 2]
    assert r.returncode == 1, (k, r.stdout + r.stderr)     # fewer held than expected
    assert [s["held"] for s in steps] == [True, True, True, False], (k, paces, r.stdout)
    assert "Held 3 users. At 4 users, TTFT p50 was" in r.stdout
    v = run["verdict"]
    assert v["kind"] == "queuing" and v["slots_estimate"] == 1
    assert 0.8 <= v["served_at_once"]["in_service"] <= 1.2
    assert "one person at a time" in r.stdout and "OLLAMA_NUM_PARALLEL" in r.stdout
    # the lag limit no loop meets makes every step "busy" on purpose: a break far past the lag
    # stands; when other processes really did stall llmbench (213 ms at step 4 with two busy
    # loops) it says the machine was busy instead, the honest answer there
    assert "the result stands" in r.stdout or said_busy(r.stdout), r.stdout
    # gaps flat while TTFT climbs
    itl = [s["summary"]["median_itl_ms"] for s in steps]
    assert max(itl) <= 1.3 * min(itl)       # flat (a busy machine adds a few ms to each)
    ttft = [s["summary"]["median_ttft_ms"] for s in steps]
    assert ttft == sorted(ttft) and ttft[3] > 600 * k
    timeline = [json.loads(x) for x in (only_run(out) / "timeline.jsonl").read_text().splitlines()]
    assert timeline and max(t["users"] for t in timeline) == 4
    assert max(t["waiting_first_token"] for t in timeline) >= 2


def test_four_slots_with_slowdown_hold_more_and_itl_grows(mock_factory, tmp_path):
    # 4 slots, step = 10 x (1 + 0.5 x (decoding - 1)): gaps 10 ms alone, 15 ms at 2 users,
    # 25 ms at 4+; paper: 8 users hold under 700 ms (wait ~ 525 ms), 10 do not (~ 840 ms).
    # The ramp starts at one user: the gaps' growth is judged against the first step, and 2.5x
    # stays clear of the 1.5x that says "grew" on a busy machine too (from 2 users, 1.67x on
    # paper fell to 1.47x when a busy machine stretched the small gaps more: issue 49)
    m = mock_factory(ttft_ms=50, itl_ms=10, parallel=4, batch_slowdown=0.5)
    # the mock runs in this process: a machine whose pace changed during the ramp (each
    # step's gaps against paper's) hides or fakes the gaps' growth; such a ramp runs again
    for attempt in range(3):
        out = tmp_path / str(attempt)
        r = llmbench("ramp", "--url", m.url + "/v1", "--model", "mock", "--users",
                     "1,2,4,6,8,10,12,14", "--threshold", "ttft.p95<=700ms", "--threshold",
                     "itl.p95<=1s", "--expect-users", "6", *FAST, *BUSY_OK, "--out", str(out),
                     timeout=180)
        run = json.loads((only_run(out) / "run.json").read_text())
        paces = [max(1.0, st["summary"]["median_itl_ms"]
                     / (10.0 * (1 + 0.5 * (min(st["load"], 4) - 1))))
                 for st in run["steps"] if st["summary"].get("median_itl_ms")]
        if steady_pace(paces, min(paces, default=1.0)):
            break
    assert r.returncode == 0, (paces, r.stdout + r.stderr)
    held = max(s["load"] for s in run["steps"] if s["held"])
    assert held >= 6                                     # vs 3 with one slot
    v = run["verdict"]
    assert v["itl_grew"] and v["kind"] == "saturation", (paces, v)
    # paper: 10 ms alone, 25 ms from 4 (x2.5): the gaps at the break are the shared
    # compute's (a mock without its slowdown gives 10 ms; a busy machine only stretches them)
    assert v["itl_p50_ms"][1] >= 20
    assert "compute saturation" in r.stdout


def test_interrupted_ramp_keeps_finished_steps(mock_factory, tmp_path):
    m = mock_factory(ttft_ms=5, itl_ms=2)
    p = subprocess.Popen([sys.executable, "-m", "llmbench.cli", "ramp", "--url", m.url + "/v1",
                          "--model", "mock", "--users", "1,2,3,4,5,6", "--ramp-in", "0.2s",
                          "--hold", "1.5s", "--think", "0", "--turns", "1", "--prompt-tokens", "5",
                          "--output-tokens", "5", "--out", str(tmp_path)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=ROOT)
    # interrupt once two steps are written (not after a fixed sleep: a busy machine starts slower)
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            if len(json.loads((only_run(tmp_path) / "run.json").read_text())["steps"]) >= 2:
                break
        except (AssertionError, FileNotFoundError, json.JSONDecodeError, KeyError):
            pass
        time.sleep(0.1)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 130, err
    run = json.loads((only_run(tmp_path) / "run.json").read_text())
    assert run["status"] == "partial" and len(run["steps"]) >= 2
    assert "PARTIAL RESULT" in out
    assert "Every step held" not in out and "Stopped after" in run["verdict"]["result"]


def test_unreachable_before_first_step(tmp_path):
    r = llmbench("ramp", "--url", f"http://127.0.0.1:{free_port()}/v1", "--model", "m",
                 "--out", str(tmp_path))
    assert r.returncode == 3 and "cannot reach" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("args,needle", [
    (["--threshold", "ttft<<2"], "grammar"),
    (["--threshold", "latency.p95<=2s"], "unknown metric 'latency'"),
    (["--start", "10", "--up-to", "4"], "--start 10 is above --up-to 4"),
    (["--users", "4,2"], "increasing"),
    (["--by", "magic"], "--by 'magic'"),
])
def test_ramp_bad_input(args, needle, tmp_path):
    r = llmbench("ramp", "--url", "http://127.0.0.1:9/v1", "--model", "m", *args,
                 "--out", str(tmp_path))
    assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr


def test_hold_shorter_than_think_warns(mock_factory, tmp_path):
    m = mock_factory(ttft_ms=1, itl_ms=1)
    r = llmbench("ramp", "--url", m.url + "/v1", "--model", "mock", "--users", "1",
                 "--hold", "1s", "--ramp-in", "0", "--think", "2s-3s", "--turns", "1",
                 "--out", str(tmp_path))
    assert "shorter than the longest think time" in r.stderr


# -- thresholds ---------------------------------------------------------------------------------
def test_threshold_grammar():
    t = parse_threshold("ttft.p95<=2s")
    assert (t.key, t.op, t.value) == ("p95_ttft_ms", "<=", 2000.0)
    assert parse_threshold("itl.p95 <= 200ms").value == 200.0
    assert parse_threshold("e2el<5000").key == "p95_e2el_ms"           # p95 by default
    assert parse_threshold("tpot.mean<=50").key == "mean_tpot_ms"
    assert parse_threshold("errors==0").key == "failed"
    assert parse_threshold("error_rate<=1%").value == pytest.approx(0.01)
    assert parse_threshold("tok_s>=100").key == "output_throughput"
    assert parse_threshold("max_gap.max<1s").key == "max_max_gap_ms"
    for bad in ("ttft.p42<=1s", "ttft.p95<=2h", "errors.p95==0", "throughput>=1", "ttft",
                "tok_s>=5%"):
        with pytest.raises(ThresholdError):
            parse_threshold(bad)


def test_thresholds_checked_against_summary():
    s = Summary.from_dict({"p95_ttft_ms": 2100.0, "failed": 0, "output_throughput": 50.0})
    res = check_all([parse_threshold("ttft.p95<=2s"), parse_threshold("errors==0"),
                     parse_threshold("tok_s>=100")], s)
    assert [r.ok for r in res] == [False, True, False]
    # a metric absent from the summary fails, it never passes silently
    assert check_all([parse_threshold("request_goodput>=1")],
                     Summary.from_dict({"request_goodput": None}))[0].ok is False


# -- verdict (pure) -----------------------------------------------------------------------------
def _rec(start, ttft, n, gap, ok=True, status=200, kind=None):
    times = [start + ttft + i * gap for i in range(n)] if ok else []
    r = Record("x", scheduled=start, start=start, token_times=times, ok=ok, status=status,
               error_kind=kind, output_tokens=n if ok else None)
    if times:
        r.first_token, r.end = times[0], times[-1]
    r.done = (times[-1] if times else start) + 0.001
    return r


def _step(index, load, summary, held, t0, t1, overloaded=False, checks=None, state=None):
    return Step.from_dict({
        "index": index, "load": load, "summary": summary, "held": held,
        **({"state": state} if state else {}), "hold_start": t0, "hold_end": t1,
        "ramp_start": t0,
        "checks": checks or [{"threshold": "ttft.p95<=2s", "ok": held, "actual":
                              summary["p95_ttft_ms"], "limit": 2000.0, "metric": "ttft",
                              "stat": "p95"}],
        "monitor": {"overloaded": overloaded, "lag_p99_ms": 30.0, "cpu_pct": 99.0}})


def _summary(ttft95, itl50, failed=0, **kw):
    s = {"p95_ttft_ms": ttft95, "median_ttft_ms": ttft95 / 2, "median_itl_ms": itl50,
         "p95_itl_ms": itl50 * 1.1, "failed": failed, "errors": {}, "error_statuses": {},
         "error_samples": []}
    s.update(kw)
    return s


def test_served_at_once_littles_law():
    # one request in service at a time, back to back for 10 s, after 50 ms baseline TTFT
    recs = [_rec(i * 1.0, 0.05, 10, 0.1) for i in range(10)]
    est = served_at_once(recs, 0.0, 10.0, baseline_ttft_s=0.05)
    assert est["in_service"] == pytest.approx(0.95, abs=0.02)


def test_verdict_kinds():
    base = _step(0, 2, _summary(400, 8.0), True, 0, 10)
    queue = _step(1, 8, _summary(2500, 8.2), False, 10, 20)
    v = explain([base, queue], [], "users")
    assert v.kind == "queuing"
    sat = _step(1, 8, _summary(2500, 20.0), False, 10, 20)
    assert explain([base, sat], [], "users").kind == "saturation"
    err = _step(1, 8, _summary(400, 8.0, failed=3, errors={"http_status": 3},
                               error_statuses={"503": 3},
                               error_samples=[{"kind": "http_status", "status": 503,
                                               "error": "server busy", "count": 3}]),
                False, 10, 20, checks=[{"threshold": "errors==0", "ok": False, "actual": 3,
                                        "limit": 0, "metric": "errors", "stat": None}])
    v = explain([base, err], [], "users")
    assert v.kind == "errors" and any("503" in e for e in v.evidence)
    # the generator lagged 30 ms (p99) and TTFT p95 missed 2 s by 10 ms: the lag explains it
    busy = _step(1, 8, _summary(2010, 8.0), False, 10, 20, overloaded=True)
    v = explain([base, busy], [], "users")
    assert v.kind == "load_generator" and "not trustworthy" in " ".join(v.evidence)
    assert v.generator_cause == "llmbench" and "llmbench itself was busy" in v.evidence[-1]


def test_verdict_generator_lag_cannot_hide_a_clear_breach_or_errors():
    base = _step(0, 2, _summary(400, 8.0), True, 0, 10)
    # 500 ms over the limit with 30 ms of lag: the server broke it, busy generator or not
    busy = _step(1, 8, _summary(2500, 8.0), False, 10, 20, overloaded=True)
    v = explain([base, busy], [], "users")
    assert v.kind == "queuing"
    assert any("the result stands" in e for e in v.evidence)
    # lag while llmbench used 3 % of a core: other processes took the machine; say so, and
    # do not blame the server
    machine = _step(1, 8, _summary(2010, 8.0), False, 10, 20, overloaded=True)
    machine.monitor["cpu_pct"] = 3.0
    v = explain([base, machine], [], "users")
    assert v.kind == "load_generator" and v.generator_cause == "machine"
    assert "busy with other processes" in " ".join(v.evidence)
    assert not any("OLLAMA" in a or "slots" in a for a in v.advice)
    # errors outrank the generator's state, and are listed with status and body
    err = _step(1, 8, _summary(2010, 8.0, failed=6, requests=40, errors={"http_status": 6},
                               error_statuses={"429": 6},
                               error_samples=[{"kind": "http_status", "status": 429,
                                               "error": "rate limit exceeded", "count": 6}]),
                False, 10, 20, overloaded=True,
                checks=[{"threshold": "errors==0", "ok": False, "actual": 6, "limit": 0,
                         "metric": "errors", "stat": None}])
    err.monitor["cpu_pct"] = 2.0
    v = explain([base, err], [], "users")
    text = " ".join(v.evidence)
    assert v.kind == "errors"
    assert "6 of 40 requests failed" in text and "HTTP 429 x6" in text
    assert "http_status 429 x6: rate limit exceeded" in text
    assert "busy with other processes" in text


def test_verdict_uses_server_state_when_probed():
    base = _step(0, 2, _summary(400, 8.0), True, 0, 10)
    queue = _step(1, 8, _summary(2500, 8.2), False, 10, 20)
    samples = [{"t": 12.0 + i, "running": 1, "waiting": 5, "slots": 1} for i in range(5)]
    v = explain([base, queue], [], "users", server_samples=samples)
    assert v.server["running_max"] == 1 and v.server["waiting_max"] == 5
    assert v.slots_estimate == 1
    assert any("1 running while up to 5 waited" in e for e in v.evidence)


def test_result_line():
    steps = [_step(0, 2, _summary(465, 8), True, 0, 1), _step(1, 6, _summary(995, 8), True, 1, 2),
             _step(2, 8, _summary(2550, 8), False, 2, 3)]
    assert result_line(steps) == "Held 6 users. At 8 users, TTFT p95 was 2.55 s, over 2.00 s."


def test_verdict_reads_a_routers_per_backend_counts():
    base = _step(0, 2, _summary(400, 8.0), True, 0, 10)
    queue = _step(1, 8, _summary(2500, 8.2), False, 10, 20)
    samples = [{"t": 12.0, "running": 6, "backends_in_flight": {"http://a": 6, "http://b": 0}}]
    v = explain([base, queue], [], "users", server_samples=samples)
    text = " ".join(v.evidence)
    assert "http://a 6, http://b 0" in text and "the routing, not capacity" in text


def steady_pace(paces: list[float], k: float, within: float = 1.3) -> bool:
    """Whether the steps of a ramp all ran at about the pace ``k`` its limits were set for:
    each step's pace (how many times slower than paper the mock went, from its gaps) within
    ``within`` of k and of each other."""
    every = [k, *paces]
    return max(every) / min(every) <= within


def _pace(m, out, paper_ms: float, *shape: str) -> float:
    """How many times slower than on paper (at least 1) the mock serves one request of this
    shape, here and now: the median E2EL of 8 sent one at a time. The mock runs in the test's
    process; on a busy machine its sleeps wake late, so a step of N requests a second loads it
    as N x that factor would on paper."""
    r = llmbench("run", "--url", m.url + "/v1", "--model", "mock", "--concurrency", "1",
                 "--requests", "8", *shape, "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    e2el = json.loads((only_run(out) / "run.json").read_text())["summary"]["median_e2el_ms"]
    return max(1.0, e2el / paper_ms)


def test_ramp_by_rate_steps_the_arrival_rate(mock_factory, tmp_path):
    # 5 ms gaps, not 2: a queue's verdict needs the gaps not grown (1.5x and +2 ms), and a
    # busy machine wakes a 2 ms sleep 2 ms late
    m = mock_factory(ttft_ms=10, itl_ms=5, parallel=1)
    shape = ("--turns", "1", "--prompt-tokens", "10", "--output-tokens", "10")
    # on paper a request takes 10 + 9 x 5 = 55 ms: the rates 2, 8 and 40 a second load one
    # slot (~18/s) at 0.1, 0.4 and 2.2. Measured slower (k times), the rates are divided by k,
    # the hold and the TTFT limit multiplied by it: the same loads, the same requests a step
    k = min(_pace(m, tmp_path / "pace", 55.0, *shape), 4.0)
    tries = iter(range(9))

    def attempt():
        out = tmp_path / str(next(tries))
        r = llmbench("ramp", "--url", m.url + "/v1", "--model", "mock", "--by", "rate",
                     "--users", ",".join(f"{x / k:.3g}" for x in (2, 8, 40)),
                     "--ramp-in", f"{0.5 * k:.2f}s", "--hold", f"{3 * k:.2f}s", "--think", "0",
                     *shape, "--threshold", f"ttft.p95<={500 * k:.0f}ms", *BUSY_OK,
                     "--out", str(out), timeout=120)
        return r, json.loads((only_run(out) / "run.json").read_text())
    # a machine so busy that llmbench froze (CI once: 22.8 s) measured no arrival rate: the
    # ramp says so itself (its table's "machine busy", exit 4 when that broke the step); tried
    # once more, and if it says so again, that finding is what is checked
    # the verdict tells queuing from saturation by the gaps (1.5x and +2 ms): a machine whose
    # pace changed during the ramp grows them without saturation; measured (each step's gaps
    # against 5 ms), such a ramp runs again at the pace it measured (three tries)
    for _ in range(3):
        r, run_, busy = unless_busy(attempt)
        paces = [max(1.0, st["summary"]["median_itl_ms"] / 5.0) for st in run_["steps"]
                 if st["summary"].get("median_itl_ms")]
        if busy is not None or steady_pace(paces, k):
            break
        k = min(sorted(paces)[len(paces) // 2], 4.0)
    if busy is not None:
        assert r.returncode in (0, 4) and said_busy(r.stdout), (busy, r.stdout, r.stderr)
        assert (r.returncode == 4) == (run_["verdict"]["kind"] == "load_generator"), busy
        return
    assert r.returncode == 0, (k, r.stdout + r.stderr)
    steps = run_["steps"]
    assert "req/s" in r.stdout.splitlines()[0] or "Req/s" in r.stdout.splitlines()[0]
    # open loop: the step's request rate follows the schedule while the server keeps up
    assert steps[0]["summary"]["request_throughput"] == pytest.approx(2 / k, rel=0.5)
    assert steps[1]["summary"]["request_throughput"] == pytest.approx(8 / k, rel=0.3)
    # 40/s against one slot serving ~55 ms each (~18/s): the queue grows, TTFT breaks
    assert not steps[-1]["held"] and run_["verdict"]["kind"] == "queuing", (k, paces)


def test_a_rate_steps_hold_window_gets_its_rate_on_average_over_seeds():
    # The schedule of a rate step, as the ramp makes it: over 400 seeds the arrivals in the
    # hold window average rate x hold. The old schedule (a fixed count stretched so the last
    # arrival fell on the hold's end, where it is dropped) averaged (n-1) x hold / span: 19.2
    # of 20 here, ~3.6 standard errors low; with --hold 4s and ramp-in 0.5s, 7.9 of 8 per seed
    # at best and 4 with seed 0.
    import numpy as np

    from llmbench.load.shapes.ramp import Ramp
    for rate, ramp_in, hold in ((2.0, 2.0, 10.0), (2.0, 0.5, 4.0), (0.5, 1.0, 10.0)):
        counts = []
        for seed in range(400):
            ramp = Ramp(convs=[], steps=[rate], ramp_in_s=ramp_in, hold_s=hold, seed=seed)
            offs = np.array(ramp.rate_offsets(0, rate))
            counts.append(int(((offs >= ramp_in) & (offs < ramp_in + hold)).sum()))
            assert np.all(np.diff(offs) > 0) and offs.max(initial=0) < ramp_in + hold
        want = rate * hold
        se = (want / len(counts)) ** 0.5            # Poisson: variance = mean
        assert abs(np.mean(counts) - want) < 3 * se, (rate, hold, np.mean(counts))
        assert abs(np.var(counts) / want - 1) < 0.25           # Poisson-like spread


def test_rate_mode_does_not_warn_about_think_time(mock_factory, tmp_path):
    m = mock_factory(ttft_ms=5, itl_ms=1)
    common = ["--url", m.url + "/v1", "--model", "mock", "--users", "1", "--ramp-in", "0.2s",
              "--hold", "1s", "--think", "5s", "--turns", "1", "--prompt-tokens", "5",
              "--output-tokens", "2", "--threshold", "errors==0", *BUSY_OK]
    users = llmbench("ramp", *common, "--out", str(tmp_path / "u"), timeout=60)
    rate = llmbench("ramp", *common, "--by", "rate", "--out", str(tmp_path / "r"), timeout=60)
    assert "shorter than the longest think time" in users.stderr
    assert "shorter than the longest think time" not in rate.stderr, rate.stderr


def test_busy_load_generator_exits_4_and_says_so(mock_factory, tmp_path):
    # a lag limit no event loop can meet: every step is "the generator was busy"; and a
    # throughput minimum the generator's own lag could explain missing
    m = mock_factory(ttft_ms=5, itl_ms=2)
    r = llmbench("ramp", "--url", m.url + "/v1", "--model", "mock", "--users", "1,2",
                 "--generator-lag-limit", "0.001ms", "--threshold", "tok_s>=1000000", *FAST,
                 "--out", str(tmp_path))
    assert r.returncode == 4, r.stdout + r.stderr
    assert "not trustworthy" in r.stdout
    run_ = json.loads((only_run(tmp_path) / "run.json").read_text())
    assert run_["verdict"]["kind"] == "load_generator"


def test_threshold_on_missing_or_thin_statistic_fails_and_says_why():
    from llmbench.analysis.metrics import summarize
    from llmbench.analysis.slo import NO_DATA, OVER, verdict_of
    t = parse_threshold("ttft.p95<=2s")
    # every request timed out: no TTFT to measure is a failure, never "0 ms, under 2 s"
    dead = [Record(f"f{i}", scheduled=0.0, start=0.0, error_kind="timeout_first_token",
                   done=1.0) for i in range(18)]
    res = check_all([t], summarize(dead, t0=0.0))
    assert res[0].ok is False and res[0].actual is None
    assert res[0].text == "ttft.p95<=2s: no successful request to measure (18 of 18 failed)"
    assert verdict_of(res) == OVER
    # three clean requests: too few for a p95 (needs 5), nothing failed: not enough data
    few = [_rec(i, 0.1, 5, 0.01) for i in range(3)]
    res = check_all([t], summarize(few, t0=0.0))
    assert res[0].ok is False and res[0].insufficient
    assert "not enough data: 3 successful requests, p95 needs at least 5" in res[0].reason
    assert verdict_of(res) == NO_DATA
    # the same three, but two more failed: the failures are why, so it is a breach
    res = check_all([t], summarize(few + dead[:2], t0=0.0))
    assert not res[0].ok and not res[0].insufficient and verdict_of(res) == OVER
    # a median needs one value
    assert check_all([parse_threshold("ttft.median<=2s")], summarize(few, t0=0.0))[0].ok


def test_failure_aware_thresholds():
    from llmbench.analysis.metrics import summarize
    from llmbench.analysis.slo import DEFAULT_THRESHOLDS
    ok = [_rec(i, 0.1, 5, 0.01) for i in range(16)]
    timeouts = [Record(f"f{i}", scheduled=0.0, start=0.0, error_kind="timeout_first_token",
                       done=1.0) for i in range(4)]                 # 20 % timed out
    s = summarize(ok + timeouts, t0=0.0, within=[("ttft", 2000.0)])
    # vLLM's successes-only p95 is 100 ms and passes; the failure-aware one is infinite
    assert check_all([parse_threshold("ttft.p95<=2s")], s)[0].ok
    c = check_all([parse_threshold("ttft.p95_all<=2s")], s)[0]
    assert not c.ok and c.actual == float("inf") and c.text == "ttft.p95_all<=2s: ∞"
    c = check_all([parse_threshold("ttft.within(2s)>=95%")], s)[0]
    assert not c.ok and c.actual == pytest.approx(0.8)
    assert check_all([parse_threshold("ttft.within(2s)>=80%")], s)[0].ok
    # the defaults fail such a step even without errors==0
    defaults = [parse_threshold(x) for x in DEFAULT_THRESHOLDS if x != "errors==0"]
    assert not all(r.ok for r in check_all(defaults, s))
    for bad in ("itl.p95_all<=1s", "ttft.within(2s)>=5ms", "tpot.within(1s)>=0.9",
                "ttft.p95(2s)<=1s"):
        with pytest.raises(ThresholdError):
            parse_threshold(bad)


def test_not_enough_data_is_neither_held_nor_over():
    base = _step(0, 2, _summary(400, 8.0), True, 0, 10)
    thin = _step(1, 4, _summary(450, 8.0), False, 10, 20, checks=[
        {"threshold": "ttft.p99<=2s", "ok": False, "actual": 450.0, "limit": 2000.0,
         "metric": "ttft", "stat": "p99", "insufficient": True,
         "reason": "not enough data: 6 successful requests, p99 needs at least 25"}],
        state="not enough data")
    line = result_line([base, thin])
    assert line == ("Held 2 users. At 4 users, not enough data to decide: ttft.p99<=2s: "
                    "6 successful requests, p99 needs at least 25.")
    v = explain([base, thin], [], "users")
    assert v.kind == "not_enough_data" and any("--hold" in a for a in v.advice)
    # an interrupted ramp that held every finished step did not hold "every step"
    assert result_line([base], planned=3) == "Held 2 users. Stopped after 1 of 3 steps, all held."
