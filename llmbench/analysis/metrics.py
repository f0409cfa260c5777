"""Records -> summary, exactly as ../shared/METRICS.md defines it (vLLM's names and formulas).

Pure functions of records: every number here can be rebuilt from a saved requests.jsonl.
The per-request latencies and which requests count are defined once, in
records/definitions.py (``ttft``, ``e2el``, ``tpot``, ``itls``, ``client_queue``,
``e2el_from_schedule``, ``is_measured``), for a Record and the column code below alike; every
percentile is llmbench.analysis.percentile's rule.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import numpy as np

from llmbench.analysis.phases import KEY as PHASES_KEY, summarize_phases
from llmbench.analysis import percentile
from llmbench.records import definitions
from llmbench.records.record import Record
from llmbench.records.store import RecordStore, trim_heap
from llmbench.results.schema import CENSORED, ErrorSample, Metric, Summary, Within
from llmbench.specs.thresholds import DEFAULT_PERCENTILES


@dataclass(frozen=True)
class PerRequest:
    """The latencies of one successful request, in seconds."""

    ttft: float
    e2el: float
    tpot: float | None          # None when output_tokens <= 1
    itls: list[float]
    itl_per_token: list[float] | None
    max_gap: float
    client_queue: float
    e2el_from_schedule: float
    # reasoning models (metrics.reasoning): TTFO None when the reply never answered
    ttfo: float | None = None
    reasoning_s: float | None = None     # first token (reasoning) -> first answer token
    output_itls: list[float] | None = None   # gaps between the answer's own events


def per_request(rec: Record) -> PerRequest:
    """The latencies of one successful request, as Record defines them (records/record.py),
    plus the ones only the summary needs (ITL per token, the largest gap, reasoning)."""
    times = rec.token_times
    ttft, e2el, tpot, itls = rec.ttft, rec.e2el, rec.tpot, rec.itls
    assert ttft is not None and e2el is not None, "per_request: a request with no token event"
    n_out = rec.output_tokens or 0
    per_tok: list[float] | None = None
    counts = rec.token_counts
    if counts is None and n_out == len(times):
        per_tok = itls
    elif counts is not None and len(counts) == len(times):
        # the gap before event i is spread over the tokens that event i carried
        per_tok = []
        for gap, c in zip(itls, counts[1:]):
            c = max(int(c), 1)
            per_tok.extend([gap / c] * c)
    e2el_from_schedule = rec.e2el_from_schedule
    assert e2el_from_schedule is not None
    ttfo, reasoning_s, output_itls = ttft, None, itls
    if rec.reasoning_events:
        ttfo = rec.ttfo
        answer_at = rec.first_output if rec.first_output is not None else rec.reasoning_end
        reasoning_s = definitions.reasoning_time(times[0], answer_at) \
            if answer_at is not None else None
        start = rec.output_from
        answer = times[start:] if start is not None and 0 <= start < len(times) else []
        output_itls = definitions.itls(answer)
    return PerRequest(ttft=ttft, e2el=e2el, tpot=tpot, itls=itls, itl_per_token=per_tok,
                      max_gap=max(itls) if itls else 0.0,
                      client_queue=rec.client_queue,
                      e2el_from_schedule=e2el_from_schedule,
                      ttfo=ttfo, reasoning_s=reasoning_s, output_itls=output_itls)


def min_samples(stat: str) -> int:
    """How many values a statistic needs before it means anything.

    A percentile pQ needs n >= 0.25 / (1 - Q) values (p90: 3, p95: 5, p99: 25): below that,
    fewer than a quarter of a value is expected above the percentile, so the "p95" is just the
    largest of a handful of numbers. The mean, median, min and max need one value, std two."""
    stat = stat.removesuffix("_all")
    if stat in ("mean", "median", "min", "max"):
        return 1
    if stat == "std":
        return 2
    q = float(stat[1:]) / 100.0
    return max(int(np.ceil(0.25 / (1.0 - q) - 1e-9)), 1)


def _headline(completed: int, failed: int, duration: float, total_in: int, total_out: int,
              good: int | None, peak_tok: Any, peak_conc: Any) -> dict[str, Any]:
    """vLLM's run-level figures (the Summary's fields that start run.json's summary)."""
    return {
        "completed": completed,
        "failed": failed,
        "duration_s": duration,
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "request_throughput": completed / duration,
        "request_goodput": (good / duration) if good is not None else None,
        "output_throughput": total_out / duration,
        "total_token_throughput": (total_in + total_out) / duration,
        "max_output_tokens_per_s": peak_tok,
        "max_concurrent_requests": peak_conc,
    }


def summarize(records: Iterable[Record], *, t0: float | None = None, t_end: float | None = None,
              goodput_slo_ms: dict[str, float] | None = None, stall_s: float = 1.0,
              percentiles: Iterable[float] = DEFAULT_PERCENTILES, split_turns: bool = True,
              within: Iterable[tuple[str, float]] = ()) -> Summary:
    """The run (or step) summary, a ``results.schema.Summary`` (run.json's flat dict is its
    ``to_dict()``). ``t0`` is when dispatch began; ``t_end`` overrides the end
    (both default to what the records say: first scheduled time, last completion).

    Latency statistics of an empty set are None, never 0. ``n_<metric>`` says how many values
    each statistic stands on. ``within`` asks for (metric, limit_ms) shares: of all measured
    requests, the share that succeeded with that metric at or under the limit.

    A list of Records is made a RecordStore first, which holds what requests.jsonl holds (token
    times to the µs), so a summary in memory equals the one rebuilt from the run folder."""
    store = records if isinstance(records, RecordStore) else RecordStore.of(records)
    try:
        return _summarize_store(store, t0=t0, t_end=t_end, goodput_slo_ms=goodput_slo_ms,
                                stall_s=stall_s, percentiles=percentiles,
                                split_turns=split_turns, within=within)
    finally:
        if store is records:   # a list made a store here (a step's window) is small
            trim_heap()


