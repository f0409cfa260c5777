"""A run, made of parts: what it is and where it stands (``RunState``), its summary, steps
and verdict, and everything else it found (``Findings``, a probe's ``Router``)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterator, Literal, Mapping, TypeVar

from llmbench.errors import (EXIT_INTERRUPTED, EXIT_OK, EXIT_OVERLOADED, EXIT_NOT_JUDGED,
                             EXIT_THRESHOLD, EXIT_WRITE)
from llmbench.results.abandon import Abandonment
from llmbench.results.cache import PromptCache
from llmbench.results.contract import (JSONObject, JSONValue, Part, WrongType, _at, kind_of,
                                       part, read_part)
from llmbench.results.jsonfile import RunFolderError, read_object, write_json
from llmbench.results.network import NetworkFloor
from llmbench.results.reset import CacheReset
from llmbench.results.search import Search
from llmbench.results.sessions import Sessions
from llmbench.results.telemetry import RunTelemetry, ServerIdentity, Telemetry
from llmbench.results.summary import READABLE_SCHEMAS, SCHEMA_VERSION, Summary, _CONFIG_SECTIONS
from llmbench.results.step import (Check, ClassStep, HeldInterval, OutageSpan, RepeatOf, Repeats,
                                   Step, _repeat_code, ladder, ramp_code, search_code)
from llmbench.results.verdict import Isolation, Verdict

R = TypeVar("R")
F = TypeVar("F", bound=Part)


class _Found(Part):
    """A part typed from the dict an analysis returns; None when it found nothing."""

    @classmethod
    def of(cls: type[F], found: Mapping[str, Any] | None) -> F | None:
        return None if found is None else cls.from_dict(found)

if TYPE_CHECKING:
    import pandas

    from llmbench.results.latencies import Latencies


@dataclass
class Overhead(Part):
    """Router minus direct for one statistic of a probe step, with its 95 % interval."""

    router_ms: float | None = None
    direct_ms: float | None = None
    overhead_ms: float | None = None
    ci_ms: list[float] | None = None
    significant: bool = False


@dataclass
class ProbeStep(Part):
    """One step of ``llmbench probe``: the same users through the router and straight to the
    backend, each path's (slim) summary, and the overhead of four statistics."""

    index: int = 0
    users: int = 0
    router: Summary = field(default_factory=Summary)
    direct: Summary = field(default_factory=Summary)
    ttft_p50: Overhead = field(default_factory=Overhead)
    ttft_p95: Overhead = field(default_factory=Overhead)
    e2el_p50: Overhead = field(default_factory=Overhead)
    itl_p50: Overhead = field(default_factory=Overhead)
    monitor: JSONObject = field(default_factory=dict)

    def overhead(self, name: str) -> Overhead:
        """'ttft_p50', 'ttft_p95', 'e2el_p50' or 'itl_p50'."""
        return getattr(self, name)


@dataclass
class ServerProbe(Part):
    """What the server's own metrics probe found (``--server-probe``): its kind (None when it
    found nothing), why not (``note``), how many samples (in server.jsonl), and a run's view
    of them (``verdict.server_view``)."""

    kind: str | None = None
    note: str | None = None
    samples: int = 0
    view: JSONObject | None = part(None, omit="none")


# -- the run ---------------------------------------------------------------------------------

RunKind = Literal["run", "ramp", "probe"]


def _body(*kinds: str) -> Callable[["Run"], bool]:
    """Whether a run's part is written: once it measured something, for these kinds."""
    return lambda r: r.state.measured and r.kind in kinds


_measured = _body("run", "ramp", "probe")
_run_body, _ramp_body, _probe_body = _body("run"), _body("ramp"), _body("probe")
_outages_body = _one_probe = _body("run", "ramp")


@dataclass
class RouterBound(Part):
    """Where a probe's router became the bottleneck: the first load whose TTFT overhead grew
    beyond the first step's interval while the direct path stayed flat."""

    users: int = 0
    overhead_ms: float | None = None
    first_overhead_ms: float | None = None
    direct_ttft_p50_ms: float | None = None


@dataclass
class Backend(Part):
    """One backend behind a router, from the replies that named it."""

    requests: int = 0
    share: float = 0.0
    failed: int = 0
    ttft_p50_ms: float | None = None
    ttft_p95_ms: float | None = None
    itl_p50_ms: float | None = None
    cache_hit_rate: float | None = None         # None: not reported


