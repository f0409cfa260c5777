"""What a person sees: the README's first command (``llmbench ramp``, the demo on the built-in
mock) run in a real 80x30 terminal (tmux), its final screen read back with capture-pane."""

import os
import re
import shlex
import subprocess
import sys
import time
import uuid

from tests.helpers import ENV, ROOT
from tests.helpers.field import require

WIDTH, HEIGHT = 80, 30


def final_screen(args: list[str], tmp_path, timeout_s: float = 240) -> tuple[list[str], int]:
    """Run ``llmbench ARGS`` in a detached tmux session of WIDTH x HEIGHT and return the rows of
    its final screen (the line after it is the shell's, as a prompt would be) and its exit
    code."""
    tmux = require("tmux", "tmux")
    sock = f"llmbench-test-{uuid.uuid4().hex[:8]}"
    cmd = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "llmbench.cli", *args])
    shell = f"cd {shlex.quote(str(tmp_path))} && {cmd}; printf 'EXIT=%s' $?; sleep 600"
    env = {**ENV, "PYTHONPATH": str(ROOT), "TERM": "xterm-256color"}
    env.pop("TMUX", None)
    subprocess.run([tmux, "-L", sock, "-f", os.devnull, "new-session", "-d", "-x", str(WIDTH),
                    "-y", str(HEIGHT), "sh", "-c", shell], check=True, env=env)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            screen = subprocess.run([tmux, "-L", sock, "capture-pane", "-p"], check=True,
                                    capture_output=True, text=True).stdout
            rows = screen.split("\n")
            done = [r for r in rows if r.startswith("EXIT=")]
            if done:
                code = int(done[-1].split("=", 1)[1].strip() or -1)
                last = max(i for i, r in enumerate(rows) if r.startswith("EXIT="))
                rows = rows[:last]
                while rows and not rows[-1].strip():
                    rows.pop()      # the live view, cleared, may leave its last row blank
                return rows, code
            assert time.monotonic() < deadline, f"no end within {timeout_s} s:\n{screen}"
            time.sleep(1.0)
    finally:
        subprocess.run([tmux, "-L", sock, "kill-server"], capture_output=True)


def broken_mid_word(rows: list[str]) -> list[str]:
    """Rows the terminal wrapped inside a word: a full-width row ending in a letter or digit
    whose next row starts with one (llmbench wraps its own lines short of the edge)."""
    return [f"{a!r} / {b!r}" for a, b in zip(rows, rows[1:])
            if len(a) >= WIDTH and re.search(r"\w$", a) and re.match(r"\w", b)]


def test_demo_final_screen_fits_80x30(tmp_path):
    # the README's first command, kept short: two steps, the second over the demo's 2 s TTFT
    # threshold on its one-slot mock (8 users queue for one slot: ~2.5 s TTFT p95)
    rows, code = final_screen(["ramp", "--users", "2,8", "--ramp-in", "1s", "--hold", "6s"],
                              tmp_path)
    text = "\n".join(rows)
    assert code in (0, 1), text
    header = [i for i, r in enumerate(rows) if r.startswith("Users  Reqs TTFT p50")]
    assert header, "the steps table's header scrolled off:\n" + text
    end = rows.index("", header[0])
    table = [r for r in rows[header[0] + 1:end] if re.match(r" +\d", r)]
    # a step with too few requests is held longer and shown again: the loads in order
    assert [r.split()[0] for r in table][-1] == "8" and "2" in [r.split()[0] for r in table], text
    assert any(r.startswith("Held ") for r in rows), text            # the headline
    assert any(r.startswith("Why: ") for r in rows), text
    assert any("What to change:" in r for r in rows), text
    assert rows[-1].startswith("Results: results/"), text            # the path stays, last
    assert not broken_mid_word(rows), broken_mid_word(rows)
    assert all(len(r) <= WIDTH for r in rows)
    # what did not fit is named, not lost: it is in the report and behind --verbose
    assert any(re.match(r"\(\d+ more lines? of evidence and notes", r) for r in rows), text
