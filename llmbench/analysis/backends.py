"""Which backend served what: spread, imbalance, latency per backend, conversation affinity and
prefix-cache hits per backend. Pure, from the ``served_by`` of each record."""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable

import numpy as np

from llmbench.records.record import Record, measured
from llmbench.analysis.stats import quantile


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
            "ttft_p50_ms": quantile(ttft, 50), "ttft_p95_ms": quantile(ttft, 95),
            "itl_p50_ms": quantile(gaps, 50),
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