@dataclass
class Affinity(Part):
    """Whether a router kept conversations on one backend: of the conversations of several
    turns, the share of next turns on the same backend and of whole conversations on one."""

    conversations: int = 0
    same_backend_next_turn: float = 0.0
    whole_conversation_on_one_backend: float = 0.0


@dataclass
class Backends(_Found):
    """The spread of a router's load over its backends (analysis.backends): each backend, how
    many, the imbalance (max/mean requests) and its coefficient of variation, and affinity."""

    backends: dict[str, Backend] = field(default_factory=dict)
    count: int = 0
    imbalance: float | None = None
    cv: float | None = None
    affinity: Affinity | None = part(None, omit="none")


@dataclass
class InFlight(Part):
    """One backend in a router's own counters: its mean requests in flight and its share."""

    mean_in_flight: float = 0.0
    share: float = 0.0


@dataclass
class RouterCounters(_Found):
    """A router's own per-backend in-flight counts, averaged over its samples (NOMYO's
    /api/usage): each backend's share of the load when no reply names its backend."""

    samples: int = 0
    backends: dict[str, InFlight] = field(default_factory=dict)


@dataclass
class LostWorker(Part):
    """A worker process that died during the run: its number, what happened, its records."""

    worker: int = 0
    error: str = ""
    records: int = 0


@dataclass
class Workers(_Found):
    """The worker processes (or Ray actors) the load ran on, and any that died (``crashed``)."""

    requested: int | str | None = None
    count: int = 0
    launcher: str = ""
    crashed: list[LostWorker] = field(default_factory=list)
    records: dict[str, int] = field(default_factory=dict)
    count_tokens: str | None = None


    def lost(self) -> str | None:
        """'worker 1 crashed (killed by SIGKILL)' when worker processes died during the run."""
        return "; ".join(f"worker {c.worker} {c.error}" for c in self.crashed) or None


@dataclass
class OutputLength(Part):
    """Whether the replies were as long as asked (analysis.checks); ``approximate``: counted by
    the client's tokenizer; ``message``: one sentence when most missed."""

    checked: int = 0
    asked_mean: float | None = None
    received_mean: float | None = None
    longer: int = 0
    shorter: int = 0
    approximate: bool = False
    message: str | None = None


@dataclass
class RunState(Part):
    """What a run is and where it stands, as run.json's top-level keys (an inline part of
    ``Run``). ``status``: "running", "complete", "partial", "failed" or "interrupted";
    ``t0_perf``: the perf clock its records count from; ``pid``: the process writing it, while
    running; ``error``: why it measured nothing."""

    schema_version: int = SCHEMA_VERSION
    kind: RunKind = "run"
    status: str = "complete"
    started_at: float = 0.0
    t0_perf: float | None = part(None, omit="none")
    labels: dict[str, str] = field(default_factory=dict)
    pid: int | None = part(None, omit="none")
    error: str | None = part(None, omit="none")
    # a killed run whose summary ``report`` rebuilt from requests.jsonl
    note: str | None = part(None, omit="none")
    rebuilt_at: float | None = part(None, omit="none")
    finished_at: float | None = part(None, omit="none")
    exit_code: int | None = part(None, omit="none")
    # known in memory, never saved: whether run.json holds figures yet (False: the one written
    # at the start, or a failed preflight's), a signal's interruption (run.json says
    # "partial"), who writes a run still in progress (results.lock.writer_text, read from the
    # folder's lock: a reader reports what has finished and leaves run.json be), and each
    # repeat's exit code when the ramp ran them here (run.json has their steps only)
    measured: bool = field(default=True, repr=False, compare=False,
                           metadata={"internal": True})
    interrupted: bool | None = field(default=None, repr=False, compare=False,
                                     metadata={"internal": True})
    live_writer: str | None = field(default=None, repr=False, compare=False,
                                    metadata={"internal": True})
    repeat_codes: list[int] | None = field(default=None, repr=False, compare=False,
                                           metadata={"internal": True})


@dataclass
class Router(Part):
    """A probe's findings about the router in front of the backends: where the overhead is
    bound, the spread over backends (the router's own counters when no reply named one, and
    what that means: ``unidentified``)."""

    bound: RouterBound | None = part(None, key="router_bound", when=_probe_body)
    backends: Backends | None = part(None, when=_probe_body)
    counters: RouterCounters | None = part(None, key="router_counters", when=_probe_body)
    unidentified: str | None = part(None, key="backends_unidentified", omit="none")
    # each path's server probe: {"router": ServerProbe, "direct": ...} (run.json's server_probe)
    server_probes: dict[str, ServerProbe] = part(default_factory=dict, key="server_probe",
                                                 when=_probe_body, shared=True)
    steps: list[ProbeStep] = part(default_factory=list, key="steps", when=_probe_body,
                                  shared=True)


