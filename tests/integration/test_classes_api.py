"""Traffic classes (--scenario) and users who give up (--abandon) end to end against the mock,
in this process through the API: the acceptance of issue 36 sections 3 and 4.

- A chat class and a long-prompt class on a 2-slot mock whose prefill costs per prompt token:
  the long prompts saturate it. The verdict blames the long-prompt class, and --isolate shows
  chat alone holding at the load it had (its TTFT alone far under its TTFT mixed).
- Abandonment: the cancelled requests of a run equal the connections the mock saw closed, and
  the release check passes; a mock that decodes on for closed connections is named."""

from __future__ import annotations

import collections
import csv
import io
import time

import pytest

import llmbench
from llmbench.errors import UsageError
from llmbench.report.console import fmt_ms
from llmbench.report.text import to_csv, to_markdown
from llmbench.workload.scenario import Scenario, TrafficClass
from tests.helpers import busy
from tests.helpers.api import records, run_json

SCENARIO = """\
[defaults]
turns = 1
output_tokens = 8

[classes.chat]
share = 0.5
prompt_tokens = 32
thresholds = ["ttft.p95<=250ms"]

[classes.long]
share = 0.5
prompt_tokens = 3000
thresholds = ["ttft.p95<=600ms"]
"""


@pytest.fixture
def saturating_mock(mock_factory):
    # 2 slots; a 3000-token prompt takes 375 ms of prefill, a 32-token one 4 ms
    return mock_factory(ttft_ms=20, itl_ms=5, parallel=2, prefill_ms_per_token=0.125)


def test_the_long_prompts_are_blamed_and_chat_alone_holds(saturating_mock, tmp_path):
    path = tmp_path / "scenario.toml"
    path.write_text(SCENARIO)
    run = llmbench.ramp(url=saturating_mock.url + "/v1", model="mock", scenario=path,
                        isolate=True, users="2,8", hold="3s", ramp_in="0.5s", think="0s",
                        out=tmp_path / "res", server_probe="off")
    v = run.verdict
    assert v.kind != "held" and v.blamed == ["long"], (v.text, v.blamed)
    assert "long" in v.text
    assert v.classes["long"].broke
    # both classes at both steps, each with its own load and checks
    first, broke = run.steps
    assert {n: c.load for n, c in first.classes.items()} == {"chat": 1, "long": 1}
    assert {n: c.load for n, c in broke.classes.items()} == {"chat": 4, "long": 4}
    assert first.held and first.classes["chat"].held and first.classes["long"].held
    assert broke.classes["long"].state == "over"
    # --isolate: long breaks even alone; chat alone holds, far under its TTFT with long there
    iso = run.findings.isolation
    assert iso is not None and iso.cause == ["long"], iso.text
    alone = {a.name: a for a in iso.classes}
    assert alone["chat"].held and not alone["long"].held
    (cmp,) = alone["chat"].compared
    assert cmp.metric == "ttft" and cmp.ok_alone and cmp.alone < cmp.mixed
    assert any("chat" in t and "alone" in t for t in iso.text)
    # every record carries its class; a class's step figures are its own records'
    recs = [r for r in records(run) if not r.get("warmup")]
    assert {r.get("traffic_class") for r in recs} == {"chat", "long"}
    by_class = collections.Counter(r["traffic_class"] for r in recs
                                   if r["step"] == broke.index and r["ok"]
                                   and broke.hold_start <= r["scheduled"] < broke.hold_end)
    for name in ("chat", "long"):
        assert broke.classes[name].summary.completed == by_class[name]
    # and it reads back from the folder, typed
    back = llmbench.load_run(run.path)
    assert back.verdict.blamed == ["long"] and back.findings.isolation.cause == ["long"]
    assert run_json(run)["config"]["scenario"]["classes"][0]["name"] == "chat"
    # report --format csv: one row per step per class, under the whole crowd's row
    rows = list(csv.DictReader(io.StringIO(to_csv(run.path))))
    assert [(int(r["load"]), r["class"]) for r in rows] == [
        (2, ""), (2, "chat"), (2, "long"), (8, ""), (8, "chat"), (8, "long")]
    for r in rows[1:3] + rows[4:]:
        st = first if r["load"] == "2" else broke
        c = st.classes[r["class"]]
        assert float(r["class_load"]) == c.load and int(r["requests"]) == c.summary.requests
        assert float(r["p95_ttft_ms"]) == pytest.approx(c.summary.ttft.p95, abs=1e-3)
        assert r["state"] == c.state
    assert rows[5]["state"] == "over" and rows[4]["held"] in ("true", "false")
    # --format md: each class's verdict, its row at each step, and each class alone
    md = to_markdown(run.path)
    assert "#### Traffic classes" in md and "`long` (" in md and "**(blamed)**" in md
    # a class's cause in words, not run.json's names ("(other)", "(not_enough_data)")
    why = md.split("`long` (", 1)[1].split(")", 1)[0]
    assert "_" not in why and why != "other", why
    assert (f"| 8 | `long` | 4 | {broke.classes['long'].summary.requests} | "
            f"{fmt_ms(broke.classes['long'].summary.ttft.median)} |") in md
    assert "#### Each class alone (--isolate)" in md and iso.text[-1] in md


