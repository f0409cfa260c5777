"""Load shapes as values: a fixed level (closed loop or open-loop rate), a ramp, the router A/B
probe; all built on one virtual user and one open-loop dispatcher (``user.py``)."""

from .base import Drive, LiveState, LoadShape
from .fixed import ClosedLoop, OpenLoop
from .ramp import Ramp, StepResult, StepWindow
from .router import RouterAB

__all__ = ["Drive", "LiveState", "LoadShape", "ClosedLoop", "OpenLoop", "Ramp", "StepResult",
           "StepWindow", "RouterAB"]
