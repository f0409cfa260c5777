"""What the server's machine did during the run, sampled about once a second beside the server
probe: its process tree on this machine (from /proc), the machine's own CPU and memory, a
Prometheus node exporter on another machine (``--host-metrics``), and its GPUs (a DCGM
exporter, local NVML or amdsmi: ``--gpu-metrics``); and once, before the load, what the
server is (llmbench/servers/identity.py).

Every sample is one JSON line in the run folder's ``telemetry.jsonl`` (``source``: local, host
or gpu), with counters left as counters: the rates per step and per run are pure functions of
these samples (llmbench/analysis/telemetry.py). The scrapes go, and give up, the way the
server probes do (servers/scrape.py): a source that does not answer, answers something else, or
fails five times in a row stops with one note, and the run goes on. Reading /proc and the GPU
libraries blocks, so it is done in a thread, never on the event loop the requests run on.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlsplit

from llmbench.servers import gpu as gpu_mod
from llmbench.servers import hostmetrics, identity as identity_mod, procfs

GIVE_UP_AFTER = 5          # failures in a row, as the server probe
RESCAN_S = 5.0             # how often the whole of /proc is read for the trees' new children
GPU_SOURCES = ("auto", "nvml", "amd", "off")


@dataclass
class TelemetrySpec:
    """What to sample, as the command decided it from the options."""

    server_pid: int | None = None          # --server-pid, or the process sweep --serve started
    pid_from: str | None = None            # "--server-pid", "--serve", "port 8080"
    find_port: int | None = None           # a loopback target's port: find who listens on it
    local: bool = False                    # the server is on this machine: sample /proc
    host_url: str | None = None            # --host-metrics URL (a node exporter's /metrics)
    gpu: str = "off"                       # a DCGM exporter's URL | nvml | amd | auto | off
    interval_s: float = 1.0
    # identity: the server's root, its headers (no content-type) and the API's models path
    root: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    models_path: str = "/v1/models"
    model: str | None = None
    net: Any = None                        # netconfig.Net of the target (None: resolved)

    def wanted(self) -> bool:
        return bool(self.local or self.host_url or self.gpu != "off" or self.root)

    def needs_aiohttp(self) -> bool:
        """Whether it scrapes anything over https:// (aiohttp is loaded before the loop then:
        http:// goes by servers/plainget.py)."""
        return any(u and not u.startswith("http://") for u in (
            self.host_url, self.root, self.gpu if self.gpu.startswith("https://") else None))


@dataclass
class Note:
    """One telemetry note: its text, and whether the terminal shows it."""
    text: str
    printed: bool = True                   # False: run.json only (no GPU under auto)


