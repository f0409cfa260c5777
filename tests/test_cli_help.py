"""The CLI fits a terminal: `--version`, and help grouped into panels that show every option
name whole at 80 columns (rich cuts a name that does not fit with an ellipsis)."""

import re

import pytest
import typer

from llmbench import __version__
from llmbench.cli import app
from test_cli import llmbench

COMMANDS = ("run", "ramp", "probe", "mock", "report", "compare", "runs")


def declared_names(command: str) -> list[str]:
    cmd = typer.main.get_command(app).commands[command]
    return [o for p in cmd.params for o in (*p.opts, *p.secondary_opts) if o.startswith("-")]


@pytest.mark.parametrize("command", COMMANDS)
def test_help_at_80_columns_shows_every_option_name_whole(command):
    r = llmbench(command, "--help", env={"COLUMNS": "80", "TERMINAL_WIDTH": "80"})
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert max(len(line) for line in out.splitlines()) <= 80
    missing = [n for n in declared_names(command)
               if not re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", out)]
    assert not missing, f"cut or hidden at 80 columns: {missing}"
    assert "…" not in out                   # nothing else cut either (a URL, a default)


@pytest.mark.parametrize("command, panels", [
    ("run", ("Target", "Load", "Workload", "Request", "Output", "vLLM result JSON")),
    ("ramp", ("Target", "Steps", "Pass/fail", "Workload", "Request", "Output")),
    ("probe", ("Target", "Load", "Workload", "Output")),
])
def test_help_is_grouped_into_panels(command, panels):
    out = llmbench(command, "--help", env={"COLUMNS": "100"}).stdout
    titles = re.findall(r"╭─ (.+?) ─", out)
    assert all(p in titles for p in panels), titles
    assert "--max-tokens" in out            # the alias of --output-tokens is shown


def test_version():
    r = llmbench("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"llmbench {__version__}"
