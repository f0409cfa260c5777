"""``llmbench run``: one load level, vLLM-style numbers."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import checks, metrics, slo
from .exitcodes import EXIT_THRESHOLD
from . import timeline as timeline_mod
from .client import RequestParams, Timeouts
from .load import arrivals
from .load.fixed import run_closed, run_open
from .load.monitor import busy
from .load.session import Session
from .report import console
from .report import vllm_json
from .report.auto import write_report
from .results import SCHEMA_VERSION, clean_nan, environment, new_run_dir, write_json
from .runner import (EXIT_INTERRUPTED, EXIT_OK, Harness, PreflightError,
                     report_failed, write_started)
from .target import Target
from .verdict import server_view
from .workload import Workload


@dataclass
class RunPlan:
    target: Target
    workload: Workload
    params: RequestParams = field(default_factory=RequestParams)
    timeouts: Timeouts = field(default_factory=Timeouts)
    concurrency: int | None = None
    rate: float | None = None
    burstiness: float = 1.0
    arrival: str = "gamma"
    max_concurrency: int | None = None
    requests: int | None = None
    duration_s: float | None = None
    warmup: int = 0
    think_s: tuple[float, float] = (0.0, 0.0)
    seed: int = 0
    out: Path | None = Path("results")
    label: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    save_result: bool = False            # vLLM's --save-result: write its result JSON
    save_detailed: bool = False          # ... with the per-request arrays (and reply texts)
    append_result: bool = False
    result_dir: Path | None = None
    result_filename: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    percentile_metrics: tuple[str, ...] = ("ttft", "tpot", "itl")
    metric_percentiles: tuple[float, ...] = (99.0,)
    goodput_slo_ms: dict[str, float] | None = None
    stall_s: float = 1.0
    progress: bool | None = None
    served_by_header: str | None = None
    count_tokens: Any = None
    server_probe: str = "auto"
    thresholds: list[Any] = field(default_factory=list)     # slo.Threshold, checked at the end


def _live(session: Session, events_last_s: int) -> str:
    c = session.counters
    return (f"in flight {c.in_flight:4d}  done {c.done:6d}  failed {c.failed:4d}  "
            f"~{events_last_s:5d} tok/s")


async def _run(plan: RunPlan, run_dir: Path | None, keep: dict[str, Any] | None = None
               ) -> tuple[dict[str, Any], int]:
    """``keep``, when given, receives the records and reply texts (for vLLM's result JSON)."""
    convs = plan.workload.conversations
    harness = Harness(plan.target, plan.params, plan.timeouts, run_dir,
                      max_connections=max(plan.concurrency or 0, plan.max_concurrency or 0, 64) + 16,
                      count_tokens=plan.count_tokens, served_by_header=plan.served_by_header,
                      progress=plan.progress, server_probe=plan.server_probe)
    t0_holder: dict[str, float] = {}
    texts: dict[str, str] = {}

    async def body(session: Session) -> None:
        if plan.save_detailed and (plan.save_result or plan.append_result):
            session.texts = texts       # reply texts only when they will be written
        if plan.rate is not None:
            n = plan.requests or max(int(plan.rate * (plan.duration_s or 60)), 1)
            offsets = arrivals.schedule(n, plan.rate, plan.burstiness, plan.seed, plan.arrival)
            t0_holder["t0"] = await run_open(session, convs, offsets, plan.max_concurrency,
                                             plan.warmup, plan.think_s, plan.seed)
        else:
            t0_holder["t0"] = await run_closed(session, convs, plan.concurrency or 1, plan.requests,
                                               plan.duration_s, plan.warmup, plan.think_s, plan.seed)

    _, session = await harness.execute(body, _live)
    records = session.records
    t0 = t0_holder.get("t0")
    percentiles = sorted(set(metrics.DEFAULT_PERCENTILES) | set(plan.metric_percentiles))
    summary = metrics.summarize(records, t0=t0, goodput_slo_ms=plan.goodput_slo_ms,
                                stall_s=plan.stall_s, percentiles=percentiles,
                                within=slo.within_requests(plan.thresholds))
    # vLLM's max_concurrent_requests is kept as vLLM defines it; this is the true peak
    summary["peak_in_flight_requests"] = vllm_json.peak_in_flight(records)
    threshold_results = slo.check_all(plan.thresholds, summary)
    mon = busy(harness.monitor.samples)
    status = "partial" if harness.interrupted else "complete"
    run = {
        "schema_version": SCHEMA_VERSION, "kind": "run", "status": status,
        "started_at": harness.t0_epoch, "t0_perf": harness.t0_perf,
        "labels": plan.labels,
        "config": {
            "target": plan.target.describe(),
            "load": {"concurrency": plan.concurrency, "rate": plan.rate,
                     "burstiness": plan.burstiness, "arrival": plan.arrival,
                     "max_concurrency": plan.max_concurrency, "requests": plan.requests,
                     "duration_s": plan.duration_s, "warmup": plan.warmup,
                     "think_s": list(plan.think_s), "seed": plan.seed},
            "request": {"stream": plan.params.stream, "temperature": plan.params.temperature,
                        "ignore_eos": plan.params.ignore_eos,
                        "max_tokens_field": plan.params.max_tokens_field,
                        "extra_body_keys": sorted(plan.params.extra_body)},
            "timeouts": plan.timeouts.__dict__,
            "goodput_slo_ms": plan.goodput_slo_ms,
        },
        "workload": plan.workload.describe(),
        "environment": environment(),
        "monitor": {**mon, "samples": [s.__dict__ for s in harness.monitor.samples]},
        "summary": summary,
        "output_length": checks.as_dict(records, plan.params.ignore_eos, plan.target.api),
        "not_streamed": checks.not_streamed(records, plan.params.stream),
        "connection_resends": checks.resends(records),
        "thresholds": threshold_results,
        "server_probe": {"kind": harness.server_kind, "note": harness.server_note,
                         "samples": len(harness.server_samples),
                         "view": server_view(harness.server_samples)},
    }
    if run_dir is not None:
        write_json(run_dir / "run.json", clean_nan(run))
        if records:
            rows = timeline_mod.build(records, harness.t0_perf, max(r.done for r in records),
                                      (), harness.monitor.samples, (),
                                      server=harness.server_samples)
            with open(run_dir / "timeline.jsonl", "w", encoding="utf-8") as fh:
                for row in rows:
                    fh.write(json.dumps(clean_nan(row)) + "\n")
    code = EXIT_OK
    if harness.interrupted:
        code = EXIT_INTERRUPTED
    elif any(not c["ok"] for c in threshold_results):
        code = EXIT_THRESHOLD
    if keep is not None:
        keep.update(records=records, texts=texts)
    return run, code


def _vllm_result(plan: RunPlan, summary: dict[str, Any], records: list, texts: dict[str, str]
                 ) -> tuple[Path, dict[str, Any]]:
    date = time.strftime("%Y%m%d-%H%M%S")
    label = plan.labels.get("name")
    rate = plan.rate if plan.concurrency is None else None      # closed loop: vLLM's "inf"
    max_conc = plan.max_concurrency or plan.concurrency
    result = vllm_json.build(
        summary, records, backend=plan.target.api, model_id=plan.target.model,
        tokenizer_id=plan.workload.tokenizer, label=label, request_rate=rate,
        burstiness=plan.burstiness, max_concurrency=max_conc,
        percentile_metrics=plan.percentile_metrics, metric_percentiles=plan.metric_percentiles,
        goodput=bool(plan.goodput_slo_ms), detailed=plan.save_detailed, metadata=plan.metadata,
        texts=texts, date=date)
    name = plan.result_filename or vllm_json.default_file_name(
        label, plan.target.api, rate, max_conc, plan.target.model, date)
    path = Path(plan.result_dir) / name if plan.result_dir else Path(name)
    return path, result


def execute(plan: RunPlan) -> int:
    run_dir = new_run_dir(plan.out, "run", plan.label) if plan.out else None
    write_started(run_dir, "run", plan.target,
                  {"load": {"concurrency": plan.concurrency, "rate": plan.rate,
                            "max_concurrency": plan.max_concurrency, "requests": plan.requests,
                            "duration_s": plan.duration_s, "warmup": plan.warmup}}, plan.labels)
    try:
        keep: dict[str, Any] = {}
        run, code = asyncio.run(_run(plan, run_dir, keep))
    except PreflightError as exc:
        return report_failed(exc, run_dir, "run", plan.target)
    s = run["summary"]
    print(console.vllm_summary(s, plan.percentile_metrics, plan.metric_percentiles,
                               max_concurrency=plan.max_concurrency or plan.concurrency,
                               request_rate=plan.rate))
    print(console.extras(s, run["monitor"]))
    if run["thresholds"]:
        print(console.threshold_lines(run["thresholds"]))
    for w in plan.workload.warnings:
        print(f"note: {w}")
    for w in checks.notes(run):
        print(f"note: {w}")
    if run["status"] == "partial":
        print("PARTIAL RESULT: the run was interrupted; the numbers cover what finished.")
    if run_dir is not None:
        write_report(run_dir)
        print(f"Results: {run_dir}")
    if plan.save_result or plan.append_result:
        path, result = _vllm_result(plan, s, keep["records"], keep["texts"])
        vllm_json.write(path, result, plan.append_result)
        print(f"vLLM result JSON: {path}" + (" (appended)" if plan.append_result else ""))
    if code == EXIT_THRESHOLD:
        print(f"Thresholds failed: exit {EXIT_THRESHOLD}.")
    return code
