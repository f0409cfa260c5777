"""How accurate is llmbench's clock? Client timings against the mock's real send times.

The mock runs in its own process and logs, per request, when it received it (arrival_ns) and
the send time of every event (perf_counter_ns, CLOCK_MONOTONIC, shared by processes on this
host). llmbench drives N concurrent streams of one event every 20 ms, and we compare, per
request (matched by x-request-id):
  - the client's TTFT with the server's own view of it (first send - the server's arrival stamp
    of that request): the error is everything the client adds, its own send delay included
    (the old reference, first send - client start, put that delay into the reference and
    hid it),
  - client start -> server arrival (the client's send delay plus the hop),
  - the client's median/p99 ITL with the server's actual median/p99 gap,
  - the client's arrival lag (client token time - server send time),
  - how many of N the closed loop kept in flight (mean), and the client's CPU: microseconds per
    request start and per token event, split by a short calibration phase of one-token
    requests (two phases, two unknowns: cpu = a * requests + b * events).

  python scripts/bench_client_accuracy.py --streams 1,32,128 --seconds 15
  python scripts/bench_client_accuracy.py --streams 128 --tokens 100 --loop asyncio
  python scripts/bench_client_accuracy.py --streams 128 --client httpx   # httpx, default transport
  python scripts/bench_client_accuracy.py --streams 128 --transport fast # llmbench on fasthttp
  python scripts/bench_client_accuracy.py --streams 128 --telemetry on   # with the server's
      # process, the machine and (auto) GPUs sampled each second beside the load, as a run does
  python scripts/bench_client_accuracy.py --streams 128 --dashboard browser  # a page watched

``--dashboard on`` feeds a --dashboard page (its records and live state, as the harness does);
``--dashboard browser`` also opens the page in headless Chromium for the whole measurement, so
the page's process draws every second: the TTFT error and the event-loop lag (``loop p99``,
the LoopMonitor's p99 over the seconds, median and worst) with it against without.

``--client httpx`` drives the same streams with a minimal httpx reader (httpx's default
transport, timestamps per chunk like llmbench) to re-check the choice of HTTP stack.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("LLMBENCH_TOKENIZER", "approx")

from llmbench.client import rxstamp  # noqa: E402
from llmbench.client.request import Client, RequestParams, choose_transport  # noqa: E402
from llmbench.load.eventloop import run as run_loop  # noqa: E402
from llmbench.load.monitor import LoopMonitor  # noqa: E402
from llmbench.load.shapes.fixed import run_closed  # noqa: E402
from llmbench.load.session import Session  # noqa: E402
from llmbench.client.target import make_target  # noqa: E402
from llmbench.workload import WorkloadSpec, build_workload, load_tokenizer  # noqa: E402
from llmbench.mock_server import MockProcess, make_config  # noqa: E402
from llmbench.mock_server.recorder import read_log  # noqa: E402


class HttpxClient:
    """Just enough of llmbench's Client on httpx's default transport, for comparison."""

    def __init__(self, target, streams: int) -> None:
        import httpx
        self.target = target
        self.params = RequestParams()
        self._http = httpx.AsyncClient(limits=httpx.Limits(max_connections=streams + 8),
                                       timeout=None)

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self._http.aclose()

    async def send(self, messages, max_tokens, rec, prompt_tokens_client=None, extra=None):
        from llmbench import wire
        from llmbench.wire.events import TOKEN
        body = wire.get("openai-chat").body(self.target.model, messages, max_tokens, True, {})
        framer = wire.get("openai-chat").make_framer()
        classify = wire.get("openai-chat").classify
        rec.start = time.perf_counter()
        async with self._http.stream("POST", self.target.endpoint, json=body,
                                     headers={"x-request-id": rec.request_id}) as resp:
            rec.status = resp.status_code
            async for chunk in resp.aiter_raw():
                t = time.perf_counter()
                for payload in framer.feed(chunk):
                    if classify(payload).kind == TOKEN:
                        rec.token_times.append(t)
        rec.done = time.perf_counter()
        rec.ok = bool(rec.token_times)
        if rec.ok:
            rec.first_token, rec.end = rec.token_times[0], rec.token_times[-1]
        return ""


def _dashboard_gauges(s: Session, t0: list[float]):
    """What the harness hands the dashboard, from the bench's one session."""
    from types import SimpleNamespace

    def read():
        c = s.counters
        return SimpleNamespace(t_s=time.perf_counter() - t0[0] if t0 else None,
                               started=c.started, done=c.done, failed=c.failed,
                               in_flight=c.in_flight, events=c.events, users=c.in_flight, load=float(c.in_flight),
                               step=None, phase=None, lag_p99_ms=None, cpu_pct=None,
                               busiest=None, server=None)
    return read


