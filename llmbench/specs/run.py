"""``llmbench run``'s spec: one load level, its options as typed fields (the groups of
llmbench/specs/ and run's own) and their rules; the command itself: llmbench/commands/run.py
``perform_spec``."""

from __future__ import annotations

import math
import os
from dataclasses import InitVar, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from llmbench.specs import options as opt
from llmbench.specs.options import (FLAG, MAX_LOAD, NAMES, PATH, PERCENTILES, P_OUTPUT, P_VLLM,
                                    TEXTS, Kind, Spec, UsageError, option, thresholds)
from llmbench.specs.groups import (AbandonOpts, AgentOpts, OutputOpts, RequestOpts,
                                   RunWorkloadOpts, ServerOpts, TargetOpts, TelemetryOpts,
                                   WorkloadOpts)
from llmbench.specs.load import RunLoadOpts

if TYPE_CHECKING:
    from llmbench.specs.thresholds import Threshold

DEMO_RUN_S = 60.0        # `llmbench run` with no --url and no size: a one-minute demo


def _goodput(v: Any, flag: str) -> dict[str, float]:
    """ttft:500 (repeatable) or {"ttft": 500} -> {"ttft": 500.0} (ms)."""
    items = [f"{k}:{x}" for k, x in v.items()] if isinstance(v, dict) else TEXTS.parse(v, flag)
    slo = {}
    for gp in items:
        k, _, x = gp.partition(":")
        if k not in ("ttft", "tpot", "e2el") or not x:
            raise UsageError(f"{flag} {gp!r}: expected ttft:MS, tpot:MS or e2el:MS")
        try:
            slo[k] = float(x)
        except ValueError:
            raise UsageError(f"{flag} {gp!r}: {x!r} is not a number of milliseconds")
        opt.number(slo[k], f"{flag} {k}", lo=0, lo_open=True)
    return slo


GOODPUT = Kind(TEXTS.cli, _goodput, lambda v: [f"{k}:{x!r}" for k, x in v.items()],
               doc="dict[str, float] (ms)")


@dataclass(kw_only=True)
class VllmOpts(Spec):
    """vLLM's result JSON: whether to write it, and what it holds."""
    save_result: bool = option("Also write vLLM's result JSON (vllm bench serve's keys and types).", P_VLLM, "--save-result", kind=FLAG, default=False)
    save_detailed: bool = option("Add per-request arrays: ttfts, itls, input_lens, output_lens, start_times, generated_texts, errors.", P_VLLM, "--save-detailed", kind=FLAG, default=False)
    append_result: bool = option("Append the result as one more line of the file.", P_VLLM, "--append-result", kind=FLAG, default=False)
    result_dir: Path | str | None = option("Folder for the file (default: the current one).", P_VLLM, kind=PATH, metavar="DIR")
    result_filename: str | None = option("File name (default: vLLM's pattern of label, rate, concurrency, model and date).", P_VLLM, metavar="NAME")
    metadata: list[str] | dict[str, str] | None = option("Stored in the file (repeatable).", P_VLLM, "--metadata", kind=TEXTS, metavar="K=V")


@dataclass(kw_only=True)
class PrintOpts(Spec):
    """Which metrics and percentiles the summary prints."""
    percentile_metrics: tuple[str, ...] | str = option("Metrics to print percentiles for (ttft,tpot,itl,e2el).", P_OUTPUT, kind=NAMES, default="ttft,tpot,itl")
    metric_percentiles: tuple[float, ...] | str = option("Percentiles to print, e.g. 50,99.", P_OUTPUT, kind=PERCENTILES, default="99")
    goodput: dict[str, float] | list[str] | None = option("vLLM's goodput SLO, e.g. ttft:500 (repeatable).", P_OUTPUT, kind=GOODPUT, metavar="KEY:MS")


@dataclass(kw_only=True)
class GateOpts(Spec):
    """--threshold: the checks a run passes or fails."""
    threshold: list[Threshold | str] | None = thresholds()