def test_a_scenario_from_python_and_grow(saturating_mock, tmp_path):
    sc = Scenario([TrafficClass("chat", share=1.0, options={"prompt_tokens": 16, "turns": 1}),
                   TrafficClass("batch", users=1, options={"prompt_tokens": 64, "turns": 1,
                                                           "output_tokens": 4})])
    run = llmbench.ramp(url=saturating_mock.url + "/v1", model="mock", scenario=sc,
                        grow="chat", users="1,2", hold="1s", ramp_in="0.2s", think="0s",
                        output_tokens=4, threshold=["ttft.p50<=5s"], out=tmp_path / "res",
                        server_probe="off")
    assert [{n: c.load for n, c in s.classes.items()} for s in run.steps] == [
        {"chat": 1, "batch": 1}, {"chat": 2, "batch": 1}]
    assert all(s.held for s in run.steps)


def _closed(m, want: int | None = None, within_s: float = 10.0) -> int:
    """The connections the mock saw closed by the client. The mock runs on its own thread: on a
    busy machine it notices the run's last closes after llmbench has returned, so wait (up to
    `within_s` of a quiet machine, stretched by the slowdown measured meanwhile) for the count
    to reach `want` before reading it."""
    deadline = busy.Deadline(within_s)
    while True:
        seen = sum(e.stats.closed_by_client_total for e in m.engines)
        if want is None or seen >= want or deadline.expired():
            return seen
        time.sleep(0.05)


def test_cancelled_equals_closed_by_client_and_the_server_let_go(mock_factory, tmp_path):
    m = mock_factory(ttft_ms=20, itl_ms=10, tokens=200, parallel=4)
    run = llmbench.run(url=m.url + "/v1", model="mock", concurrency=4, duration="2s",
                       prompt_tokens=16, output_tokens=40,
                       abandon="share=0.5,after-tokens=5", out=tmp_path / "res")
    s, a = run.summary, run.findings.abandonment
    assert s.cancelled and s.cancelled == a.cancelled == a.streaming
    assert s.cancelled == _closed(m, s.cancelled)
    assert s.failed == 0 and s.completed + s.cancelled == s.requests
    assert a.release.ok is True and a.release.samples > 0, a.release.text
    kinds = collections.Counter(r.get("error_kind") for r in records(run))
    assert kinds["cancelled"] == s.cancelled


def test_a_server_that_decodes_for_closed_connections_is_reported(mock_factory, tmp_path):
    # 2 slots, 4 users who stop every reply after 2 tokens (and give up after 0.3 s without
    # one): the mock goes on decoding each for 6 s, longer than the 3 s the check allows
    m = mock_factory(ttft_ms=20, itl_ms=40, tokens=400, parallel=2, decode_after_close=True)
    run = llmbench.run(url=m.url + "/v1", model="mock", concurrency=4, duration="7s",
                       prompt_tokens=16, output_tokens=150,
                       abandon="after=0.3s,share=1,after-tokens=2", out=tmp_path / "res")
    a = run.findings.abandonment
    assert a.cancelled == _closed(m, a.cancelled)
    assert a.release.ok is False, a.release.text
    assert "did NOT free" in a.release.text


def test_a_ramp_counts_its_cancelled_requests_per_step(mock_factory, tmp_path):
    m = mock_factory(ttft_ms=20, itl_ms=10, tokens=200, parallel=8)
    run = llmbench.ramp(url=m.url + "/v1", model="mock", users="2", hold="1.5s",
                        ramp_in="0.2s", think="0s", prompt_tokens=16, output_tokens=20,
                        turns=1, abandon="share=0.5,after-tokens=3",
                        threshold=["ttft.p50<=5s"], out=tmp_path / "res")
    (step,) = run.steps
    assert step.summary.cancelled and step.summary.failed == 0
    a = run.findings.abandonment
    assert a is not None and a.cancelled == _closed(m, a.cancelled) >= step.summary.cancelled
    assert a.release.ok is True, a.release.text


