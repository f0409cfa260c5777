"""The CLI fits a terminal: `--version`, and help grouped into panels that show every option
name whole at 80 columns (rich cuts a name that does not fit with an ellipsis)."""

import re

import pytest
import typer

from llmbench.version import __version__
from llmbench.cli.app import app
from tests.helpers import ROOT, llmbench

COMMANDS = ("run", "ramp", "sweep", "probe", "mock", "report", "compare", "runs", "dashboard",
            "chat", "context", "servers")


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
    ("sweep", ("Sweep", "Target", "Steps", "Pass/fail", "Workload", "Request", "Output")),
])
def test_help_is_grouped_into_panels(command, panels):
    out = llmbench(command, "--help", env={"COLUMNS": "100"}).stdout
    titles = re.findall(r"╭─ (.+?) ─", out)
    assert all(p in titles for p in panels), titles
    assert "--max-tokens" in out            # the alias of --output-tokens is shown


def test_version():
    r = llmbench("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"llmbench {__version__}"


def test_ramp_live_view_fits_an_80_column_terminal_and_names_the_phase(mock_factory, tmp_path):
    """On a real terminal (a pty, 80x30) the live view's rows are redrawn in place, none wider
    than the terminal; the phase moves on (never 'ramp-in' after 'hold'); the rows are erased
    before the report is printed."""
    import fcntl
    import os
    import pty
    import re
    import struct
    import subprocess
    import sys
    import termios

    from tests.helpers import ENV
    m = mock_factory(ttft_ms=20, itl_ms=5, models=["a-rather-long-model-name-to-push-the-line"])
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 80, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "llmbench.cli", "ramp", "--url", m.url + "/v1", "--model",
         "a-rather-long-model-name-to-push-the-line", "--users", "1,2", "--ramp-in", "0.5s",
         "--hold", "2.5s", "--think", "0", "--output-tokens", "8", "--prompt-tokens", "10",
         "--threshold", "ttft.p95<=10s", "--out", str(tmp_path)],
        stdout=subprocess.PIPE, stderr=slave, env={**ENV, "COLUMNS": "80", "TERM": "xterm"})
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:                      # the child closed its end
            break
        if not data:
            break
        chunks.append(data)
    out, _ = proc.communicate(timeout=120)
    os.close(master)
    assert proc.returncode == 0, out
    tty = b"".join(chunks).decode()
    rows = [r for r in re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "\n", tty).replace("\r", "\n").split("\n")
            if r.strip()]
    heads = [r for r in rows if r.startswith("ramp  step ")]
    assert heads, tty
    assert all(len(r) <= 80 for r in rows), [r for r in rows if len(r) > 80]
    assert any("step 1/2 hold" in r for r in heads), heads
    held = next(i for i, r in enumerate(heads) if "step 1/2 hold" in r)
    assert not any("step 1/2 ramp-in" in r for r in heads[held:]), heads
    assert any(r.startswith("TTFT p50") and "ITL p95" in r for r in rows)
    # the rows were erased (cursor up + clear line) after the last frame
    last = tty.rindex("ramp  step ")
    assert "\x1b[2K" in tty[last:], repr(tty[last:][-300:])


def _declared_options() -> list[tuple[str, str]]:
    """(option name, where) for every option declared in the command line (cli/app.py,
    cli/options.py) and in the specs (specs/*.py, commands/*.py: a spec field's ``option(...)``,
    or a function returning one, such as ``think()``): a declaration counts once however many
    commands use it. The mock's flags configure a server, not a load, and are left out
    (llmbench/mock_server/cli.py)."""
    import ast
    root = ROOT / "llmbench"
    out = []

    def names(call: ast.Call, param: str) -> list[str]:
        decls = [a.value for a in call.args if isinstance(a, ast.Constant)
                 and isinstance(a.value, str) and a.value.startswith("-") and " " not in a.value]
        decls = [n for d in decls for n in d.split("/") if n.startswith("--")]
        return decls or ["--" + param.replace("_", "-")]

    def option_calls(node: ast.AST) -> list[ast.Call]:
        return [c for c in ast.walk(node) if isinstance(c, ast.Call) and (
            (isinstance(c.func, ast.Attribute) and c.func.attr == "Option")
            or (isinstance(c.func, ast.Name) and c.func.id in ("_opt", "option")))]

    files = ["cli/app.py", "cli/options.py"] + sorted(
        p.relative_to(root).as_posix() for d in ("specs", "commands")
        for p in (root / d).glob("*.py"))
    for file in files:
        tree = ast.parse((root / file).read_text())
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1:      # an alias
                for c in option_calls(node.value):
                    alias = node.targets[0].id  # type: ignore[attr-defined]
                    out += [(n, f"{file}:{alias}") for n in names(c, alias.lower())]
            elif isinstance(node, ast.ClassDef):                               # a group, a spec
                for f in node.body:
                    if isinstance(f, ast.AnnAssign):
                        for c in option_calls(f.annotation) + option_calls(f.value or f.annotation):
                            out += [(n, f"{file}:{node.name}") for n in names(c, f.target.id)]
            elif isinstance(node, ast.FunctionDef) and node.name != "mock":
                for a in node.args.args + node.args.kwonlyargs:               # a command
                    for c in option_calls(a.annotation) if a.annotation else ():
                        out += [(n, f"{file}:{node.name}") for n in names(c, a.arg)]
                for ret in (r for r in ast.walk(node) if isinstance(r, ast.Return)):
                    for c in option_calls(ret.value) if ret.value else ():   # think(), users()
                        out += [(n, f"{file}:{node.name}") for n in names(c, node.name)]
    return out


def test_no_option_is_declared_twice():
    """The options every command shares are declared once (a group or an alias), so no two
    commands can drift apart in names, help or checks."""
    seen: dict[str, str] = {}
    twice = []
    for name, where in _declared_options():
        if name in seen and seen[name] != where:
            twice.append((name, seen[name], where))
        seen.setdefault(name, where)
    assert "--url" in seen and "--timeout-total" in seen and "--dataset" in seen
    assert not twice, f"declared more than once: {twice}"


@pytest.mark.parametrize("command", ("run", "ramp", "probe"))
def test_every_load_command_has_the_shared_groups(command):
    names = set(declared_names(command))
    for flag in ("--api", "--api-key", "--header", "--server-probe", "--dataset", "--tokenizer",
                 "--seed", "--extra-body", "--temperature", "--timeout-connect",
                 "--timeout-first-token", "--timeout-idle", "--timeout-total", "--label", "--out",
                 "--progress"):
        assert flag in names, (command, flag)
