"""Server telemetry against real things on loopback (issue 39): a real Prometheus node exporter
(Debian's prometheus-node-exporter) watching a busy loop this test starts; a DCGM exporter's
recorded page served by a test server, whose energy per output token must equal the hand
computation; real processes found by their port or given by PID, one that exits mid-run; and
exporters that do not answer, answer HTML or drip, which must cost one line and never the run.

GPU reading is checked this way (recorded DCGM exposition) because no machine here has a GPU;
scripts/check_gpu.py checks it end to end against nvidia-smi on a machine that has one."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import llmbench
from llmbench.analysis import telemetry as tm
from llmbench.servers import procfs
from llmbench.servers.ports import free_port
from llmbench.servers.telemetry import Telemetry, TelemetrySpec
from tests.helpers import RawServer, http_head, chunk
from tests.helpers.api import records, run_json
from tests.helpers.field import require, wait_port
from tests.helpers.telemetry import Dcgm

BUSY = [sys.executable, "-c", "while True: pass"]


def _ticks(pid: int) -> int:
    st = procfs.read_stat(pid)
    assert st is not None, pid
    return st.cpu_ticks


class ProcWatch:
    """This test's own reading of a process's CPU from /proc, every 0.1 s, to check
    llmbench's per-window figures against (interpolated at the same instants)."""

    def __init__(self, pid: int) -> None:
        self.pid, self.points = pid, []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            st = procfs.read_stat(self.pid)
            if st is None:
                return
            self.points.append((time.perf_counter(), st.cpu_ticks / procfs.CLK_TCK))
            time.sleep(0.1)

    def stop(self) -> None:
        self._stop.set()
        self._t.join(5)

    def cpu_between(self, a: float, b: float) -> float:
        import numpy as np
        ts = np.array([p[0] for p in self.points])
        vs = np.array([p[1] for p in self.points])
        assert ts[0] <= a and b <= ts[-1], (ts[0], a, b, ts[-1])
        return float(np.interp(b, ts, vs) - np.interp(a, ts, vs))


# -- a real node exporter ----------------------------------------------------------------------

