"""The one definition of each per-request figure (../shared/METRICS.md), and of which requests
count: every other module computes them by calling these.

Each is arithmetic over a request's start and its token event times (seconds, or any unit
both share: requests.jsonl's ``token_us`` are microseconds after ``start``, so there
``start`` is 0), written so that the same function serves

- a ``Record`` (Python floats: ``Record.ttft`` and its siblings), and
- columns (numpy arrays, one value per request: the RecordStore's summary, the timeline),

with the same float operations in the same order, so a column's value equals the Record's bit
for bit (tests/unit/records/test_record_store.py, tests/unit/records/test_definitions.py).

Why token times and not ``Record.first_token`` / ``end``: the client sets those to the first
and last token event, but a record read back from requests.jsonl has its token times rounded
to the microsecond while ``first_token`` keeps every bit; every statistic (ITL, TPOT) is taken
from the token times, so TTFT and E2EL are too, and the figures of a run in memory equal the
ones rebuilt from its folder.

No numpy import here (``import llmbench`` stays light): arrays bring their own operators; the
two functions that must branch (a floor at 0, a negation) look at what they were given.
"""

from __future__ import annotations

from typing import Any, Sequence, TypeVar

T = TypeVar("T")         # a float, or a numpy array of them (a column: one per request)

INTERRUPTED = "interrupted"      # records.record.ERROR_KINDS: stopped by our own interrupt
CLIENT_STALL = "client_stall"    # timed out while llmbench itself was frozen (load.monitor)
# error kinds that say nothing about the server: llmbench stopped or froze the request
UNMEASURED_KINDS = (INTERRUPTED, CLIENT_STALL)


# -- latencies -------------------------------------------------------------------------------

def ttft(start: T, first: T) -> T:
    """Time to first token: the first token event - start. Also the time to the first answer
    token (TTFO: ``first`` is the answer's first event) and to a tool call's first token."""
    return first - start             # type: ignore[operator, no-any-return]


def e2el(start: T, last: T) -> T:
    """End-to-end latency: the LAST token event - start (not [DONE], not the socket close)."""
    return last - start              # type: ignore[operator, no-any-return]


def has_tpot(output_tokens: Any) -> Any:
    """Whether a request has a TPOT: more than one output token (an array: a mask)."""
    return output_tokens > 1


def tpot(first: T, last: T, output_tokens: Any) -> T:
    """Time per output token after the first: (last - first token event) / (output_tokens - 1),
    only where ``has_tpot`` (each request weighs the same in its statistics)."""
    return (last - first) / (output_tokens - 1)     # type: ignore[operator, no-any-return]


def itls(times: Any) -> Any:
    """Inter-token latencies: the gaps between consecutive token events of one request (one per
    event, not per token). A list gives a list; an array gives an array (the gaps of several
    requests' events laid one after another are these too, less the gaps across requests,
    which the caller drops)."""
    if isinstance(times, (list, tuple)):
        return [b - a for a, b in zip(times, times[1:])]
    return times[1:] - times[:-1]


def client_queue(scheduled: T, start: T) -> T:
    """start - scheduled, never below 0: how long the load generator held the request
    (coordinated omission). An array is floored in place and returned."""
    d = start - scheduled            # type: ignore[operator]
    if isinstance(d, float):
        return max(d, 0.0)           # type: ignore[return-value]
    import numpy as np
    return np.maximum(d, 0.0, out=d)  # type: ignore[no-any-return]


def e2el_from_schedule(scheduled: T, last: T) -> T:
    """The last token event - scheduled: E2EL as the user felt it, queue included."""
    return last - scheduled          # type: ignore[operator, no-any-return]


def send_delay(start: T, sent: T) -> T:
    """sent - start: llmbench's own delay between deciding to send and the bytes leaving for
    the socket (the server never sees it; TTFT includes it)."""
    return sent - start              # type: ignore[operator, no-any-return]


def offset_us(start: float, t: float) -> int:
    """A time as integer microseconds after the request's ``start``: how token events and the
    request's phase stamps (records/phases.py) are stored, and what they are compared in."""
    return round((t - start) * 1e6)


def reasoning_time(first: T, answer_at: T) -> T:
    """Reasoning time: the first token event (reasoning) -> the first answer event (or the last
    reasoning event when the reply never answered)."""
    return answer_at - first         # type: ignore[operator, no-any-return]


# -- agent sessions (analysis.sessions; floats, a session at a time) ---------------------------

def session_time(first_start: float, last_end: float) -> float:
    """An agent session's time to complete: its first call's start to the end of its last
    call (the last moment the client was done with any request of it)."""
    return max(last_end - first_start, 0.0)


def session_tool_time(duration: float, model: float) -> float:
    """A session's tool time: the part of its duration when none of its calls was in flight
    (``model``: the union of its calls' spans, so sub-agents running at once count once)."""
    return max(duration - model, 0.0)


# -- which requests count --------------------------------------------------------------------

def is_measured(warmup: Any, error_kind: Any, unmeasured: Any = UNMEASURED_KINDS) -> Any:
    """Whether a request counts: not warm-up, not cut short by our own interrupt, not timed
    out while llmbench itself was frozen (client_stall). On columns (``warmup`` a bool array,
    ``error_kind`` the store's string ids, ``unmeasured`` the ids of UNMEASURED_KINDS, -1 for
    one no record has): a mask."""
    if hasattr(warmup, "shape"):
        keep = ~warmup
        for kind in unmeasured:
            keep = keep & (error_kind != kind)
        return keep
    return not warmup and error_kind not in unmeasured


def started_in(start: Any, window_start: float, window_end: float) -> Any:
    """Whether a request started in [window_start, window_end): a step's numbers come from the
    requests that started in its hold window (an array: a mask)."""
    return (start >= window_start) & (start < window_end)


def in_step_window(step: Any, start: Any, warmup: Any, index: int, hold_start: float,
                   hold_end: float) -> Any:
    """The step window: requests of step ``index``, not warm-up, that started in its hold
    [hold_start, hold_end). What a ramp's judge, its steady state, its knee and the reports
    count for the step (an array: a mask; ``step`` may hold None as any non-matching value)."""
    if hasattr(start, "shape"):
        return (step == index) & started_in(start, hold_start, hold_end) & ~warmup
    return step == index and not warmup and hold_start <= start < hold_end


def window(records: Sequence[T], index: int, hold_start: float, hold_end: float) -> list[T]:
    """The records of step ``index``'s window (``in_step_window``), in their order; on a
    RecordStore, found on its columns (``RecordStore.in_window``)."""
    on_columns = getattr(records, "in_window", None)
    if on_columns is not None:
        return on_columns(index, hold_start, hold_end)      # type: ignore[no-any-return]
    return [r for r in records if in_step_window(r.step, r.start, r.warmup,  # type: ignore[attr-defined]
                                                 index, hold_start, hold_end)]
