"""No silent minute (issue 45): building, counting and checking prompts shows its progress on
stderr before the load starts (`ramp --join spread --turns 1000` built two million prompts in
silence), and the same value is there for the dashboard to read (workload.progress)."""

import subprocess
import sys
import time

from llmbench.workload import progress
from llmbench.workload.synthetic import synthetic
from llmbench.workload.tokenizer import load_tokenizer
from tests.helpers import ENV, ROOT


def test_building_prompts_counts_as_it_goes_and_ends():
    seen = []
    stop = progress.listen(lambda p: seen.append((p.stage, p.total)))
    try:
        convs = synthetic(load_tokenizer("approx"), 3, (20, 20), (4, 4), seed=1, turns=5)
    finally:
        stop()
    assert len(convs) == 3
    # the stage began with its total (3 conversations x 5 turns) and ended
    assert seen == [(progress.BUILDING, 15), (None, 15)]
    assert progress.PROGRESS.done == 15 and progress.PROGRESS.stage is None
    p = progress.Progress(stage=progress.BUILDING, done=1200, total=2_000_000, started=0.0)
    assert p.text(now=14.2) == "building prompts: 1,200 of 2,000,000 prompts (0%), 14 s"


def test_a_long_build_says_how_far_it_got_on_stderr(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "llmbench.cli", "ramp", "--join", "spread", "--turns", "1000",
         "--users", "2", "--hold", "5s", "--out", str(tmp_path)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env={**ENV, "PYTHONPATH": str(ROOT)})
    lines = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("building prompts:"):
                break
    finally:
        proc.kill()
        proc.wait()
    said = [ln for ln in lines if ln.startswith("building prompts:")]
    assert said, "".join(lines)
    assert " of 2,000,000 prompts (" in said[0], said[0]
