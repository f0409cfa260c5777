"""Golden tests: the same numbers computed by hand from fixed records (METRICS.md)."""

import math

import numpy as np
import pytest

from llmbench.analysis.metrics import min_samples, per_request
from llmbench.analysis.percentile import stats
from llmbench.analysis.metrics import summarize as _summarize
from llmbench.records.record import Record
from tests.helpers.records import plain_summary as _plain


def summarize(*args, **kw):
    """metrics.summarize, read as its flat dict (these tests name run.json's keys)."""
    return _plain(_summarize(*args, **kw))


def rec(rid, start, times, out, prompt=10, ok=True, scheduled=None, counts=None, **kw):
    r = Record(rid, scheduled=start if scheduled is None else scheduled, start=start,
               token_times=list(times), output_tokens=out, prompt_tokens=prompt, ok=ok,
               status=200, token_counts=counts, **kw)
    if times:
        r.first_token, r.end = times[0], times[-1]
    r.done = (times[-1] if times else start) + 0.001
    return r


def test_single_request_by_hand():
    r = rec("a", 10.0, [10.1, 10.15, 10.35], out=3)
    p = per_request(r)
    assert p.ttft == pytest.approx(0.1)
    assert p.e2el == pytest.approx(0.35)
    assert p.itls == pytest.approx([0.05, 0.2])
    assert p.tpot == pytest.approx(0.25 / 2)   # (end - first) / (out - 1)
    assert p.max_gap == pytest.approx(0.2)


def test_one_output_token_has_no_tpot():
    assert per_request(rec("a", 0.0, [0.5], out=1)).tpot is None


def test_multi_token_events_tpot_uses_tokens_itl_uses_events():
    # 2 events carrying 1 and 4 tokens: ITL is one gap per event, TPOT per token
    r = rec("a", 0.0, [0.1, 0.5], out=5, counts=[1, 4])
    p = per_request(r)
    assert p.itls == pytest.approx([0.4])
    assert p.tpot == pytest.approx(0.4 / 4)
    assert p.itl_per_token == pytest.approx([0.1] * 4)


def test_summary_vllm_formulas():
    a = rec("a", 0.0, [0.1, 0.2, 0.4], out=3, prompt=10)
    b = rec("b", 0.0, [0.3, 0.4], out=2, prompt=20)
    c = rec("c", 0.5, [0.7], out=1, prompt=5)
    f = Record("f", scheduled=0.0, start=0.0, status=500, error_kind="http_status", error="boom",
               done=0.2)
    s = summarize([a, b, c, f], t0=0.0)
    duration = c.done - 0.0
    assert s["completed"] == 3 and s["failed"] == 1
    assert s["duration"] == pytest.approx(duration)
    assert s["total_input_tokens"] == 35
    assert s["total_output_tokens"] == 6
    assert s["request_throughput"] == pytest.approx(3 / duration)
    assert s["output_throughput"] == pytest.approx(6 / duration)
    assert s["total_token_throughput"] == pytest.approx(41 / duration)
    ttfts = np.array([0.1, 0.3, 0.2]) * 1000
    assert s["mean_ttft_ms"] == pytest.approx(ttfts.mean())
    assert s["median_ttft_ms"] == pytest.approx(200.0)
    assert s["std_ttft_ms"] == pytest.approx(ttfts.std())     # population std
    assert s["p99_ttft_ms"] == pytest.approx(np.percentile(ttfts, 99))
    # ITL pools the gaps of all successful requests
    itls = np.array([0.1, 0.2, 0.1]) * 1000
    assert s["mean_itl_ms"] == pytest.approx(itls.mean())
    # TPOT over requests with >1 token, each weighing the same
    tpots = np.array([0.3 / 2, 0.1 / 1]) * 1000
    assert s["mean_tpot_ms"] == pytest.approx(tpots.mean())
    assert s["mean_e2el_ms"] == pytest.approx(np.mean([400, 400, 200]))
    assert s["errors"] == {"http_status": 1} and s["error_statuses"] == {"500": 1}
    assert s["error_samples"][0]["error"] == "boom"


def test_goodput_inclusive_and_tpot_zero_for_one_token():
    a = rec("a", 0.0, [0.1, 0.2], out=2)           # ttft 100, tpot 100
    b = rec("b", 0.0, [0.3], out=1)                 # ttft 300, tpot counts as 0
    s = summarize([a, b], t0=0.0, goodput_slo_ms={"ttft": 100, "tpot": 100})
    assert s["request_goodput"] == pytest.approx(1 / s["duration"])


def test_failed_left_out_of_latency_and_empty_is_missing_not_zero():
    # vLLM writes 0 for an empty set, which reads as "instant" and passes any latency limit
    f = Record("f", scheduled=0.0, start=0.0, error_kind="connect", done=1.0)
    s = summarize([f], t0=0.0)
    assert s["completed"] == 0 and s["failed"] == 1
    assert s["mean_ttft_ms"] is None and s["p99_itl_ms"] is None and s["p95_ttft_ms"] is None
    assert s["n_ttft"] == 0 and s["n_ttft_all"] == 1
    assert s["p95_all_ttft_ms"] == float("inf") and s["completed_share"] == 0.0
    empty = summarize([], t0=0.0)
    assert empty["error_rate"] is None and empty["p95_all_ttft_ms"] is None


