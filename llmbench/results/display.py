"""How a result shows itself in a notebook (``Run._repr_html_``, ``Step._repr_html_``): the
drawing lives in the report layer (llmbench/report/notebook.py, which registers it here when
imported: ``import llmbench``'s API and result names bring it in), so the result contract stays
below the reports. Without a renderer, a result has no HTML form and Jupyter shows its repr."""

from __future__ import annotations

import time
from typing import Any, Callable

_HTML: dict[str, Callable[[Any], str]] = {}


def register_html(kind: str, render: Callable[[Any], str]) -> None:
    """``kind``: "run" (a Run of any kind: run, ramp, probe, sweep) or "step"."""
    _HTML[kind] = render


def html_of(kind: str, obj: Any) -> str | None:
    render = _HTML.get(kind)
    return None if render is None else render(obj)


def local_time(t: Any, fmt: str = "%Y-%m-%d %H:%M:%S") -> str:
    """A run's wall-clock time (seconds since the epoch) as local time, "" when it has none or
    none that can be shown (a run.json edited to 1e308 or -1 is shown without its date, not
    refused: the rest of the run still displays)."""
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not t > 0:
        return ""
    try:
        return time.strftime(fmt, time.localtime(t))
    except (OverflowError, OSError, ValueError):
        return ""
