"""The one assembler's pure parts (analysis/finish.py), on hand-built inputs; the results it
builds from a harness are checked end to end (tests/e2e: run.json of every command)."""

from __future__ import annotations

from llmbench.analysis import finish
from llmbench.client.floor import Floor
from llmbench.load.monitor import busy
from llmbench.load.shapes import StepWindow
from llmbench.results.schema import Run, RunState, Step


def test_a_step_with_no_request_in_its_hold_is_not_enough_data_never_a_failure():
    judge = finish.step_judge([], stall_s=1.0, by="users")
    step = judge(StepWindow(index=0, load=4.0, ramp_start=0.0, hold_start=1.0, hold_end=5.0,
                            records=[], unfinished=0, monitor=busy([])))
    assert step.load == 4 and isinstance(step.load, int)        # users are counted whole
    assert step.state != "over" and not step.held
    assert [c.threshold for c in step.checks] == ["requests>0"]
    assert step.checks[0].insufficient and not step.checks[0].ok


def test_a_rate_step_keeps_its_rate():
    judge = finish.step_judge([], by="rate")
    step = judge(StepWindow(index=1, load=2.5, ramp_start=0.0, hold_start=1.0, hold_end=5.0,
                            records=[], unfinished=0, monitor=busy([])))
    assert step.load == 2.5


def test_the_network_floor_is_none_unless_measured_before_the_load():
    assert finish.network_of([]) is None and finish.network_of([None]) is None
    assert finish.network_of([None, Floor(when="after", rtt_ms=3.0)]) is None
    net = finish.network_of([Floor(rtt_ms=2.0), None, Floor(when="after", rtt_ms=4.0)])
    assert net is not None and net.rtt_ms == 3.0 and len(net.samples) == 2


def test_held_over_repeats_is_the_median_repeat_and_the_min_max_range():
    iv = finish.held_interval([4, 2, 8])
    assert (iv.median, iv.low, iv.high) == (4, 2, 8)
    assert iv.coverage is not None and abs(iv.coverage - 0.75) < 1e-12
    assert "3 repeats" in iv.method
    assert finish.held_interval([5]).method == "one ramp"


def test_a_ramps_answer_is_the_most_that_held():
    steps = [Step(index=0, load=1, held=True, state="held"),
             Step(index=1, load=2, held=True, state="held"),
             Step(index=2, load=4, held=False, state="over")]
    assert finish.run_held(Run(RunState(kind="ramp", status="complete"), steps=steps)) == 2


def test_the_documents_of_a_run_that_measured_nothing(tmp_path):
    from llmbench.results.writer import RunFolder

    class Target:
        def describe(self):
            return {"url": "http://127.0.0.1:1/v1"}
    folder = RunFolder(tmp_path, "ramp", Target(), {"ramp": {"by": "users"}}, {"name": "x"},
                       replay="# replay\n")
    with folder:
        assert folder.path is not None and folder.path.name.endswith("-ramp-x")
        doc = Run.load(folder.path)
        assert doc.status == "running" and doc.state.pid
        assert doc.config == {"target": {"url": "http://127.0.0.1:1/v1"},
                              "ramp": {"by": "users"}}
        assert (folder.path / "config.toml").read_text() == "# replay\n"
        raise KeyboardInterrupt         # before any load: marked, not left "running"
    assert Run.load(folder.path).status == "interrupted" and folder.stopped is not None
    failed = folder.unmeasured("failed", "the server refused")
    assert (failed.status, failed.state.error, failed.state.measured) == (
        "failed", "the server refused", False)
