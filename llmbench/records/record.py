"""One record per request, and the append-only JSONL log they are streamed to.

Times are ``time.perf_counter()`` seconds of the process that took them. Token event times
are stored on disk as integer microseconds after ``start`` to keep a 100k-record log small;
``Record.token_times`` always holds absolute seconds in memory.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import IO, Any, Callable, Iterable, Iterator

from llmbench.records import definitions
from llmbench.records.definitions import UNMEASURED_KINDS, is_measured  # noqa: F401  (their home)

NAN = float("nan")

# Failures before the server answered anything: the connection was refused, reset or never
# made. Many in a row are an outage (llmbench.analysis.outages), and each user backs off after one.
REFUSED_KINDS = ("connect", "timeout_connect")

# Every way a request can fail, as stored in ``Record.error_kind``.
ERROR_KINDS = (
    "connect",              # could not connect, or the server closed before answering
    "timeout_connect",
    "timeout_first_token",
    "timeout_idle",         # too long between two events
    "timeout_total",
    "http_status",          # status >= 400; ``error`` holds the first 200 characters of the body
    "stream_cut",           # the stream ended before [DONE] / done:true
    "malformed_event",      # an event not valid JSON, or a field of the wrong type ("content": 5)
    "protocol",             # a reply not well-formed HTTP/1.1 (bad framing), or not HTTP at all
    "error_event",          # an error object inside the stream
    "no_token",             # a clean stream that carried no token event
    "bad_vectors",          # an embeddings reply without one vector per input (a null or empty
                            # vector, too few or too many)
    "interrupted",          # the run was stopped while this request was in flight
    "client_stall",         # a limit passed while llmbench itself was frozen (its event loop
                            # did not run: SIGSTOP, swap, a suspended VM): not the server's
    # not a failure: the user gave up (--abandon) and closed the connection, before a first
    # token or mid-stream (``token_times`` says which); counted apart (``CANCELLED``)
    "cancelled",
)
CANCELLED = "cancelled"


@dataclass(slots=True, eq=False)
class Record:
    """One request as measured: the file format of requests.jsonl (records/definitions.py).
    A field None or False is not written (``to_json``): logs without a feature read as before."""
    request_id: str
    scheduled: float
    start: float = 0.0
    # when the request's body was handed to the socket (either transport); minus ``start`` it
    # is the client's own send delay. None: not stamped (logs written before it)
    sent: float | None = None
    first_token: float | None = None
    end: float | None = None           # the last token event (METRICS.md), not the socket close
    done: float = 0.0                  # when the client was finished with it, whatever the outcome
    token_times: list[float] = field(default_factory=list)
    token_counts: list[int] | None = None   # tokens per event, when the server says
    ok: bool = False
    status: int | None = None
    error_kind: str | None = None
    error: str | None = None
    prompt_tokens: int | None = None
    prompt_tokens_source: str = "server"    # "server" or "client"
    output_tokens: int | None = None
    # "server" (usage), "length" (finish_reason length: the length asked), "events" (the
    # stream's token events) or "tokenizer" (the reply text counted)
    output_tokens_source: str = "server"
    cached_tokens: int | None = None
    finish_reason: str | None = None
    served_by: str | None = None
    server_queue_ms: float | None = None
    server_timing: dict[str, Any] | None = None
    stream: bool = True
    user: int | None = None
    conversation: str | None = None
    turn: int = 0
    step: int | None = None
    warmup: bool = False
    path: str | None = None            # probe: "router" or "direct"
    max_tokens: int | None = None      # the reply length asked for (None: the server's default)
    retries: int = 0                   # re-sent after a reused connection failed before any reply
    note: str | None = None            # what ``clean`` had to correct in the server's answer
    # Reasoning models (None when the reply carried no reasoning): token events that carried
    # only reasoning (reasoning_content, reasoning, thinking). Reasoning streams before the
    # answer; every event from output_from on is the answer's (token_times[output_from] ==
    # first_output).
    reasoning_events: int | None = None
    reasoning_tokens: int | None = None     # the server's count when it reports one, else counted
    reasoning_end: float | None = None      # arrival of the last reasoning event
    output_from: int | None = None          # index in token_times of the first answer event
    first_output: float | None = None       # arrival of the first answer event (TTFO's end)
    # Which worker process sent it (run --workers N; llmbench.workers); None in one process
    worker: int | None = None
    # how long its user waited before trying again after a refused or dropped connection
    # (REFUSED_KINDS) or a 503/429 (load.session's backoff)
    backoff_ms: float | None = None
    # Agents and RAG (None when not asked for): arrival of the first token event of a tool
    # call; whether a structured reply (--response-format) parsed as JSON and validated
    # against its schema (counted, not a failure); vectors an embeddings reply held
    first_tool: float | None = None
    output_valid: bool | None = None
    embeddings: int | None = None
    # the Responses API's id of this reply (kept for --responses-state server, whose next turn
    # names it as previous_response_id)
    response_id: str | None = None
    # Agent sessions (--workload agent): the session (unique in the run), its step's id,
    # the step it followed (the previous call of its agent, or the call whose reply started
    # its sub-agent; None for the session's first), how long its agent waited after that
    # step's reply before sending it (the tool's time, sub-agents joined included), and what
    # the step was for: "call" (a tool call was expected), "answer" (a sub-agent's last),
    # "final" (the session's answer). analysis.sessions rebuilds the sessions from these.
    session_id: str | None = None
    step_id: str | None = None
    parent_step_id: str | None = None
    tool_gap_ms: float | None = None
    step_kind: str | None = None
    # --scenario: the traffic class whose user sent it; every per-class figure is taken from
    # the records of that class
    traffic_class: str | None = None
    # The request's phase stamps (records/phases.py: what each covers), integer µs after
    # ``start`` like the token events on disk; None: not stamped. On a new connection only:
    # connecting began, the name resolved, the TCP connection made, the TLS handshake done;
    # on every request: the response's first byte.
    conn_us: int | None = None
    dns_us: int | None = None
    connect_us: int | None = None
    tls_us: int | None = None
    first_byte_us: int | None = None
    # --traceparent: the W3C trace id sent with the request (32 hex digits), so the request's
    # span and the server's own spans can be found together
    trace_id: str | None = None

    # -- the per-request latencies (METRICS.md), in seconds ----------------------------------
    # Their one definition is records/definitions.py, over (start, token times); these read a
    # Record through it. They read ``token_times``, not ``first_token`` / ``end`` (why: that
    # module's docstring).

    @property
    def ttft(self) -> float | None:
        """TTFT = first token event - start; None without a token event."""
        times = self.token_times
        return definitions.ttft(self.start, times[0]) if times else None

    @property
    def e2el(self) -> float | None:
        """E2EL = last token event - start; None without a token event."""
        times = self.token_times
        return definitions.e2el(self.start, times[-1]) if times else None

    @property
    def tpot(self) -> float | None:
        """TPOT (definitions.tpot); None unless more than one output token and a token event."""
        times = self.token_times
        n_out = self.output_tokens or 0
        return definitions.tpot(times[0], times[-1], n_out) \
            if definitions.has_tpot(n_out) and times else None

    @property
    def itls(self) -> list[float]:
        """ITL: the gaps between consecutive token events (one per event, not per token)."""
        return definitions.itls(self.token_times)  # type: ignore[no-any-return]

    @property
    def client_queue(self) -> float:
        """start - scheduled (never below 0): how long the load generator held the request."""
        return definitions.client_queue(self.scheduled, self.start)

    @property
    def e2el_from_schedule(self) -> float | None:
        """last token event - scheduled: E2EL as the user felt it (coordinated omission)."""
        times = self.token_times
        return definitions.e2el_from_schedule(self.scheduled, times[-1]) if times else None

    @property
    def ttfo(self) -> float | None:
        """Time to first output token: the answer's first event; TTFT when nothing reasoned,
        None when the reply reasoned and never answered."""
        if not self.reasoning_events:
            return self.ttft
        return None if self.first_output is None else \
            definitions.ttft(self.start, self.first_output)

    @property
    def send_delay(self) -> float | None:
        """llmbench's own delay in sending (definitions.send_delay); None: not stamped."""
        return None if self.sent is None else definitions.send_delay(self.start, self.sent)

    @property
    def measured(self) -> bool:
        """Whether this request counts (``definitions.is_measured``)."""
        return is_measured(self.warmup, self.error_kind)

    def to_json(self, token_us: list[int] | None = None) -> dict[str, Any]:
        """The record as requests.jsonl's line holds it; ``token_us``: ``token_us(self)``, when
        the caller has it already."""
        d: dict[str, Any] = {}
        for name, value in zip(_WRITTEN, _get_written(self)):
            vt = type(value)
            if vt is float:
                if value != value or value in _INFINITIES:
                    continue              # JSON has no NaN: a bare NaN makes the line invalid
            elif vt is dict:
                value = _finite(value)
            # stream defaults to True: a False left out would read back as True
            if value is not None and value is not False or name in ("ok", "stream"):
                d[name] = value
        d["token_us"] = token_us if token_us is not None else \
            _token_us(self.start, self.token_times)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Record":
        d = dict(d)
        token_us = d.pop("token_us", [])
        known = {k: v for k, v in d.items() if k in cls.__slots__}  # type: ignore[attr-defined]
        rec = cls(**known)
        start = rec.start
        rec.token_times = [start + us / 1e6 for us in token_us]
        return rec


