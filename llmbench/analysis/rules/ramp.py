"""The rules of a ramp's verdict, in the order they are asked (``RULES``).

Failed requests and an outage outrank everything, the load generator's own state included:
they are real whatever the generator's lag. A proxy's buffering and too few requests come
next (nothing can be read from such a step), then llmbench itself or its busy machine, then
the server's own limits: its KV cache, its compute, its slots.
"""

from __future__ import annotations

from llmbench.analysis import telemetry as telemetry_mod
from llmbench.analysis.metrics import bunching_sentence
from llmbench.analysis.network import NETWORK_EXPLAINS, NetworkShare, network_share
from llmbench.load.monitor import LAG_P99_LIMIT_MS
from llmbench.analysis.rules.evidence import Evidence, Finding, Rule
from llmbench.analysis.rules.words import (SLOT_SETTINGS, _fmt_ms, describe_check,
                                           error_evidence, generator_cause, generator_sentence,
                                           lag_explains, server_sentence)
from llmbench.results.schema import NO_DATA, OVER, amount, last_held


def _with_machine(ev: Evidence, f: Finding, growth: float | None = None,
                  keep_advice: bool = False) -> Finding:
    """What the server's machine says (its CPU, its GPUs, energy, who shared the machine),
    when the steps carry telemetry; confirms or corrects the latency-based reading."""
    assert ev.subject is not None
    part = telemetry_mod.verdict_part(f.kind, ev.first or ev.subject, ev.subject, ev.unit,
                                      growth, (ev.server or {}).get("kv_cache_usage_max"),
                                      ev.telemetry)
    lines, advice, cause = list(part.evidence), part.advice, part.cause
    if cause == "not_cpu" and server_starved(ev):
        # "not CPU compute" reads the few cores the server got as the few it needed: it had
        # requests all the time and the other processes took the rest (the headline says so)
        info = ev.telemetry or {}
        first, subject = ev.first or ev.subject, ev.subject
        _, wrong = telemetry_mod.cpu_reading(
            first.telemetry, subject.telemetry, float(first.load), float(subject.load), ev.unit,
            growth, info.get("meta") or {}, info.get("identity") or {})
        t = subject.telemetry
        budget, _, _ = telemetry_mod.core_budget(info.get("meta") or {},
                                                 info.get("identity") or {})
        # server_starved read these, so they are there
        assert t is not None and t.server is not None and t.machine is not None \
            and t.server.cores is not None and t.machine.cpus and budget
        lines = [e for e in lines if e != wrong]
        lines.insert(0, f"The server's process got {t.server.cores:.1f} of the {budget:g} "
                     f"core{'s' if budget != 1 else ''} it can use at "
                     f"{amount(subject.load, ev.unit)}, with requests in hand all the time, "
                     f"while the machine's {t.machine.cpus} cores were "
                     f"{(t.machine.busy_cores or 0) / t.machine.cpus * 100:.0f}% busy: other "
                     "processes took the CPU, so the gaps grew for want of cores.")
        advice, cause = [STARVED_ADVICE], "machine_cpu"
    f.evidence.extend(lines)
    if advice is not None and not keep_advice:
        f.advice = list(advice)
    f.cause = cause or None
    return f


STARVED_ADVICE = ("The server did not get the cores it could use: stop what else runs on its "
                  "machine (or run it where nothing competes), then run the ramp again.")


def _cause(ev: Evidence) -> str:
    return "; ".join(c.threshold for c in (ev.broke.failed_checks if ev.broke else []))


def _gave_up(ev: Evidence) -> list[str]:
    """--abandon: the users who gave up lead; what made them wait follows."""
    assert ev.subject is not None
    s = ev.subject.summary
    if not s.cancelled:
        return []
    n, rate, waiting = s.cancelled, s.cancel_rate, s.cancelled_waiting
    return [f"At {amount(ev.subject.load, ev.unit)}, users gave up on {n} request"
            f"{'s' if n != 1 else ''}"
            + (f" ({rate * 100:.0f}% of its requests)" if rate is not None else "")
            + (f", {waiting} before the first token came" if waiting else "")
            + " (--abandon): they are not failures, but each is a user the server lost."]