@dataclass
class Findings(Part):
    """Everything a run found beside its summary, steps and verdict, each a typed member
    (None or empty: not found, not asked). Written as run.json's top-level keys (an inline
    part of ``Run``)."""

    monitor: JSONObject | None = part(None, when=_run_body)
    router: Router = part(default_factory=Router, inline=True)
    # (perf time, users) each time the number of users changed
    user_changes: list[tuple[float, int]] = part(default_factory=list, when=_ramp_body)
    outages: list[OutageSpan] = part(default_factory=list, when=_outages_body)
    # what every measured run.json carries about the client's view (analysis.checks)
    output_length: OutputLength | None = part(None, when=_measured)
    not_streamed: int = part(0, when=_measured)
    connection_resends: int = part(0, when=_measured)
    prompt_cache: PromptCache | None = part(None, when=_measured)
    thresholds: list[Check] = part(default_factory=list, when=_run_body)
    # run --scenario's classes (their checks are among ``thresholds`` too, tagged with the class)
    classes: dict[str, ClassStep] = part(default_factory=dict, omit="empty")
    # agent sessions over the run (None: no request belonged to one; analysis.sessions)
    sessions: Sessions | None = part(None, omit="none")
    # what the server's metrics probe found (a probe has one per path: router.server_probes)
    server_probe: ServerProbe | None = part(default_factory=ServerProbe, when=_one_probe,
                                            shared=True)
    # what the server was, and its machine over the whole run (None: not known, not sampled)
    server: ServerIdentity | None = part(None, omit="none")
    run_telemetry: RunTelemetry | None = part(None, key="telemetry", omit="none")
    closed_loop_note: str | None = part(None, when=_ramp_body)
    trace: JSONObject | None = part(None, omit="none")
    prefix_cache: JSONObject | None = part(None, omit="none")
    network: NetworkFloor | None = part(None, omit="none")
    workers: Workers | None = part(None, omit="none")
    repeat: RepeatOf | None = part(None, omit="none")
    repeats: Repeats | None = part(None, omit="none")
    abandonment: Abandonment | None = part(None, omit="none")
    isolation: Isolation | None = part(None, omit="none")
    # --reset-cache: each time the server's prompt cache was emptied, and whether it took
    cache_resets: list[CacheReset] = part(default_factory=list, omit="empty")

    @property
    def telemetry(self) -> Telemetry | None:
        """The server's machine over the whole run (run.json's telemetry.window)."""
        return self.run_telemetry.window if self.run_telemetry is not None else None


class ResultFile:
    """What a run and a sweep share as the one file of their folder (``FILE``): writing it,
    reading it, the exit code, and the ramp's settings as given (``config.ramp``)."""

    FILE: ClassVar[str]
    config: JSONObject
    path: Path | None

    @property
    def exit_code(self) -> int:
        raise NotImplementedError

    def _repr_html_(self) -> str | None:
        """In Jupyter: a run's verdict, summary table and main charts (inline SVG, no
        network), a sweep's answer and settings (llmbench/report/notebook.py)."""
        from llmbench.results.display import html_of
        return html_of("run", self)

    @property
    def partial(self) -> bool:
        """True when it was interrupted or cut short: its numbers cover part of the plan."""
        return self.status != "complete"      # type: ignore[attr-defined]

    @property
    def passed(self) -> bool:
        """Whether the command line exits 0 for this result (``exit_code``)."""
        return self.exit_code == EXIT_OK

    @property
    def thresholds_asked(self) -> list[str]:
        """A ramp's thresholds, as given."""
        return [str(t) for t in _list(_section(self.config, "ramp").get("thresholds"))]

    @property
    def repeats_per_ramp(self) -> int:
        """A ramp's ``--repeat``, 1 when not given."""
        got = _section(self.config, "ramp").get("repeat", 1)
        return got if isinstance(got, int) else 1

    def save(self, folder: str | Path | None = None) -> dict[str, Any]:
        """Write the file into ``folder`` (default: ``path``), atomically; returns the dict
        written. No folder: nothing is written."""
        data = self.to_dict()       # type: ignore[attr-defined]
        where = Path(folder) if folder is not None else self.path
        if where is not None:
            write_json(where / self.FILE, data)
            self.path = where
        return data

    @classmethod
    def _read(cls, read: Callable[[], R], path: str | Path | None) -> R:
        """``read()``, a WrongType in it one RunFolderError naming the file and the key."""
        try:
            return read()
        except WrongType as exc:
            where = f"{Path(path) / cls.FILE}: " if path is not None else f"{cls.FILE}: "
            raise RunFolderError(f"{where}{exc.key}: {exc.what}; fix or remove that key") \
                from None


