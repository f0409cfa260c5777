"""A sweep: each setting's ramp in brief, the server's state, and sweep.json (``Sweep``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, Mapping

from llmbench.errors import EXIT_OK
from llmbench.results.contract import JSONObject, Part, ordered, part
from llmbench.results.jsonfile import RunFolderError, read_object
from llmbench.results.search import Search
from llmbench.results.telemetry import ServerIdentity
from llmbench.results.summary import SCHEMA_VERSION, Summary
from llmbench.results.step import HeldInterval
from llmbench.results.verdict import Knee
from llmbench.results.run import ResultFile, Run, _version

@dataclass
class StepBrief(Part):
    """A ramp step as sweep.json keeps it: its load, held, and a few numbers of its summary
    (flat, beside them)."""

    load: float = 0.0
    held: bool | None = None
    summary: Summary = field(default_factory=Summary)

    def to_dict(self) -> dict[str, Any]:
        return ordered({"load": self.load, "held": self.held, **self.summary.to_dict(),
                        **self.extra}, self.read_keys)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "StepBrief":
        rest = {k: v for k, v in data.items() if k not in ("load", "held")}
        return cls(load=data.get("load", 0.0), held=data.get("held"),
                   summary=Summary.from_dict(rest), read_keys=tuple(data))


def _probed(s: "ServerState") -> bool:
    return s.samples is not None


@dataclass
class ServerState(Part):
    """A sweep setting's server in its own words during the ramp (analysis.finish.server_state,
    from the probe's samples in server.jsonl): the most it ran and kept waiting at once, its
    slots, KV cache and memory; or, when the probe found nothing, only why (``note``)."""

    kind: str | None = None
    note: str | None = part(None, omit="none")
    samples: int | None = part(None, when=_probed)
    max_running: float | None = part(None, when=_probed)
    max_waiting: float | None = part(None, when=_probed)
    slots: float | None = part(None, when=_probed)
    max_kv_cache_usage: float | None = part(None, when=_probed)
    max_vram_bytes: float | None = part(None, when=_probed)
    max_ram_bytes: float | None = part(None, when=_probed)
    preemptions: float | None = part(None, when=_probed)
    models_loaded: list[str] | None = part(None, when=_probed)


@dataclass
class SweepSetting(Part):
    """One setting of a sweep: its server's fate (``status``) and its ramp's answer (``held``)."""

    setting: dict[str, str] = field(default_factory=dict)
    name: str = ""
    status: str = "starting"
    run_dir: str | None = None
    log: str | None = None
    held: float | None = None
    held_interval: HeldInterval | None = None
    exit_code: int | None = None
    error: str | None = None
    log_tail: list[str] | None = None
    server_pid: int | None = part(None, omit="none")
    ready_s: float | None = part(None, omit="none")
    verdict: str | None = part(None, omit="none")
    verdict_kind: str | None = part(None, omit="none")
    knee: Knee | None = part(None, omit="none")
    steps: list[StepBrief] | None = part(None, omit="none")
    server_state: ServerState | None = part(None, omit="none")
    server_exit_code: int | None = part(None, omit="none")
    server: ServerIdentity | None = part(None, omit="none")
    # ramp --find: the setting's search (its limit is ``held``)
    search: Search | None = part(None, omit="none")
    # the step at the sweep's common load, once the sweep finished (``finished``)
    at_common_load: StepBrief | None = part(None, when=lambda s: s.finished)
    finished: bool = field(default=False, repr=False, compare=False,
                           metadata={"internal": True})


@dataclass
class ServerDifference(Part):
    """A setting's server against the first setting's, as the servers said what they were."""

    setting: str = ""
    against: str = ""
    text: str = ""


# -- the sweep -------------------------------------------------------------------------------

@dataclass
class Sweep(ResultFile, Part):
    """A sweep folder's sweep.json, typed: the settings it tried (``settings``, ``grid``), each
    setting's ramp and fate (``results``), and the answer (``answer``, ``best``; a tie broken at
    the sweep's common load: ``common_load``, ``tie_break``, and how the servers differed:
    ``server_differences``). ``interrupted``: stopped by a signal; ``resumed_at``: when
    ``--resume`` took it up again; ``exit_code`` the command line's."""

    schema_version: int = SCHEMA_VERSION
    kind: Literal["sweep"] = "sweep"
    status: str = "complete"
    started_at: float = 0.0
    settings: dict[str, list[str]] | None = None
    grid: list[dict[str, str]] | None = None
    labels: dict[str, str] = field(default_factory=dict)
    config: JSONObject = field(default_factory=dict)
    unit: str | None = None
    results: list[SweepSetting] = field(default_factory=list)
    environment: JSONObject = field(default_factory=dict)
    pid: int | None = part(None, omit="none")
    error: str | None = part(None, omit="none")
    answer: str | None = part(None, omit="none")
    best: dict[str, str] | None = part(None, when=lambda r: r.answer is not None)
    interrupted: bool | None = part(None, omit="none")
    finished_at: float | None = part(None, omit="none")
    resumed_at: list[float] | None = part(None, omit="none")
    exit_code_saved: int | None = part(None, key="exit_code", omit="none")
    common_load: float | None = part(None, when=lambda r: r.tie_break is not None)
    server_differences: list[ServerDifference] | None = part(None, omit="none")
    tie_break: list[JSONObject] | None = part(None, omit="none")
    path: Path | None = field(default=None, repr=False, compare=False,
                              metadata={"internal": True})

    KEY_ORDER: ClassVar[tuple[str, ...]] = (
        "schema_version", "kind", "status", "started_at", "t0_perf", "labels", "config",
        "workload", "environment", "pid", "error", "settings", "grid", "unit", "results",
        "answer", "best", "interrupted", "finished_at", "resumed_at", "exit_code",
        "common_load", "server_differences", "tie_break")
    FILE: ClassVar[str] = "sweep.json"

    @property
    def exit_code(self) -> int:
        """The sweep command's exit code, as sweep.json saved it (0 when it did not)."""
        return self.exit_code_saved if self.exit_code_saved is not None else EXIT_OK

    @property
    def load_unit(self) -> str:
        """What the ramps' load counts: "users" or "req/s"."""
        return self.unit or "users"

    @classmethod
    def load(cls, folder: str | Path) -> "Sweep":
        """The sweep in ``folder``; a RunFolderError, one line, for anything else."""
        folder = Path(folder)
        f = folder / "sweep.json"
        if not f.is_file():
            raise RunFolderError(f"{folder}: no sweep.json here; give a folder made by "
                                 "llmbench sweep")
        return cls.from_dict(read_object(f, "sweep.json"), folder)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], path: str | Path | None = None) -> "Sweep":
        """The sweep a sweep.json holds; a value of the wrong kind is one RunFolderError."""
        _version(data, path)
        sweep = cls._read(lambda: super(Sweep, cls).from_dict(data), path)
        sweep.path = None if path is None else Path(path)
        return sweep


def load_result(folder: str | Path) -> "Run | Sweep":
    """What ``folder`` holds: its run (run.json), else its sweep (sweep.json)."""
    folder = Path(folder)
    if not (folder / "run.json").is_file() and (folder / "sweep.json").is_file():
        return Sweep.load(folder)
    return Run.load(folder)
