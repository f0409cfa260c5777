"""The coordinator of worker processes: the harness hands a shape to ``Fleet.drive`` instead
of driving it in its own loop (``Harness.fleet``; ``--workers 1`` never gets here).

- Run shapes (closed loop, open loop, trace) are cut into shares (plan.split_run) and run by
  the workers; every worker waits, after its warm-up, for one shared t0 ("go").
- The ramp and the probe run HERE, the same ``Ramp.drive`` / ``RouterAB.drive`` as in one
  process: their users live in the workers (RemoteCrowd / RemoteProbe, by messages), their
  steps are judged here over every worker's records, and a broken step ends every worker.
- Records stream in (batched), are put on the coordinator's clock, and go to the one
  requests.jsonl and the run's sessions; counters and monitor samples are gathered per
  worker, so the live line and the generator check see all of them and name a busy worker.
  The coordinator's own event loop (it takes every record) is watched too: its samples are
  tagged COORDINATOR and judged like a worker's, so a busy coordinator is named as well.
- Stopping (Ctrl-C, SIGTERM): every worker is told; each gives its in-flight requests the
  grace period; what they send until then is kept. A worker that dies is named in one line
  on stderr and in run.json (``crashed``); its records so far are kept, and the command
  exits non-zero: figures missing a worker's share can never pass a gate.
"""

from __future__ import annotations

import asyncio
import itertools
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

from llmbench.load.monitor import COORDINATOR, LoopMonitor, MonitorSample, MonitorView
from llmbench.load.session import Counters
from llmbench.records.record import Record
from llmbench.load.shapes.base import Drive, LiveState
from llmbench.load.shapes.ramp import Ramp
from llmbench.load.shapes.router import RouterAB
from llmbench.workload.tokenizer import rebuild_spec
from llmbench.workers.plan import ProbeCrowd, RampCrowd, auto_workers, cores, split_run, stride, streams
from llmbench.workers.protocol import Launcher, WorkerLink, WorkerSpec, WorkerTarget

perf_counter = time.perf_counter

# t0 is this far after "go" is sent: every worker has it before the first request is due
GO_LEAD_S = 0.2
# after the grace period, how long the coordinator waits for the workers' last records
STOP_MARGIN_S = 3.0

_TIME_FIELDS = ("scheduled", "start", "sent", "first_token", "end", "done", "reasoning_end",
                "first_output")


def counter_spec(count_tokens: Any) -> str | None:
    """A --tokenizer spec that rebuilds, without a server, the tokenizer whose ``count`` the
    command counts replies with (``Tokenizer.count``, bound: for ``server`` and ``auto`` it is
    their ``local`` tokenizer, as in one process); None when it cannot be rebuilt."""
    tok = getattr(count_tokens, "__self__", None)
    if tok is not None and getattr(tok, "server", None) is not None:
        tok = getattr(tok, "local", None)      # a server cannot count on the hot path
    return rebuild_spec(tok)


def shift(rec: Record, offset: float) -> Record:
    """A worker's record onto the coordinator's clock: every absolute time moves together,
    so the request's own latencies are untouched."""
    if offset:
        for name in _TIME_FIELDS:
            v = getattr(rec, name)
            if v is not None:
                setattr(rec, name, v + offset)
        rec.token_times = [t + offset for t in rec.token_times]
    return rec


@dataclass
class _Worker:
    """One worker process as the coordinator tracks it: its link and whether it is done."""
    link: WorkerLink
    ready: asyncio.Future[None]
    done: bool = False
    gone: bool = False
    users: int = 0                              # ramp users placed on it
    records: int = 0
    counters: dict[str, Counters] = field(default_factory=dict)


