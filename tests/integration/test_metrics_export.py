"""--metrics-port: Prometheus exposition of a run while it lasts. A run in this process against
the mock on loopback, scraped over HTTP in the middle (parsed with prometheus_client's parser),
the port closed after, and the final exposition checked against the run's own summary."""

from __future__ import annotations

import os
import socket
import threading
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from llmbench.analysis.metrics import summarize
from llmbench.client.request import RequestParams, Timeouts
from llmbench.client.target import make_target
from llmbench.load.harness import Harness, PreflightError, TargetSpec
from llmbench.load.shapes.fixed import ClosedLoop
from llmbench.records.record import Record
from llmbench.report.prometheus import BUCKETS_S, MetricsExporter
from llmbench.workload.model import Conversation, Turn
from tests.helpers.api import SMALL_AGENT


def families(text: str) -> dict[str, object]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def samples(fam, name: str, **labels) -> list:
    return [s for s in fam.samples if s.name == name
            and all(s.labels.get(k) == v for k, v in labels.items())]


def bucket_of(seconds: float) -> tuple[float, float]:
    """The (lower, upper] bucket bounds that hold ``seconds``."""
    bounds = (0.0,) + BUCKETS_S + (float("inf"),)
    for lo, hi in zip(bounds, bounds[1:]):
        if lo < seconds <= hi:
            return lo, hi
    raise AssertionError(seconds)


def quantile_from_buckets(fam, base: str, q: float) -> tuple[float, float]:
    """Which bucket the q-quantile falls in, as Prometheus's histogram_quantile picks it."""
    rows = sorted(((float(s.labels["le"]), s.value) for s in samples(fam, base + "_bucket")))
    total = rows[-1][1]
    rank = q * total
    lo = 0.0
    for le, cum in rows:
        if cum >= rank:
            return lo, le
        lo = le
    raise AssertionError("no bucket")


