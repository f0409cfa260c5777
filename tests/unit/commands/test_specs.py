"""The commands' typed specs (llmbench/commands/*_spec.py): Python values and the command line's
texts make the same spec, the command line's other spellings are keywords too, a bad value is
the command line's one line, the command line builds the spec the API builds, and config.toml
(the spec's command line values) replays to the same spec."""

import dataclasses
from datetime import timedelta
from pathlib import Path

import pytest
import typer

import llmbench
from llmbench.analysis.slo import Threshold
from llmbench.cli.app import app
from llmbench.specs.probe import ProbeSpec
from llmbench.specs.ramp import RampSpec
from llmbench.commands.report import CompareSpec, ReportSpec
from llmbench.specs.run import RunSpec
from llmbench.specs.sweep import SweepSpec
from llmbench.errors import UsageError


def test_python_values_and_command_line_texts_make_the_same_spec():
    typed = RunSpec(url="http://h:1/v1", duration=timedelta(minutes=2), think=(5, 10),
                    rate=4, metric_percentiles=(50, 99), percentile_metrics=("ttft", "itl"),
                    threshold=[Threshold.parse("ttft.p95<=2s"), "errors==0"],
                    label={"name": "a"}, goodput={"ttft": 500}, output_tokens=(64, 256),
                    extra_body={"top_p": 0.9}, timeout_total=timedelta(seconds=30), workers=2)
    texts = RunSpec(url="http://h:1/v1", duration="2m", think="5s-10s", rate="4",
                    metric_percentiles="50,99", percentile_metrics="ttft,itl",
                    threshold=["ttft.p95<=2s", "errors==0"], label=["name=a"],
                    goodput=["ttft:500"], output_tokens="64-256", extra_body='{"top_p": 0.9}',
                    timeout_total=30, workers="2")
    assert typed == texts
    # what the spec holds: one type each
    assert typed.duration == 120.0 and typed.think == (5.0, 10.0) and typed.rate == 4.0
    assert typed.metric_percentiles == (50.0, 99.0) and typed.percentile_metrics == ("ttft", "itl")
    assert all(isinstance(t, Threshold) for t in typed.threshold)
    assert typed.threshold[0].value == 2000.0 and typed.label == {"name": "a"}
    assert typed.goodput == {"ttft": 500.0} and typed.output_tokens == (64, 256)
    assert typed.timeout_total == 30.0 and typed.workers == 2
    # defaults are the command line's, held typed
    plain = RunSpec()
    assert plain.think == (0.0, 0.0) and plain.metric_percentiles == (99.0,)
    assert plain.output_tokens == 128 and plain.progress is False and plain.workers == 1
    ramp = RampSpec(users="1,2,4", hold="30s", generator_lag_limit="10ms")
    assert ramp.users == [1, 2, 4] and ramp.hold == 30.0 and ramp.generator_lag_limit == 0.01
    assert ramp.timeout_first_token == 120.0 and ramp.prompt_tokens is None      # ramp's own
    assert RampSpec(users=[1.5, 3], by="rate").users == [1.5, 3]                 # req/s


def test_the_command_lines_other_spellings_are_keywords():
    assert RunSpec(max_tokens=16).output_tokens == 16
    assert RunSpec(no_stream=True).stream is False and RunSpec(no_progress=True).progress is False
    assert ProbeSpec(router="r", direct="d", model="m", slice="2s").slice_s == 2.0
    assert SweepSpec(settings={"parallel": [1, 2]}, mock=True).setting == {"parallel": ["1", "2"]}
    # the keyword shortcut takes them too, and says what a misspelt one meant
    assert RunSpec.from_options({"max_tokens": 8, "no_stream": True}).output_tokens == 8
    with pytest.raises(UsageError, match=r"unknown option 'concurency' \(did you mean concurrency\?\)"):
        RunSpec.from_options({"concurency": 3})
    with pytest.raises(UsageError, match="max_tokens= and output_tokens= are the same option"):
        RunSpec.from_options({"max_tokens": 8, "output_tokens": 9})
    with pytest.raises(UsageError, match=r"llmbench.probe\(\): router= is required \(--router"):
        ProbeSpec.from_options({"direct": "d", "model": "m"})


