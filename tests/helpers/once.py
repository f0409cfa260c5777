"""A module fixture's expensive work done once per test session, not once per pytest-xdist
worker: the suite runs in several processes (-n 4) and the default scheduling may send the tests of
one module to both, so both would build the same fixture (tests/e2e/test_hostile_inputs.py's
tables: a hundred CLI child processes each time). The first worker to get here computes the
value and leaves it as JSON; the other waits for it on a lock and reads it."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any, Callable


def once(tmp_path_factory: Any, name: str, make: Callable[[], Any]) -> Any:
    """``make()`` (a JSON value), computed by one worker of this session and read by the rest."""
    root = Path(tmp_path_factory.getbasetemp())
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent                       # the session's folder, shared by its workers
    done = root / f"once-{name}.json"
    with open(root / f"once-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)         # released when the file closes
        if done.is_file():
            return json.loads(done.read_text())
        value = make()
        tmp = done.with_suffix(".part")
        tmp.write_text(json.dumps(value))
        tmp.replace(done)
        return value
