"""The live view on a real terminal (a pty, 80x30): several rows redrawn in place once a second,
none wider than the terminal, and nothing left of them when the run ends."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios

from tests.helpers import ENV, ROOT

CHILD = """
import sys
from llmbench.client.request import RequestParams, Timeouts
from llmbench.client.target import make_target
from llmbench.load.harness import Harness, TargetSpec
from llmbench.load.shapes.fixed import ClosedLoop
from llmbench.report.live import LiveBoard
from llmbench.workload.model import Conversation, Turn
convs = [Conversation(f"c{i}", (Turn("hello there " * 5, 12, 10),)) for i in range(400)]
shape = ClosedLoop(convs, concurrency=4, duration_s=3.5)
board = LiveBoard(kind="run", duration_s=3.5)
h = Harness(RequestParams(), Timeouts(), None, progress=True, observers=[board])
out = h.run(shape, [TargetSpec(make_target(sys.argv[1] + "/v1", "mock"), server_probe="off")])
print("DONE", len(out.records), file=sys.stderr)
"""


def run_in_pty(args: list[str]) -> tuple[int, str]:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 80, 0, 0))
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=slave, cwd=ROOT,
                            env={**ENV, "COLUMNS": "80", "LINES": "30", "TERM": "xterm"})
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.communicate(timeout=120)
    os.close(master)
    return proc.returncode, b"".join(chunks).decode("utf-8", "replace")


def test_rows_redraw_in_place_fit_80_columns_and_are_cleared(mock_factory):
    m = mock_factory(ttft_ms=40, itl_ms=20, tokens=12, parallel=4)
    code, tty = run_in_pty([sys.executable, "-c", CHILD, m.url])
    assert code == 0, tty
    assert "DONE" in tty
    # what rich drew: each frame's rows, between cursor movements
    import re
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "\n", tty).replace("\r", "\n")
    rows = [r for r in plain.split("\n") if r.strip()]
    frames = [r for r in rows if r.startswith("run  ")]
    assert len(frames) >= 2, tty                      # redrawn, once a second
    assert all(len(r) <= 80 for r in rows), [r for r in rows if len(r) > 80]
    assert any("TTFT p50" in r and "ITL p95" in r for r in rows)
    assert any(r.startswith("generator:") for r in rows)
    # transient: the last thing on the screen before DONE erases the rows (cursor up + clear)
    tail = tty[tty.rindex("run  "):tty.index("DONE")]
    assert "\x1b[2K" in tail or "\x1b[1A" in tail or "\x1b[K" in tail, repr(tail[-200:])
