"""``python slow_step.py STEP MARKER -- ARGS``: llmbench's command line with one step made slow
(2 s, after writing MARKER), so a test can send a signal while that step runs
(tests/e2e/test_hostile_inputs.py, issue 40: signals outside the load phase).

STEP: ``setup`` (before the load: the harness starts late), ``summarize`` (after the load, as
the result is computed), ``report`` (after run.json, as report.html is written)."""

from __future__ import annotations

import pathlib
import sys
import time


def main() -> None:
    step, marker = sys.argv[1], pathlib.Path(sys.argv[2])
    sys.argv = ["llmbench"] + sys.argv[sys.argv.index("--") + 1:]

    def slow(fn):
        def wrapper(*a, **k):
            marker.write_text(step)
            time.sleep(2.0)
            return fn(*a, **k)
        return wrapper
    if step == "summarize":
        from llmbench.analysis import metrics
        metrics.summarize = slow(metrics.summarize)
    elif step == "report":
        from llmbench.report import auto
        auto.write_report = slow(auto.write_report)
    elif step == "setup":
        from llmbench.load import harness
        harness.Harness.run = slow(harness.Harness.run)
    from llmbench.cli.app import main as cli
    cli()


if __name__ == "__main__":
    main()
