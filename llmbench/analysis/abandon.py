"""Users who give up (``--abandon``): what they cancelled, and whether the server let go.

Pure, from records and the server probe's samples (server.jsonl). A cancelled request's record
has ``error_kind == "cancelled"`` (client.abandon); with no token event the user gave up
waiting, with some it stopped the reply mid-stream.

The release check. A server that drops a request when its connection closes (vLLM aborts it,
llama.cpp cancels its task, the mock frees its slot) never counts more requests, running or
queued, than the client has open; one that goes on decoding for a closed connection counts the
cancelled ones until they would have ended, and the users still there wait behind work nobody
reads. So at each server sample (at time t) its running + waiting count is compared with the
requests llmbench had open at any moment in [t - RELEASE_WITHIN_S, t + POLL_SLACK_S]: the
server may take up to RELEASE_WITHIN_S to notice a closed connection, and its answer comes a
little after the poll was sent. Two samples in a row above that (one could be a poll that
raced a request's end) are a server that kept what it was no longer asked for.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from llmbench.records.definitions import is_measured
from llmbench.records.record import CANCELLED, Record
from llmbench.results.abandon import Abandonment, SlotRelease, describe

# how long a server may take to notice a closed connection and free what it held: llama.cpp
# checks between decode steps, vLLM at its next engine step; two of the probe's 1 s polls
RELEASE_WITHIN_S = 3.0
POLL_SLACK_S = 0.5          # a poll's answer comes after its timestamp: requests just started
MIN_RUN = 2                 # samples in a row above llmbench's open requests


def cancelled_counts(records: Sequence[Record]) -> tuple[int, int, int, int]:
    """(requests, cancelled, of them before any token, mid-reply), measured requests only."""
    n = waiting = streaming = 0
    for r in records:
        if not is_measured(r.warmup, r.error_kind):
            continue
        n += 1
        if r.error_kind == CANCELLED:
            if r.token_times:
                streaming += 1
            else:
                waiting += 1
    return n, waiting + streaming, waiting, streaming


def server_count(sample: dict[str, Any]) -> float | None:
    """Requests the server holds in one sample: running + waiting (None: it says neither)."""
    running = sample.get("running")
    if running is None:
        return None
    return float(running) + float(sample.get("waiting") or 0.0)


def release_check(records: Sequence[Record], samples: Sequence[dict[str, Any]],
                  t0: float | None = None, within_s: float = RELEASE_WITHIN_S,
                  kind: str | None = None) -> SlotRelease:
    """Did the server's count fall back within ``within_s`` of the connections llmbench closed
    (see the module's docstring)? ``t0``: the run's start (perf_counter), for the time the
    longest stretch began."""
    recs = [r for r in records if r.start and r.done]     # 0.0: never sent (perf_counter)
    cancelled = sum(1 for r in recs if r.error_kind == CANCELLED)
    out = SlotRelease(within_s=within_s, cancelled=cancelled, source=kind)
    pts = [(float(s["t"]), c) for s in samples if "t" in s and "error" not in s
           and (c := server_count(s)) is not None]
    out.samples = len(pts)
    if not cancelled:
        out.text = "No request was cancelled, so the server's release was not checked."
        return out
    if not pts:
        out.text = ("Whether the server freed what the cancelled requests held could not be "
                    "checked: it reported no running count (no server probe: --server-probe).")
        return out
    starts = np.sort(np.fromiter((r.start for r in recs), dtype=float, count=len(recs)))
    dones = np.sort(np.fromiter((r.done for r in recs), dtype=float, count=len(recs)))
    ts = np.array([t for t, _ in pts])
    held = np.array([c for _, c in pts])
    # open at some moment in [t - within, t + slack]: started by its end, not done before its
    # start (every record started before it was done)
    open_ = (np.searchsorted(starts, ts + POLL_SLACK_S, side="right")
             - np.searchsorted(dones, ts - within_s, side="left"))
    excess = held - open_
    over = excess > 0
    out.over_samples = int(over.sum())
    out.max_excess = float(excess.max()) if len(excess) else None
    # the longest stretch of samples in a row above llmbench's open requests
    best_len, best_at, run = 0, 0, 0
    for i, o in enumerate(over):
        run = run + 1 if o else 0
        if run > best_len:
            best_len, best_at = run, i - run + 1
    kept = best_len >= MIN_RUN
    if kept:
        end = min(best_at + best_len, len(ts) - 1)
        out.longest_s = float(ts[end] - ts[best_at]) if end > best_at else 0.0
        out.longest_from_s = float(ts[best_at] - t0) if t0 is not None else None
    out.ok = not kept
    who = f"the server ({kind})" if kind else "the server"
    if kept:
        at = (f" from {out.longest_from_s:.0f} s into the run" if out.longest_from_s is not None
              else "")
        out.text = (f"After {cancelled} cancelled request(s), {who} did NOT free what they "
                    f"held within {within_s:g} s: it counted up to {out.max_excess:g} more "
                    f"requests (running or queued) than llmbench had open, for "
                    f"{out.longest_s or 0:.1f} s{at}. It goes on working for connections that "
                    "closed (or another client shared it), so users who are still there wait "
                    "behind replies nobody reads.")
    else:
        out.text = (f"After {cancelled} cancelled request(s), {who} freed what they held "
                    f"within {within_s:g} s: its count of running and queued requests never "
                    f"stayed above llmbench's open requests ({len(pts)} samples).")
    return out


def abandonment(policy: Any, records: Sequence[Record], samples: Sequence[dict[str, Any]],
                t0: float | None = None, kind: str | None = None) -> Abandonment | None:
    """The run's Abandonment part (None without a policy): counts and the release check."""
    if policy is None or not getattr(policy, "on", False):
        return None
    n, cancelled, waiting, streaming = cancelled_counts(records)
    return Abandonment(**describe(policy), requests=n, cancelled=cancelled, waiting=waiting,
                       streaming=streaming,
                       release=release_check(records, samples, t0, kind=kind))