def _no_p50(stats: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in stats.items() if k != "p50"}


def _reasoning(s: dict[str, Any], ok: list[Record], per: list[PerRequest],
               percentiles: tuple[float, ...]) -> None:
    """Reasoning models' fields of ``s``, set only when a reply reasoned: TTFO, reasoning time
    and the answer's own ITL over all successes (a reply that did not reason has TTFO = TTFT
    and answer ITL = ITL), reasoning tokens over the replies that reasoned."""
    series = {"ttfo": [p.ttfo for p in per if p.ttfo is not None],
              "reasoning_time": [p.reasoning_s for p in per if p.reasoning_s is not None],
              "output_itl": [g for p in per for g in (p.output_itls or ())]}
    # these have never had a p50_ key of their own: their median is it
    for name, values in series.items():
        s[name] = Metric.of(name, _no_p50(percentile.stats(values, percentiles, 1000.0)))
    tokens = [r.reasoning_tokens or 0 for r in ok if r.reasoning_events]
    s["reasoning_tokens"] = Metric.of("reasoning_tokens",
                                      _no_p50(percentile.stats(tokens, percentiles, 1.0)))
    s["requests_with_reasoning"] = len(tokens)
    s["total_reasoning_tokens"] = sum(tokens)
    s["answered_after_reasoning"] = sum(1 for r in ok if r.reasoning_events
                                        and r.first_output is not None)


def _agents(s: dict[str, Any], st: RecordStore, extras: dict[int, dict[str, Any]], okm: Any,
            n_ok: int, duration: float | None, percentiles: tuple[float, ...]) -> None:
    """Tool calls, structured replies and embeddings: fields of ``s``, set only when some reply
    had them. ``valid_output_share``: of the structured replies checked, the share that parsed
    and validated."""
    starts = st.col("start")
    tool_s = [definitions.ttft(float(starts[i]), e["first_tool"]) for i, e in extras.items()
              if okm[i] and e.get("first_tool") is not None]
    checked = [bool(e["output_valid"]) for i, e in extras.items()
               if okm[i] and e.get("output_valid") is not None]
    vectors = [int(e["embeddings"]) for i, e in extras.items()
               if okm[i] and e.get("embeddings") is not None]
    if tool_s:
        s["requests_with_tool_calls"] = len(tool_s)
        s["tool_call_share"] = len(tool_s) / n_ok if n_ok else None
        s["ttft_tool"] = Metric.of("ttft_tool",
                                   _no_p50(percentile.stats(tool_s, percentiles, 1000.0)))
    if checked:
        s["structured_checked"] = len(checked)
        s["valid_output_share"] = sum(checked) / len(checked)
    if vectors:
        # an embeddings reply is one whole body, not output tokens: its one "event" would read
        # as a token in vLLM's per-second peak (a run of 0 tokens printed a peak of 3 tok/s)
        s["max_output_tokens_per_s"] = 0.0
        s["total_embeddings"] = sum(vectors)
        s["embeddings_throughput"] = sum(vectors) / duration if duration else None
        s["input_throughput"] = (s.get("total_input_tokens") or 0) / duration if duration else None


def _error_samples(failed: list[Record], limit: int = 5) -> list[ErrorSample]:
    seen: dict[tuple[str | None, int | None, str | None], int] = {}
    out: list[ErrorSample] = []
    for r in failed:
        key = (r.error_kind, r.status, (r.error or "")[:80])
        if key in seen:
            out[seen[key]].count += 1
            continue
        if len(out) >= limit:
            continue
        seen[key] = len(out)
        out.append(ErrorSample(kind=r.error_kind, status=r.status, error=r.error, count=1))
    return out


def ollama_slot_wait_s(ok: list[Record]) -> list[float]:
    """Ollama's final line: total - load - prompt_eval - eval is about the time spent queued."""
    out = []
    for r in ok:
        t = r.server_timing
        if not t or "total_duration" not in t:
            continue
        rest = t["total_duration"] - t.get("load_duration", 0) - t.get("prompt_eval_duration", 0) \
            - t.get("eval_duration", 0)
        out.append(max(rest, 0) / 1e9)
    return out


# -- the summary on a RecordStore's columns --------------------------------------------------
#
# records/definitions.py on numpy columns: a million-request run needs no object per request or
# per token event (issue 12 item 5). Per-request series are bit-identical to the Record
# properties (token times made as start + us / 1e6, as the store gives Records back); per-event
# series (ITL, ITL per token) come exact from the integer microseconds, where Record.itls adds
# the start and subtracts it again (under 1e-9 ms apart). test_record_store.py checks both.

_CHUNK = 1 << 17           # values per temporary array in chunked passes (1 MB)
_REC_CHUNK = 1 << 13       # records per chunk (a few MB of temporaries)


def _sq_dev(values: np.ndarray, mean: float) -> float:
    """Sum of squared deviations from ``mean``, a block of values at a time (float64)."""
    sq = 0.0
    for i in range(0, len(values), _CHUNK):
        d = values[i:i + _CHUNK].astype(np.float64) - mean
        sq += float(np.dot(d, d))
    return sq


def _us_stats_ms(n: int, mean_us: float, sq: float, at_us: Callable[[int], float],
                 lo_us: float, hi_us: float, percentiles: tuple[float, ...]
                 ) -> dict[str, float | None]:
    """percentile.stats (in ms) of ``n`` integer-microsecond values from their mean, sum of
    squared deviations, i-th smallest (``at_us``), least and largest."""
    def pct(p: float) -> float:
        return percentile.at_rank(lambda i: at_us(i) / 1000.0, n, p)
    out: dict[str, float | None] = {
        "mean": mean_us / 1000.0, "median": pct(50.0), "std": float(np.sqrt(sq / n)) / 1000.0,
        "min": lo_us / 1000.0, "max": hi_us / 1000.0, "count": n}
    for p in percentiles:
        out[percentile.stat_name(p)] = pct(p)
    return out


