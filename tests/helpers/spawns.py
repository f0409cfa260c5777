"""Which test items start the CLI in a child process (issue 38 §5: only wording, exit codes and
signals should). Off unless LLMBENCH_COUNT_CLI_SPAWNS names a folder: then tests/conftest.py
calls ``install`` and ``begin``, and each pytest process (each xdist worker too) appends to its
own file there one ``item <nodeid>`` line per test item run and one ``spawn <nodeid>\t<argv>``
line per child it starts that runs the CLI (``python -m llmbench.cli``, ``python -m llmbench``
or an ``llmbench`` executable), found by wrapping ``subprocess.Popen`` (which subprocess.run,
check_output and asyncio's subprocesses go through). A spawn in a fixture counts for the item
whose setup ran it. scripts/count_cli_spawns.py runs the suite so and prints the share."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path
from typing import Any

ENV_VAR = "LLMBENCH_COUNT_CLI_SPAWNS"

_current = "<outside a test>"
_log: Path | None = None


def is_cli(args: Any) -> bool:
    """Does this Popen argv start llmbench's command line?"""
    if isinstance(args, (str, bytes, os.PathLike)):
        text = os.fsdecode(args)
        argv = shlex.split(text) if " " in text else [text]
    else:
        argv = [os.fsdecode(a) for a in args]
    if not argv:
        return False
    if Path(argv[0]).name == "llmbench":
        return True
    for i, a in enumerate(argv[:-1]):
        if a == "-m" and argv[i + 1] in ("llmbench.cli", "llmbench", "llmbench.cli.__main__"):
            return True
    return False


def _write(line: str) -> None:
    if _log is not None:
        with open(_log, "a", encoding="utf-8") as fh:
            fh.write(line.replace("\n", " ") + "\n")


def install(folder: str) -> None:
    """Wrap Popen in this process; lines go to FOLDER/<pid>.log."""
    global _log
    Path(folder).mkdir(parents=True, exist_ok=True)
    _log = Path(folder) / f"{os.getpid()}.log"
    original = subprocess.Popen.__init__
    if getattr(original, "_counts_cli", False):
        return

    def init(self: subprocess.Popen, args: Any, *a: Any, **kw: Any) -> None:
        if is_cli(args):
            argv = args if isinstance(args, str) else " ".join(map(str, args))
            _write(f"spawn {_current}\t{argv}")      # a node id may hold spaces: a tab ends it
        original(self, args, *a, **kw)

    init._counts_cli = True  # type: ignore[attr-defined]
    subprocess.Popen.__init__ = init  # type: ignore[method-assign]


def begin(nodeid: str) -> None:
    global _current
    _current = nodeid
    _write(f"item {nodeid}")
