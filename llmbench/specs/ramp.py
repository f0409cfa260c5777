"""``llmbench ramp``'s spec: steps of users until the thresholds break; its options as typed
fields, their checks, and how a ramp's plan is built for a server (``ramp`` builds one, ``sweep``
one per setting, ``--repeat`` one per repeat). The ramp itself: llmbench/commands/ramp.py."""

from __future__ import annotations

import dataclasses
from dataclasses import InitVar
import math
from pathlib import Path
from typing import Iterator, TYPE_CHECKING, Any, Sequence

from llmbench.specs import options as opt
from llmbench.specs.options import (FLAG, FLOAT, INT, MAX_LOAD, P_GATES, P_STEPS, SECONDS,
                                    SECONDS_ABOVE_0, Span, UsageError, Workers, option, ray,
                                    scenario as scenario_option, think, thresholds,
                                    trace as trace_option, trace_speed as trace_speed_option,
                                    users, workers)
from llmbench.specs.groups import (AbandonOpts, AgentOpts, OutputOpts, RequestOpts, Seconds,
                                   ServerOpts, TargetOpts, TelemetryOpts, WorkloadOpts,
                                   command_defaults)
from llmbench.specs.reset import CacheResetOpts

if TYPE_CHECKING:
    from llmbench.specs.thresholds import Threshold

# ramp with no --url: a short demo against the built-in mock, about a minute, and it breaks.
DEMO = {"users": [2, 4, 6, 8, 10, 12], "hold": 10.0, "ramp_in": 2.0, "think": (1.0, 3.0),
        "output_tokens": 64, "prompt_tokens": (32, 96), "turns": 3}
SERVER = {"hold": 60.0, "ramp_in": 10.0, "think": (5.0, 10.0), "output_tokens": 128,
          "prompt_tokens": (64, 256), "turns": 4}
# a ramp's workload defaults are the demo's or a server's (above), said in its help
RAMP_DEFAULTS = dict(
    help={"prompt_tokens": "(default 64-256)", "output_tokens": "(default 128)",
          "turns": "(default 4)"},
    prompt_tokens=None, output_tokens=None, turns=None, timeout_first_token=120.0)


def steps_of(users: Sequence[float] | None, start: float | None, step: float | None,
             up_to: float | None, by: str) -> list[float]:
    """The ramp's steps: --users as given, else --start, --step, --up-to (2, 2, 40)."""
    if users:
        text = ",".join(f"{x:g}" for x in users)
        if any(not math.isfinite(s) for s in users):
            raise UsageError(f"--users {text!r}: need finite numbers like 1,2,4,8")
        if any(s <= 0 for s in users) or list(users) != sorted(users):
            raise UsageError(f"--users {text!r}: need increasing numbers above 0")
        if by == "users" and any(s != int(s) for s in users):
            raise UsageError(f"--users {text!r}: users come in whole numbers, e.g. 1,2,4,8")
        if max(users) > MAX_LOAD:
            raise UsageError(f"--users {text!r}: at most {MAX_LOAD:,} "
                             f"{'users' if by == 'users' else 'requests/s'} a step")
        return [float(s) for s in users]
    opt.number(start, "--start", lo=0, lo_open=True)
    opt.number(step, "--step", lo=0, lo_open=True)
    opt.number(up_to, "--up-to", lo=0, lo_open=True)
    start = 2 if start is None else start
    step = 2 if step is None else step
    up_to = 40 if up_to is None else up_to
    if (up_to - start) / step > 10000:
        raise UsageError(f"--start {start:g} --step {step:g} --up-to {up_to:g} make over 10000 steps; "
                         "raise --step")
    if start > up_to:
        raise UsageError(f"--start {start:g} is above --up-to {up_to:g}; lower --start or raise --up-to")
    out, v = [], start
    while v <= up_to + 1e-9:
        out.append(round(v, 6))
        v += step
    if by == "users" and any(abs(s - round(s)) > 1e-9 for s in out):
        raise UsageError("users come in whole numbers: check --start/--step/--up-to")
    if out and max(out) > MAX_LOAD:
        raise UsageError(f"--up-to {up_to:g}: at most {MAX_LOAD:,} "
                         f"{'users' if by == 'users' else 'requests/s'} a step")
    return out