@dataclass
class Fleet:
    """``--workers N|auto`` for one run. ``launcher`` starts a worker from a WorkerSpec
    (local processes; the Ray launcher plugs in here)."""

    workers: int | str                          # N, or "auto"
    launcher: Launcher
    tokenizer: str | None = None                # --tokenizer (used when count_tokens is None)
    count_tokens: Any = None                    # the command's reply counter (counter_spec)
    grace_s: float = 3.0
    view: MonitorView = field(default_factory=MonitorView)
    crashed: list[dict[str, Any]] = field(default_factory=list)
    chosen: int = 0                             # how many workers ran
    _w: dict[int, _Worker] = field(default_factory=dict)
    _calls: dict[tuple[int, int], asyncio.Future[Any]] = field(default_factory=dict)
    _ids: Any = field(default_factory=itertools.count)

    @property
    def extra_grace_s(self) -> float:
        """The harness waits this much longer than its grace before it cancels the fleet."""
        return STOP_MARGIN_S + 2.0

    def describe(self) -> dict[str, Any]:
        return {"requested": self.workers, "count": self.chosen,
                "launcher": type(self.launcher).__name__, "crashed": self.crashed,
                "records": {str(w): x.records for w, x in self._w.items()},
                "count_tokens": self._counter_spec()}

    def _counter_spec(self) -> str | None:
        if self.count_tokens is None:
            return self.tokenizer
        return counter_spec(self.count_tokens)

    # -- the run ----------------------------------------------------------------------------
    async def drive(self, shape: Any, d: Drive, targets: list[Any], h: Any,
                    run_id: str) -> Any:
        self._sinks = d.sessions
        self._live: LiveState = d.live
        self._by_path = {t.path: t.name for t in targets}
        self._first = targets[0].name
        self._targets = [WorkerTarget(t.target, t.name, t.path, t.run_id or run_id, t.salt)
                         for t in targets]
        self._h = h
        self._max_in_flight = shape.max_in_flight()
        self._stopping = d.stopping
        self._counter = self._counter_spec()
        if self._counter is None and self.count_tokens is not None:
            print("note: worker processes count a reply's tokens by its token events when the "
                  "server reports no usage: the tokenizer cannot be rebuilt in a worker",
                  file=sys.stderr, flush=True)
        pumps: list[asyncio.Task[None]] = []
        self._pumps = pumps
        watcher = asyncio.get_running_loop().create_task(self._watch_stop())
        monitor = LoopMonitor(worker=COORDINATOR, on_sample=self.view.add)
        monitor.start()
        try:
            if isinstance(shape, (Ramp, RouterAB)):
                return await self._drive_remote(shape, d)
            return await self._drive_run(shape)
        except asyncio.CancelledError:
            # a second Ctrl-C, or the grace period is over: stop now, keep what arrives
            self._send_all({"type": "stop", "now": True})
            await self._wait_done(1.0)
            raise
        finally:
            watcher.cancel()
            await monitor.stop()
            await self._close_all()

    def _n(self, n_streams: int) -> int:
        if self.workers == "auto":
            return auto_workers(n_streams)
        return int(self.workers)

    async def _drive_run(self, shape: Any) -> float:
        shares = split_run(shape, self._n(streams(shape)))
        for plan in shares:
            self._launch(plan, len(shares))
        t0 = await self._go()
        await self._wait_done(None)
        return t0

    async def _drive_remote(self, shape: Ramp | RouterAB, d: Drive) -> Any:
        if isinstance(shape, Ramp):
            first = streams(Ramp(shape.convs, shape.steps[:1], by=shape.by))
            n = self._n(first) if self.workers == "auto" else int(self.workers)
            most = self._n(streams(shape)) if self.workers == "auto" else n
            self._ramp_share = max(most, n)
            remote: Any = RemoteCrowd(self, shape)
        else:
            n = self._n(streams(shape))
            self._ramp_share = n
            remote = RemoteProbe(self)
        for _ in range(n):
            self._launch(self._remote_plan(shape), n)
        await self._go()
        result = await shape.drive(Drive(d.sessions, d.stopping, self.view, d.live,
                                         remote=remote))
        self._send_all({"type": "end"})
        await self._wait_done(self.grace_s + STOP_MARGIN_S)
        return result

    def _remote_plan(self, shape: Any) -> Any:
        if isinstance(shape, Ramp):
            k, w = self._ramp_share, len(self._w)
            mine = stride(shape.convs, w % k, k)
            return RampCrowd(mine, shape.think_s, shape.seed, shape.burstiness, shape.join)
        return ProbeCrowd(shape.convs, shape.think_s)

    # -- workers ----------------------------------------------------------------------------
    def _launch(self, plan: Any, total: int) -> _Worker:
        wid = len(self._w)
        h = self._h
        spec = WorkerSpec(wid, plan, self._targets, h.params, h.timeouts, self._max_in_flight,
                          h.served_by_header, self.grace_s, self._counter, 0.0, total)
        link = self.launcher.launch(spec)
        w = _Worker(link, asyncio.get_running_loop().create_future())
        self._w[wid] = w
        self.chosen = len(self._w)
        self._pumps.append(asyncio.get_running_loop().create_task(self._pump(w)))
        return w

    async def _go(self, workers: Sequence[_Worker] | None = None) -> float:
        """Wait until every (new) worker is ready, then give them one t0."""
        ws = list(self._w.values()) if workers is None else list(workers)
        waits = [w.ready for w in ws if not w.gone]
        stop = asyncio.ensure_future(self._stopping.wait())
        try:
            await asyncio.wait([asyncio.gather(*waits, return_exceptions=True), stop],
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
        t0 = perf_counter() + GO_LEAD_S
        for w in ws:
            w.link.send({"type": "go", "clock": "coordinator", "t0": t0})
        return t0

    async def _wait_done(self, timeout_s: float | None) -> None:
        deadline = None if timeout_s is None else perf_counter() + timeout_s
        while any(not (w.done or w.gone) for w in self._w.values()):
            if deadline is not None and perf_counter() >= deadline:
                return
            await asyncio.sleep(0.05)

    async def _watch_stop(self) -> None:
        await self._stopping.wait()
        self._send_all({"type": "stop", "now": False})

    def _send_all(self, msg: dict[str, Any]) -> None:
        for w in self._w.values():
            if not (w.done or w.gone):
                w.link.send(msg)

    async def _close_all(self) -> None:
        for w in self._w.values():
            if not (w.done or w.gone):
                w.link.kill()
        await asyncio.gather(*(w.link.close() for w in self._w.values()),
                             return_exceptions=True)
        for t in self._pumps:
            t.cancel()
        await asyncio.gather(*self._pumps, return_exceptions=True)

    async def call(self, w: _Worker, op: str, **args: Any) -> Any:
        """A call to one worker; its reply (None if the worker is gone)."""
        if w.gone or w.done:
            return None
        cid = next(self._ids)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._calls[(w.link.worker_id, cid)] = fut
        w.link.send(_call(op, args, cid))
        return await fut

    async def call_all(self, op: str, **args: Any) -> list[Any]:
        """The same call to every live worker; their replies."""
        return await asyncio.gather(*(self.call(w, op, **args) for w in self.alive()))

    def alive(self) -> list[_Worker]:
        return [w for w in self._w.values() if not (w.gone or w.done)]

    # -- messages ---------------------------------------------------------------------------
    async def _pump(self, w: _Worker) -> None:
        link = w.link
        wid = link.worker_id
        while True:
            msg = await link.recv()
            if msg is None:
                break
            kind = msg.get("type")
            if kind == "records":
                self._records(w, msg["records"])
            elif kind == "live":
                w.counters[msg["target"]] = Counters(**msg["counters"])
                self._sum_counters(msg["target"])
            elif kind == "monitor":
                s = msg["sample"]
                self.view.add(MonitorSample(s["t"] + link.clock_offset_s, s["lag_p99_ms"],
                                            s["lag_max_ms"], s["cpu_pct"], wid))
            elif kind == "users":
                self._live.users_changed(msg["t"] + link.clock_offset_s, msg["delta"])
            elif kind == "ready":
                if not w.ready.done():
                    w.ready.set_result(None)
            elif kind == "reply":
                fut = self._calls.pop((wid, msg["id"]), None)
                if fut is not None and not fut.done():
                    fut.set_result(msg.get("value"))
            elif kind == "done":
                w.done = True
            elif kind == "error":
                self._lost(w, f"failed: {msg.get('error')}")
        if not w.done and not w.gone:
            await asyncio.sleep(0.2)           # let the process exit, for its exit code
            self._lost(w, f"crashed ({link.exit_note()})")
        w.gone = True
        self._release(w)

    def _lost(self, w: _Worker, what: str) -> None:
        if w.gone:
            return
        w.gone = True
        wid = w.link.worker_id
        self.crashed.append({"worker": wid, "error": what, "records": w.records})
        print(f"error: worker {wid} {what}; its {w.records} records so far are kept, the "
              "rest of the run goes on without it", file=sys.stderr, flush=True)
        self._release(w)

    def _release(self, w: _Worker) -> None:
        if not w.ready.done():
            w.ready.set_result(None)
        wid = w.link.worker_id
        for key in [k for k in self._calls if k[0] == wid]:
            fut = self._calls.pop(key)
            if not fut.done():
                fut.set_result(None)

    def _records(self, w: _Worker, dicts: list[dict[str, Any]]) -> None:
        off = w.link.clock_offset_s
        for d in dicts:
            rec = shift(Record.from_json(d), off)
            w.records += 1
            sink = self._sinks.get(self._by_path.get(rec.path, self._first)) \
                or self._sinks[self._first]
            sink.records.append(rec)
            if sink.log is not None:
                sink.log.append(rec)
            if rec.token_times:
                sink.recent_ttft.add(rec.token_times[0], rec.ttft)
            if sink.on_record is not None:
                sink.on_record(rec)         # --metrics-port: every worker's records, here

    def _sum_counters(self, target: str) -> None:
        sink = self._sinks.get(target)
        if sink is None:
            return
        sink.counters = Counters.summed(w.counters[target] for w in self._w.values()
                                        if target in w.counters)


def _call(op: str, args: dict[str, Any], cid: int = -1) -> dict[str, Any]:
    """A call's message; id -1: no reply is awaited."""
    return {"type": "call", "id": cid, "op": op, "args": args, "clock": "coordinator"}


class RemoteCrowd:
    """The ramp's Crowd over worker processes: the same calls, by messages. Users go to the
    worker with the fewest (lowest id first); with ``auto``, a worker is added when a step's
    users need one more process (up to the cores)."""

    def __init__(self, fleet: Fleet, shape: Ramp) -> None:
        self.fleet = fleet
        self.shape = shape
        self.step: int | None = None
        self.where: dict[int, int] = {}          # user id -> the worker it was placed on

    @property
    def records(self) -> Sequence[Record]:
        return self.fleet._sinks[self.fleet._first].records

    def set_step(self, index: int | None) -> None:
        self.step = index
        for s in self.fleet._sinks.values():
            s.step = index
        self.fleet._send_all(_call("set_step", {"index": index}))

    async def add_users(self, users: list[tuple[int, float]]) -> None:
        f = self.fleet
        if f.workers == "auto":
            total = sum(w.users for w in f.alive()) + len(users)
            want = min(auto_workers(total), f._ramp_share, cores())
            new = []
            while len(f.alive()) < want and not f._stopping.is_set():
                new.append(f._launch(f._remote_plan(self.shape), want))
            if new:
                await f._go(new)
                for w in new:
                    if self.step is not None:
                        w.link.send(_call("set_step", {"index": self.step}))
        placed: dict[int, list[tuple[int, float]]] = {}
        for uid, at in users:
            alive = f.alive()
            if not alive:
                return
            w = min(alive, key=lambda x: (x.users, x.link.worker_id))
            w.users += 1
            placed.setdefault(w.link.worker_id, []).append((uid, at))
            self.where[uid] = w.link.worker_id
        for wid, us in placed.items():
            f._w[wid].link.send(_call("add_users", {"users": us}))

    async def remove_users(self, uids: Sequence[int]) -> None:
        f = self.fleet
        by_worker: dict[int, list[int]] = {}
        for uid in uids:
            wid = self.where.pop(uid, None)
            if wid is not None:
                by_worker.setdefault(wid, []).append(uid)
        for w in f.alive():
            mine = by_worker.get(w.link.worker_id)
            if mine:
                w.users -= len(mine)
                w.link.send(_call("remove_users", {"uids": mine}))

    async def end_conversations(self) -> None:
        self.fleet._send_all(_call("end_conversations", {}))

    async def leaving(self) -> int:
        return sum(v or 0 for v in await self.fleet.call_all("leaving"))

    async def cancel_leaving(self) -> None:
        await self.fleet.call_all("cancel_leaving")

    def start_trace(self, items: Sequence[Any], copies: int, speed: float, t0: float) -> None:
        # a recording replays in one process: ramp --trace refuses --workers (check_trace)
        raise AssertionError("ramp --trace runs without worker processes")

    async def playing(self) -> int:
        return 0                    # no recording plays here (start_trace)

    def start_rate(self, step: int, offsets: Sequence[float], t0: float,
                   index: Sequence[int] | None = None) -> None:
        alive = self.fleet.alive()
        for k, w in enumerate(alive):
            mine = [i for i in range(len(offsets)) if i % len(alive) == k]
            w.link.send(_call("start_rate", {"step": step, "t0": t0, "index": mine,
                                             "offsets": [offsets[i] for i in mine]}))

    def stop_rate(self) -> None:
        self.fleet._send_all(_call("stop_rate", {}))

    async def pending(self, index: int, hold_start: float, hold_end: float) -> int:
        got = await self.fleet.call_all("pending", index=index, hold_start=hold_start,
                                        hold_end=hold_end)
        return sum(v or 0 for v in got)

    async def finish(self) -> None:
        await self.fleet.call_all("finish")


class RemoteProbe:
    """The probe's slices over worker processes: user u of a slice is worker u % N's."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet

    async def slice(self, path: str, users: int, seconds: float, seed: int,
                    offset: int) -> int:
        """The slice in every worker; how many conversations the busiest user started."""
        f = self.fleet
        alive = f.alive()
        step = f._sinks[path].step if path in f._sinks else None
        got = await asyncio.gather(*(f.call(w, "slice", path=path, users=users, seconds=seconds,
                                            seed=seed, offset=offset, step=step,
                                            uids=list(range(users))[k::len(alive)])
                                     for k, w in enumerate(alive)))
        return max((int(v) for v in got if isinstance(v, int)), default=0)