@dataclass
class Telemetry:
    """Runs the samplers of one spec for the length of a run; afterwards ``samples``,
    ``notes``, ``identity`` and ``meta`` hold what was seen."""

    spec: TelemetrySpec
    samples: list[dict[str, Any]] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    pages: dict[str, Any] = field(default_factory=dict)     # the identity the server's pages give
    process: dict[str, Any] = field(default_factory=dict)   # ... and its process on this machine
    meta: dict[str, Any] = field(default_factory=dict)
    _fh: Any = None
    _t0: float = 0.0
    clock: Callable[[], float] = time.perf_counter
    _prepared: bool = False
    _sampler: "LocalSampler | None" = None
    _local_ok: bool = False

    def note(self, text: str, printed: bool = True) -> None:
        self.notes.append(Note(text, printed))

    @property
    def identity(self) -> dict[str, Any]:
        """What the server is, as far as its pages and its process say."""
        return identity_mod.merge(self.pages, self.process)

    # -- the run --------------------------------------------------------------------------
    async def prepare(self) -> None:
        """What is done once, before the load: find the server's process (a scan of every
        process's open sockets, tenths of a second) and ask what the server is, so neither
        shares the event loop or the machine with the first requests."""
        if self._prepared:
            return
        self._prepared = True
        jobs = []
        if self.spec.local:
            self._sampler = LocalSampler(self.spec, self)

            async def find() -> None:
                self._local_ok = await asyncio.to_thread(self._sampler.start)
            jobs.append(find())
        if self.spec.root:
            jobs.append(self._identity())
        await asyncio.gather(*jobs)

    async def run(self, stop: asyncio.Event, out: Path | None = None) -> None:
        await self.prepare()
        self._t0 = self.clock()
        self._fh = _open(out, self)
        tasks = []
        try:
            if self.spec.local:
                tasks.append(self._local(stop))
            if self.spec.host_url:
                tasks.append(self._scraped(stop, "host", self.spec.host_url, "--host-metrics",
                                           hostmetrics.extract_node))
            gpu = self.spec.gpu
            if gpu.startswith(("http://", "https://")):
                tasks.append(self._scraped(stop, "gpu", gpu, "--gpu-metrics", _dcgm_sample))
            elif gpu != "off":
                tasks.append(self._local_gpu(stop, gpu))
            await asyncio.gather(*tasks)
        finally:
            if self._fh is not None:
                with suppress(OSError):
                    self._fh.close()
                self._fh = None

    def _emit(self, sample: dict[str, Any]) -> None:
        self.samples.append(sample)
        if self._fh is not None:
            try:
                self._fh.write(json.dumps(sample) + "\n")
                self._fh.flush()
            except OSError as exc:          # the disk: keep sampling, in memory only
                self.note(f"telemetry: cannot write telemetry.jsonl ({exc.strerror or exc}); "
                          "samples kept in memory")
                with suppress(OSError):
                    self._fh.close()
                self._fh = None

    async def _every(self, stop: asyncio.Event, t0: float) -> bool:
        """Wait for the next tick; False once ``stop`` is set."""
        try:
            await asyncio.wait_for(stop.wait(),
                                   max(self.spec.interval_s - (self.clock() - t0), 0.05))
            return False
        except asyncio.TimeoutError:
            return True

    # -- this machine ----------------------------------------------------------------------
    async def _local(self, stop: asyncio.Event) -> None:
        sampler = self._sampler
        if sampler is None or not self._local_ok:
            return
        self.meta["local"] = sampler.describe()
        while True:
            t0 = self.clock()
            sample = await asyncio.to_thread(sampler.sample)
            self._emit(sample)
            if stop.is_set():
                break
            if not await self._every(stop, t0):
                # one last reading as the run ends: the last window is covered to its end
                self._emit(await asyncio.to_thread(sampler.sample))
                break
        self.meta["local"] = sampler.describe()

    # -- scraped pages (node exporter, DCGM exporter) -------------------------------------
    async def _scraped(self, stop: asyncio.Event, source: str, url: str, flag: str,
                       extract: Callable[[str], dict[str, Any]]) -> None:
        from llmbench.servers.scrape import ServerProbe, errors
        from llmbench.client.target import redact_query, strip_userinfo
        root, path = split_url(url)
        probe = ServerProbe(root, "off", net=None if self.spec.net is None or not _same_host(
            root, self.spec.root) else self.spec.net)
        # what notes and run.json say: never a password or a token in the URL
        shown = redact_query(strip_userinfo(root + path))
        failures = 0
        first = True
        last = False
        async with probe.session() as session:
            while True:
                t0 = self.clock()
                try:
                    status, text = await probe._get(session, path)
                    # the exporter read its values between the request and the answer: the
                    # middle is the best stamp (a new connection's set-up is not a shift)
                    stamp = (t0 + self.clock()) / 2
                    if status != 200:
                        raise _Bad(f"answered HTTP {status}")
                    got = extract(text)
                except (hostmetrics.NotNodeExporter, gpu_mod.NotDcgm) as exc:
                    what = "a node exporter" if source == "host" else "a DCGM exporter"
                    self.note(f"{flag} {shown}: not {what}'s page ({exc}); point it at the "
                              "exporter's /metrics")
                    return
                except (_Bad, *errors()) as exc:
                    failures += 1
                    why = ("no whole answer within 3 s" if isinstance(exc, asyncio.TimeoutError)
                           else type(exc).__name__)
                    # "answered HTTP 502 3 times in a row", "did not answer (X), 3 times ..."
                    what, sep = (str(exc), " ") if isinstance(exc, _Bad) else (
                        f"did not answer ({why})", ", ")
                    if first or failures >= GIVE_UP_AFTER:
                        self.note(f"{flag} {shown} {what}" + (
                            "; not scraped" if first else f"{sep}{failures} times in a row; "
                            "stopped scraping it"))
                        return
                    got = None
                if got is not None:
                    failures = 0
                    if first and source == "gpu":
                        self.meta["gpu"] = {"via": "dcgm", "url": shown,
                                            "gpus": [_static(g) for g in got["gpus"]]}
                    if first and source == "host":
                        self.meta["host"] = {"url": shown, "cpus": got.get("cpus"),
                                             "mem_total_bytes": got.get("mem_total_bytes")}
                    first = False
                    self._emit({"source": source, "t": stamp, "wall": time.time(), **got})
                if last:
                    break
                # one more scrape once the run ends: the last window is covered to its end
                last = stop.is_set() or not await self._every(stop, t0)

    # -- local GPU libraries ---------------------------------------------------------------
    async def _local_gpu(self, stop: asyncio.Event, kind: str) -> None:
        try:
            reader = await asyncio.to_thread(gpu_mod.open_local, kind)
        except gpu_mod.GpuUnavailable as exc:
            if kind == "auto":
                # no GPU here is the common case: said in run.json only, nothing printed
                self.note(f"--gpu-metrics auto: no GPU read ({exc})", printed=False)
            else:
                self.note(f"--gpu-metrics {kind}: {exc}")
            return
        self.meta["gpu"] = {"via": reader.via, "gpus": [_static(g) for g in reader.static]}
        failures = 0
        last = False
        try:
            while True:
                t0 = self.clock()
                try:
                    gpus = await asyncio.to_thread(reader.read)
                    failures = 0
                    self._emit({"source": "gpu", "t": t0, "wall": time.time(),
                                "via": reader.via, "gpus": gpus})
                except Exception as exc:        # noqa: BLE001 - a driver error: noted
                    failures += 1
                    if failures >= GIVE_UP_AFTER:
                        self.note(f"--gpu-metrics {kind}: {reader.via} failed {failures} times "
                                  f"in a row ({type(exc).__name__}); stopped reading it")
                        return
                if last:
                    break
                last = stop.is_set() or not await self._every(stop, t0)
        finally:
            await asyncio.to_thread(reader.close)

    # -- what the server is ----------------------------------------------------------------
    async def _identity(self) -> None:
        from llmbench.servers.scrape import ServerProbe, errors
        spec = self.spec
        probe = ServerProbe(spec.root, "off", headers=dict(spec.headers), net=spec.net)
        try:
            async with probe.session() as session:
                docs = await identity_mod.ask(lambda p: probe._get(session, p), spec.models_path)
        except errors():
            docs = {}
        self.pages = identity_mod.from_docs(docs, spec.model, spec.models_path)


