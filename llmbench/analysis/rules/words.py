"""The words and readings every verdict rule shares: a server's own running/waiting view,
the load generator's state (busy itself, or its machine busy with other processes), a check
said in words, failed requests listed. Pure."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from llmbench.load.monitor import who_was_busy
from llmbench.analysis import telemetry as telemetry_mod
from llmbench.results.schema import NO_DATA, Check, Step, Summary

# When the gaps between tokens grew by this factor (and by at least ITL_MIN_GROWTH_MS), the
# requests in progress share the hardware: compute saturation, not just a queue.
ITL_GROWTH = 1.5
ITL_MIN_GROWTH_MS = 2.0
TTFT_GROWTH = 1.5

SLOT_SETTINGS = ("OLLAMA_NUM_PARALLEL (Ollama)", "-np / --parallel (llama.cpp server)",
                 "--max-num-seqs (vLLM)", "--max-running-requests (SGLang)",
                 "--max-concurrent-requests / --max-batch-size (TGI)")


def server_view(samples: Sequence[dict[str, Any]], start: float = float("-inf"),
                end: float = float("inf")) -> dict[str, Any] | None:
    """Running/waiting gauges the server reported during the window, when it was probed."""
    window = [s for s in samples if start <= s.get("t", -1) <= end]
    running = [s["running"] for s in window if s.get("running") is not None]
    # a router's own in-flight count (NOMYO): what it sent on, running or queued behind it
    routed = [s["in_flight"] for s in window if s.get("in_flight") is not None]
    if not running and not routed:
        return None
    waiting = [s["waiting"] for s in window if s.get("waiting") is not None]
    kv = [s["kv_cache_usage"] for s in window if s.get("kv_cache_usage") is not None]
    slots = [s["slots"] for s in window if s.get("slots")]
    preempted = [s["preemptions"] for s in window if s.get("preemptions") is not None]
    per_backend: dict[str, float] = {}
    for s in window:
        for name, n in (s.get("backends_in_flight") or {}).items():
            per_backend[name] = max(per_backend.get(name, 0), n)
    return {"running_max": max(running) if running else None,
            "running_mean": float(np.mean(running)) if running else None,
            "router_in_flight_max": max(routed) if routed else None,
            "backends_in_flight_max": per_backend or None,
            "waiting_max": max(waiting) if waiting else None,
            "waiting_mean": float(np.mean(waiting)) if waiting else None,
            "kv_cache_usage_max": max(kv) if kv else None,
            "slots": slots[-1] if slots else None, "samples": len(window),
            "preemptions": max(preempted) - min(preempted) if preempted else None}


def _fmt_ms(v: float | str | None) -> str:
    v = _num(v)
    if v is None:
        return "–"
    if v == float("inf"):
        return "∞"
    return f"{v / 1000:.2f} s" if v >= 1000 else f"{v:.0f} ms"


def _num(v: Any) -> float | None:
    """A summary number as read back from run.json ("inf" strings, nulls) or from memory."""
    if v is None:
        return None
    v = float(v)
    return None if v != v else v


# A loop that uses this much of a core while it lags is lagging on its own work: llmbench was
# busy. Lagging while using less means it was ready to run and the machine did not run it:
# other processes had the cores.
GENERATOR_CPU_BUSY_PCT = 50.0


def generator_cause(mon: dict[str, Any]) -> str:
    """'llmbench' (its own CPU was high) or 'machine' (lag while its own CPU was low)."""
    return "llmbench" if (mon.get("cpu_pct") or 0.0) >= GENERATOR_CPU_BUSY_PCT else "machine"


def freeze_sentence(mon: dict[str, Any]) -> str | None:
    """The load generator's own freeze, when there was one (load.monitor: a loop that did not
    run for seconds), as one sentence; None without one."""
    frozen = mon.get("frozen_s")
    if not frozen:
        return None
    spans = mon.get("freeze_spans") or []
    at = f" at {spans[0]['at_s']:.0f} s" if len(spans) == 1 else (
        f" {len(spans)} times" if spans else "")
    stalls = mon.get("client_stalls")
    across = mon.get("frozen_requests")
    tail = ""
    if across:
        tail += f"; the {across} request{'s' if across != 1 else ''} in flight then hold it in " \
                "their timings"
    if stalls:
        tail += (f"; {stalls} that timed out while it was frozen {'are' if stalls != 1 else 'is'} "
                 "llmbench's (client_stall), not counted against the server")
    return (f"llmbench itself was frozen for {frozen:.1f} s{at} (its event loop did not run: "
            f"the process was stopped, swapped out or its machine suspended){tail}.")


def generator_sentence(mon: dict[str, Any]) -> str:
    frozen = freeze_sentence(mon)
    if frozen:
        return frozen
    lag, cpu = mon.get("lag_p99_ms") or 0.0, mon.get("cpu_pct") or 0.0
    # with worker processes, say which one (its figures are the ones quoted): a worker, or
    # the coordinator that gathers their records
    who = who_was_busy(mon)
    who = f" ({who})" if who else ""
    if mon.get("send_delay_over"):
        # the requests themselves left late: TTFT and E2EL include llmbench's own delay
        where = ("llmbench itself was busy" if generator_cause(mon) == "llmbench"
                 else "the machine was busy with other processes")
        return (f"llmbench{who} sent its requests late: its own send delay (decided to send -> "
                f"bytes handed to the socket) was {mon['send_delay_p99_ms']:.1f} ms at p99, "
                f"over the {mon.get('send_delay_limit_ms') or 0:g} ms budget ({where}; it used "
                f"{cpu:.0f}% of a core, event-loop lag p99 {lag:.1f} ms), so its TTFTs "
                "include that delay.")
    if generator_cause(mon) == "llmbench":
        return (f"llmbench itself{who} was busy (it used {cpu:.0f}% of a core; event-loop lag "
                f"p99 {lag:.1f} ms): its timestamps were late.")
    return (f"The machine was busy with other processes: llmbench's event loop{who} lagged (p99 "
            f"{lag:.1f} ms) while llmbench itself used only {cpu:.0f}% of a core, so something "
            "else had the CPU.")


def untrusted_words(mon: dict[str, Any]) -> str:
    """Why a step the generator's lag could have broken is not trustworthy, with the cause the
    verdict names (``generator_cause``, the load_generator and machine rules' decision): the
    steps table's "!" mark says it in these words, never a cause of its own."""
    if generator_cause(mon) == "llmbench":
        return "llmbench itself was busy, and its own lag could explain why the step broke"
    return ("the machine was busy with other processes (they had the CPU), and the lag they "
            "gave llmbench's timestamps could explain why the step broke")


def busy_warning(mon: dict[str, Any]) -> str:
    """The load generator's state as one warning with what to do, decided one way everywhere
    (``generator_cause``: run, ramp, --find and the dashboard)."""
    if generator_cause(mon) == "llmbench":
        return generator_sentence(mon) + " Use fewer streams per process (--workers)."
    return generator_sentence(mon) + (" Run llmbench where nothing else competes for the "
                                      "CPU: more llmbench processes would not help, the cores "
                                      "are taken.")


def busy_banner(lag_p99_ms: float | None, cpu_pct: float | None) -> str:
    """The same decision from the live gauges alone (the dashboard's banner)."""
    lag, cpu = lag_p99_ms or 0.0, cpu_pct or 0.0
    if cpu >= GENERATOR_CPU_BUSY_PCT:
        return (f"llmbench itself is near its limit (event-loop lag p99 {lag:.1f} ms, CPU "
                f"{cpu:.0f}%): latencies measured now may be its own.")
    return (f"The machine is busy with other processes: llmbench's event loop lags (p99 "
            f"{lag:.1f} ms) while it uses only {cpu:.0f}% of a core; latencies measured now "
            "may include that lag.")


def lag_explains(step: Step) -> bool:
    """Whether the load generator's own lag could explain why this step failed.

    A late event loop stamps each token late by about its lag, so a latency limit broken by
    more than the lag p99 was broken by the server, busy generator or not. Anything else that
    failed (a throughput minimum, a share within T, stalls) could come from the generator."""
    mon = step.monitor
    if not mon.get("overloaded"):
        return False
    lag = mon.get("lag_p99_ms") or 0.0
    if mon.get("send_delay_over"):
        # a request sent late has every latency late by its send delay
        lag = max(lag, mon.get("send_delay_p99_ms") or 0.0)
    for c in step.checks:
        if c.ok or c.insufficient:
            continue
        actual = _num(c.actual)
        if c.metric in ("errors", "error_rate", "completed", "completed_share") \
                or actual == float("inf") or (c.reason and not c.insufficient):
            return False          # requests failed: lag does not make a server answer 429
        if (c.stat not in (None, "within") and (c.op or "<=") in ("<=", "<")
                and actual is not None and actual != float("inf")
                and actual - (c.limit or 0.0) > lag):
            return False
    return True


def baseline_step(steps: Sequence[Step], subject: Step | None) -> Step | None:
    """The step ``subject`` is compared with: the first step before it that had data (held or
    over), the closest to an unloaded server the ramp measured; else the first before it that
    finished any request (too few to judge thresholds by, still a lighter load's latencies).
    None when there is none: a step is never compared with itself."""
    steps = list(steps)
    end = len(steps) - 1 if subject is None else steps.index(subject)
    before = steps[:max(end, 0)]          # every step held: the first against the last
    return (next((s for s in before if s.state != NO_DATA), None)
            or next((s for s in before if s.summary.completed), None))


NAMES = {"ttft": "TTFT", "itl": "ITL", "tpot": "TPOT", "e2el": "E2EL",
         "client_queue": "client queue", "e2el_from_schedule": "E2EL from schedule",
         "itl_per_token": "ITL per token", "max_gap": "max gap"}


def describe_check(c: Check, failed: int | None = None) -> str:
    """``failed``: failed requests in the step; with none, a p95_all is just the p95."""
    metric, stat, limit = c.metric or "", c.stat, c.limit if c.limit is not None else 0.0
    actual = _num(c.actual)
    if c.outage:
        return c.reason or "the server was down"
    if c.reason:
        return f"{c.threshold}: {c.reason.removeprefix('not enough data: ')}"
    if actual is None:
        return f"{c.threshold} had no value"
    if stat == "within":
        return (f"{actual * 100:.1f}% of requests succeeded with {NAMES.get(metric, metric)} "
                f"in time ({c.threshold})")
    if stat is not None:
        rel = "over" if actual > limit else "under"
        name = NAMES.get(metric, metric)
        if stat.endswith("_all") and failed == 0:
            name += f" {stat.removesuffix('_all')}"
        elif stat.endswith("_all"):
            name += f" {stat.removesuffix('_all')} incl. failures"
            if actual == float("inf"):
                return f"{name} was ∞ (too many requests failed), {rel} {_fmt_ms(limit)}"
        else:
            name += f" {stat}"
        return f"{name} was {_fmt_ms(actual)}, {rel} {_fmt_ms(limit)}"
    if metric == "errors":
        return f"{actual:g} requests failed (limit {limit:g})"
    if metric == "error_rate":
        return f"the error rate was {actual * 100:.1f}% (limit {limit * 100:.1f}%)"
    if metric == "requests":
        return "no request finished in the hold window"
    return f"{metric} was {actual:.2f} ({c.threshold})"




def error_evidence(s: Summary, where: str = "") -> list[str]:
    """Failed requests, by kind and HTTP status, with the first words of each kind's body."""
    if not s.failed:
        return []
    statuses = s.error_statuses
    kinds = s.errors
    out = [f"{s.failed} of {s.requests} requests failed{where}: "
           + ", ".join(f"{k} x{v}" for k, v in kinds.items())
           + ("; HTTP " + ", ".join(f"{k} x{v}" for k, v in statuses.items()) if statuses else "")
           + "."]
    for e in s.error_samples[:3]:
        out.append(f"  {e.kind}{' ' + str(e.status) if e.status else ''} "
                   f"x{e.count}: {(e.error or '')[:160]}")
    return out


def crowded_out(first: Step, subject: Step, unit: str, growth: float,
                 server: dict[str, Any] | None, info: dict[str, Any] | None) -> str | None:
    """With telemetry only: a server of one slot with requests waiting, on a machine other
    processes had saturated, had its gaps grow from them, not from this load (one request
    decodes at a time); the sentence that says so, else None."""
    if not server or server.get("slots") != 1 or not (server.get("waiting_max") or 0) >= 1:
        return None
    part = telemetry_mod.verdict_part("saturation", first, subject, unit, growth, None, info)
    if part.cause != "machine_cpu" or subject.telemetry is None:
        return None
    t = subject.telemetry
    busy = t.machine.busy_cores if t.machine is not None else None
    cpus = t.machine.cpus if t.machine is not None else None
    srv = t.server.cores if t.server is not None else None
    gen = t.llmbench.cores if t.llmbench is not None else None
    other = max((busy or 0) - (srv or 0) - (gen or 0), 0)
    return (f"The gaps between tokens grew {growth:.1f}x too, but the server serves one request "
            f"at a time (1 slot): other processes had the machine's cores ({other:.1f} of "
            f"{cpus}, the server {srv or 0:.1f}), so the gaps say nothing "
            "about this load; the requests queued for the slot.")


def server_sentence(server: dict[str, Any]) -> str:
    w = server.get("waiting_max")
    if server.get("running_max") is not None:
        text = (f"The server itself reported up to {server['running_max']:g} running"
                + (f" while up to {w:g} waited" if w is not None else "") + ".")
    else:
        routed = server.get("router_in_flight_max") or 0
        text = (f"The router reported up to {routed:g} requests in flight: its own count of "
                "what it sent on and has not finished, running or queued at the backend, not "
                "how many the backend ran at once.")
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