def _int_stats_ms(us: np.ndarray, percentiles: Iterable[float]) -> dict[str, float | None]:
    """percentile.stats (in ms) of integer-microsecond values, partitioning ``us`` in place (no
    sorted copy of a many-million-value array)."""
    percentiles = tuple(percentiles)
    n = len(us)
    if not n:
        return percentile.empty_stats(percentiles)
    mean_us = int(us.sum(dtype=np.int64)) / n
    sq = _sq_dev(us, mean_us)
    # the order statistics the percentiles stand on, put in their places (the rest unsorted)
    us.partition(sorted({k for p in (50.0, *percentiles)
                         for k in percentile.rank(n, p)[:2]}))
    return _us_stats_ms(n, mean_us, sq, lambda i: float(us[i]), float(us.min()),
                        float(us.max()), percentiles)


def _own_stats_ms(ms: np.ndarray, percentiles: Iterable[float]) -> dict[str, float | None]:
    """percentile.stats (in ms) of values already in ms, without a copy: sorts ``ms`` in place."""
    percentiles = tuple(percentiles)
    n = len(ms)
    if not n:
        return percentile.empty_stats(percentiles)
    mean = float(np.mean(ms))
    # np.std's arithmetic a block at a time: np.std(ms) makes two 8 MB temporaries of a
    # million-request series (the summary's largest moment)
    out: dict[str, float | None] = {"mean": mean, "std": float(np.sqrt(_sq_dev(ms, mean) / n))}
    ms.sort()
    out.update({"median": percentile.of_sorted(ms, 50.0), "min": float(ms[0]),
                "max": float(ms[-1]), "count": n})
    for p in percentiles:
        out[percentile.stat_name(p)] = percentile.of_sorted(ms, p)
    return {k: out[k] for k in (*percentile.STATS, "count",
                                *(percentile.stat_name(p) for p in percentiles))}


def _ints32(st: RecordStore, name: str) -> tuple[np.ndarray, np.ndarray]:
    """An integer column with None as 0, in its own width (``RecordStore.ints`` gives int64:
    int64 only when a value did not fit the column), and where it is not None."""
    if any(type(e.get(name)) is int for e in st.extras().values()):
        return st.ints(name)
    v = st.view(name)
    present = v != v.dtype.type(-(2 ** 31) if v.dtype.itemsize == 4 else -(2 ** 15))
    return np.where(present, v, v.dtype.type(0)), present


class _IntHist:
    """Integer values (the ITL gaps in µs) as their distinct values and counts: what the
    percentiles, the mean and the counts below a limit need, exactly, in the memory of the
    distinct values (a few thousand to a hundred thousand) rather than of every gap (7 million
    for a million 8-token requests: 28 MB)."""

    def __init__(self) -> None:
        self.values = np.zeros(0, np.int64)
        self.counts = np.zeros(0, np.int64)

    def add(self, chunk: np.ndarray) -> None:
        if not len(chunk):
            return
        v, c = np.unique(chunk, return_counts=True)
        if len(self.values):
            v, inv = np.unique(np.concatenate((self.values, v)), return_inverse=True)
            c = np.bincount(inv, weights=np.concatenate((self.counts, c))).astype(np.int64)
        self.values, self.counts = v.astype(np.int64), c.astype(np.int64)

    def __len__(self) -> int:
        return int(self.counts.sum())

    def count(self, test: Callable[[np.ndarray], np.ndarray]) -> int:
        """How many values pass ``test`` on their value in seconds (as ``_count_s``)."""
        return int(self.counts[test(self.values / 1e6)].sum())

    def stats_ms(self, percentiles: Iterable[float]) -> dict[str, float | None]:
        """``_int_stats_ms`` of the values."""
        percentiles = tuple(percentiles)
        n = len(self)
        if not n:
            return percentile.empty_stats(percentiles)
        mean_us = int((self.values * self.counts).sum()) / n
        d = self.values.astype(np.float64) - mean_us
        sq = float(np.dot(d * d, self.counts.astype(np.float64)))
        cum = np.cumsum(self.counts)

        def at(rank: int) -> float:
            return float(self.values[int(np.searchsorted(cum, rank, side="right"))])
        return _us_stats_ms(n, mean_us, sq, at, float(self.values[0]), float(self.values[-1]),
                            percentiles)


def _gaps_us(st: RecordStore, ntok: np.ndarray, okm: np.ndarray, off: np.ndarray,
             as_hist: bool = False) -> tuple[np.ndarray | _IntHist, np.ndarray]:
    """The gaps between successive token events of the successful records (int32 µs), record
    after record (``as_hist``: as an _IntHist), and each successful record's largest gap (0
    without one), computed a chunk of records at a time (no event-sized temporaries, no
    per-request index arrays)."""
    total = 0 if as_hist else int(np.where(okm, np.maximum(ntok - 1, 0), 0).sum())
    out = np.empty(total, dtype=np.int32)
    hist = _IntHist()
    max_gap = np.zeros(int(np.count_nonzero(okm)), dtype=np.int32)
    pos = done = 0
    step = st.block_records(_CHUNK)
    for c in range(0, len(ntok), step):
        k = ntok[c:c + step]
        ok = okm[c:c + step]
        lo = int(off[c])
        seg = st.token_us_of(c, c + len(k))
        n_ok = int(np.count_nonzero(ok))
        if len(seg) < 2:
            done += n_ok
            continue
        first = np.zeros(len(seg), dtype=bool)
        first[(off[c:c + len(k)] - lo)[k > 0]] = True
        keep = np.repeat(ok, k)[1:] & ~first[1:]
        g = definitions.itls(seg)[keep]
        if as_hist:
            hist.add(g)
        else:
            out[pos:pos + len(g)] = g
            pos += len(g)
        n_gaps = np.maximum(k[ok].astype(np.int64) - 1, 0)
        has = n_gaps > 0
        if has.any():
            starts = np.concatenate(([0], np.cumsum(n_gaps)[:-1]))
            max_gap[done:done + n_ok][has] = np.maximum.reduceat(g, starts[has])
        done += n_ok
    return (hist if as_hist else out), max_gap


