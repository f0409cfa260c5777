"""Who watches a run while it goes: every live view is an ``Observer`` handed to the harness.

The engine (load.harness) streams what happens without knowing who reads it (as vegeta's
attack loop hands results to whoever ranges over them): the Prometheus exporter, the terminal
view, the dashboard's feed, the notebook's cell (and, later, an OTLP exporter) all implement
this one protocol and are passed as ``Harness.observers``.

All three calls come on the event loop and must be cheap: an observer that needs work done
(percentiles, a page to draw) keeps what it is handed and does the work in its own thread or
at its own redraw.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from llmbench.records.record import Record


@runtime_checkable
class Observer(Protocol):
    def observe(self, record: Record) -> None:
        """One finished request (every record, warm-up and failures too), as it finishes."""

    def token(self, now_s: float, n: int) -> None:
        """``n`` token events arrived by ``now_s`` (perf_counter seconds) since the last call:
        replies still streaming count here as they stream, not when they end. May be a no-op."""

    def close(self) -> None:
        """The load is over (its last record observed); release what the observer holds open."""
