"""The verdict as an ordered list of rules (issue 44 §4).

``evidence.Evidence`` is everything a verdict may stand on, read once from a ramp's steps and
records; each rule in ``ramp.RULES`` looks at it and either fires (a ``Finding``: the kind of
limit, its evidence, what to change) or passes, and may leave notes either way.
``analysis.verdict.explain`` asks them in order and takes the first that fires. Nothing edits
a verdict after that: what happened to the ramp itself (interrupted, a lost worker, users who
gave up, ``--find``'s answer) is part of the evidence too (``Circumstances``).
"""

from llmbench.analysis.rules.evidence import Circumstances, Evidence, Finding, Rule

__all__ = ["Circumstances", "Evidence", "Finding", "Rule"]
