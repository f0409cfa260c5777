"""Console output: vLLM's summary layout, llmbench's extras, the ramp table, the live line."""

from __future__ import annotations

from typing import Any, Sequence

from llmbench.results.schema import Check, Step, Summary, Verdict, pct_word

_HEADERS = {"ttft": ("Time to First Token", "TTFT"),
            "tpot": ("Time per Output Token (excl. 1st token)", "TPOT"),
            "itl": ("Inter-token Latency", "ITL"),
            "e2el": ("End-to-end Latency", "E2EL")}


MISSING = "–"      # a statistic with no data: never printed as 0


def _line(label: str, value: Any) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "{:<40} {:<10}".format(label, MISSING)
    if isinstance(value, float) and value == float("inf"):
        return "{:<40} {:<10}".format(label, "∞")
    if isinstance(value, float):
        return "{:<40} {:<10.2f}".format(label, value)
    return "{:<40} {:<10}".format(label, value)


def _f(v: Any) -> float | None:
    """A number from a summary (None, "inf" from run.json, or a float) as float or None."""
    return None if v is None else float(v)


def vllm_summary(s: Summary, percentile_metrics: Sequence[str],
                 metric_percentiles: Sequence[float], max_concurrency: int | None = None,
                 request_rate: float | None = None) -> str:
    """The block ``vllm bench serve`` prints, same labels and layout, so numbers line up."""
    out = ["{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="=")]
    out.append(_line("Successful requests:", s.completed))
    out.append(_line("Failed requests:", s.failed))
    if max_concurrency is not None:
        out.append(_line("Maximum request concurrency:", max_concurrency))
    if request_rate is not None:
        out.append(_line("Request rate configured (RPS):", float(request_rate)))
    out.append(_line("Benchmark duration (s):", _f(s.duration_s)))
    out.append(_line("Total input tokens:", s.total_input_tokens))
    out.append(_line("Total generated tokens:", s.total_output_tokens))
    out.append(_line("Request throughput (req/s):", _f(s.request_throughput)))
    if s.request_goodput is not None:
        out.append(_line("Request goodput (req/s):", float(s.request_goodput)))
    out.append(_line("Output token throughput (tok/s):", _f(s.output_throughput)))
    out.append(_line("Peak output token throughput (tok/s):", _f(s.max_output_tokens_per_s)))
    out.append(_line("Peak concurrent requests:", _f(s.max_concurrent_requests)))
    if s.peak_in_flight_requests is not None:
        # vLLM's line above counts every request active at any moment of a 1-second bucket
        # (8 at --concurrency 4); this is how many were in flight at the same instant
        out.append(_line("Peak requests in flight at once:", s.peak_in_flight_requests))
    out.append(_line("Total token throughput (tok/s):", _f(s.total_token_throughput)))
    if s.total_embeddings is not None:
        # embeddings: no first token, no token gaps; the request's latency is the figure
        out.append(_line("Total embeddings:", s.total_embeddings))
        out.append(_line("Embeddings throughput (emb/s):", _f(s.embeddings_throughput)))
        out.append(_line("Input token throughput (tok/s):", _f(s.input_throughput)))
        percentile_metrics = ("e2el",)
    for m in percentile_metrics:
        if m not in _HEADERS:
            continue
        header, short = _HEADERS[m]
        metric = s.metric(m)
        out.append("{s:{c}^{n}}".format(s=header, n=50, c="-"))
        out.append(_line(f"Mean {short} (ms):", _f(metric.mean)))
        out.append(_line(f"Median {short} (ms):", _f(metric.median)))
        for p in metric_percentiles:
            out.append(_line(f"P{pct_word(p)} {short} (ms):", _f(metric.percentiles.get(p))))
    out.append("=" * 50)
    return "\n".join(out)


def extras(s: Summary, monitor: dict[str, Any] | None = None) -> str:
    """llmbench's own numbers, under vLLM's block."""
    out = ["{s:{c}^{n}}".format(s=" llmbench extras ", n=50, c="-")]
    # failure-aware: a failed request counts as never answered (+inf), so these show what share
    # of *all* users got an answer in time; vLLM's figures above count successes only
    if s.completed_share is not None:
        out.append(_line("Completed (% of requests):", 100.0 * s.completed_share))
    tokens = s.total_embeddings is None      # an embeddings reply has no tokens to time
    if tokens:
        out.append(_line("TTFT p95 incl. failures (ms):", _f(s.ttft.all_percentiles.get(95.0))))
    out.append(_line("E2EL p95 incl. failures (ms):", _f(s.e2el.all_percentiles.get(95.0))))
    for w in s.within:
        if w.share is not None:
            out.append(_line(f"{w.metric.upper()} within {w.limit} (% of requests):",
                             100.0 * w.share))
    out.append(_line("Client queue p99 (ms):", _f(s.client_queue.p99)))
    out.append(_line("E2EL from schedule p99 (ms):", _f(s.e2el_from_schedule.p99)))
    if tokens:
        out.append(_line("ITL per token median (ms):", _f(s.itl_per_token.median)))
        out.append(_line("Max gap p99 (ms):", _f(s.max_gap.p99)))
        out.append(_line(f"Stalls (gaps > {s.stall_threshold_s:g} s):", s.stalls))
        out.append(_line("Output token counts from:", s.output_tokens_source))
    if s.requests_with_reasoning:
        out.extend(reasoning_lines(s))
    out.extend(agent_lines(s))
    if s.server_slot_wait.mean is not None:
        out.append(_line("Server slot wait p95 (ms, Ollama):", _f(s.server_slot_wait.p95)))
    if s.server_queue.mean is not None:
        out.append(_line("Server queue p95 (ms):", _f(s.server_queue.p95)))
    if s.served_by:
        spread = ", ".join(f"{k}: {v}" for k, v in sorted(s.served_by.items()))
        out.append(_line("Served by:", spread))
    if s.by_turn:
        for name in ("first", "later"):
            out.append(_line(f"TTFT p95, {name} turns (ms):", _f(s.by_turn[name].ttft.p95)))
    if s.cancelled:
        out.append(_line("Cancelled by users (not failures):",
                         f"{s.cancelled} ({s.cancelled_waiting or 0} before a first token)"))
    if s.errors:
        out.append(_line("Errors:", ", ".join(f"{k}: {v}" for k, v in s.errors.items())))
        for e in s.error_samples[:3]:
            status = f" {e.status}" if e.status else ""
            out.append(f"  {e.kind}{status} x{e.count}: {(e.error or '')[:100]}")
    if s.non_streaming and tokens:
        out.append("Not streaming: TTFT equals E2EL here (the reply arrives at once).")
    from llmbench.analysis.metrics import bunching_sentence
    buffered = bunching_sentence(s.stream_bunching)
    if buffered:
        out.append(f"WARNING: {buffered}.")
    if monitor:
        out.append(_line("Load generator lag p99 / CPU:",
                         f"{monitor['lag_p99_ms']:.1f} ms / {monitor['cpu_pct']:.0f}%"))
        if s.send_delay.p99 is not None:
            out.append(_line("Client send delay p50 / p99:",
                             f"{s.send_delay.p50:.2f} ms / {s.send_delay.p99:.2f} ms"))
        from llmbench.analysis.verdict import freeze_sentence
        frozen = freeze_sentence(monitor)
        if frozen:
            out.append(f"WARNING: {frozen}")
        elif monitor.get("send_delay_over") or monitor.get("overloaded"):
            # decided as the ramp decides it: llmbench busy, or its machine busy with others
            from llmbench.analysis.verdict import busy_warning
            out.append(f"WARNING: {busy_warning(monitor)}")
    out.append("=" * 50)
    return "\n".join(out)


def reasoning_lines(s: Summary) -> list[str]:
    """A reasoning model's figures (only printed when a reply reasoned): TTFT above counts the
    first reasoning token, as vLLM does; TTFO is the answer's first token."""

    def tok(v: Any) -> str:
        return MISSING if v is None else f"{float(v):.1f}"
    return [
        _line("Replies that reasoned:", f"{s.requests_with_reasoning} of {s.completed}"),
        _line("Median TTFO, first answer token (ms):", _f(s.ttfo.median)),
        _line("P95 TTFO, first answer token (ms):", _f(s.ttfo.p95)),
        _line("P95 reasoning time (ms):", _f(s.reasoning_time.p95)),
        _line("Reasoning tokens mean / p95:",
              f"{tok(s.reasoning_tokens.mean)} / {tok(s.reasoning_tokens.p95)}"),
        _line("Answer ITL median / p95 (ms):",
              f"{fmt_ms(s.output_itl.median)} / {fmt_ms(s.output_itl.p95)}"),
    ]


def agent_lines(s: Summary) -> list[str]:
    """Tools and structured output, only when the run had them."""
    out = []
    if s.tool_call_share is not None:
        out.append(_line("Replies that called a tool:",
                         f"{s.requests_with_tool_calls} of {s.completed} ({100 * s.tool_call_share:.0f}%)"))
        out.append(_line("Time to first tool token p50 / p95:",
                         f"{fmt_ms(s.ttft_tool.median)} / {fmt_ms(s.ttft_tool.p95)}"))
    if s.valid_output_share is not None:
        out.append(_line("Structured replies valid:",
                         f"{100 * s.valid_output_share:.1f}% of {s.structured_checked}"))
    return out


def session_lines(sessions: Any) -> list[str]:
    """Agent sessions (results.sessions.Sessions), only when the run had them."""
    if sessions is None:
        return []
    x = sessions
    done = f"{x.completed} of {x.started} completed"
    if x.failed or x.cut_short:
        done += f" ({x.failed} failed, {x.cut_short} cut short)"
    rate = f"{x.sessions_per_min:.2f}" if x.sessions_per_min is not None else MISSING
    out = [_line("Agent sessions:", f"{done}, {rate} per minute")]
    d = x.duration
    if d.n:
        share = ""
        if x.model.mean is not None and d.mean:
            share = f" (model {100 * x.model.mean / d.mean:.0f}%, tools {100 * (x.tool.mean or 0) / d.mean:.0f}%)"
        out.append(_line("Session time p50 / p95:", f"{fmt_ms(d.median)} / {fmt_ms(d.p95)}{share}"))
        out.append(_line("Calls a session mean / max:",
                         f"{x.steps.mean:.1f} / {x.steps.max:g}" if x.steps.mean is not None
                         else MISSING))
    out.append(_line("Step TTFT p50 / p95:", f"{fmt_ms(x.step_ttft.median)} / "
                                             f"{fmt_ms(x.step_ttft.p95)}"))
    if x.cached_share is not None:
        out.append(_line("Prompt tokens from the cache:",
                         f"{100 * x.cached_share:.0f}%, ~{x.prefilled_per_call or 0:,.0f} "
                         "prefilled a call"))
    if x.call_steps:
        out.append(_line("Tool-call steps answered in text:",
                         f"{x.text_replies} of {x.call_steps} ({100 * (x.text_reply_share or 0):.0f}%)"))
    if x.slowest is not None:
        # "its call 5 took 690ms", not "slowest call 5 690ms" (read as 5,690 ms)
        step = f", its call {x.slowest.step_id} took {fmt_ms(x.slowest.step_e2el_ms)}" \
            if x.slowest.step_id is not None else ""
        out.append(_line("Slowest session:", f"{x.slowest.session_id} "
                                             f"{fmt_ms(x.slowest.duration_ms)}{step}"))
    return out


def join_sentence(join: str, agents: bool = False) -> str:
    """How a ramp's new users joined (``--join``), said before its table and in report.html."""
    if join == "spread":
        if agents:
            return ("Agents join mid-session (--join spread): each new agent starts at a random "
                    "call of its session with the earlier calls and tool results in its prompt "
                    "(their replies synthetic, of the asked length; the sub-agents they started "
                    "are not replayed), at a random time in the ramp-in. The session it joins is "
                    "counted apart (joined), not as a whole one.")
        return ("Users join mid-conversation (--join spread): each new user starts at a random "
                "turn with the earlier turns in its prompt (their replies synthetic, of the "
                "asked length, since the server never wrote them), at a random time in the "
                "ramp-in.")
    return (f"{'Agents' if agents else 'Users'} join at the first "
            f"{'call of a new session' if agents else 'turn of a new conversation'}, evenly "
            "over each ramp-in (--join start).")


def fmt_ms(v: float | str | None) -> str:
    """A latency for a table: "–" when there is no data, "∞" when failures censor it."""
    if v is None:
        return MISSING
    v = float(v)                  # run.json stores +inf as "inf"
    if v != v:
        return MISSING
    if v == float("inf"):
        return "∞"
    if v >= 1000:
        return f"{v / 1000:.2f}s"
    if v >= 100:
        return f"{v:.0f}ms"
    return f"{v:.1f}ms"


# The ramp table fits an 80-column terminal with the longest usual state ("not enough data"):
# the columns a reader needs to see a limit coming (TTFT p50/p95, the ITL p95 threshold, E2EL,
# throughput, errors, and Reqs, which says why a step had too little data). TPOT, ITL p50 and
# requests/s are in the HTML report, the CSV and run.json.
RAMP_COLUMNS = ("{unit:>5} {reqs:>5} {ttft50:>8} {ttft95:>8} {itl95:>7} {e2el:>8} {otps:>8} "
                "{err:>6} {state}")
RAMP_WIDTH = 80


def ramp_header(unit: str = "Users", output: str = "tokens") -> str:
    """The ramp table's header; ``output="embeddings"``: its throughput column is embeddings/s
    (an embeddings reply has no tokens; its TTFT is its latency)."""
    return RAMP_COLUMNS.format(unit=unit, reqs="Reqs", ttft50="TTFT p50", ttft95="TTFT p95",
                               itl95="ITL p95", e2el="E2EL p95",
                               otps="Emb/s" if output == "embeddings" else "Tok/s",
                               err="Errors", state="").rstrip()


# what a step's row is marked with when its figures need a word (explained once, under the
# table, by ``marks_lines``): one character, so the row keeps to 80 columns
BUSY, UNTRUSTED, DRIFTING = "*", "!", "~"


def state_text(step: Step) -> str:
    """A step's state as the ramp table says it: held, over or not enough data, marked ``*``
    when the machine or llmbench was busy in it, ``!`` when that busy generator could explain
    why it broke (not trustworthy), ``~`` when it was still drifting."""
    from llmbench.analysis.verdict import lag_explains
    state: str = step.state
    if step.monitor.get("overloaded"):
        state += UNTRUSTED if not step.held and lag_explains(step) else BUSY
    if step.drifting:
        state += DRIFTING
    if step.summary.cancelled:
        state += f" ({step.summary.cancelled} cancelled)"   # --abandon: users who gave up, not errors
    return state


def marks_lines(steps: Sequence[Step], v: Verdict | None = None, unit: str = "users") -> list[str]:
    """What the table's marks mean, said once under it: the busy machine or llmbench in the
    words of the last busy step (unless the verdict says it already)."""
    from llmbench.analysis.rules.words import untrusted_words
    from llmbench.analysis.verdict import generator_cause, generator_sentence, lag_explains
    out = []

    def at(xs: Sequence[Step]) -> str:
        loads = [f"{x.load:g}" for x in xs]
        both = ", ".join(loads[:-1]) + " and " + loads[-1] if len(loads) > 1 else loads[0]
        # "at 1 user", as the verdict says it (not "at 1 users")
        return f"at {both} {'user' if both == '1' and unit == 'users' else unit}"
    busy = [s for s in steps if s.monitor.get("overloaded")]
    if busy:
        last = busy[-1]
        who = ("llmbench itself was busy" if generator_cause(last.monitor) == "llmbench"
               else "the machine was busy with other processes")
        sentence = generator_sentence(last.monitor)
        said = " ".join([*(v.evidence if v is not None else []), v.text if v is not None else ""])
        out.append(f"{BUSY} {who} {at(busy)}"
                   + (" (the verdict above says what it changes)." if sentence[:60] in said
                      else f": {sentence}"))
        untrusted = [s for s in busy if not s.held and lag_explains(s)]
        for cause in ("llmbench", "machine"):
            # the cause the verdict's rules name (generator_cause), in their words
            these = [s for s in untrusted if generator_cause(s.monitor) == cause]
            if these:
                out.append(f"{UNTRUSTED} not trustworthy {at(these)}: "
                           f"{untrusted_words(these[-1].monitor)}.")
    drifting = [s for s in steps if s.drifting]
    if drifting:
        out.append(f"{DRIFTING} still drifting {at(drifting)}: latency was still climbing at "
                   "the end of the hold, so the step had not settled.")
    return out


def _row(load: str, s: Summary, state: str) -> str:
    """A row of the ramp table: a step's, a traffic class's or a class alone's."""
    rate = s.embeddings_throughput if s.total_embeddings is not None else s.output_throughput
    return RAMP_COLUMNS.format(
        unit=load, reqs=s.requests, ttft50=fmt_ms(s.ttft.median), ttft95=fmt_ms(s.ttft.p95),
        itl95=fmt_ms(s.itl.p95), e2el=fmt_ms(s.e2el.p95),
        otps=f"{rate or 0:.1f}" if (rate or 0) < 100_000 else f"{rate:.0f}",
        err=s.failed, state=state)


def own_load(x: Any) -> str:
    """A traffic class's own load: users, or requests a second."""
    return f"{x.load:g}" if x.unit == "users" else f"{x.load:.3g}/s"


def step_cells(step: Step) -> list[Any]:
    """A step's figures as the markdown and HTML tables show them, its load to its errors (the
    state that ends each row is the table's own)."""
    s = step.summary
    return [f"{step.load:g}", s.requests, fmt_ms(s.ttft.median), fmt_ms(s.ttft.p95),
            fmt_ms(s.itl.median), fmt_ms(s.itl.p95), fmt_ms(s.tpot.p95), fmt_ms(s.e2el.p95),
            f"{s.output_throughput:.1f}", f"{s.request_throughput:.2f}", s.failed]


def class_cells(c: Any) -> list[Any]:
    """A traffic class's figures at a step as the markdown and HTML tables show them, its own
    load to its cancelled requests (after the step's load and the class's name)."""
    s = c.summary
    return [own_load(c), s.requests, fmt_ms(s.ttft.median), fmt_ms(s.ttft.p95),
            fmt_ms(s.itl.p95), fmt_ms(s.e2el.p95), f"{s.output_throughput or 0:.1f}", s.failed,
            s.cancelled or 0]


def ramp_row(step: Step) -> str:
    return _row(f"{step.load:g}", step.summary, state_text(step))


# a ramp of agents (--workload agent): sessions are the unit of experience, so the table shows
# them where the chat table has requests, E2EL and throughput; like it, 80 columns
AGENT_COLUMNS = ("{unit:>6} {done:>4} {sess50:>8} {sess95:>8} {ttft50:>8} {ttft95:>8} "
                 "{itl95:>7} {err:>6} {state}")


def agent_ramp_header(unit: str = "Agents") -> str:
    """The header of a ramp of agents (docs/agents.md says what each column counts)."""
    return AGENT_COLUMNS.format(unit=unit, done="Done", sess50="Sess p50", sess95="Sess p95",
                                ttft50="TTFT p50", ttft95="TTFT p95", itl95="ITL p95",
                                err="Errors", state="").rstrip()


def agent_ramp_row(step: Step) -> str:
    """One step of a ramp of agents, its state as ``ramp_row`` says it."""
    from llmbench.results.sessions import Sessions
    s, x = step.summary, step.sessions or Sessions()
    return AGENT_COLUMNS.format(
        unit=f"{step.load:g}", done=x.completed, sess50=fmt_ms(x.duration.median),
        sess95=fmt_ms(x.duration.p95), ttft50=fmt_ms(x.step_ttft.median),
        ttft95=fmt_ms(x.step_ttft.p95), itl95=fmt_ms(s.itl.p95), err=s.failed,
        state=state_text(step))


def abandonment_lines(a: Any) -> str:
    """--abandon: what the users cancelled and whether the server let go (results.abandon)."""
    out = [a.sentence()]
    rel = a.release
    if rel.text and a.cancelled:
        flag = "" if rel.ok is not False else "WARNING: "
        out.append(f"{flag}{rel.text}")
    return "\n".join(out)


def class_rows(step: Step) -> list[str]:
    """--scenario: each traffic class's row under its step's, in the same columns."""
    return [_row(own_load(c), c.summary, f"  {name}: {c.state}"
                 + (f" ({c.summary.cancelled} cancelled)" if c.summary.cancelled else ""))
            for name, c in step.classes.items()]


def isolated_row(a: Any) -> str:
    """--isolate: one class alone (``results.schema.IsolatedClass``), in the ramp's columns."""
    return _row(own_load(a), a.summary, f"  {a.name} alone: {a.state}")


def threshold_lines(checks: Sequence[Check]) -> str:
    """One line per threshold: 'ok    ttft.p95<=2s: 812 ms' or 'FAIL  ...: why'."""
    out = ["Thresholds:"]
    for c in checks:
        text = c.text or c.threshold
        out.append(f"  {'ok  ' if c.ok else 'FAIL'}  {text}")
    return "\n".join(out)


def verdict_text(v: Verdict) -> str:
    return "\n".join(p.text for p in verdict_parts(v))


def verdict_parts(v: Verdict) -> list[Any]:
    """The verdict as the closing block's parts (``report.screen.Part``): the headline, why
    and what to change always shown; the evidence, the knee and each class as the screen
    allows (all of them in a file, a pipe or with --verbose)."""
    from llmbench.report.screen import CLASSES, DETAIL, EVIDENCE, KEEP, Part
    parts = [Part(v.headline, KEEP)]
    parts += [Part(n, DETAIL) for n in v.steady_note if n]
    kind = {"queuing": "Why: requests were queuing for slots.",
            "saturation": "Why: compute saturation.",
            "errors": "Why: errors (a limit was hit, or the server failed).",
            "load_generator": ("Why: the machine running llmbench was busy, not the server."
                               if v.generator_cause == "machine" else
                               "Why: the load generator itself was the limit, not the server."),
            "not_enough_data": "Why: too few requests to measure; nothing failed.",
            "buffered": "Why: a proxy buffered the stream; these latencies are its buffer's.",
            "outage": "Why: the server went down (it refused connections).",
            "network": "Why: the network's round trip, not the server.",
            "cache_bound": ("Why: the KV cache: sessions evicted each other's context between "
                            "their calls, so each call prefilled it again."),
            "other": "Why: see the failed thresholds."}.get(v.kind)
    if v.kind == "saturation" and v.slot_wait_share is not None:
        # both causes, in proportion: the rule measured the slot wait's share of TTFT
        kind = ("Why: compute saturation, and requests waited for a slot "
                f"({v.slot_wait_share * 100:.0f}% of TTFT p95).")
    if kind:
        parts.append(Part(kind, KEEP))
    parts += [Part(f"  {e}", EVIDENCE) for e in v.evidence]
    parts += [Part(f"  What to change: {a}", KEEP) for a in v.advice]
    if v.classes:
        parts.append(Part("Each class:", CLASSES))
        for name, c in v.classes.items():
            why = f" ({KIND_WORDS.get(c.kind, c.kind)})" \
                if c.broke and c.kind not in ("held", "none") else ""
            parts.append(Part(f"  {name}: {c.text}{why}", CLASSES))
        if v.blamed:
            parts.append(Part(f"Blamed: {', '.join(v.blamed)}.", KEEP))
    return parts


# a verdict's kind as a reader says it (run.json keeps the names)
KIND_WORDS = {"queuing": "queuing for slots", "saturation": "compute saturation",
              "errors": "errors", "load_generator": "the load generator",
              "not_enough_data": "not enough data", "buffered": "a buffering proxy",
              "outage": "an outage", "cache_bound": "the KV cache", "other": "thresholds broken",
              "held": "held", "none": "nothing judged"}


def trial_mark(t: Any) -> str:
    """A search's step in a word: '8 held', '16 broke', '12 confirmed', '6 (repeated)'."""
    load = f"{t.load:g}"
    if not t.counted:
        return f"{load} ({'repeated' if t.why != 'longer' and t.state != 'not enough data' else 'no data'})"
    if t.why == "confirm":
        return f"{load} {'confirmed' if t.held else 'not confirmed'}"
    return f"{load} {'held' if t.held else 'broke' if t.state == 'over' else 'no data'}"


def search_lines(search: Any, unit: str) -> list[str]:
    """Under a search's verdict: its steps in the order tried, and the interval."""
    out = [f"  Steps in the order tried ({unit}): "
           + ", ".join(trial_mark(t) for t in search.trials) + "."]
    if search.interval:
        lo, hi = search.interval
        fmt = "g" if unit == "users" else ".2f"
        out.append(f"  Interval: {lo:{fmt}} to {hi:{fmt}} {unit}, {search.interval_method}.")
    return out