@dataclass(kw_only=True)
class RunSpec(GateOpts, OutputOpts, PrintOpts, VllmOpts, AbandonOpts, RequestOpts, AgentOpts,
              RunWorkloadOpts, RunLoadOpts, TelemetryOpts, ServerOpts, TargetOpts):
    """``llmbench run``: one load level with vLLM-compatible numbers. Closed loop
    (``concurrency``), open loop (``rate`` requests/s, ``max_concurrency``) or a trace replayed
    on its own timestamps (``trace``); ``requests`` or ``duration`` (seconds) sizes it. With no
    ``url``, a one-minute demo against the built-in mock. Every field is the command line's
    option (``--max-tokens`` is ``output_tokens`` or ``max_tokens``); docs/cli.md lists
    them with their types and defaults."""

    command = "run"
    aliases = {"thresholds": "threshold"}
    groups = {"target": TargetOpts, "server": ServerOpts, "telemetry": TelemetryOpts,
              "load": RunLoadOpts, "prompts": WorkloadOpts, "agent": AgentOpts,
              "request": RequestOpts, "output": OutputOpts}
    # the option groups, passed whole (the package's docstring, llmbench/specs/__init__.py)
    target: InitVar[TargetOpts | None] = None
    server: InitVar[ServerOpts | None] = None
    telemetry: InitVar[TelemetryOpts | None] = None
    load: InitVar[RunLoadOpts | None] = None
    prompts: InitVar[WorkloadOpts | None] = None
    agent: InitVar[AgentOpts | None] = None
    request: InitVar[RequestOpts | None] = None
    output: InitVar[OutputOpts | None] = None
    thresholds: InitVar[list[Threshold | str] | None] = None

    def _check(self) -> Iterator[str]:
        if self.concurrency is not None and self.rate is not None:
            yield "give --concurrency (closed loop) or --rate (open loop), not both"
        if self.agents_on and self.trace is not None:
            yield ("--trace replays requests on their timestamps; agent sessions replay "
                   "with --workload agent --dataset FILE (docs/agents.md)")
        if self.trace is None and (self.trace_window is not None or self.trace_speed != 1.0):
            yield "--trace-speed and --trace-window need --trace FILE"
        if self.trace is not None:
            if self.concurrency is not None or self.rate is not None or self.duration is not None \
                    or self.warmup:
                yield ("--trace sets the load itself: drop --concurrency, --rate, "
                       "--duration and --warmup (--trace-window picks a part)")
            if not (self.trace_speed > 0 and math.isfinite(self.trace_speed)):
                yield f"--trace-speed {self.trace_speed:g}: must be a finite number above 0"
        if self.scenario is not None:
            yield from self.check_scenario()
        if self.concurrency is not None and self.concurrency < 1:
            yield "--concurrency must be at least 1"
        else:
            yield from opt.problem(opt.count, self.concurrency, "--concurrency", hi=MAX_LOAD)
        yield from opt.problem(opt.count, self.max_concurrency, "--max-concurrency")
        yield from opt.problem(opt.count, self.warmup, "--warmup", lo=0)
        if self.arrival not in ("gamma", "poisson", "constant"):
            yield f"--arrival {self.arrival!r}: choose gamma, poisson or constant"
        if not self.burstiness > 0 or not math.isfinite(self.burstiness):
            yield f"--burstiness {self.burstiness:g}: must be a finite number above 0 (1 = Poisson)"
        if self.duration is not None and self.duration <= 0:
            yield "--duration must be above 0"
        rate, requests = self.rate, self.requests
        if rate is not None and math.isinf(rate) and requests is None:
            yield "--rate inf sends everything at once: give --requests N"
        if requests is not None and requests < 1:
            yield "--requests must be at least 1"
        else:
            yield from opt.problem(opt.count, requests, "--requests")
        n = self.size()[0]
        if rate is not None and n is not None and self.duration is None \
                and n / rate > opt.MAX_DURATION_S:
            # --rate 1e-9: the schedule's gaps are 30 years each (a --duration ends it anyway)
            yield (f"--rate {rate:g}: {n} requests would take "
                   f"{n / rate / 86400:,.0f} days, and a run lasts at most 30 days: "
                   "raise --rate or give --duration")
        for m in self.percentile_metrics:
            if m not in ("ttft", "tpot", "itl", "e2el"):
                yield f"--percentile-metrics: unknown metric {m!r}; use ttft,tpot,itl,e2el"
        self.vllm_metadata()

    def check_scenario(self) -> Iterator[str]:
        """--scenario: a crowd of classes held for a time (the ramp's one step), so the
        options that size or shape a run otherwise are refused, each in one line."""
        for flag, given in (("--trace", self.trace is not None),
                            ("--requests", self.requests is not None),
                            ("--warmup", bool(self.warmup)),
                            ("--max-concurrency", self.max_concurrency is not None),
                            ("--save-result", self.save_result or self.append_result),
                            ("--prefix-hit-ratio",
                             getattr(self, "prefix_hit_ratio", None) is not None)):
            if given:
                why = {"--requests": "it runs for a time: give --duration instead",
                       "--save-result": "vLLM's result file holds one kind of traffic",
                       "--trace": "a trace sets its own load"}.get(
                           flag, "the classes' users and rates are the load")
                yield f"{flag} does not go with --scenario ({why}); drop one"
        if str(self.workers) != "1":
            yield "--scenario: traffic classes run in one process; drop --workers"
        if self.goodput:
            yield ("--goodput does not go with --scenario (each class has its own "
                   "thresholds: a class's within=, e.g. 'ttft.within<=2s', says its "
                   "goodput); drop --goodput")
        # results.schema's import waits for a spec that needs it (the command line's help)
        from llmbench.specs.thresholds import DEFAULT_PERCENTILES
        odd = [p for p in self.metric_percentiles if float(p) not in DEFAULT_PERCENTILES]
        if odd:
            yield (f"--metric-percentiles {odd[0]:g} with --scenario: a class's "
                   "figures have the 50th, 90th, 95th and 99th; pick among those")
        if self.arrival != "gamma":
            yield (f"--arrival {self.arrival} does not go with --scenario (its rate "
                   "classes arrive as gamma gaps, --burstiness 1 = Poisson); drop "
                   "--arrival")
        if self.rate is not None and math.isinf(self.rate):
            yield ("--rate inf does not go with --scenario: give the crowd's "
                   "requests per second")

    def size(self) -> tuple[int | None, float | None]:
        """(requests, duration_s) the run is sized by: what was asked, else 200 requests, or
        with no --url (the demo) a minute."""
        if self.requests is None and self.duration is None and self.trace is None:
            if self.url is None and self.rate is None and self.concurrency is None:
                return None, DEMO_RUN_S
            return 200, None
        return self.requests, self.duration

    def vllm_metadata(self) -> dict[str, str]:
        """``--metadata KEY=VALUE`` (repeatable) -> dict; one line naming the bad item."""
        out: dict[str, str] = {}
        for item in self.metadata or []:     # a dict given is K=V texts by now (TEXTS)
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise UsageError(f"--metadata {item!r}: expected KEY=VALUE, e.g. --metadata "
                                 "gpu=a100")
            out[key.strip()] = value.strip()
        return out

    def _check_result_dir(self) -> None:
        if not (self.save_result or self.append_result):
            return
        # the file name is known only after the run (vLLM's pattern has the date), so check
        # the folder it goes to: --result-dir, or the folder part of --result-filename
        folder = Path(self.result_dir) if self.result_dir is not None else Path(".")
        # vLLM creates --result-dir; the nearest folder that exists must let us do that
        existing = folder
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        if not existing.is_dir():
            raise UsageError(f"--result-dir {folder}: {existing} is a file; pick another folder")
        if not os.access(existing, os.W_OK | os.X_OK):
            raise UsageError(f"--result-dir {folder}: cannot write in {existing} (permission denied); pick another folder")
        if self.result_filename and folder.is_dir():
            check_writable(folder / self.result_filename, "--result-filename")

    # -- run --scenario ----------------------------------------------------------------------
    def scenario_load(self, scenario: Any) -> tuple[str, float]:
        """(by, load): the crowd's total users (--concurrency) or rate (--rate) the shares
        split; a scenario whose classes all have their own users or rate needs neither."""
        if self.rate is not None:
            return "rate", float(self.rate)
        if self.concurrency is not None:
            least = scenario.least_users
            if self.concurrency < least:
                floors = " + ".join(f"{c.name} {c.min_users}" for c in scenario.classes
                                    if c.share is not None and c.min_users)
                raise UsageError(f"--concurrency {self.concurrency}: below the classes' floors "
                                 f"(min_users: {floors} = {least}); give {least} or more")
            return "users", float(self.concurrency)
        if any(c.share is not None for c in scenario.classes):
            raise UsageError(f"--scenario: the classes with a share split the crowd's users: "
                             f"give --concurrency N (or --rate R for requests per second)")
        return "users", 0.0


def check_writable(path: Path | None, flag: str) -> None:
    """Find out before a long run, not after it, that a result file cannot be written."""
    if path is None:
        return
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise UsageError(f"{flag} {p}: is a folder; give a file name")
    if not parent.is_dir():
        raise UsageError(f"{flag} {p}: the folder {parent} does not exist; create it or pick another path")
    if not os.access(parent, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise UsageError(f"{flag} {p}: cannot write there (permission denied); pick another path")