def _compared(ev: Evidence) -> list[str]:
    """The lighter step against the one explained."""
    first, subject, unit = ev.first, ev.subject, ev.unit
    if first is None or ev.s0 is None or subject is None:
        return []            # nothing lighter to compare with: no "from X to X"
    rough = (f" ({amount(first.load, unit)} had too few requests to judge by: its figures "
             "are rough)") if first.state == NO_DATA else ""
    (t0, t1), (i0, i1), s0, s1 = ev.ttft_p95_ms, ev.itl_p50_ms, ev.s0, ev.s1
    if s1.total_embeddings is not None:
        # embeddings: one whole reply, no tokens streamed; latency and throughput are the story
        rates = " -> ".join("–" if r is None else f"{r:.0f}"
                            for r in (s0.embeddings_throughput, s1.embeddings_throughput))
        return [f"From {first.load:g} to {amount(subject.load, unit)}: latency p95 "
                f"{_fmt_ms(s0.e2el.p95)} -> {_fmt_ms(s1.e2el.p95)}, embeddings per second "
                f"{rates}{rough}."]
    gaps = ("–" if i0 is None else f"{i0:.1f} ms") + " -> " + \
        ("–" if i1 is None else f"{i1:.1f} ms")
    name = "TTFT p95"
    if first.sessions is not None and subject.sessions is not None:
        # agents: the figure the table shows (a session step's TTFT), not every call's
        name, t0, t1 = ("TTFT p95 (per session step)", first.sessions.step_ttft.p95,
                        subject.sessions.step_ttft.p95)
    return [f"From {first.load:g} to {amount(subject.load, unit)}: {name} {_fmt_ms(t0)} -> "
            f"{_fmt_ms(t1)}, time between tokens (median) {gaps}{rough}."]


def context(ev: Evidence) -> list[str]:
    """What every verdict says first: the users who gave up, the lighter step against the one
    explained, the steps with too few requests passed over, and failed requests at the other
    steps."""
    out, steps, broke, unit = _gave_up(ev) + _compared(ev), ev.steps, ev.broke, ev.unit
    for st in steps:
        # a step with too few requests, passed over: it is neither held nor broken
        if st is not broke and st is not ev.first and st.state == NO_DATA and (
                broke is None or steps.index(st) < steps.index(broke)):
            out.append(f"At {amount(st.load, unit)}, not enough data to decide ("
                       + "; ".join(describe_check(c) for c in st.failed_checks)
                       + "): that step counts as neither held nor broken.")
    if broke is not None:
        for st in steps:
            if st is not broke and st.summary.failed:
                out.extend(error_evidence(st.summary, f" at {amount(st.load, unit)}"))
    return out


def held(ev: Evidence) -> Finding | None:
    """No step broke after the last that held."""
    if ev.broke is not None:
        return None
    unit, steps, f = ev.unit, ev.steps, Finding("held")
    for st in steps:
        f.evidence.extend(error_evidence(st.summary, f" at {amount(st.load, unit)}"))
    said = next((b for b in (bunching_sentence(st.summary.stream_bunching)
                             for st in steps) if b), None)
    if said:
        f.evidence.append(said[0].upper() + said[1:] + ".")
    top = last_held(steps)
    for st in steps:
        if st.state == OVER and top is not None and steps.index(st) < steps.index(top):
            f.evidence.append(f"At {amount(st.load, unit)} a threshold broke ("
                              + "; ".join(c.threshold for c in st.failed_checks)
                              + f"), yet {amount(top.load, unit)} held: near the limit the "
                              "steps are noisy (--repeat 3 tells how much).")
    f.evidence.append(f"About {ev.little['in_service']:.1f} requests were being served at once "
                      "at the last step.")
    return _with_machine(ev, f)


def outage(ev: Evidence) -> Finding | None:
    """The server was not there: the step measured its absence, not its capacity."""
    down = [c for c in (ev.broke.checks if ev.broke else []) if c.outage]
    if not down:
        return None
    assert ev.broke is not None
    return Finding("outage", [
        f"At {amount(ev.broke.load, ev.unit)}, {down[0].reason}.",
        "A step with an outage in it is over: its numbers are of a server that was down, so "
        "the ramp stops there."], [
        "Find out why the server went away (its log: a crash, a restart, out of memory), then "
        "run the ramp again."])


