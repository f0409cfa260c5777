"""``llmbench ramp``'s spec: steps of users until the thresholds break; its options as typed
fields, their checks, and how a ramp's plan is built for a server (``ramp`` builds one, ``sweep``
one per setting, ``--repeat`` one per repeat). The ramp itself: llmbench/commands/ramp.py."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Iterator, TYPE_CHECKING, Any, Sequence

from llmbench.commands import options as opt
from llmbench.commands.options import (FLAG, FLOAT, INT, P_GATES, P_STEPS, SECONDS,
                                       SECONDS_ABOVE_0, UsageError, option)
from llmbench.commands.groups import (AbandonOpts, AgentOpts, OutputOpts, RequestOpts, Seconds,
                                      ServerOpts, TargetOpts, TelemetryOpts, WorkloadOpts,
                                      command_defaults)
from llmbench.commands.reset_spec import CacheResetOpts, step_resets
from llmbench.commands.spec import scenario as scenario_option
from llmbench.commands.spec import trace as trace_option
from llmbench.commands.spec import trace_speed as trace_speed_option
from llmbench.commands.spec import (MAX_LOAD, MaybeMock, Span, Workers, check_ray, make_common,
                                    make_target, prepare, ray, replay_of, say, think, thresholds,
                                    users, warn_short_hold, with_ray, workers)

if TYPE_CHECKING:
    from llmbench.analysis.slo import Threshold

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
    hold: Seconds | None = option("Time each step holds its load (default 60s).", P_STEPS, kind=SECONDS)
    think: Span | None = think()
    workers: Workers = workers()
    ray: str | None = ray()
    repeat: int = option("Run the whole ramp N times (fresh conversations, seed + k): users held gets an interval (min-max).", P_STEPS, kind=INT, default=1)
    threshold: list[Threshold | str] | None = thresholds()
    keep_going: bool = option("Run every step even after one fails.", P_GATES, "--keep-going", kind=FLAG, default=False)
    generator_lag_limit: Seconds = option("Event-loop lag p99 or own send-delay p99 past which llmbench calls its own numbers untrustworthy (exit 4).", P_GATES, kind=SECONDS_ABOVE_0, default="10ms")
    expect_users: float | None = option("Exit 1 if fewer users (or req/s) held.", P_GATES, kind=FLOAT)
    find: bool | None = option("Search for the limit: double the load until a step breaks, narrow to 1 user (5 % of the rate with --by rate), then hold the limit to confirm it. The default against a --url given no --users/--start/--step/--up-to (then --start is the first step, --up-to the ceiling); --no-find: the fixed steps 2, 4 ... 40.", P_STEPS, "--find/--no-find", kind=FLAG, default=None)
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

    def find_plan(self) -> Any:
        """The search's plan (ramp.FindPlan), or None for the fixed steps."""
        if not self.searching():
            return None
        from llmbench.commands.ramp import FindPlan
        return FindPlan(start=self.start or 1.0, ceiling=self.up_to,
                        sustain_s=self.sustain, budget_s=self.budget)  # type: ignore[arg-type]

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
        from llmbench.analysis.slo import DEFAULT_EMBEDDING_THRESHOLDS, DEFAULT_THRESHOLDS, parse_threshold
        if self.threshold:
            return list(self.threshold)
        if getattr(self, "workload_type", "chat") == "agent":
            from llmbench.analysis.slo import DEFAULT_AGENT_THRESHOLDS
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

    def ramp_plan(self, url: str, model: str | None, mock: dict[str, Any] | None = None,
             seed_offset: int = 0, out: Path | None = None, labels: dict[str, str] | None = None,
             progress: bool | None = None, server_pid: int | None = None) -> Any:
        """The ramp's plan against ``url``: repeat ``seed_offset`` (fresh conversations);
        ``server_pid``: the server's process when sweep --serve started it."""
        from llmbench.commands.ramp import RampPlan
        from llmbench.load.shapes import Ramp
        spec: Any = self.resolved()
        tgt = make_target(spec, url, model)
        wl = dataclasses.replace(spec, seed=spec.seed + seed_offset)
        replay = replay_of(self, only=[f.name for f in dataclasses.fields(RampSpec)])
        if url != self.url:  # type: ignore[attr-defined]
            # a sweep's ramp (or the demo's mock): the URL it actually used
            replay = {**replay, "values": {**replay["values"], "url": url}}
        # --scenario: each class builds its own conversations (_with_classes); --trace: the
        # recording's are sent (_with_trace); the command's own would never be, so one is
        # built (its options checked), not 2,000
        own = self.scenario is None and getattr(self, "trace", None) is None
        common = make_common(tgt, wl, 2000 if own else 1,
                             multi_turn=True, progress=progress, replay=replay)
        ramp_in_s, hold_s, think_s = self.timing()
        if getattr(self, "workload_type", "chat") == "agent":
            warn_short_hold(common.workload, hold_s)
        # the server's machine and what the server is (TelemetryOpts: ramp's and sweep's)
        common = dataclasses.replace(common, telemetry=spec.telemetry_spec(
            tgt, spec.server_probe, pid=server_pid, pid_from="--serve"))
        common = with_ray(common, check_ray(self.ray))
        if out is not None or labels is not None:
            common = dataclasses.replace(common, out=out or common.out,
                                         labels=common.labels if labels is None else labels)
        find = self.find_plan()
        steps = [] if find is not None else self.steps()
        trace = None
        if getattr(self, "trace", None) is not None:
            common, trace, steps, hold_s = self._with_trace(common, tgt, steps)
        shape = Ramp(common.workload.conversations, steps,
                     by=self.by, join=self.join,
                     ramp_in_s=ramp_in_s, hold_s=hold_s, think_s=think_s,
                     keep_going=self.keep_going,
                     drain_s=max(spec.timeout_first_token, 30.0), seed=wl.seed,
                     lag_limit_ms=self.generator_lag_limit * 1000)  # type: ignore[operator]
        if trace is not None:
            shape.trace, shape.trace_speed = trace.items, self.trace_speed  # type: ignore[attr-defined]
        plan = RampPlan(common, shape, self.gates(), expect=self.expect_users, mock=mock,
                        find=find, reset=step_resets(self, tgt, mock=mock is not None))
        if self.scenario is not None:
            self._with_classes(plan, spec, tgt, seed_offset, progress)
        return plan

    def _with_trace(self, common: Any, tgt: Any, multiples: list[float]) -> Any:
        """ramp --trace: (common with the recording's workload, the trace, the steps in users,
        the hold). A recorded session is a user: --users 1,2 replays the recording once, then
        twice over, so a step's users are its multiple x the recording's sessions; the hold is
        as given, else the recording's length at --trace-speed."""
        from llmbench.workload import ServerRef, load_tokenizer
        from llmbench.workload.traces import check_replay, trace_workload
        spec: Any = self
        ref = ServerRef(tgt.server_root, tgt.model,
                        {k: v for k, v in tgt.request_headers().items() if k != "content-type"},
                        tgt.net)
        tok = load_tokenizer(spec.tokenizer, server=ref)
        tr, wl = trace_workload(str(spec.trace), tok, common.workload.seed,
                                reserve=max(x.tokens for x in common.workload.salts.values()))
        check_replay(tr, spec.trace_speed)
        if not tr.items:
            raise UsageError(f"--trace {spec.trace}: no requests to replay")
        n = len(tr.items)
        steps = [m * n for m in multiples]
        if steps and max(steps) > MAX_LOAD:
            raise UsageError(f"--users {max(multiples):g} x {n} recorded sessions is over "
                             f"{MAX_LOAD:,} users a step: lower --users")
        wl.salts = common.workload.salts       # a trace's prompts get the run's salt in front
        hold_s = self.hold if self.hold is not None else \
            max(i.due_s[-1] for i in tr.items) / spec.trace_speed + 1.0
        return dataclasses.replace(common, workload=wl), tr, steps, hold_s

    def _with_classes(self, plan: Any, spec: Any, tgt: Any, seed_offset: int,
                      progress: bool | None) -> None:
        """--scenario: each class planned as this ramp with its options over the command's
        (commands.scenario), the ramp's shape made theirs (load.shapes.classes)."""
        from llmbench.commands import scenario as sc
        from llmbench.commands.spec import make_common
        from llmbench.analysis.slo import parse_threshold
        scenario = sc.load(spec, self.scenario)
        common = plan.common

        def build(tc: Any, _options: dict[str, Any]) -> tuple[Any, tuple[float, float]]:
            cs = sc.class_spec(spec, scenario, tc)
            mine = make_common(tgt, dataclasses.replace(cs, seed=cs.seed + seed_offset), 2000,
                               multi_turn=True, progress=progress)
            # the run's target, output and telemetry; the class's workload and requests
            c = dataclasses.replace(common, workload=mine.workload, params=mine.params,
                                    timeouts=mine.timeouts, count_tokens=mine.count_tokens)
            return c, (cs.think if cs.think is not None else self.timing()[2])

        def gates(tc: Any) -> list[Any]:
            if tc.thresholds is None:
                return self.gates()
            return sc.check_thresholds(scenario, tc, tc.thresholds, parse_threshold)
        sp = sc.plan(scenario, self.grow, self.isolate, build, gates,
                     workers=getattr(common, "workers", 1))
        # the workload run.json describes is the one sent: the first class's (each class's
        # own is in config.scenario)
        plan.common = dataclasses.replace(common, workload=sp.classes[0].common.workload)
        self._check_floors(scenario, plan.shape.steps)
        if self.by == "users" and self.grow is None and plan.find is not None:
            # the search's lightest step carries every class's floor (min_users): it starts
            # there at least, and never steps below
            plan.find.least = float(scenario.least_users)
            plan.find.start = max(plan.find.start, plan.find.least)
            if plan.find.ceiling is not None and plan.find.ceiling < plan.find.least:
                raise UsageError(f"--up-to {plan.find.ceiling:g}: below the classes' floors "
                                 f"(min_users add up to {plan.find.least:g}); raise --up-to")
        plan.scenario = sp
        plan.shape = sp.shape(plan.shape)

    def _check_floors(self, scenario: Any, steps: Sequence[float]) -> None:
        """A fixed step of the whole crowd below the share classes' floors (min_users) would
        not be the step's users: one line."""
        if self.by != "users" or self.grow is not None:
            return
        least = scenario.least_users
        low = [x for x in steps if x < least]
        if low:
            floors = " + ".join(f"{c.name} {c.min_users}" for c in scenario.classes
                                if c.share is not None and c.min_users)
            raise UsageError(f"--users {low[0]:g}: below the classes' floors (min_users: "
                             f"{floors} = {least}); start the steps at {least} or more")

    def prepared(self) -> None:
        """The checks that read files or the machine, and the warning a hold shorter than
        the think time earns, before anything starts."""
        check_ray(self.ray)
        prepare(self)
        if self.scenario is not None:
            # the file read and every class's options checked before anything starts
            # (values, the files they name, thresholds): no prompt built, no server asked
            from llmbench.analysis.slo import parse_threshold
            from llmbench.commands import scenario as sc
            spec: Any = self.resolved()
            scenario = sc.load(spec, self.scenario)
            scenario.check_grow(self.grow)
            for tc in scenario.classes:
                sc.check_class(spec, scenario, tc, parse_threshold)
            if not self.searching():
                self._check_floors(scenario, self.steps())
        ramp_in_s, hold_s, think_s = self.timing()
        longest, whose = think_s[1], ""
        if self.scenario is not None:
            # each class thinks its own (its "think" option), else the command's
            from llmbench.options import parse_think
            longest = -1.0
            for tc in scenario.classes:
                v = dict(tc.options).get("think")
                t = parse_think(str(v), f"{tc.name}: think")[1] if v is not None else think_s[1]
                if t > longest or (t == longest and not whose):
                    longest, whose = t, f"{tc.name}'s, " if v is not None else ""
        # a rate step's arrivals come on the schedule whatever the think time
        if self.by == "users" and longest > 0 and hold_s < longest:
            say(f"warning: --hold {hold_s:g}s is shorter than the longest think time "
                f"({whose}{longest:g}s): some users send nothing in a hold window")

    def perform_at(self, url: str, model: str | None, mock: dict[str, Any] | None = None,
                   out: Path | None = None, labels: dict[str, str] | None = None,
                   progress: bool | None = None, server_pid: int | None = None) -> Any:
        """Every repeat of the ramp against one server, into one run folder (Done);
        ``server_pid``: the server's process when sweep --serve started it."""
        from llmbench.commands.ramp import perform
        first = self.ramp_plan(url, model, mock, out=out, labels=labels, progress=progress,
                               server_pid=server_pid)
        found = first.common.target.model        # asked once, when --model was not given
        return perform(first, self.repeat,
                       lambda k: self.ramp_plan(url, found, mock, k, out=out, labels=labels,
                                                progress=progress, server_pid=server_pid))


