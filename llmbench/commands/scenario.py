"""``--scenario FILE``: the ramp's plan for several traffic classes (llmbench/workload/scenario.py
is the file's typed value; llmbench/load/shapes/classes.py the mixed crowd; llmbench/analysis/
classes.py each class's judgement and the blame).

Each class is planned as the ramp itself would be, with its own options (workload, requests,
think time, thresholds) over the command's, so a class is anything the command line can say.
Every class gets its own target in the harness (its client, request options and record stamp),
all of them keeping their records in the first class's store.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from llmbench.errors import UsageError
from llmbench.load.harness import TargetSpec
from llmbench.load.shapes import Ramp
from llmbench.load.shapes.classes import ClassRamp, LoadClass
from llmbench.workload import DatasetError, TokenizerError, load_tokenizer
from llmbench.workload.scenario import Scenario, TrafficClass, from_document, normalize

# the file's size bound (a scenario is a few classes of a few options each)
MAX_SCENARIO_BYTES = 1 << 20


def read(path: str | Path, allowed: Callable[[str], bool], flag: str = "--scenario") -> Scenario:
    """The scenario in a TOML, YAML or JSON file, each class's keys checked against the
    command's options (``allowed``); one line naming the file (and line) otherwise."""
    from llmbench.specs.config import read_document
    doc, text, kind = read_document(path, flag, MAX_SCENARIO_BYTES, what="scenario")
    return from_document(doc, str(path), text, kind, allowed)


@dataclass
class ClassPlan:
    """One class as the ramp runs it: its plan's common part (workload, request options,
    target), think time and thresholds."""

    traffic: TrafficClass
    common: Any                       # commands.common.Common
    think_s: tuple[float, float]
    thresholds: list[Any]             # analysis.slo.Threshold

    @property
    def name(self) -> str:
        return self.traffic.name

    def target_name(self, first: bool) -> str:
        return "main" if first else f"class:{self.name}"


@dataclass
class ScenarioPlan:
    """A scenario file's traffic classes, each planned, and how the crowd grows."""
    scenario: Scenario
    classes: list[ClassPlan]
    grow: str | None = None
    isolate: bool = False
    extra_warnings: list[str] = field(default_factory=list)

    def shape(self, base: Ramp) -> ClassRamp:
        """The ramp ``base`` with this scenario's classes."""
        kw = {f.name: getattr(base, f.name) for f in dataclasses.fields(Ramp)
              if f.init and f.name not in ("results",)}
        loads = [LoadClass(c.name, c.common.workload.conversations, c.think_s,
                           share=c.traffic.share, users=c.traffic.users, rate=c.traffic.rate,
                           session=c.target_name(i == 0), min_users=c.traffic.min_users)
                 for i, c in enumerate(self.classes)]
        return ClassRamp(**kw, classes=loads, grow=self.grow, isolate=self.isolate)

    def targets(self, server_probe: str) -> list[TargetSpec]:
        """One target per class (the first class's probes the server and holds the store)."""
        out = []
        for i, c in enumerate(self.classes):
            out.append(TargetSpec(c.common.target, name=c.target_name(i == 0),
                                  server_probe=server_probe if i == 0 else "off",
                                  salt=c.common.workload.salt_for("main"),
                                  params=c.common.params, traffic_class=c.name,
                                  share_records=None if i == 0 else "main"))
        return out

    def describe(self) -> dict[str, Any]:
        out = self.scenario.describe(self.grow)
        out["isolate"] = self.isolate
        for d, c in zip(out["classes"], self.classes):
            d["think_s"] = list(c.think_s)
            d["thresholds_checked"] = [t.text for t in c.thresholds]
            d["workload"] = c.common.workload.describe()
        return out

    @property
    def warnings(self) -> list[str]:
        seen: list[str] = []
        for c in self.classes:
            for w in c.common.workload.warnings:
                text = f"{c.name}: {w}"
                if text not in seen:
                    seen.append(text)
        return seen + self.extra_warnings


def plan(scenario: Scenario, grow: str | None, isolate: bool,
         build: Callable[[TrafficClass, dict[str, Any]], tuple[Any, tuple[float, float]]],
         thresholds: Callable[[TrafficClass], list[Any]], workers: Any = 1,
         flag: str = "--grow", steps: bool = True) -> ScenarioPlan:
    """Each class's plan (``build``: its Common and think time from its options;
    ``thresholds``: its own, or the command's), checked. ``steps`` False (``run
    --scenario``: one load, held): nothing has to grow, classes of their own users do."""
    if steps:
        scenario.check_grow(grow, flag)
    if workers not in (1, None, "1"):
        raise UsageError("--scenario: traffic classes run in one process; drop --workers "
                         "(or give each class its own ramp)")
    # every class's thresholds before any class's prompts are built
    gates = [thresholds(tc) for tc in scenario.classes]
    classes = []
    for tc, g in zip(scenario.classes, gates):
        try:
            common, think = build(tc, dict(tc.options))
        except CLASS_ERRORS as exc:
            # what only the build finds (a dataset's rows, a server tokenizer): still named
            if str(exc).startswith(scenario.where(tc.name)):
                raise
            raise scenario.fail(tc.name, None, f"class {tc.name!r}: {exc}") from None
        classes.append(ClassPlan(tc, common, think, g))
    return ScenarioPlan(scenario, classes, grow, isolate)