def test_failure_aware_percentiles_count_failures_as_infinite():
    ok = [rec(f"r{i}", 0.0, [0.01 * (i + 1), 0.5], out=2) for i in range(19)]   # ttft 10..190 ms
    bad = Record("f", scheduled=0.0, start=0.0, error_kind="timeout_first_token", done=1.0)
    s = summarize(ok + [bad], t0=0.0, within=[("ttft", 100.0), ("e2el", 600.0)])
    # vLLM's view: successes only
    assert s["p95_ttft_ms"] == pytest.approx(np.percentile(np.arange(1, 20) * 10.0, 95))
    # 1 of 20 failed (5 %): rank 0.95 x 19 = 18.05 lies between the 19th value (190) and +inf
    assert s["p95_all_ttft_ms"] == float("inf")
    assert s["p90_all_ttft_ms"] == pytest.approx(np.percentile(list(np.arange(1, 20) * 10.0)
                                                               + [1e9], 90))
    assert s["median_all_ttft_ms"] == pytest.approx(105.0)
    assert s["within_ttft_100ms"] == pytest.approx(10 / 20)      # 10..100 ms, of all 20
    assert s["within_e2el_600ms"] == pytest.approx(19 / 20)
    # all succeeded: the failure-aware figure equals vLLM's
    s2 = summarize(ok, t0=0.0)
    assert s2["p95_all_ttft_ms"] == pytest.approx(s2["p95_ttft_ms"])
    # 20 % timeouts: no failure-aware percentile above the median is finite
    s3 = summarize(ok[:8] + [bad, bad], t0=0.0)
    assert s3["p90_all_ttft_ms"] == float("inf") and s3["p95_ttft_ms"] < 100


def test_censored_percentile_matches_numpy_without_failures():
    from llmbench.analysis.percentile import censored

    def censored_ms(values_s, n_failed, p):
        return censored(np.sort(np.asarray(values_s, dtype=float) * 1000.0), n_failed, p)
    vals = [0.3, 0.1, 0.7, 0.2, 0.5]
    for p in (0, 10, 50, 90, 95, 99, 100):
        assert censored_ms(vals, 0, p) == pytest.approx(np.percentile(vals, p) * 1000)
    assert censored_ms([], 0, 95) is None
    assert censored_ms([], 3, 50) == float("inf")


def test_min_samples_rule():
    assert [min_samples(s) for s in ("mean", "median", "max", "std", "p50", "p90", "p95",
                                     "p99", "p95_all")] == [1, 1, 1, 2, 1, 3, 5, 25, 5]


def test_warmup_and_interrupted_not_counted():
    a = rec("a", 0.0, [0.1, 0.2], out=2)
    w = rec("w", 0.0, [0.1, 0.2], out=2, warmup=True)
    i = Record("i", scheduled=0.0, start=0.0, error_kind="interrupted", done=0.3)
    s = summarize([a, w, i], t0=0.0)
    assert s["completed"] == 1 and s["failed"] == 0 and s["requests"] == 1


def test_client_queue_and_e2el_from_schedule():
    r = rec("a", 1.0, [1.2, 1.3], out=2, scheduled=0.5)
    s = summarize([r], t0=0.5)
    assert s["mean_client_queue_ms"] == pytest.approx(500)
    assert s["mean_e2el_from_schedule_ms"] == pytest.approx(800)
    assert s["mean_e2el_ms"] == pytest.approx(300)


def test_peaks_one_second_buckets():
    # vLLM buckets: tokens by second since the first start; concurrency per second touched
    a = rec("a", 0.0, [0.1, 0.2, 0.3, 1.5], out=4)
    b = rec("b", 0.5, [0.6, 0.9], out=2)
    s = summarize([a, b], t0=0.0)
    assert s["max_output_tokens_per_s"] == 5.0
    assert s["max_concurrent_requests"] == 2


def test_stalls_and_split_by_turn():
    a = rec("a", 0.0, [0.1, 1.3, 1.4], out=3, turn=0)
    b = rec("b", 2.0, [2.05, 2.1], out=2, turn=1)
    s = summarize([a, b], t0=0.0, stall_s=1.0)
    assert s["stalls"] == 1 and s["requests_with_stalls"] == 1
    assert s["by_turn"]["first"]["mean_ttft_ms"] == pytest.approx(100)
    assert s["by_turn"]["later"]["mean_ttft_ms"] == pytest.approx(50)


def test_ollama_slot_wait_from_final_line():
    r = rec("a", 0.0, [0.5, 0.6], out=2,
            server_timing={"total_duration": 900_000_000, "load_duration": 0,
                           "prompt_eval_duration": 100_000_000, "eval_duration": 100_000_000})
    s = summarize([r], t0=0.0)
    assert s["mean_server_slot_wait_ms"] == pytest.approx(700)


def test_token_source_marked():
    r = rec("a", 0.0, [0.1, 0.2], out=2, output_tokens_source="tokenizer")
    assert summarize([r])["output_tokens_source"] == "tokenizer"


def test_stats_ms_linear_percentiles():
    st = stats([0.001, 0.002, 0.003, 0.004], (50, 90), 1000.0)
    assert st["p90"] == pytest.approx(3.7)
    assert st["median"] == pytest.approx(2.5)
