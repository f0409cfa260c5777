"""What a user asks for, as plain typed data (below analysis: nothing here reads a file, the
network or a result). A command's spec (``llmbench.RunSpec``, ``RampSpec`` ...) is made of
these option groups and its own options; a group may be passed whole::

    llmbench.RunSpec(target=Target(url="http://localhost:8000/v1", model="M"),
                     load=RunLoad(concurrency=8, duration=60.0),
                     request=Request(temperature=0.0), thresholds=["ttft.p95<=2s"])

or its options as the spec's keywords (``RunSpec(url=..., concurrency=8)``), the command
line's flags in snake_case. Each group checks its own options when made, and the spec checks
them all together (``check()``: every problem at once, one line each)."""

from llmbench.specs.groups import AgentOpts as Agent
from llmbench.specs.groups import OutputOpts as Output
from llmbench.specs.groups import RequestOpts as Request
from llmbench.specs.groups import ServerOpts as Server
from llmbench.specs.groups import TargetOpts as Target
from llmbench.specs.groups import TelemetryOpts as Telemetry
from llmbench.specs.groups import WorkloadOpts as Prompts
from llmbench.specs.load import RunLoad

__all__ = ["Target", "Server", "Telemetry", "Prompts", "Agent", "Request", "Output", "RunLoad"]
