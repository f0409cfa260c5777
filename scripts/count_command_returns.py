"""How often a run's plan climbs back up into llmbench/commands/ once it has left it (issue 44
§2: "a run's plan, followed call by call from the run command's entry point, comes back up to
commands/ at most 4 times"; 11 by hand on main before the one assembler).

  python scripts/count_command_returns.py           # run, then ramp: the counts
  python scripts/count_command_returns.py --list    # ... and each way back up

How it counts (a trace, not a reading): a built-in mock is started in a child process, then
``llmbench run`` (then ``ramp``) runs in this process with a profiler on every thread, from
the moment the command's ``perform`` is called (the spec's checks and the plan being made come
before it and are not counted). A "way back up" is either
- a distinct function of llmbench outside commands (the engine, analysis, results, report,
  client...) that code in commands calls: the plan goes down there and comes back up to the
  command (constructors and dunder methods are left out: building a value is not a stop), or
- a distinct pair (caller, callee) where the callee is a function of a module under
  llmbench.commands and its caller a function of llmbench outside it: a callback the engine
  calls back up (a live line, a step's judge, a row printer).
Calls among commands modules are not counted (the plan has not left), nor the CLI's call into
the command. Each is counted once however often it runs (a live line redrawn 50 times is one
way back). On main before the one assembler: run 50 (50 down, 0 callbacks), ramp 62 (59 down,
3 callbacks: the step's judge, the plan line, the step row).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _module(frame) -> str:
    return frame.f_globals.get("__name__", "") or ""


def trace(command: str, args: list[str]) -> set[tuple[str, str]]:
    """The ways back up into commands while ``llmbench ARGS`` runs in this process."""
    found: set[tuple[str, str]] = set()
    entered = []            # the command's perform has been called: the plan is made

    def prof(frame, event, arg):           # noqa: ANN001 - sys.setprofile's signature
        if event != "call":
            return
        callee = _module(frame)
        back = frame.f_back
        if back is None or not callee.startswith("llmbench."):
            return
        caller = _module(back)
        if not entered:
            if frame.f_code.co_name == "perform" and callee.split(".")[-1] == command:
                entered.append(True)
            return
        if callee.startswith("llmbench.commands"):
            if caller.startswith("llmbench.") and not caller.startswith(
                    ("llmbench.commands", "llmbench.cli")):
                found.add(("callback", f"{caller}.{back.f_code.co_name} -> "
                                       f"{callee}.{frame.f_code.co_qualname}"))
        elif caller.startswith("llmbench.commands") and not frame.f_code.co_name.startswith("__"):
            # a function or method below (not a dataclass's __init__, a __len__...): the plan
            # went there and came back
            found.add(("down", f"{callee}.{frame.f_code.co_qualname}"))

    from llmbench.cli.app import app
    threading.setprofile(prof)
    sys.setprofile(prof)
    try:
        app(args, standalone_mode=False)
    except SystemExit:
        pass
    finally:
        sys.setprofile(None)
        threading.setprofile(None)       # type: ignore[arg-type]
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", action="store_true", help="each way back up, caller -> callee")
    a = ap.parse_args()
    import llmbench
    with llmbench.mock(ttft_ms=20, itl_ms=5, parallel=4) as url, \
            tempfile.TemporaryDirectory() as out:
        common = ["--url", url, "--model", "mock", "--out", out, "--network-floor", "off",
                  "--max-tokens", "8"]
        runs = {"run": ["run", *common, "--requests", "12", "--concurrency", "2"],
                "ramp": ["ramp", *common, "--users", "1,2", "--hold", "2", "--ramp-in", "0"]}
        for name, args in runs.items():
            found = trace(name, args)
            downs = sorted(w for k, w in found if k == "down")
            backs = sorted(w for k, w in found if k == "callback")
            print(f"{name}: the plan comes back up into commands/ {len(downs) + len(backs)} "
                  f"times ({len(downs)} calls down that return, {len(backs)} callbacks)")
            if a.list:
                for w in downs + backs:
                    print(f"  {w}")


if __name__ == "__main__":
    main()
