"""Run the mock: in the foreground (``llmbench mock``), in a thread (tests), or in a child
process (``llmbench ramp`` with no --url, so the mock never shares the load generator's GIL).

``--workers N`` (Linux): a supervisor process starts N worker processes that listen on the same
port(s) with SO_REUSEPORT, each with its own event loop and engine, so the mock's own CPU ceiling
grows with the cores. The kernel hands each new connection to one worker (by a hash of its
addresses); a kept-alive connection stays with its worker. N engines are N replicas behind one
port: each has its own slots, queue, KV cache and prefix cache. Workers reach each other
through ``Peers`` (peers.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from contextlib import suppress
from dataclasses import asdict
from typing import Any

from aiohttp import web

from .arrival import stamp_arrivals, stamping_listener
from .engine import Engine, MockConfig, PROFILES
from .recorder import Recorder
from .peers import Peers
from .routes import Routes

REUSEPORT = hasattr(socket, "SO_REUSEPORT") and sys.platform.startswith("linux")
# the folder that holds the llmbench package: a child process (``python -m llmbench.mock_server``)
# imports this very copy of it, installed or not
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def make_config(profile: str | None = None, _learned: dict[str, Any] | None = None,
                **overrides: Any) -> MockConfig:
    """Preset, then learned settings (a fitted or saved profile), then explicit overrides."""
    cfg = MockConfig()
    if profile:
        if profile not in PROFILES:
            raise ValueError(f"unknown profile {profile!r}; choose one of {', '.join(PROFILES)} "
                             "or a profile file (.json/.toml)")
        cfg.update(PROFILES[profile])
    if _learned:
        cfg.update(_learned)
    cfg.update({k: v for k, v in overrides.items() if v is not None})
    return cfg


def bind_consecutive(host: str, port: int, count: int, reuseport: bool = False,
                     listen: bool = True) -> list[socket.socket]:
    """``count`` sockets on consecutive ports starting at ``port`` (0: any free run), listening
    unless ``listen`` is False (a supervisor's reservation: bound, so the ports stay ours, but
    never handed a connection). ``reuseport``: SO_REUSEPORT, so the workers can share them."""
    for _attempt in range(50):
        socks: list[socket.socket] = []
        try:
            base = port
            for i in range(count):
                s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if reuseport:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
                socks.append(s)
                s.bind((host, base + i if (base or i) else 0))
                if i == 0:
                    base = s.getsockname()[1]
                if listen:
                    s.listen(1024)
                s.setblocking(False)
            return socks
        except OSError:
            for s in socks:
                s.close()
            if port:
                raise
    raise OSError(f"no {count} consecutive free ports on {host}")


class MockCluster:
    """K replicas, each its own engine and port, on the current event loop. As worker ``worker``
    of ``workers`` (``peers_dir`` set), it shares its ports with the other workers."""

    def __init__(self, config: MockConfig, replicas: int = 1, host: str = "127.0.0.1",
                 port: int = 0, record: str | None = None, record_prompts: bool = False,
                 worker: int = 0, workers: int = 1, peers_dir: str | None = None) -> None:
        self.host = host
        self.port = port
        self.worker = worker
        self.recorder = Recorder(record, prompts=record_prompts, worker=worker) if record else None
        self.engines = [Engine(copy.deepcopy(config) if i else config, replica=f"replica-{i}")
                        for i in range(replicas)]
        if worker:
            # jitter and faults independent between workers; worker 0 draws as one process does
            for e in self.engines:
                e.rng = random.Random(f"{config.seed}/worker-{worker}")
        self.peers = Peers(peers_dir, worker, workers) if peers_dir and workers > 1 else None
        self._runners: list[web.AppRunner] = []
        self.ports: list[int] = []

    async def start(self) -> None:
        socks = bind_consecutive(self.host, self.port, len(self.engines),
                                 reuseport=self.peers is not None)
        routes = [Routes(engine, self.recorder, worker=self.worker, peers=self.peers, index=i)
                  for i, engine in enumerate(self.engines)]
        if self.peers is not None:
            runner = web.AppRunner(self.peers.app(routes), access_log=None, handle_signals=False)
            await runner.setup()
            await web.UnixSite(runner, self.peers.path(self.worker)).start()
            self._runners.append(runner)
        for r, sock in zip(routes, socks):
            # a closed connection cancels its request (MockConfig.decode_after_close says why)
            runner = web.AppRunner(r.app(), access_log=None, handle_signals=False,
                                   handler_cancellation=True)
            await runner.setup()
            stamp_arrivals(runner)
            sock = stamping_listener(sock)
            # aiohttp's default backlog (128) re-listens the socket: 256 users connecting at
            # once overflowed it and their SYNs came back a second later (scripts/bench_wire.py)
            site = web.SockSite(runner, sock, backlog=1024)
            await site.start()
            self._runners.append(runner)
            self.ports.append(sock.getsockname()[1])

    async def stop(self) -> None:
        for engine in self.engines:
            engine.stop()
        for runner in self._runners:
            await runner.cleanup()
        if self.recorder is not None:
            self.recorder.close()

    @property
    def urls(self) -> list[str]:
        return urls_for(self.host, self.ports)


def urls_for(host: str, ports: list[int]) -> list[str]:
    host = f"[{host}]" if ":" in host else host
    return [f"http://{host}:{p}" for p in ports]


class MockServer:
    """The mock in a background thread with its own loop: ``with MockServer(cfg) as m: m.url``."""

    def __init__(self, config: MockConfig | None = None, replicas: int = 1,
                 host: str = "127.0.0.1", port: int = 0, record: str | None = None,
                 record_prompts: bool = False) -> None:
        self.config = config or MockConfig()
        self._args = (replicas, host, port, record, record_prompts)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self.cluster: MockCluster | None = None

    def __enter__(self) -> "MockServer":
        self.cluster = MockCluster(self.config, *self._args)
        loop = self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="llmbench-mock", daemon=True)
        self._thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self.cluster.start(), loop).result(30)
        except BaseException:
            with contextlib.suppress(Exception):
                self.__exit__()         # no server: its loop and thread end too
            raise
        return self

    def _run(self) -> None:
        assert self._loop is not None
        self._loop.run_forever()
        self._loop.close()

    def __exit__(self, *exc: object) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed() and self.cluster is not None:
            # the cluster stops in its own loop, then the loop ends (and _run closes it)
            done = asyncio.run_coroutine_threadsafe(self.cluster.stop(), loop)
            try:
                done.result(10)         # a stop that fails says so, as the thread did
            finally:
                loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(10)

    @property
    def urls(self) -> list[str]:
        assert self.cluster is not None
        return self.cluster.urls

    @property
    def url(self) -> str:
        return self.urls[0]

    @property
    def engines(self) -> list[Engine]:
        assert self.cluster is not None
        return self.cluster.engines

    def configure(self, **changes: Any) -> None:
        """Change knobs at run time, from the caller's thread (a bad one raises here)."""
        assert self._loop is not None

        async def apply() -> None:
            for e in self.engines:
                e.config.update(changes)
                e.config_changed()
        asyncio.run_coroutine_threadsafe(apply(), self._loop).result(10)


