"""Run many command lines through the CLI in one process (tests/e2e/test_hostile_inputs.py).

Reads {"cases": [[arg, ...], ...], "timeout_s": S} as JSON on stdin and writes one JSON list:
each case's exit code, stdout, stderr, the exception it escaped with (a traceback's worth, or
null) and its time. Importing the CLI once for a hundred cases keeps the table fast; each case
gets its own SIGALRM, so one that would hang is recorded as "timeout" and the rest still run.
"""

from __future__ import annotations

import json
import signal
import sys
import time
import traceback


class Timeout(BaseException):
    """Raised by SIGALRM; a BaseException so no `except Exception` in the CLI swallows it."""


def _alarm(*_: object) -> None:
    raise Timeout()


def main() -> None:
    from typer.testing import CliRunner
    from llmbench.cli.app import app

    job = json.load(sys.stdin)
    signal.signal(signal.SIGALRM, _alarm)
    out = []
    for argv in job["cases"]:
        t0 = time.monotonic()
        signal.setitimer(signal.ITIMER_REAL, job["timeout_s"])
        try:
            r = CliRunner().invoke(app, argv, catch_exceptions=True)
            exc = None
            if r.exception is not None and not isinstance(r.exception, SystemExit):
                exc = "".join(traceback.format_exception(*r.exc_info))
            res = {"code": r.exit_code, "stdout": r.stdout, "stderr": r.stderr, "exception": exc}
        except Timeout:
            res = {"code": None, "stdout": "", "stderr": "", "exception": "timeout"}
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        res["took_s"] = time.monotonic() - t0
        if isinstance(res.get("exception"), str) and "Timeout" in res["exception"]:
            res["exception"] = "timeout"
        out.append(res)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
