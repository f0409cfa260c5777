"""How far building the workload has got: prompts written, counted and checked before any
load is sent (a ``--turns 1000`` or a long scenario took minutes, in silence).

One process-wide ``PROGRESS`` value: the workload's builders tick it (cheap: an increment), and
whoever shows it reads it (the terminal's line: ``commands.spec.building``) or is told through
``listen``. Pure bookkeeping: nothing here prints.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterator

BUILDING = "building prompts"            # writing synthetic prompts to their lengths
COUNTING = "counting prompt tokens"      # a server's /tokenize, a file's prompts
READING = "reading the dataset"          # a file's conversations, tokenized


@dataclass
class Progress:
    """The stage under way (None: none), its units done and expected (None: not known), and
    when it began (time.monotonic())."""

    stage: str | None = None
    done: int = 0
    total: int | None = None
    unit: str = "prompts"
    started: float = 0.0

    def text(self, now: float | None = None) -> str | None:
        """'building prompts: 12,000 of 2,000,000 (6%), 14 s' (None: nothing under way)."""
        if self.stage is None:
            return None
        took = (time.monotonic() if now is None else now) - self.started
        part = f"{self.done:,}"
        if self.total:
            part += f" of {self.total:,} {self.unit} ({100 * self.done / self.total:.0f}%)"
        else:
            part += f" {self.unit}"
        return f"{self.stage}: {part}, {took:.0f} s"


PROGRESS = Progress()
_lock = threading.Lock()
_listeners: list[Callable[[Progress], None]] = []


def begin(stage: str, total: int | None = None, unit: str = "prompts") -> None:
    with _lock:
        PROGRESS.stage, PROGRESS.done, PROGRESS.total = stage, 0, total
        PROGRESS.unit, PROGRESS.started = unit, time.monotonic()
    _tell()


def tick(n: int = 1) -> None:
    PROGRESS.done += n              # one thread builds; readers tolerate a stale count


def end() -> None:
    with _lock:
        PROGRESS.stage = None
    _tell()


@contextlib.contextmanager
def stage() -> Iterator[None]:
    """Ends the stage begun just before, however the block ends (a bad file's error too)."""
    try:
        yield
    finally:
        end()


def listen(fn: Callable[[Progress], None]) -> Callable[[], None]:
    """``fn(PROGRESS)`` at each stage's start and end; returns what stops it. A listener that
    wants the count as it goes reads ``PROGRESS`` on its own tick."""
    _listeners.append(fn)
    return lambda: _listeners.remove(fn) if fn in _listeners else None


def _tell() -> None:
    for fn in list(_listeners):
        try:
            fn(PROGRESS)
        except Exception:           # a listener's failure never stops the build
            pass
