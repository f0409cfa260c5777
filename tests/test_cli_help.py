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


def test_ramp_live_line_fits_an_80_column_terminal_and_names_the_phase(mock_factory, tmp_path):
    """On a real terminal (a pty, 80x30) every redraw of the live line is one row cut to the
    width, so nothing stale is left; the phase moves on (never 'ramp-in' after 'hold')."""
    import fcntl
    import os
    import pty
    import struct
    import subprocess
    import sys
    import termios

    from test_cli import ENV
    m = mock_factory(ttft_ms=20, itl_ms=5, models=["a-rather-long-model-name-to-push-the-line"])
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 80, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "llmbench.cli", "ramp", "--url", m.url + "/v1", "--model",
         "a-rather-long-model-name-to-push-the-line", "--users", "1,2", "--ramp-in", "0.5s",
         "--hold", "2.5s", "--think", "0", "--output-tokens", "8", "--prompt-tokens", "10",
         "--threshold", "ttft.p95<=10s", "--out", str(tmp_path)],
        stdout=subprocess.PIPE, stderr=slave, env={**ENV, "COLUMNS": "80"})
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
    redraws = [seg for seg in tty.split("\r\x1b[K") if seg.startswith("[")]
    assert redraws, tty
    for seg in redraws:
        assert "\n" not in seg.rstrip("\r\n") and len(seg.rstrip("\r\n")) <= 79, repr(seg)
    assert any("step 1/2 hold" in seg for seg in redraws), redraws
    held = next(i for i, seg in enumerate(redraws) if "step 1/2 hold" in seg)
    assert not any("step 1/2 ramp-in" in seg for seg in redraws[held:]), redraws
    assert all("TTFT p95" in seg for seg in redraws)      # the telling part survives the cut
