"""Records -> summary, exactly as ../shared/METRICS.md defines it (vLLM's names and formulas).

Pure functions of records: every number here can be rebuilt from a saved requests.jsonl.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np

from .records import Record, measured
from .stats import CENSORED, EXTRA_LATENCY, LATENCY, REASONING, key, pct_word, to_vllm

LATENCY_METRICS = LATENCY
EXTRA_METRICS = EXTRA_LATENCY
# Per-request latencies that also have failure-aware ("_all") figures: a failed request counts as
# +inf, so the percentile says what share of *all* users got an answer in time.
CENSORED_METRICS = CENSORED
ALL_LATENCY_METRICS = LATENCY_METRICS + EXTRA_METRICS + REASONING
DEFAULT_PERCENTILES = (50.0, 90.0, 95.0, 99.0)


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
    times = rec.token_times
    ttft = times[0] - rec.start
    e2el = times[-1] - rec.start
    itls = [b - a for a, b in zip(times, times[1:])]
    n_out = rec.output_tokens or 0
    tpot = (times[-1] - times[0]) / (n_out - 1) if n_out > 1 else None
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
    ttfo, reasoning_s, output_itls = ttft, None, itls
    if rec.reasoning_events:
        ttfo = rec.ttfo
        answer_at = rec.first_output if rec.first_output is not None else rec.reasoning_end
        reasoning_s = (answer_at - times[0]) if answer_at is not None else None
        start = rec.output_from
        answer = times[start:] if start is not None and 0 <= start < len(times) else []
        output_itls = [b - a for a, b in zip(answer, answer[1:])]
    return PerRequest(ttft=ttft, e2el=e2el, tpot=tpot, itls=itls, itl_per_token=per_tok,
                      max_gap=max(itls) if itls else 0.0,
                      client_queue=max(rec.start - rec.scheduled, 0.0),
                      e2el_from_schedule=times[-1] - rec.scheduled,
                      ttfo=ttfo, reasoning_s=reasoning_s, output_itls=output_itls)


def stats_ms(values_s: Sequence[float], percentiles: Iterable[float] = DEFAULT_PERCENTILES,
             scale: float = 1000.0) -> dict[str, float | None]:
    """numpy mean/median/population std/linear percentiles in ms.

    An empty list has no statistics: every value is None (vLLM writes 0, which reads as "instant"
    and passes any latency limit; a missing number must never look like a good one)."""
    names = ["mean", "median", "std", "min", "max"] + [f"p{pct_word(p)}" for p in percentiles]
    if not len(values_s):
        return {**{k: None for k in names}, "count": 0}
    arr = np.asarray(values_s, dtype=float) * scale     # scale 1: counts, not seconds
    out: dict[str, float | None] = {
        "mean": float(np.mean(arr)), "median": float(np.median(arr)),
        "std": float(np.std(arr)), "min": float(np.min(arr)), "max": float(np.max(arr)),
        "count": len(values_s)}
    for p in percentiles:
        out[f"p{pct_word(p)}"] = float(np.percentile(arr, p))
    return out


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


def censored_percentile_ms(values_s: Sequence[float], n_failed: int, p: float) -> float | None:
    """Linear-interpolated percentile (numpy's default) in ms, where each of ``n_failed`` failed
    requests counts as +inf (it never got its answer: a censored observation). None when there
    is no request at all; +inf when the rank falls among the failures."""
    n = len(values_s) + n_failed
    if n == 0:
        return None
    v = sorted(float(x) * 1000.0 for x in values_s) + [float("inf")] * n_failed
    h = (n - 1) * p / 100.0
    lo = int(np.floor(h))
    hi = min(lo + 1, n - 1)
    if h == lo or v[hi] == v[lo]:
        return v[lo]
    if v[hi] == float("inf"):
        return float("inf")
    return v[lo] + (h - lo) * (v[hi] - v[lo])


def within_key(metric: str, limit_ms: float) -> str:
    """Summary key of "the share of all requests that succeeded with METRIC <= limit"."""
    return f"within_{metric}_{limit_ms:g}ms"


def _buckets(ok: list[Record]) -> tuple[float, int]:
    """vLLM's 1-second-bucket peaks of output events and concurrent requests."""
    if not ok:
        return 0.0, 0
    t_min = min(r.start for r in ok)
    t_max = max(r.end for r in ok if r.end is not None)
    n = int(np.ceil(t_max - t_min)) + 1
    tokens = np.zeros(n)
    conc = np.zeros(n)
    for r in ok:
        idx = (np.asarray(r.token_times) - t_min).astype(int)
        idx = idx[(idx >= 0) & (idx < n)]
        np.add.at(tokens, idx, 1)
        a = int(r.start - t_min)
        b = int(r.end - t_min) if r.end is not None else a
        conc[a:b + 1] += 1
    return float(tokens.max()), int(conc.max())


def goodput_ok(p: PerRequest, slo_ms: dict[str, float]) -> bool:
    """vLLM's goodput rule: every given SLO met, inclusive; TPOT of a 1-token reply counts as 0."""
    values = {"ttft": p.ttft, "tpot": p.tpot or 0.0, "e2el": p.e2el}
    return all(values[k] * 1000.0 <= v for k, v in slo_ms.items())


def summarize(records: Iterable[Record], *, t0: float | None = None, t_end: float | None = None,
              goodput_slo_ms: dict[str, float] | None = None, stall_s: float = 1.0,
              percentiles: Iterable[float] = DEFAULT_PERCENTILES, split_turns: bool = True,
              within: Iterable[tuple[str, float]] = ()) -> dict[str, Any]:
    """The run (or step) summary. ``t0`` is when dispatch began; ``t_end`` overrides the end
    (both default to what the records say: first scheduled time, last completion).

    Latency statistics of an empty set are None, never 0. ``n_<metric>`` says how many values
    each statistic stands on. ``within`` asks for (metric, limit_ms) shares: of all measured
    requests, the share that succeeded with that metric at or under the limit."""
    recs = measured(records)
    percentiles = tuple(percentiles)
    ok = [r for r in recs if r.ok]
    failed = [r for r in recs if not r.ok]
    if t0 is None:
        t0 = min((r.scheduled for r in recs), default=0.0)
    if t_end is None:
        t_end = max((r.done for r in recs), default=t0)
    duration = max(t_end - t0, 1e-9)

    per = [per_request(r) for r in ok]
    ttfts = [p.ttft for p in per]
    e2els = [p.e2el for p in per]
    tpots = [p.tpot for p in per if p.tpot is not None]
    itls = [g for p in per for g in p.itls]
    per_tok = [g for p in per if p.itl_per_token is not None for g in p.itl_per_token]
    total_in = sum(r.prompt_tokens or 0 for r in ok)
    total_out = sum(r.output_tokens or 0 for r in ok)
    good = sum(1 for p in per if goodput_ok(p, goodput_slo_ms)) if goodput_slo_ms else None
    peak_tok, peak_conc = _buckets(ok)

    s: dict[str, Any] = {
        "completed": len(ok),
        "failed": len(failed),
        "duration": duration,
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "request_throughput": len(ok) / duration,
        "request_goodput": (good / duration) if good is not None else None,
        "output_throughput": total_out / duration,
        "total_token_throughput": (total_in + total_out) / duration,
        "max_output_tokens_per_s": peak_tok,
        "max_concurrent_requests": peak_conc,
    }
    series = {"ttft": ttfts, "tpot": tpots, "itl": itls, "e2el": e2els,
              "client_queue": [p.client_queue for p in per],
              "e2el_from_schedule": [p.e2el_from_schedule for p in per],
              "itl_per_token": per_tok, "max_gap": [p.max_gap for p in per]}
    for name, values in series.items():
        st = stats_ms(values, percentiles)
        for stat, v in st.items():
            # stats_ms's own names (p50 too, as schema 1 stored it); key() reads them back
            s[key(name, "n") if stat == "count" else f"{stat}_{name}_ms"] = v
    if any(r.reasoning_events for r in ok):
        _reasoning(s, ok, per, percentiles)
    # failure-aware figures (llmbench's own names): failed requests count as +inf
    for name in CENSORED_METRICS:
        values = series[name]
        s[key(name + "_all", "n")] = len(recs)
        for p in sorted(set(percentiles) | {50.0}):
            s[key(name, f"p{pct_word(p)}_all")] = censored_percentile_ms(values, len(failed), p)
    for name, limit_ms in within:
        values = series.get(name)
        if values is None:
            continue
        s[within_key(name, limit_ms)] = (sum(1 for v in values if v * 1000.0 <= limit_ms)
                                         / len(recs)) if recs else None
    # llmbench's extras
    s["requests"] = len(recs)
    s["completed_share"] = len(ok) / len(recs) if recs else None
    s["error_rate"] = len(failed) / len(recs) if recs else None
    s["errors"] = dict(Counter(r.error_kind or "unknown" for r in failed))
    s["error_statuses"] = dict(Counter(str(r.status) for r in failed if r.status and r.status >= 400))
    s["error_samples"] = _error_samples(failed)
    s["stalls"] = sum(1 for p in per for g in p.itls if g > stall_s)
    s["stall_threshold_s"] = stall_s
    s["requests_with_stalls"] = sum(1 for p in per if p.max_gap > stall_s)
    s["output_tokens_source"] = _token_source(ok)
    s["non_streaming"] = bool(recs) and all(not r.stream for r in recs)
    s["served_by"] = dict(Counter(r.served_by for r in recs if r.served_by))
    if split_turns and len(s["served_by"]) > 1:
        from .backends import backends
        s["backends"] = backends(recs)
    wait = ollama_slot_wait_s(ok)
    if wait:
        s.update({f"{k}_server_slot_wait_ms": v for k, v in stats_ms(wait, percentiles).items()
                  if k != "count"})
    # the client's own send delay (start -> body handed to the socket), over every measured
    # request that got that far: a late request is llmbench's fault whatever its outcome
    sd = [r.sent - r.start for r in recs if r.sent is not None]
    sd_stats = stats_ms(sd, (50.0, 99.0))
    s["n_send_delay"] = len(sd)
    for stat in ("mean", "p50", "p99", "max"):
        s[f"{stat}_send_delay_ms"] = sd_stats[stat]
    sq = [r.server_queue_ms / 1000.0 for r in ok if r.server_queue_ms is not None]
    if sq:
        s.update({f"{k}_server_queue_ms": v for k, v in stats_ms(sq, percentiles).items()
                  if k != "count"})
    cached = [r for r in ok if r.cached_tokens is not None]
    if cached:
        s["cached_prompt_tokens"] = sum(r.cached_tokens or 0 for r in cached)
    if split_turns and any(r.turn > 0 for r in recs):
        s["by_turn"] = {
            "first": summarize([r for r in recs if r.turn == 0], t0=t0, t_end=t_end,
                               percentiles=percentiles, stall_s=stall_s, split_turns=False),
            "later": summarize([r for r in recs if r.turn > 0], t0=t0, t_end=t_end,
                               percentiles=percentiles, stall_s=stall_s, split_turns=False),
        }
    return s


def _reasoning(s: dict[str, Any], ok: list[Record], per: list[PerRequest],
               percentiles: tuple[float, ...]) -> None:
    """Reasoning models, only when a reply reasoned (other summaries keep their keys): TTFO,
    reasoning time and the answer's own ITL over all successes (a reply that did not reason has
    TTFO = TTFT and answer ITL = ITL), reasoning tokens over the replies that reasoned."""
    series = {"ttfo": [p.ttfo for p in per if p.ttfo is not None],
              "reasoning_time": [p.reasoning_s for p in per if p.reasoning_s is not None],
              "output_itl": [g for p in per for g in (p.output_itls or ())]}
    for name, values in series.items():
        for stat, v in stats_ms(values, percentiles).items():
            s[key(name, "n") if stat == "count" else key(name, stat)] = v
    tokens = [r.reasoning_tokens or 0 for r in ok if r.reasoning_events]
    for stat, v in stats_ms(tokens, percentiles, scale=1.0).items():
        s[key("reasoning_tokens", "n") if stat == "count" else key("reasoning_tokens", stat)] = v
    s["requests_with_reasoning"] = len(tokens)
    s["total_reasoning_tokens"] = sum(tokens)
    s["answered_after_reasoning"] = sum(1 for r in ok if r.reasoning_events
                                        and r.first_output is not None)


def _error_samples(failed: list[Record], limit: int = 5) -> list[dict[str, Any]]:
    seen: dict[tuple[str | None, int | None, str | None], int] = {}
    out = []
    for r in failed:
        key = (r.error_kind, r.status, (r.error or "")[:80])
        if key in seen:
            out[seen[key]]["count"] += 1
            continue
        if len(out) >= limit:
            continue
        seen[key] = len(out)
        out.append({"kind": r.error_kind, "status": r.status, "error": r.error, "count": 1})
    return out


def _token_source(ok: list[Record]) -> str:
    sources = {r.output_tokens_source for r in ok}
    if not sources:
        return "none"
    return sources.pop() if len(sources) == 1 else "mixed"


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


def vllm_result(summary: dict[str, Any], percentile_metrics: Sequence[str],
                metric_percentiles: Sequence[float]) -> dict[str, Any]:
    """The subset of a summary that ``vllm bench serve --save-result`` writes, same keys."""
    return to_vllm(summary, percentile_metrics, metric_percentiles)