def _port_is_closed(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def _run_with_exporter(mock_url: str, exporter: MetricsExporter, requests: int,
                       concurrency: int, tokens: int):
    convs = [Conversation(f"c{i}", (Turn(f"hello {i} there friend", tokens, 8),)) for i in range(requests)]
    shape = ClosedLoop(convs, concurrency=concurrency, requests=requests)
    h = Harness(RequestParams(), Timeouts(), None, progress=False, observers=[exporter])
    return h.run(shape, [TargetSpec(make_target(mock_url + "/v1", "mock"), server_probe="off")])


def test_a_scrape_mid_run_parses_and_the_port_closes_after(mock_factory):
    m = mock_factory(ttft_ms=40, itl_ms=15, tokens=8, parallel=4)
    exporter = MetricsExporter(port=0, run="test-run")
    mid: list[str] = []

    def scrape_when_busy() -> None:
        deadline = time.time() + 30
        while time.time() < deadline and exporter._server is None:
            time.sleep(0.01)
        port = exporter.port
        while time.time() < deadline:
            try:
                body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
            except OSError:
                time.sleep(0.02)
                continue
            fams = families(body)
            done = samples(fams["llmbench_requests"], "llmbench_requests_total", outcome="ok")
            inflight = samples(fams["llmbench_in_flight_requests"], "llmbench_in_flight_requests")
            if done and done[0].value >= 4 and inflight and inflight[0].value > 0:
                mid.append(body)
                return
            time.sleep(0.05)
    t = threading.Thread(target=scrape_when_busy)
    t.start()
    out = _run_with_exporter(m.url, exporter, requests=40, concurrency=4, tokens=8)
    t.join()
    assert mid, "no scrape during the run saw finished requests and requests in flight"
    fams = families(mid[0])
    ttft = fams["llmbench_ttft_seconds"]
    assert ttft.type == "histogram"
    counts = samples(ttft, "llmbench_ttft_seconds_count", run="test-run")
    assert counts and 4 <= counts[0].value < 40
    assert samples(fams["llmbench_in_flight_requests"], "llmbench_in_flight_requests")[0].value <= 4
    # after the run the port is closed
    assert _port_is_closed(exporter.port)
    assert len(out.records) == 40 + 0


def test_final_exposition_equals_the_summary_within_bucket_resolution(mock_factory):
    m = mock_factory(ttft_ms=30, itl_ms=4, tokens=12, parallel=2, fault_500=0.1, seed=3)
    exporter = MetricsExporter(port=0)
    out = _run_with_exporter(m.url, exporter, requests=60, concurrency=3, tokens=12)
    summary = summarize(out.records).flat()
    fams = families(exporter.render().decode())
    ok = samples(fams["llmbench_requests"], "llmbench_requests_total", outcome="ok")[0].value
    failed = sum(s.value for s in fams["llmbench_requests"].samples if s.labels["outcome"] != "ok")
    assert ok == summary["completed"] and failed == summary["failed"] and failed > 0
    assert samples(fams["llmbench_output_tokens"], "llmbench_output_tokens_total")[0].value \
        == summary["total_output_tokens"]
    for metric, n_key in (("ttft", "n_ttft"), ("itl", "n_itl"), ("e2el", "n_e2el"), ("tpot", "n_tpot")):
        fam = fams[f"llmbench_{metric}_seconds"]
        count = samples(fam, f"llmbench_{metric}_seconds_count")[0].value
        assert count == summary[n_key], metric
        for q, key in ((0.5, f"median_{metric}_ms"), (0.99, f"p99_{metric}_ms")):
            lo, hi = quantile_from_buckets(fam, f"llmbench_{metric}_seconds", q)
            want = summary[key] / 1000.0
            # the summary's quantile interpolates between two neighbouring values; the
            # histogram names the bucket of the upper one, so the summary's lies in that bucket,
            # at its edge, or in the bucket just below when the two values straddle an edge
            assert lo - 1e-9 <= want <= hi + 1e-9 or bucket_of(want)[1] == lo, \
                (metric, q, want, lo, hi)
    total = samples(fams["llmbench_ttft_seconds"], "llmbench_ttft_seconds_sum")[0].value
    # the summary reads token times as whole microseconds (requests.jsonl's rounding)
    assert abs(total * 1000 / summary["n_ttft"] - summary["mean_ttft_ms"]) < 1e-3


def test_records_are_bucketed_only_when_scraped_and_outcomes_start_at_zero():
    ex = MetricsExporter()
    r = Record("r1", scheduled=1.0, start=1.0, sent=1.0002, first_token=1.05, end=1.25,
               done=1.25, ok=True, status=200, output_tokens=3,
               token_times=[1.05, 1.15, 1.25])
    ex.observe(r)
    assert len(ex._pending) == 1 and not ex._hist          # nothing done on the loop
    fams = families(ex.render().decode())
    assert not ex._pending
    assert samples(fams["llmbench_itl_seconds"], "llmbench_itl_seconds_count")[0].value == 2
    assert samples(fams["llmbench_tpot_seconds"], "llmbench_tpot_seconds_sum")[0].value == pytest.approx(0.1)
    zero = samples(fams["llmbench_requests"], "llmbench_requests_total", outcome="timeout_first_token")
    assert zero and zero[0].value == 0
    warm = Record("w", scheduled=2.0, start=2.0, first_token=2.1, end=2.2, done=2.2, ok=True,
                  warmup=True, token_times=[2.1])
    ex.observe(warm)
    fams = families(ex.render().decode())
    assert samples(fams["llmbench_ttft_seconds"], "llmbench_ttft_seconds_count")[0].value == 1


def test_a_taken_port_is_one_line(mock_factory):
    m = mock_factory(ttft_ms=5, itl_ms=1, tokens=2)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        taken = s.getsockname()[1]
        with pytest.raises(PreflightError) as e:
            _run_with_exporter(m.url, MetricsExporter(port=taken), requests=2, concurrency=1, tokens=2)
    assert f"--metrics-port {taken}" in str(e.value) and "\n" not in str(e.value)


def test_a_real_prometheus_scrapes_a_run_and_agrees_with_its_summary(mock_factory, tmp_path):
    """Prometheus (the Debian package) scrapes llmbench every second during a run of several
    seconds; its query API then gives the request count and a TTFT median that match the
    summary (the count exactly: the exporter waits for the scrape after its last record)."""
    from tests.helpers.prometheus import Prometheus
    from tests.helpers import free_port
    m = mock_factory(ttft_ms=40, itl_ms=20, tokens=16, parallel=4)
    port = free_port()
    exporter = MetricsExporter(port=port, run="prom-test")
    with Prometheus(tmp_path / "prom", [f"127.0.0.1:{port}"]) as prom:
        # Prometheus looks at its targets a few seconds after it starts: listen first, and
        # start the load once it scrapes (the harness keeps the open port, and closes it)
        exporter.start()
        deadline = time.monotonic() + 30
        while exporter.scrapes == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        first = exporter.scrapes
        out = _run_with_exporter(m.url, exporter, requests=60, concurrency=4, tokens=16)
        summary = summarize(out.records).flat()
        assert exporter.scrapes - first >= 2, "Prometheus did not scrape during the run"
        deadline = time.monotonic() + 15
        got = None
        while time.monotonic() < deadline:
            got = prom.value('llmbench_requests_total{job="llmbench",outcome="ok"}')
            if got == summary["completed"]:
                break
            time.sleep(0.5)
        assert got == summary["completed"] == 60
        n = prom.value('llmbench_ttft_seconds_count{run="prom-test"}')
        assert n == summary["n_ttft"]
        median = prom.value('histogram_quantile(0.5, llmbench_ttft_seconds_bucket{run="prom-test"})')
        lo, hi = bucket_of(summary["median_ttft_ms"] / 1000.0)
        assert median is not None and lo <= median <= hi, (median, summary["median_ttft_ms"])
        tokens = prom.value("llmbench_output_tokens_total")
        assert tokens == summary["total_output_tokens"]


def test_nothing_holds_the_runs_records(mock_factory):
    """A run nobody scrapes, and a live view with no terminal to draw on, keep no records: the
    exporter buckets them once a second in its thread; the view is not handed them at all."""
    from llmbench.report.live import LiveBoard
    m = mock_factory(ttft_ms=5, itl_ms=2, tokens=4, parallel=4)
    board = LiveBoard(kind="run", requests=100)
    convs = [Conversation(f"c{i}", (Turn("hello there friend", 4, 4),)) for i in range(100)]
    h = Harness(RequestParams(), Timeouts(), None, progress=False, observers=[board])
    h.run(ClosedLoop(convs, concurrency=4, requests=100),
          [TargetSpec(make_target(m.url + "/v1", "mock"), server_probe="off")])
    assert not board._pending                       # not on a terminal: never handed a record
    with MetricsExporter(port=0) as exporter:
        for i in range(1000):
            exporter.observe(Record(f"r{i}", scheduled=1.0, start=1.0, first_token=1.1,
                                    end=1.2, done=1.2, ok=True, output_tokens=2,
                                    token_times=[1.1, 1.2]))
        deadline = time.monotonic() + 10
        while exporter._pending and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not exporter._pending and exporter._drained == 1000 and exporter.scrapes == 0


def test_a_real_prometheus_scrapes_the_server_machine_s_gauges(mock_factory, tmp_path):
    """The server's machine on the metrics port (issue 39): a busy loop stands for the server
    (--server-pid), a recorded DCGM page for its GPUs (--gpu-metrics). Prometheus scrapes the
    run every second; its query API then gives the loop's cores and resident memory as /proc
    has them, the GPUs' utilisation as a ratio, their power and memory in base units; and the
    final exposition passes promtool's own check of the exposition rules (names, HELP, TYPE)."""
    import subprocess
    import sys
    from llmbench.servers import procfs
    from llmbench.servers.telemetry import Telemetry, TelemetrySpec
    from tests.helpers import free_port
    from tests.helpers.field import require
    from tests.helpers.prometheus import Prometheus
    from tests.helpers.telemetry import Dcgm
    promtool = require("promtool", "prometheus")
    m = mock_factory(ttft_ms=40, itl_ms=20, tokens=16, parallel=4)
    loop = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    port = free_port()
    exporter = MetricsExporter(port=port, run="tel-test")
    try:
        with Dcgm() as dcgm, Prometheus(tmp_path / "prom", [f"127.0.0.1:{port}"]) as prom:
            exporter.start()
            deadline = time.monotonic() + 30
            while exporter.scrapes == 0 and time.monotonic() < deadline:
                time.sleep(0.1)
            tel = Telemetry(TelemetrySpec(server_pid=loop.pid, pid_from="--server-pid",
                                          local=True, gpu=dcgm.url, interval_s=0.5))
            convs = [Conversation(f"c{i}", (Turn(f"hello {i} there", 16, 8),)) for i in range(20)]
            h = Harness(RequestParams(), Timeouts(), None, progress=False, observers=[exporter],
                        telemetry=tel)
            t0, ticks0 = time.perf_counter(), procfs.read_stat(loop.pid).cpu_ticks
            h.run(ClosedLoop(convs, concurrency=2, requests=20),
                  [TargetSpec(make_target(m.url + "/v1", "mock"), server_probe="off")])
            end = procfs.read_stat(loop.pid)
            t1, ticks1 = time.perf_counter(), end.cpu_ticks
            rss = end.rss_pages * os.sysconf("SC_PAGE_SIZE")
            final = exporter.render().decode()
            got: dict[str, float | None] = {}
            names = ("llmbench_server_cpu_cores", "llmbench_server_resident_memory_bytes",
                     "llmbench_gpu_utilization_ratio", "llmbench_gpu_power_watts",
                     "llmbench_gpu_memory_used_bytes", "llmbench_machine_cpus")
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                got = {n: prom.value(f'{n}{{job="llmbench",run="tel-test"}}') for n in names}
                if all(v is not None for v in got.values()):
                    break
                time.sleep(0.5)
    finally:
        loop.kill()
        loop.wait()
    assert all(v is not None for v in got.values()), got
    loop_cores = (ticks1 - ticks0) / procfs.CLK_TCK / (t1 - t0)
    # the loop's cores (however busy the machine, it ran): a 5 s window's against the run's
    assert loop_cores > 0.05 and 0.3 * loop_cores <= got["llmbench_server_cpu_cores"] <= 1.05, \
        (got, loop_cores)
    assert got["llmbench_machine_cpus"] == os.cpu_count()
    # a python loop's resident memory, as /proc has it (a loop's barely moves)
    assert got["llmbench_server_resident_memory_bytes"] == pytest.approx(rss, rel=0.25), got
    # the recorded GPUs: 96 % and 84 % (mean 0.9), 310 + 190 W, 30,000 + 20,000 MiB used
    assert got["llmbench_gpu_utilization_ratio"] == pytest.approx(0.9)
    assert got["llmbench_gpu_power_watts"] == pytest.approx(500.0, rel=0.02)
    assert got["llmbench_gpu_memory_used_bytes"] == 50000 * 2**20
    check = subprocess.run([promtool, "check", "metrics"], input=final, text=True,
                           capture_output=True)
    assert check.returncode == 0 and not check.stdout.strip() and not check.stderr.strip(), \
        (check.stdout, check.stderr)
    fams = families(final)
    for n in names:
        assert fams[n].type == "gauge" and fams[n].documentation, n


def test_agent_sessions_on_the_metrics_port_while_they_run_and_at_the_end(mock_factory,
                                                                          tmp_path):
    """--workload agent: scraped over HTTP during the run, sessions under way; the final
    exposition (metrics.prom) counts the sessions run.json counts, by outcome."""
    import llmbench
    from tests.helpers import free_port
    m = mock_factory(ttft_ms=10, itl_ms=2, parallel=8)
    port = free_port()
    running: list[float] = []
    stop = threading.Event()

    def scrape() -> None:
        while not stop.is_set():
            try:
                body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                              timeout=5).read().decode()
            except OSError:
                time.sleep(0.1)
                continue
            fams = families(body)
            if "llmbench_agent_sessions_running" in fams:
                running.append(fams["llmbench_agent_sessions_running"].samples[0].value)
            time.sleep(0.2)
    t = threading.Thread(target=scrape, daemon=True)
    t.start()
    try:
        run = llmbench.run(url=m.url + "/v1", model="mock", concurrency=3, duration="3s",
                           **SMALL_AGENT, out=tmp_path,
                           metrics_port=port)
    finally:
        stop.set()
        t.join(10)
    assert running and max(running) >= 1, running
    fams = families((run.path / "metrics.prom").read_text())
    fam = fams["llmbench_agent_sessions"]
    assert fam.type == "counter"
    by = {s.labels["outcome"]: s.value for s in fam.samples if s.name.endswith("_total")}
    s = run.findings.sessions
    assert s is not None and s.completed >= 3
    assert by == {"completed": s.completed, "failed": s.failed, "joined": 0}
    # and the exposition keeps the rules (names, HELP, TYPE, a counter's _total)
    import subprocess
    from tests.helpers.field import require
    check = subprocess.run([require("promtool", "prometheus"), "check", "metrics"],
                           input=(run.path / "metrics.prom").read_text(), text=True,
                           capture_output=True)
    assert check.returncode == 0 and not (check.stdout + check.stderr).strip(), check
