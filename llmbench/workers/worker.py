"""The worker entry: ``worker_main(spec, channel)`` runs one worker's share of a plan in this
process's event loop, with its own clients, and streams what it measures to the coordinator.
The contract (messages, clocks, batching) is in the package docstring."""

from __future__ import annotations

import asyncio
import time
import traceback
from typing import Any

from llmbench.client.request import Client
from llmbench.load.monitor import LoopMonitor
from llmbench.load.session import Session
from llmbench.records.record import Record
from llmbench.load.shapes.base import Drive, LiveState
from llmbench.load.shapes.ramp import Crowd
from llmbench.load.shapes.router import _slice
from llmbench.workers.plan import ProbeCrowd, RampCrowd, RunShare
from llmbench.workers.protocol import BATCH, FLUSH_S, Channel, WorkerSpec

perf_counter = time.perf_counter


def run_worker(spec: WorkerSpec, channel: Channel) -> None:
    """The sync entry (a fresh event loop, uvloop when installed), for a process of its own."""
    from llmbench.client.request import preload_transports
    from llmbench.load import eventloop
    preload_transports([t.target.base_url for t in spec.targets])
    eventloop.run(worker_main(spec, channel))


def _count_tokens(spec: WorkerSpec) -> Any:
    """The run's reply counter, rebuilt from its spec (a tokenizer object does not pickle);
    None when there is none: replies are then counted by their token events."""
    if not spec.tokenizer:
        return None
    try:
        from llmbench.workload import load_tokenizer
        return load_tokenizer(spec.tokenizer).count
    except Exception:
        return None


class _Outbox:
    """Records batched to the coordinator (at BATCH records, every FLUSH_S, before replies)."""

    def __init__(self, channel: Channel, worker_id: int) -> None:
        self.channel = channel
        self.worker_id = worker_id
        self.buf: list[dict[str, Any]] = []

    def add(self, rec: Record) -> None:
        rec.worker = self.worker_id
        self.buf.append(rec.to_json())
        if len(self.buf) >= BATCH:
            self.flush()

    def flush(self) -> None:
        if self.buf:
            buf, self.buf = self.buf, []
            self.channel.send({"type": "records", "worker": self.worker_id, "clock": "worker",
                               "records": buf})


async def worker_main(spec: WorkerSpec, channel: Channel) -> None:
    wid = spec.worker_id
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    out = _Outbox(channel, wid)
    clients: dict[str, Client] = {}
    sessions: dict[str, Session] = {}
    monitor = LoopMonitor()
    inbox: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
    go: asyncio.Future[float] = loop.create_future()
    interrupted = False
    body: asyncio.Task[Any] | None = None
    own: set[asyncio.Task[Any]] = set()
    try:
        count = _count_tokens(spec)
        for t in spec.targets:
            c = Client(t.target, spec.params, spec.timeouts, spec.max_in_flight,
                       spec.served_by_header, count)
            clients[t.name] = await c.__aenter__()
            s = Session(clients[t.name], None, run_id=f"{t.run_id}w{wid}", path=t.path,
                        stopping=stopping, salt=t.salt)
            s.on_record = out.add
            sessions[t.name] = s
        live = LiveState()
        live_users = live.users_changed

        def users_changed(t: float, delta: int) -> None:
            live_users(t, delta)
            channel.send({"type": "users", "worker": wid, "clock": "worker", "t": t,
                          "delta": delta})
        live.users_changed = users_changed          # type: ignore[method-assign]

        async def gate() -> float:
            """Warm-up done: say so, wait for the shared t0, and start there."""
            channel.send({"type": "ready", "worker": wid})
            t0 = await go
            delay = t0 - perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            return t0

        drive = Drive(sessions, stopping, monitor, live, gate=gate)
        plan = spec.plan

        async def reader() -> None:
            """Messages from the coordinator: go, stop, calls; EOF stops at once."""
            nonlocal interrupted
            while True:
                msg = await channel.recv()
                if msg is None:
                    interrupted = True
                    stopping.set()
                    if body is not None:
                        body.cancel()
                    return
                kind = msg.get("type")
                if kind == "go":
                    if not go.done():
                        go.set_result(msg["t0"] - spec.clock_offset_s)
                elif kind == "stop":
                    interrupted = True
                    stopping.set()
                    if not go.done():
                        go.cancel()
                    if body is not None:
                        if msg.get("now"):
                            body.cancel()
                        else:
                            loop.call_later(spec.grace_s, body.cancel)
                else:
                    await inbox.put(msg)

        async def ticker() -> None:
            """Records at least every FLUSH_S; counters and monitor samples as they come."""
            sent_samples = 0
            last: dict[str, tuple[int, ...]] = {}
            while True:
                await asyncio.sleep(FLUSH_S)
                out.flush()
                for name, s in sessions.items():
                    # token events as they arrive: the replies still streaming count (the
                    # coordinator's live views read them; load.harness.live_events here)
                    c = {**s.counters.__dict__, "events": s.counters.events + sum(
                        len(r.token_times) for r in s.active)}
                    key = tuple(c.values())
                    if last.get(name) != key:
                        last[name] = key
                        channel.send({"type": "live", "worker": wid, "target": name,
                                      "counters": dict(c)})
                while sent_samples < len(monitor.samples):
                    m = monitor.samples[sent_samples]
                    sent_samples += 1
                    channel.send({"type": "monitor", "worker": wid, "clock": "worker",
                                  "sample": dict(m.__dict__)})

        monitor.start()
        own.add(loop.create_task(reader()))
        own.add(loop.create_task(ticker()))
        if isinstance(plan, RunShare):
            body = loop.create_task(plan.shape.drive(drive))
        else:
            body = loop.create_task(_remote(plan, drive, inbox, channel, out, wid, spec))
        result = None
        try:
            result = await body
        except asyncio.CancelledError:
            # cancel what is still in flight so its records are written as interrupted
            main = asyncio.current_task()
            for t in asyncio.all_tasks():
                if t is not main and not t.done() and t not in own and not monitor.owns(t):
                    t.cancel()
            await asyncio.sleep(0.05)
        await monitor.stop()
        for t in own:
            t.cancel()
        await asyncio.gather(*own, return_exceptions=True)
        out.flush()
        for name, s in sessions.items():
            channel.send({"type": "live", "worker": wid, "target": name,
                          "counters": dict(s.counters.__dict__)})
        channel.send({"type": "done", "worker": wid, "clock": "worker",
                      "result": result if isinstance(result, float) else None,
                      "interrupted": interrupted})
    except Exception as exc:           # reported, never raised: the coordinator names us
        out.flush()
        line = traceback.format_exception_only(type(exc), exc)[-1].strip()
        channel.send({"type": "error", "worker": wid, "error": line})
    finally:
        for c in clients.values():
            await c.__aexit__(None, None, None)


