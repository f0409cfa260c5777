"""Checks for flag values: every number the user types is finite and in its range, or one line.

Typer turns "nan" and "inf" into floats without complaint, and a NaN compares false with every
bound, so `--duration nan` once ran forever. Each helper here raises ``UsageError`` with the flag
name and what to type instead; the CLI turns it into one line on stderr and exit 2.
"""

from __future__ import annotations

import math
import re


class UsageError(Exception):
    """A bad flag value; the message is one line for the user."""


# one number and its unit; a duration is one or more of them: 90, 90s, 500ms, 1m30s, 1h2m
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|us|h|m|s)")
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6}


def duration(text: str, flag: str, *, zero_ok: bool = True) -> float:
    """'90', '90s', '500ms', '2m', '1m30s', '1h2m3.5s' -> seconds; finite and >= 0 (> 0 unless zero_ok)."""
    t = str(text).strip().lower().replace(" ", "")
    hint = "expected a duration such as 30s, 500ms, 2m or 1m30s"
    if t.startswith("-"):
        raise UsageError(f"{flag} {text!r}: must not be negative; {hint}")
    seconds: float | None = None
    try:
        seconds = float(t)               # a bare number is seconds
    except ValueError:
        pos, total = 0, 0.0
        for m in _PART.finditer(t):
            if m.start() != pos:
                break
            total += float(m.group(1)) * _UNIT_S[m.group(2)]
            pos = m.end()
        if pos == len(t) and pos > 0:
            seconds = total
    if seconds is None or not math.isfinite(seconds):
        raise UsageError(f"{flag} {text!r}: {hint}")
    if seconds < 0:
        raise UsageError(f"{flag} {text!r}: must not be negative; {hint}")
    if not zero_ok and seconds == 0:
        raise UsageError(f"{flag} {text!r}: must be above 0; {hint}")
    return seconds


def seconds(value: float, flag: str, *, zero_ok: bool = False) -> float:
    """A float flag in seconds (the timeouts): finite, positive (or >= 0 when zero_ok)."""
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero_ok):
        need = ">= 0" if zero_ok else "above 0"
        raise UsageError(f"{flag} {value:g}: must be a finite number of seconds {need}, e.g. 30")
    return value


def number(value: float | None, flag: str, *, lo: float | None = None, hi: float | None = None,
           lo_open: bool = False, hi_open: bool = False) -> float | None:
    """A float flag: finite, and within [lo, hi] (open ends when asked). None passes."""
    if value is None:
        return None
    bad = not math.isfinite(value)
    if lo is not None:
        bad = bad or value < lo or (lo_open and value == lo)
    if hi is not None:
        bad = bad or value > hi or (hi_open and value == hi)
    if bad:
        parts = []
        if lo is not None:
            parts.append(f"{'>' if lo_open else '>='} {lo:g}")
        if hi is not None:
            parts.append(f"{'<' if hi_open else '<='} {hi:g}")
        rng = (" " + " and ".join(parts)) if parts else ""
        raise UsageError(f"{flag} {value:g}: must be a finite number{rng}")
    return value


def count(value: int | None, flag: str, *, lo: int = 1, hi: int | None = None) -> int | None:
    """An integer flag at least ``lo`` (and at most ``hi``). None passes."""
    if value is None:
        return None
    if value < lo or (hi is not None and value > hi):
        rng = f"between {lo} and {hi}" if hi is not None else f"at least {lo}"
        raise UsageError(f"{flag} {value}: must be {rng}")
    return value


def whole(value: float, flag: str) -> int:
    """A float that must be a whole number (users)."""
    if not math.isfinite(value) or value != int(value):
        raise UsageError(f"{flag} {value:g}: users come in whole numbers, e.g. 1,2,4,8")
    return int(value)
