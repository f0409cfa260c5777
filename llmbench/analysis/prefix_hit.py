"""The prefix-cache hit ratio a workload aimed at, against what the server achieved.

Two witnesses: the replies' ``usage.prompt_tokens_details.cached_tokens`` (per request, so TTFT
can be split by hit and miss) and the server's own counters (vLLM's prefix-cache queries and
hits, in tokens; llama.cpp's cached prompt tokens), read right after the warm-up and again after
the run so the warm-up is not in the difference.
"""

from __future__ import annotations

from typing import Any, Iterable

from llmbench.analysis.percentile import stats
from llmbench.records.record import Record, measured

WARN_POINTS = 0.10        # |achieved - target| above this: say why it may differ


def _ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num is not None and den else None


def counters_delta(before: dict[str, Any] | None, after: dict[str, Any] | None
                   ) -> dict[str, float] | None:
    """Queried and hit tokens between two polls of the server, when both had the counters."""
    if not before or not after:
        return None
    keys = ("prefix_cache_queries", "prefix_cache_hits")
    if any(before.get(k) is None or after.get(k) is None for k in keys):
        return None
    q = after["prefix_cache_queries"] - before["prefix_cache_queries"]
    h = after["prefix_cache_hits"] - before["prefix_cache_hits"]
    return {"queried_tokens": q, "hit_tokens": h, "ratio": _ratio(h, q)}


def verify(records: Iterable[Record], plan: dict[str, Any], before: dict[str, Any] | None,
           after: dict[str, Any] | None, server_kind: str | None = None,
           percentiles: Iterable[float] = (50.0, 90.0, 99.0)) -> dict[str, Any]:
    """run.json's ``prefix_cache`` section: target, achieved (both witnesses), TTFT by hit/miss,
    and a warning when either witness is more than 10 points off the target."""
    ok = [r for r in measured(list(records)) if r.ok]
    reported = [r for r in ok if r.cached_tokens is not None and r.prompt_tokens]
    prompt = sum(r.prompt_tokens or 0 for r in reported)
    cached = sum(r.cached_tokens or 0 for r in reported)
    target = float(plan["target"])
    out: dict[str, Any] = {**plan, "requests": len(ok),
                           "usage": {"requests_reporting": len(reported), "prompt_tokens": prompt,
                                     "cached_tokens": cached, "ratio": _ratio(cached, prompt)},
                           "server": None}
    delta = counters_delta(before, after)
    if delta is not None:
        out["server"] = {"kind": server_kind, **delta}
    hits = [r.ttft for r in ok if (r.cached_tokens or 0) > 0 and r.ttft is not None]
    misses = [r.ttft for r in ok if r.cached_tokens == 0 and r.ttft is not None]
    out["ttft_ms"] = {"hit": stats(hits, percentiles, 1000.0),
                      "miss": stats(misses, percentiles, 1000.0)}
    achieved = [v for v in (out["usage"]["ratio"], (out["server"] or {}).get("ratio"))
                if v is not None]
    out["achieved"] = achieved[0] if achieved else None
    warnings = []
    # a Mooncake trace's implied ratio is verified on every replay; that a server reports no
    # cache counts is only worth a warning when the user aimed at a ratio
    aimed = plan.get("source", "--prefix-hit-ratio") == "--prefix-hit-ratio"
    if not achieved and aimed:
        warnings.append("the server reported no cached tokens (no usage.prompt_tokens_details, "
                        "no prefix-cache counters): the hit ratio could not be verified")
    elif any(abs(a - target) > WARN_POINTS for a in achieved):
        got = " / ".join(f"{a:.2f}" for a in achieved)
        warnings.append(
            f"prefix-cache hit ratio {got} is more than {WARN_POINTS * 100:.0f} points from the "
            f"target {target:.2f}: the cache may be too small for the shared prompts, a router "
            "may scatter them across backends, or the block size is not "
            f"{plan.get('block_tokens')} (--cache-block-tokens)")
    out["warnings"] = warnings
    return out


def lines(p: dict[str, Any]) -> list[str]:
    """The console's few lines: target and achieved side by side, TTFT hit vs miss."""
    def pct(v: float | None) -> str:
        return "n/a" if v is None else f"{v * 100:.1f}%"

    srv = p.get("server") or {}
    what = "target" if p.get("source", "--prefix-hit-ratio") == "--prefix-hit-ratio" else \
        "the trace implies"
    out = [f"Prefix cache: {what} {pct(p['target'])}  achieved {pct(p['usage']['ratio'])} "
           f"(usage.cached_tokens)  {pct(srv.get('ratio'))} (server counters"
           + (f", {srv['kind']}" if srv.get("kind") else "") + ")"]
    t = p["ttft_ms"]

    def cell(s: dict[str, Any]) -> str:
        if not s.get("count"):
            return "none"
        return f"{s['count']} req, median {s['median']:.1f} ms, p99 {s['p99']:.1f} ms"
    out.append(f"  TTFT cache hit: {cell(t['hit'])};  cache miss: {cell(t['miss'])}")
    out += [f"WARNING: {w}" for w in p.get("warnings", [])]
    return out