# the largest time or count a record holds (perf_counter seconds, µs, ms, tokens): past it a
# value is no measurement, and arithmetic on it overflows
_MAX_VALUE = 1e15
_KINDS: dict[str, frozenset[type]] = {}


class _Anything(frozenset):
    def __contains__(self, _: object) -> bool:
        return True


def _field_kinds() -> dict[str, frozenset[type]]:
    """The JSON kinds each of Record's fields takes, null included (from its annotation,
    once): a float field takes an int too; a field of several kinds or Any takes anything."""
    if not _KINDS:
        import typing
        plain = {"float": (float, int), "int": (int,), "str": (str,), "bool": (bool,),
                 "list": (list,), "dict": (dict,)}
        for name, tp in typing.get_type_hints(Record).items():
            text = str(tp).replace("typing.", "")
            base = text.split("[")[0].replace("<class '", "").replace("'>", "")
            parts = [x.strip() for x in base.split("|") if x.strip() != "None"]
            null = (type(None),) if "None" in text else ()
            _KINDS[name] = (frozenset(plain[parts[0]] + null)
                            if len(parts) == 1 and parts[0] in plain else _Anything())
    return _KINDS


def _finite(obj: Any) -> Any:
    """A server's JSON with NaN/inf (Python's json reads them) made null."""
    if type(obj) is float:
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj


def clean(rec: Record, secrets: tuple[str, ...] = ()) -> Record:
    """Make a finished record safe to count and to store, in place.

    - Our own secrets (API key, header values, URL password) are cut out of the server's text:
      servers echo the Authorization header in error bodies.
    - A token count the server reports below zero is invalid usage: ignored, and the reply's
      token events are counted instead (throughput must never be negative); ``note`` says so.
    - A non-finite server figure (an ``x-llmbench-queue-ms: nan`` header) is dropped.
    """
    if secrets and rec.error:
        for secret in secrets:
            if secret in rec.error:
                rec.error = rec.error.replace(secret, "***")
    if rec.output_tokens is not None and rec.output_tokens < 0:
        rec.note = (f"the server reported completion_tokens {rec.output_tokens}; ignored, "
                    f"counted {len(rec.token_times)} token events instead")
        rec.output_tokens = len(rec.token_times) if rec.token_times else None
        rec.output_tokens_source = "events"
        rec.token_counts = None
    elif rec.token_counts is not None and any(c < 0 for c in rec.token_counts):
        rec.token_counts = None       # per-event counts that go backwards are not counts
    if rec.prompt_tokens is not None and rec.prompt_tokens < 0:
        rec.note = (rec.note + "; " if rec.note else "") + \
            f"the server reported prompt_tokens {rec.prompt_tokens}; ignored"
        rec.prompt_tokens = None
    if rec.server_timing:
        rec.server_timing = _finite(rec.server_timing)
    if rec.cached_tokens is not None and rec.cached_tokens < 0:
        rec.cached_tokens = None
    if rec.server_queue_ms is not None and not (math.isfinite(rec.server_queue_ms)
                                                and rec.server_queue_ms >= 0):
        rec.server_queue_ms = None
    return rec


