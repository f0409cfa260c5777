"""``llmbench probe``'s spec: the same workload through a router and straight to a backend,
interleaved in time; its options as typed fields and their checks (the probe:
llmbench/commands/probe.py ``perform_spec``)."""

from __future__ import annotations

import dataclasses
from dataclasses import InitVar
from typing import Iterator, Sequence

from llmbench.specs.options import (INT, P_LOAD, P_TARGET, REQUIRED, SECONDS, Span, Spec,
                                    Workers, option, ray, think, users, workers)
from llmbench.specs.groups import (ModelOpts, OutputOpts, RequestOpts, Seconds, ServerOpts,
                                   TelemetryOpts, WorkloadOpts, command_defaults)
from llmbench.specs.ramp import steps_of


@dataclasses.dataclass(kw_only=True)
class ProbeEnds(Spec):
    """The router probe's two ends: the router and a backend behind it."""
    router: str = option("The router's URL as clients use it, e.g. localhost:12434/v1.", P_TARGET, default=REQUIRED)
    direct: str | None = option("A backend's own URL, e.g. localhost:11434/v1 (default: the LLM server found on this machine's usual ports).", P_TARGET)


@dataclasses.dataclass(kw_only=True)
class ProbeDirect(Spec):
    """The backend's own model name, if it differs from the router's."""
    direct_model: str | None = option("Model name at the backend, if it differs.", P_TARGET)


@dataclasses.dataclass(kw_only=True)
class ProbeLoadOpts(Spec):
    """The router probe's load: users per step and the slices on each path."""
    users: Sequence[float] | str | None = users("1,4,16,64")
    slice_s: Seconds = option("Length of one slice on one path.", P_LOAD, "--slice", kind=SECONDS, default="5s")
    slice: InitVar[Seconds | None] = None              # --slice: slice_s
    rounds: int = option("Slices per path per step (alternating order).", P_LOAD, kind=INT, default=3)
    think: Span | None = think("0")
    workers: Workers = workers()
    ray: str | None = ray()


@dataclasses.dataclass(kw_only=True)
@command_defaults(help={"model": "Through the router."}, model=REQUIRED, prompt_tokens="128",
                  output_tokens="64", turns=3)
class ProbeSpec(OutputOpts, RequestOpts, WorkloadOpts, ProbeLoadOpts, TelemetryOpts, ServerOpts,
                ProbeDirect, ModelOpts, ProbeEnds):
    """``llmbench probe``: router overhead versus compute. The same workload through the
    ``router`` and straight to a backend (``direct``), interleaved in slices, at each step of
    ``users``; ``model`` (through the router) is required. docs/cli.md lists every
    field."""

    command = "probe"
    groups = {"server": ServerOpts, "telemetry": TelemetryOpts, "load": ProbeLoadOpts,
              "prompts": WorkloadOpts, "request": RequestOpts, "output": OutputOpts}
    # the option groups, passed whole (the package's docstring, llmbench/specs/__init__.py)
    server: InitVar[ServerOpts | None] = None
    telemetry: InitVar[TelemetryOpts | None] = None
    load: InitVar[ProbeLoadOpts | None] = None
    prompts: InitVar[WorkloadOpts | None] = None
    request: InitVar[RequestOpts | None] = None
    output: InitVar[OutputOpts | None] = None

    def _check(self) -> Iterator[str]:
        steps_of(self.users, None, None, None, "users")  # type: ignore[arg-type]
        if self.rounds < 1:
            yield "--rounds must be at least 1"
        if self.slice_s <= 0:  # type: ignore[operator]
            yield "--slice must be above 0"
        if self.prefix_hit_ratio is not None:   # warm-up and verification live in run
            yield "--prefix-hit-ratio works with llmbench run only"