def _count_s(us: np.ndarray, test: Callable[[np.ndarray], np.ndarray]) -> int:
    """How many µs values pass ``test`` on their value in seconds (chunked)."""
    return sum(int(np.count_nonzero(test(us[i:i + _CHUNK] / 1e6)))
               for i in range(0, len(us), _CHUNK))


def _failed_and_cancelled(st: RecordStore, okm: np.ndarray
                          ) -> tuple[np.ndarray, int, np.ndarray]:
    """The failed requests' rows, how many the users cancelled (--abandon: neither successes
    nor failures), and the TTFT (ms, sorted) of the cancelled replies that had a first token."""
    cancel_id = st.str_id("cancelled")
    cancel_m = (st.col("error_kind") == cancel_id) & ~okm if cancel_id >= 0 else None
    cancel_idx = np.nonzero(cancel_m)[0] if cancel_m is not None else np.zeros(0, np.int64)
    fail_idx = np.nonzero(~okm if cancel_m is None else ~okm & ~cancel_m)[0]
    n_cancel = len(cancel_idx)
    cancel_ttft_ms = np.sort(np.array(
        [r.ttft * 1000.0 for r in st.records_at(cancel_idx) if r.ttft is not None],
        dtype=float)) if n_cancel else np.zeros(0)
    return fail_idx, n_cancel, cancel_ttft_ms


