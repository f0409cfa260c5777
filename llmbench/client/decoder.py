"""The pure stream decoder: (arrival time, bytes) in, a filled Record out. No I/O, no clock.

The client's transport timestamps each network chunk on arrival and hands it here; every
event, whether it arrived in a chunk or was left in the framer when the connection ended, goes
through ``_events``, so the end of a stream cannot be decoded by other rules than its middle.
Tests drive it with scripted chunks (tests/unit/client/test_decoder.py).
"""

from __future__ import annotations

from typing import Any, Callable

from llmbench.records.record import Record
from llmbench.wire.events import END, ERROR, MALFORMED, TOKEN, TOKEN_END, Event, Usage, loads, malformed
from llmbench.wire.format import WireFormat

# What a format's reading of a server's payload may raise on JSON of types it did not expect
# (each format checks the fields it reads; this is the net under them): one bad event is that
# request's malformed_event, never an exception out of the transport or the run
_UNEXPECTED = (TypeError, AttributeError, KeyError, IndexError, ValueError, RecursionError)


def _shown(payload: Any) -> str:
    return payload[:100].decode("utf-8", "replace") if isinstance(payload, bytes) else ""


def _unreadable(payload: Any, exc: BaseException) -> Event:
    what = "nested too deeply" if isinstance(exc, RecursionError) else \
        f"{type(exc).__name__}: {str(exc)[:80]}"
    return Event(MALFORMED, error=f"a reply llmbench could not read ({what}) {_shown(payload)}"
                 .rstrip())


def _not_text(ev: Event, payload: Any) -> Event:
    return Event(MALFORMED, error=f"a reply whose text is {type(ev.text).__name__}, not a "
                                  f"string {_shown(payload)}".rstrip())


def classify_safely(classify: Callable[[Any], Event], payload: Any) -> Event:
    """``classify(payload)``, or the MALFORMED event for a payload it could not read: an
    exception, or a text that is not a string."""
    try:
        ev = classify(payload)
    except _UNEXPECTED as exc:
        return _unreadable(payload, exc)
    if not isinstance(ev.text, str):
        return _not_text(ev, payload)
    return ev

# What ``feed`` says about a chunk, for the transport's watchdog and control flow.
NOTHING = 0     # no complete event (a partial one, an SSE comment): the idle timer runs on
EVENTS = 1      # one or more events, the stream goes on
ENDED = 2       # the format's end marker arrived: the request is over
FAILED = 3      # an error or malformed event: recorded, the request is over
WHOLE = 4       # the body is one JSON document, not a stream: read it whole (decode_whole)


def apply_usage(u: Usage, rec: Record) -> None:
    """Counts a server reported; already validated (wire.events.count). A completion count
    that was not a count leaves the reply to be counted by its token events, and says so."""
    if u.rejected:
        for bad in u.rejected:
            msg = f"the server reported {bad}; ignored"
            if not rec.note:
                rec.note = msg
            elif msg not in rec.note:
                rec.note += "; " + msg
            if bad.startswith("completion_tokens ") and u.completion_tokens is None:
                rec.output_tokens, rec.output_tokens_source = None, "events"
    if u.completion_tokens is not None:
        rec.output_tokens = u.completion_tokens
        rec.output_tokens_source = "server"
    if u.prompt_tokens is not None:
        rec.prompt_tokens = u.prompt_tokens
    if u.cached_tokens is not None:
        rec.cached_tokens = u.cached_tokens
    if u.reasoning_tokens is not None:
        rec.reasoning_tokens = u.reasoning_tokens      # kept by StreamDecoder._reasoning


