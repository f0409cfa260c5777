"""Running ``llmbench probe``: preflight both paths, alternate slices, write the run folder."""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from pathlib import Path
from typing import Any

from ..client import Client, RequestParams, Timeouts
from ..records import Record, RecordLog
from ..report.auto import write_report
from ..report.console import fmt_ms
from ..results import SCHEMA_VERSION, clean_nan, environment, new_run_dir, write_json
from ..runner import (EXIT_INTERRUPTED, EXIT_OK, EXIT_REFUSED, EXIT_UNREACHABLE, PreflightError,
                      report_failed)
from ..workload import Workload
from .router import ProbePlan, router_bound, run_probe
from .scrape import ServerProbe

perf_counter = time.perf_counter


async def check_path(client: Client, name: str) -> None:
    """One request per path; any error here is one clear line, the router's own words included."""
    rec = Record(f"preflight-{name}", scheduled=perf_counter())
    await client.send([{"role": "user", "content": "Hi"}], 1, rec)
    url = client.target.endpoint
    if rec.error_kind in ("connect", "timeout_connect"):
        raise PreflightError(f"cannot reach the {name} at {client.target.base_url}: {rec.error}",
                             EXIT_UNREACHABLE)
    if rec.error_kind == "http_status":
        what = {404: " (model name not known there? use --direct-model if the names differ)",
                502: " (the router cannot reach its backend)",
                503: " (the router has no healthy backend)"}.get(rec.status or 0, "")
        raise PreflightError(f"the {name} answered {rec.status}{what}: POST {url}: {rec.error}",
                             EXIT_REFUSED)
    if rec.error_kind in ("malformed_event", "no_token", "stream_cut"):
        raise PreflightError(f"the {name} at {url} did not answer like an LLM API "
                             f"({rec.error_kind}: {(rec.error or '')[:80]!r})", EXIT_REFUSED)
    if not rec.ok:
        raise PreflightError(f"the {name} failed its first request: {rec.error_kind}: {rec.error}",
                             EXIT_REFUSED)


def _row(step: dict[str, Any]) -> str:
    def ov(m: str) -> str:
        o = step[m]
        if o["overhead_ms"] is None:
            return "-"
        lo, hi = o["ci_ms"]
        mark = "*" if o["significant"] else " "
        return f"{o['overhead_ms']:+7.1f} [{lo:+.1f},{hi:+.1f}]{mark}"
    r, d = step["router"], step["direct"]
    return (f"{step['users']:>6} {fmt_ms(r['median_ttft_ms']):>9} {fmt_ms(d['median_ttft_ms']):>9} "
            f"{ov('ttft_p50'):>24} {ov('ttft_p95'):>24} {ov('e2el_p50'):>24} {ov('itl_p50'):>24} "
            f"{r['output_throughput'] or 0:>8.1f} {d['output_throughput'] or 0:>8.1f} "
            f"{(r['failed'] or 0):>4}/{(d['failed'] or 0):<4}")


HEADER = (f"{'Users':>6} {'R TTFT50':>9} {'D TTFT50':>9} {'TTFT p50 overhead ms':>24} "
          f"{'TTFT p95 overhead ms':>24} {'E2EL p50 overhead ms':>24} {'ITL p50 overhead ms':>24} "
          f"{'R tok/s':>8} {'D tok/s':>8} {'err R/D':>9}")