def errors(ev: Evidence) -> Finding | None:
    """Requests failed at the step: a limit was hit, or the server failed."""
    s1 = ev.s1
    if ev.broke is None or not s1.failed:
        return None
    f = Finding("errors", error_evidence(s1, f" at {amount(ev.broke.load, ev.unit)}"))
    if "429" in s1.error_statuses or "503" in s1.error_statuses:
        f.evidence.append("429/503 means a limit was hit: a full queue or a rate limit, not "
                          "slowness.")
        f.advice.append("Raise the server's queue limit (e.g. OLLAMA_MAX_QUEUE) or rate limit, "
                        "or add capacity; or accept fewer users.")
    if any(k.startswith("timeout") for k in s1.errors):
        f.advice.append("Timeouts: the server took longer than --timeout-first-token / "
                        "--timeout-idle allow, or stopped answering.")
    if ev.itl_grew:
        f.evidence.append(f"Also, the gaps between tokens grew {ev.itl_growth:.1f}x (compute "
                          "saturation).")
    elif ev.ttft_grew:
        f.evidence.append("Also, the first token got later while tokens stayed as far apart "
                          "(requests queuing for slots).")
    if ev.broke.monitor.get("overloaded"):
        f.evidence.append(generator_sentence(ev.broke.monitor) + " That does not make requests "
                          "fail, and does not change these errors.")
    return f


def buffered(ev: Evidence) -> Finding | None:
    """TTFT and ITL measured a proxy's buffer: neither queuing nor saturation can be told."""
    said = bunching_sentence(ev.s1.stream_bunching) if ev.broke is not None else None
    if not said:
        return None
    return Finding("buffered", [
        said[0].upper() + said[1:] + ".",
        "So whether the first token got later from queuing, or the gaps grew from saturation, "
        "cannot be told from this run: these latencies are not the model's."], [
        "Turn the proxy's buffering off (nginx: proxy_buffering off, or have the server send "
        "X-Accel-Buffering: no), or point --url past the proxy, then run the ramp again."])


def not_enough_data(ev: Evidence) -> Finding | None:
    if ev.broke is None or ev.broke.state != NO_DATA:
        return None
    return Finding("not_enough_data", [
        "Nothing failed, but the step had too few requests to measure: "
        + "; ".join(describe_check(c) for c in ev.broke.failed_checks) + "."], [
        "Hold each step longer (--hold), think less (--think), or use a statistic that needs "
        "fewer requests (p90 or the median)."])


def _generator(ev: Evidence, who: str) -> Finding | None:
    """llmbench's own lag explains the failed step, and ``who`` had the CPU."""
    mon = ev.broke.monitor if ev.broke is not None else {}
    if not mon.get("overloaded") or generator_cause(mon) != who:
        return None
    assert ev.broke is not None
    if not lag_explains(ev.broke):
        return None
    f = Finding("load_generator", [generator_sentence(mon) + " Its numbers at this step are "
                                   "not trustworthy; this says nothing about the server."],
                generator_cause=who)
    f.advice.append("Run fewer users per process, or shard the load over processes/machines."
                    if who == "llmbench" else
                    "Run llmbench where nothing else competes for the CPU, then run the ramp "
                    "again.")
    return _with_machine(ev, f, keep_advice=True)


# A loop this late, at a few % of a core, was kept off the CPU for whole tens of milliseconds at
# a time: a server on the same machine got no more. (Just over the lag limit is a busy
# machine's ordinary jitter, and says little about the server's share.)
STARVED_LAG_MS = 5 * LAG_P99_LIMIT_MS


# a server's process that got less than this share of the cores it can keep busy, on a machine
# with none to spare, while it had a request in hand all the time: starved by other processes
STARVED_CORE_SHARE = 0.5


def server_starved(ev: Evidence) -> bool:
    """The server's process starved (STARVED_CORE_SHARE) at the step that broke, by the
    telemetry of a server on this machine. The event loop's lag can miss this: llmbench needs a
    few % of a core, the server a whole one."""
    t = ev.broke.telemetry if ev.broke is not None else None
    if t is None or t.server is None or t.server.cores is None or t.machine is None \
            or not t.machine.cpus or t.machine.busy_cores is None:
        return False
    info = ev.telemetry or {}
    ident = info.get("identity") or {}
    budget, _, threads = telemetry_mod.core_budget(info.get("meta") or {}, ident)
    settings = (ident.get("settings") or {}) if isinstance(ident, dict) else {}
    gpu_layers = str(settings.get("--n-gpu-layers") or settings.get("--gpu-layers") or "0")
    if not budget or threads is None or t.gpu is not None or gpu_layers not in ("0", ""):
        # only a server known to compute on its CPU threads (llama.cpp's -t, no GPU) needs
        # its cores: a mock or a GPU server barely uses the CPU, busy machine or not
        return False
    gen = t.llmbench.cores if t.llmbench is not None and t.llmbench.cores else 0.0
    others = t.machine.busy_cores - t.server.cores - gen
    return (t.machine.busy_cores >= telemetry_mod.MACHINE_BUSY_SHARE * t.machine.cpus
            and t.server.cores < STARVED_CORE_SHARE * budget
            and others >= budget - t.server.cores
            # requests at the server all the time (waiting for a first token or streaming)
            and ev.little.get("in_service", 0.0) + ev.little.get("waiting", 0.0) >= 0.9)


