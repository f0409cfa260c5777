"""Why a step broke: queuing, compute saturation, errors/limits, or the load generator itself.

Pure: from step summaries and records (and server samples when probed). Compares the step that
broke with the first step, the closest thing to an unloaded server the ramp saw.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .records import Record

# When the gaps between tokens grew by this factor (and by at least ITL_MIN_GROWTH_MS), the
# requests in progress share the hardware: compute saturation, not just a queue.
ITL_GROWTH = 1.5
ITL_MIN_GROWTH_MS = 2.0
TTFT_GROWTH = 1.5

SLOT_SETTINGS = ("OLLAMA_NUM_PARALLEL (Ollama)", "-np / --parallel (llama.cpp server)",
                 "--max-num-seqs (vLLM)", "--max-running-requests (SGLang)",
                 "--max-concurrent-requests / --max-batch-size (TGI)")


def served_at_once(records: Sequence[Record], start: float, end: float,
                   baseline_ttft_s: float) -> dict[str, float]:
    """Little's law on a window: mean requests in service = time in service / window length.

    Time in service excludes the part of TTFT above the unloaded baseline (time spent queued);
    intervals are clipped to the window, so requests that overlap its edges count pro rata."""
    span = max(end - start, 1e-9)
    service = 0.0
    waiting = 0.0
    streaming = 0.0
    for r in records:
        if not r.ok or r.end is None or r.first_token is None:
            continue
        queued = max((r.first_token - r.start) - baseline_ttft_s, 0.0)
        s0, s1 = r.start + queued, r.end
        service += max(min(s1, end) - max(s0, start), 0.0)
        waiting += max(min(r.first_token, end) - max(r.start, start), 0.0)
        streaming += max(min(r.end, end) - max(r.first_token, start), 0.0)
    total = waiting + streaming
    return {"in_service": service / span, "waiting_share": waiting / total if total else 0.0,
            "streaming": streaming / span, "waiting": waiting / span}


def server_view(samples: Sequence[dict[str, Any]], start: float = float("-inf"),
                end: float = float("inf")) -> dict[str, Any] | None:
    """Running/waiting gauges the server reported during the window, when it was probed."""
    window = [s for s in samples if start <= s.get("t", -1) <= end]
    running = [s["running"] for s in window if s.get("running") is not None]
    if not running:
        return None
    waiting = [s["waiting"] for s in window if s.get("waiting") is not None]
    kv = [s["kv_cache_usage"] for s in window if s.get("kv_cache_usage") is not None]
    slots = [s["slots"] for s in window if s.get("slots")]
    preempted = [s["preemptions"] for s in window if s.get("preemptions") is not None]
    per_backend: dict[str, float] = {}
    for s in window:
        for name, n in (s.get("backends_in_flight") or {}).items():
            per_backend[name] = max(per_backend.get(name, 0), n)
    return {"running_max": max(running), "running_mean": float(np.mean(running)),
            "backends_in_flight_max": per_backend or None,
            "waiting_max": max(waiting) if waiting else None,
            "waiting_mean": float(np.mean(waiting)) if waiting else None,
            "kv_cache_usage_max": max(kv) if kv else None,
            "slots": slots[-1] if slots else None, "samples": len(window),
            "preemptions": max(preempted) - min(preempted) if preempted else None}


def _fmt_ms(v: float) -> str:
    return f"{v / 1000:.2f} s" if v >= 1000 else f"{v:.0f} ms"


def result_line(steps: Sequence[dict[str, Any]], unit: str = "users") -> str:
    """'Held 6 users. At 8 users, TTFT p95 was 2.55 s, over 2 s.'"""
    held = [s for s in steps if s["held"]]
    broke = next((s for s in steps if not s["held"]), None)
    best = max((s["load"] for s in held), default=0)
    head = f"Held {best:g} {unit}."
    if broke is None:
        return head + (" Every step held." if steps else " No step finished.")
    failed = [c for c in broke["checks"] if not c["ok"]]
    parts = []
    for c in failed[:2]:
        parts.append(_describe_check(c))
    return head + f" At {broke['load']:g} {unit}, " + "; ".join(parts) + "."


def _describe_check(c: dict[str, Any]) -> str:
    metric, stat, actual, limit = c["metric"], c["stat"], c["actual"], c["limit"]
    names = {"ttft": "TTFT", "itl": "ITL", "tpot": "TPOT", "e2el": "E2EL",
             "client_queue": "client queue", "e2el_from_schedule": "E2EL from schedule",
             "itl_per_token": "ITL per token", "max_gap": "max gap"}
    if actual is None:
        return f"{c['threshold']} had no value"
    if stat is not None:
        rel = "over" if actual > limit else "under"
        return f"{names.get(metric, metric)} {stat} was {_fmt_ms(actual)}, {rel} {_fmt_ms(limit)}"
    if metric == "errors":
        return f"{actual:g} requests failed (limit {limit:g})"
    if metric == "error_rate":
        return f"the error rate was {actual * 100:.1f}% (limit {limit * 100:.1f}%)"
    if metric == "requests":
        return "no request finished in the hold window"
    return f"{metric} was {actual:.2f} ({c['threshold']})"


def explain(steps: Sequence[dict[str, Any]], records: Sequence[Record], unit: str = "users",
            server_samples: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """The verdict: what kind of limit, the evidence, and what to change."""
    out: dict[str, Any] = {"result": result_line(steps, unit), "kind": "held", "evidence": [],
                           "advice": []}
    if not steps:
        out["kind"] = "none"
        return out
    first = steps[0]
    broke = next((s for s in steps if not s["held"]), None)
    subject = broke or steps[-1]
    s0, s1 = first["summary"], subject["summary"]
    ttft0, ttft1 = s0["p95_ttft_ms"], s1["p95_ttft_ms"]
    itl0, itl1 = s0["median_itl_ms"], s1["median_itl_ms"]
    itl95_0, itl95_1 = s0["p95_itl_ms"], s1["p95_itl_ms"]
    itl_grew = itl0 > 0 and itl1 >= ITL_GROWTH * itl0 and itl1 - itl0 >= ITL_MIN_GROWTH_MS
    ttft_grew = ttft0 > 0 and ttft1 >= TTFT_GROWTH * ttft0
    base_ttft_s = s0["median_ttft_ms"] / 1000.0
    win = [r for r in records if r.start < subject["hold_end"] and r.done > subject["hold_start"]]
    little = served_at_once(win, subject["hold_start"], subject["hold_end"], base_ttft_s)
    server = server_view(server_samples, subject["hold_start"], subject["hold_end"])
    out.update({"compared": {"first_step": first["load"], "step": subject["load"]},
                "ttft_p95_ms": [ttft0, ttft1], "itl_median_ms": [itl0, itl1],
                "itl_p95_ms": [itl95_0, itl95_1], "itl_grew": itl_grew, "ttft_grew": ttft_grew,
                "served_at_once": little, "server": server})
    ev = out["evidence"]
    ev.append(f"From {first['load']:g} to {subject['load']:g} {unit}: TTFT p95 {_fmt_ms(ttft0)} -> "
              f"{_fmt_ms(ttft1)}, time between tokens (median) {itl0:.1f} ms -> {itl1:.1f} ms.")
    est = little["in_service"]
    if broke is None:
        out["kind"] = "held"
        ev.append(f"About {est:.1f} requests were being served at once at the last step.")
        return out
    mon = broke.get("monitor") or {}
    failed_checks = [c for c in broke["checks"] if not c["ok"]]
    error_check = any(c["metric"] in ("errors", "error_rate") for c in failed_checks)
    if mon.get("overloaded"):
        out["kind"] = "load_generator"
        ev.append(f"The load generator itself was busy at this step (event-loop lag p99 "
                  f"{mon.get('lag_p99_ms', 0):.1f} ms, CPU {mon.get('cpu_pct', 0):.0f}%): its "
                  "numbers here are not trustworthy.")
        out["advice"].append("Run fewer users per process, or shard the load over processes/machines.")
        return out
    if error_check or (s1["failed"] and not ttft_grew and not itl_grew):
        out["kind"] = "errors"
        statuses = s1.get("error_statuses") or {}
        kinds = s1.get("errors") or {}
        ev.append("Requests failed: " + ", ".join(f"{k} x{v}" for k, v in kinds.items())
                  + ("; HTTP " + ", ".join(f"{k} x{v}" for k, v in statuses.items()) if statuses else "") + ".")
        for e in (s1.get("error_samples") or [])[:2]:
            ev.append(f"  {e['kind']}{' ' + str(e['status']) if e.get('status') else ''}: "
                      f"{(e.get('error') or '')[:160]}")
        if "429" in statuses or "503" in statuses:
            ev.append("429/503 means a limit was hit: a full queue or a rate limit, not slowness.")
            out["advice"].append("Raise the server's queue limit (e.g. OLLAMA_MAX_QUEUE) or rate "
                                 "limit, or add capacity; or accept fewer users.")
        return out
    if itl_grew:
        out["kind"] = "saturation"
        ev.append(f"The gaps between tokens grew {itl1 / itl0:.1f}x: the requests in progress "
                  "share the hardware (compute saturation), so each reply streams slower.")
        ev.append(f"About {est:.1f} requests were being served at once (Little's law on the hold "
                  "window).")
        if server:
            ev.append(_server_sentence(server))
            if server.get("kv_cache_usage_max") and server["kv_cache_usage_max"] >= 0.95:
                ev.append("The KV cache was full: the server preempts or queues requests.")
        out["advice"].append("More users need more compute: a faster GPU, a smaller or more "
                             "quantized model, or more replicas behind a router.")
        return out
    if ttft_grew:
        out["kind"] = "queuing"
        n = max(round(est), 1)
        ev.append(f"Tokens stayed {itl1:.0f} ms apart while the first token got later: requests "
                  "were queuing for too few slots.")
        ev.append(f"Users spent {little['waiting_share'] * 100:.0f}% of their request time "
                  f"waiting for a first token; about {est:.1f} request(s) were served at once "
                  "(Little's law), so the server serves "
                  + ("one person at a time." if n == 1 else f"about {n} at a time."))
        if server:
            ev.append(_server_sentence(server))
            if server.get("slots"):
                n = int(server["slots"])
        out["slots_estimate"] = n
        out["advice"].append("Serve more requests at once: raise " + ", ".join(SLOT_SETTINGS)
                             + ". Expect each reply to stream a little slower.")
        return out
    out["kind"] = "other"
    ev.append("Neither TTFT nor the gaps between tokens grew much; the step broke on: "
              + "; ".join(c["threshold"] for c in failed_checks) + ".")
    return out


def _server_sentence(server: dict[str, Any]) -> str:
    w = server.get("waiting_max")
    text = (f"The server itself reported up to {server['running_max']:g} running"
            + (f" while up to {w:g} waited" if w is not None else "") + ".")
    if server.get("preemptions"):
        text += (f" It preempted {server['preemptions']:g} request(s): its KV cache was full, so"
                 " it evicted running requests and recomputed them (their replies stall).")
    per = server.get("backends_in_flight_max")
    if per:
        text += " The router's view, most in flight per backend: " + ", ".join(
            f"{k} {v:g}" for k, v in sorted(per.items())) + "."
        busiest, total = max(per.values()), sum(per.values())
        if len(per) > 1 and total and busiest / total > 0.75:
            text += " One backend carried most of it while others idled: the routing, not capacity."
    if server.get("slots"):
        n = server["slots"]
        text += f" It has {n:g} slot{'' if n == 1 else 's'}."
    return text
