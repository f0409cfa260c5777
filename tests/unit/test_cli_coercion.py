"""The command line's own coercion (cli/options.py cheap_coercion) gives what typer's pydantic
coercion gives, value and type, or the same error, for every parameter of every command; and a
command line parsed with it does not import pydantic (the reason it exists: ~0.1 s of CPU)."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from llmbench.cli import options

ROOT = Path(__file__).resolve().parents[2]
APP = importlib.import_module("llmbench.cli.app")

TEXTS = ["0", "7", "007", "-3", "+3", " 7 ", "1.5", "1.0", "-2.50", ".5", "5.", "1e3", "1e308",
         "nan", "inf", "-inf", "", "abc", "1_000", "0x10", "３", "123456789012345678",
         "1234567890123456789012345", "0.1", "3.141592653589793", "99999999999999.999999999999999",
         "-0", "-0.0", "a b", "/tmp", "~/x", "-"]
VALUES = [*TEXTS, 0, 5, -1, 2 ** 60, 1.5, 2.0, float("inf"), True, None, Path("/tmp/x"),
          ("a", "b"), ["1", "2"], (), ("/tmp", "x")]


def _params():
    seen = set()
    for name in APP._TABLE:
        cmd = APP._command(name)
        for p in cmd.params:
            desc = getattr(p, "type_descriptor", None)
            if desc is None:
                continue
            key = (repr(desc.annotation), p.multiple, p.nargs)
            if key not in seen:
                seen.add(key)
                yield pytest.param(cmd, p, id=f"{name}-{p.name}")


def _outcome(fn):
    try:
        v = fn()
    except Exception as exc:            # noqa: BLE001 - the error itself is compared
        return ("error", type(exc).__name__, str(exc))
    return ("value", type(v).__name__, repr(v),
            [type(x).__name__ for x in v] if isinstance(v, list) else None)


@pytest.mark.parametrize("cmd, param", list(_params()))
def test_every_parameter_coerces_as_typer_does(cmd, param):
    from typer._coercion import build_runtime_param
    ctx = cmd.make_context(cmd.name, [], resilient_parsing=True)
    options.cheap_coercion([param])
    cheap = param._runtime_param
    assert isinstance(cheap, options._CheapParam), param.name
    typer_own = build_runtime_param(param.type_descriptor)
    for v in VALUES:
        if isinstance(v, (list, tuple)) and not (param.multiple or param.nargs == -1):
            continue
        assert _outcome(lambda: cheap.coerce(v, param, ctx)) == \
            _outcome(lambda: typer_own.coerce(v, param, ctx)), (param.name, v)


def test_a_run_command_line_is_parsed_without_pydantic(tmp_path):
    # the options a run against a URL gives, parsed and turned into its spec, in a fresh process
    code = f"""
import importlib, sys
mod = importlib.import_module("llmbench.cli.app")
cmd = mod._command("run")
got = {{}}
cmd.callback = lambda **kw: got.update(kw)
ctx = cmd.make_context("run", ["--url", "http://127.0.0.1:9/v1", "--model", "m",
    "--requests", "3", "--rate", "2.5", "--concurrency", "4", "--label", "a=b",
    "--out", {str(tmp_path)!r}])
cmd.invoke(ctx)
assert got["requests"] == 3 and got["concurrency"] == 4 and got["label"] == ["a=b"], got
print("pydantic" in sys.modules)
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False", "parsing `llmbench run` imported pydantic"
