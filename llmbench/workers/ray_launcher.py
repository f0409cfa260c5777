"""Workers as Ray actors across a cluster's nodes (``--ray auto|ADDRESS``; docs/ray.md has the
placement, the code shipped to the nodes and the errors): the same worker entry
(``worker.worker_main``) and the same coordinator (``coordinator.Fleet``) as local worker
processes, behind the one-method Launcher of the seam (see the package docstring).

- The actor is an async actor: the worker runs in the actor's event loop, and two more methods
  run beside it there: ``deliver`` (coordinator -> worker messages, numbered, put back in order:
  Ray does not promise the order of an async actor's calls) and ``poll`` (worker ->
  coordinator: a long poll that returns every message queued since the last one, so records
  travel in batches of batches, and an idle worker costs one call per POLL_WAIT_S).
- Clocks: before the worker starts, PINGS ping exchanges estimate the actor's clock offset
  (llmbench.workers.clock), used as the package docstring's CLOCKS say: by the worker from its
  spec, by the coordinator from the link. After the worker is done, PINGS more give the
  offset at the end and the drift; both go to run.json (``workers.ray``).
- Stopping: the coordinator's "stop" and "end" reach the worker as messages; ``kill`` is
  ``ray.kill``.

Part of the load layer. Imports Ray only when a Ray run is asked for.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import os
import socket
import sys
import tempfile
import threading
import time
from contextlib import suppress
from pathlib import Path
from typing import Any

from llmbench.workers.clock import ClockMap, measure
from llmbench.workers.coordinator import Fleet
from llmbench.workers.protocol import WorkerSpec

perf_counter = time.perf_counter

RAY_NEEDED = "--ray needs Ray: pip install 'llmbench[ray]'"
# pings per clock estimate (start and end); each is one actor call, about a millisecond
PINGS = 16
# a poll returns at once when messages are waiting, else after this long with none
POLL_WAIT_S = 0.5
# the first ping waits this long for Ray to place and start the actor
PLACE_TIMEOUT_S = 120.0
# TCP check of a head's address before ray.init (which retries a dead address for minutes)
CONNECT_TIMEOUT_S = 5.0
# ray.init on a port that accepts but is not a Ray head waits for minutes: give up after this
# long (LLMBENCH_RAY_JOIN_S; joining a real head took 5 s on a busy 2-core machine)
JOIN_TIMEOUT_S = 45.0
ENTRY = "llmbench.workers.worker:worker_main"


class RayUnavailable(Exception):
    """Ray is not installed, or its head cannot be reached; the message is one line and
    ``exit_code`` says which (2: install it; 3: cannot connect)."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def parse_address(value: str) -> str:
    """``--ray auto|ADDRESS`` -> "auto" or "host:port"; ValueError with the line to print."""
    v = (value or "").strip()
    if v.lower() == "auto":
        return "auto"
    if v.startswith("ray://"):
        raise ValueError(f"--ray {value!r}: Ray Client (ray://) is not supported; run llmbench "
                         "where it reaches the head's GCS port and give HOST:PORT (e.g. "
                         "head:6379), or auto")
    host, sep, port = v.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--ray {value!r}: expected auto or the head's HOST:PORT (the GCS "
                         "address `ray start --head` prints, e.g. 10.0.0.5:6379)")
    return v


def _reachable(address: str) -> str | None:
    """None when something accepts TCP at host:port, else why not."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), CONNECT_TIMEOUT_S):
            return None
    except OSError as exc:
        return exc.strerror or type(exc).__name__


@dataclasses.dataclass
class RayCluster:
    """The connection a run's launcher uses: where, and what the cluster has."""

    address: str                  # what was asked for ("auto" or host:port)
    connected_to: str             # the GCS address Ray reports
    nodes: int
    cpus: float
    started_local: bool           # auto started a Ray instance of its own (stopped at exit)