@pytest.mark.parametrize("kw, line", [
    (dict(duration="x"), "--duration 'x': expected a duration such as 30s, 500ms, 2m or 1m30s"),
    (dict(duration=-1), "--duration '-1.0': must not be negative"),
    (dict(rate="fast"), "--rate 'fast': expected a number of requests per second, or inf"),
    (dict(concurrency=0), "--concurrency must be at least 1"),
    (dict(metric_percentiles="50,x"), "--metric-percentiles '50,x': expected numbers like 50,90,99"),
    (dict(threshold=["nope<=1"]), "threshold 'nope<=1': unknown metric 'nope'"),
    (dict(think="9s-1s"), "--think '9s-1s': need 0 <= LO <= HI"),
    (dict(output_tokens="0"), "--output-tokens '0': need 1 <= LO <= HI"),
    (dict(workers="many"), "--workers 'many': expected a number of processes"),
    (dict(extra_body="[1]"), "--extra-body must be a JSON object"),
    (dict(label=["novalue"]), "--label 'novalue': expected KEY=VALUE"),
    (dict(server_pid="abc"), "--server-pid 'abc': expected a process id (e.g. 12345), auto or off"),
    (dict(server_pid=0), "--server-pid 0: a process id is a positive number"),
    (dict(gpu_metrics="cuda"), "--gpu-metrics 'cuda': choose a DCGM exporter's URL (e.g. "
                               "http://gpu-box:9400/metrics), nvml, amd, auto or off"),
    (dict(gpu_metrics="http://h:x"), "--gpu-metrics 'http://h:x': the port is not a number; "
                                     "e.g. http://gpu-box:9400/metrics"),
    (dict(host_metrics="ftp://h:9100"), "--host-metrics 'ftp://h:9100': expected an http(s) URL "
                                        "such as http://gpu-box:9100/metrics"),
])
def test_a_bad_value_is_the_command_lines_line(kw, line):
    with pytest.raises(UsageError) as err:
        RunSpec(**kw)
    assert str(err.value).startswith(line), str(err.value)


def _cli_spec(command: str, argv: list[str]):
    """The spec the command line builds from ``argv`` (its parsed parameters)."""
    cmd = typer.main.get_command(app).commands[command]
    ctx = cmd.make_context(command, list(argv))          # (click takes the list's items)
    multiple = {p.name for p in cmd.params if getattr(p, "multiple", False) or p.nargs == -1}
    # as typer hands them to the command: a repeatable option not given is None, else a list
    params = {k: (list(v) or None) if k in multiple else v for k, v in ctx.params.items()}
    cls = {"run": RunSpec, "ramp": RampSpec, "probe": ProbeSpec, "report": ReportSpec,
           "compare": CompareSpec}[command]
    return cls(**{k: v for k, v in params.items() if k not in ("config", "json_out")})


@pytest.mark.parametrize("command, argv, api", [
    ("run", ["--url", "http://h:1/v1", "--rate", "4", "--duration", "90s", "--max-tokens", "16",
             "--no-stream", "--threshold", "ttft.p95<=2s", "--label", "a=b",
             "--metric-percentiles", "50,99"],
     dict(url="http://h:1/v1", rate=4.0, duration=90.0, max_tokens=16, stream=False,
          threshold=["ttft.p95<=2s"], label={"a": "b"}, metric_percentiles=(50, 99),
          progress=None)),
    ("ramp", ["--users", "1,2,4", "--hold", "2s", "--think", "0", "--keep-going"],
     dict(users=[1, 2, 4], hold=2.0, think=0, keep_going=True, progress=None)),
    ("probe", ["--router", "r", "--direct", "d", "--model", "m", "--slice", "2s"],
     dict(router="r", direct="d", model="m", slice_s=2.0, progress=None)),
    ("report", ["results/x", "--format", "md"], dict(run_dir=Path("results/x"), format="md")),
    ("compare", ["a", "b", "--html", "c.html"], dict(run_dirs=["a", "b"], html_out="c.html")),
])
def test_the_command_line_builds_the_spec_the_api_builds(command, argv, api):
    cls = type(_cli_spec(command, argv))
    assert _cli_spec(command, argv) == cls.from_options(api)


def test_the_replay_of_a_spec_is_the_spec():
    """config.toml holds the spec's command line values; read back, they make the same spec."""
    for spec in (RunSpec(url="http://h:1/v1", duration="2m", think="1s-2s", max_tokens=16,
                         threshold=["ttft.p95<=2s"], label={"a": "b"}, goodput=["tpot:30"],
                         trace_window=None, extra_body={"top_p": 0.5}, rate=2.5),
                 RampSpec(users=[1, 2], hold=2.0, ramp_in=0.5, think=0, prompt_tokens="32-96"),
                 SweepSpec(settings={"parallel": [1, 2]}, mock=True, mock_options="--itl-ms 5"),
                 ProbeSpec(router="r", direct="d", model="m", users="1,4")):
        values = {k: v for k, v in spec.cli_values().items() if v is not None}
        assert type(spec).from_options(values) == spec, type(spec).__name__
        assert dataclasses.replace(spec) == spec