# the Crowd's calls that carry no time: the coordinator's arguments are its own, as sent
_AS_SENT = ("set_step", "stop_rate", "remove_users", "end_conversations", "leaving",
            "cancel_leaving", "finish")


async def _remote(plan: Any, d: Drive, inbox: asyncio.Queue, channel: Channel, out: _Outbox,
                  wid: int, spec: WorkerSpec) -> None:
    """A remote-controlled share (ramp, probe): run the coordinator's calls until "end"."""
    off = spec.clock_offset_s
    crowd = None
    if isinstance(plan, RampCrowd):
        crowd = Crowd(d.session, plan.convs, plan.think_s, plan.seed, plan.burstiness,
                      d.live.users_changed, plan.join)
    await d.gate()                      # type: ignore[misc]
    loop = asyncio.get_running_loop()
    pending_calls: set[asyncio.Task[Any]] = set()

    def reply(call_id: int, value: Any) -> None:
        out.flush()                     # every record before the answer (the pipe keeps order)
        channel.send({"type": "reply", "worker": wid, "id": call_id, "value": value})

    async def run_slice(msg: dict[str, Any]) -> None:
        a = msg["args"]
        assert isinstance(plan, ProbeCrowd)
        for s in d.sessions.values():
            s.step = a["step"]
        played = await _slice(d.sessions[a["path"]], plan.convs, a["users"], a["seconds"],
                              plan.think_s, a["seed"], a["offset"], uids=a["uids"])
        reply(msg["id"], played)

    try:
        while True:
            msg = await inbox.get()
            if msg is None or msg.get("type") == "end":
                return
            op, a = msg.get("op"), msg.get("args") or {}
            if op == "slice":
                task = loop.create_task(run_slice(msg))
                pending_calls.add(task)
                task.add_done_callback(pending_calls.discard)
                continue
            assert crowd is not None, f"{op} needs a ramp crowd"
            value: Any = None
            if op == "add_users":
                await crowd.add_users([(u, at - off) for u, at in a["users"]])
            elif op == "start_rate":
                crowd.start_rate(a["step"], a["offsets"], a["t0"] - off, a["index"])
            elif op == "pending":
                value = await crowd.pending(a["index"], a["hold_start"] - off,
                                            a["hold_end"] - off)
            elif op in _AS_SENT:
                value = getattr(crowd, op)(**a)
                if asyncio.iscoroutine(value):
                    value = await value
            reply(msg["id"], value)
    finally:
        if crowd is not None:
            crowd.user_stop.set()
        for t in pending_calls:
            t.cancel()