def tree_cpu_s(pid: int | None) -> float:
    """CPU seconds (user + system) of a process and every descendant (from /proc)."""
    if pid is None:
        return 0.0
    tick = os.sysconf("SC_CLK_TCK")
    stats: dict[int, tuple[int, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                parts = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        stats[int(entry)] = (int(parts[1]), (int(parts[11]) + int(parts[12])) / tick)
    total, todo, seen = 0.0, [pid], set()
    while todo:
        p = todo.pop()
        if p in seen or p not in stats:
            continue
        seen.add(p)
        total += stats[p][1]
        todo.extend(c for c, (ppid, _) in stats.items() if ppid == p)
    return total


def open_browser(url: str):
    """Headless Chromium on the page for the measurement (None when it is not installed)."""
    import shutil
    import subprocess
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("note: chromium is not installed (apt-get install chromium): the page is fed "
              "but nobody watches it")
        return None, None
    profile = tempfile.mkdtemp(prefix="llmbench-bench-chromium-")
    proc = subprocess.Popen([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                             "--disable-quic", "--no-first-run",
                             "--disable-background-networking", "--disable-component-update",
                             "--disable-sync", f"--user-data-dir={profile}",
                             "--remote-debugging-port=0", url],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return proc, profile


async def sampled(coro, url: str, on: bool):
    """``coro`` with the server telemetry a run has (llmbench/servers/telemetry.py: the
    mock's process found by its port, the machine, llmbench itself, GPUs under auto, the
    identity pages) sampled beside it on the same event loop, when ``on``."""
    if not on:
        return await coro
    from urllib.parse import urlsplit
    from llmbench.servers.telemetry import Telemetry, TelemetrySpec
    tel = Telemetry(TelemetrySpec(find_port=urlsplit(url).port, local=True, gpu="auto",
                                  root=url, model="mock"))
    stop = asyncio.Event()
    task = asyncio.ensure_future(tel.run(stop))
    try:
        return await coro
    finally:
        stop.set()
        await task
        local = [x for x in tel.samples if x["source"] == "local" and "server" in x]
        print(f"  (telemetry: {len(tel.samples)} samples, {len(local)} of the mock's process "
              f"{tel.meta.get('local', {}).get('server_pid')})", flush=True)


async def drive(url: str, streams: int, seconds: float, tokens: int, client: str,
                calibrate_s: float, transport: str = "auto", api: str = "openai-chat",
                dashboard: str = "off", otlp: str | None = None, write_log: bool = False):
    tok = load_tokenizer("approx")
    wl = build_workload(WorkloadSpec(count=20000, prompt_tokens=(16, 16),
                                     output_tokens=(tokens, tokens)), tok)
    target = make_target(url + "/v1", "mock", api=api)
    c = (HttpxClient(target, streams) if client == "httpx"
         else Client(target, RequestParams(trace_ids=otlp is not None,
                                           traceparent=otlp is not None),
                     max_connections=streams + 8, transport=transport))
    exporter = None
    board, browser, profile = None, None, None
    log = None
    if otlp is not None or write_log:
        # as a run: every record appended to requests.jsonl, which --otlp's exporter process
        # follows (report/otlp.py)
        from llmbench.records.record import RecordLog
        log_path = Path(tempfile.mkdtemp()) / "requests.jsonl"
        log = RecordLog(log_path)
    async with c:
        s = Session(c, log)
        # warm-up: open the connections
        await run_closed(s, wl.conversations, streams, streams, None)
        s.records.clear()
        if dashboard != "off":
            from llmbench.report.dashboard.handle import Dashboard
            board = Dashboard().open()
            board.begin({"kind": "run", "unit": "users", "model": "mock", "url": url,
                         "concurrency": streams})
            t0_box: list[float] = []
            s.on_record = board.observe
            board.attach(_dashboard_gauges(s, t0_box))
            if dashboard == "browser":
                browser, profile = open_browser(board.url)
                await asyncio.sleep(3.0)            # the page is loaded and listening
        if otlp is not None:
            # --otlp: every record goes to the exporter as a run's would (report/otlp.py)
            from llmbench.report.otlp import OtlpExporter
            exporter = OtlpExporter(otlp, "mock", api, url + "/v1", log=log_path)
            s.on_record = exporter.observe
        monitor = LoopMonitor()
        monitor.start()
        page_pid = board._proc.pid if board is not None and board._proc is not None else None
        page0, browser0 = tree_cpu_s(page_pid), tree_cpu_s(browser.pid if browser else None)
        cpu0, t0 = time.process_time(), time.perf_counter()
        if board is not None:
            t0_box.append(t0)
        await run_closed(s, wl.conversations, streams, None, seconds)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
        if board is not None:
            page_s = tree_cpu_s(page_pid) - page0
            browser_s = tree_cpu_s(browser.pid if browser else None) - browser0
            print(f"  dashboard: its process used {page_s:.2f} s of CPU over {wall:.1f} s "
                  f"({page_s / wall * 100:.1f}% of a core)"
                  + (f"; chromium {browser_s:.2f} s ({browser_s / wall * 100:.1f}%)"
                     if browser else ""))
        await monitor.stop()
        records = list(s.records)
        if log is not None:
            log.close()
        if exporter is not None:
            s.on_record = None
            exporter.close()                # prints its one line
        if board is not None:
            s.on_record = None
            board.close()
            if browser is not None:
                browser.terminate()
                browser.wait()
                import shutil
                shutil.rmtree(profile, ignore_errors=True)
        calib = None
        if calibrate_s > 0:
            # one-token requests: mostly the cost of starting (and finishing) a request
            one = build_workload(WorkloadSpec(count=20000, prompt_tokens=(16, 16),
                                              output_tokens=(1, 1)), tok)
            s.records.clear()
            cpu1 = time.process_time()
            await run_closed(s, one.conversations, streams, None, calibrate_s)
            calib = (time.process_time() - cpu1, len(s.records),
                     sum(len(r.token_times) for r in s.records))
        return records, cpu, wall, calib, [m.lag_p99_ms for m in monitor.samples]


def cpu_split(cpu: float, reqs: int, events: int, calib) -> tuple[float, float]:
    """CPU microseconds per request start and per token event: cpu = a * requests + b * events
    over the main phase and the one-token calibration phase."""
    if calib is None:
        return float("nan"), cpu / max(events, 1) * 1e6
    c2, r2, e2 = calib
    m = np.array([[reqs, events], [r2, e2]], dtype=float)
    try:
        a, b = np.linalg.solve(m, np.array([cpu, c2]))
    except np.linalg.LinAlgError:
        return float("nan"), cpu / max(events, 1) * 1e6
    return a * 1e6, b * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--streams", default="1,32,128")
    ap.add_argument("--api", default="openai-chat", choices=("openai-chat", "openai", "responses"),
                    help="the wire format measured (the mock serves each; the Responses API's "
                         "typed events included)")
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--itl-ms", type=float, default=20.0)
    ap.add_argument("--ttft-ms", type=float, default=100.0)
    ap.add_argument("--tokens", type=int, default=50)
    ap.add_argument("--client", choices=("llmbench", "httpx"), default="llmbench")
    ap.add_argument("--loop", choices=("auto", "asyncio", "uvloop"), default="auto",
                    help="the client's event loop (auto: what llmbench uses: uvloop if installed)")
    ap.add_argument("--transport", choices=("auto", "aiohttp", "fast"), default="auto",
                    help="llmbench's HTTP stack (auto: its default)")
    ap.add_argument("--telemetry", choices=("off", "on"), default="off",
                    help="sample the server's machine beside the load, as a run does")
    ap.add_argument("--calibrate-seconds", type=float, default=4.0,
                    help="one-token phase that splits CPU per request / per event (0: skip)")
    ap.add_argument("--otlp", metavar="URL", default=None,
                    help="export each request as a span to this OTLP/HTTP collector (and send "
                         "traceparent), as --otlp does, to see what it costs")
    ap.add_argument("--log", action="store_true",
                    help="append each record to a requests.jsonl as a run does (--otlp does)")
    ap.add_argument("--dashboard", choices=("off", "on", "browser"), default="off",
                    help="feed a --dashboard page during the measurement (browser: and watch "
                         "it in headless Chromium)")
    a = ap.parse_args()
    transport = choose_transport("http://x", a.transport)
    clock = rxstamp.clock_of("http", transport) if a.client == "llmbench" else "-"
    print(f"api={a.api} client={a.client} transport={transport} loop={a.loop} stamps={clock} "
          f"telemetry={a.telemetry}  event every {a.itl_ms} ms, TTFT {a.ttft_ms} ms, "
          f"{a.tokens} events per request, {a.seconds:g} s per level, {os.cpu_count()} cores")
    print("errors are client - server, the server's TTFT being first send - its arrival stamp")
    print(f"{'streams':>7} {'reqs':>6} {'start->arr p50/p99':>19} {'TTFT err p50/p99':>17} "
          f"{'ITL p99 cli/srv':>17} {'ITLp99 err':>10} {'lag p50':>8} {'lag p99':>8} "
          f"{'in flight':>9} {'us/start':>8} {'us/event':>8} {'us/ev all':>9} "
          f"{'loop p99 med/max':>16}")
    for n in [int(x) for x in a.streams.split(",")]:
        with tempfile.TemporaryDirectory() as d:
            log = os.path.join(d, "send.jsonl")
            cfg = make_config(None, ttft_ms=a.ttft_ms, itl_ms=a.itl_ms, tokens=a.tokens)
            with MockProcess(cfg, record=log) as m:
                records, cpu, wall, calib, loop_lags = run_loop(sampled(
                    drive(m.url, n, a.seconds, a.tokens, a.client, a.calibrate_seconds,
                          transport, a.api, a.dashboard, a.otlp, a.log), m.url, a.telemetry == "on"), a.loop)
            sent = {e["request_id"]: e for e in read_log(log)}
        ok = [r for r in records if r.ok and r.request_id in sent]
        cli_gaps, srv_gaps, ttft_err, to_arrival, lags = [], [], [], [], []
        events = 0
        for r in ok:
            e = sent[r.request_id]
            ns = np.asarray(e["event_ns"], dtype=float) / 1e9
            t = np.asarray(r.token_times)
            if len(ns) != len(t):
                continue
            arrival = e["arrival_ns"] / 1e9
            events += len(t)
            cli_gaps.extend(np.diff(t))
            srv_gaps.extend(np.diff(ns))
            ttft_err.append(r.ttft - (ns[0] - arrival))
            to_arrival.append(arrival - r.start)
            lags.extend(t - ns)
        in_flight = sum(r.done - r.start for r in records) / wall
        per_start, per_event = cpu_split(cpu, len(records),
                                         sum(len(r.token_times) for r in records), calib)
        ms = lambda v, p: np.percentile(v, p) * 1000  # noqa: E731
        print(f"{n:>7} {len(ok):>6} {ms(to_arrival, 50):8.2f}/{ms(to_arrival, 99):<10.2f} "
              f"{ms(ttft_err, 50):+8.2f}/{ms(ttft_err, 99):<+8.2f} "
              f"{ms(cli_gaps, 99):8.2f}/{ms(srv_gaps, 99):<8.2f} "
              f"{ms(cli_gaps, 99) - ms(srv_gaps, 99):+10.2f} "
              f"{ms(lags, 50):8.3f} {ms(lags, 99):8.3f} {in_flight:9.1f} "
              f"{per_start:8.1f} {per_event:8.1f} {cpu / max(events, 1) * 1e6:9.1f} "
              f"{np.median(loop_lags) if loop_lags else float('nan'):7.2f}/"
              f"{max(loop_lags) if loop_lags else float('nan'):<8.2f}")


if __name__ == "__main__":
    main()
