"""Prometheus metrics while a run lasts (``--metrics-port``): the records as they finish, and the
load generator's own state, served at ``/metrics`` in the text exposition format 0.0.4.

Off the hot path by construction: the event loop only appends each finished record to a deque
(``observe``, ~0.1 us). Everything else (bucketing, counters, the text) runs in the exporter's
threads, at a scrape or once a second, so the loop pays only the GIL it shares for the few
milliseconds a render takes (scripts/bench_metrics_scrape.py measures it at 128 streams).

Definitions are the summary's (METRICS.md): TTFT = first token - start, ITL = each gap between
token events, TPOT = (E2EL - TTFT) / (output tokens - 1), E2EL = end - start, over measured
requests (not warm-up, not cut by our own interrupt) that succeeded, as ``run.json``'s summary
counts them; so the final scrape's ``_count`` equals the summary's ``n_ttft`` and its quantiles
fall in the bucket that holds the summary's. With ``--workers N`` every worker's records reach
the coordinator, which serves them all: one endpoint, no per-worker label.

Labels stay few (docs/watching.md lists every series and its labels). The server's machine,
where it is sampled, and agent sessions are served by the run's own definitions (the last 5 s
of analysis.telemetry.recent; analysis.sessions.LiveSessions), what the terminal view and the
dashboard show, in Prometheus's base units (GPU utilisation a 0-1 ratio); a gauge with no
reading is left out, never 0.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from bisect import bisect_left
from collections import deque
from contextlib import suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

from llmbench.analysis.sessions import LiveSessions
from llmbench.analysis.telemetry import RECENT_S, recent
from llmbench.load.observe import LiveNow, ObserverError
from llmbench.records.record import ERROR_KINDS, UNMEASURED_KINDS, Record

# Seconds. LLM latencies span a 2 ms token gap on a small model to a two-minute reply of a
# reasoning model under load; about four buckets per decade keeps a quantile within ~25 %.
BUCKETS_S = (0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15,
             0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 60.0,
             120.0)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
SEND_DELAY_WINDOW_S = 10.0
DRAIN_EVERY_S = 1.0             # records bucketed at least this often, scraped or not


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(pairs: dict[str, str]) -> str:
    if not pairs:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in pairs.items()) + "}"


def _num(x: float) -> str:
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "+Inf" if x > 0 else "-Inf"
    if x == int(x) and abs(x) < 1e15:
        return str(int(x))
    return repr(float(x))


@dataclass
class Histogram:
    """One Prometheus histogram: its name, help and bucket counts."""
    name: str
    help: str
    counts: list[int] = field(default_factory=lambda: [0] * (len(BUCKETS_S) + 1))
    total: float = 0.0
    n: int = 0

    def add(self, seconds: float) -> None:
        self.counts[bisect_left(BUCKETS_S, seconds)] += 1
        self.total += seconds
        self.n += 1

    def lines(self, labels: dict[str, str]) -> list[str]:
        out = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} histogram"]
        running = 0
        for bound, c in zip(BUCKETS_S, self.counts):
            running += c
            # le as the client libraries write it ("1.0", not "1"): Prometheus 3 reads both, a
            # query that names a bucket by its label matches either spelling
            out.append(f"{self.name}_bucket{_labels({**labels, 'le': repr(float(bound))})} {running}")
        out.append(f"{self.name}_bucket{_labels({**labels, 'le': '+Inf'})} {self.n}")
        out.append(f"{self.name}_sum{_labels(labels)} {_num(self.total)}")
        out.append(f"{self.name}_count{_labels(labels)} {self.n}")
        return out


class MetricsExporter:
    """An observer (load.observe) that counts finished records and serves them; ``keep``: where
    ``close`` writes the final exposition (the run folder's metrics.prom)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, run: str = "",
                 keep: Path | None = None) -> None:
        self.host = host
        self.port = port
        self.const = {"run": run} if run else {}
        self.keep = keep
        self._pending: deque[Record] = deque()
        self._lock = threading.Lock()           # one render at a time (two scrapers)
        self.gauges: Callable[[], LiveNow] | None = None
        self.token_events = 0             # as they arrive (``token``): streaming replies too
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._hist: dict[str, dict[str, Histogram]] = {}   # path -> metric -> histogram
        self._outcomes: dict[tuple[str, str], int] = {}
        self._tokens_out: dict[str, int] = {}
        self._tokens_in: dict[str, int] = {}
        self._resends = 0
        self._send_delays: deque[tuple[float, float]] = deque()
        self._sessions = LiveSessions()
        self.scrapes = 0
        self.render_s_total = 0.0
        self._drained = 0                 # records taken from the queue so far
        self._rendered = 0                # ... of which the last render had counted

    # -- on the event loop ---------------------------------------------------------------------
    def observe(self, rec: Record) -> None:
        self._pending.append(rec)

    def token(self, now_s: float, n: int) -> None:
        self.token_events += n

    def attach(self, now: Callable[[], LiveNow]) -> None:
        """Open the port for the run; its live state is read through ``now`` at a scrape."""
        self.gauges = now
        try:
            self.start()
        except OSError as exc:
            raise ObserverError(f"--metrics-port {self.port}: cannot listen on {self.host}:"
                                f"{self.port} ({exc.strerror or exc}); choose a free port, "
                                "or 0 for any") from None
        print(f"Prometheus metrics: {self.url} while the run lasts", file=sys.stderr)

    # -- in the server's thread ----------------------------------------------------------------
    def _histograms(self, path: str) -> dict[str, Histogram]:
        h = self._hist.get(path)
        if h is None:
            h = self._hist[path] = {
                "ttft": Histogram("llmbench_ttft_seconds", "Time to first token (first token event - request start)."),
                "itl": Histogram("llmbench_itl_seconds", "Inter-token latency: every gap between two token events."),
                "tpot": Histogram("llmbench_tpot_seconds", "Time per output token after the first, per request."),
                "e2el": Histogram("llmbench_e2el_seconds", "End-to-end latency (last byte - request start)."),
            }
        return h

    def _drain(self) -> None:
        pending = self._pending
        now = time.perf_counter()
        while pending:
            rec = pending.popleft()
            self._drained += 1
            if rec.session_id is not None:
                self._sessions.add(rec)
            path = rec.path or ""
            if not rec.measured:
                continue
            outcome = "ok" if rec.ok else (rec.error_kind or "error")
            key = (path, outcome)
            self._outcomes[key] = self._outcomes.get(key, 0) + 1
            self._resends += rec.retries or 0
            if rec.prompt_tokens:
                self._tokens_in[path] = self._tokens_in.get(path, 0) + rec.prompt_tokens
            send_delay = rec.send_delay
            if send_delay is not None:
                # timed by when the request finished, so the window is the last 10 s of the
                # run whenever Prometheus scrapes
                self._send_delays.append((rec.done if rec.done is not None else now, send_delay))
            if not rec.ok:
                continue
            if rec.output_tokens:
                self._tokens_out[path] = self._tokens_out.get(path, 0) + rec.output_tokens
            h = self._histograms(path)
            ttft, e2el = rec.ttft, rec.e2el
            if ttft is not None:
                h["ttft"].add(ttft)
            if e2el is not None:
                h["e2el"].add(e2el)
            times = rec.token_times
            add_gap = h["itl"].add
            for i in range(1, len(times)):
                add_gap(times[i] - times[i - 1])
            n_out = rec.output_tokens
            if ttft is not None and e2el is not None and n_out and n_out > 1:
                h["tpot"].add((e2el - ttft) / (n_out - 1))
        cutoff = now - SEND_DELAY_WINDOW_S
        delays = self._send_delays
        while delays and delays[0][0] < cutoff:
            delays.popleft()

    def render(self) -> bytes:
        with self._lock:
            t0 = time.perf_counter()
            self._drain()
            lines: list[str] = []
            for metric in ("ttft", "itl", "tpot", "e2el"):
                first = True
                for path in sorted(self._hist) or [""]:
                    h = self._histograms(path)[metric]
                    block = h.lines(self._with_path(path))
                    lines.extend(block if first else block[2:])
                    first = False
            lines += ["# HELP llmbench_requests_total Finished requests by outcome (ok or the error kind).",
                      "# TYPE llmbench_requests_total counter"]
            # every outcome from the first scrape on, at 0 until it happens: rate() needs the
            # series before the first error, not from it
            known = ("ok",) + tuple(k for k in ERROR_KINDS if k not in UNMEASURED_KINDS)
            paths = sorted({p for p, _ in self._outcomes}) or [""]
            rows = {(p, k): 0 for p in paths for k in known}
            rows.update(self._outcomes)
            for (path, outcome), n in sorted(rows.items()):
                lines.append(f"llmbench_requests_total{_labels({**self._with_path(path), 'outcome': outcome})} {n}")
            for name, helptext, counts in (
                    ("llmbench_output_tokens_total", "Output tokens of successful requests (the summary's count).", self._tokens_out),
                    ("llmbench_input_tokens_total", "Prompt tokens of finished requests.", self._tokens_in),
                    ("llmbench_token_events_total", "Token events received, counted as they "
                     "arrive (replies still streaming too).", {"": self.token_events}),
                    ("llmbench_resends_total", "Requests sent again on a new connection after a stale kept-alive one.",
                     {"": self._resends})):
                lines += [f"# HELP {name} {helptext}", f"# TYPE {name} counter"]
                for path in sorted(counts) or [""]:
                    lines.append(f"{name}{_labels(self._with_path(path))} {counts.get(path, 0)}")
            g = self.gauges() if self.gauges is not None else LiveNow()
            delays = sorted(d for _, d in self._send_delays)
            send_p99 = delays[min(len(delays) - 1, int(math.ceil(0.99 * len(delays))) - 1)] if delays else None
            for name, helptext, v in (
                    ("llmbench_in_flight_requests", "Requests sent and not finished.", g.in_flight),
                    ("llmbench_users", "Virtual users (or the target rate of an open-loop step) now.",
                     g.load if g.load else g.users),
                    ("llmbench_step", "The ramp step, from 1 (0: a single run).",
                     0 if g.step is None else g.step + 1),
                    ("llmbench_loop_lag_p99_seconds", "llmbench's event-loop lag, p99 of the last second.",
                     None if g.lag_p99_ms is None else g.lag_p99_ms / 1000.0),
                    ("llmbench_cpu_share", "llmbench's CPU use, share of one core, last second.",
                     None if g.cpu_pct is None else g.cpu_pct / 100.0),
                    ("llmbench_send_delay_p99_seconds", f"Client send delay (sent - start), p99 of the last {SEND_DELAY_WINDOW_S:.0f} s.", send_p99)):
                lines += self._gauge(name, helptext, v)
            lines += self._machine(g.telemetry)
            lines += self._agent_sessions(g.agents_open)
            self.scrapes += 1
            self._rendered = self._drained
            self.render_s_total += time.perf_counter() - t0
            return ("\n".join(lines) + "\n").encode()

    def _agent_sessions(self, opened: list[int | None] | None) -> list[str]:
        """Sessions under way (the load's own count where it is known) and ended by outcome."""
        now = self._sessions.now(running=None if opened is None else len(opened))
        if not (now.running or now.completed or now.failed or now.joined):
            return []
        c = self.const
        return ["# HELP llmbench_agent_sessions_running Agent sessions under way now.",
                "# TYPE llmbench_agent_sessions_running gauge",
                f"llmbench_agent_sessions_running{_labels(c)} {now.running}",
                "# HELP llmbench_agent_sessions_total Agent sessions ended, by outcome "
                "(completed: the answer came back; failed: a call failed; joined: completed "
                "after joining mid-way, --join spread).",
                "# TYPE llmbench_agent_sessions_total counter",
                f"llmbench_agent_sessions_total{_labels({**c, 'outcome': 'completed'})} "
                f"{now.completed}",
                f"llmbench_agent_sessions_total{_labels({**c, 'outcome': 'failed'})} {now.failed}",
                f"llmbench_agent_sessions_total{_labels({**c, 'outcome': 'joined'})} {now.joined}"]

    def _machine(self, samples: list[dict[str, Any]]) -> list[str]:
        """The server's machine over its telemetry's last seconds, as gauges."""
        t = recent(samples)
        if t is None:
            return []
        last = f"over the last {RECENT_S:g} s"
        p, m, gpu = t.server, t.host or t.machine, t.gpu
        fb = gpu.fb_used_mib_max if gpu is not None else None
        util = gpu.util_pct_mean if gpu is not None else None
        out: list[str] = []
        for name, helptext, v in (
                ("llmbench_server_cpu_cores", "CPU cores the server's process tree kept busy "
                 f"(CPU seconds per second, user + system, its threads and children), {last}.",
                 p and p.cores),
                ("llmbench_server_resident_memory_bytes", "Resident memory of the server's "
                 f"process tree, the most seen {last}.", p and p.rss_bytes_max),
                ("llmbench_server_threads", f"Threads of the server's process tree, the most "
                 f"seen {last}.", p and p.threads_max),
                ("llmbench_machine_cpu_busy_cores", "Busy CPU cores of the server's machine "
                 f"(this host's /proc, or --host-metrics' node exporter), {last}.",
                 m and m.busy_cores),
                ("llmbench_machine_cpus", "CPUs of the server's machine.", m and m.cpus),
                ("llmbench_gpu_utilization_ratio", f"GPU utilisation, mean over the GPUs, {last} "
                 "(0-1).", None if util is None else util / 100.0),
                ("llmbench_gpu_power_watts", f"GPU power, the GPUs together, mean {last}.",
                 gpu and gpu.power_w_mean),
                ("llmbench_gpu_memory_used_bytes", "GPU memory used (framebuffer), the GPUs "
                 f"together, the most seen {last}.", None if fb is None else fb * 2**20)):
            out += self._gauge(name, helptext, v)
        return out

    def _gauge(self, name: str, helptext: str, v: float | None) -> list[str]:
        """One gauge's lines; one with no reading is left out, never written as 0."""
        if v is None:
            return []
        return [f"# HELP {name} {helptext}", f"# TYPE {name} gauge",
                f"{name}{_labels(self.const)} {_num(float(v))}"]

    def _with_path(self, path: str) -> dict[str, str]:
        return {**self.const, "path": path} if path else dict(self.const)

    # -- the port ------------------------------------------------------------------------------
    def start(self) -> "MetricsExporter":
        if self._server is not None:            # already listening (started before the run)
            return self
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:                    # noqa: N802 - http.server's name
                if self.path.split("?", 1)[0] != "/metrics":
                    self.send_error(404, "only /metrics is served here")
                    return
                body = exporter.render()
                self.send_response(200)
                self.send_header("Content-Type", CONTENT_TYPE)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return                                   # no line per scrape on the console

        self._server = ThreadingHTTPServer((self.host, self.port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="llmbench-metrics",
                                        daemon=True)
        self._thread.start()
        # records are bucketed once a second whether or not anyone scrapes: a run nobody
        # watches must not keep every finished record until its end
        self._stop_drain = threading.Event()
        threading.Thread(target=self._drain_every, args=(DRAIN_EVERY_S,),
                         name="llmbench-metrics-drain", daemon=True).start()
        return self

    def _drain_every(self, seconds: float) -> None:
        while not self._stop_drain.wait(seconds):
            with self._lock:
                self._drain()

    def close(self, linger_s: float = 5.0) -> None:
        """Close the port (it is open only while the run lasts). When a scraper has been
        watching and records came after its last scrape, wait (up to ``linger_s``) for one more
        scrape, so its last numbers are the run's; then the final exposition is kept."""
        if self._server is not None and self.scrapes:
            deadline = time.perf_counter() + linger_s
            while (self._pending or self._drained > self._rendered) \
                    and time.perf_counter() < deadline:
                time.sleep(0.05)
        if self._server is not None:
            self._stop_drain.set()
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self.keep is not None:
            with suppress(OSError):  # the records are what matters; they are kept
                self.keep.write_bytes(self.render())
            self.keep = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/metrics"

    def __enter__(self) -> "MetricsExporter":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()