# -- ramp --find over a scenario --------------------------------------------------------------
# On paper (as tests/integration/test_find.py): a closed loop (think 0) of N users on P slots,
# every request served in S = ttft + (tokens - 1) x itl, sees a mean TTFT of ttft + (N/P - 1) x S
# whichever class it belongs to (one FIFO queue, the same requests). The tight class's
# threshold sits halfway between the paper limit L and L + 1 users of the whole crowd; the
# loose one's far above: the search must land on L, and blame the tight class.
F_TTFT_MS, F_ITL_MS, F_TOKENS, F_SLOTS, F_LIMIT = 50.0, 10.0, 20, 1, 3


def test_find_over_a_scenario_lands_on_the_paper_limit_and_blames_the_tight_class(
        mock_factory, tmp_path):
    m = mock_factory(ttft_ms=F_TTFT_MS, itl_ms=F_ITL_MS, parallel=F_SLOTS)
    service_ms = F_TTFT_MS + (F_TOKENS - 1) * F_ITL_MS
    tight_ms = F_TTFT_MS + ((F_LIMIT + 0.5) / F_SLOTS - 1) * service_ms
    opts = {"turns": 1, "prompt_tokens": 10, "output_tokens": F_TOKENS}
    sc = Scenario([
        TrafficClass("tight", share=0.75, min_users=1, options=opts,
                     thresholds=[f"ttft.mean<={tight_ms:.0f}ms"]),
        TrafficClass("loose", share=0.25, min_users=1, options=opts,
                     thresholds=["ttft.mean<=30s"])])
    run = llmbench.ramp(url=m.url + "/v1", model="mock", find=True, scenario=sc,
                        ramp_in="0.5s", hold="2s", think="0", generator_lag_limit="2000ms",
                        out=tmp_path / "res", server_probe="off")
    s = run.search
    assert s is not None and s.stopped == "found", s and s.text
    assert abs(s.limit - F_LIMIT) <= 1 and s.broke_at == s.limit + 1, s.text
    # held for the sustain: by a confirmation, or by its own step's whole hold (a scenario's
    # steps are never settled early), then not held again
    assert s.confirmed is True
    assert s.trials[-1].why == "confirm" or any(
        t.load == s.limit and t.held and t.hold_s >= s.sustain_s - 0.01 for t in s.trials)
    counted = [t for t in s.trials if t.counted and t.why != "confirm"]
    assert len(counted) <= 2 + 3, [t.load for t in s.trials]      # log2(3) + 3
    # the floors: the search starts at 2 users (1 each), never below
    assert s.trials[0].load == 2 and min(t.load for t in s.trials) >= 2
    # every step is typed with each class's share of its total, as a fixed scenario ramp's;
    # the floors hold at every step (at 2 users the shares alone would give loose none)
    for st in run.steps:
        assert set(st.classes) == {"tight", "loose"}, (st.load, st.classes.keys())
        assert sum(c.load for c in st.classes.values()) == st.load
        assert all(c.load >= 1 for c in st.classes.values())
        assert st.held == all(c.held for c in st.classes.values())
    assert {n: c.load for n, c in run.steps[0].classes.items()} == {"tight": 1, "loose": 1}
    # the blame: the tight class broke the least load that broke, the loose one held there
    broke = next(st for st in run.ladder() if st.load == s.broke_at)
    assert broke.classes["tight"].state == "over" and broke.classes["loose"].held
    assert run.verdict.classes["loose"].text == f"held at {s.broke_at:g} users (its 1 user)"
    assert s.blamed == ["tight"] and run.verdict.blamed == ["tight"]
    assert s.text.startswith(f"Holds {s.limit:g} users ({s.broke_at:g} broke: in tight, "
                             "TTFT mean was"), s.text
    assert "loose held" in s.text and run.verdict.text == s.text
    # going down, a class's newest users left before the window opened: each hold held its
    # own total only
    changes = [(float(t), int(n)) for t, n in run.findings.user_changes]
    assert any(b.load < a.load for a, b in zip(run.steps, run.steps[1:]))
    for st in run.steps:
        before = [n for t, n in changes if t <= st.hold_start]
        assert before and before[-1] == st.load, (st.load, before[-3:])
    assert run.exit_code == 0
    # and it reads back typed: the search with its blame, the steps with their classes
    back = llmbench.load_run(run.path)
    assert back.search.blamed == ["tight"] and back.search.limit == s.limit
    assert {n: c.load for n, c in back.steps[0].classes.items()} == {"tight": 1, "loose": 1}
    assert back.steps[0].classes["tight"].summary.completed > 0


