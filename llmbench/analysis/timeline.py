"""Per-second state of a run, rebuilt from records (pure): users, in flight, waiting for a first
token, streaming, thinking, tokens/s, and the TTFT p95 of the last 10 seconds."""

from __future__ import annotations

import bisect
from typing import Any, Sequence

import numpy as np

from llmbench.load.monitor import CPU_LIMIT_PCT, LAG_P99_LIMIT_MS
from llmbench.records import definitions
from llmbench.records.record import Record
from llmbench.records.store import RecordStore, trim_heap
from llmbench.analysis.outages import find as find_outages
from llmbench.analysis.stats import RECENT_S, RecentWindow
from llmbench.results.schema import Step


def users_at(changes: Sequence[tuple[float, int]], t: float) -> int:
    """Users active at ``t``, from (time, users) change points."""
    times = [c[0] for c in changes]
    i = bisect.bisect_right(times, t) - 1
    return changes[i][1] if i >= 0 else 0


def build(records: Sequence[Record], t0: float, t_end: float,
          user_changes: Sequence[tuple[float, int]] = (),
          monitor: Sequence[Any] = (), steps: Sequence[Step] = (),
          recent_s: float = RECENT_S, server: Sequence[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    n = max(int(np.ceil(t_end - t0)), 0)
    out = []
    changes = sorted(user_changes)
    tokens = np.zeros(n + 1)
    # on a store's columns (other records are made one): nothing is kept per request
    st = RecordStore.of(records)
    keep = ~st.col("warmup")
    # views, no copies: a million requests are 8 MB a column
    start, done, first = st.view("start"), st.view("done"), st.view("first_token")
    ntok = st.view("ntok")
    out_tok, _ = st.ints("output_tokens")
    step = st.block_records(1 << 17)            # a block's temporaries: ~4 MB
    for c in range(0, len(st), step):
        idx = np.nonzero(keep[c:c + step] & (ntok[c:c + step] > 0))[0] + c
        us, k = st.events_at(idx)                   # decoded a block at a time
        per_event = np.where(out_tok[idx] > 0, out_tok[idx], k) / k
        b = ((np.repeat(start[idx], k) + us / 1e6) - t0).astype(int)
        w = np.repeat(per_event, k)
        m = (b >= 0) & (b <= n)
        tokens += np.bincount(b[m], weights=w[m], minlength=n + 1)[:n + 1]
    del ntok, out_tok
    # the state at the end of each second, as the loop below reads it
    ends = np.array([t0 + i + 1.0 for i in range(n)])
    started, ended, answered = np.zeros(n + 1, np.int64), np.zeros(n + 1, np.int64), \
        np.zeros(n + 1, np.int64)
    has_first = keep & ~np.isnan(first)
    m = int(np.count_nonzero(has_first))
    # (first token time, TTFT) pairs, one complex array for RecentWindow (a million: 16 MB)
    pairs = np.empty(m, dtype=np.complex128)
    filled = 0
    # a block of requests at a time: how many started, ended and had their first token by
    # each second's end (x <= end of second i exactly when i >= searchsorted(ends, x)), and the
    # (first token, TTFT) pairs of the live line's TTFT p95
    for c in range(0, len(st), 1 << 16):
        sl = slice(c, c + (1 << 16))
        k = keep[sl]
        s_, d_, f_ = start[sl][k], done[sl][k], first[sl][k]
        started += np.bincount(np.searchsorted(ends, s_, side="left"), minlength=n + 1)
        ended += np.bincount(np.searchsorted(ends, d_, side="left"), minlength=n + 1)
        hf = ~np.isnan(f_)
        # a request waits for its first token until it arrives (or the request ends without)
        f_or_d = np.where(hf, np.minimum(np.nan_to_num(f_), d_), d_)
        answered += np.bincount(np.searchsorted(ends, f_or_d, side="left"), minlength=n + 1)
        j = int(np.count_nonzero(hf))
        pairs.real[filled:filled + j] = f_[hf]
        # TTFT by its definition, on the first-token column the seconds above are counted on
        pairs.imag[filled:filled + j] = definitions.ttft(s_[hf], f_[hf])
        filled += j
    del keep, has_first, start, done, first
    started, ended, answered = np.cumsum(started), np.cumsum(ended), np.cumsum(answered)
    trim_heap()
    # the live line's TTFT p95, computed by the same function over the same pairs
    recent_ttft = RecentWindow(pairs, recent_s)
    # every process's samples of a second (--workers: each worker's and the coordinator's)
    mon_by_sec: dict[int, list[Any]] = {}
    for m in monitor:
        mon_by_sec.setdefault(int(m.t - t0), []).append(m)
    server_by_sec = {int(x["t"] - t0): x for x in server if "t" in x and "error" not in x}
    down = find_outages(st)
    step_bounds = [(s.ramp_start, s.hold_end, s.index, s.load) for s in steps]
    # the last second is cut short where the run ended: its token count is a rate over that
    # part only (a run ending 0.3 s into a second otherwise draws a false 70 % drop at the end)
    last_s = (t_end - t0) - (n - 1)
    for i in range(n):
        t = t0 + i + 1.0       # state at the end of second i
        tok_s: float | None = float(tokens[i])
        if i == n - 1 and last_s < 1.0:
            tok_s = float(tokens[i]) / last_s if last_s >= 0.5 else None
        in_flight = int(started[i] - ended[i])
        waiting = int(started[i] - answered[i])
        streaming = in_flight - waiting
        recent = recent_ttft.p95(t)
        users = users_at(changes, t) if changes else None
        row: dict[str, Any] = {
            "t": round(t - t0, 3), "users": users, "in_flight": in_flight,
            "waiting_first_token": waiting, "streaming": streaming,
            "thinking": max(users - in_flight, 0) if users is not None else None,
            "tok_s": tok_s,
            "ttft_p95_recent_ms": recent * 1000 if recent is not None else None,
        }
        step = next((s for s in step_bounds if s[0] <= t <= s[1]), None)
        if step is not None:
            row["step"], row["load"] = step[2], step[3]
        if any(o.overlaps(t - 1.0, t) for o in down):
            row["outage"] = True        # the server refused connections in this second
        sv = server_by_sec.get(i)
        if sv is not None:
            for k in ("running", "waiting", "kv_cache_usage"):
                if sv.get(k) is not None:
                    row[f"server_{k}"] = sv[k]
        ms = mon_by_sec.get(i)
        if ms:
            _monitor_row(row, ms)
        out.append(row)
    return out


def _monitor_row(row: dict[str, Any], samples: list[Any]) -> None:
    """The second's generator figures: one process's as they are; with worker processes, the
    worst one's (over its limits first, then the lag, then the CPU), named in
    ``monitor_worker``, and every process's in ``monitor_by_worker`` (nothing hidden)."""
    def worst(m: Any) -> tuple[bool, float, float]:
        return (m.lag_p99_ms > LAG_P99_LIMIT_MS or m.cpu_pct > CPU_LIMIT_PCT, m.lag_p99_ms,
                m.cpu_pct)
    m = max(samples, key=worst)
    row["lag_p99_ms"], row["cpu_pct"] = m.lag_p99_ms, m.cpu_pct
    if all(x.worker is None for x in samples):
        return
    row["monitor_worker"] = m.worker
    row["monitor_by_worker"] = {str(x.worker): {"lag_p99_ms": x.lag_p99_ms,
                                                "cpu_pct": x.cpu_pct} for x in samples}