@dataclasses.dataclass(kw_only=True)
@command_defaults(**RAMP_DEFAULTS)  # type: ignore[arg-type]
class RampSpec(OutputOpts, AbandonOpts, RequestOpts, AgentOpts, WorkloadOpts, RampOpts,
               TelemetryOpts, ServerOpts, TargetOpts):
    """``llmbench ramp``: add users step by step (``users=[1, 2, 4, 8]``, each step ramped in
    over ``ramp_in`` and held for ``hold`` seconds) until a threshold breaks, and say why. With
    no ``url``, a one-minute demo against the built-in mock. ``by="rate"``: the steps are
    requests per second (open loop). docs/cli.md lists every field."""

    command = "ramp"
    trace: Path | str | None = trace_option("Replay a recording (llmbench record) or a trace with sessions at growing scale: each step's --users is a multiple (default 1,2,4,8: the recording once, twice, 4, 8 times over, each copy with its own prompt salt); a step's users are its multiple x the recording's sessions; a step holds until its copies have played (at least --hold, default the recording's length).", P_STEPS)
    trace_speed: float = trace_speed_option(P_STEPS)

    def perform(self, progress: bool | None = None) -> Any:
        """Against ``url``, or (none given) the built-in mock for the time of the ramp."""
        self.prepared()
        from llmbench.commands.local import with_local_server
        self = with_local_server(self)      # no --url: a server on this machine, if any
        with MaybeMock(self.url, demo=self.demo) as (url_, model_):
            return self.perform_at(url_, self.model or model_,
                                   mock=None if self.url else {"profile": "ollama"},
                                   progress=progress)