def connect(address: str) -> RayCluster:
    """Join the cluster (``auto``: RAY_ADDRESS, else a Ray instance already running on this
    machine, else a new local one). Raises RayUnavailable with one line."""
    try:
        import ray
    except ImportError:
        raise RayUnavailable(RAY_NEEDED, 2) from None
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    target = os.environ.get("RAY_ADDRESS") if address == "auto" else address
    if target and target != "auto" and not target.startswith("ray://") and ":" in target:
        why = _reachable(target)
        if why is not None:
            where = f"RAY_ADDRESS={target}" if address == "auto" else f"--ray {target}"
            raise RayUnavailable(f"{where}: no Ray head answers there ({why}); is `ray start "
                                 "--head` running there, and is the address right?", 3)
    # Ray's C++ side warns on stderr while it retries; the one line below says it instead
    os.environ.setdefault("RAY_BACKEND_LOG_LEVEL", "error")
    join_s = float(os.environ.get("LLMBENCH_RAY_JOIN_S") or JOIN_TIMEOUT_S)
    where = f"RAY_ADDRESS={target}" if address == "auto" and target else f"--ray {address}"

    # Ray's C++ client still writes a warning a second or so while it waits for a head
    # (rpc_client.h "Failed to connect to GCS ..."), whatever the log level: stderr (fd 2)
    # goes to a file until the cluster is joined, and the one line below speaks instead
    sink = tempfile.TemporaryFile()
    real_stderr = os.dup(2)
    sys.stderr.flush()
    os.dup2(sink.fileno(), 2)

    def give_up() -> None:
        # ray.init cannot be interrupted from Python: say so and leave (no run folder yet)
        os.write(real_stderr, (f"error: {where}: no Ray head answered within {join_s:g} s (is "
                               "it the head's GCS port, 6379 unless --port was given?)\n"
                               ).encode())
        os._exit(3)
    watchdog = threading.Timer(join_s, give_up)
    watchdog.daemon = True
    watchdog.start()
    try:
        ctx = ray.init(address=None if address == "auto" else address,
                       logging_level="ERROR", log_to_driver=False, include_dashboard=False,
                       runtime_env={"py_modules": [str(Path(__file__).resolve().parents[1])]},
                       ignore_reinit_error=True)
    except Exception as exc:       # ConnectionError, RuntimeError, auth errors ...
        text = " ".join(str(exc).split())[:200]
        raise RayUnavailable(f"{where}: cannot join the Ray cluster: {text}", 3) from None
    finally:
        watchdog.cancel()
        sys.stderr.flush()
        os.dup2(real_stderr, 2)
        os.close(real_stderr)
        sink.close()
    res = ray.cluster_resources()
    nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
    gcs = getattr(ctx, "address_info", {}).get("gcs_address") or target or "local"
    return RayCluster(address, str(gcs), nodes, float(res.get("CPU", 0.0)),
                      started_local=_we_started_it())


def _we_started_it() -> bool:
    """Did ray.init start a Ray instance in this process (auto with none running)?"""
    try:
        import ray
        node = ray._private.worker._global_node
        return bool(node is not None and node.head)
    except Exception:
        return False