def _summarize_store(st: RecordStore, *, t0: float | None, t_end: float | None,
                     goodput_slo_ms: dict[str, float] | None, stall_s: float,
                     percentiles: Iterable[float], split_turns: bool,
                     within: Iterable[tuple[str, float]]) -> Summary:
    percentiles = tuple(percentiles)
    st.compact()                # columns of one value read back as broadcasts below
    keep = st.measured_mask()                 # definitions.is_measured, on the columns
    if not keep.all():
        st = st.select(keep)
    n = len(st)
    okm = st.col("ok")
    # --abandon: in the failure-aware percentiles a cancelled request was not answered in time
    fail_idx, n_cancel, cancel_ttft_ms = _failed_and_cancelled(st, okm)
    n_ok = n - len(fail_idx) - n_cancel
    # every request succeeded (the usual case): no index of them (8 MB at a million requests)
    ok_idx = np.nonzero(okm)[0] if n_ok < n else None
    if t0 is None:
        t0 = float(st.col("scheduled").min()) if n else 0.0
    if t_end is None:
        t_end = float(st.col("done").max()) if n else t0
    duration = max(t_end - t0, 1e-9)

    within = tuple(within)
    stat_part: dict[str, Metric] = {}
    cens_part: dict[str, dict[float, float | None]] = {}
    within_hits: dict[tuple[str, float], int] = {}

    def done_with(name: str, ms: np.ndarray | None, st_ms: dict[str, Any] | None = None) -> None:
        """A series' statistics, failure-aware percentiles and "within" shares, computed the
        moment the series exists so that it can be dropped (a million requests: 8 MB each).
        ``ms`` (seconds x 1000.0, as percentile.stats scales) is sorted in place."""
        if st_ms is None:
            st_ms = _own_stats_ms(ms, percentiles)        # sorts ms
        stat_part[name] = Metric.of(name, st_ms)
        if ms is None:
            return
        if name in CENSORED:
            known, n_inf = ms, len(fail_idx) + n_cancel
            if name == "ttft" and len(cancel_ttft_ms):
                # a reply the user stopped mid-stream had its first token, at that time
                known = np.sort(np.concatenate((ms, cancel_ttft_ms)))
                n_inf -= len(cancel_ttft_ms)
            cens_part[name] = {p: percentile.censored(known, n_inf, p)
                               for p in sorted(set(percentiles) | {50.0})}
        for wname, limit_ms in within:
            if wname == name:
                within_hits[(wname, limit_ms)] = int(np.count_nonzero(ms <= limit_ms))

    # columns as views, and no index copies when all succeeded (4-8 MB each at a million)
    all_ok = n_ok == n
    # (ok_idx is None exactly when every request succeeded)
    pick: slice | np.ndarray = slice(None) if all_ok or ok_idx is None else ok_idx
    ntok = st.view("ntok")                          # uint32
    off = st.offsets()
    ntok_ok = ntok[pick]
    n_out, out_present = _ints32(st, "output_tokens")
    n_out, out_present = n_out[pick], out_present[pick]
    plain_tok = (n_out == ntok_ok) & out_present | ((n_out == 0) & (ntok_ok == 0))
    del out_present
    total_out = int(n_out.sum(dtype=np.int64))
    total_in = int(_ints32(st, "prompt_tokens")[0][pick].sum(dtype=np.int64))

    # per-request series, each made a block of requests at a time and dropped once its figures
    # are taken: one series (8 MB at a million requests) and a block's temporaries are all that
    # is alive. x - start and x * 1000 done in place equal per_request's expressions.
    start_all, sched_all = st.view("start"), st.view("scheduled")
    block = _REC_CHUNK * 8

    def rows_at(c: int) -> slice | np.ndarray:
        return slice(c, min(c + block, n_ok)) if ok_idx is None else ok_idx[c:c + block]

    def at(rows: slice | np.ndarray, last: bool) -> np.ndarray:
        if isinstance(rows, slice):
            r0, r1 = rows.start, rows.stop
        else:
            r0, r1 = int(rows[0]), int(rows[-1]) + 1      # ok_idx is sorted
        if not last:
            where = off[rows]
        elif isinstance(rows, slice):
            where = off[rows.start + 1:rows.stop + 1] - 1
        else:
            where = off[rows + 1] - 1
        t = st.token_us_take(where, r0, r1) / 1e6
        t += start_all[rows]                        # start + us / 1e6
        return t

    def series(make: Callable[[int, Any], np.ndarray], size: int = n_ok) -> np.ndarray:
        out = np.empty(size)
        pos = 0
        for c in range(0, n_ok, block):
            v = make(c, rows_at(c))
            out[pos:pos + len(v)] = v
            pos += len(v)
        return out

    def since(define: Callable[[Any, Any], np.ndarray], base: np.ndarray, last: bool
              ) -> Callable[[int, Any], np.ndarray]:
        """A block of ``define(base, first or last token time)`` in ms."""
        def make(c: int, rows: Any) -> np.ndarray:
            t = define(base[rows], at(rows, last=last))
            t *= 1000.0
            return t
        return make
    ms = series(since(definitions.ttft, start_all, last=False))
    good_mask = None
    # vLLM's goodput rule: every given SLO met, inclusive; the TPOT of a 1-token reply is 0
    if goodput_slo_ms and "ttft" in goodput_slo_ms:
        good_mask = ms <= goodput_slo_ms["ttft"]
    done_with("ttft", ms)
    del ms
    has_tpot = definitions.has_tpot(n_out)

    def tpot_of(c: int, rows: Any) -> np.ndarray:
        first, last = at(rows, last=False), at(rows, last=True)
        h, k = has_tpot[c:c + block], n_out[c:c + block]
        if h.all():
            return definitions.tpot(first, last, k)
        return definitions.tpot(first[h], last[h], k[h])
    tpot = series(tpot_of, int(np.count_nonzero(has_tpot)))
    tpot *= 1000.0
    if goodput_slo_ms and "tpot" in goodput_slo_ms:
        tpot_or_0 = np.zeros(len(n_out))
        tpot_or_0[has_tpot] = tpot
        m = tpot_or_0 <= goodput_slo_ms["tpot"]
        good_mask = m if good_mask is None else good_mask & m
        del tpot_or_0
    done_with("tpot", tpot)
    del tpot
    has_tpot = n_out = None        # the blocks' closures are done with them (4-8 MB)

    ms = series(since(definitions.e2el, start_all, last=True))
    if goodput_slo_ms and "e2el" in goodput_slo_ms:
        m = ms <= goodput_slo_ms["e2el"]
        good_mask = m if good_mask is None else good_mask & m
    done_with("e2el", ms)
    del ms
    good = (int(good_mask.sum()) if good_mask is not None else n_ok) \
        if goodput_slo_ms else None
    del good_mask

    def client_queue(c: int, rows: Any) -> np.ndarray:
        q = definitions.client_queue(sched_all[rows], start_all[rows])
        q *= 1000.0
        return q
    ms = series(client_queue)
    done_with("client_queue", ms)
    del ms

    ms = series(since(definitions.e2el_from_schedule, sched_all, last=True))
    done_with("e2el_from_schedule", ms)
    del ms

    extras = st.extras()
    stalls, requests_with_stalls = _gap_figures(st, extras, ntok, ntok_ok, okm, off, ok_idx,
                                                plain_tok, stall_s, within, percentiles,
                                                done_with, within_hits)
    del ntok_ok, plain_tok
    peak_tok, peak_conc = _buckets_store(st, ok_idx)

    # the Summary's fields, as they are computed
    s = _headline(n_ok, len(fail_idx), duration, total_in, total_out, good, peak_tok,
                  peak_conc)
    s.update(stat_part)     # ttft, tpot, itl, e2el, client_queue, ..., max_gap
    if any(e.get("reasoning_events") and okm[i] for i, e in extras.items()):
        ok_recs = st.records_at(range(n) if ok_idx is None else ok_idx)
        _reasoning(s, ok_recs, [per_request(r) for r in ok_recs], percentiles)
        del ok_recs
    if any(okm[i] and (e.get("first_tool") is not None or e.get("output_valid") is not None
                       or e.get("embeddings") is not None) for i, e in extras.items()):
        _agents(s, st, extras, okm, n_ok, duration, percentiles)
    for name in CENSORED:
        s[name] = s[name].with_all(n, cens_part[name])
    s["within"] = [Within.of(wname, limit_ms, within_hits[(wname, limit_ms)] / n if n else None)
                   for wname, limit_ms in within if (wname, limit_ms) in within_hits]
    _outcomes(s, st, n, n_ok, fail_idx, n_cancel, len(cancel_ttft_ms))
    s["stalls"] = stalls
    s["stall_threshold_s"] = stall_s
    s["requests_with_stalls"] = requests_with_stalls
    _streams(s, st, okm, pick, n, split_turns)
    _server_side(s, st, extras, okm, pick, percentiles)
    _send_delay(s, st, n)
    _cache_share(s, st, pick)
    turn, _ = st.ints("turn")
    if split_turns and (turn > 0).any():
        s["by_turn"] = {
            name: _summarize_store(st.select(rows), t0=t0, t_end=t_end, goodput_slo_ms=None,
                                   percentiles=percentiles, stall_s=stall_s, split_turns=False,
                                   within=())
            for name, rows in (("first", turn == 0), ("later", turn > 0))}
    # each request's phases (connect, TLS, wait, ...), when its transport stamped them; kept
    # apart from the flat keys above so that older summaries are written as before
    phases = summarize_phases(st, okm)
    if phases is not None:
        s["extra"] = {PHASES_KEY: phases}
    return Summary(**s)


