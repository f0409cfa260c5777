"""Load shapes as values: a fixed level (closed loop or open-loop rate), a ramp, the router A/B
probe; all built on one virtual user and one open-loop dispatcher (``user.py``)."""

from llmbench.load.shapes.base import Drive, LiveState, LoadShape
from llmbench.load.shapes.fixed import ClosedLoop, OpenLoop
from llmbench.load.shapes.ramp import JudgedStep, Ramp, StepWindow
from llmbench.load.shapes.router import RouterAB

__all__ = ["Drive", "LiveState", "LoadShape", "ClosedLoop", "OpenLoop", "Ramp", "JudgedStep",
           "StepWindow", "RouterAB"]