# -- the actor ----------------------------------------------------------------------------
class WorkerActor:
    """One worker inside a Ray actor (the class is wrapped by ray.remote at first use)."""

    def __init__(self) -> None:
        self.outbox: list[dict[str, Any]] = []
        self.inbox: asyncio.Queue[dict[str, Any] | None] | None = None
        self.next_seq = 0
        self.held: dict[int, dict[str, Any] | None] = {}
        self.wake: asyncio.Event | None = None
        self.finished = False

    def _setup(self) -> None:
        if self.inbox is None:
            self.inbox = asyncio.Queue()
            self.wake = asyncio.Event()

    async def clock(self) -> tuple[float, float]:
        t1 = perf_counter()
        return t1, perf_counter()

    async def where(self) -> dict[str, Any]:
        import ray
        ctx = ray.get_runtime_context()
        return {"node_id": ctx.get_node_id(), "host": socket.gethostname(), "pid": os.getpid()}

    async def run(self, spec: WorkerSpec, entry: Any = ENTRY) -> None:
        """The worker entry (the seam's) in this actor's loop, talking through this actor.
        ``entry``: "module:function", or an async function (scripts/bench_ray.py sends a
        synthetic worker to measure what the coordinator ingests)."""
        self._setup()
        if callable(entry):
            main = entry
        else:
            mod, _, name = entry.partition(":")
            main = getattr(importlib.import_module(mod), name)
        try:
            await main(spec, _ActorChannel(self))
        finally:
            self.finished = True
            assert self.wake is not None
            self.wake.set()

    async def deliver(self, seq: int, msg: dict[str, Any] | None) -> None:
        """A coordinator message; numbered, because calls may overtake each other."""
        self._setup()
        assert self.inbox is not None
        self.held[seq] = msg
        while self.next_seq in self.held:
            self.inbox.put_nowait(self.held.pop(self.next_seq))
            self.next_seq += 1

    async def poll(self, wait_s: float = POLL_WAIT_S) -> tuple[list[dict[str, Any]], bool]:
        """Everything the worker sent since the last poll (waits up to wait_s for some), and
        whether the worker has returned (then nothing more will come)."""
        self._setup()
        assert self.wake is not None
        if not self.outbox and not self.finished:
            self.wake.clear()
            with suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.wake.wait(), wait_s)
        out, self.outbox = self.outbox, []
        return out, self.finished and not self.outbox


class _ActorChannel:
    """The worker's end: send queues for the next poll; recv reads what deliver put back in
    order (None: the coordinator is gone)."""

    def __init__(self, actor: WorkerActor) -> None:
        self.actor = actor

    def send(self, msg: dict[str, Any]) -> None:
        self.actor.outbox.append(msg)
        assert self.actor.wake is not None
        self.actor.wake.set()

    async def recv(self) -> dict[str, Any] | None:
        assert self.actor.inbox is not None
        return await self.actor.inbox.get()


_REMOTE: Any = None


def _remote_class() -> Any:
    global _REMOTE
    if _REMOTE is None:
        import ray
        # max_concurrency: run, poll, deliver and the pings must all be able to run at once
        _REMOTE = ray.remote(num_cpus=1, max_concurrency=64)(WorkerActor)
    return _REMOTE


