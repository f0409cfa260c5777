"""The seam between the coordinator and its workers (see the package docstring for the full
contract): the picklable WorkerSpec, the channel a worker talks through, and the launcher."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from llmbench.client.request import RequestParams, Timeouts
from llmbench.client.target import Target

FLUSH_S = 0.05              # seconds between record batches at most (the package docstring)
BATCH = 256


@dataclass
class WorkerTarget:
    """One server a worker sends to: the harness's TargetSpec without what only the
    coordinator does (preflight, server scrapes)."""

    target: Target
    name: str = "main"
    path: str | None = None
    run_id: str = "r"
    salt: Any = None                           # the target's workload.salt.Salt (picklable)


@dataclass
class WorkerSpec:
    """What a worker process is sent to run: its id, its plan and its targets."""
    worker_id: int
    plan: Any                                  # a llmbench.workers.plan value (picklable)
    targets: list[WorkerTarget]
    params: RequestParams = field(default_factory=RequestParams)
    timeouts: Timeouts = field(default_factory=Timeouts)
    max_in_flight: int = 80                    # connections per target
    served_by_header: str | None = None
    grace_s: float = 3.0
    # counts a reply's tokens when the server reports none (coordinator.counter_spec, never
    # "server"); None: the reply's token events are its count
    tokenizer: str | None = None
    clock_offset_s: float = 0.0                # coordinator_time = worker_time + offset
    workers: int = 1                           # how many workers the run has (for the note)


class Channel(Protocol):
    """The worker's end."""

    def send(self, msg: dict[str, Any]) -> None: ...

    async def recv(self) -> dict[str, Any] | None: ...


class WorkerLink(Protocol):
    """The coordinator's end of one worker."""

    worker_id: int
    clock_offset_s: float

    def send(self, msg: dict[str, Any]) -> None: ...

    async def recv(self) -> dict[str, Any] | None: ...

    def exit_note(self) -> str: ...

    def kill(self) -> None: ...

    async def close(self, timeout_s: float = 5.0) -> None: ...


class Launcher(Protocol):
    def launch(self, spec: WorkerSpec) -> WorkerLink: ...