# run.json's keys in the order llmbench has always written them (the parts' fields are
# grouped by what they hold; the file keeps one order)
RUN_KEYS = ("schema_version", "kind", "status", "started_at", "t0_perf", "labels", "config",
            "workload", "environment", "pid", "error", "monitor", "summary", "steps", "verdict",
            "search", "router_bound", "backends", "router_counters", "user_changes", "outages",
            "output_length", "not_streamed", "connection_resends", "prompt_cache", "thresholds",
            "classes", "sessions", "server_probe", "server", "telemetry", "closed_loop_note",
            "trace", "prefix_cache", "network", "workers", "repeat", "repeats",
            "backends_unidentified", "abandonment", "isolation", "cache_resets", "note",
            "rebuilt_at", "finished_at", "exit_code")


@dataclass
class Run(ResultFile, Part):
    """One run folder's run.json, typed, made of parts (docs/results.md says what each holds;
    a probe's steps are ``findings.router.steps``). ``path`` is the folder (None for a run not
    written to disk).

    A run the pipeline makes writes the keys of its kind; ``state.measured=False`` is the
    run.json of a run that has not measured anything yet (status "running", with its ``pid``)
    or never will (a failed preflight, with its ``error``). A sweep is its own type (``Sweep``)."""

    KEY_ORDER: ClassVar[tuple[str, ...]] = RUN_KEYS
    FILE: ClassVar[str] = "run.json"

    state: RunState = part(default_factory=RunState, inline=True)
    config: JSONObject = field(default_factory=dict)
    workload: JSONObject | None = part(None, omit="none")
    environment: JSONObject = field(default_factory=dict)
    summary: Summary | None = part(None, when=_run_body)
    steps: list[Step] = part(default_factory=list, when=_ramp_body, shared=True)
    verdict: Verdict | None = part(None, when=_ramp_body)
    search: Search | None = part(None, omit="none")
    findings: Findings = part(default_factory=Findings, inline=True)
    path: Path | None = field(default=None, repr=False, compare=False,
                              metadata={"internal": True})

    @property
    def kind(self) -> RunKind:
        """"run", "ramp" or "probe" (``state.kind``)."""
        return self.state.kind

    @property
    def status(self) -> str:
        """How the run stands (``state.status``)."""
        return self.state.status

    # -- what a run says -----------------------------------------------------------------------
    @property
    def measured_anything(self) -> bool:
        """Whether run.json holds figures: a run's summary, a ramp's or a probe's steps."""
        return self.summary is not None or bool(self.steps or self.findings.router.steps)

    @property
    def held(self) -> float | None:
        """A ramp's answer: the most users (or the highest rate) whose step held; None when no
        step held or this is not a ramp. A search's is the limit it found (a load that held
        a short hold and broke its sustain is not it)."""
        if self.search is not None:
            return self.search.limit if self.search.limit else None
        loads = [s.load for s in self.steps if s.held]
        return max(loads) if loads else None

    def ladder(self) -> list[Step]:
        """The steps as a ramp that climbed, what the verdict, the charts against load and
        compare read: for a search, each load's last counted step (a drifting step run again
        counts once; the confirmation is its load's), by load; else the steps."""
        return ladder(self.steps, self.search)

    @property
    def held_interval(self) -> HeldInterval | None:
        """A ramp run with ``--repeat``: users held over the repeats (median, min, max)."""
        return self.findings.repeats.held if self.findings.repeats is not None else None

    def section(self, name: str) -> JSONObject:
        """A section of the run's config (``target``, ``load``, ``ramp``...), empty when it has
        none: the config as the command wrote it, read by key."""
        return _section(self.config, name)

    @property
    def target(self) -> JSONObject:
        """Where the load went: the config's target (a probe's: its router)."""
        return self.section("target") or self.section("router")

    @property
    def load_config(self) -> JSONObject:
        """A run's load level as configured (concurrency, rate, arrival, requests...)."""
        return _section(self.config, "load")

    @property
    def load_level(self) -> float | None:
        """A run's load in one figure: its concurrency, else its rate."""
        got = self.load_config.get("concurrency") or self.load_config.get("rate")
        return got if isinstance(got, (int, float)) and not isinstance(got, bool) else None

    @property
    def load_unit(self) -> str:
        """What a ramp's load counts: "users", or "req/s" for ``--by rate``."""
        by = _section(self.config, "ramp").get("by", "users")
        return "users" if by == "users" else "req/s"

    @property
    def exit_code(self) -> int:
        """The command line's exit code for this run, from what run.json holds: the one rule
        ``llmbench run`` and ``ramp`` exit with (docs/exit-codes.md has the codes). A partial
        run read back from a folder counts as interrupted (a lost worker says so in run.json).
        A run that measured nothing (a failed preflight) exits 1 here: which of 3, 5 or 2 the
        command gave is in its error line, not in run.json."""
        f = self.findings
        if self.status in ("failed", "interrupted") and not self.measured_anything:
            return EXIT_INTERRUPTED if self.status == "interrupted" else 1
        if self.status == "failed":
            return EXIT_WRITE
        if self.state.interrupted:
            return EXIT_INTERRUPTED
        if f.workers is not None and f.workers.crashed:
            return EXIT_OVERLOADED
        if self.status == "partial" and self.state.interrupted is None and self._interrupted():
            return EXIT_INTERRUPTED
        if self.kind == "run":
            return EXIT_THRESHOLD if any(not c.ok for c in f.thresholds) else EXIT_OK
        if self.kind == "ramp":
            ramp = _section(self.config, "ramp")
            want = ramp.get("expect")
            expect = float(want) if isinstance(want, (int, float)) else None
            planned = len(_list(ramp.get("steps"))) or None
            rep = (f.repeats.representative if f.repeats else 1) - 1
            if f.repeats and self.state.repeat_codes:
                codes = self.state.repeat_codes
                return (EXIT_OVERLOADED if EXIT_OVERLOADED in codes else
                        codes[rep] if 0 <= rep < len(codes) else codes[-1])
            if f.repeats:
                codes = [_repeat_code(r, expect, planned) for r in f.repeats.runs]
                if EXIT_OVERLOADED in codes:
                    return EXIT_OVERLOADED
                if 0 <= rep < len(codes):
                    return codes[rep]
            if self.search is not None:
                return search_code(self.search, self.ladder(),
                                   self.verdict.kind if self.verdict else None, expect)
            return ramp_code(self.steps, self.verdict.kind if self.verdict else None, expect,
                             planned)
        if self.kind == "probe" and f.router.steps and not any(
                s.ttft_p50.ci_ms for s in f.router.steps):
            return EXIT_NOT_JUDGED      # no step had enough requests on both paths to compare
        return EXIT_OK

    def _interrupted(self) -> bool:
        """A partial run stopped by a signal (not cut short by a later repeat's failure)."""
        if self.findings.repeats:
            return any(r.status == "partial" for r in self.findings.repeats.runs)
        return True

    # -- its folder ------------------------------------------------------------------------------
    def requests_path(self) -> Path | None:
        return None if self.path is None else self.path / "requests.jsonl"

    def iter_request_rows(self) -> Iterator[dict[str, Any]]:
        """requests.jsonl, one dict per request, as written (token times in microseconds)."""
        p = self.requests_path()
        if p is None or not p.exists():
            return iter(())
        from llmbench.records.record import json_lines
        return json_lines(p)            # a torn or damaged line: skipped and counted

    def requests(self) -> "pandas.DataFrame":
        """A pandas DataFrame, one row per request (pandas comes with ``datasets``)."""
        from llmbench.results.table import request_frame
        return request_frame(self)

    def latencies(self) -> "Latencies":
        """Per-request latencies, as columns (``results.latencies``: who reads them, and why)."""
        from llmbench.results.latencies import read_latencies
        p = self.requests_path()
        return read_latencies(p if p is not None else Path("/nonexistent/requests.jsonl"))

    @classmethod
    def load(cls, folder: str | Path) -> "Run":
        """The run in ``folder``, as its run.json holds it, every schema version written so
        far; a RunFolderError, one line, for anything else (a sweep folder: ``load_result``)."""
        folder = Path(folder)
        f = folder / "run.json"
        if f.is_file():
            return cls.from_dict(read_object(f, "run.json"), folder)
        if (folder / "sweep.json").is_file():
            raise RunFolderError(f"{folder}: a sweep folder, not a run's; give one of its "
                                 "settings' run folders")
        raise RunFolderError(f"{folder}: no run.json here; give a run folder made by llmbench "
                             "run/ramp")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], path: str | Path | None = None) -> "Run":
        """The run a run.json holds; a value of another kind than its key holds is one
        RunFolderError naming the file and the key, not a raw exception later."""
        return cls._read(lambda: cls._from_dict(data, path), path)

    @classmethod
    def _from_dict(cls, data: Mapping[str, Any], path: str | Path | None = None) -> "Run":
        d = dict(data)
        _version(d, path)
        kind = d.get("kind") or "run"
        steps = d.get("steps")
        if ("steps" in d and not isinstance(steps, list)) or (
                kind == "ramp" and "steps" not in d
                and d.get("status") not in ("running", "failed", "interrupted")):
            raise RunFolderError(f"{path}: run.json has no list of steps; it was cut short or "
                                 "edited by hand")
        run = super().from_dict(d)
        for k, v in run.config.items():
            # the config's sections (target, load, request, ramp...) are objects, its leaves
            # anything: a section of another kind would trip every reader of it
            if k in _CONFIG_SECTIONS and v is not None and not isinstance(v, Mapping):
                raise WrongType(f"config.{k}", f"{kind_of(v)} where an object belongs")
        probe = d.get("server_probe")
        if isinstance(probe, Mapping):
            if kind == "probe":
                run.findings.server_probe = None
                run.findings.router.server_probes = {
                    k: _at(f"server_probe.{k}", read_part, ServerProbe, v)
                    for k, v in probe.items() if isinstance(v, Mapping)}
                if any(not isinstance(v, Mapping) for v in probe.values()):
                    raise WrongType("server_probe", "a path's probe that is not an object")
            else:
                run.findings.server_probe = _at("server_probe", read_part, ServerProbe,
                                                    probe)
        elif "server_probe" in d:
            run.findings.server_probe = None
            if probe is not None:
                raise WrongType("server_probe", f"{kind_of(probe)} where an object belongs")
        if isinstance(steps, list):
            for i, st in enumerate(steps):
                if not isinstance(st, dict) or (kind != "probe" and not isinstance(
                        st.get("summary"), dict)):
                    raise RunFolderError(f"{path}: step {i + 1} in run.json has no summary; it "
                                         "was cut short or edited by hand")
            if kind == "probe":
                run.findings.router.steps = [_at(f"steps.{i + 1}", read_part, ProbeStep, st)
                                             for i, st in enumerate(steps)]
            else:
                run.steps = [_at(f"steps.{i + 1}", read_part, Step, st)
                             for i, st in enumerate(steps)]
        if isinstance(run.extra.get("interrupted"), bool):
            run.state.interrupted = run.extra["interrupted"]      # kept as read, and known
        run.path = None if path is None else Path(path)
        return run