def starved(ev: Evidence) -> bool:
    """The step that broke lagged on a machine busy with other processes, by more than a
    timestamp can carry, or the server's own process was kept off the cores it could use:
    the limit stands, but as the server's on that busy machine (it shared the cores the
    others took), not its capacity."""
    mon = ev.broke.monitor if ev.broke is not None else {}
    lagged = (bool(mon.get("overloaded")) and ev.broke is not None
              and not lag_explains(ev.broke) and generator_cause(mon) == "machine"
              and (mon.get("lag_p99_ms") or 0.0) >= STARVED_LAG_MS)
    return lagged or (ev.broke is not None and server_starved(ev))


def _lag_note(ev: Evidence) -> list[str]:
    """The generator lagged, but the limit was broken by more than its lag can explain."""
    mon = ev.broke.monitor if ev.broke is not None else {}
    if not mon.get("overloaded") or ev.broke is None or lag_explains(ev.broke):
        return []
    tail = (" But the limit was broken by more than that lag can add to a timestamp, so the "
            + ("limit stands, as the server's on this busy machine (the headline says so)."
               if starved(ev) else "result stands."))
    return [generator_sentence(mon) + tail]


def load_generator(ev: Evidence) -> Finding | None:
    """llmbench itself was busy (its own CPU high): its timestamps were late."""
    return _generator(ev, "llmbench")


def machine(ev: Evidence) -> Finding | None:
    """The machine was busy with other processes: llmbench was ready to run and was not."""
    return _generator(ev, "machine")


def _network_share(ev: Evidence) -> NetworkShare | None:
    return (network_share(ev.s1.ttft.median, ev.c.network)
            if ev.subject is not None and ev.c.network is not None else None)


def network(ev: Evidence) -> Finding | None:
    """The network's round trip is most of TTFT and neither TTFT nor the gaps grew with the
    load: the step broke on the distance to the server, not on its queue or compute (a constant
    round trip makes no growth between steps, so queuing and saturation are judged apart)."""
    found = _network_share(ev)
    if ev.broke is None or found is None or found.share < NETWORK_EXPLAINS \
            or ev.ttft_grew or ev.itl_grew:
        return None
    return Finding("network", [], [
        "Measure from closer to the server (the same region or network), or set the TTFT "
        "limit above the round trip: no server setting makes the network faster."])


def _network_note(ev: Evidence) -> list[str]:
    """The network's share of TTFT, said whenever it is large (analysis/network.py)."""
    found = _network_share(ev)
    return [found.sentence] if found is not None else []


def _known_settings(ev: Evidence, advice: list[str]) -> list[str]:
    """Advice less what the server's command line shows is on already (llama.cpp's
    --cache-ram, when its process was read on this machine)."""
    ident = (ev.telemetry or {}).get("identity") or {}
    ram = (ident.get("settings") or {}).get("--cache-ram") if isinstance(ident, dict) else None
    if ram in (None, "0", "-1"):
        return advice
    return [a.replace("Keep evicted prompts in host memory (--cache-ram MiB, on by default in "
                      "recent builds; 0 turns it off), or halve", f"--cache-ram is on already "
                      f"({ram} MiB), so evicted prompts are kept in host memory; halve")
            for a in advice]


def cache_bound(ev: Evidence) -> Finding | None:
    """Every call prefilled its whole context again, the cache having evicted it; told from
    queuing by the cache's own share falling (analysis.cachebound), and named before
    saturation: re-prefills share the compute with decoding, so the gaps may grow too."""
    if ev.cache is None:
        return None
    f = Finding("cache_bound", [ev.cache.sentence, *ev.cache.evidence],
                _known_settings(ev, list(ev.cache.advice)))
    if ev.saturated and ev.itl_growth:
        f.evidence.append(f"The gaps between tokens grew {ev.itl_growth:.1f}x too: the "
                          "re-prefills share the compute with decoding.")
    r = ev.reprefill
    if r is not None and r.ttft_share is not None and r.ms_per_token is not None:
        # what the re-prefill cost the first token, said once here (the note stays quiet)
        f.evidence.append(f"Re-prefilling whole histories was about {r.ttft_share * 100:.0f}% "
                          f"of the later turns' TTFT at {amount(r.load, ev.unit)} "
                          f"({r.ms_per_token:.2f} ms a token, the server's timings).")
    return f


