"""Run many command lines through the CLI in one process (tests/e2e/test_hostile_inputs.py).

Reads {"cases": [[arg, ...], ...], "timeout_s": S, "main": bool} as JSON on stdin and writes
one JSON list:
each case's exit code, stdout, stderr, the exception it escaped with (a traceback's worth, or
null) and its time. Importing the CLI once for a hundred cases keeps the table fast; each case
gets its own SIGALRM, so one that would hang is recorded as "timeout" and the rest still run.
With "main", each case goes through ``llmbench.cli.app.main()`` with its sys.argv, the very path
``python -m llmbench.cli`` takes (click's usage errors as one line, the exit code main() leaves
with), not typer's test runner.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
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
            if job.get("main"):
                res = _through_main(argv)
            else:
                r = CliRunner().invoke(app, argv, catch_exceptions=True)
                exc = None
                if r.exception is not None and not isinstance(r.exception, SystemExit):
                    exc = "".join(traceback.format_exception(*r.exc_info))
                res = {"code": r.exit_code, "stdout": r.stdout, "stderr": r.stderr,
                       "exception": exc}
        except Timeout:
            res = {"code": None, "stdout": "", "stderr": "", "exception": "timeout"}
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        res["took_s"] = time.monotonic() - t0
        if isinstance(res.get("exception"), str) and "Timeout" in res["exception"]:
            res["exception"] = "timeout"
        out.append(res)
    json.dump(out, real_stdout)


def _through_main(argv: list[str]) -> dict:
    """One case through main(), as `python -m llmbench.cli ARGV` runs it: its streams captured,
    its exit code the SystemExit main() leaves with (LLMBENCH_NO_FAST_EXIT: never os._exit)."""
    from llmbench.cli.app import main as cli_main
    stdout, stderr = io.StringIO(), io.StringIO()
    sys.argv = ["llmbench", *argv]
    code: object = 0
    exc = None
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            cli_main()
        except SystemExit as e:
            code = e.code
        except Timeout:
            raise
        except BaseException:                   # escaped main(): the traceback a user sees
            exc = traceback.format_exc()
            code = 1
    if code is None:
        code = 0
    return {"code": code, "stdout": stdout.getvalue(), "stderr": stderr.getvalue(),
            "exception": exc}


real_stdout = sys.stdout
os.environ["LLMBENCH_NO_FAST_EXIT"] = "1"


if __name__ == "__main__":
    main()
