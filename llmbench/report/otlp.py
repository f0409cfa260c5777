"""--otlp: each request as an OpenTelemetry span, sent to a collector over OTLP/HTTP (protobuf).

An observer of the load (Harness.observers) whose work happens in another process: building and
encoding a span costs ~0.3 ms of Python (the SDK's encoder; protobuf by hand is no cheaper), and
done in a thread of the load's process it held the GIL away from the event loop: at 128
streams the TTFT error grew from +0.4 to +2-4 ms at p50 and doubled at p99
(scripts/bench_client_accuracy.py --otlp). So ``observe(record)`` on the loop only counts; a
child process follows requests.jsonl (written and flushed for every record already), builds
the spans from the records there and hands them, in batches, to the OpenTelemetry SDK's
OTLP/HTTP exporter (which reads the standard OTEL_EXPORTER_OTLP_* variables). Without a run
folder (the API's out=None) the same work runs in a thread, from a bounded queue. A collector
that is down, slow, dripping or answering HTML loses spans, counted, never measurements:
``close`` waits a few seconds at most and says in one line what was sent and what was dropped.

Each request's span (kind CLIENT; docs/whole-path.md lists its attributes) has one event per
phase (records/phases.py) and the record's trace id (records/trace.py): with --traceparent the
server got the same context, so its spans are this span's children. Each step is a span of its
own (in the run's trace), linked from its requests' spans. The preflight (the one-token
request before the load, which sent a traceparent too but is no measurement, so not in
requests.jsonl) is handed over by the harness (``preflight``: load.observe.Preflighted) and
exported as a span of its own, marked ``llmbench.preflight`` (the child gets it on stdin).

Needs the extra: pip install 'llmbench[otel]'; without it OtlpExporter raises OtlpUnavailable.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from llmbench.records.phases import phases_ms
from llmbench.records.record import Record
from llmbench.records.trace import new_trace_id, span_id

INSTALL = "pip install 'llmbench[otel]'"
QUEUE_RECORDS = 20_000          # records waiting for the thread; beyond: dropped, counted
BATCH = 512                     # spans per export
EXPORT_TIMEOUT_S = 5.0          # one export's deadline, retries included (the SDK's own)
CLOSE_WAIT_S = 5.0              # at the end, how long the rest may take before it is dropped
# the exporter process's own start (Python, the SDK's imports: ~1 s; tens on a busy machine)
# is not the collector's time: at the end it may take this long to be ready, before the
# CLOSE_WAIT_S per batch starts (issue 49: at load 12 a 1-second run's 24 spans were all
# "dropped: the collector was too slow" while the exporter was still importing)
START_WAIT_S = 60.0
OPERATION = {"openai-chat": "chat", "anthropic": "chat", "ollama": "chat",
             "openai": "text_completion", "tgi": "text_completion",
             "responses": "chat", "embeddings": "embeddings"}


class OtlpUnavailable(Exception):
    """The extra is not installed (the message says how to install it)."""


def traces_endpoint(url: str | None) -> str | None:
    """--otlp URL as the traces endpoint: a base URL gets /v1/traces (as the SDK does with
    OTEL_EXPORTER_OTLP_ENDPOINT); "env" (or None): the SDK reads the environment."""
    if url is None or url == "env":
        return None
    path = urlsplit(url).path.rstrip("/")
    return url if path.endswith("/v1/traces") else url.rstrip("/") + "/v1/traces"


@dataclass
class OtlpCounts:
    """What the OTLP export did: spans observed, exported and dropped."""
    observed: int = 0
    exported: int = 0
    dropped: int = 0             # never sent or not accepted
    why: str | None = None       # the first reason spans were dropped



class _Spans:
    """Records to spans, and spans to the collector (in the child process, or the thread)."""

    def __init__(self, url: str | None, model: str, api: str, base_url: str, run_name: str,
                 epoch: float) -> None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        import logging
        import requests
        # the SDK logs each failed export: the one line at the end says it instead
        for name in ("opentelemetry.exporter.otlp.proto.http",
                     "opentelemetry.exporter.otlp.proto.http.trace_exporter"):
            logging.getLogger(name).setLevel(logging.CRITICAL + 1)
        self.endpoint = endpoint_of(url)
        self.counts = OtlpCounts()
        self._html = False
        session = requests.Session()
        session.hooks["response"].append(self._check_answer)
        self._exporter = OTLPSpanExporter(endpoint=self.endpoint, timeout=EXPORT_TIMEOUT_S,
                                          session=session)
        from llmbench.version import __version__
        self._resource = Resource.create({"service.name": "llmbench",
                                          "service.version": __version__,
                                          **({"llmbench.run": run_name} if run_name else {})})
        self.model, self.operation = model, OPERATION.get(api, "chat")
        u = urlsplit(base_url)
        self._server = (u.hostname or "", u.port or (443 if u.scheme == "https" else 80))
        self._epoch = epoch                 # perf_counter seconds -> Unix seconds
        self._run_trace = new_trace_id()
        self._steps: dict[int, list[float]] = {}        # step -> [first start, last done]

    def _check_answer(self, resp: Any, *args: Any, **kwargs: Any) -> None:
        ctype = resp.headers.get("content-type", "").lower()
        if resp.ok and ("html" in ctype or "json" in ctype and "protobuf" not in ctype):
            self._html = True

    def export(self, records: list[Record], count: bool = True) -> None:
        self._export([self._span(r) for r in records], count)

    def preflight(self, rec: Record) -> None:
        """The preflight's span: not a request of the load, so not in the counts the closing
        line gives (those are requests.jsonl's records), as the steps' spans are not."""
        self._export([self._span(rec, preflight=True)], count=False)

    def _export(self, spans: list[Any], count: bool = True) -> None:
        from opentelemetry.sdk.trace.export import SpanExportResult
        self._html = False
        try:
            ok = self._exporter.export(spans) == SpanExportResult.SUCCESS
        except Exception as exc:  # noqa: BLE001 - a collector's fault never reaches the load
            ok = False
            self.counts.why = self.counts.why or f"{type(exc).__name__}: {exc}"[:120]
        if ok and self._html:
            ok = False
            self.counts.why = self.counts.why or "it answered a web page, not OTLP"
        if not count:
            return
        if ok:
            self.counts.exported += len(spans)
        else:
            self.counts.dropped += len(spans)
            self.counts.why = self.counts.why or "it did not accept them (down, or too slow)"

    def _ns(self, t: float) -> int:
        return int((t + self._epoch) * 1e9)

    @staticmethod
    def _context(trace: str, span: str) -> Any:
        from opentelemetry.trace import SpanContext, TraceFlags
        return SpanContext(int(trace, 16), int(span, 16), is_remote=False,
                           trace_flags=TraceFlags(TraceFlags.SAMPLED))

    def _step_span_id(self, step: int) -> str:
        return f"{(step + 1) & 0xFFFFFFFF:08x}{self._run_trace[:8]}"

    def _span(self, rec: Record, preflight: bool = False) -> Any:
        from opentelemetry.sdk.trace import Event, ReadableSpan
        from opentelemetry.trace import Link, SpanKind, Status, StatusCode
        trace = rec.trace_id or new_trace_id()
        times = rec.token_times
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": self.operation, "gen_ai.request.model": self.model,
            "server.address": self._server[0], "server.port": self._server[1],
            "llmbench.request_id": rec.request_id,
            "llmbench.outcome": "ok" if rec.ok else (rec.error_kind or "failed")}
        for key, v in (("gen_ai.usage.input_tokens", rec.prompt_tokens),
                       ("gen_ai.usage.output_tokens", rec.output_tokens),
                       ("gen_ai.request.max_tokens", rec.max_tokens),
                       ("llmbench.step", rec.step), ("llmbench.user", rec.user),
                       ("http.response.status_code", rec.status)):
            if v is not None:
                attrs[key] = v
        if rec.finish_reason:
            attrs["gen_ai.response.finish_reasons"] = [rec.finish_reason]
        if rec.warmup:
            attrs["llmbench.warmup"] = True
        if preflight:
            attrs["llmbench.preflight"] = True
        if not rec.ok:
            attrs["error.type"] = rec.error_kind or "failed"
        ttft = rec.ttft if rec.ok else None
        if ttft is not None:
            attrs["llmbench.ttft_ms"] = ttft * 1000.0
            gaps = sorted(rec.itls)
            if gaps:
                n = len(gaps)
                mid = gaps[n // 2] if n % 2 else (gaps[n // 2 - 1] + gaps[n // 2]) / 2
                attrs["llmbench.itl_p50_ms"] = mid * 1000.0
        events = []
        ph = phases_ms(rec)
        if ph is not None:
            at = rec.start
            for name, ms in ph.items():
                at += ms / 1000.0
                events.append(Event(name, {"llmbench.phase_ms": ms}, timestamp=self._ns(at)))
        links = []
        if rec.step is not None:
            self._note_step(rec)
            links.append(Link(self._context(self._run_trace, self._step_span_id(rec.step))))
        end = rec.done or (times[-1] if times else rec.start)
        return ReadableSpan(
            name=f"{self.operation} {self.model}", context=self._context(trace, span_id(trace)),
            resource=self._resource, attributes=attrs, events=events, links=links,
            kind=SpanKind.CLIENT,
            status=Status(StatusCode.UNSET if rec.ok else StatusCode.ERROR,
                          None if rec.ok else (rec.error_kind or None)),
            start_time=self._ns(rec.start), end_time=self._ns(max(end, rec.start)))

    def _note_step(self, rec: Record) -> None:
        span = self._steps.get(rec.step)             # type: ignore[arg-type]
        end = rec.done or rec.start
        if span is None:
            self._steps[rec.step] = [rec.start, end]      # type: ignore[index]
        else:
            span[0], span[1] = min(span[0], rec.start), max(span[1], end)

    def step_spans(self) -> None:
        """A span per step (in the run's trace; the requests' spans link to theirs)."""
        if not self._steps:
            return
        from opentelemetry.sdk.trace import ReadableSpan
        self._export([ReadableSpan(
            name=f"llmbench step {step}", context=self._context(self._run_trace,
                                                                self._step_span_id(step)),
            resource=self._resource, attributes={"llmbench.step": step},
            start_time=self._ns(a), end_time=self._ns(b))
            for step, (a, b) in sorted(self._steps.items())], count=False)

    def shutdown(self) -> None:
        with suppress(Exception):
            self._exporter.shutdown()


def endpoint_of(url: str | None) -> str:
    return traces_endpoint(url) or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or (
        os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318").rstrip("/")
        + "/v1/traces")


@dataclass
class _Preflight:
    """The preflight's record, queued for the thread (no run folder) beside the load's."""
    rec: Record


class OtlpExporter:
    """The observer the module's docstring describes; ``log``: the run's requests.jsonl (None:
    no run folder, so a thread does the work)."""

    def __init__(self, url: str | None, model: str, api: str, base_url: str,
                 run_name: str = "", log: Path | None = None) -> None:
        try:
            import opentelemetry.exporter.otlp.proto.http.trace_exporter  # noqa: F401
            import opentelemetry.sdk  # noqa: F401
        except ImportError:
            raise OtlpUnavailable(f"--otlp needs OpenTelemetry: {INSTALL}") from None
        self.endpoint = endpoint_of(url)
        self.counts = OtlpCounts()
        epoch = time.time() - time.perf_counter()
        self._child: subprocess.Popen[bytes] | None = None
        self._spans: _Spans | None = None
        if log is not None:
            self._child = subprocess.Popen(
                [sys.executable, "-m", "llmbench.report.otlp", str(log), url or "env", model,
                 api, base_url, run_name, repr(epoch)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            return
        self._spans = _Spans(url, model, api, base_url, run_name, epoch)
        self._inflight = 0
        self._q: queue.Queue[Record | _Preflight | None] = queue.Queue(QUEUE_RECORDS)
        self._thread = threading.Thread(target=self._work, name="llmbench-otlp", daemon=True)
        self._thread.start()

    # -- on the event loop: cheap ------------------------------------------------------------
    def observe(self, rec: Record) -> None:
        self.counts.observed += 1
        if self._child is not None:
            return                      # the child reads it from requests.jsonl
        try:
            self._q.put_nowait(rec)
        except queue.Full:
            self.counts.dropped += 1
            if self.counts.why is None:
                self.counts.why = "the collector did not keep up"

    def token(self, now_s: float, n: int) -> None:
        """Token events are in the spans' events already: nothing per token."""

    def preflight(self, rec: Record) -> None:
        """The preflight's record, before any load: a pipe write or a queue put, no export."""
        child = self._child
        if child is not None:
            try:
                assert child.stdin is not None
                child.stdin.write(json.dumps(rec.to_json(), separators=(",", ":")).encode()
                                  + b"\n")
                child.stdin.flush()
            except (OSError, ValueError):
                pass                    # the child is gone: close() says what was lost
            return
        with suppress(queue.Full):
            self._q.put_nowait(_Preflight(rec))

    # -- the thread (no run folder) -----------------------------------------------------------
    def _work(self) -> None:
        spans = self._spans
        assert spans is not None
        stop = False
        while not stop:
            batch: list[Record] = []
            try:
                item = self._q.get(timeout=1.0)
            except queue.Empty:
                continue
            while item is not None:
                if isinstance(item, _Preflight):
                    spans.preflight(item.rec)
                else:
                    batch.append(item)
                if len(batch) >= BATCH:
                    break
                try:
                    item = self._q.get_nowait()
                except queue.Empty:
                    break
            if item is None:
                stop = True
            if batch:
                self._inflight = len(batch)
                spans.export(batch)
                self._inflight = 0

    # -- the end ---------------------------------------------------------------------------
    def close(self) -> None:
        """Send what is left within CLOSE_WAIT_S (the rest is dropped), then say the counts."""
        if self._child is not None:
            self._close_child()
        else:
            self._close_thread()
        print(self.line(), file=sys.stderr, flush=True)

    def _close_child(self) -> None:
        child = self._child
        assert child is not None
        try:
            assert child.stdin is not None
            child.stdin.close()             # the log is whole: read it to its end, then stop
        except OSError:
            pass
        child.stdin = None                  # (communicate would flush it)
        out, why = _drain(child)
        self.counts.why = why
        last: dict[str, Any] = {}
        for line in out.decode("utf-8", "replace").splitlines():
            try:
                last = json.loads(line)
            except ValueError:
                continue
        c = self.counts
        c.exported = int(last.get("exported", 0))
        c.dropped = max(c.observed - c.exported, 0)
        c.why = c.why or last.get("why") or ("the exporter stopped" if c.dropped else None)

    def _close_thread(self) -> None:
        spans = self._spans
        assert spans is not None
        with suppress(queue.Full):
            self._q.put(None, timeout=CLOSE_WAIT_S)
        self._thread.join(CLOSE_WAIT_S)
        if self._thread.is_alive():
            # still exporting (a slow collector): what it holds and what waits are lost
            spans.counts.dropped += self._q.qsize() + self._inflight
            spans.counts.why = spans.counts.why or "the collector was too slow"
        else:
            spans.step_spans()
        spans.shutdown()
        c = self.counts
        c.exported = spans.counts.exported
        c.dropped = c.dropped + spans.counts.dropped
        c.why = c.why or spans.counts.why

    def line(self) -> str:
        c = self.counts
        if not c.dropped:
            return f"OTLP: {c.exported} request spans sent to {self.endpoint}"
        return (f"OTLP: {c.dropped} of {c.observed} request spans dropped ({self.endpoint}: "
                f"{c.why}); the measurements are all in the run folder")


def _drain(child: subprocess.Popen[bytes]) -> tuple[bytes, str | None]:
    """The exporter process's output to its end. Its first line says it is ready (START_WAIT_S
    for that), each later one that a batch was sent: one that says nothing for CLOSE_WAIT_S
    after that is stopped, and why the rest is lost is said (a collector too slow, or an
    exporter that never started: this machine was too busy)."""
    import select
    assert child.stdout is not None
    fd = child.stdout.fileno()
    out = b""
    ready = False
    until = time.monotonic() + START_WAIT_S
    while True:
        left = until - time.monotonic()
        if left <= 0:
            child.kill()
            child.wait()
            why = ("the collector was too slow" if ready else
                   f"the exporter did not start within {START_WAIT_S:g} s: this machine was "
                   "too busy")
            return out, why
        if select.select([fd], [], [], left)[0]:
            chunk = os.read(fd, 1 << 16)
            if not chunk:                   # it has ended
                child.wait()
                return out, None
            out += chunk
            ready = ready or b"\n" in out
            if ready:
                until = time.monotonic() + CLOSE_WAIT_S


# -- the child process: follows requests.jsonl -------------------------------------------------

class _Stdin:
    """The parent's side channel: a line is a preflight record (its span is exported at
    once), the end of input says the run ended (the log is whole)."""

    def __init__(self, spans: _Spans) -> None:
        self.spans = spans
        self.pending = b""
        self.open = True

    def poll(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for input and handle it; False once the input has ended."""
        import select
        if not self.open:
            return False
        ready, _, _ = select.select([sys.stdin.fileno()], [], [], timeout_s)
        if not ready:
            return True
        chunk = os.read(sys.stdin.fileno(), 1 << 16)
        if not chunk:
            self.open = False
        *lines, self.pending = (self.pending + chunk).split(b"\n")
        for raw in lines:
            try:
                rec = Record.from_json(json.loads(raw))
            except (ValueError, TypeError):
                continue
            self.spans.preflight(rec)
        return self.open


def _follow(log: str, spans: _Spans) -> None:
    """Read the log's records as they are appended and export them in batches; when stdin
    closes (the run ended: the log is whole) read to its end, send the steps' spans, stop.
    Each batch's counts go to stdout, one JSON line, so a parent that has to stop this process
    still knows what was sent."""
    ended = False
    pending = b""
    stdin = _Stdin(spans)
    print(json.dumps({"exported": 0, "dropped": 0, "why": None}), flush=True)     # ready
    while not os.path.exists(log):      # the harness opens it after starting this process
        if not stdin.poll(0.1) and not os.path.exists(log):
            print(json.dumps({"exported": 0, "dropped": 0, "why": None}), flush=True)
            return
    with open(log, "rb") as fh:
        while True:
            batch: list[Record] = []
            while len(batch) < BATCH:
                chunk = fh.read(1 << 20)
                if not chunk:
                    break
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for raw in lines:
                    try:
                        batch.append(Record.from_json(json.loads(raw)))
                    except (ValueError, TypeError):
                        continue
            if batch:
                for i in range(0, len(batch), BATCH):
                    spans.export(batch[i:i + BATCH])
                c = spans.counts
                print(json.dumps({"exported": c.exported, "dropped": c.dropped, "why": c.why}),
                      flush=True)
                continue
            if ended:
                break
            if not stdin.poll(0.2):
                ended = True            # read the rest once more, then stop
    spans.step_spans()
    spans.shutdown()
    c = spans.counts
    print(json.dumps({"exported": c.exported, "dropped": c.dropped, "why": c.why}), flush=True)


def main(argv: list[str]) -> None:
    log, url, model, api, base_url, run_name, epoch = argv
    with suppress(OSError):
        os.nice(10)         # on a busy machine the load's own process gets the CPU first
    _follow(log, _Spans(None if url == "env" else url, model, api, base_url, run_name,
                        float(epoch)))


if __name__ == "__main__":
    main(sys.argv[1:])