# the fields to_json writes, in order, read with one call (a getattr per field cost ~40 % of
# to_json on the hot path)
_WRITTEN = tuple(n for n in Record.__slots__ if n != "token_times")   # type: ignore[attr-defined]
_get_written = attrgetter(*_WRITTEN)
_INFINITIES = (math.inf, -math.inf)


def _token_us(start: float, times: list[float]) -> list[int]:
    return [round((t - start) * 1e6) for t in times]


def token_us(rec: Record) -> list[int]:
    """A record's token events as requests.jsonl holds them: integer µs after its start."""
    return _token_us(rec.start, rec.token_times)


def _json_line(obj: dict[str, Any]) -> bytes:
    """One record as a line of JSON (UTF-8). orjson takes a fifth of json.dumps's time on the
    hot path (a 100-event record: ~30 µs); what it refuses (an integer beyond 64 bits in a
    server's field) goes through json. Both write floats as their shortest round-trip form, so
    the file reads back to the same numbers; a NaN (which JSON has not, and clean() keeps out of
    the measured fields) is written as null."""
    if _orjson_dumps is not None:
        try:
            return _orjson_dumps(obj, option=_ORJSON_NEWLINE)
        except TypeError:
            pass
    return (json.dumps(obj, separators=(",", ":")) + "\n").encode("utf-8")


try:
    from orjson import OPT_APPEND_NEWLINE as _ORJSON_NEWLINE, dumps as _orjson_dumps
    from orjson import loads as _orjson_loads
except ImportError:         # pragma: no cover - orjson is a dependency, kept optional here
    _orjson_dumps, _ORJSON_NEWLINE, _orjson_loads = None, 0, None


class RecordLog:
    """Appends one JSON line per finished request and flushes it, so nothing measured is lost.

    A write that fails (disk full, the file too large for its limit, a read-only filesystem)
    is cut back to the last whole line, so every line on disk stays whole; the log then stops
    writing, keeps the error in ``error`` and calls ``on_error`` once (the harness stops the
    load: measuring on without a record of it would lose what was measured)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._fh: IO[bytes] | None = open(self.path, "ab")
        self._whole = self._fh.tell()        # bytes up to the end of the last whole line
        self.count = 0
        self.error: OSError | None = None
        self.on_error: Callable[[OSError], None] | None = None

    def append(self, rec: Record, token_us: list[int] | None = None) -> None:
        """``token_us``: the record's token_us(rec), when the caller has it already."""
        fh = self._fh
        if fh is None:
            return
        line = _json_line(rec.to_json(token_us))
        try:
            fh.write(line)
            fh.flush()
        except OSError as exc:
            self._failed(exc)
            return
        self._whole += len(line)
        self.count += 1

    def _failed(self, exc: OSError) -> None:
        fh, self._fh = self._fh, None
        fd = os.dup(fh.fileno())
        try:
            fh.close()              # flushes the buffered rest again: it may fail again, or not
        except (OSError, ValueError):
            pass
        try:
            # then what the failed writes left (part of a line) goes: every line stays whole
            os.ftruncate(fd, self._whole)
        except OSError:
            pass
        finally:
            os.close(fd)
        if exc.filename is None:
            exc.filename = str(self.path)
        self.error = exc
        if self.on_error is not None:
            self.on_error(exc)

    def close(self) -> None:
        if self._fh is not None:
            try:
                self._fh.flush()
                os.fsync(self._fh.fileno())
            except OSError as exc:
                self._failed(exc)
                return
            self._fh.close()
            self._fh = None


