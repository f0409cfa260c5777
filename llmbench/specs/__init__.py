"""What a user asks for, as plain typed data (below analysis: a spec is made and checked
without the network or a result; config.py reads the option files a user names). A command's
spec (``llmbench.RunSpec``, ``RampSpec`` ...; run.py, ramp.py ...) is made of these option
groups and its own options; a group may be passed whole::

    llmbench.RunSpec(target=Target(url="http://localhost:8000/v1", model="M"),
                     load=RunLoad(concurrency=8, duration=60.0),
                     request=Request(temperature=0.0), thresholds=["ttft.p95<=2s"])

or its options as the spec's keywords (``RunSpec(url=..., concurrency=8)``), the command
line's flags in snake_case. Each group checks its own options when made, and the spec checks
them all together (``check()``: every problem at once, one line each)."""

# imported on first use (``llmbench.specs.options`` alone is what the command line reads to
# reject a flag); type checkers see them all (any name TYPE_CHECKING is true for them)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from llmbench.specs.groups import (AgentOpts as Agent, OutputOpts as Output,
                                       RequestOpts as Request, ServerOpts as Server,
                                       TargetOpts as Target, TelemetryOpts as Telemetry,
                                       WorkloadOpts as Prompts)
    from llmbench.specs.load import RunLoad

__all__ = ["Target", "Server", "Telemetry", "Prompts", "Agent", "Request", "Output", "RunLoad"]

_WHERE = {"Target": "TargetOpts", "Server": "ServerOpts", "Telemetry": "TelemetryOpts",
          "Prompts": "WorkloadOpts", "Agent": "AgentOpts", "Request": "RequestOpts",
          "Output": "OutputOpts"}


def __getattr__(name: str) -> object:
    if name == "RunLoad":
        from llmbench.specs.load import RunLoad
        return RunLoad
    if name not in _WHERE:
        raise AttributeError(f"module 'llmbench.specs' has no attribute {name!r}")
    from llmbench.specs import groups
    return getattr(groups, _WHERE[name])
