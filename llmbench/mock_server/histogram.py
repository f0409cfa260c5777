"""Prometheus-style cumulative histogram; its own module so the engine (which observes) and the
exposition (which renders the engine) do not import each other."""

from __future__ import annotations

import bisect


class Histogram:
    __slots__ = ("bounds", "counts", "total", "count")

    def __init__(self, bounds: list[float]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0
        self.count = 0

    def observe(self, v: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, v)] += 1
        self.total += v
        self.count += 1

    def lines(self, name: str, labels: str) -> list[str]:
        out = []
        cum = 0
        for b, c in zip(self.bounds, self.counts):
            cum += c
            out.append(f'{name}_bucket{{{labels},le="{b}"}} {cum}')
        out.append(f'{name}_bucket{{{labels},le="+Inf"}} {self.count}')
        out.append(f"{name}_sum{{{labels}}} {self.total}")
        out.append(f"{name}_count{{{labels}}} {self.count}")
        return out
