"""The public API's surface: exactly the names in ``llmbench.__all__`` (as httpx checks its
exported members), each importable, ``import llmbench`` still light, and every keyword of the
API the same option as the command line's, with the same default (one declaration each)."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys

import pytest

import llmbench
from tests.helpers import ENV, ROOT

EXPECTED = {
    "run", "ramp", "sweep", "probe", "report", "compare", "load_run", "mock",
    "RunSpec", "RampSpec", "SweepSpec", "ProbeSpec", "ReportSpec", "CompareSpec", "Threshold",
    "Run", "Step", "Summary", "Metric", "Verdict", "Sweep", "Report", "Comparison",
    "LlmbenchError", "UsageError", "ServerUnreachable", "ServerRefused", "CommandFailed",
    "RunFailed",
    # the option groups a spec is made of, passed whole (llmbench/specs/)
    "Target", "Server", "Telemetry", "Prompts", "Agent", "Request", "Output", "RunLoad",
    "RampSteps",
    "__version__",
}


def test_all_is_exactly_the_public_api():
    assert set(llmbench.__all__) == EXPECTED
    assert len(llmbench.__all__) == len(set(llmbench.__all__))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_exported_name_resolves_and_is_listed_in_dir(name):
    assert getattr(llmbench, name) is not None
    assert name in dir(llmbench)


def test_exported_members_come_from_their_modules():
    from llmbench import errors
    from llmbench.results import schema
    assert llmbench.Run is schema.Run and llmbench.Verdict is schema.Verdict
    assert llmbench.UsageError is errors.UsageError
    for name in ("UsageError", "ServerUnreachable", "ServerRefused", "CommandFailed", "RunFailed"):
        assert issubclass(getattr(llmbench, name), llmbench.LlmbenchError)
    assert llmbench.__version__ == __import__("llmbench.version").version.__version__


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError):
        llmbench.nosuch  # noqa: B018


def test_import_llmbench_stays_light():
    """The API is imported on first use: `import llmbench` loads neither Typer nor numpy nor
    the API module (the CLI must not start slower)."""
    code = ("import sys, json, llmbench; print(json.dumps(sorted(m for m in sys.modules "
            "if m.split('.')[0] in ('typer', 'numpy', 'llmbench'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=ENV, cwd=ROOT, check=True).stdout
    mods = json.loads(out)
    assert mods == ["llmbench", "llmbench.version"], mods


@pytest.mark.parametrize("command", ["run", "ramp", "sweep", "probe", "mock", "report", "compare"])
def test_every_keyword_is_the_cli_option_with_the_same_default(command):
    import typer
    from llmbench.cli.app import app
    params = {p.name: p for p in typer.main.get_command(app).commands[command].params}
    sig = inspect.signature(getattr(llmbench, command))
    for name, p in sig.parameters.items():
        if p.kind is inspect.Parameter.POSITIONAL_ONLY:     # the spec itself: run(RunSpec(...))
            continue
        assert name in params, (command, name)
        if name in ("progress", "port"):          # the API: quiet, a free port
            continue
        want = params[name].default
        got = None if p.default is inspect.Parameter.empty else p.default
        if want is not None and got is not None and not callable(want):
            assert got == want or str(got) == str(want), (command, name, got, want)
    cli_only = {"config", "json_out", "help"}
    assert set(params) - set(sig.parameters) <= cli_only, set(params) - set(sig.parameters)


def test_a_bad_value_is_the_cli_line_as_a_usage_error():
    with pytest.raises(llmbench.UsageError, match=r"^--concurrency must be at least 1$"):
        llmbench.run(url="http://127.0.0.1:9/v1", model="m", concurrency=0)
    with pytest.raises(llmbench.UsageError, match="did you mean concurrency"):
        llmbench.run(concurency=3)
    with pytest.raises(llmbench.UsageError, match="--users 'x,y'"):
        llmbench.ramp(url="http://127.0.0.1:9/v1", users="x,y")
    with pytest.raises(llmbench.UsageError, match="--parallel -1: must be at least 0"):
        with llmbench.mock(parallel=-1):
            pass