def _gap_figures(st: RecordStore, extras: dict[int, dict[str, Any]], ntok: np.ndarray,
                 ntok_ok: np.ndarray, okm: np.ndarray, off: np.ndarray,
                 ok_idx: np.ndarray | None, plain_tok: np.ndarray, stall_s: float,
                 within: tuple[tuple[str, float], ...], percentiles: tuple[float, ...],
                 done_with: Callable[..., None], within_hits: dict[tuple[str, float], int]
                 ) -> tuple[int, int]:
    """The gaps between token events: ITL, ITL per token, the largest gap of each request,
    stalls, and their "within" shares (into ``done_with`` and ``within_hits``); returns
    (stalls, requests with a stall). ``plain_tok`` is marked in place where a request's token
    counts say its events carried several tokens."""
    counted = np.array(sorted(i for i, e in extras.items()
                              if e.get("token_counts") is not None and okm[i]), dtype=np.int64)
    ok_counted = [] if not len(counted) else counted if ok_idx is None else \
        np.searchsorted(ok_idx, counted)
    # ITL per token: per_request's rule, on the exact gaps
    if len(ok_counted):
        plain_tok[ok_counted] = False
    # the usual case: every gap is one token's, ITL per token is ITL itself, and the gaps are
    # needed only as counts of their values; otherwise as one array, record after record
    every_gap = not plain_tok.all() or bool(len(ok_counted))
    itl_us, max_gap_us = _gaps_us(st, ntok, okm, off, as_hist=not every_gap)
    # like the ITL, from the integer microseconds, partitioned in place (no float copies)
    requests_with_stalls = _count_s(max_gap_us, lambda v: v > stall_s)
    for wname, limit_ms in within:
        if wname == "max_gap":
            within_hits[(wname, limit_ms)] = _count_s(max_gap_us, lambda v: v * 1000.0 <= limit_ms)
    done_with("max_gap", None, _int_stats_ms(max_gap_us, percentiles))
    del max_gap_us

    per_tok_us = None
    n_gaps = gap_start = None
    if every_gap:
        assert isinstance(itl_us, np.ndarray)
        n_gaps = np.maximum(ntok_ok.astype(np.int32) - 1, 0)
        gap_start = np.concatenate((np.zeros(1, np.int64),
                                    np.cumsum(n_gaps, dtype=np.int64)[:-1]))
        per_tok_us = itl_us[np.repeat(plain_tok, n_gaps)]
    spread: list[float] = []
    for k in ok_counted:
        assert n_gaps is not None and gap_start is not None
        row = int(k if ok_idx is None else ok_idx[k])
        counts = extras[row]["token_counts"]
        if len(counts) != ntok[row]:
            continue
        assert isinstance(itl_us, np.ndarray)
        gaps = itl_us[gap_start[k]:gap_start[k] + n_gaps[k]] / 1e6
        for gap, c in zip(gaps, counts[1:]):
            c = max(int(c), 1)
            spread.extend([float(gap) / c] * c)
    del gap_start, n_gaps
    def count(gaps: np.ndarray | _IntHist, test: Callable[[np.ndarray], np.ndarray]) -> int:
        return gaps.count(test) if isinstance(gaps, _IntHist) else _count_s(gaps, test)
    stalls = count(itl_us, lambda v: v > stall_s)
    for wname, limit_ms in within:
        if wname in ("itl", "itl_per_token"):
            gaps = itl_us if wname == "itl" or per_tok_us is None else per_tok_us
            hits = count(gaps, lambda v: v * 1000.0 <= limit_ms)
            if wname == "itl_per_token":
                hits += sum(1 for v in spread if v * 1000.0 <= limit_ms)
            within_hits[(wname, limit_ms)] = hits
    itl_stats = itl_us.stats_ms(percentiles) if isinstance(itl_us, _IntHist) else \
        _int_stats_ms(itl_us, percentiles)                  # reorders itl_us
    done_with("itl", None, itl_stats)
    done_with("itl_per_token", None,
              itl_stats if per_tok_us is None else
              _int_stats_ms(per_tok_us, percentiles) if not spread else
              percentile.stats(np.concatenate((per_tok_us / 1e6, spread)), percentiles, 1000.0))
    return stalls, requests_with_stalls


def _outcomes(s: dict[str, Any], st: RecordStore, n: int, n_ok: int, fail_idx: np.ndarray,
              n_cancel: int, n_cancel_ttft: int) -> None:
    """How the requests ended, the users' cancellations (--abandon) included."""
    failed = st.records_at(fail_idx)
    s["requests"] = n
    s["completed_share"] = n_ok / n if n else None
    s["error_rate"] = len(fail_idx) / n if n else None
    s["errors"] = dict(Counter(r.error_kind or "unknown" for r in failed))
    s["error_statuses"] = dict(Counter(str(r.status) for r in failed if r.status and r.status >= 400))
    s["error_samples"] = _error_samples(failed)
    del failed
    if n_cancel:
        s["cancelled"] = n_cancel
        s["cancelled_waiting"] = n_cancel - n_cancel_ttft     # before any token
        s["cancel_rate"] = n_cancel / n