@dataclass
class RunResult(Run):
    """What ``llmbench.run(...)`` returns: a ``run`` that measured, so its ``summary`` is
    always there (``run.summary.ttft.p50`` with no None check); written and read as any Run."""

    summary: Summary = part(default_factory=Summary, when=_run_body)

    @classmethod
    def of(cls, run: Run) -> "RunResult":
        """``run`` as a RunResult (the same parts, not copies); a run with no summary is a
        ValueError (the API raises before: a run that measured nothing is an error)."""
        if run.summary is None:
            raise ValueError("a run with no summary measured nothing")
        return cls(**{f.name: getattr(run, f.name) for f in fields(Run)})


def _version(d: Mapping[str, Any], path: str | Path | None) -> None:
    """A schema version this llmbench reads (none: a folder from before it existed, 1)."""
    raw = d.get("schema_version")
    version = 1 if raw is None else raw
    if not isinstance(version, int) or version not in READABLE_SCHEMAS:
        where = f"{path}/run.json: " if path is not None else ""
        raise RunFolderError(f"{where}schema version {raw} is not the {SCHEMA_VERSION} this "
                             "llmbench reads; re-run it or use a matching llmbench version")


def _section(config: JSONObject, name: str) -> JSONObject:
    """A section of a run's config (``load``, ``ramp``...), empty when absent."""
    got = config.get(name)
    return got if isinstance(got, dict) else {}


def _list(v: JSONValue) -> list[JSONValue]:
    return v if isinstance(v, list) else []
