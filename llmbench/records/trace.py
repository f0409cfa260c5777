"""W3C trace context of a request (--otlp, --traceparent): its trace id is kept in the record
(``Record.trace_id``, 32 hex digits); its span's id is derived from it (the trace id's low 64
bits), so the span exported (report/otlp.py) and the ``traceparent`` header sent
(``00-<trace id>-<span id>-01``) name the same span without a second field in the record."""

from __future__ import annotations

import os


def new_trace_id() -> str:
    """A random trace id (never all zeros, which W3C forbids), with a span id that is not."""
    while True:
        t = os.urandom(16).hex()
        if int(t[16:], 16):
            return t


def span_id(trace_id: str) -> str:
    """The request span's id (16 hex digits) of ``trace_id``."""
    return trace_id[16:]


def traceparent(trace_id: str) -> str:
    """The W3C traceparent header's value: version 00, sampled."""
    return f"00-{trace_id}-{trace_id[16:]}-01"