def _streams(s: dict[str, Any], st: RecordStore, okm: np.ndarray, pick: slice | np.ndarray,
             n: int, split_turns: bool) -> None:
    """How the replies came: their token counts' source, streamed or not, in bursts, by whom."""
    table = st.table()
    # a set, not np.unique: that imports numpy.ma (~6 ms of every run's start-up)
    sources = {table[i] for i in set(st.view_strs("output_tokens_source")[pick].tolist())}
    s["output_tokens_source"] = ("none" if not sources else sources.pop() if len(sources) == 1
                                 else "mixed")
    s["non_streaming"] = bool(n) and not st.col("stream").any()
    s["stream_bunching"] = _bunching_store(st, okm)
    served = st.col("served_by")
    ids, counts = np.unique(served[served != 0], return_counts=True)
    s["served_by"] = {table[i]: int(c) for i, c in zip(ids, counts)}
    if split_turns and len(s["served_by"]) > 1:
        from llmbench.analysis.backends import backends
        s["backends"] = backends(st)


def _server_side(s: dict[str, Any], st: RecordStore, extras: dict[int, dict[str, Any]],
                 okm: np.ndarray, pick: slice | np.ndarray, percentiles: tuple[float, ...]
                 ) -> None:
    """What the server said of its own queue: Ollama's slot wait, a server_queue_ms."""
    wait = ollama_slot_wait_s(st.records_at(sorted(i for i in extras if okm[i]
                                                   and extras[i].get("server_timing"))))
    if wait:
        s["server_slot_wait"] = Metric.of("server_slot_wait", {
            k: v for k, v in percentile.stats(wait, percentiles, 1000.0).items() if k != "count"})
    sq = st.view("server_queue_ms")[pick]
    sq = sq[~np.isnan(sq)] / 1000.0
    sq *= 1000.0                                    # as percentile.stats scales seconds
    if len(sq):
        s["server_queue"] = Metric.of("server_queue", {
            k: v for k, v in _own_stats_ms(sq, percentiles).items() if k != "count"})


def _send_delay(s: dict[str, Any], st: RecordStore, n: int) -> None:
    """The client's own send delay, over every measured request that got that far (a block at
    a time into one array; percentile.stats's arithmetic in ms, x * 1000, done in place)."""
    sent_v, start_v = st.view("sent"), st.view("start")
    got_n = sum(int(np.count_nonzero(~np.isnan(sent_v[c:c + _CHUNK])))
                for c in range(0, n, _CHUNK))
    sd = np.empty(got_n)
    pos = 0
    for c in range(0, n, _CHUNK):
        s_ = sent_v[c:c + _CHUNK]
        got = ~np.isnan(s_)
        k = int(np.count_nonzero(got))
        sd[pos:pos + k] = definitions.send_delay(start_v[c:c + _CHUNK][got], s_[got])
        pos += k
    del sent_v, start_v
    sd *= 1000.0
    sd_stats = _own_stats_ms(sd, (50.0, 99.0))
    s["send_delay"] = Metric.of("send_delay", {"count": len(sd), **{
        stat: sd_stats[stat] for stat in ("mean", "p50", "p99", "max")}})


def _cache_share(s: dict[str, Any], st: RecordStore, pick: slice | np.ndarray) -> None:
    """The share of prompt tokens the server took from its prefix cache, over the successful
    requests that said (usage.prompt_tokens_details.cached_tokens, llama.cpp's
    timings.cache_n, Ollama's short prompt_eval_count): a repeated prompt's TTFT skips its
    prefill, so a high share flatters the run (checks.prompt_cache says when)."""
    cached, cached_present = st.ints("cached_tokens")
    if not cached_present[pick].any():
        return
    s["cached_prompt_tokens"] = int(cached[pick].sum())
    prompt, prompt_present = st.ints("prompt_tokens")
    told = cached_present[pick] & prompt_present[pick]
    total = int(prompt[pick][told].sum())
    s["cached_reported"] = int(np.count_nonzero(told))
    s["cached_prompt_share"] = (min(int(cached[pick][told].sum()) / total, 1.0)
                                if total else None)


# -- tokens that arrive in bursts: a buffer between llmbench and the model -------------------
# A proxy that buffers the stream (nginx's defaults: proxy_buffering on, HTTP/1.0 upstream)
# hands llmbench a whole reply, or 4-8 KB of it, in one network read: every event of a read
# gets the read's arrival time, so TTFT measures the buffer and ITL reads 0.00 ms. Measured
# (scripts/bench_buffering.py, 30 events 10 ms apart after 50 ms): direct and behind nginx
# with proxy_buffering off, 1.0 token event per read (TTFT p50 51 ms); behind nginx's
# defaults, 30 per read (TTFT p50 347 ms, ITL p50 0.00 ms); 200 events 20 ms apart came in 4
# reads of 50. A server that puts several tokens in one event (vLLM --stream-interval) still
# sends one event per read, so events per read, not tokens per event, is the signal.
BUNCH_MIN_EVENTS = 8            # a request with fewer token events says too little
BUNCH_EVENTS_PER_READ = 4.0     # a loaded llmbench coalesces 1-2 events a read, never ~4
BUNCH_MIN_SPAN_MS = 20.0        # a reply over within 20 ms could truly have come at once
BUNCH_SHARE = 0.5               # most eligible requests bunched: the stream is buffered
BUNCH_MIN_REQUESTS = 3


def _per_read_eligible(events: np.ndarray, reads: np.ndarray, last_ms: np.ndarray
                       ) -> np.ndarray:
    """Events per read of the eligible requests only (what _bunching_store judges)."""
    elig = (events >= BUNCH_MIN_EVENTS) & (last_ms >= BUNCH_MIN_SPAN_MS) & (reads > 0)
    return events[elig] / reads[elig]