def _die_with_parent(parent_pid: int):
    """For Popen: the child gets SIGKILL when its parent dies, even by SIGKILL (Linux prctl
    PR_SET_PDEATHSIG), so a killed llmbench never leaves its built-in mock listening. Elsewhere
    the child watches its stdin pipe instead (see ``watch_parent``)."""
    if not sys.platform.startswith("linux"):
        return None

    def preexec() -> None:
        try:
            import ctypes
            libc = ctypes.CDLL(None, use_errno=True)
            # SIGKILL, not SIGTERM: a graceful stop waits for streams in flight (up to a minute),
            # and with the parent gone nobody reads them
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)     # PR_SET_PDEATHSIG = 1
        except (OSError, AttributeError):
            return
        if os.getppid() != parent_pid:                # the parent died before prctl took hold
            os._exit(1)
    return preexec


async def watch_parent(stop: asyncio.Event) -> None:
    """The child's stdin is a pipe from its parent: end of file means the parent is gone."""
    loop = asyncio.get_running_loop()
    try:
        reader = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    except (OSError, ValueError, NotImplementedError):
        return
    with suppress(OSError, ConnectionError):
        while await reader.read(4096):
            pass
    stop.set()
    loop.call_later(3.0, os._exit, 0)    # a graceful stop may wait for streams nobody reads