def test_a_fixed_step_below_the_classes_floors_is_one_line(tmp_path):
    sc = Scenario([TrafficClass("chat", share=0.8, min_users=1),
                   TrafficClass("rag", share=0.2, min_users=2)])
    with pytest.raises(UsageError) as e:
        llmbench.ramp(url="http://127.0.0.1:9/v1", model="mock", scenario=sc, users="2,4",
                      out=tmp_path / "res")
    msg = str(e.value)
    assert msg == ("--users 2: below the classes' floors (min_users: chat 1 + rag 2 = 3); "
                   "start the steps at 3 or more"), msg


# -- run --scenario: the crowd at one load ------------------------------------------------------
def test_run_with_a_scenario_judges_each_class_at_its_share_of_the_users(mock_factory, tmp_path):
    # 1 slot, 4 users with no think time, each request 50 + 19 x 10 = 240 ms: in steady state
    # a request waits for the 3 ahead of it, TTFT 50 + 3 x 240 = 770 ms on paper, whichever
    # class it is; the tight class's p50 limit is far under that, the loose one's far over
    m = mock_factory(ttft_ms=50, itl_ms=10, parallel=1)
    path = tmp_path / "scenario.toml"
    path.write_text('[defaults]\nturns = 1\nprompt_tokens = 10\noutput_tokens = 20\n\n'
                    '[classes.tight]\nshare = 0.75\nthresholds = ["ttft.p50<=400ms"]\n\n'
                    '[classes.loose]\nshare = 0.25\nthresholds = ["ttft.p50<=5s"]\n')
    run = llmbench.run(url=m.url + "/v1", model="mock", scenario=path, concurrency=4,
                       duration="2s", think="0", out=tmp_path / "res", server_probe="off")
    assert {n: (c.load, c.unit) for n, c in run.findings.classes.items()} == {
        "tight": (3, "users"), "loose": (1, "users")}
    tight, loose = run.findings.classes["tight"], run.findings.classes["loose"]
    assert tight.state == "over" and loose.state == "held"
    assert 600 <= tight.summary.ttft.median <= 2000, tight.summary.ttft.median   # ~770 on paper
    # every class's checks are the run's thresholds, tagged; one failed: exit 99
    assert [(c.traffic_class, c.ok) for c in run.findings.thresholds] == [("tight", False),
                                                                ("loose", True)]
    assert run.exit_code == 99
    # each class's figures are its own records' in the hold; the whole crowd's, all of them
    recs = [r for r in records(run) if r["ok"] and r["step"] == 0]
    assert {r["traffic_class"] for r in recs} == {"tight", "loose"}
    counted = collections.Counter(r["traffic_class"] for r in recs)
    assert tight.summary.completed + loose.summary.completed == run.summary.completed
    for name, c in run.findings.classes.items():     # the hold's requests, of those that finished
        assert 0 < c.summary.completed <= counted[name]
    # typed back from the folder, and in every report
    back = llmbench.load_run(run.path)
    assert back.findings.classes == run.findings.classes and back.exit_code == 99
    assert run_json(run)["config"]["scenario"]["classes"][1]["name"] == "loose"
    rows = list(csv.DictReader(io.StringIO(to_csv(run.path))))
    assert [(r["load"], r["class"], r["class_load"]) for r in rows] == [
        ("4", "", ""), ("4", "tight", "3"), ("4", "loose", "1")]
    assert rows[0]["state"] == "over" and rows[2]["state"] == "held"
    assert int(rows[1]["requests"]) == tight.summary.requests
    md = to_markdown(run.path)
    assert f"| 4 | `tight` | 3 | {tight.summary.requests} |" in md
    assert "- **FAIL**: tight: ttft.p50" in md
    from llmbench.report.html import render
    page = render(run.path)
    assert "<h2>Traffic classes</h2>" in page and ">tight</td>" in page