def _bunching_of(per_read: np.ndarray) -> dict[str, Any]:
    n = len(per_read)
    k = int(np.count_nonzero(per_read >= BUNCH_EVENTS_PER_READ))
    share = k / n if n else None
    return {"requests": n, "bunched": k, "share": share,
            "events_per_read_p50": percentile.median(per_read) if n else None,
            "buffered": bool(n >= BUNCH_MIN_REQUESTS and share is not None
                             and share >= BUNCH_SHARE)}


def bunching_sentence(b: dict[str, Any] | None) -> str | None:
    """What llmbench says of a buffered stream (console, report, verdict), or None."""
    if not b or not b.get("buffered"):
        return None
    return (f"tokens arrive in bursts ({b['bunched']} of {b['requests']} streamed requests got "
            f"{BUNCH_EVENTS_PER_READ:g} or more token events per network read, median "
            f"{b['events_per_read_p50']:.0f}): something between llmbench and the model "
            "buffers the stream (nginx: proxy_buffering off, or the response header "
            "X-Accel-Buffering: no); TTFT and ITL here measure that buffer, not the model")


def _bunching_store(st: RecordStore, okm: np.ndarray) -> dict[str, Any]:
    """Whether the token events of streamed successes arrived in bursts (the BUNCH_ constants
    say when), a block of records at a time. A request's network reads are its events less its
    zero gaps: events of one read share its arrival time."""
    n = len(st)
    ntok = st.view("ntok")
    off = st.offsets()
    want = okm & st.col("stream") & (ntok > 0)
    # only the eligible requests' ratios are kept (8 bytes each; none for replies over within
    # 20 ms): three full columns were 24 MB at a million requests, over the summary's budget
    per_read_l: list[np.ndarray] = []
    block = st.block_records()
    for r0 in range(0, n, block):
        r1 = min(r0 + block, n)
        w = want[r0:r1]
        if not w.any():
            continue
        us = st.token_us_of(r0, r1).astype(np.int64)
        o = off[r0:r1 + 1] - off[r0]
        same = np.zeros(len(us), dtype=np.int64)
        if len(us) > 1:
            same[1:] = np.diff(us) == 0
        same[o[:-1][o[:-1] < len(us)]] = 0          # a record's first event starts a read
        # a trailing 0 so that records with no events at the block's end index inside it
        zero = np.add.reduceat(np.append(same, 0), o[:-1])
        cnt = ntok[r0:r1].astype(np.int64)
        zero = np.where(cnt > 0, zero, 0)           # reduceat repeats a value for empty rows
        last = np.where(cnt > 0, us[np.maximum(o[1:] - 1, 0)], 0) / 1000.0
        per_read_l.append(_per_read_eligible(cnt[w], (cnt - zero)[w], last[w]))
    return _bunching_of(np.concatenate(per_read_l) if per_read_l else np.zeros(0))


def _buckets_store(st: RecordStore, ok_idx: np.ndarray | None) -> tuple[float, int]:
    """vLLM's 1-second-bucket peaks of output events and concurrent requests, a chunk of
    requests at a time (``ok_idx`` None: every record)."""
    n_ok = len(st) if ok_idx is None else len(ok_idx)
    if not n_ok:
        return 0.0, 0
    start = st.view("start") if ok_idx is None else st.col("start")[ok_idx]
    end = st.view("end") if ok_idx is None else st.col("end")[ok_idx]
    t_min = float(start.min())
    # no end at all (a requests.jsonl edited by hand): the peaks stand on the starts alone
    t_max = float(np.nanmax(end)) if not np.isnan(end).all() else t_min
    n = int(np.ceil(t_max - t_min)) + 1
    tokens = np.zeros(n)
    step = st.block_records(_CHUNK)
    for c in range(0, n_ok, step):
        idx = np.arange(c, min(c + step, n_ok)) if ok_idx is None else ok_idx[c:c + step]
        us, k = st.events_at(idx)
        t = np.repeat(start[c:c + step], k) + us / 1e6
        b = (t - t_min).astype(int)
        b = b[(b >= 0) & (b < n)]
        tokens += np.bincount(b, minlength=n)[:n]
    conc = np.zeros(n + 1)
    for c in range(0, n_ok, 1 << 16):         # blocks: no 8-byte-a-request temporaries
        a = (start[c:c + (1 << 16)] - t_min).astype(int)
        e_ = end[c:c + (1 << 16)]
        e = np.where(np.isnan(e_), a, ((np.nan_to_num(e_) - t_min)).astype(int))
        conc += np.bincount(a, minlength=n + 1)[:n + 1]
        conc -= np.bincount(e + 1, minlength=n + 1)[:n + 1]
    return float(tokens.max()), int(np.cumsum(conc)[:n].max())


def peak_in_flight(records: Iterable[Record]) -> int:
    """The most requests in flight at the same instant (sent, not yet finished), counted over
    half-open intervals [start, done): a request that ends exactly when another starts does not
    overlap it. At --concurrency 4 this is 4; vLLM's 1-second-bucket "Peak concurrent requests"
    there reads 8 (every request active at any moment of one second)."""
    import numpy as np
    st = RecordStore.of(records)                # on its columns: nothing per request
    keep = st.measured_mask()
    everyone = bool(keep.all())
    start = st.col("start") if everyone else st.view("start")[keep]
    done = st.view("done") if everyone else st.view("done")[keep]
    done = np.maximum(done, start)            # a new array: sorted in place below
    del keep
    start.sort()
    done.sort()
    # the count peaks at a start: every start up to it, less every end up to it (an end at
    # the same instant comes first: the interval is half-open); a block of starts at a time,
    # so the counts never cost 16 bytes a request at once
    peak = 0
    for c in range(0, len(start), 1 << 16):
        at = start[c:c + (1 << 16)]
        n = np.searchsorted(start, at, side="right") - np.searchsorted(done, at, side="right")
        peak = max(peak, int(n.max()))
    return max(peak, 0)