async def _probe(plan: ProbePlan, workload: Workload, params: RequestParams, timeouts: Timeouts,
                 run_dir: Path | None, server_probe: str) -> tuple[dict[str, Any], bool]:
    log = RecordLog(run_dir / "requests.jsonl") if run_dir else None
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    interrupted = False

    def on_sigint() -> None:
        nonlocal interrupted
        interrupted = True
        stopping.set()
    try:
        loop.add_signal_handler(signal.SIGINT, on_sigint)
    except (NotImplementedError, RuntimeError):
        pass
    n = max(plan.steps) + 16
    async with Client(plan.router, params, timeouts, n, plan.served_by_header) as router, \
            Client(plan.direct, params, timeouts, n, plan.served_by_header) as direct:
        await check_path(router, "router")
        await check_path(direct, "direct backend")
        probes = []
        stop = asyncio.Event()
        tasks = []
        if server_probe != "off":
            for name, tgt in (("router", plan.router), ("direct", plan.direct)):
                p = ServerProbe(tgt.server_root, server_probe if name == "direct" else "auto")
                probes.append((name, p))
                out = run_dir / ("server.jsonl" if name == "direct" else "router_server.jsonl") \
                    if run_dir else None
                tasks.append(loop.create_task(p.run(stop, out)))
        print(HEADER, flush=True)
        t0 = perf_counter()
        try:
            steps, records = await run_probe(plan, workload.conversations, router, direct, log,
                                              stopping, lambda s: print(_row(s), flush=True))
        finally:
            stop.set()
            await asyncio.gather(*tasks, return_exceptions=True)
            if log is not None:
                log.close()
    bound = router_bound(steps)
    router_recs = [r for r in records if r.path == "router"]
    from ..backends import backends
    run = {
        "schema_version": SCHEMA_VERSION, "kind": "probe",
        "status": "partial" if interrupted else "complete", "t0_perf": t0,
        "started_at": time.time(),
        "config": {"router": plan.router.describe(), "direct": plan.direct.describe(),
                   "steps": plan.steps, "slice_s": plan.slice_s, "rounds": plan.rounds,
                   "think_s": list(plan.think_s), "seed": plan.seed},
        "workload": workload.describe(), "environment": environment(),
        "steps": steps, "router_bound": bound, "backends": backends(router_recs),
        "server_probe": {name: {"kind": p.kind if p.samples else None, "note": p.note,
                                "samples": len(p.samples)} for name, p in probes},
    }
    if run_dir is not None:
        write_json(run_dir / "run.json", clean_nan(run))
    return run, interrupted


def execute(plan: ProbePlan, workload: Workload, params: RequestParams, timeouts: Timeouts,
            out: Path | None, label: str | None, labels: dict[str, str],
            server_probe: str = "auto") -> int:
    run_dir = new_run_dir(out, "probe", label) if out else None
    try:
        run, interrupted = asyncio.run(_probe(plan, workload, params, timeouts, run_dir,
                                              server_probe))
    except PreflightError as exc:
        return report_failed(exc, run_dir, "probe", plan.router)
    if run_dir is not None:
        data = run
        data["labels"] = labels
        write_json(run_dir / "run.json", clean_nan(data))
    print("(* = the 95% interval excludes zero and the difference is at least 1 ms or 2%: "
          "real, not noise)")
    steps = run["steps"]
    if steps and not any(s["ttft_p50"]["significant"] for s in steps):
        print("No significant router overhead at any step (TTFT p50).")
    b = run["router_bound"]
    if b:
        print(f"Router-bound from {b['users']} users: its TTFT p50 overhead grew from "
              f"{b['first_overhead_ms']:.1f} ms to {b['overhead_ms']:.1f} ms while the direct "
              f"path stayed flat ({fmt_ms(b['direct_ttft_p50_ms'])}).")
    elif len(steps) > 1:
        print("No step where the router's overhead grew while the direct path stayed flat.")
    be = run.get("backends")
    if be:
        spread = ", ".join(f"{k}: {v['share'] * 100:.0f}% (TTFT p50 {fmt_ms(v['ttft_p50_ms'])}"
                           + (f", cache hits {v['cache_hit_rate'] * 100:.0f}%"
                              if v.get("cache_hit_rate") is not None else "") + ")"
                           for k, v in be["backends"].items())
        print(f"Backends behind the router: {spread}; imbalance {be['imbalance']:.2f} (max/mean).")
        if be.get("affinity"):
            a = be["affinity"]
            print(f"Conversation affinity: {a['same_backend_next_turn'] * 100:.0f}% of next turns "
                  f"on the same backend; {a['whole_conversation_on_one_backend'] * 100:.0f}% of "
                  f"{a['conversations']} conversations stayed on one backend.")
    if interrupted:
        print("PARTIAL RESULT: the probe was interrupted; finished steps are kept.")
    if run_dir is not None:
        write_report(run_dir)
        print(f"Results: {run_dir}")
    return EXIT_INTERRUPTED if interrupted else EXIT_OK
