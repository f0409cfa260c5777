"""Who is writing a run folder: ``.llmbench.lock`` beside run.json while its command runs.

A command takes the lock when it starts the folder (the "running" run.json) and drops it when
it is done with it (its final run.json and report written, or it failed). A reader that would
write back into a folder (``report`` rebuilding a killed run's summary) first asks ``writer``:
a live writer's folder is read, never written (a run in progress was once rewritten as
"partial ... (killed?)").

The lock holds the writer's pid, the host it runs on and the process's start time (Linux:
/proc/PID/stat, in clock ticks since boot), so a dead run whose pid was reused by another
process is not taken for a live one. A lock from another host cannot be checked: it counts
as live (never written over), and the message says how to clear it.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

LOCK = ".llmbench.lock"


def _start_token(pid: int) -> str | None:
    """The process's start time (field 22 of /proc/PID/stat), None where it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read().decode("ascii", "replace")
    except OSError:
        return None
    # the name (field 2) is in parentheses and may hold spaces: split after its last ')'
    rest = stat[stat.rfind(")") + 2:].split()
    return rest[19] if len(rest) > 19 else None


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True             # it exists, but is not ours to signal
    return True


def take(run_dir: Path | None) -> None:
    """This process writes ``run_dir`` from now on (results.writer.RunFolder)."""
    if run_dir is None:
        return
    pid = os.getpid()
    doc = {"pid": pid, "host": socket.gethostname(), "start": _start_token(pid)}
    try:
        (Path(run_dir) / LOCK).write_text(json.dumps(doc) + "\n", encoding="utf-8")
    except OSError:
        pass                    # a folder that cannot take it will say so at run.json


def drop(run_dir: Path | None) -> None:
    """This process is done with ``run_dir`` (its lock only: another's is left alone)."""
    if run_dir is None:
        return
    f = Path(run_dir) / LOCK
    try:
        doc = json.loads(f.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if isinstance(doc, dict) and doc.get("pid") == os.getpid() \
            and doc.get("host") in (None, socket.gethostname()):
        try:
            f.unlink()
        except OSError:
            pass


def writer(run_dir: str | Path) -> dict[str, Any] | None:
    """The live process writing ``run_dir`` (its lock's pid and host), or None: no lock, or the
    process that took it is gone (killed: its lock stays behind)."""
    f = Path(run_dir) / LOCK
    try:
        doc = json.loads(f.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("pid"), int):
        return None
    if doc.get("host") not in (None, socket.gethostname()):
        return doc              # another machine's run: cannot be checked, so left alone
    pid = doc["pid"]
    if not alive(pid):
        return None
    token = _start_token(pid)
    if doc.get("start") is not None and token is not None and token != doc["start"]:
        return None             # the pid now belongs to another process
    return doc


def writer_text(run_dir: str | Path, doc: dict[str, Any]) -> str:
    """'llmbench (pid 123)', or for another host's run 'llmbench on gpu-box (pid 123; if that
    run is gone, delete DIR/.llmbench.lock)'."""
    if doc.get("host") not in (None, socket.gethostname()):
        return (f"llmbench on {doc.get('host')} (pid {doc.get('pid')}; if that run is gone, "
                f"delete {Path(run_dir) / LOCK})")
    return f"llmbench (pid {doc.get('pid')})"