def _reprefill_note(ev: Evidence) -> list[str]:
    """Whole histories prefilled again (one KV state thrashed between users) where the cache
    is not the verdict (analysis.cachebound.reprefill says when it can tell)."""
    if ev.reprefill is None or ev.cache is not None:
        return []
    return [ev.reprefill.sentence(ev.unit)]


def _slot_wait_share(ev: Evidence) -> float | None:
    """With requests waiting at the server: the share of TTFT p95 at the step that the
    lighter step did not have (the wait for a full slot, roughly); None without a queue."""
    t0, t1 = ev.ttft_p95_ms
    if not ev.ttft_grew or not ev.server or not (ev.server.get("waiting_max") or 0) >= 1 \
            or not t0 or not t1:
        return None
    return max(0.0, 1.0 - t0 / t1)


# the slot wait's share of TTFT p95 from which a saturated step names it as a cause too
SLOT_WAIT_NAMED = 0.5


def saturation(ev: Evidence) -> Finding | None:
    """The gaps between tokens grew: the requests in progress share the hardware."""
    if not ev.saturated or not ev.itl_growth:
        return None
    f = Finding("saturation", [
        f"The gaps between tokens grew {ev.itl_growth:.1f}x: the requests in progress share "
        "the hardware (compute saturation), so each reply streams slower.",
        _at_once(ev, ev.little["in_service"], None)])
    wait = _slot_wait_share(ev)
    if wait is not None and wait >= SLOT_WAIT_NAMED:
        # both: the slots were full too, and that wait is most of the first token's time
        f.slot_wait_share = round(wait, 3)
        f.evidence.append(f"Requests also waited for a full slot: about {wait * 100:.0f}% of "
                          "TTFT p95 here is time the lighter step did not spend (the slot "
                          f"wait), the rest is compute shared {ev.itl_growth:.1f}x.")
    if ev.server:
        f.evidence.append(server_sentence(ev.server))
        if (ev.server.get("kv_cache_usage_max") or 0) >= 0.95:
            f.evidence.append("The KV cache was full: the server preempts or queues requests.")
    f.advice.append("More users need more compute: a faster GPU, a smaller or more quantized "
                    "model, or more replicas behind a router.")
    f = _with_machine(ev, f, ev.itl_growth)
    if f.slot_wait_share is not None:
        # the wait for a slot is a cause too: more slots shorten it, at the measured price
        # (after the machine's reading, which replaces the compute advice, not this)
        f.advice.append(_slots_advice(ev))
    return f


# the server's own setting for how many requests it serves at once, by the kind it reported
SLOT_SETTING = {"ollama": SLOT_SETTINGS[0], "llamacpp": SLOT_SETTINGS[1],
                "vllm": SLOT_SETTINGS[2], "sglang": SLOT_SETTINGS[3], "tgi": SLOT_SETTINGS[4]}


def _slots_advice(ev: Evidence) -> str:
    """Raise the slots, named for this server, with what the run measured of the price."""
    kind = ev.server_kind
    if kind in (None, "mock"):
        # not known, or the mock standing in for a real server: every server's setting
        where = "raise " + ", ".join(SLOT_SETTINGS)
    elif kind in SLOT_SETTING:
        where = "raise " + SLOT_SETTING[kind]
    else:
        # a server we do not know (llama-cpp-python's own, ...): no setting it may not have
        return ("Serve more requests at once, if this server can: its setting for parallel "
                "requests (this server's kind is not known to llmbench).")
    if ev.s1.total_embeddings is not None:
        return f"Serve more requests at once: {where}. Expect each request to take a little longer."
    (i0, i1), first = ev.itl_p50_ms, ev.first
    price = ". More at once share the compute: expect each reply to stream slower"
    if i0 and i1 is not None and first is not None and ev.subject is not None:
        # what this run measured of that price, not a guess
        grew = i1 >= 1.2 * i0
        price = (f". Here the median gap between tokens was {i0:.1f} ms at "
                 f"{amount(first.load, ev.unit)} and {i1:.1f} ms at "
                 f"{amount(ev.subject.load, ev.unit)}: " + (
                     "replies already streamed slower as more shared the compute, and more "
                     "slots share it further" if grew else
                     "the compute was not yet shared thin, but more slots share it, so expect "
                     "replies to stream slower"))
        r0, r1 = (ev.s0.output_throughput if ev.s0 is not None else None,
                  ev.s1.output_throughput)
        if r0 and r1 is not None and r1 <= 1.05 * r0:
            # more at once made no more tokens: more slots would only split the same rate
            price += (f"; and all users together got {r0:.1f} tokens/s at "
                      f"{amount(first.load, ev.unit)}, {r1:.1f} at "
                      f"{amount(ev.subject.load, ev.unit)}: more at once made no more tokens, "
                      "so more slots shorten the wait only by slowing each reply")
    return f"Serve more requests at once: {where}{price}."


