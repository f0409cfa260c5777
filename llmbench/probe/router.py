"""``llmbench probe``: the same workload through a router and straight to a backend.

Each step runs in short slices that alternate between the two paths (router first, then direct
first, and so on), so drift over time hits both equally. Per step: router minus direct for TTFT
p50/p95, E2EL p50 and ITL p50, with bootstrap confidence intervals, and both throughputs. The
step where the router's overhead grows while the direct path stays flat is named router-bound.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from ..client import Client, RequestParams, Timeouts
from ..load.fixed import pause, play
from ..load.session import Session
from ..metrics import per_request, summarize
from ..records import Record, RecordLog
from ..target import Target
from ..workload import Conversation

perf_counter = time.perf_counter

OVERHEAD_METRICS = ("ttft_p50", "ttft_p95", "e2el_p50", "itl_p50")
MIN_OVERHEAD_MS = 1.0
MIN_OVERHEAD_FRACTION = 0.02


@dataclass
class ProbePlan:
    router: Target
    direct: Target
    steps: list[int]
    slice_s: float = 5.0
    rounds: int = 3
    think_s: tuple[float, float] = (0.0, 0.0)
    seed: int = 0
    bootstrap: int = 1000
    served_by_header: str | None = None


def _values(records: Sequence[Record], metric: str) -> np.ndarray:
    ok = [per_request(r) for r in records if r.ok]
    if metric.startswith("ttft"):
        return np.array([p.ttft for p in ok]) * 1000
    if metric.startswith("e2el"):
        return np.array([p.e2el for p in ok]) * 1000
    return np.array([g for p in ok for g in p.itls]) * 1000


def overhead(router: Sequence[Record], direct: Sequence[Record], metric: str, n_boot: int = 1000,
             seed: int = 0) -> dict[str, Any]:
    """router − direct for one statistic, with a 95% bootstrap interval (pure)."""
    q = 95.0 if metric.endswith("p95") else 50.0
    a, b = _values(router, metric), _values(direct, metric)
    if len(a) < 2 or len(b) < 2:
        return {"router_ms": None, "direct_ms": None, "overhead_ms": None, "ci_ms": None,
                "significant": False}
    rng = np.random.default_rng(seed)
    # cap the resample size for pooled gaps so a long run stays fast; percentiles stay unbiased
    ia = rng.integers(0, len(a), size=(n_boot, min(len(a), 4000)))
    ib = rng.integers(0, len(b), size=(n_boot, min(len(b), 4000)))
    diffs = np.percentile(a[ia], q, axis=1) - np.percentile(b[ib], q, axis=1)
    lo, hi = np.percentile(diffs, [2.5, 97.5])
    point = float(np.percentile(a, q) - np.percentile(b, q))
    direct_v = float(np.percentile(b, q))
    # significant: the interval excludes zero (not noise) and the difference is big enough to
    # matter (at least 1 ms or 2%): an A/A probe on loopback shows a few tenths of a ms
    # from connection order alone
    matters = abs(point) >= max(MIN_OVERHEAD_MS, MIN_OVERHEAD_FRACTION * direct_v)
    return {"router_ms": float(np.percentile(a, q)), "direct_ms": direct_v,
            "overhead_ms": point, "ci_ms": [float(lo), float(hi)],
            "significant": bool((lo > 0 or hi < 0) and matters)}


def evaluate_step(index: int, users: int, records: Sequence[Record],
                  active_s: dict[str, float] | None = None, n_boot: int = 1000,
                  seed: int = 0) -> dict[str, Any]:
    """``active_s``: seconds each path was driven in this step (its slices, not the gaps
    between them), the denominator of its throughputs."""
    recs = [r for r in records if r.step == index and not r.warmup]
    router = [r for r in recs if r.path == "router"]
    direct = [r for r in recs if r.path == "direct"]
    out: dict[str, Any] = {"index": index, "users": users}
    for name, rs in (("router", router), ("direct", direct)):
        summary = _slim(summarize(rs))
        seconds = (active_s or {}).get(name)
        if seconds:
            summary["output_throughput"] = sum(r.output_tokens or 0 for r in rs if r.ok) / seconds
            summary["request_throughput"] = sum(1 for r in rs if r.ok) / seconds
            summary["active_s"] = seconds
        out[name] = summary
    for m in OVERHEAD_METRICS:
        out[m] = overhead(router, direct, m, n_boot, seed + index)
    return out


def _slim(s: dict[str, Any]) -> dict[str, Any]:
    keys = ("completed", "failed", "requests", "output_throughput", "request_throughput",
            "median_ttft_ms", "p95_ttft_ms", "median_itl_ms", "median_e2el_ms", "errors",
            "error_samples", "served_by", "backends")
    return {k: s.get(k) for k in keys}


def router_bound(steps: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The first step where the router's TTFT overhead grew beyond the first step's interval
    while the direct path stayed flat (pure)."""
    if len(steps) < 2 or steps[0]["ttft_p50"]["ci_ms"] is None:
        return None
    base = steps[0]
    base_hi = base["ttft_p50"]["ci_ms"][1]
    base_direct = base["direct"]["median_ttft_ms"] or 0.0
    for s in steps[1:]:
        o = s["ttft_p50"]
        if o["ci_ms"] is None:
            continue
        grew = o["ci_ms"][0] > base_hi and o["overhead_ms"] - base["ttft_p50"]["overhead_ms"] > \
            max(2.0, 0.5 * abs(base["ttft_p50"]["overhead_ms"]))
        direct_flat = (s["direct"]["median_ttft_ms"] or 0.0) <= 1.25 * base_direct + 5.0
        if grew and direct_flat:
            return {"users": s["users"], "overhead_ms": o["overhead_ms"],
                    "first_overhead_ms": base["ttft_p50"]["overhead_ms"],
                    "direct_ttft_p50_ms": s["direct"]["median_ttft_ms"]}
    return None