class StreamDecoder:
    """Decodes one streamed response into ``rec`` (and the reply text into ``texts``)."""

    __slots__ = ("rec", "texts", "fmt", "_framer", "_classify", "_counts", "_last_completion",
                 "_sniff", "ended", "failed", "_reasoning_idx", "_output_from", "_calls")

    def __init__(self, fmt: WireFormat, rec: Record, texts: list[str]) -> None:
        self.rec = rec
        self.texts = texts
        self.fmt = fmt
        self._framer = fmt.make_framer()
        self._classify = fmt.classify
        self._counts: list[int] | None = []       # tokens per event while every event says
        self._last_completion = 0
        self._sniff = fmt.framing == "sse"        # until the first byte shows SSE, not one JSON body
        self.ended = False
        self.failed = False
        self._reasoning_idx: list[int] = []     # token events that carried only reasoning
        self._output_from: int | None = None    # the first answer event
        # the pieces of the reply's tool calls go here when ``texts`` is a wire.agents.Reply
        # (the client's); a plain list of texts collects the text only
        self._calls: list | None = getattr(texts, "calls", None)

    def feed(self, t: float, chunk: bytes) -> int:
        """One network chunk that arrived at ``t``."""
        if self._sniff:
            head = chunk.lstrip()
            if not head:
                return NOTHING
            self._sniff = False
            if head[:1] == b"{":
                # The server ignored stream=true and answers one JSON body: it is recorded
                # whole (its TTFT is its E2EL) and marked not streamed, rather than "stream cut".
                return WHOLE
        payloads = self._framer.feed(chunk)
        if not payloads:
            return NOTHING      # comments (": keepalive") and partial events are not events
        return self._events(t, payloads)

    def after_end(self, data: bytes) -> None:
        """What the server sent after the end marker (the transports drain it): a token event
        there is a protocol error, not a reply recorded ok (a Messages stream that began with
        message_stop, then sent its deltas)."""
        if self.failed or not data.strip():
            return
        for payload in self._framer.feed(data) + self._framer.flush():
            try:
                kind = self._classify(payload).kind
            except _UNEXPECTED:
                continue
            if kind == TOKEN or kind == TOKEN_END:
                self._token_after_end()
                return

    def _token_after_end(self) -> None:
        rec = self.rec
        # the stream's protocol broken (not HTTP's: "protocol" is malformed HTTP/1.1)
        rec.error_kind = "malformed_event"
        rec.error = (f"a token event after the stream's end marker ({self.fmt.end_marker}): "
                     "the server broke its streaming protocol")
        self.failed = True

    def close(self, t: float) -> None:
        """The connection ended at ``t``: a last event sent without its closing blank line is
        decoded like any other, then the record is completed."""
        if not self.ended and not self.failed:
            payloads = self._framer.flush()
            if payloads:
                self._events(t, payloads)
        self.finish()

    def finish(self) -> None:
        """Per-event token counts, and "stream cut" when the end marker never came."""
        if self.failed:
            return
        rec = self.rec
        if self._counts:
            rec.token_counts = self._counts
        self._reasoning()
        if not self.ended:
            rec.error_kind = "stream_cut"
            rec.error = f"the stream ended before its end marker ({self.fmt.end_marker})"

    def _reasoning(self) -> None:
        """The reasoning fields, only when some event reasoned (other records stay as they were).
        Reasoning tokens: the server's count when its usage says (completion_tokens_details),
        else its per-event counts when every event carried one (vLLM's continuous usage), else
        one per reasoning event."""
        idx = self._reasoning_idx
        if not idx:
            return
        rec = self.rec
        rec.reasoning_events = len(idx)
        rec.reasoning_end = rec.token_times[idx[-1]]
        counts = rec.token_counts
        if rec.reasoning_tokens is not None:
            pass                                    # the server's own count (its usage)
        elif counts is not None and len(counts) == len(rec.token_times):
            rec.reasoning_tokens = sum(counts[i] for i in idx)
        else:
            rec.reasoning_tokens = len(idx)
        if self._output_from is not None:
            rec.output_from = self._output_from
            rec.first_output = rec.token_times[self._output_from]

    def _events(self, t: float, payloads: list[bytes]) -> int:
        rec = self.rec
        times = rec.token_times
        texts = self.texts
        classify = self._classify
        for payload in payloads:
            try:
                ev = classify(payload)
                if ev.text.__class__ is not str:
                    ev = _not_text(ev, payload)
            except _UNEXPECTED as exc:
                ev = _unreadable(payload, exc)
            kind = ev.kind
            if (kind == TOKEN or kind == TOKEN_END) and self.ended:
                self._token_after_end()
                return FAILED
            if kind == TOKEN or kind == TOKEN_END:
                if ev.tool and rec.first_tool is None:
                    rec.first_tool = t
                if ev.reasoning:
                    self._reasoning_idx.append(len(times))
                elif self._output_from is None:
                    self._output_from = len(times)
                times.append(t)
                texts.append(ev.text)
                counts = self._counts
                if counts is not None:
                    ct = ev.usage.completion_tokens if ev.usage else None
                    if ct is None:
                        self._counts = None
                    else:
                        counts.append(ct - self._last_completion)
                        self._last_completion = ct
                if kind == TOKEN_END:
                    self.ended = True
            elif kind == END:
                self.ended = True
                if ev.text:         # Ollama's whole (non-streamed) reply is one done line
                    if not times:
                        rec.stream = False
                    times.append(t)
                    texts.append(ev.text)
            elif kind == ERROR or kind == MALFORMED:
                rec.error_kind = "error_event" if kind == ERROR else "malformed_event"
                rec.error = ev.error
                self.failed = True
                return FAILED
            if ev.usage:
                apply_usage(ev.usage, rec)
            if ev.finish_reason:
                rec.finish_reason = ev.finish_reason
            if ev.server_timing:
                rec.server_timing = ev.server_timing
            if ev.ref is not None:
                rec.response_id = ev.ref
            if ev.calls is not None and self._calls is not None:
                self._calls.extend(ev.calls)
        return ENDED if self.ended else EVENTS


def decode_whole(fmt: WireFormat, raw: bytes, t: float, rec: Record, texts: list[str]) -> None:
    """A whole (non-streamed) JSON body that arrived complete at ``t``."""
    try:
        obj = loads(raw)
    except ValueError as exc:
        rec.error_kind, rec.error = "malformed_event", malformed(raw, exc).error
        return
    if not isinstance(obj, dict):
        rec.error_kind = "malformed_event"
        rec.error = f"the reply is {type(obj).__name__}, not a JSON object: " + \
            raw[:150].decode("utf-8", "replace")
        return
    ev: Event = classify_safely(fmt.parse_full, obj)     # type: ignore[arg-type]
    if ev.kind == ERROR:
        rec.error_kind, rec.error = "error_event", ev.error
        return
    if ev.kind == MALFORMED:
        rec.error_kind, rec.error = "malformed_event", ev.error
        return
    if ev.kind == TOKEN or ev.kind == TOKEN_END:
        rec.token_times.append(t)
        texts.append(ev.text)
        if ev.tool:
            rec.first_tool = t
    if ev.items is not None:
        rec.embeddings = ev.items
    calls = getattr(texts, "calls", None)
    if ev.calls is not None and calls is not None:
        calls.extend(ev.calls)
    if ev.ref is not None:
        rec.response_id = ev.ref
    if ev.usage:
        apply_usage(ev.usage, rec)
    rec.finish_reason = ev.finish_reason
    rec.server_timing = ev.server_timing