@dataclasses.dataclass(kw_only=True)
class RampOpts(CacheResetOpts):
    """The steps and the gates of a ramp (``ramp`` and ``sweep``), and its plan for a server."""

    start: float | None = option("Users at the first step (default 2).", P_STEPS, kind=FLOAT)
    step: float | None = option("Users added per step (default 2).", P_STEPS, kind=FLOAT)
    up_to: float | None = option("Last step (default 40).", P_STEPS, kind=FLOAT)
    users: Sequence[float] | str | None = users()
    by: str = option("users (closed loop) | rate (steps are requests/s, open loop).", P_STEPS, default="users")
    ramp_in: Seconds | None = option("Time to bring a step's new users in (default 10s).", P_STEPS, kind=SECONDS)
    hold: Seconds | None = option("Time each step holds its load (default 60s); with --find a step ends sooner once its checks are settled at 95 %.", P_STEPS, kind=SECONDS)
    think: Span | None = think()
    workers: Workers = workers()
    ray: str | None = ray()
    repeat: int = option("Run the whole ramp N times (fresh conversations, seed + k): users held gets an interval (min-max).", P_STEPS, kind=INT, default=1)
    threshold: list[Threshold | str] | None = thresholds()
    keep_going: bool = option("Run every step even after one fails.", P_GATES, "--keep-going", kind=FLAG, default=False)
    generator_lag_limit: Seconds = option("Event-loop lag p99 or own send-delay p99 past which llmbench calls its own numbers untrustworthy (exit 4).", P_GATES, kind=SECONDS_ABOVE_0, default="10ms")
    expect_users: float | None = option("Exit 1 if fewer users (or req/s) held.", P_GATES, kind=FLOAT)
    find: bool | None = option("Search for the limit: grow the load (users x4 from the start, then x2) until a step breaks, narrow to 1 user (5 % of the rate with --by rate), then hold the limit to confirm it (unless its own step held that long). The default against a --url given no --users/--start/--step/--up-to (then --start is the first step, --up-to the ceiling); --no-find: the fixed steps 2, 4 ... 40.", P_STEPS, "--find/--no-find", kind=FLAG, default=None)
    sustain: Seconds | None = option("--find: hold the limit found this long to confirm it (default: one more --hold).", P_STEPS, kind=SECONDS_ABOVE_0, metavar="DURATION")
    budget: Seconds | None = option("--find: stop the search after this long; it says where it stopped and what is left uncertain.", P_STEPS, kind=SECONDS_ABOVE_0, metavar="DURATION")
    join: str = option("How a step's new users join: start (turn 0 of a new conversation, evenly over the ramp-in) | spread (each at a random turn, the earlier turns in its prompt with synthetic replies, at random times in the ramp-in: the mix of a steady state from the first step).", P_STEPS, default="start")
    scenario: Any = scenario_option("Traffic classes in one ramp: a TOML, YAML or JSON file of classes, each with its workload options, share of the users (or users/rate of its own) and thresholds; each class judged on its own requests.", P_STEPS)
    grow: str | None = option("--scenario: grow this class with the steps; the others keep their first step's load.", P_STEPS, metavar="CLASS")
    isolate: bool = option("--scenario: then run each class alone at its load in the first broken step, and say how much the others added (blame, measured).", P_STEPS, "--isolate", kind=FLAG, default=False)

    def _check(self) -> Iterator[str]:
        if self.by not in ("users", "rate"):
            yield f"--by {self.by!r}: choose users or rate"
        if self.join not in ("start", "spread"):
            yield f"--join {self.join!r}: choose start or spread"
        if self.join == "spread" and self.by != "users":
            yield ("--join spread goes with --by users (a rate step's requests "
                   "arrive on a schedule, not as users)")
        if getattr(self, "trace", None) is not None:
            yield from self.check_trace()
        elif getattr(self, "trace_speed", 1.0) != 1.0:
            yield "--trace-speed goes with --trace FILE: add it or drop --trace-speed"
        if self.searching():
            yield from self.check_search()
        else:
            for name, flag in (("sustain", "--sustain"), ("budget", "--budget")):
                if getattr(self, name) is not None:
                    yield (f"{flag} goes with --find (a search for the limit); add "
                           "--find or drop it")
            self.steps()
        if self.hold is not None and self.hold <= 0:
            yield "--hold must be above 0"
        yield from opt.problem(opt.number, self.expect_users, "--expect-users", lo=0)
        yield from opt.problem(opt.count, self.repeat, "--repeat", hi=1000)
        if getattr(self, "prefix_hit_ratio", None) is not None:   # warm-up and check: run's
            yield "--prefix-hit-ratio works with llmbench run only"
        if self.scenario is None and (self.grow is not None or self.isolate):
            yield (f"{'--grow' if self.grow is not None else '--isolate'} goes with "
                   "--scenario FILE (traffic classes)")
        from llmbench.workload.scenario import Scenario
        if isinstance(self.scenario, Scenario):     # given from Python: checked now, as a file
            self.scenario.check_grow(self.grow)     # is when the plan is built

    def check_trace(self) -> Iterator[str]:
        """ramp --trace: fixed steps of whole multiples of the recording, users joining as
        recorded, in one process."""
        spec: Any = self
        speed = spec.trace_speed
        if not (isinstance(speed, (int, float)) and math.isfinite(speed) and 0 < speed <= 1000):
            yield (f"--trace-speed {speed:g}: need a number above 0 and at most "
                   "1000, e.g. 2 (twice as fast)")
        for given, flag, why in ((self.find, "--find", "its steps are multiples of the "
                                  "recording: give them with --users 1,2,4"),
                                 (self.by != "users", "--by rate", "a recording's requests "
                                  "arrive at their recorded times"),
                                 (self.join != "start", "--join spread", "sessions start as "
                                  "recorded"),
                                 (self.scenario is not None, "--scenario", "one recording is "
                                  "one class"),
                                 (self.workers not in (None, 1, "1"), "--workers",
                                  "a recording replays in one process"),
                                 (self.think is not None, "--think", "sessions think as "
                                  "recorded")):
            if given:
                yield f"{flag} does not go with --trace ({why}): drop one"

    def searching(self) -> bool:
        """Whether the ramp searches for the limit (--find): as asked, else by default
        against a server given no steps (the built-in mock's demo keeps its fixed steps)."""
        if self.find is not None:
            return bool(self.find)
        if getattr(self, "trace", None) is not None:
            return False                # a recording's ramp: its steps are multiples of it
        return bool(self.url) and self.users is None and self.start is None \
            and self.step is None and self.up_to is None  # type: ignore[attr-defined]

    def check_search(self) -> Iterator[str]:
        """--find's options: it picks its own steps, from --start up to --up-to."""
        if self.users is not None:
            yield ("--users lists fixed steps and --find picks its own: drop one "
                   "(--start and --up-to bound a search)")
        if self.step is not None:
            yield ("--step spaces fixed steps and --find picks its own: drop one "
                   "(--start and --up-to bound a search)")
        if self.keep_going:
            yield ("--keep-going runs every fixed step; a search (--find) stops when "
                   "it has found the limit: drop one")
        bad = [*opt.problem(opt.number, self.start, "--start", lo=0, lo_open=True, hi=MAX_LOAD),
               *opt.problem(opt.number, self.up_to, "--up-to", lo=0, lo_open=True, hi=MAX_LOAD)]
        if bad:                         # the rules below compare them: not with inf
            yield from bad
            return
        if self.by == "users":
            for v, flag in ((self.start, "--start"), (self.up_to, "--up-to")):
                if v is not None and v != int(v):
                    yield f"{flag} {v:g}: users come in whole numbers"
        if self.start is not None and self.up_to is not None and self.start > self.up_to:
            yield (f"--start {self.start:g} is above --up-to {self.up_to:g}; lower "
                   "--start or raise --up-to")
        if self.budget is not None:
            ramp_in_s, hold_s, _ = self.timing()
            if self.budget < ramp_in_s + hold_s:
                yield (f"--budget {self.budget:g}s is shorter than one step "
                       f"({ramp_in_s:g}s ramp-in + {hold_s:g}s hold): raise it or "
                       "shorten --hold")

    # -- what the options come to -----------------------------------------------------------
    def defaults(self) -> dict[str, Any]:
        """The demo's defaults with no --url (the built-in mock), else a server's."""
        return DEMO if not self.url else SERVER  # type: ignore[attr-defined]

    def steps(self) -> list[float]:
        u = self.users
        if not self.url and u is None and self.start is None and self.step is None \
                and self.up_to is None:  # type: ignore[attr-defined]
            u = DEMO["users"]
        if getattr(self, "trace", None) is not None and self.users is None \
                and self.start is None and self.step is None and self.up_to is None:
            u = [1, 2, 4, 8]       # a recording's ramp: once, twice, 4 and 8 times over
        return steps_of(u, self.start, self.step, self.up_to, self.by)  # type: ignore[arg-type]

    def timing(self) -> tuple[float, float, tuple[float, float]]:
        """(ramp_in_s, hold_s, think_s) with the defaults filled in."""
        d = self.defaults()
        # an agent starts its next task when its last one is done: no person's pause between
        think = (0.0, 0.0) if getattr(self, "workload_type", "chat") == "agent" else d["think"]
        if getattr(self, "trace", None) is not None:
            # a recording's sessions think and start as recorded, from the step's start
            think, d = (0.0, 0.0), {**d, "ramp_in": 0.0}
        return (d["ramp_in"] if self.ramp_in is None else self.ramp_in,  # type: ignore[return-value]
                d["hold"] if self.hold is None else self.hold,
                think if self.think is None else self.think)

    def gates(self) -> list[Any]:
        """The thresholds: as given, else the defaults (embeddings have their own)."""
        from llmbench import wire
        from llmbench.specs.thresholds import (DEFAULT_AGENT_THRESHOLDS,
                                               DEFAULT_EMBEDDING_THRESHOLDS, DEFAULT_THRESHOLDS,
                                               parse_threshold)
        if self.threshold:
            return list(self.threshold)
        if getattr(self, "workload_type", "chat") == "agent":
            return [parse_threshold(x) for x in DEFAULT_AGENT_THRESHOLDS]
        api = self.api  # type: ignore[attr-defined]
        embeddings = api is not None and api in wire.names() and wire.get(api).output == "embeddings"
        return [parse_threshold(x) for x in
                (DEFAULT_EMBEDDING_THRESHOLDS if embeddings else DEFAULT_THRESHOLDS)]

    def resolved(self) -> Any:
        """This spec with the workload's ramp defaults filled in (turns, lengths)."""
        d = self.defaults()
        w: Any = self
        return dataclasses.replace(
            w, turns=d["turns"] if w.turns is None else w.turns,
            prompt_tokens=w.prompt_tokens or d["prompt_tokens"],
            output_tokens=w.output_tokens or d["output_tokens"])