async def _slice(session: Session, convs: Sequence[Conversation], users: int, seconds: float,
                 think: tuple[float, float], seed: int, offset: int) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    async def user(uid: int) -> None:
        rng = random.Random(seed * 7919 + uid)
        k = 0
        while not stop.is_set() and not session.stopping.is_set():
            conv = convs[(offset + uid + k * users) % len(convs)]
            k += 1
            await play(session, conv, None, user=uid, scheduled=perf_counter(), think=think,
                       rng=rng, stop=stop)
            if not await pause(stop, think, rng):
                return

    tasks = [loop.create_task(user(u)) for u in range(users)]
    try:
        await asyncio.wait_for(session.stopping.wait(), seconds)
    except asyncio.TimeoutError:
        pass
    stop.set()
    await asyncio.gather(*tasks)        # in-flight requests finish before the other path runs


async def run_probe(plan: ProbePlan, convs: Sequence[Conversation], router: Client,
                    direct: Client, log: RecordLog | None, stopping: asyncio.Event,
                    on_step: Callable[[dict[str, Any]], None] | None = None
                    ) -> tuple[list[dict[str, Any]], list[Record]]:
    sessions = {"router": Session(router, log, run_id="rt", path="router", stopping=stopping),
                "direct": Session(direct, log, run_id="dr", path="direct", stopping=stopping)}
    results = []
    offset = 0
    for index, users in enumerate(plan.steps):
        for s in sessions.values():
            s.step = index
        active = {"router": 0.0, "direct": 0.0}
        for rnd in range(plan.rounds):
            order = ("router", "direct") if rnd % 2 == 0 else ("direct", "router")
            for path in order:
                if stopping.is_set():
                    break
                # the same conversations on both paths in a round: a like-for-like workload
                t_slice = perf_counter()
                await _slice(sessions[path], convs, users, plan.slice_s, plan.think_s,
                             plan.seed + rnd, offset)
                active[path] += perf_counter() - t_slice
            offset += users * 7
        if stopping.is_set():
            break
        records = sessions["router"].records + sessions["direct"].records
        step = evaluate_step(index, users, records, active, plan.bootstrap, plan.seed)
        results.append(step)
        if on_step is not None:
            on_step(step)
    return results, sessions["router"].records + sessions["direct"].records
