"""Records made up for tests and scripts: ``varied`` has every kind of field the summary reads
(tests/unit/records/test_record_store.py, test_schema.py, test_contract.py and
scripts/check_metrics_identical.py share it; a test file is never imported by another)."""

from __future__ import annotations

import random

from llmbench.records.record import Record

__all__ = ["varied"]


def varied(n: int = 400, seed: int = 1) -> list[Record]:
    """Records with every kind of field the summary reads: failures of several kinds, warm-up
    and interrupted ones, multi-turn, per-event token counts, reasoning replies, server timings,
    served-by backends, cached tokens, queue headers, non-streamed replies, odd ids."""
    rng = random.Random(seed)
    out = []
    t = 1000.0 + rng.random()
    for i in range(n):
        t += rng.random() * 0.05
        start = t + rng.random() * 0.01
        r = Record(f"r-{i + 1}" if i % 50 else f"odd id {i}", scheduled=t, start=start,
                   user=i % 7, conversation=f"syn-{i // 2}" if i % 3 else None, turn=i % 2,
                   step=(i // 100) if i % 5 else None, max_tokens=16, stream=i % 17 != 0,
                   served_by=("a", "b", None)[i % 3], retries=1 if i % 41 == 0 else 0,
                   # the send stamp (most requests; not one that never reached the socket) and
                   # the worker process (--workers), both columns of the store
                   sent=start + rng.random() * 0.002 if i % 13 else None,
                   worker=i % 3 if i % 4 else None)
        kind = i % 23
        if kind == 3:
            r.error_kind, r.status, r.error = "http_status", 503, f"busy {i % 2}"
            r.done = start + 0.01
        elif kind == 5:
            r.error_kind, r.error = "timeout_first_token", "no first token"
            r.done = start + 1.0
        else:
            k = rng.randint(1, 12)
            times = [start + 0.02 + j * rng.uniform(0.001, 0.03) for j in range(k)]
            times = sorted(times)
            r.token_times = times
            r.first_token, r.end = times[0], times[-1]
            r.done = times[-1] + 0.0005
            r.ok, r.status = True, 200
            r.prompt_tokens = rng.randint(5, 50)
            r.output_tokens = k if i % 4 else k + rng.randint(0, 3)
            r.finish_reason = "length" if i % 2 else "stop"
            if i % 13 == 0:
                r.token_counts = [rng.randint(1, 3) for _ in range(k)]
                r.output_tokens = sum(r.token_counts)
            if i % 11 == 0 and k >= 3:            # a reasoning reply
                r.reasoning_events = k // 2
                r.reasoning_tokens = k // 2 + 1
                r.reasoning_end = times[k // 2 - 1]
                r.output_from = k // 2
                r.first_output = times[k // 2]
            if i % 29 == 0 and k >= 2:            # reasoned, never answered
                r.reasoning_events, r.reasoning_tokens = k, k
                r.reasoning_end, r.output_from, r.first_output = times[-1], None, None
            if i % 3 == 0:
                r.server_queue_ms = rng.random() * 5
            if i % 19 == 0:
                r.server_timing = {"total_duration": 9e8, "load_duration": 1e7,
                                   "prompt_eval_duration": 2e8, "eval_duration": 5e8}
            if i % 6 == 0:
                r.cached_tokens = rng.randint(0, 5)
            if i % 9 == 0:
                r.output_tokens_source = "tokenizer"
        if i % 31 == 0:
            r.warmup = True
        if i % 37 == 0:
            r.error_kind, r.ok = "interrupted", False
        out.append(r)
    return out


def plain_summary(s):
    """A Summary as the flat dict run.json holds, with Python's floats (infinities kept)."""
    d = s.flat()
    d["error_samples"] = [e.to_dict() for e in d.get("error_samples") or []]
    if "by_turn" in d:
        d["by_turn"] = {k: plain_summary(v) for k, v in d["by_turn"].items()}
    return d