RampSteps = RampOpts          # the steps group, passed whole: RampSpec(ramp=RampSteps(...))


@dataclasses.dataclass(kw_only=True)
@command_defaults(**RAMP_DEFAULTS)  # type: ignore[arg-type]
class RampSpec(OutputOpts, AbandonOpts, RequestOpts, AgentOpts, WorkloadOpts, RampOpts,
               TelemetryOpts, ServerOpts, TargetOpts):
    """``llmbench ramp``: add users step by step (``users=[1, 2, 4, 8]``, each step ramped in
    over ``ramp_in`` and held for ``hold`` seconds) until a threshold breaks, and say why. With
    no ``url``, a one-minute demo against the built-in mock. ``by="rate"``: the steps are
    requests per second (open loop). docs/cli.md lists every field."""

    command = "ramp"
    aliases = {"thresholds": "threshold"}
    groups = {"target": TargetOpts, "server": ServerOpts, "telemetry": TelemetryOpts,
              "ramp": RampOpts, "prompts": WorkloadOpts, "agent": AgentOpts,
              "request": RequestOpts, "output": OutputOpts}
    trace: Path | str | None = trace_option("Replay a recording (llmbench record) or a trace with sessions at growing scale: each step's --users is a multiple (default 1,2,4,8: the recording once, twice, 4, 8 times over, each copy with its own prompt salt); a step's users are its multiple x the recording's sessions; a step holds until its copies have played (at least --hold, default the recording's length).", P_STEPS)
    trace_speed: float = trace_speed_option(P_STEPS)
    # the option groups, passed whole (the package's docstring, llmbench/specs/__init__.py)
    target: InitVar[TargetOpts | None] = None
    server: InitVar[ServerOpts | None] = None
    telemetry: InitVar[TelemetryOpts | None] = None
    ramp: InitVar[RampOpts | None] = None
    prompts: InitVar[WorkloadOpts | None] = None
    agent: InitVar[AgentOpts | None] = None
    request: InitVar[RequestOpts | None] = None
    output: InitVar[OutputOpts | None] = None
    thresholds: InitVar[list[Threshold | str] | None] = None