class _Bad(Exception):
    pass


def _dcgm_sample(text: str) -> dict[str, Any]:
    return {"via": "dcgm", "gpus": gpu_mod.extract_dcgm(text)}


def _static(g: dict[str, Any]) -> dict[str, Any]:
    """A GPU's identity, from one reading: which it is, and its memory."""
    out = {k: g[k] for k in ("gpu", "uuid", "name", "driver") if g.get(k)}
    used, free = g.get("fb_used_mib"), g.get("fb_free_mib")
    if used is not None and free is not None:
        out["memory_mib"] = round(used + free)
    return out


def split_url(url: str) -> tuple[str, str]:
    """'http://h:9100' -> ('http://h:9100', '/metrics'); a path given is kept (and its query)."""
    parts = urlsplit(url)
    path = parts.path or "/metrics"
    if parts.query:
        path += "?" + parts.query
    return f"{parts.scheme}://{parts.netloc}", path


def _same_host(a: str | None, b: str | None) -> bool:
    return bool(a and b) and urlsplit(a).netloc == urlsplit(b or "").netloc


def _open(out: Path | None, t: Telemetry) -> Any:
    if out is None:
        return None
    try:
        return open(out, "a", encoding="utf-8")
    except OSError as exc:
        t.note(f"telemetry: cannot write {out} ({exc.strerror or exc}); samples kept in memory")
        return None


# -- this machine's /proc ------------------------------------------------------------------------

