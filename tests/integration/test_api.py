"""The Python API end to end, in-process, against the built-in mock: the README's example
(``test_the_readme_example`` is that example, line for line), a sweep with a ``serve`` command,
and the exceptions a caller gets instead of an exit code."""

from __future__ import annotations

import importlib.util
import sys

import pytest

import llmbench
from tests.helpers import free_port
from tests.helpers.readme import python_example

# short steps on a fast mock: the whole example takes about 15 s
FAST = dict(ramp_in="0.3s", think="0", turns=1, prompt_tokens=16, output_tokens=8,
            generator_lag_limit="2000ms")


def test_the_readme_example(tmp_path):
    """The README's example, run as the README shows it (tests/helpers/readme.py reads it)."""
    out = tmp_path / "results"
    ns: dict = {"out": out}
    exec(compile(python_example(), "README.md (Python API)", "exec"), ns)  # noqa: S102
    run, ramp, back = ns["run"], ns["ramp"], ns["back"]
    assert run.kind == "run" and run.status == "complete" and not run.partial
    assert run.summary.completed == 20 and run.summary.failed == 0
    assert run.summary.ttft.p50 >= 50 and run.summary.output_throughput > 0
    assert run.path is not None and run.path.parent == out and (run.path / "config.toml").is_file()
    # max_tokens= (the command line's --max-tokens) is output_tokens: every request asked 16
    import json
    asked = {json.loads(line)["max_tokens"] for line in (run.path / "requests.jsonl").open()}
    assert asked == {16}
    assert [s.users for s in ramp.steps] == [1.0, 2.0]
    assert all(s.summary.ttft.p95 is not None for s in ramp.steps)
    assert ramp.verdict is not None and ramp.verdict.kind and ramp.verdict.text
    assert back.summary.completed == run.summary.completed
    assert back.summary.ttft.p50 == run.summary.ttft.p50
    assert (run.path / "report.html").is_file()          # llmbench.report(run.path)


def test_the_api_prints_nothing_unless_asked(tmp_path, capfd):
    with llmbench.mock(ttft_ms=20, itl_ms=2) as url:
        capfd.readouterr()
        llmbench.run(url=url, model="mock", requests=3, out=tmp_path)
        quiet = capfd.readouterr()
        llmbench.run(url=url, model="mock", requests=3, out=tmp_path, progress=True)
        loud = capfd.readouterr()
    assert quiet.out == "" and quiet.err == ""
    assert "Results:" in loud.out


@pytest.mark.skipif(importlib.util.find_spec("llmbench.results.table") is None,
                    reason="llmbench/results/table.py (Run.requests) is not written yet")
def test_load_run_requests_is_a_frame_with_one_row_per_request(tmp_path):
    with llmbench.mock(ttft_ms=20, itl_ms=2) as url:
        run = llmbench.run(url=url, model="mock", requests=5, out=tmp_path)
    df = llmbench.load_run(run.path).requests()
    assert len(df) == 5


def test_load_run_rebuilds_a_run_killed_before_its_summary(tmp_path):
    import json
    with llmbench.mock(ttft_ms=20, itl_ms=2) as url:
        run = llmbench.run(url=url, model="mock", requests=4, out=tmp_path)
    doc = json.loads((run.path / "run.json").read_text())
    doc.pop("summary")
    doc["status"] = "running"                     # as a SIGKILLed run leaves it
    (run.path / "run.json").write_text(json.dumps(doc))
    back = llmbench.load_run(run.path)
    assert back.status == "partial" and back.summary.completed == 4
    assert "rebuilt" in back.data["note"]


def test_load_run_of_something_else_is_a_usage_error(tmp_path):
    with pytest.raises(llmbench.UsageError):
        llmbench.load_run(tmp_path)


def test_sweep_with_a_serve_command(tmp_path):
    serve = (f"{sys.executable} -m llmbench.cli mock --host 127.0.0.1 --port {{PORT}} "
             "--parallel {NP} --ttft-ms 20 --itl-ms 5")
    sweep = llmbench.sweep(settings={"NP": [1, 2]}, serve=serve,
                           url="http://127.0.0.1:{PORT}/v1", users=[1, 2], hold="1s",
                           ready_timeout="60s", out=tmp_path, **FAST)
    assert sweep.kind == "sweep" and sweep.status == "complete"
    assert [r["name"] for r in sweep.data["results"]] == ["NP=1", "NP=2"]
    assert all(r["status"] == "complete" for r in sweep.data["results"])
    assert sweep.data["answer"] and (sweep.path / "config.toml").is_file()
    again = llmbench.Sweep.load(sweep.path)
    assert again.kind == "sweep" and again.data["results"] == sweep.data["results"]


def test_a_dead_port_is_server_unreachable(tmp_path):
    port = free_port()
    with pytest.raises(llmbench.ServerUnreachable, match=f"127.0.0.1:{port}"):
        llmbench.run(url=f"http://127.0.0.1:{port}/v1", model="m", requests=1, out=tmp_path)
    with pytest.raises(llmbench.ServerUnreachable):
        llmbench.ramp(url=f"http://127.0.0.1:{port}/v1", model="m", users=[1], hold="1s",
                      out=tmp_path)


def test_a_bad_value_is_a_usage_error_before_anything_starts(tmp_path):
    with pytest.raises(llmbench.UsageError, match="--hold"):
        llmbench.ramp(url="http://127.0.0.1:9/v1", model="m", hold="soon", out=tmp_path)
    with pytest.raises(llmbench.UsageError, match="--rate"):
        llmbench.run(url="http://127.0.0.1:9/v1", model="m", rate="fast", out=tmp_path)
    assert not any(tmp_path.iterdir())
