"""Why a step broke: queuing, compute saturation, errors/limits, or the load generator itself.

Pure: from the ramp's steps (``results.schema.Step``) and records (and server samples when
probed); the result is a ``results.schema.Verdict``. It explains the step the ramp's answer
turns on (``deciding_step``: the first that broke after the last that held) against the
lightest step that had data, the closest thing to an unloaded server the ramp saw.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from llmbench.load.monitor import who_was_busy
from llmbench.analysis.cachebound import ramp_finding
from llmbench.analysis.metrics import bunching_sentence
from llmbench.records.record import Record
from llmbench.analysis.stats import served_at_once  # noqa: F401  (Little's law; its home is stats)
from llmbench.analysis.stepstats import drift_sentence, knee
from llmbench.analysis import telemetry as telemetry_mod
from llmbench.results.schema import (NO_DATA, OVER, Check, Step, Summary, Verdict,  # noqa: F401
                                     amount, deciding_step, last_held)

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
    if v is None:
        return "–"
    v = float(v)
    if v != v:
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


def result_line(steps: Sequence[Step], unit: str = "users", planned: int | None = None) -> str:
    """'Held 6 users. At 8 users, TTFT p95 was 2.55 s, over 2 s.'

    ``planned`` is how many steps the plan had: a ramp that stopped early (interrupted) did
    not have "every step" hold. The step named after the answer is ``deciding_step``."""
    held = [s for s in steps if s.held]
    broke = deciding_step(steps)
    best = max((s.load for s in held), default=0)
    head = f"Held {amount(best, unit)}."
    if broke is None:
        if not steps:
            return head + " No step finished."
        if len(held) < len(steps):
            return head + " No step above it broke."
        if planned is not None and len(steps) < planned:
            return head + f" Stopped after {len(steps)} of {planned} steps, all held."
        return head + " Every step held."
    failed = broke.failed_checks
    if broke.state == NO_DATA:
        head = head if held else "No step could be judged."
        return (head + f" At {amount(broke.load, unit)}, not enough data to decide: "
                + "; ".join(_describe_check(c) for c in failed[:2]) + ".")
    # an outage first (it explains the rest), then a breach, then what could not be measured
    failed.sort(key=lambda c: (not c.outage, bool(c.reason)))
    parts = [_describe_check(c, broke.summary.failed) for c in failed[:2]]
    return head + f" At {amount(broke.load, unit)}, " + "; ".join(parts) + "."


NAMES = {"ttft": "TTFT", "itl": "ITL", "tpot": "TPOT", "e2el": "E2EL",
         "client_queue": "client queue", "e2el_from_schedule": "E2EL from schedule",
         "itl_per_token": "ITL per token", "max_gap": "max gap"}


def _describe_check(c: Check, failed: int | None = None) -> str:
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


describe_check = _describe_check     # 'TTFT p95 was 2.40 s, over 2 s' (the search's answer)


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


def _telemetry(out: Verdict, kind: str, first: Step, subject: Step, unit: str,
               itl_growth: float | None, server: dict[str, Any] | None,
               info: dict[str, Any] | None) -> None:
    """What the server's machine says (its CPU, its GPUs, energy, who shared the machine),
    when the steps carry telemetry; confirms or corrects the latency-based reading."""
    part = telemetry_mod.verdict_part(kind, first, subject, unit, itl_growth,
                                      (server or {}).get("kv_cache_usage_max"), info)
    out.evidence.extend(part.evidence)
    if part.advice is not None:
        out.advice = part.advice
    if part.cause:
        out.cause = part.cause


def _crowded_out(first: Step, subject: Step, unit: str, growth: float,
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


def explain(steps: Sequence[Step], records: Sequence[Record], unit: str = "users",
            server_samples: Sequence[dict[str, Any]] = (), planned: int | None = None,
            telemetry: dict[str, Any] | None = None) -> Verdict:
    """The verdict: what kind of limit, the evidence, and what to change.

    Failed requests outrank everything, the load generator's own state included: they are real
    whatever the generator's lag, and are always listed with their status and body.
    ``telemetry``: the server's identity and where its machine was sampled ({"identity",
    "meta"}); each step's own figures are its ``telemetry``."""
    steps = list(steps)
    out = Verdict(text=result_line(steps, unit, planned), kind="held")
    if not steps:
        out.kind = "none"
        return out
    broke = deciding_step(steps)
    subject = broke or steps[-1]
    first = baseline_step(steps, broke)
    s1 = subject.summary
    s0 = first.summary if first is not None else None
    ttft0 = _num(s0.ttft.p95) if s0 is not None else None
    ttft1 = _num(s1.ttft.p95)
    itl0 = _num(s0.itl.median) if s0 is not None else None
    itl1 = _num(s1.itl.median)
    itl95_0 = _num(s0.itl.p95) if s0 is not None else None
    itl95_1 = _num(s1.itl.p95)
    # growth needs a number on both sides: a missing statistic grows nothing
    itl_grew = (itl0 is not None and itl1 is not None and itl0 > 0
                and itl1 >= ITL_GROWTH * itl0 and itl1 - itl0 >= ITL_MIN_GROWTH_MS)
    ttft_grew = (ttft0 is not None and ttft1 is not None and ttft0 > 0
                 and ttft1 >= TTFT_GROWTH * ttft0)
    if not ttft_grew and s0 is not None and any(s.sessions is not None for s in steps):
        # agents: a session's first call prefills its whole task whatever the server does, and
        # those calls are the p95; the median is its later calls, which queue or re-prefill
        med0, med1 = _num(s0.ttft.median), _num(s1.ttft.median)
        ttft_grew = (med0 is not None and med1 is not None and med0 > 0
                     and med1 >= TTFT_GROWTH * med0)
    base_ttft_s = ((_num(s0.ttft.median) or 0.0) if s0 is not None else 0.0) / 1000.0
    h0, h1 = subject.hold_start or 0.0, subject.hold_end or 0.0
    win = [r for r in records if r.start < h1 and r.done > h0]
    little = served_at_once(win, h0, h1, base_ttft_s)
    server = server_view(server_samples, h0, h1)
    out.knee = knee(steps, records, unit)
    drifting = [s for s in steps if s.drifting]
    out.drifting = [s.load for s in drifting]
    out.steady_note = [drift_sentence(s, unit) for s in drifting]
    out.compared = {"first_step": None if first is None else first.load, "step": subject.load}
    out.ttft_p95_ms, out.itl_p50_ms, out.itl_p95_ms = [ttft0, ttft1], [itl0, itl1], \
        [itl95_0, itl95_1]
    out.itl_grew, out.ttft_grew, out.served_at_once, out.server = itl_grew, ttft_grew, little, \
        server
    ev = out.evidence
    itl_text = "–" if itl0 is None else f"{itl0:.1f} ms"
    itl_text += " -> " + ("–" if itl1 is None else f"{itl1:.1f} ms")
    # a lighter step with too few requests still shows its latencies, roughly
    rough = (f" ({amount(first.load, unit)} had too few requests to judge by: its figures "
             "are rough)") if first is not None and first.state == NO_DATA else ""
    if first is None or s0 is None:
        pass                    # nothing lighter to compare with: no "from X to X"
    elif s1.total_embeddings is not None:
        # embeddings: one whole reply, no tokens streamed; latency and throughput are the story
        e0, e1 = _num(s0.e2el.p95), _num(s1.e2el.p95)
        r0, r1 = _num(s0.embeddings_throughput), _num(s1.embeddings_throughput)
        rates = " -> ".join("–" if r is None else f"{r:.0f}" for r in (r0, r1))
        ev.append(f"From {first.load:g} to {amount(subject.load, unit)}: latency p95 "
                  f"{_fmt_ms(e0)} -> {_fmt_ms(e1)}, embeddings per second {rates}{rough}.")
    else:
        ev.append(f"From {first.load:g} to {amount(subject.load, unit)}: TTFT p95 "
                  f"{_fmt_ms(ttft0)} -> {_fmt_ms(ttft1)}, time between tokens (median) "
                  f"{itl_text}{rough}.")
    for st in steps:
        # a step with too few requests, passed over: it is neither held nor broken
        if st is not broke and st is not first and st.state == NO_DATA and (
                broke is None or steps.index(st) < steps.index(broke)):
            ev.append(f"At {amount(st.load, unit)}, not enough data to decide ("
                      + "; ".join(_describe_check(c) for c in st.failed_checks)
                      + "): that step counts as neither held nor broken.")
    est = little["in_service"]
    if broke is None:
        out.kind = "held"
        for st in steps:
            ev.extend(error_evidence(st.summary, f" at {amount(st.load, unit)}"))
        said = next((b for b in (bunching_sentence(st.summary.stream_bunching)
                                 for st in steps) if b), None)
        if said:
            ev.append(said[0].upper() + said[1:] + ".")
        top = last_held(steps)
        for st in steps:
            if st.state == OVER and top is not None and steps.index(st) < steps.index(top):
                ev.append(f"At {amount(st.load, unit)} a threshold broke ("
                          + "; ".join(c.threshold for c in st.failed_checks)
                          + f"), yet {amount(top.load, unit)} held: near the limit the "
                          "steps are noisy (--repeat 3 tells how much).")
        ev.append(f"About {est:.1f} requests were being served at once at the last step.")
        _telemetry(out, "held", first or subject, subject, unit, None, server, telemetry)
        return out
    mon = broke.monitor
    failed_checks = broke.failed_checks
    for st in steps:
        if st is not broke and st.summary.failed:
            ev.extend(error_evidence(st.summary, f" at {amount(st.load, unit)}"))
    down = [c for c in broke.checks if c.outage]
    if down:
        # the server was not there: this step measured its absence, not its capacity
        out.kind = "outage"
        ev.append(f"At {amount(broke.load, unit)}, {down[0].reason}.")
        ev.append("A step with an outage in it is over: its numbers are of a server that was "
                  "down, so the ramp stops there.")
        out.advice.append("Find out why the server went away (its log: a crash, a restart, "
                          "out of memory), then run the ramp again.")
        return out
    if s1.failed:
        out.kind = "errors"
        ev.extend(error_evidence(s1, f" at {amount(broke.load, unit)}"))
        statuses = s1.error_statuses
        if "429" in statuses or "503" in statuses:
            ev.append("429/503 means a limit was hit: a full queue or a rate limit, not slowness.")
            out.advice.append("Raise the server's queue limit (e.g. OLLAMA_MAX_QUEUE) or rate "
                              "limit, or add capacity; or accept fewer users.")
        kinds = s1.errors
        if any(k.startswith("timeout") for k in kinds):
            out.advice.append("Timeouts: the server took longer than --timeout-first-token / "
                              "--timeout-idle allow, or stopped answering.")
        if itl_grew:
            assert itl0 is not None and itl1 is not None
            ev.append(f"Also, the gaps between tokens grew {itl1 / itl0:.1f}x (compute saturation).")
        elif ttft_grew:
            ev.append("Also, the first token got later while tokens stayed as far apart "
                      "(requests queuing for slots).")
        if mon.get("overloaded"):
            ev.append(generator_sentence(mon) + " That does not make requests fail, and does not "
                      "change these errors.")
        return out
    buffered = bunching_sentence(s1.stream_bunching)
    if buffered:
        # TTFT and ITL measured the proxy's buffer: neither queuing nor saturation can be told
        out.kind = "buffered"
        ev.append(buffered[0].upper() + buffered[1:] + ".")
        ev.append("So whether the first token got later from queuing, or the gaps grew from "
                  "saturation, cannot be told from this run: these latencies are not the "
                  "model's.")
        out.advice.append("Turn the proxy's buffering off (nginx: proxy_buffering off, or "
                          "have the server send X-Accel-Buffering: no), or point --url past "
                          "the proxy, then run the ramp again.")
        return out
    if broke.state == NO_DATA:
        out.kind = "not_enough_data"
        ev.append("Nothing failed, but the step had too few requests to measure: "
                  + "; ".join(_describe_check(c) for c in failed_checks) + ".")
        out.advice.append("Hold each step longer (--hold), think less (--think), or use a "
                          "statistic that needs fewer requests (p90 or the median).")
        return out
    if mon.get("overloaded"):
        if lag_explains(broke):
            out.kind = "load_generator"
            out.generator_cause = generator_cause(mon)
            ev.append(generator_sentence(mon) + " Its numbers at this step are not trustworthy; "
                      "this says nothing about the server.")
            if out.generator_cause == "llmbench":
                out.advice.append("Run fewer users per process, or shard the load over "
                                  "processes/machines.")
            else:
                out.advice.append("Run llmbench where nothing else competes for the CPU, "
                                  "then run the ramp again.")
            advice = out.advice
            _telemetry(out, "load_generator", first or subject, subject, unit, None, server,
                       telemetry)
            out.advice = advice
            return out
        ev.append(generator_sentence(mon) + " But the limit was broken by more than that lag "
                  "can add to a timestamp, so the result stands.")
    crowded = (itl_grew and ttft_grew and itl0 is not None and itl1 is not None
               and _crowded_out(first or subject, subject, unit, itl1 / itl0, server, telemetry))
    if crowded:
        # one request decodes at a time, so this load cannot have made the gaps grow: the
        # machine's other processes did; the queue for the slot is what this load did
        ev.append(crowded)
        itl_grew = False
    # the KV cache (issue 35): the first token got later because every call prefilled its
    # whole context again, the cache having evicted it; told from queuing by the cache's own
    # share falling (analysis.cachebound), and named before saturation: re-prefills share the
    # compute with decoding, so the gaps may grow too
    cache = (ramp_finding(steps, records, broke, server_samples, unit)
             if ttft_grew else None)
    if cache is not None:
        out.kind = "cache_bound"
        out.cache = cache.result()
        ev.append(cache.sentence)
        ev.extend(cache.evidence)
        if itl_grew and itl0 and itl1 is not None:
            ev.append(f"The gaps between tokens grew {itl1 / itl0:.1f}x too: the re-prefills share "
                      "the compute with decoding.")
        out.advice.extend(cache.advice)
        return out
    if itl_grew:
        assert itl0 is not None and itl1 is not None
        out.kind = "saturation"
        ev.append(f"The gaps between tokens grew {itl1 / itl0:.1f}x: the requests in progress "
                  "share the hardware (compute saturation), so each reply streams slower.")
        ev.append(f"About {est:.1f} requests were being served at once (Little's law on the hold "
                  "window).")
        if server:
            ev.append(_server_sentence(server))
            if server.get("kv_cache_usage_max") and server["kv_cache_usage_max"] >= 0.95:
                ev.append("The KV cache was full: the server preempts or queues requests.")
        out.advice.append("More users need more compute: a faster GPU, a smaller or more "
                          "quantized model, or more replicas behind a router.")
        _telemetry(out, "saturation", first or subject, subject, unit, itl1 / itl0, server,
                   telemetry)
        return out
    if ttft_grew:
        out.kind = "queuing"
        n = max(round(est), 1)
        if s1.total_embeddings is not None:
            # no tokens stream from an embeddings server: the wait is the whole latency
            ev.append("Each request took longer while the server made no more embeddings per "
                      "second: requests were queuing for too few slots.")
            ev.append(f"About {est:.1f} request(s) were served at once (Little's law), so the "
                      "server serves " + ("one at a time." if n == 1 else f"about {n} at a time."))
        else:
            ev.append(f"Tokens stayed {_fmt_ms(itl1)} apart while the first token got later: "
                      "requests were queuing for too few slots.")
            ev.append(f"Users spent {little['waiting_share'] * 100:.0f}% of their request time "
                      f"waiting for a first token; about {est:.1f} request(s) were served at once "
                      "(Little's law), so the server serves "
                      + ("one person at a time." if n == 1 else f"about {n} at a time."))
        if server:
            ev.append(_server_sentence(server))
            if server.get("slots"):
                n = int(server["slots"])
        out.slots_estimate = n
        out.advice.append("Serve more requests at once: raise " + ", ".join(SLOT_SETTINGS)
                          + (". Expect each request to take a little longer."
                             if s1.total_embeddings is not None
                             else ". Expect each reply to stream a little slower."))
        _telemetry(out, "queuing", first or subject, subject, unit, None, server, telemetry)
        return out
    out.kind = "other"
    if first is None:
        # the first step with data broke: no lighter load to tell queuing from saturation
        ev.append(f"The first step with enough data ({amount(broke.load, unit)}) already "
                  "broke " + "; ".join(c.threshold for c in failed_checks) + ", so there is "
                  "no lighter load to compare it with: whether requests queued or the hardware "
                  "saturated cannot be told from this ramp.")
        out.advice.append("Start the ramp lower (fewer users in the first step), or loosen "
                          "the thresholds if this load is light for the server.")
        if server:
            ev.append(_server_sentence(server))
        return out
    ev.append("Neither TTFT nor the gaps between tokens grew much; the step broke on: "
              + "; ".join(c.threshold for c in failed_checks) + ".")
    _telemetry(out, "other", first or subject, subject, unit, None, server, telemetry)
    return out


def _server_sentence(server: dict[str, Any]) -> str:
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