@pytest.mark.parametrize("kw, says", [
    (dict(concurrency=4, requests=10), "--requests does not go with --scenario (it runs for a "
                                       "time: give --duration instead); drop one"),
    (dict(duration="1s"), "--scenario: the classes with a share split the crowd's users: give "
                          "--concurrency N (or --rate R for requests per second)"),
    (dict(concurrency=1, duration="1s"), "--concurrency 1: below the classes' floors "
                                         "(min_users: chat 1 + rag 1 = 2); give 2 or more"),
    (dict(rate=2, arrival="constant"), "--arrival constant does not go with --scenario"),
])
def test_run_with_a_scenario_refuses_what_does_not_fit_in_one_line(tmp_path, kw, says):
    sc = Scenario([TrafficClass("chat", share=0.5, min_users=1),
                   TrafficClass("rag", share=0.5, min_users=1)])
    with pytest.raises(UsageError) as e:
        llmbench.run(url="http://127.0.0.1:9/v1", model="mock", scenario=sc,
                     out=tmp_path / "res", server_probe="off", **kw)
    assert str(e.value).startswith(says) and "\n" not in str(e.value), str(e.value)


def test_join_spread_reaches_every_class(mock_factory, tmp_path):
    # --join spread over a scenario: each class's new users join mid-conversation (their first
    # request carries the earlier turns), as the one-crowd ramp's do (tests/integration/
    # test_find.py has the one-crowd pair, and --join start's turn 0)
    m = mock_factory(ttft_ms=5, itl_ms=1)
    opts = {"turns": 6, "prompt_tokens": 10, "output_tokens": 12}
    sc = Scenario([TrafficClass("a", share=0.5, options=opts),
                   TrafficClass("b", share=0.5, options=opts)])
    r = llmbench.ramp(url=m.url + "/v1", model="mock", scenario=sc, users="8", join="spread",
                      ramp_in="0.5s", hold="1s", think="0", threshold=["ttft.p50<=5s"],
                      generator_lag_limit="2000ms", out=tmp_path, server_probe="off")
    recs = sorted((x for x in records(r) if x.get("user") is not None), key=lambda x: x["start"])
    first: dict[int, dict] = {}
    for x in recs:
        first.setdefault(x["user"], x)
    assert len(first) == 8 and {x["traffic_class"] for x in first.values()} == {"a", "b"}
    # eight users each at a uniform turn of six, four per class: none past turn 0 in a class
    # has odds 1 in 1,296 (and the seed is fixed); a user who joined at turn t sends its t
    # earlier turns with its first request: longer than any turn-0 prompt
    fresh = max(x["prompt_tokens"] for x in recs if x["turn"] == 0)
    for name in ("a", "b"):
        late = [x for x in first.values() if x["traffic_class"] == name and x["turn"] > 0]
        assert late, name
        assert all(x["prompt_tokens"] > fresh for x in late if x["turn"] >= 2), late


def test_ctrl_c_during_a_scenario_run_leaves_a_partial_folder_with_what_finished(mock_factory,
                                                                                 tmp_path):
    import json
    import signal
    import subprocess
    import sys
    from tests.helpers import ENV, ROOT, only_run
    m = mock_factory(ttft_ms=5, itl_ms=2, parallel=2)
    path = tmp_path / "scenario.toml"
    path.write_text("[defaults]\nturns = 1\nprompt_tokens = 5\noutput_tokens = 5\n\n"
                    "[classes.a]\nshare = 0.5\n\n[classes.b]\nshare = 0.5\n")
    out_dir = tmp_path / "res"
    p = subprocess.Popen([sys.executable, "-m", "llmbench.cli", "run", "--url", m.url + "/v1",
                          "--model", "mock", "--scenario", str(path), "--concurrency", "2",
                          "--duration", "60s", "--think", "0", "--server-probe", "off",
                          "--out", str(out_dir)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
                         cwd=ROOT)
    def streamed() -> bool:
        try:
            return len((only_run(out_dir) / "requests.jsonl").read_text().splitlines()) >= 10
        except (AssertionError, FileNotFoundError):
            return False
    # some requests streamed to disk: 30 s of a quiet machine, stretched as it is measured
    assert busy.wait_for(streamed, 30, poll_s=0.1), "no 10 requests on disk"
    p.send_signal(signal.SIGINT)
    out, err = busy.communicate(p, 60)
    assert p.returncode == 130, err
    folder = only_run(out_dir)
    run = llmbench.load_run(folder)
    assert run.status == "partial" and run.summary is not None
    lines = [json.loads(x) for x in (folder / "requests.jsonl").read_text().splitlines()]
    assert run.summary.completed >= 10 and {x["traffic_class"] for x in lines} == {"a", "b"}
    assert "PARTIAL RESULT" in out