def _at_once(ev: Evidence, est: float, n: int | None) -> str:
    """Little's law on the hold window; of one traffic class's requests (``ev.scope``) it is
    that class's share, not how many the server serves at once."""
    if ev.scope is not None:
        return (f"about {est:.1f} of {ev.scope}'s requests were in service at once (Little's "
                f"law on {ev.scope}'s requests alone: the server served the other classes' "
                "too).")
    if n is None:
        return (f"About {est:.1f} requests were being served at once (Little's law on the hold "
                "window).")
    return (f"about {est:.1f} request(s) were served at once (Little's law), so the server "
            "serves " + ("one person at a time." if n == 1 else f"about {n} at a time."))


def queuing(ev: Evidence) -> Finding | None:
    """The first token got later while tokens stayed as far apart: requests queued for slots."""
    if not ev.ttft_grew:
        return None
    est, f = ev.little["in_service"], Finding("queuing")
    n = max(round(est), 1)
    if ev.s1.total_embeddings is not None:
        # no tokens stream from an embeddings server: the wait is the whole latency
        f.evidence += [
            "Each request took longer while the server made no more embeddings per second: "
            "requests were queuing for too few slots.",
            f"About {est:.1f} request(s) were served at once (Little's law), so the server "
            "serves " + ("one at a time." if n == 1 else f"about {n} at a time.")]
    else:
        f.evidence += [
            f"Tokens stayed {_fmt_ms(ev.itl_p50_ms[1])} apart while the first token got later: "
            "requests were queuing for too few slots.",
            f"Users spent {ev.little['waiting_share'] * 100:.0f}% of their request time waiting "
            f"for a first token; " + _at_once(ev, est, n)]
    if ev.server:
        f.evidence.append(server_sentence(ev.server))
        n = int(ev.server["slots"]) if ev.server.get("slots") else n
    f.slots_estimate = n
    f.advice.append(_slots_advice(ev))
    f = _with_machine(ev, f)
    if server_starved(ev):
        # more slots share the same few cores: first the cores the server did not get
        f.advice.insert(0, STARVED_ADVICE)
    return f


def other(ev: Evidence) -> Finding:
    """Neither TTFT nor the gaps grew much, or there was nothing lighter to compare with."""
    assert ev.broke is not None
    if ev.first is None:
        f = Finding("other", [
            f"The first step with enough data ({amount(ev.broke.load, ev.unit)}) already broke "
            + _cause(ev) + ", so there is no lighter load to compare it with: whether requests "
            "queued or the hardware saturated cannot be told from this ramp."], [
            "Start the ramp lower (fewer users in the first step), or loosen the thresholds if "
            "this load is light for the server."])
        if ev.server:
            f.evidence.append(server_sentence(ev.server))
        return f
    return _with_machine(ev, Finding("other", [
        "Neither TTFT nor the gaps between tokens grew much; the step broke on: "
        + _cause(ev) + "."]))


RULES: tuple[Rule, ...] = (
    Rule("held", held),
    Rule("outage", outage),
    Rule("errors", errors),
    Rule("buffered", buffered),
    Rule("not_enough_data", not_enough_data),
    Rule("load_generator", load_generator, _lag_note),
    Rule("machine", machine, lambda ev: [ev.crowded] if ev.crowded else []),
    Rule("network", network, _network_note),
    Rule("cache_bound", cache_bound, _reprefill_note),
    Rule("saturation", saturation),
    Rule("queuing", queuing),
    Rule("other", other),
)
