"""llmbench: load-test LLM chat servers and say why they stopped keeping up.

The Python API (llmbench/api.py), imported on first use so that ``import llmbench`` and the
command line start as fast as before; type checkers see every name (the package ships
``py.typed``)::

    import llmbench
    run = llmbench.run(url="http://localhost:8000/v1", model="M", concurrency=32, requests=500)
    run.summary.ttft.p50, run.summary.output_throughput, run.path
    spec = llmbench.RampSpec(url="http://localhost:8000/v1", users=[1, 2, 4], hold=30.0)
    ramp = llmbench.ramp(spec)
"""

from llmbench.version import __version__

# what the lazy names below are, for type checkers (never at run time). Not typing's own
# TYPE_CHECKING: importing typing is 3 ms that `import llmbench` does not need, and mypy and
# pyright take any name TYPE_CHECKING as true
TYPE_CHECKING = False
if TYPE_CHECKING:
    from llmbench.specs.thresholds import Threshold
    from llmbench.api import (CompareSpec, Comparison, ProbeSpec, RampSpec, Report, ReportSpec,
                              RunSpec, SweepSpec, compare, load_run, mock, probe, ramp, report,
                              run, sweep)
    from llmbench.errors import (CommandFailed, LlmbenchError, RunFailed, ServerRefused,
                                 ServerUnreachable, UsageError)
    from llmbench.specs.ramp import RampSteps
    from llmbench.results.schema import Metric, Run, Step, Summary, Sweep, Verdict
    from llmbench.specs import Agent, Output, Prompts, Request, RunLoad, Server, Target, Telemetry

__all__ = [
    "run", "ramp", "sweep", "probe", "report", "compare", "load_run", "mock",
    "RunSpec", "RampSpec", "SweepSpec", "ProbeSpec", "ReportSpec", "CompareSpec", "Threshold",
    "Run", "Step", "Summary", "Metric", "Verdict", "Sweep", "Report", "Comparison",
    "LlmbenchError", "UsageError", "ServerUnreachable", "ServerRefused", "CommandFailed",
    "RunFailed",
    "Target", "Server", "Telemetry", "Prompts", "Agent", "Request", "Output", "RunLoad",
    "RampSteps",
    "__version__",
]

_WHERE = {
    **dict.fromkeys(("run", "ramp", "sweep", "probe", "report", "compare", "load_run", "mock",
                     "RunSpec", "RampSpec", "SweepSpec", "ProbeSpec", "ReportSpec", "CompareSpec",
                     "Report", "Comparison"), "llmbench.api"),
    "Threshold": "llmbench.specs.thresholds",
    **dict.fromkeys(("Target", "Server", "Telemetry", "Prompts", "Agent", "Request", "Output",
                     "RunLoad"), "llmbench.specs"),
    "RampSteps": "llmbench.specs.ramp",
    **dict.fromkeys(("Run", "Step", "Summary", "Metric", "Verdict", "Sweep"), "llmbench.results.schema"),
    **dict.fromkeys(("LlmbenchError", "UsageError", "ServerUnreachable", "ServerRefused",
                     "CommandFailed", "RunFailed"), "llmbench.errors"),
}


def __getattr__(name: str) -> object:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'llmbench' has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(where), name)
    if where == "llmbench.results.schema":
        importlib.import_module("llmbench.report.notebook")   # results draw in Jupyter
    if name == "report":
        value = importlib.import_module("llmbench.report")      # made callable: below
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


# ``llmbench.report`` is two things: the API's report() and the package of report modules
# (llmbench/report/), which the import system sets as this module's attribute once anything
# imports it. So that package is made callable (it calls the API's report) the moment it is
# set, and ``llmbench.report("results/<run>")`` works whichever the name holds, while
# ``llmbench.report.html`` stays the module. Done here, at the top of the layers: the report
# package itself never imports the API.
import sys as _sys  # noqa: E402
import types as _types  # noqa: E402


class _ReportPackage(_types.ModuleType):
    def __call__(self, *args: object, **kwargs: object) -> object:
        from llmbench.api import report
        return report(*args, **kwargs)  # type: ignore[arg-type]

    @property
    def __signature__(self) -> object:
        from llmbench.api import report
        return report.__signature__


class _Package(_types.ModuleType):
    def __setattr__(self, name: str, value: object) -> None:
        if name == "report" and type(value) is _types.ModuleType:
            value.__class__ = _ReportPackage
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Package