# -- the coordinator's end ------------------------------------------------------------------
class RayLink:
    """The coordinator's end of one actor. ``launch`` returns it at once (the Fleet calls it
    in its event loop); placing the actor and the pings happen in a task, before the first
    message is handed to ``recv``, so ``clock_offset_s`` is set before any record arrives."""

    def __init__(self, spec: WorkerSpec, entry: Any = ENTRY, cpus: float = 1.0) -> None:
        self.worker_id = spec.worker_id
        self.clock_offset_s = 0.0            # coordinator_time = worker_time + offset
        self.clock: ClockMap | None = None
        self.where: dict[str, Any] = {}
        self.note = "still running"
        self.batches = 0                     # polls that brought messages
        self._seq = 0
        self._queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self._run_ref: Any = None
        self._closed = False
        # submitted now (it does not wait for the actor): messages sent before it runs wait
        # in Ray's queue for it, in order, instead of being lost
        self._actor = _remote_class().options(scheduling_strategy="SPREAD",
                                              num_cpus=cpus).remote()
        self._task = asyncio.get_running_loop().create_task(self._main(spec, entry))

    async def _main(self, spec: WorkerSpec, entry: Any) -> None:
        import ray
        from ray.exceptions import RayError
        try:
            try:
                self.where = await asyncio.wait_for(self._actor.where.remote(), PLACE_TIMEOUT_S)
            except asyncio.TimeoutError:
                self._say(f"could not be placed within {PLACE_TIMEOUT_S:.0f} s (the cluster "
                             f"has {ray.cluster_resources().get('CPU', 0):g} CPUs; each worker "
                             "takes one)")
                return
            start = await measure(self._actor.clock.remote, PINGS)
            self.clock = ClockMap(start)
            self.clock_offset_s = -start.offset_s
            self._run_ref = self._actor.run.remote(
                dataclasses.replace(spec, clock_offset_s=self.clock_offset_s), entry)
            while True:
                msgs, finished = await self._actor.poll.remote()
                if msgs:
                    self.batches += 1
                for m in msgs:
                    self._queue.put_nowait(m)
                if finished:
                    break
            await self._run_ref                # raises if the worker's entry raised
            self._say("exited")
            self.clock = ClockMap(start, await measure(self._actor.clock.remote, PINGS))
        except asyncio.CancelledError:
            raise
        except RayError as exc:
            self._say("actor lost: " + " ".join(str(exc).split())[:160])
        except Exception as exc:               # never raise into the coordinator's pump
            self._say(f"{type(exc).__name__}: {' '.join(str(exc).split())[:160]}")
        finally:
            self._queue.put_nowait(None)

    # -- WorkerLink ---------------------------------------------------------------------------
    def send(self, msg: dict[str, Any]) -> None:
        if self._closed:
            return
        self._actor.deliver.remote(self._seq, msg)
        self._seq += 1

    async def recv(self) -> dict[str, Any] | None:
        return await self._queue.get()

    def _say(self, note: str) -> None:
        """The first reason the worker stopped is the one kept."""
        if self.note == "still running":
            self.note = note

    def exit_note(self) -> str:
        return self.note

    def kill(self) -> None:
        import ray
        with suppress(Exception):
            ray.kill(self._actor)
        self._say("killed")

    async def close(self, timeout_s: float = 5.0) -> None:
        with suppress(asyncio.TimeoutError, asyncio.CancelledError, Exception):
            await asyncio.wait_for(asyncio.shield(self._task), timeout_s)
        if not self._task.done():
            self._task.cancel()
        if not self._closed:
            self.send(None)                    # type: ignore[arg-type]  # EOF for the worker
            self._closed = True
            self.kill()                        # done or not: free its CPU now, not at exit

    def describe(self) -> dict[str, Any]:
        """What run.json keeps of this worker: where it ran and its clock against ours."""
        return {**self.where, "clock": self.clock.as_dict() if self.clock else None,
                "batches": self.batches}


class RayLauncher:
    """``launch(spec)`` starts one actor on the cluster ``connect`` joined."""

    def __init__(self, cluster: RayCluster, entry: Any = ENTRY, cpus: float = 1.0) -> None:
        self.cluster = cluster
        self.entry = entry
        self.cpus = cpus
        self.links: list[RayLink] = []

    def launch(self, spec: WorkerSpec) -> RayLink:
        link = RayLink(spec, self.entry, self.cpus)
        self.links.append(link)
        return link


@dataclasses.dataclass
class RayFleet(Fleet):
    """The Fleet with Ray actors: run.json's ``workers`` also says where each one ran and its
    clock offset (with its uncertainty and drift)."""

    def _n(self, n_streams: int) -> int:
        """``auto`` on Ray: the streams' worth of processes, up to the cluster's CPUs."""
        if self.workers == "auto" and isinstance(self.launcher, RayLauncher):
            from llmbench.workers.plan import auto_workers
            return auto_workers(n_streams, max(1, int(self.launcher.cluster.cpus)))
        return super()._n(n_streams)

    def describe(self) -> dict[str, Any]:
        out = super().describe()
        launcher = self.launcher
        if isinstance(launcher, RayLauncher):
            out["ray"] = {**dataclasses.asdict(launcher.cluster),
                          "workers": {str(l.worker_id): l.describe() for l in launcher.links}}
        return out