def _child(config: MockConfig, replicas: int, host: str, port: int, workers: int,
           record: str | None, *more: str) -> list[str]:
    """The command line of a mock in a child process (a worker's adds its own ``more``); it
    says LISTENING and its URLs on stdout, and stops when its stdin closes."""
    return [sys.executable, "-m", "llmbench.mock_server", "--config-json",
            json.dumps(asdict(config)), "--replicas", str(replicas), "--host", host,
            "--port", str(port), "--workers", str(workers), "--announce", "--watch-stdin",
            *more, *(["--record", record] if record else [])]


def _child_env() -> dict[str, str]:
    """This environment, with the folder that holds this llmbench first on the path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = _ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return env


class MockProcess:
    """The mock in a child process; ``url`` once it is listening."""

    def __init__(self, config: MockConfig, replicas: int = 1, host: str = "127.0.0.1",
                 record: str | None = None, workers: int = 1) -> None:
        self.config = config
        self.replicas = replicas
        self.host = host
        self.record = record
        self.workers = workers      # >1: a supervisor (this child) and its worker processes
        self.proc: subprocess.Popen[str] | None = None
        self.urls: list[str] = []

    def __enter__(self) -> "MockProcess":
        cmd = _child(self.config, self.replicas, self.host, 0, self.workers, self.record)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     stdin=subprocess.PIPE, text=True, env=_child_env(),
                                     preexec_fn=_die_with_parent(os.getpid()))
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("LISTENING "):
            self.proc.kill()
            raise RuntimeError("the built-in mock server did not start")
        self.urls = json.loads(line[len("LISTENING "):])
        return self

    @property
    def url(self) -> str:
        return self.urls[0]

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                # a supervisor waits for its workers to flush their logs and exit
                self.proc.wait(5 if self.workers <= 1 else 15)
            except subprocess.TimeoutExpired:
                self.proc.kill()       # its workers die with it (PR_SET_PDEATHSIG)
                self.proc.wait()
            if self.proc.stdin is not None:
                self.proc.stdin.close()


async def serve_forever(config: MockConfig, replicas: int, host: str, port: int,
                        record: str | None, record_prompts: bool, announce: bool,
                        watch_stdin: bool = False, workers: int = 1,
                        worker: int | None = None, peers_dir: str | None = None) -> None:
    """Serve until SIGINT/SIGTERM (or the parent's end, with ``watch_stdin``). ``workers`` > 1
    and no ``worker``: supervise that many worker processes (``supervise``)."""
    if workers > 1 and worker is None:
        await supervise(config, workers, replicas, host, port, record, record_prompts, announce,
                        watch_stdin)
        return
    cluster = MockCluster(config, replicas, host, port, record, record_prompts,
                          worker=worker or 0, workers=workers, peers_dir=peers_dir)
    await cluster.start()
    if announce:
        print("LISTENING " + json.dumps(cluster.urls), flush=True)
    else:
        for engine, url in zip(cluster.engines, cluster.urls):
            print(f"llmbench mock {engine.replica} on {url}  (OpenAI: {url}/v1, Ollama: {url})",
                  flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)   # stop cleanly: the send-time log is flushed
    watcher = loop.create_task(watch_parent(stop)) if watch_stdin else None
    try:
        await stop.wait()
    finally:
        if watcher is not None:
            watcher.cancel()
        await cluster.stop()


class WorkerFailed(RuntimeError):
    """A worker process did not start, or exited while the mock was serving."""


async def supervise(config: MockConfig, workers: int, replicas: int, host: str, port: int,
                    record: str | None, record_prompts: bool, announce: bool,
                    watch_stdin: bool = False, start_timeout_s: float = 60.0,
                    stop_timeout_s: float = 65.0) -> None:
    """Start ``workers`` processes sharing the ports with SO_REUSEPORT; stop them all on
    SIGINT/SIGTERM, on the parent's end (``watch_stdin``) or when one of them exits."""
    if not REUSEPORT:
        raise WorkerFailed("--workers needs SO_REUSEPORT as Linux has it; run one worker")
    # the ports must be free (a port held by another SO_REUSEPORT server of this user would let
    # us join its group silently): check without SO_REUSEPORT, then reserve with it
    probe = bind_consecutive(host, port, replicas, listen=False)
    base = probe[0].getsockname()[1]
    for sock in probe:
        sock.close()
    reserved = bind_consecutive(host, base, replicas, reuseport=True, listen=False)
    peers_dir = tempfile.mkdtemp(prefix="llmbench-mock-")
    env = _child_env()
    procs: list[asyncio.subprocess.Process] = []
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    forced = asyncio.Event()

    def on_signal() -> None:
        if stop.is_set():
            forced.set()           # a second Ctrl-C: do not wait for streams in flight
        stop.set()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, on_signal)
    watcher = loop.create_task(watch_parent(stop)) if watch_stdin else None
    failure: str | None = None
    try:
        for w in range(workers):
            cmd = _child(config, replicas, host, base, workers, record, "--worker", str(w),
                         "--peers-dir", peers_dir, *(["--record-prompts"] if record_prompts else []))
            procs.append(await asyncio.create_subprocess_exec(
                *cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                preexec_fn=_die_with_parent(os.getpid())))
        for w, proc in enumerate(procs):
            assert proc.stdout is not None
            try:
                line = (await asyncio.wait_for(proc.stdout.readline(), start_timeout_s)).decode()
            except asyncio.TimeoutError:
                line = ""
            if not line.startswith("LISTENING "):
                if stop.is_set():      # Ctrl-C while starting: the workers got it too
                    return
                raise WorkerFailed(f"mock worker {w} did not start")
        urls = urls_for(host, list(range(base, base + replicas)))
        if announce:
            print("LISTENING " + json.dumps(urls), flush=True)
        else:
            for i, url in enumerate(urls):
                print(f"llmbench mock replica-{i} on {url}, {workers} worker processes "
                      f"(OpenAI: {url}/v1, Ollama: {url})", flush=True)
        exits = {loop.create_task(p.wait()): w for w, p in enumerate(procs)}
        stopping = loop.create_task(stop.wait())
        done, _ = await asyncio.wait([stopping, *exits], return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            if task in exits:
                failure = f"mock worker {exits[task]} exited (code {task.result()})"
        stopping.cancel()
    finally:
        if watcher is not None:
            watcher.cancel()
        await _stop_workers(procs, forced, stop_timeout_s)
        for sock in reserved:
            sock.close()
        shutil.rmtree(peers_dir, ignore_errors=True)
    if failure:
        raise WorkerFailed(failure + "; all workers stopped")


async def _stop_workers(procs: list[asyncio.subprocess.Process], forced: asyncio.Event,
                        timeout_s: float) -> None:
    """SIGTERM (each worker stops cleanly and flushes its log), then SIGKILL for any still
    running after ``timeout_s`` or at a second signal."""
    for p in procs:
        if p.returncode is None:
            with suppress(ProcessLookupError):
                p.send_signal(signal.SIGTERM)
    waits = asyncio.gather(*(p.wait() for p in procs))
    force = asyncio.ensure_future(forced.wait())
    await asyncio.wait([waits, force], timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    force.cancel()
    for p in procs:
        if p.returncode is None:
            with suppress(ProcessLookupError):
                p.kill()
    await waits
