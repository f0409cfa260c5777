"""Open-loop arrival schedules, precomputed and seeded, on absolute time so they never drift.

The one-method pacer interface (after vegeta): a schedule is a list of offsets in seconds from
the start of dispatch.
"""

from __future__ import annotations

import math


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
    import numpy as np      # here: a closed-loop run needs no numpy before its analysis
    rng = np.random.default_rng(seed)
    gaps = rng.gamma(shape=burstiness, scale=1.0 / (rate * burstiness), size=n)
    offsets = np.cumsum(gaps)
    target = n / rate
    if offsets[-1] > 0:
        offsets = offsets * (target / offsets[-1])
    return [float(x) for x in offsets]


def covering(rate: float, span_s: float, burstiness: float = 1.0, seed: int = 0) -> list[float]:
    """Offsets of every arrival in [0, span_s) of a renewal process at ``rate`` per second
    (gamma gaps as ``schedule``, Poisson at burstiness 1), not rescaled: any window of the span
    holds rate x its length arrivals on average, Poisson-distributed at burstiness 1.

    ``schedule`` fixes the count and stretches the gaps so the last arrival lands on n/rate:
    used for a ramp's rate step, that last arrival fell on the hold's end and was dropped, and
    a seed's front-loaded gaps stayed front-loaded (one 2 req/s step measured 1.0 req/s)."""
    if span_s <= 0:
        return []
    if math.isinf(rate):
        raise ValueError("a covering schedule needs a finite rate")
    if rate <= 0:
        raise ValueError("rate must be > 0")
    if burstiness <= 0:
        raise ValueError("burstiness must be > 0")
    import numpy as np      # here: a closed-loop run needs no numpy before its analysis
    rng = np.random.default_rng(seed)
    out: list[float] = []
    t = 0.0
    chunk = max(16, int(rate * span_s * 1.2) + 16)
    while True:
        gaps = rng.gamma(shape=burstiness, scale=1.0 / (rate * burstiness), size=chunk)
        times = t + np.cumsum(gaps)
        inside = times[times < span_s]
        out.extend(float(x) for x in inside)
        if len(inside) < len(times):
            return out
        t = float(times[-1])
