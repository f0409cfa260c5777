"""``llmbench sweep``'s spec: a ramp per server setting (the ramp's own options and plan,
llmbench/specs/ramp.py), how each value reaches the server, and its checks. The sweep
itself: llmbench/commands/sweep.py."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import InitVar
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from llmbench.specs.options import (FLAG, PATH, SECONDS, SECONDS_ABOVE_0, TEXTS, Kind, Spec,
                                    UsageError, option)
from llmbench.specs.groups import (AbandonOpts, AgentOpts, ModelOpts, OutputOpts, RequestOpts,
                                   Seconds, ServerOpts, TelemetryOpts, UrlOpts, WorkloadOpts,
                                   command_defaults)
from llmbench.specs.ramp import RAMP_DEFAULTS, RampOpts

if TYPE_CHECKING:
    from llmbench.specs.thresholds import Threshold

P_SWEEP = "Sweep"


_SETTING_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")


def parse_settings(items: Sequence[str]) -> dict[str, list[str]]:
    """--setting NAME=V1,V2 (repeatable) -> {NAME: [V1, V2]}, in the order given."""
    out: dict[str, list[str]] = {}
    if not items:
        raise UsageError("--setting NAME=V1,V2 is required, e.g. --setting OLLAMA_NUM_PARALLEL=1,2,4")
    for item in items:
        name, sep, values = item.partition("=")
        name = name.strip()
        vals = [v.strip() for v in values.split(",")]
        if not sep or not name or not values.strip() or any(not v for v in vals):
            raise UsageError(f"--setting {item!r}: expected NAME=V1,V2,..., e.g. "
                             "OLLAMA_NUM_PARALLEL=1,2,4")
        if not _SETTING_NAME.match(name):
            raise UsageError(f"--setting {item!r}: {name!r} is not an environment variable name "
                             "(letters, digits and _)")
        if name in out:
            raise UsageError(f"--setting {name} is given twice; list its values once: "
                             f"{name}=1,2,4")
        if len(set(vals)) != len(vals):
            raise UsageError(f"--setting {item!r}: a value is listed twice")
        out[name] = vals
    return out


def _settings(v: Any, flag: str) -> dict[str, list[str]]:
    """NAME=V1,V2 (repeatable) or {NAME: [V1, V2]} -> {NAME: [V1, V2]}."""
    return parse_settings(TEXTS.parse(v, flag))


def _args(v: Any, flag: str) -> list[str]:
    if isinstance(v, (list, tuple)):
        return [str(x) for x in v]
    import shlex
    try:
        return shlex.split(str(v))
    except ValueError as exc:
        raise UsageError(f"{flag} {v!r}: {exc}")


SETTINGS = Kind(TEXTS.cli, _settings, lambda v: [f"{k}={','.join(x)}" for k, x in v.items()],
                doc="dict[str, list[str]]")
ARGS = Kind(str, _args, lambda v: " ".join(v), doc="list[str] | str")


@dataclasses.dataclass(kw_only=True)
class SweepOpts(Spec):
    """A sweep's settings and how to start the server for each value."""
    setting: dict[str, list[Any]] | list[str] | None = option("A server setting and its values (repeatable: a grid). Set in the server's environment; {NAME} in --serve and --url is replaced.", P_SWEEP, "--setting", kind=SETTINGS, metavar="NAME=V1,V2")
    settings: InitVar[dict[str, list[Any]] | None] = None     # the API's name of --setting
    serve: str | None = option("Start this server per value (shell command, own process group), stop it after.", P_SWEEP, metavar="CMD")
    before: str | None = option("Run this once per value instead (e.g. systemctl restart ollama), then wait for ready.", P_SWEEP, metavar="CMD")
    mock: bool = option("Sweep the built-in mock: each NAME is a mock option (--parallel).", P_SWEEP, "--mock", kind=FLAG, default=False)
    mock_options: list[str] | str | None = option("--mock: more llmbench mock options, e.g. '--itl-ms 20'.", P_SWEEP, kind=ARGS, metavar="ARGS")
    ready_timeout: Seconds = option("Wait this long for a server to answer and load its model.", P_SWEEP, kind=SECONDS_ABOVE_0, default="5m", metavar="DURATION")
    stop_grace: Seconds = option("After SIGTERM, wait this long before SIGKILL.", P_SWEEP, kind=SECONDS, default="10s", metavar="DURATION")
    resume: Path | None = option("Go on with the sweep in FOLDER (same settings and ramp options): settings complete there are skipped, partial and failed ones run again.", P_SWEEP, kind=PATH, metavar="FOLDER")
    dry_run: bool = option("Print each setting's server command, URL and steps, and how long the sweep may take; start nothing.", P_SWEEP, "--dry-run", kind=FLAG, default=False)


