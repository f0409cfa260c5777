"""The result contract is what the pipeline builds, and every folder reads back unchanged
(issue 38 part 1): ``Run.load(folder).to_dict()`` is the folder's run.json (and sweep.json),
byte for byte once written as llmbench writes it; a summary goes through its dict and back
unchanged; a new typed field is one line."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from llmbench.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_OVERLOADED, EXIT_THRESHOLD, EXIT_WRITE
from llmbench.results.contract import Part, part
from llmbench.results.jsonfile import RunFolderError
from llmbench.results.schema import (SCHEMA_VERSION, Check, Findings, Metric, Run, RunState,
                                     Step, Summary, Sweep, Workers, LostWorker, load_result)
from tests.helpers import ROOT

FOLDERS = sorted({p.parent for p in [*ROOT.glob("results/examples/**/run.json"),
                                     *ROOT.glob("results/examples/**/sweep.json"),
                                     *Path("/work/shared/real-runs").glob("*/run.json")]})


def test_there_are_folders_to_read():
    assert len(FOLDERS) >= 8          # 5 example ramps, the example sweep, 2 real llama.cpp runs


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_every_folder_loads_and_writes_back_unchanged(folder, tmp_path):
    name = "sweep.json" if (folder / "sweep.json").is_file() and not (
        folder / "run.json").is_file() else "run.json"
    raw = (folder / name).read_text(encoding="utf-8")
    run = load_result(folder)
    assert run.to_dict() == json.loads(raw)
    # written as llmbench writes it, the same bytes: keys in the file's order, values as read
    run.save(tmp_path)
    assert (tmp_path / name).read_text(encoding="utf-8") == raw
    if isinstance(run, Sweep):
        assert name == "sweep.json" and run.schema_version == SCHEMA_VERSION
        return
    assert run.state.schema_version == SCHEMA_VERSION
    if run.kind == "ramp":
        assert all(isinstance(st, Step) for st in run.steps) and run.verdict is not None
        assert run.held == max((st.load for st in run.steps if st.held), default=None)
        assert run.exit_code in (EXIT_OK, EXIT_OVERLOADED, EXIT_THRESHOLD)


def test_a_summary_through_its_dict_is_itself():
    from llmbench.analysis import metrics
    from tests.helpers.records import varied
    for kw in ({}, {"goodput_slo_ms": {"ttft": 40.0}, "within": [("ttft", 30.0), ("itl", 10.0)],
                    "percentiles": (50.0, 90.0, 95.0, 99.0, 99.9)}):
        s = metrics.summarize(varied(300, 3), **kw)
        assert isinstance(s, Summary) and s.by_turn and s.requests_with_reasoning
        assert Summary.from_dict(s.to_dict()) == s
        assert json.loads(json.dumps(s.to_dict())) == s.to_dict()    # JSON, infinities included
    empty = metrics.summarize([])
    assert Summary.from_dict(empty.to_dict()) == empty and empty.ttft.n == 0
    assert empty.ttft.p95 is None                      # no data is None, never 0


def test_an_unknown_key_is_kept_and_a_bad_version_refused():
    data = {"schema_version": 1, "kind": "run", "status": "complete", "from_the_future": [1],
            "summary": {"completed": 1, "failed": 0, "later_metric_ms": 3.0}}
    run = Run.from_dict(data)
    assert run.to_dict() == data and run.extra == {"from_the_future": [1]}
    assert run.summary is not None and run.summary.extra == {"later_metric_ms": 3.0}
    with pytest.raises(RunFolderError, match="schema version 2"):
        Run.from_dict({"schema_version": 2, "kind": "run"})


# -- a typed field added later is one line: to_dict and from_dict need nothing else ------------

@dataclass
class Telemetry(Part):
    cpu_pct: float | None = None
    gpu_util: list[float] | None = part(None, omit="none")


@dataclass
class StepWithTelemetry(Step):
    telemetry: Telemetry | None = part(None, omit="none")


@dataclass
class SessionSummary(Part):
    sessions: int = 0
    duration_ms: Metric | None = None          # a distribution of its own, by statistic
    first_turns: Summary | None = None


@dataclass
class RunWithSessions(Run):
    agent_sessions: SessionSummary | None = part(None, omit="none")


def test_a_new_typed_field_is_one_line():
    st = StepWithTelemetry(index=0, load=2, held=True, summary=Summary(completed=3),
                           telemetry=Telemetry(cpu_pct=float("inf"), gpu_util=[0.5]))
    d = st.to_dict()
    assert d["telemetry"] == {"cpu_pct": "inf", "gpu_util": [0.5]}     # JSON: inf as "inf"
    back = StepWithTelemetry.from_dict(d)
    assert back == st and isinstance(back.telemetry, Telemetry)
    # a step written before the field existed reads back without it, and writes the same dict
    old = Step(index=1, load=4, held=False, state="over").to_dict()
    assert "telemetry" not in old and StepWithTelemetry.from_dict(old).to_dict() == old
    duration = Metric.of("session_duration", {"count": 2, "mean": 1500.0, "p95": float("inf")})
    run = RunWithSessions(RunState(kind="run"), summary=Summary(), agent_sessions=SessionSummary(
        sessions=2, duration_ms=duration, first_turns=Summary(completed=2)))
    d = run.to_dict()
    assert d["agent_sessions"]["duration_ms"] == {"n": 2, "mean": 1500.0, "p95": "inf"}
    again = RunWithSessions.from_dict(d)
    assert again.agent_sessions is not None
    assert again.agent_sessions.duration_ms.p95 == float("inf")
    assert again.agent_sessions.first_turns == run.agent_sessions.first_turns and again.to_dict() == d


# -- the exit code: one rule for the command line, the API and the tests ------------------------

def _ramp(states, kind="queuing", **kw) -> Run:
    steps = [Step(index=i, load=u, held=st == "held", state=st,
                  checks=[Check(threshold="ttft.p95<=2s", ok=st == "held",
                                insufficient=st == "not enough data")])
             for i, (u, st) in enumerate(states)]
    from llmbench.results.schema import Verdict
    return Run(RunState(kind="ramp"), steps=steps, verdict=Verdict(kind=kind),
               config={"ramp": {"steps": [u for u, _ in states], **kw}})


def test_exit_code_and_passed():
    assert _ramp([(1, "not enough data"), (2, "held"), (4, "over")]).exit_code == EXIT_OK
    assert _ramp([(1, "not enough data"), (2, "over")]).exit_code == EXIT_THRESHOLD
    # nothing judged (each step held longer first): no answer, exit 7
    assert _ramp([(1, "not enough data"), (2, "not enough data")]).exit_code == 7
    assert _ramp([(1, "held"), (2, "over")], kind="load_generator").exit_code == EXIT_OVERLOADED
    assert _ramp([(1, "held"), (2, "over")], expect=4).exit_code == 1
    run = Run(RunState(kind="run"), summary=Summary(),
              findings=Findings(thresholds=[Check(threshold="x", ok=False)]))
    assert run.exit_code == EXIT_THRESHOLD and not run.passed
    run.findings.thresholds = [Check(threshold="x", ok=True)]
    assert run.exit_code == EXIT_OK and run.passed
    run.state.interrupted = True
    assert run.exit_code == EXIT_INTERRUPTED
    run.state.interrupted, run.state.status = None, "partial"       # read back: partial is interrupted
    assert run.exit_code == EXIT_INTERRUPTED
    run.state.status = "partial"
    run.findings.workers = Workers(count=2, crashed=[LostWorker(worker=1, error="killed")])
    assert run.exit_code == EXIT_OVERLOADED
    run.state.status, run.state.error = "failed", "cannot write results/x/requests.jsonl"
    assert run.exit_code == EXIT_WRITE


def test_a_sweep_settings_server_state_is_typed_and_writes_todays_keys():
    # what the sweep read by key ('st.get("max_running")') is a typed part: written as before,
    # the full state when the probe found samples, else only why it found none
    from llmbench.results.schema import ServerState, SweepSetting
    full = ServerState(kind="llamacpp", samples=12, max_running=2, max_waiting=3, slots=2,
                       max_kv_cache_usage=0.5, max_vram_bytes=None, max_ram_bytes=1e9,
                       preemptions=0, models_loaded=None)
    assert list(full.to_dict()) == ["kind", "samples", "max_running", "max_waiting", "slots",
                                    "max_kv_cache_usage", "max_vram_bytes", "max_ram_bytes",
                                    "preemptions", "models_loaded"]
    assert ServerState(kind=None, note="no /metrics").to_dict() == {"kind": None,
                                                                   "note": "no /metrics"}
    doc = {"setting": {"NP": "2"}, "name": "NP=2", "status": "complete", "held": 2,
           "server_state": {"kind": "ollama", "models_loaded": ["m"], "max_running": 1}}
    s = SweepSetting.from_dict(doc)
    assert isinstance(s.server_state, ServerState) and s.server_state.max_running == 1
    assert s.to_dict()["server_state"] == doc["server_state"]       # read back unchanged
    assert ServerState.from_dict(full.to_dict()) == full


def test_a_run_is_a_few_typed_parts_and_writes_todays_keys_in_todays_order():
    # issue 44: a Run is at most 12 fields, none of them Any (what is known in memory only,
    # as an interruption or a live writer, is its state's); its parts are written as
    # run.json's top-level keys, in the one order run.json has always had
    import dataclasses
    from llmbench.results.schema import RUN_KEYS, Findings, OutageSpan, Router, Sweep
    own = [f.name for f in dataclasses.fields(Run) if f.name not in ("extra", "read_keys")]
    assert len(own) <= 12, own
    for cls in (Run, RunState, Findings, Router, Sweep):
        loose = {k: v for k, v in cls.__annotations__.items() if "Any" in str(v)}
        assert not loose, (cls.__name__, loose)
    run = Run(RunState(kind="run", t0_perf=1.0, pid=7), summary=Summary(),
              config={"load": {"concurrency": 2}}, workload={"fingerprint": "f"},
              findings=Findings(monitor={"busy": False},
                                outages=[OutageSpan(start_s=1.0, attempts=3, text="down")],
                                workers=Workers(count=2), trace={"file": "t"},
                                user_changes=[(1.5, 2)]))     # a ramp's: not a run's key
    keys = list(run.to_dict())
    assert keys == [k for k in RUN_KEYS if k in keys]
    assert keys[:3] == ["schema_version", "kind", "status"] and "monitor" in keys
    assert "steps" not in keys and "verdict" not in keys     # a run's body, not a ramp's
    back = Run.from_dict(run.to_dict())
    assert back.findings.monitor == {"busy": False} and back.state.pid == 7
    assert back.to_dict() == run.to_dict() and back.load_level == 2
    assert back.findings.workers == Workers(count=2) and "user_changes" not in keys
    assert back.findings.outages[0].text == "down" and back.findings.outages[0].end_s is None
    ramp = Run(RunState(kind="ramp"), findings=Findings(user_changes=[(1.5, 2), (9.0, 3)]))
    assert ramp.to_dict()["user_changes"] == [[1.5, 2], [9.0, 3]]
    assert Run.from_dict(ramp.to_dict()).findings.user_changes == [(1.5, 2), (9.0, 3)]


def test_a_probe_keeps_its_steps_and_probes_in_its_router_part():
    # a probe's steps and per-path server probes share run.json's "steps" and "server_probe"
    # keys with a ramp's: they are the Router part's, written and read back there
    from llmbench.results.schema import Findings, ProbeStep, Router, RouterBound, ServerProbe
    run = Run(RunState(kind="probe"), findings=Findings(router=Router(
        steps=[ProbeStep(index=0, users=2)], bound=RouterBound(users=2, overhead_ms=9.0),
        server_probes={"router": ServerProbe(kind="nomyo"), "direct": ServerProbe()})))
    d = run.to_dict()
    assert d["steps"][0]["users"] == 2 and d["router_bound"] == {
        "users": 2, "overhead_ms": 9.0, "first_overhead_ms": None, "direct_ttft_p50_ms": None}
    assert d["server_probe"]["router"]["kind"] == "nomyo" and "summary" not in d
    back = Run.from_dict(d)
    assert back.steps == [] and back.findings.router.steps[0].users == 2
    assert back.findings.server_probe is None
    assert back.findings.router.server_probes["router"].kind == "nomyo"
    assert back.to_dict() == d and list(back.to_dict()) == list(d)


def test_a_routers_backends_are_typed_as_analysis_finds_them():
    from llmbench.analysis.backends import backends
    from llmbench.report.outcome import implausible_line
    from llmbench.results.schema import Backends, Findings, ProbeStep, Router
    from tests.helpers.records import varied
    recs = varied(40, 2)
    for i, r in enumerate(recs):
        r.served_by = f"b{i % 2}"
    found = backends(recs)
    typed = Backends.of(found)
    assert typed is not None and set(typed.backends) == {"b0", "b1"} and typed.count == 2
    assert typed.backends["b0"].share == found["backends"]["b0"]["share"]
    assert typed.to_dict() == json.loads(json.dumps(found))        # the keys analysis wrote
    run = Run(RunState(kind="probe"), findings=Findings(router=Router(backends=typed)))
    assert Run.from_dict(run.to_dict()).findings.router.backends == typed
    # several backends may really serve faster than one: no "implausible" line then
    assert implausible_line([ProbeStep(users=1)], typed) is None