def test_the_api_takes_a_spec_or_its_fields():
    """A spec's checks run before anything starts, whichever way it comes."""
    with pytest.raises(UsageError, match="^--concurrency must be at least 1$"):
        llmbench.run(url="http://127.0.0.1:9/v1", concurrency=0)
    with pytest.raises(UsageError, match="give the options as keywords"):
        llmbench.run("http://x/v1")                                   # type: ignore[call-overload]
    with pytest.raises(UsageError, match="no run.json here"):
        llmbench.report(ReportSpec("/nonexistent/run"))
    with pytest.raises(UsageError, match="no run.json here"):
        llmbench.report("/nonexistent/run", format="md")


def test_run_ramp_sweep_and_probe_take_the_telemetry_options_and_say_what_to_sample():
    """--server-pid, --host-metrics, --gpu-metrics (issue 39): on the four load commands, in the
    "Server telemetry" panel, held typed; telemetry_spec is what the harness samples."""
    from llmbench.client.target import make_target
    from llmbench.specs.groups import P_TELEMETRY, TelemetryOpts
    from llmbench.specs.options import opt_of
    names = ("server_pid", "host_metrics", "gpu_metrics")
    for cls in (RunSpec, RampSpec, SweepSpec, ProbeSpec):
        assert issubclass(cls, TelemetryOpts), cls.__name__
        fields = {f.name: f for f in dataclasses.fields(cls)}
        assert [opt_of(fields[n]).panel for n in names] == [P_TELEMETRY] * 3
        assert [fields[n].default for n in names] == ["auto", None, "auto"]
    spec = RunSpec(server_pid=" 4242 ", host_metrics="gpu-box:9100/metrics", gpu_metrics="NVML")
    assert (spec.server_pid, spec.host_metrics, spec.gpu_metrics) == (
        4242, "http://gpu-box:9100/metrics", "nvml")
    assert RunSpec.from_options({k: v for k, v in spec.cli_values().items()
                                 if v is not None}) == spec            # config.toml replays it
    here = make_target("http://127.0.0.1:8080/v1", "m", api_key="sk-x")
    far = make_target("http://gpu-box:8000/v1", "m")
    given = spec.telemetry_spec(here, "auto")
    assert (given.server_pid, given.pid_from, given.local, given.find_port) == (
        4242, "--server-pid", True, None)
    assert (given.host_url, given.gpu, given.model) == ("http://gpu-box:9100/metrics", "nvml", "m")
    assert given.root == here.server_root and given.models_path == "/v1/models"
    assert given.headers["authorization"] == "Bearer sk-x" and "content-type" not in given.headers
    auto = RampSpec().telemetry_spec(here, "auto")            # found by the loopback port
    assert (auto.server_pid, auto.find_port, auto.local, auto.gpu) == (None, 8080, True, "auto")
    served = RampSpec().telemetry_spec(here, "auto", pid=77, pid_from="--serve")   # sweep --serve
    assert (served.server_pid, served.pid_from, served.local, served.find_port) == (
        77, "--serve", True, None)
    remote = ProbeSpec(router="r", direct="d", model="m").telemetry_spec(far, "off")
    assert not remote.local and remote.find_port is None and remote.root is None
    off = RunSpec(server_pid="off").telemetry_spec(here, "auto", pid=77)
    assert off.server_pid is None and not off.local and off.root == here.server_root


def test_agent_options_without_workload_agent_are_one_line_not_ignored():
    # issue 45: --agent-* given without --workload agent did nothing, silently
    from llmbench.errors import UsageError
    with pytest.raises(UsageError) as e:
        RampSpec(agent_steps="3", agent_tools=2)
    assert str(e.value) == ("--agent-steps, --agent-tools: these apply to agent sessions only; "
                            "add --workload agent, or leave them out")
    assert RampSpec(workload_type="agent", agent_steps="3").agent_steps == (3, 3)
    assert RampSpec().agent_options_given() == []


def test_the_think_warning_reads_each_scenario_class_think(tmp_path, capsys):
    from llmbench.commands.ramp import prepared
    # issue 45: the warning read --think's default (3 s) although every class thought 0
    f = tmp_path / "sc.toml"
    f.write_text('[classes.chat]\nshare = 0.5\nthink = "0"\n'
                 '[classes.rag]\nshare = 0.5\nthink = "0"\nprompt_tokens = 200\n')
    prepared(RampSpec(scenario=str(f), users="2", hold="1s"))
    assert "think time" not in capsys.readouterr().err
    f.write_text('[classes.chat]\nshare = 0.5\nthink = "5s"\n[classes.rag]\nshare = 0.5\n'
                 'think = "0"\n')
    prepared(RampSpec(scenario=str(f), users="2", hold="1s"))
    assert "longest think time (chat's, 5s)" in capsys.readouterr().err