@pytest.fixture
def node_exporter(tmp_path):
    binary = require("prometheus-node-exporter", "prometheus-node-exporter")
    port = free_port()
    log = open(tmp_path / "node-exporter.log", "wb")
    proc = subprocess.Popen([binary, f"--web.listen-address=127.0.0.1:{port}",
                             "--collector.disable-defaults", "--collector.cpu",
                             "--collector.meminfo", "--collector.loadavg", "--collector.netdev"],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_port(port, 20, proc)
        yield f"http://127.0.0.1:{port}/metrics"
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()


def test_a_real_node_exporter_s_cpu_busy_matches_a_busy_loop(node_exporter):
    async def watch() -> tuple[Telemetry, float, float, float]:
        t = Telemetry(TelemetrySpec(host_url=node_exporter, interval_s=0.5))
        stop = asyncio.Event()
        task = asyncio.create_task(t.run(stop))
        await asyncio.sleep(1.6)
        loop = subprocess.Popen(BUSY)
        try:
            a, ticks0 = time.perf_counter(), _ticks(loop.pid)
            await asyncio.sleep(3.5)
            b, ticks1 = time.perf_counter(), _ticks(loop.pid)
        finally:
            loop.kill()
            loop.wait()
        await asyncio.sleep(0.6)
        stop.set()
        await task
        return t, a, b, (ticks1 - ticks0) / procfs.CLK_TCK / (b - a)
    cpu0 = procfs.read_cpu()
    t, a, b, loop_cores = asyncio.run(watch())
    cpu1 = procfs.read_cpu()
    assert t.notes == [] and t.meta["host"]["cpus"] == cpu0.cpus
    host = [s for s in t.samples if s["source"] == "host"]
    assert len(host) >= 8
    during = tm.host_use(t.samples, a, b)
    # the loop ran on this machine: the exporter saw at least its core busy, in user mode
    assert loop_cores > 0.05, loop_cores          # however busy the machine, it ran
    assert during.busy_cores >= 0.8 * loop_cores, (during, loop_cores)
    assert during.modes["user"] >= 0.6 * loop_cores, during.modes
    assert during.busy_cores <= during.cpus + 0.05
    # and it reads the kernel's own counters: over the whole watch, as /proc/stat says
    whole = tm.host_use(t.samples, host[0]["t"], host[-1]["t"])
    proc_busy = (cpu1.busy - cpu0.busy) / (cpu1.total - cpu0.total) * cpu0.cpus
    assert abs(whole.busy_cores - proc_busy) <= 0.35, (whole.busy_cores, proc_busy)
    assert whole.mem_total_bytes == procfs.read_meminfo()["MemTotal"]
    # with a core and a half to spare before the loop, the loop's core shows on top of the
    # baseline (on a machine others keep busy the baseline moves by more than a core: then the
    # checks above, against the loop's own CPU time, are the ones that hold)
    before = tm.host_use(t.samples, host[0]["t"], a)
    if before.busy_cores <= before.cpus - 1.5:
        assert during.busy_cores >= before.busy_cores + 0.5 * loop_cores, (before, during)


# -- a DCGM exporter's page, served by a test server --------------------------------------------

def _line_at(ts: list[float], vs: list[float], t: float) -> float:
    """A counter at t, by hand: on the line through the two samples around t (or the first or
    last two, just outside them)."""
    i = next((k for k in range(1, len(ts)) if ts[k] >= t), len(ts) - 1)
    i = max(i, 1)
    return vs[i - 1] + (vs[i] - vs[i - 1]) * (t - ts[i - 1]) / (ts[i] - ts[i - 1])


def _hand_tokens(rows: list[dict]) -> int:
    """The output tokens of the run's successful replies, as requests.jsonl has them."""
    return sum(r["output_tokens"] for r in rows if r.get("ok") and r.get("output_tokens"))


@pytest.mark.parametrize("counters", [True, False], ids=["energy-counter", "power-integrated"])
def test_energy_per_token_from_a_dcgm_exposition_equals_the_hand_computation(
        mock_factory, tmp_path, counters):
    m = mock_factory(ttft_ms=20, itl_ms=5, parallel=8)
    with Dcgm(counters=counters) as dcgm:
        r = llmbench.run(url=m.url + "/v1", model="mock", duration="2.5s", concurrency=4,
                         output_tokens=20, prompt_tokens=16, gpu_metrics=dcgm.url,
                         server_pid="off", out=tmp_path)
    run = run_json(r)
    tel = run["telemetry"]
    g = tel["window"]["gpu"]
    rows = records(r)
    start, end = tel["window"]["start"], tel["window"]["end"]
    assert start == run["t0_perf"] and end == max(x["done"] for x in rows)
    tokens = _hand_tokens(rows)
    assert tokens == 20 * sum(1 for x in rows if x.get("ok")) > 0
    # by hand, from the pages as llmbench recorded them (telemetry.jsonl): the energy at the
    # window's ends, read off the samples around each end (the counters' sum, else the power
    # integrated), over the tokens requests.jsonl holds
    gpu_rows = [json.loads(x) for x in (Path(r.path) / "telemetry.jsonl").read_text().splitlines()]
    gpu_rows = [x for x in gpu_rows if x["source"] == "gpu"]
    assert len(gpu_rows) >= 2 and gpu_rows[0]["t"] <= start + 0.5 and gpu_rows[-1]["t"] >= end
    ts = [x["t"] for x in gpu_rows]
    if counters:
        es = [sum(gpu["energy_mj"] for gpu in x["gpus"]) / 1000 for x in gpu_rows]
        joules = _line_at(ts, es, end) - _line_at(ts, es, start)
    else:
        joules = sum(sum(gpu["power_w"] for gpu in x["gpus"]) for x in gpu_rows[:1]) * (end - start)
    assert g["energy_source"] == ("counter" if counters else "power")
    assert g["energy_j"] == pytest.approx(joules, rel=1e-9)
    assert g["output_tokens"] == pytest.approx(tokens, rel=1e-9)
    assert g["j_per_token"] == pytest.approx(joules / tokens, rel=1e-9)
    assert g["tokens_per_j"] == pytest.approx(tokens / joules, rel=1e-9)
    # and that is what the GPUs drew: 500 W, within the few milliseconds a scrape's stamp may
    # be off on a busy machine
    assert g["power_w_mean"] == pytest.approx(500.0, rel=0.02)
    assert g["j_per_token"] == pytest.approx(500.0 * (end - start) / tokens, rel=0.02)
    assert g["count"] == 2 and g["util_pct_mean"] == pytest.approx(90.0)
    assert g["fb_used_mib_max"] == 50000 and g["fb_total_mib"] == 92136
    server = run["server"]
    assert server["gpus"]["count"] == 2 and server["gpus"]["name"] == "NVIDIA L40S"
    assert server["gpus"]["driver"] == "580.126.09" and server["gpus"]["via"] == "dcgm"
    lines = (Path(r.path) / "telemetry.jsonl").read_text().splitlines()
    assert sum(json.loads(x)["source"] == "gpu" for x in lines) >= 2
    # the result contract, typed: what the Python API hands back
    assert r.findings.telemetry.gpu.j_per_token == g["j_per_token"] and r.findings.server.gpus["count"] == 2


def test_a_ramp_step_has_its_energy_and_the_verdict_says_it(mock_factory, tmp_path):
    m = mock_factory(ttft_ms=20, itl_ms=5, parallel=8)
    with Dcgm(xid=79) as dcgm:
        r = llmbench.ramp(url=m.url + "/v1", model="mock", users="1,2", ramp_in="0.3s",
                          hold="2s", think="0", turns=1, prompt_tokens=16, output_tokens=10,
                          threshold="ttft.p95<=5s", generator_lag_limit="2000ms",
                          gpu_metrics=dcgm.url, server_pid="off", out=tmp_path)
    run = run_json(r)
    for st in run["steps"]:
        g = st["telemetry"]["gpu"]
        window = st["hold_end"] - st["hold_start"]
        assert g["energy_source"] == "counter"
        assert g["energy_j"] == pytest.approx(500.0 * window, rel=0.02)
        assert g["j_per_token"] == pytest.approx(g["energy_j"] / g["output_tokens"], rel=1e-9)
        assert g["xid"] == [{"gpu": "1", "code": 79}]
    assert r.steps[0].telemetry.gpu.energy_source == "counter"
    assert run["verdict"]["kind"] == "held"
    assert any(line.startswith("Energy at 2 users: ") and "J per output token" in line
               for line in run["verdict"]["evidence"]), run["verdict"]["evidence"]


def test_with_no_gpu_and_auto_only_one_note_in_run_json(mock_factory, tmp_path, capfd):
    from llmbench.servers import gpu
    try:
        gpu.open_local("auto").close()
        has_gpu = True
    except gpu.GpuUnavailable:
        has_gpu = False
    m = mock_factory(ttft_ms=5, itl_ms=1)
    r = llmbench.run(url=m.url + "/v1", model="mock", requests=4, output_tokens=4,
                     prompt_tokens=8, out=tmp_path, progress=True)   # --gpu-metrics auto: the default
    out = capfd.readouterr()
    run = run_json(r)
    notes = run["telemetry"]["notes"] + run["telemetry"]["quiet_notes"]
    gpu_notes = [n for n in notes if "gpu" in n.lower()]
    if has_gpu:                  # a machine with a GPU: auto read it
        assert gpu_notes == [] and run["telemetry"]["window"]["gpu"]["count"] >= 1
        return
    assert len(gpu_notes) == 1 and gpu_notes[0].startswith("--gpu-metrics auto: no GPU read")
    assert run["telemetry"]["notes"] == []                    # nothing to print
    printed = out.out + out.err
    for word in ("--gpu-metrics", "GPU", "nvml", "pynvml", "amdsmi"):
        assert word not in printed, (word, printed)


# -- processes on this machine ---------------------------------------------------------------------

def test_a_given_pid_s_cpu_agrees_with_proc_s_own_accounting(mock_factory, tmp_path):
    loop = subprocess.Popen(BUSY)
    watch = ProcWatch(loop.pid)
    try:
        m = mock_factory(ttft_ms=10, itl_ms=5, parallel=4)
        r = llmbench.run(url=m.url + "/v1", model="mock", duration="3s", concurrency=2,
                         output_tokens=16, prompt_tokens=8, server_pid=loop.pid, out=tmp_path)
        time.sleep(0.3)
    finally:
        watch.stop()
        loop.kill()
        loop.wait()
    run = run_json(r)
    w = run["telemetry"]["window"]
    srv = w["server"]
    assert srv["pid"] == loop.pid and run["server"]["pid"] == loop.pid
    assert run["telemetry"]["sources"]["local"]["found_by"] == "--server-pid"
    proc_cpu = watch.cpu_between(w["start"], w["end"])
    assert proc_cpu > 0.1
    assert srv["cpu_s"] == pytest.approx(proc_cpu, rel=0.05), (srv, proc_cpu)
    assert srv["cores"] == pytest.approx(proc_cpu / (w["end"] - w["start"]), rel=0.05)
    assert srv["threads_max"] == 1 and srv["rss_bytes_max"] > 1 << 20
    # the machine's figures and llmbench's own are there too, on the same footing
    assert w["machine"]["cpus"] == os.cpu_count()
    assert w["machine"]["busy_cores"] >= srv["cores"] * 0.9
    assert w["llmbench"]["pid"] == os.getpid()


def test_the_server_listening_on_a_loopback_port_is_found_and_named(tmp_path):
    from llmbench.mock_server import MockConfig
    from llmbench.mock_server.server import MockProcess
    with MockProcess(MockConfig(ttft_ms=5, itl_ms=2, parallel=3)) as mp:
        r = llmbench.run(url=mp.url + "/v1", model="mock", requests=6, concurrency=2,
                         output_tokens=8, prompt_tokens=8, out=tmp_path)
        pid = mp.proc.pid
    run = run_json(r)
    assert run["server"]["pid"] == pid and run["server"]["kind"] == "mock"
    assert run["server"]["parallel"] == {"slots": 3}
    assert run["telemetry"]["sources"]["local"]["found_by"].startswith("port ")
    srv = run["telemetry"]["window"]["server"]
    # (its few milliseconds of CPU may round to no clock tick: present, not necessarily > 0)
    assert srv["pid"] == pid and srv["cpu_s"] >= 0 and srv["covered_s"] > 0


def test_a_probe_samples_the_direct_backend_not_the_router(mock_factory, tmp_path):
    """probe's telemetry is the backend's machine (where the compute is): the process listening
    on --direct's port, and what that server is; the router (another server) is not asked."""
    from llmbench.mock_server import MockConfig
    from llmbench.mock_server.server import MockProcess
    router = mock_factory(ttft_ms=5, itl_ms=1, parallel=2)
    with MockProcess(MockConfig(ttft_ms=5, itl_ms=1, parallel=3)) as backend:
        r = llmbench.probe(router=router.url + "/v1", direct=backend.url + "/v1", model="mock",
                           users="1", slice_s="0.5s", rounds=1, turns=1, prompt_tokens=8,
                           output_tokens=4, out=tmp_path)
        pid = backend.proc.pid
    run = run_json(r)
    port = int(backend.url.rsplit(":", 1)[1])
    assert run["telemetry"]["sources"]["local"]["found_by"] == f"port {port}"
    assert run["server"]["pid"] == pid and run["server"]["parallel"] == {"slots": 3}
    assert run["telemetry"]["window"]["server"]["pid"] == pid


def test_a_server_pid_that_exits_mid_run_is_a_note_not_a_traceback(mock_factory, tmp_path,
                                                                   capfd):
    short = subprocess.Popen(BUSY)

    def kill_once_sampled() -> None:
        # the process exits once llmbench has sampled it (not after a fixed sleep: a busy
        # machine starts a run slower)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for f in tmp_path.glob("*/telemetry.jsonl"):
                if '"server"' in f.read_text():
                    short.kill()
                    return
            time.sleep(0.05)
        short.kill()
    killer = threading.Thread(target=kill_once_sampled, daemon=True)
    killer.start()
    try:
        m = mock_factory(ttft_ms=5, itl_ms=2)
        r = llmbench.run(url=m.url + "/v1", model="mock", duration="3s", concurrency=1,
                         output_tokens=8, prompt_tokens=8, server_pid=short.pid, out=tmp_path,
                         progress=True)
    finally:
        killer.join(65)
        short.wait(10)
    out = capfd.readouterr()
    run = run_json(r)
    notes = run["telemetry"]["notes"]
    exited = [n for n in notes if f"process {short.pid} exited" in n]
    assert len(exited) == 1, notes
    printed = [ln for ln in (out.out + out.err).splitlines() if f"{short.pid} exited" in ln]
    assert len(printed) == 1 and printed[0].startswith("note: telemetry: the server's process")
    assert "Traceback" not in out.out + out.err
    assert run["status"] == "complete" and run["summary"]["failed"] == 0


def test_a_pid_that_does_not_exist_is_one_line(mock_factory, tmp_path, capfd):
    m = mock_factory(ttft_ms=5, itl_ms=2)
    r = llmbench.run(url=m.url + "/v1", model="mock", requests=2, output_tokens=4,
                     prompt_tokens=8, server_pid=2**22 + 12345, out=tmp_path, progress=True)
    out = capfd.readouterr()
    notes = run_json(r)["telemetry"]["notes"]
    assert notes == [f"--server-pid {2**22 + 12345}: no such process on this machine; only the "
                     "machine is sampled"]
    assert "Traceback" not in out.out + out.err


# -- exporters that fail -----------------------------------------------------------------------------

def _html_server() -> RawServer:
    page = b"<!doctype html><html><body>Grafana</body></html>"
    return RawServer(lambda i: [(0, b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\n"
                                 b"content-length: %d\r\nconnection: close\r\n\r\n%s"
                                 % (len(page), page))])


def _dripping_server() -> RawServer:
    drip = [(0.0, http_head(content_type="text/plain", chunked=True))] + \
        [(0.25, chunk(b"# still thinking\n"))] * 400
    return RawServer(lambda i: drip)


def test_exporters_that_drip_answer_html_or_do_not_answer_cost_one_line_each(
        mock_factory, tmp_path, capfd):
    m = mock_factory(ttft_ms=5, itl_ms=2)
    closed = free_port()
    t = time.monotonic()
    with _dripping_server() as drip, _html_server() as page:
        r1 = llmbench.run(url=m.url + "/v1", model="mock", duration="2s", concurrency=1,
                          output_tokens=4, prompt_tokens=8, host_metrics=drip.url + "/metrics",
                          gpu_metrics=page.url + "/metrics", out=tmp_path / "a", progress=True)
    r2 = llmbench.run(url=m.url + "/v1", model="mock", duration="1s", concurrency=1,
                      output_tokens=4, prompt_tokens=8,
                      host_metrics=f"http://me:s3cretpw@127.0.0.1:{closed}",
                      out=tmp_path / "b", progress=True)
    took = time.monotonic() - t
    out = capfd.readouterr()
    printed = out.out + out.err
    assert "Traceback" not in printed
    # the drip: the probes' 3-second deadline for the whole answer, then one line
    host_lines = [ln for ln in printed.splitlines() if "--host-metrics" in ln]
    assert host_lines == [
        f"note: --host-metrics {drip.url}/metrics did not answer (no whole answer within 3 s); "
        "not scraped",
        f"note: --host-metrics http://127.0.0.1:{closed}/metrics did not answer "
        "(ConnectionRefusedError); not scraped"], host_lines
    gpu_lines = [ln for ln in printed.splitlines() if "--gpu-metrics" in ln]
    assert gpu_lines == [f"note: --gpu-metrics {page.url}/metrics: not a DCGM exporter's page "
                         "(none of DCGM exporter's GPU fields on the page); point it at the "
                         "exporter's /metrics"], gpu_lines
    # an exporter's password is never printed nor written
    assert "s3cretpw" not in printed
    assert "s3cretpw" not in (Path(r2.path) / "run.json").read_text()
    for r in (r1, r2):
        run = run_json(r)
        assert run["status"] == "complete" and run["summary"]["failed"] == 0
        assert "host" not in (run["telemetry"]["window"] or {})
    # never a stall: each run took its duration plus start-up, not the drip's 100 s
    assert took < 40, took
