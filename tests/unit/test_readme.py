"""The README's first two commands stay true, and CI runs the same test command."""

from pathlib import Path

from tests.helpers import ROOT  # noqa: E402


def test_ci_runs_the_readme_test_command():
    readme = ROOT.joinpath("README.md").read_text().splitlines()
    commands = [line for line in readme if "python3 -m venv" in line and not line.startswith("#")]
    assert len(commands) >= 2
    # the test command installs the real components the tests use (nginx, a forward proxy)
    assert commands[1].startswith("bash scripts/install-test-deps.sh && ")
    assert "llmbench ramp" in commands[0]
    assert "pytest" in commands[1]
    ci = ROOT.joinpath(".ci", "run").read_text().splitlines()
    assert commands[1] in ci


def test_secrets_scrubbed_from_the_saved_command_line():
    from llmbench.results.folder import scrub_argv
    argv = ["ramp", "--api-key", "sk-1", "--api-key=sk-2", "--header", "Authorization=Bearer x",
            "--header=X-Key=y", "--model", "m"]
    out = scrub_argv(argv)
    assert out == ["ramp", "--api-key", "***", "--api-key=***", "--header", "Authorization=***",
                   "--header=X-Key=***", "--model", "m"]
    assert not any(s in " ".join(out) for s in ("sk-1", "sk-2", "Bearer", "=y"))
    # the whole value, whatever it holds: base64 has '=' inside, URLs carry user:password@
    out = scrub_argv(["--header", "Authorization: Basic dXNlcjpTRUNSRVQxMjM0NTY3OA==",
                      "--header=Authorization: Basic dXNlcjpTRUNSRVQxMjM0NTY3OA==",
                      "--url", "http://user:pw@host:1/v1", "--direct=https://u:p@h/v1"])
    assert out == ["--header", "Authorization: ***", "--header=Authorization: ***",
                   "--url", "http://host:1/v1", "--direct=https://h/v1"]