@dataclass
class Skipped:
    """The lines of one JSON-lines file a reader skipped: how many, and the first one."""
    lines: int = 0
    first_line: int = 0
    why: str = ""

    def note(self, path: str | Path) -> str:
        s = "" if self.lines == 1 else "s"
        return (f"{path}: skipped {self.lines} line{s} that {'was' if not s else 'were'} not "
                f"whole JSON (the first, line {self.first_line}: {self.why}); a line torn by "
                "a crash, or a damaged file")


# What the JSON-lines readers of a run folder skipped, by file (the last read of each): the
# commands that read run folders (report, compare) say so after reading (``skipped_notes``)
SKIPPED: dict[str, Skipped] = {}


class JsonLines:
    """Decodes the lines of one JSON-lines file: a line that is not UTF-8 or not JSON (torn by
    a crash mid-write, or a damaged byte) is None, skipped and counted in SKIPPED[str(path)],
    never fatal: one bad byte must not cost the rest of a run's records."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self.n = 0
        self.skipped = Skipped()
        SKIPPED.pop(self.path, None)

    def decode(self, raw: bytes) -> Any:
        self.n += 1
        if not raw.strip():
            return None
        try:
            return _orjson_loads(raw) if _orjson_loads is not None else \
                json.loads(raw.decode("utf-8"))
        except ValueError:
            pass
        # orjson refuses what json takes (NaN in logs of older versions): json then, on text
        # that must be UTF-8 (json.loads of bytes would guess an encoding)
        try:
            return json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            sk = self.skipped
            sk.lines += 1
            if sk.lines == 1:
                sk.first_line = self.n
                sk.why = ("not UTF-8" if isinstance(exc, UnicodeDecodeError) else
                          "nested too deeply" if isinstance(exc, RecursionError) else "not JSON")
                SKIPPED[self.path] = sk
            return None


def json_lines(path: str | Path) -> Iterator[Any]:
    """Each line of a JSON-lines file that decodes (JsonLines: the others are counted)."""
    lines = JsonLines(path)
    with open(path, "rb") as fh:
        for raw in fh:
            value = lines.decode(raw)
            if value is not None:
                yield value


def skipped_notes() -> list[str]:
    """One note per file whose reads skipped lines (SKIPPED), for the console."""
    return [s.note(path) for path, s in SKIPPED.items()]


def check_line(d: Any) -> None:
    """A requests.jsonl line read from a file holds each field in its kind: a text for a time,
    a list for a count, a time of 1e308 (a file edited by hand or written by another tool) is
    a ValueError naming the key. Not in Record.from_json: the workers' records, which
    llmbench made, are read on the hot path."""
    if not isinstance(d, dict):
        raise ValueError("not a JSON object")
    kinds = _field_kinds()
    for k, v in d.items():
        ok = kinds.get(k)
        if ok is None:
            continue
        t = type(v)
        if t not in ok or ((t is float or t is int) and not -_MAX_VALUE <= v <= _MAX_VALUE):
            raise ValueError(f"{k}: a {t.__name__} where another kind belongs")
    start, end = d.get("start", 0.0), d.get("end")
    if end is not None and end < start:
        raise ValueError("end: before start")
    us = d.get("token_us", [])
    if not isinstance(us, list):
        raise ValueError("token_us: expected a list of numbers")
    # min and max in C (a text among the numbers is a TypeError)
    if us and not -_MAX_VALUE <= min(us) <= max(us) <= _MAX_VALUE:
        raise ValueError("token_us: a time past any run's")


def iter_records(path: Path) -> Iterator[Record]:
    """Read a requests.jsonl; a torn or damaged line is skipped and counted (json_lines), a
    line whose values are not of their fields' kinds is skipped (check_line)."""
    for d in json_lines(path):
        try:
            check_line(d)
            yield Record.from_json(d)
        except (TypeError, AttributeError, KeyError, ValueError):
            continue


def load_records(path: Path) -> list[Record]:
    return list(iter_records(path))


def measured(records: Iterable[Record]) -> list[Record]:
    """Records that count (``definitions.is_measured``)."""
    return [r for r in records if is_measured(r.warmup, r.error_kind)]