def check_thresholds(scenario: Scenario, tc: TrafficClass, texts: Sequence[str],
                     parse: Callable[[str], Any]) -> list[Any]:
    """A class's thresholds parsed, a bad one named with the file and line it is on."""
    out = []
    for t in texts:
        try:
            out.append(parse(t))
        except (ValueError, UsageError) as exc:
            text = str(exc)
            if not text.startswith(f"threshold {t!r}"):     # the parser's own words name it
                text = f"threshold {t!r}: {text}"
            raise scenario.fail(tc.name, "thresholds", f"class {tc.name!r}: {text}") from None
    return out


# -- from a command's spec (RampSpec, SweepSpec: specs/ramp.py) ------------------------
# besides the workload and request options, what a class may set of the ramp's own
CLASS_RAMP_OPTIONS = ("think",)


def class_option_names(spec: Any) -> dict[str, str]:
    """Every keyword a class may set -> the spec's field: the command's workload and request
    options (any spelling the command line knows: prompt_tokens, max_tokens...) and its think
    time. A new workload option is a class option the moment the command has it."""
    from llmbench.specs.groups import AbandonOpts, AgentOpts, RequestOpts, WorkloadOpts
    # AgentOpts: ``workload = "agent"`` and its --agent-* options make a class of agents
    fields = {f.name for g in (WorkloadOpts, RequestOpts, AbandonOpts, AgentOpts)
              for f in dataclasses.fields(g)}
    fields |= set(CLASS_RAMP_OPTIONS)
    return {k: name for k, (name, off) in type(spec).names().items()
            if name in fields and not off}


def load(spec: Any, value: Any, flag: str = "--scenario") -> Scenario:
    """The scenario a spec names: a file (read and checked) or a Scenario given from Python
    (each class's option names checked the same)."""
    known = class_option_names(spec)
    if isinstance(value, Scenario):
        for tc in value.classes:
            for key in tc.options:
                if normalize(key) not in known:
                    raise value.fail(tc.name, key, f"class {tc.name!r}: unknown option {key!r}; "
                                     "a class takes the workload and request options of the "
                                     "command (llmbench ramp --help)")
        return value
    return read(value, lambda k: normalize(k) in known, flag)


def class_spec(spec: Any, scenario: Scenario, tc: TrafficClass, files: bool = False) -> Any:
    """The command's spec with a class's options over it, one at a time, so a bad value is one
    line naming the file, the line and the class (the spec's own check says what is wrong).
    ``files``: also read what the options name (check_files), as the class's build will."""
    known = class_option_names(spec)
    out = spec
    for key, v in tc.options.items():
        name = known[normalize(key)]
        try:
            out = dataclasses.replace(out, **{name: v})
            if files:
                check_files(out, name)
        except CLASS_ERRORS as exc:
            raise scenario.fail(tc.name, normalize(key),
                                f"class {tc.name!r}: {exc}") from None
    return out


def check_class(spec: Any, scenario: Scenario, tc: TrafficClass,
                parse: Callable[[str], Any]) -> None:
    """Everything a class says that can be checked without building its prompts or asking the
    server: each option's value, the files its options name, its thresholds. The command runs
    this for every class before any class is built (a class of long prompts takes 40 s to
    build: a bad threshold in the class after it was found only then)."""
    class_spec(spec, scenario, tc, files=True)
    if tc.thresholds is not None:
        check_thresholds(scenario, tc, tc.thresholds, parse)


# what a class's bad value raises: named with the file, line and class (class_spec)
CLASS_ERRORS = (UsageError, DatasetError, TokenizerError)
BUILT_IN_DATASETS = ("synthetic", "random", "words")


def check_files(spec: Any, name: str) -> None:
    """The file a class's option ``name`` names, read and checked as the build will: --tools
    and --response-format parsed, a dataset file there, a named tokenizer loaded (a local
    file or the Hugging Face cache; ``auto`` and ``server`` ask the server, later)."""
    if name in ("tools", "response_format"):
        spec.agents()
    elif name == "dataset":
        d = str(spec.dataset)
        if d not in BUILT_IN_DATASETS and not d.startswith("hf:"):
            # the chat datasets' own check: no such file, a folder, a device or a pipe
            from llmbench.workload.files import check_regular_file
            check_regular_file(d)
    elif name == "tokenizer" and spec.tokenizer not in (None, "auto", "server"):
        load_tokenizer(str(spec.tokenizer))