def mock_option_names() -> set[str]:
    """The options of ``llmbench mock`` (a --mock sweep's settings are mock options)."""
    from llmbench.mock_server.cli import MockOptions
    return {f.name for f in dataclasses.fields(MockOptions)}


@dataclasses.dataclass(kw_only=True)
@command_defaults(**{**RAMP_DEFAULTS, "help": {  # type: ignore[arg-type]
    **RAMP_DEFAULTS["help"], "url": "{NAME} and {PORT} (a free port per value) are replaced."}})
class SweepSpec(OutputOpts, AbandonOpts, RequestOpts, AgentOpts, WorkloadOpts, RampOpts,
                TelemetryOpts, ServerOpts, ModelOpts, UrlOpts, SweepOpts):
    """``llmbench sweep``: which server setting serves more users. One ramp per value of the
    ``setting`` grid (``{"OLLAMA_NUM_PARALLEL": [1, 2, 4]}``), each against a server started
    with ``serve``, restarted by ``before``, or the built-in mock (``mock=True``); one page
    with the answer. docs/cli.md lists every field."""

    command = "sweep"
    aliases = {"settings": "setting", "thresholds": "threshold"}
    groups = {"server": ServerOpts, "telemetry": TelemetryOpts, "ramp": RampOpts,
              "prompts": WorkloadOpts, "agent": AgentOpts, "request": RequestOpts,
              "output": OutputOpts}
    # the option groups, passed whole (the package's docstring, llmbench/specs/__init__.py)
    server: InitVar[ServerOpts | None] = None
    telemetry: InitVar[TelemetryOpts | None] = None
    ramp: InitVar[RampOpts | None] = None
    prompts: InitVar[WorkloadOpts | None] = None
    agent: InitVar[AgentOpts | None] = None
    request: InitVar[RequestOpts | None] = None
    output: InitVar[OutputOpts | None] = None
    thresholds: InitVar[list[Threshold | str] | None] = None

    def _check(self) -> Iterator[str]:
        if self.setting is None and "setting" not in self._refused:
            _settings([], "--setting")              # the line that says it is required
        modes = self.modes()
        if len(modes) != 1:
            yield ("give one of --serve, --before or --mock: how each value reaches "
                   "the server")
        if self.mock_options is not None and not self.mock:
            yield "--mock-options go with --mock"
        if self.mock and self.url:
            yield "--mock starts its own server: drop --url"
        if modes and modes[0] == "serve" and not self.url:
            # --before with no --url: the server found on this machine (commands.local)
            yield ("--serve needs --url: where the server it starts answers, e.g. "
                   "http://127.0.0.1:11434/v1 ({NAME} and {PORT} are replaced)")
        if self.mock:
            known = mock_option_names()
            for name in self.setting or {}:
                if name.replace("-", "_") not in known or name in ("host", "port"):
                    yield (f"--setting {name}: not an option of llmbench mock; use "
                           "one of its options, e.g. parallel, batch_slowdown, itl_ms")

    def modes(self) -> list[str]:
        return [m for m, on in (("serve", self.serve is not None),
                                ("before", self.before is not None), ("mock", self.mock)) if on]