def test_a_spec_says_every_problem_at_once_each_naming_its_flag():
    """As k6's executor configs: three mistakes are three lines, not one per attempt; a value
    that cannot be read is one of them, and the rules that read it do not trip on it."""
    from llmbench.options import Problems
    with pytest.raises(Problems) as e:
        RunSpec(url="http://h:1/v1", concurrency=0, rate=1, duration="zz", arrival="zz",
                temperature=-3, quiet=True, verbose=True)
    lines = e.value.problems
    assert str(e.value) == "\n".join(lines)
    for flag in ("--duration 'zz'", "--concurrency", "--arrival 'zz'", "--temperature -3",
                 "--quiet and --verbose"):
        assert sum(flag in x for x in lines) >= 1, (flag, lines)
    assert len(lines) == len(set(lines)) == 6, lines        # rate + concurrency: one more
    # one problem is one line, as before
    with pytest.raises(UsageError) as one:
        RampSpec(url="http://h:1/v1", by="x")
    assert str(one.value) == "--by 'x': choose users or rate"
    # a search bound that is not finite: its line, not a crash of the rules that compare it
    with pytest.raises(UsageError, match="--up-to inf"):
        RampSpec(url="http://h:1/v1", find=True, up_to=float("inf"))


def test_the_command_line_prints_every_problem_and_exits_2():
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-m", "llmbench.cli", "ramp", "--url", "http://h:1/v1",
                        "--by", "x", "--join", "y", "--hold", "0", "--repeat", "0"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert r.stderr.splitlines() == [
        "error: --by 'x': choose users or rate", "error: --join 'y': choose start or spread",
        "error: --hold must be above 0", "error: --repeat 0: must be between 1 and 1000"], r.stderr


def test_the_option_groups_can_be_passed_whole():
    """httpx-style: small typed option objects composed into the spec; the same spec as the
    flat keywords (the command line's flags), and the command's own defaults kept."""
    from llmbench import Output, Request, RampSteps, RunLoad, Target
    grouped = RunSpec(target=Target(url="http://h:1/v1", model="m"),
                      load=RunLoad(concurrency=4, duration="2m"),
                      request=Request(temperature=0.5, timeout_idle=5),
                      output=Output(label={"name": "a"}), thresholds=["ttft.p95<=2s"])
    flat = RunSpec(url="http://h:1/v1", model="m", concurrency=4, duration=120.0,
                   temperature=0.5, timeout_idle=5, label={"name": "a"},
                   threshold=["ttft.p95<=2s"])
    assert grouped == flat
    # a group's defaults are not "given": ramp keeps its own first-token timeout (120 s)
    r = RampSpec(target=Target(url="http://h:1/v1"), ramp=RampSteps(users=[1, 2]),
                 request=Request(timeout_idle=5))
    assert (r.users, r.timeout_first_token, r.timeout_idle) == ([1, 2], 120.0, 5.0)
    # through the API's keywords too (llmbench.run(target=...)), as the spec takes them
    assert RunSpec.from_options({"target": Target(url="http://h:1/v1"), "rate": 2}).rate == 2.0


def test_a_group_given_twice_or_of_the_wrong_kind_is_one_line():
    from llmbench import Request, Target
    with pytest.raises(UsageError, match=r"url= and target=TargetOpts\(url=...\) are the same"):
        RunSpec(url="http://a:1/v1", target=Target(url="http://b:1/v1"))
    with pytest.raises(UsageError, match="target= takes a TargetOpts"):
        RunSpec(target=Request())                    # type: ignore[arg-type]
    # a group checks its own options when made, before any spec
    with pytest.raises(UsageError, match="--temperature -1"):
        Request(temperature=-1)
    # and the spec checks them with the others': every problem at once
    from llmbench import RunLoad
    with pytest.raises(UsageError) as e:
        RunSpec(load=RunLoad(concurrency=0, rate=1), quiet=True, verbose=True)
    assert [x.split(" ")[0] for x in e.value.problems] == ["--quiet", "give", "--concurrency"]


def test_probe_and_sweep_take_their_groups_whole_too():
    from llmbench import RampSteps, Request, Server
    from llmbench.specs.probe import ProbeLoadOpts
    s = SweepSpec(setting={"parallel": [1, 2]}, mock=True, ramp=RampSteps(users=[1, 2]),
                  request=Request(temperature=0), thresholds=["ttft.p95<=1s"])
    assert s == SweepSpec(setting={"parallel": [1, 2]}, mock=True, users=[1, 2],
                          temperature=0, threshold=["ttft.p95<=1s"])
    assert s.timeout_first_token == 120.0                 # sweep's own default, kept
    p = ProbeSpec(router="http://r:1/v1", model="m", server=Server(api="openai-chat"),
                  load=ProbeLoadOpts(users=[1, 2], rounds=2))
    assert (p.users, p.rounds, p.api, p.turns) == ([1, 2], 2, "openai-chat", 3)