@dataclass
class LocalSampler:
    """The server's process tree, llmbench's own, and the machine, from /proc. A server that
    exits is noted once; found by its port, whoever listens there next is sampled (a restart)."""

    spec: TelemetrySpec
    owner: Telemetry
    proc: Path = procfs.PROC
    pid: int | None = None
    pid_from: str | None = None
    own_pid: int = field(default_factory=os.getpid)
    _server_cpu: procfs.TreeCpu = field(default_factory=procfs.TreeCpu)
    _own_cpu: procfs.TreeCpu = field(default_factory=procfs.TreeCpu)
    _server_tree: list[int] = field(default_factory=list)
    _own_tree: list[int] = field(default_factory=list)
    _scanned: float = float("-inf")
    _lost_at: float | None = None
    _refind_at: float = 0.0
    affinity: int | None = None

    def start(self) -> bool:
        """Find the server's process; False (with a note) when /proc cannot be read at all."""
        if procfs.read_cpu(self.proc) is None:
            self.owner.note("telemetry: /proc/stat cannot be read here (not Linux?); this "
                            "machine is not sampled")
            return False
        spec = self.spec
        if spec.server_pid is not None:
            st = procfs.read_stat(spec.server_pid, self.proc)
            if st is None or st.state in ("Z", "X"):
                self.owner.note(f"{spec.pid_from or '--server-pid'} {spec.server_pid}: no such "
                                "process on this machine; only the machine is sampled")
            else:
                self._adopt(spec.server_pid, spec.pid_from or "--server-pid")
        elif spec.find_port is not None:
            found = procfs.find_listener(spec.find_port, self.proc)
            if found.pid is None:
                self.owner.note(f"telemetry: {found.why}; the server's process is not sampled "
                                "(give --server-pid)")
            else:
                self._adopt(found.pid, f"port {spec.find_port}")
        return True

    def _adopt(self, pid: int, how: str) -> None:
        if pid == self.own_pid:
            self.owner.note("telemetry: the server answering is llmbench's own process (the "
                            "built-in mock); its CPU is counted as llmbench's", printed=False)
            return
        self.pid, self.pid_from = pid, how
        self._server_cpu = procfs.TreeCpu()
        self._scanned = float("-inf")
        self.affinity = procfs.cpus_of(pid)
        argv = procfs.read_cmdline(pid, self.proc)
        env = procfs.read_environ(pid, identity_mod.ENV_NAMES, self.proc)
        self.owner.process = identity_mod.process_info(argv, env, pid)

    def describe(self) -> dict[str, Any]:
        cpu = procfs.read_cpu(self.proc)
        mem = procfs.read_meminfo(self.proc)
        return {"server_pid": self.pid, "found_by": self.pid_from, "llmbench_pid": self.own_pid,
                "cpus": cpu.cpus if cpu else os.cpu_count(),
                "server_cpus": self.affinity, "mem_total_bytes": mem.get("MemTotal"),
                "clock_ticks": procfs.CLK_TCK}

    def _tree_use(self, tree: list[int], acc: procfs.TreeCpu, uptime: float | None
                  ) -> tuple[list[int], dict[str, Any] | None]:
        # a zombie has exited (its parent has not reaped it yet): it uses nothing any more
        stats = [s for s in (procfs.read_stat(p, self.proc) for p in tree)
                 if s is not None and s.state not in ("Z", "X")]
        if not stats:
            return [], None
        ticks = acc.update(stats, uptime)
        return [s.pid for s in stats], {
            "pid": tree[0], "pids": len(stats), "cpu_s": ticks / procfs.CLK_TCK,
            "rss_bytes": sum(s.rss_pages for s in stats) * procfs.PAGE_BYTES,
            "threads": sum(s.threads for s in stats)}

    def sample(self) -> dict[str, Any]:
        t = self.owner.clock()
        out: dict[str, Any] = {"source": "local", "t": t, "wall": time.time()}
        uptime = procfs.read_uptime(self.proc)
        if t - self._scanned >= RESCAN_S or (self.pid is not None and not self._server_tree):
            stats = procfs.parents(self.proc)
            self._scanned = t
            self._own_tree = procfs.tree_of(self.own_pid, stats)
            if self.pid is not None:
                tree = procfs.tree_of(self.pid, stats)
                # llmbench inside the server's tree (it started it: sweep --serve) is not the server
                self._server_tree = [p for p in tree if p != self.own_pid]
        if self.pid is not None:
            self._server_tree, use = self._tree_use(self._server_tree, self._server_cpu, uptime)
            if use is not None and self._server_tree and self._server_tree[0] == self.pid:
                out["server"] = use
            else:
                self._lost(t)
        elif self._lost_at is not None:
            self._refind(t)
        self._own_tree, own = self._tree_use(self._own_tree or [self.own_pid], self._own_cpu,
                                             uptime)
        if own is not None:
            out["llmbench"] = own
        cpu = procfs.read_cpu(self.proc)
        if cpu is not None:
            tick = float(procfs.CLK_TCK)
            out["machine"] = {"cpus": cpu.cpus, "busy_s": cpu.busy / tick,
                              "idle_s": cpu.idle / tick, "steal_s": cpu.steal / tick,
                              "total_s": cpu.total / tick}
            mem = procfs.read_meminfo(self.proc)
            if "MemTotal" in mem:
                out["machine"]["mem_total_bytes"] = mem["MemTotal"]
            if "MemAvailable" in mem:
                out["machine"]["mem_available_bytes"] = mem["MemAvailable"]
        return out

    def _lost(self, t: float) -> None:
        """The server's process has gone: say when, once; look for a successor by port."""
        pid = self.pid
        self.pid = None
        self._server_tree = []
        self._lost_at = t
        self._refind_at = t + 1.0
        into = t - self.owner._t0
        self.owner.note(f"telemetry: the server's process {pid} exited {into:.1f} s into the "
                        "run; its samples stop there")

    def _refind(self, t: float) -> None:
        if self.spec.find_port is None or t < self._refind_at:
            return
        self._refind_at = t + RESCAN_S
        found = procfs.find_listener(self.spec.find_port, self.proc)
        if found.pid is not None and found.pid != self.own_pid:
            self._adopt(found.pid, f"port {self.spec.find_port}")
            self.owner.note(f"telemetry: process {found.pid} listens on port "
                            f"{self.spec.find_port} since about {t - self.owner._t0:.0f} s into "
                            "the run; sampled from then on")
            self._lost_at = None


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 and localhost: a server on this machine."""
    import ipaddress
    h = host.strip("[]").lower()
    if h in ("localhost", "localhost.localdomain") or h.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False
