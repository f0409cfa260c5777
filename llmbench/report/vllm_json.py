"""``run --save-result``: the result JSON ``vllm bench serve --save-result`` writes, same keys,
same order, same types, so scripts and dashboards built on vLLM's files read ours unchanged.

Source of truth: vllm/benchmarks/serve.py (``main_async`` and ``benchmark``, vLLM main 2026).
The file is one JSON object on one line; ``--append-result`` adds another line to the file.
Without ``--save-detailed`` vLLM drops the per-request arrays (DETAILED_KEYS) but keeps
``latencies`` and ``queue_times``; so do we.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any, Sequence

from llmbench.results.schema import Summary, key as summary_key, pct_word
from llmbench.records.record import Record, measured
from llmbench.report.console import _f as _float

DETAILED_KEYS = ("input_lens", "output_lens", "start_times", "ttfts", "itls", "generated_texts",
                 "errors")
# vLLM prints percentiles for these in this fixed order, whatever order they were asked in
_METRIC_ORDER = ("ttft", "tpot", "itl", "e2el")


def _per_request(records: Sequence[Record], texts: dict[str, str] | None) -> dict[str, list]:
    """vLLM's per-request arrays, one entry per measured request in the order sent."""
    recs = sorted(measured(records), key=lambda r: (r.start, r.scheduled))
    cols: dict[str, list] = {k: [] for k in ("input_lens", "output_lens", "ttfts", "itls",
                                             "latencies", "start_times", "queue_times",
                                             "generated_texts", "errors")}
    for r in recs:
        # the latencies are Record's (records/record.py: their one definition)
        ttft, e2el = r.ttft, r.e2el
        cols["input_lens"].append(int(r.prompt_tokens or 0))
        cols["output_lens"].append(int(r.output_tokens or 0) if r.ok else 0)
        # like vLLM's RequestFuncOutput: 0.0 until the first token came
        cols["ttfts"].append(float(ttft) if ttft is not None else 0.0)
        cols["itls"].append([float(g) for g in r.itls])
        cols["latencies"].append(float(e2el) if r.ok and e2el is not None else 0.0)
        cols["start_times"].append(float(r.start))
        cols["queue_times"].append(float(r.client_queue))
        cols["generated_texts"].append((texts or {}).get(r.request_id, ""))
        cols["errors"].append("" if r.ok else (r.error or r.error_kind or "failed"))
    return cols


def build(s: Summary, records: Sequence[Record], *, backend: str, model_id: str,
          tokenizer_id: str | None, label: str | None, request_rate: float | None,
          burstiness: float, max_concurrency: int | None, percentile_metrics: Sequence[str],
          metric_percentiles: Sequence[float], goodput: bool, detailed: bool,
          metadata: dict[str, str] | None = None, texts: dict[str, str] | None = None,
          date: str | None = None) -> dict[str, Any]:
    """The result dict, keys in vLLM's order. ``request_rate`` None or inf is a closed loop or
    all-at-once: vLLM writes the string "inf" then."""
    out: dict[str, Any] = {
        "date": date or time.strftime("%Y%m%d-%H%M%S"),
        "endpoint_type": backend,
        "backend": backend,
        "label": label,
        "model_id": model_id,
        "tokenizer_id": tokenizer_id,
        "num_prompts": int(s.requests),
    }
    out.update(metadata or {})
    out.update({
        "request_rate": "inf" if request_rate is None or math.isinf(request_rate)
        else float(request_rate),
        "burstiness": float(burstiness),
        "max_concurrency": max_concurrency,
    })
    cols = _per_request(records, texts)
    out.update({
        "duration": float(s.duration_s),
        "completed": int(s.completed),
        "failed": int(s.failed),
        "total_input_tokens": int(s.total_input_tokens),
        "total_output_tokens": int(s.total_output_tokens),
        "request_throughput": float(s.request_throughput),
        "request_goodput": _float(s.request_goodput) if goodput else None,
        "output_throughput": float(s.output_throughput),
        "total_token_throughput": float(s.total_token_throughput),
    })
    for key in ("input_lens", "output_lens", "ttfts", "itls", "latencies", "start_times",
                "queue_times", "generated_texts", "errors"):
        if detailed or key not in DETAILED_KEYS:
            out[key] = cols[key]
    out.update({
        "max_output_tokens_per_s": float(s.max_output_tokens_per_s),
        "max_concurrent_requests": int(s.max_concurrent_requests),
        "rtfx": 0.0,                    # vLLM's audio (ASR) figure; 0.0 for text
    })
    for m in _METRIC_ORDER:
        if m not in percentile_metrics:
            continue
        metric = s.metric(m)
        # no successful request: null, not vLLM's 0.0, which reads as a perfect latency
        out[summary_key(m, "mean")] = _float(metric.mean)
        out[summary_key(m, "median")] = _float(metric.median)
        out[summary_key(m, "std")] = _float(metric.std)
        for p in metric_percentiles:
            out[f"p{pct_word(p)}_{m}_ms"] = _float(metric.percentiles.get(p))   # vLLM's keys
    return out


def default_file_name(label: str | None, backend: str, request_rate: float | None,
                      max_concurrency: int | None, model_id: str, date: str) -> str:
    """vLLM's pattern: {label}-{request_rate}qps[-concurrency{N}]-{model basename}-{date}.json,
    with the backend as the label when none was given and Python's float spelling of the
    rate (inf, 10.0)."""
    rate = float("inf") if request_rate is None else float(request_rate)
    conc = f"-concurrency{max_concurrency}" if max_concurrency is not None else ""
    base_model = model_id.split("/")[-1]
    return f"{label or backend}-{rate}qps{conc}-{base_model}-{date}.json"


def write(path: Path, result: dict[str, Any], append: bool) -> None:
    """One JSON object per line, like vLLM: append adds a newline first to a non-empty file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(result, allow_nan=True)
    with open(path, "a+" if append else "w", encoding="utf-8") as fh:
        if append and fh.tell() != 0:
            fh.write("\n")
        fh.write(text)
