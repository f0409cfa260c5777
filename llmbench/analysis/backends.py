"""Which backend served what: spread, imbalance, latency per backend, conversation affinity and
prefix-cache hits per backend. Pure, from the ``served_by`` of each record."""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable

import numpy as np

from llmbench.records.record import Record, measured
from llmbench.analysis.percentile import percentile
from llmbench.results.schema import RouterCounters


def backends(records: Iterable[Record]) -> dict[str, Any] | None:
    recs = [r for r in measured(records) if r.served_by]
    if not recs:
        return None
    by: dict[str, list[Record]] = defaultdict(list)
    for r in recs:
        by[r.served_by or "?"].append(r)
    total = len(recs)
    per: dict[str, Any] = {}
    for name, rs in sorted(by.items()):
        ok = [r for r in rs if r.ok]
        ttft = [r.ttft * 1000 for r in ok if r.token_times]
        gaps = [g * 1000 for r in ok for g in r.itls]
        prompt = sum(r.prompt_tokens or 0 for r in ok if r.cached_tokens is not None)
        cached = sum(r.cached_tokens or 0 for r in ok if r.cached_tokens is not None)
        per[name] = {
            "requests": len(rs), "share": len(rs) / total, "failed": len(rs) - len(ok),
            "ttft_p50_ms": percentile(ttft, 50), "ttft_p95_ms": percentile(ttft, 95),
            "itl_p50_ms": percentile(gaps, 50),
            "cache_hit_rate": cached / prompt if prompt else None,
        }
    counts = np.array([v["requests"] for v in per.values()], dtype=float)
    out: dict[str, Any] = {
        "backends": per,
        "count": len(per),
        # max/mean: 1.0 is a perfect spread; 2.0 means one backend got twice its fair share
        "imbalance": float(counts.max() / counts.mean()),
        "cv": float(counts.std() / counts.mean()),
    }
    convs: dict[str, list[Record]] = defaultdict(list)
    for r in recs:
        if r.conversation is not None:
            convs[r.conversation + f"#{r.user}"].append(r)
    pairs = same = whole = multi = 0
    for rs in convs.values():
        rs.sort(key=lambda r: (r.start, r.turn))
        if len(rs) < 2 or len({r.turn for r in rs}) < 2:
            continue
        multi += 1
        names = [r.served_by for r in rs]
        pairs += len(names) - 1
        same += sum(1 for a, b in zip(names, names[1:]) if a == b)
        whole += len(set(names)) == 1
    if multi:
        out["affinity"] = {"conversations": multi, "same_backend_next_turn": same / pairs,
                           "whole_conversation_on_one_backend": whole / multi}
    return out


def router_counters(samples: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """A router's own per-backend in-flight counts (NOMYO's /api/usage, polled about once a
    second) averaged over the samples: each backend's share of the requests the router had out,
    which is its share of the load when no reply names its backend. None: no such counts."""
    sums: dict[str, float] = defaultdict(float)
    n = 0
    for s in samples:
        per = s.get("backends_in_flight")
        if not isinstance(per, dict):
            continue
        n += 1
        for name, v in per.items():
            if isinstance(v, (int, float)):
                sums[str(name)] += float(v)
    total = sum(sums.values())
    if not n or not total:
        return None
    return {"samples": n, "backends": {k: {"mean_in_flight": v / n, "share": v / total}
                                       for k, v in sorted(sums.items())}}


def unidentified_sentence(counters: RouterCounters | None) -> str:
    """What it means when no reply named the backend that served it (the probe's router path,
    a run through a router): said instead of a spread nobody measured."""
    text = ("No reply named the backend that served it (no served-by header: give the router's "
            "with --served-by-header if it has one), so the spread over backends, per-backend "
            "latency and conversation affinity are unknown.")
    per = counters.backends if counters is not None else {}
    if len(per) > 1:
        text += (" The router's own counters (its requests in flight per backend) show "
                 f"{len(per)} backends taking " + ", ".join(
                     f"{k} {v.share * 100:.0f}%" for k, v in per.items())
                 + " of the load: the overhead compares those backends together against the "
                 "one --direct backend, so it mixes the router's own cost with the difference "
                 "in capacity (a negative overhead under load means the router's path had more "
                 "of it).")
    elif len(per) == 1:
        text += (f" The router's own counters show one backend ({next(iter(per))}) taking all "
                 "of it.")
    else:
        text += (" If the router has more than one backend, the overhead compares them together "
                 "against the one --direct backend: the router's own cost mixed with the "
                 "difference in capacity (a negative overhead under load means the router's "
                 "path had more of it).")
    return text
