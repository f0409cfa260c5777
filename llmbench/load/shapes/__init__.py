"""Load shapes as values: a fixed level (closed loop or open-loop rate), a ramp (its steps
from a pacer: a fixed list, or the search for the limit), the router A/B probe; all built on
one virtual user and one open-loop dispatcher (``user.py``)."""

from llmbench.load.shapes.base import Drive, LiveState, LoadShape
from llmbench.load.shapes.fixed import ClosedLoop, OpenLoop
from llmbench.load.shapes.pace import FixedSteps, JudgedStep, Pacer, StepPlan
from llmbench.load.shapes.ramp import Ramp, StepWindow
from llmbench.load.shapes.router import RouterAB
from llmbench.load.shapes.search import SearchPacer, Trial

__all__ = ["Drive", "LiveState", "LoadShape", "ClosedLoop", "OpenLoop", "Ramp", "JudgedStep",
           "StepWindow", "RouterAB", "FixedSteps", "Pacer", "StepPlan", "SearchPacer", "Trial"]
