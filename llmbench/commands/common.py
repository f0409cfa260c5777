"""What every command shares: the plan's common part (plain data), its run folder, and the
closing of a command that measured nothing."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Generic, TypeVar

from llmbench.client.request import RequestParams, Timeouts
from llmbench.errors import EXIT_INTERRUPTED
from llmbench.load.harness import PreflightError
from llmbench.report import outcome as shown
from llmbench.report.wiring import Watch
from llmbench.results.writer import RunFolder
from llmbench.client.target import Target
from llmbench.workload import Workload

__all__ = ["Common", "Done", "Watch", "agent_preflight", "failed", "folder_of", "interrupted"]


Result = TypeVar("Result")


@dataclass
class Done(Generic[Result]):
    """What a finished command leaves: its result (analysis.finish's Run or a sweep's Sweep,
    handed on without naming its type; None if nothing was measured), the exit code, and the
    folder (``sweep`` and the Python API read all three)."""

    run: Result | None
    code: int
    run_dir: Path | None
    error: str | None = None         # nothing measured: why (the line printed after "error:")


@dataclass
class Common:
    """The parts of a plan every command has (from the target, workload, request and output
    option groups): data only, read by the harness's wiring (report.wiring) and the
    assembler (analysis.finish)."""

    target: Target
    workload: Workload
    params: RequestParams = field(default_factory=RequestParams)
    timeouts: Timeouts = field(default_factory=Timeouts)
    count_tokens: Callable[[str], int] | None = None
    served_by_header: str | None = None
    server_probe: str = "auto"
    out: Path | None = Path("results")
    labels: dict[str, str] = field(default_factory=dict)
    workers: int | str = 1                 # --workers N|auto (1: this process only)
    tokenizer: str | None = None           # the --tokenizer spec, rebuilt in each worker
    ray: Any = None                        # --ray: the joined cluster (workers.ray_launcher)
    # the options that made this plan, written to the run folder as config.toml so that
    # `llmbench CMD --config RUN/config.toml` replays it (spec.replay_of; secrets left out)
    replay: dict[str, Any] | None = None
    # what to sample of the server and its machine (servers.telemetry.TelemetrySpec; None: nothing)
    telemetry: Any = None
    network_floor: str = "auto"            # --network-floor auto|on|off (client/floor.py)
    # who watches it (the harness's observers, -q/-v, --mlflow): not what is measured
    watch: Watch = field(default_factory=Watch)


def folder_of(c: Common, kind: str, config: dict[str, Any]) -> RunFolder:
    """The plan's ``RunFolder``: its run.json's ``config``, and config.toml's text."""
    replay = None
    if c.replay is not None:
        from llmbench.specs.config import replay_values, to_toml
        values, left_out = replay_values(c.replay["values"], c.replay.get("fields") or {})
        replay = to_toml(kind, values, left_out, c.replay.get("salt"))
    return RunFolder(c.out, kind, c.target, config, c.labels, replay)


def interrupted(folder: RunFolder) -> Done:
    """The Done of a command stopped by a signal outside its load (RunFolder left it)."""
    assert folder.stopped is not None
    run, message = folder.stopped
    return Done(run, EXIT_INTERRUPTED, folder.path, message)


def failed(exc: PreflightError, folder: RunFolder, target: Target) -> Done:
    """One line on stderr, a run.json that says why nothing was measured, as the Done of a
    command that measured nothing."""
    message = target.redact(str(exc)) or ""
    print(f"error: {message}", file=sys.stderr)
    folder.failed(message, "interrupted" if exc.exit_code == EXIT_INTERRUPTED else "failed")
    board = shown.board_now()
    if board is not None:
        board.failed(message)
    return Done(None, exc.exit_code, folder.path, message)


def agent_preflight(c: Common) -> dict[str, Any] | None:
    """The first request's extra fields for a run of agents: the first session's tools (as
    its calls send them), so a server that refuses tools fails at once, in one line, before
    the load; None for chat, or when --tools' own are in every body already."""
    from llmbench.workload.agents import is_agent
    convs = c.workload.conversations
    if not len(convs) or not is_agent(convs[0]) or "tools" in (c.params.extra_body or {}):
        return None
    from llmbench.wire.agents import request_fields
    return request_fields(c.target.api, list(convs[0].tools), None, None) or None
