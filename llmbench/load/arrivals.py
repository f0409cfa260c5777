"""Open-loop arrival schedules, precomputed and seeded, on absolute time so they never drift.

The one-method pacer interface (after vegeta): a schedule is a list of offsets in seconds from
the start of dispatch.
"""

from __future__ import annotations

import math

import numpy as np


def schedule(n: int, rate: float, burstiness: float = 1.0, seed: int = 0,
             kind: str = "gamma") -> list[float]:
    """Offsets of ``n`` arrivals at ``rate`` per second.

    gamma (vLLM): gaps ~ Gamma(shape=burstiness, scale=1/(rate*burstiness)), seeded, then
    rescaled so the last arrival lands at n/rate; poisson is gamma with burstiness 1;
    constant is i/rate. An infinite rate sends everything at once.
    """
    if n <= 0:
        return []
    if math.isinf(rate):
        return [0.0] * n
    if rate <= 0:
        raise ValueError("rate must be > 0")
    if kind == "constant":
        return [i / rate for i in range(n)]
    if kind == "poisson":
        burstiness = 1.0
    if burstiness <= 0:
        raise ValueError("burstiness must be > 0")
    rng = np.random.default_rng(seed)
    gaps = rng.gamma(shape=burstiness, scale=1.0 / (rate * burstiness), size=n)
    offsets = np.cumsum(gaps)
    target = n / rate
    if offsets[-1] > 0:
        offsets = offsets * (target / offsets[-1])
    return [float(x) for x in offsets]
