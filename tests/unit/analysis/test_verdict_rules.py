"""Each rule of the verdict on its own hand-built Evidence (issue 44 §4), the order they are
asked in, and the one headline (issue 45 §1). No server: the evidence is the point."""

from __future__ import annotations

from dataclasses import replace

from llmbench.results.sessions import CacheBound
from llmbench.analysis.rules import ramp as rules
from llmbench.analysis.rules.evidence import Circumstances, Evidence
from llmbench.analysis.verdict import decide, headline, knee_clause
from llmbench.results.schema import Knee, Step
from llmbench.results.search import Search


def _step(index: int, load: float, state: str, ttft95: float = 500.0, itl50: float = 8.0,
          failed: int = 0, monitor: dict | None = None, outage: bool = False,
          statuses: dict | None = None, bunching: dict | None = None,
          tok_s: float | None = None) -> Step:
    check = {"threshold": "ttft.p95<=2s", "ok": state == "held", "actual": ttft95,
             "limit": 2000.0, "metric": "ttft", "stat": "p95",
             "insufficient": state == "not enough data"}
    if state == "not enough data":
        check["reason"] = "not enough data: 4 successful requests, p95 needs at least 5"
    if outage:
        check.update(outage=True, reason="the server refused connections for 4.0 s")
    return Step.from_dict({
        "index": index, "load": load, "held": state == "held", "state": state,
        "hold_start": 10.0 * index, "hold_end": 10.0 * index + 10, "ramp_start": 10.0 * index,
        "monitor": monitor or {}, "checks": [check],
        "summary": {"requests": 20, "completed": 20 - failed, "failed": failed,
                    "p95_ttft_ms": ttft95, "median_ttft_ms": ttft95 / 2, "median_itl_ms": itl50,
                    "p95_itl_ms": itl50 * 1.1, "errors": {"http": failed} if failed else {},
                    "error_statuses": statuses or {}, "error_samples": [],
                    "stream_bunching": bunching, "output_throughput": tok_s}})


def _ev(broke: Step | None, ttft=(500.0, 3000.0), itl=(8.0, 8.0), tok_s=None,
        **kw) -> Evidence:
    first = _step(0, 2, "held", ttft[0], itl[0], tok_s=tok_s)
    steps = [first] + ([broke] if broke is not None else [])
    grew = {"ttft_grew": ttft[1] >= 1.5 * ttft[0],
            "itl_grew": itl[1] >= 1.5 * itl[0] and itl[1] - itl[0] >= 2}
    return Evidence(steps=steps, broke=broke, subject=broke or first, first=first,
                    ttft_p95_ms=ttft, itl_p50_ms=itl, **{**grew, **kw})


def test_held_fires_only_when_nothing_broke():
    f = rules.held(_ev(None, ttft=(500.0, 500.0)))
    assert f is not None and f.kind == "held"
    assert any("served at once" in e for e in f.evidence)
    assert rules.held(_ev(_step(1, 4, "over", 3000.0))) is None


def test_outage_names_the_reason_and_stops():
    f = rules.outage(_ev(_step(1, 4, "over", outage=True)))
    assert f is not None and f.kind == "outage"
    assert "refused connections" in f.evidence[0] and "server went away" in f.advice[0]
    assert rules.outage(_ev(_step(1, 4, "over"))) is None


def test_errors_say_a_limit_was_hit_on_429():
    f = rules.errors(_ev(_step(1, 4, "over", failed=3, statuses={"429": 3})))
    assert f is not None and f.kind == "errors"
    assert any("429/503" in e for e in f.evidence) and "queue limit" in f.advice[0]
    assert rules.errors(_ev(_step(1, 4, "over"))) is None


def test_buffered_fires_on_a_bunched_stream():
    b = {"buffered": True, "bunched": 9, "requests": 10, "events_per_read_p50": 12}
    f = rules.buffered(_ev(_step(1, 4, "over", bunching=b)))
    assert f is not None and f.kind == "buffered" and "proxy_buffering off" in f.advice[0]
    assert rules.buffered(_ev(_step(1, 4, "over"))) is None


def test_not_enough_data_is_its_own_kind():
    f = rules.not_enough_data(_ev(_step(1, 4, "not enough data")))
    assert f is not None and f.kind == "not_enough_data" and "--hold" in f.advice[0]
    assert rules.not_enough_data(_ev(_step(1, 4, "over"))) is None


def _busy(cpu: float) -> dict:
    return {"overloaded": True, "lag_p99_ms": 900.0, "cpu_pct": cpu}


def test_the_generator_and_the_busy_machine_are_decided_one_way():
    # lag 900 ms explains a TTFT 200 ms over its limit: the generator, split by who had the CPU
    ours = _ev(_step(1, 4, "over", 2200.0, monitor=_busy(95.0)), ttft=(500.0, 2200.0))
    theirs = _ev(_step(1, 4, "over", 2200.0, monitor=_busy(3.0)), ttft=(500.0, 2200.0))
    f = rules.load_generator(ours)
    assert f is not None and f.generator_cause == "llmbench" and "processes" in f.advice[0]
    assert rules.machine(ours) is None and rules.load_generator(theirs) is None
    g = rules.machine(theirs)
    assert g is not None and g.kind == "load_generator" and g.generator_cause == "machine"
    assert "nothing else competes" in g.advice[0] and "--workers" not in " ".join(g.advice)


def test_a_lag_that_cannot_explain_the_break_is_a_note_not_a_verdict():
    # 900 ms of lag cannot make a TTFT 8 s over its 2 s limit: the server broke it
    ev = _ev(_step(1, 4, "over", 10000.0, monitor=_busy(3.0)), ttft=(500.0, 10000.0))
    assert rules.machine(ev) is None and rules.load_generator(ev) is None
    note = rules._lag_note(ev)
    # the machine's other processes took the CPU: the limit stands as the busy machine's
    assert len(note) == 1 and "as the server's on this busy machine" in note[0]
    assert "result stands" in rules._lag_note(
        _ev(_step(1, 4, "over", 10000.0, monitor=_busy(95.0)), ttft=(500.0, 10000.0)))[0]


def test_network_keeps_its_slot_and_passes():
    names = [r.name for r in rules.RULES]
    assert names.index("machine") < names.index("network") < names.index("cache_bound")
    assert rules.network(_ev(_step(1, 4, "over"))) is None


def test_cache_bound_quotes_the_finding():
    cf = CacheBound(sessions_held=2, session_tokens=3000, reprefill_tokens=2500,
                    warm_share=0.9, broke_share=0.1, sentence="The KV cache held 2 sessions.",
                    evidence=("cached share 90% -> 10%",), advice=("More slots.",))
    f = rules.cache_bound(_ev(_step(1, 4, "over"), cache=cf))
    assert f is not None and f.kind == "cache_bound"
    assert f.evidence[:2] == ["The KV cache held 2 sessions.", "cached share 90% -> 10%"]
    assert rules.cache_bound(_ev(_step(1, 4, "over"))) is None


def test_saturation_names_the_slot_wait_with_its_share():
    server = {"running_max": 3, "waiting_max": 2, "slots": 3}
    ev = _ev(_step(1, 4, "over", 5000.0, itl50=30.0), ttft=(500.0, 5000.0), itl=(8.0, 30.0),
             server=server)
    f = rules.saturation(ev)
    assert f is not None and f.kind == "saturation" and "3.8x" in f.evidence[0]
    # 90 % of TTFT p95 here is time the lighter step did not spend: the slot wait, said
    assert any("waited for a full slot: about 90%" in e for e in f.evidence)
    assert rules.saturation(_ev(_step(1, 4, "over"))) is None


def test_a_slot_wait_that_is_most_of_ttft_is_a_cause_on_the_why_line():
    # -np 3 -t 1 on llama.cpp: the gaps grew 3.8x and 90 % of TTFT p95 was the slot wait
    from llmbench.results.schema import Verdict
    from llmbench.report.console import verdict_parts
    server = {"running_max": 3, "waiting_max": 2, "slots": 3}
    ev = _ev(_step(1, 4, "over", 5000.0, itl50=30.0), ttft=(500.0, 5000.0), itl=(8.0, 30.0),
             server=server, server_kind="llamacpp")
    f = rules.saturation(ev)
    assert f is not None and f.slot_wait_share == 0.9
    # the advice names the slots too, with the gaps this run measured as their price
    assert any("raise -np" in a and "8.0 ms" in a and "30.0 ms" in a for a in f.advice)
    both = [p.text for p in verdict_parts(Verdict(kind="saturation", slot_wait_share=0.9))]
    assert "Why: compute saturation, and requests waited for a slot (90% of TTFT p95)." in both
    alone = [p.text for p in verdict_parts(Verdict(kind="saturation"))]
    assert "Why: compute saturation." in alone
    # a queue at the server that is a small part of TTFT: saturation alone, no share set
    small = _ev(_step(1, 4, "over", 800.0, itl50=30.0), ttft=(500.0, 800.0), itl=(8.0, 30.0),
                server=server, ttft_grew=True)
    g = rules.saturation(small)
    assert g is not None and g.slot_wait_share is None
    assert not any("raise -np" in a for a in g.advice)
    # no one waited at the server: no slot wait named, however TTFT grew
    idle = _ev(_step(1, 4, "over", 5000.0, itl50=30.0), ttft=(500.0, 5000.0), itl=(8.0, 30.0),
               server={"running_max": 2, "waiting_max": 0, "slots": 3})
    h = rules.saturation(idle)
    assert h is not None and h.slot_wait_share is None


def test_queuing_advice_names_this_servers_setting_and_quotes_the_gaps():
    ev = _ev(_step(1, 4, "over", 3000.0, itl50=9.0), itl=(8.0, 9.0), server_kind="llamacpp")
    f = rules.queuing(ev)
    assert f is not None and f.kind == "queuing"
    assert "-np / --parallel" in f.advice[0] and "OLLAMA_NUM_PARALLEL" not in f.advice[0]
    assert "median gap between tokens was 8.0 ms at 2 users and 9.0 ms at 4 users" in f.advice[0]
    # a server llmbench does not know gets no setting it may not have
    g = rules.queuing(replace(ev, server_kind="unknown"))
    assert g is not None and "-np" not in g.advice[0] and "OLLAMA" not in g.advice[0]
    assert rules.queuing(_ev(_step(1, 4, "over", 600.0), ttft=(500.0, 600.0))) is None
    assert "tokens/s" not in f.advice[0]     # no throughput measured: none quoted


def test_slots_advice_quotes_a_total_rate_that_did_not_grow():
    # real llama.cpp -np 3 -t 1, 3 -> 6 users: 9.6 -> 8.0 tokens/s in all, gaps 164 -> 201 ms
    ev = _ev(_step(1, 4, "over", 12930.0, itl50=201.0, tok_s=8.0), ttft=(1320.0, 12930.0),
             itl=(164.4, 201.0), tok_s=9.6, server_kind="llamacpp")
    f = rules.queuing(ev)
    assert f is not None
    assert "all users together got 9.6 tokens/s at 2 users, 8.0 at 4 users" in f.advice[0]
    # a rate that grew with the users: the slots bought tokens, nothing more to say of it
    g = rules.queuing(_ev(_step(1, 4, "over", 3000.0, itl50=9.0, tok_s=40.0), itl=(8.0, 9.0),
                          tok_s=20.0, server_kind="llamacpp"))
    assert g is not None and "tokens/s" not in g.advice[0]


def test_other_fires_last_and_says_what_broke():
    ev = _ev(_step(1, 4, "over", 2100.0), ttft=(1900.0, 2100.0))
    f = rules.other(ev)
    assert f.kind == "other" and "ttft.p95<=2s" in f.evidence[0]
    found, _ = decide(ev)
    assert found.kind == "other"


def test_the_first_rule_that_fires_wins_and_earlier_notes_are_kept():
    # failed requests outrank saturation; the lag note of a rule asked earlier is kept
    ev = _ev(_step(1, 4, "over", 10000.0, itl50=30.0, monitor=_busy(3.0)),
             ttft=(500.0, 10000.0), itl=(8.0, 30.0))
    found, notes = decide(ev)
    assert found.kind == "saturation" and any("limit stands" in n for n in notes)
    failed = _ev(_step(1, 4, "over", 10000.0, itl50=30.0, failed=2), ttft=(500.0, 10000.0),
                 itl=(8.0, 30.0))
    assert decide(failed)[0].kind == "errors"


def test_one_headline_with_the_knee_as_a_clause():
    ev = _ev(_step(1, 8, "over", 2970.0))
    k = Knee(between=[2.0, 8.0], estimate=5.4, ci=[4.8, 6.1], users=5, users_ci=[4, 6],
             threshold="ttft.p95_all<=2s")
    text = headline(replace(ev, knee=k), "Held 2 users. At 8 users, TTFT p95 was 2.97 s, "
                                         "over 2 s.")
    assert text == ("Held 2 users. At 8 users, TTFT p95 was 2.97 s, over 2 s; by interpolation "
                    "the limit lies at 4 to 6 users (95 % interval).")
    assert "ttft.p95_all" not in text and text.count("Held") == 1
    # adjacent users: no fractional crossing between them
    assert knee_clause(replace(k, between=[1.0, 2.0], users=1, users_ci=[1, 1]), "users") == ""


def test_the_headline_says_what_happened_to_the_ramp():
    held = _ev(None, ttft=(500.0, 500.0))
    stopped = replace(held, c=Circumstances(planned=4, interrupted=True))
    assert headline(stopped).startswith("Held 2 users before the ramp was interrupted. "
                                        "Stopped after 1 of 4 steps")
    lost = replace(held, c=Circumstances(lost="worker 1 crashed"))
    assert "INCOMPLETE: worker 1 crashed" in headline(lost)
    found = replace(held, c=Circumstances(search=Search(text="Holds 11 users (12 broke).")))
    assert headline(found) == "Holds 11 users (12 broke)."


def test_the_busy_warning_is_decided_as_the_verdict_decides_it():
    from llmbench.analysis.verdict import busy_banner, busy_warning
    theirs, ours = busy_warning(_busy(2.0)), busy_warning(_busy(95.0))
    # 2 % of a core on a lagging loop: other processes had the machine; no --workers advice
    assert theirs.startswith("The machine was busy with other processes") and \
        "--workers" not in theirs
    assert ours.startswith("llmbench itself was busy") and "(--workers)" in ours
    assert busy_banner(400.0, 3.0).startswith("The machine is busy with other processes")
    assert busy_banner(400.0, 97.0).startswith("llmbench itself is near its limit")


def test_the_cache_advice_does_not_suggest_cache_ram_when_it_is_on():
    from llmbench.analysis.cachebound import advice
    cf = CacheBound(sessions_held=2, session_tokens=3000, reprefill_tokens=2500,
                    warm_share=0.9, broke_share=0.1, sentence="s",
                    advice=tuple(advice("llamacpp", 3000)))
    off = rules.cache_bound(_ev(_step(1, 4, "over"), cache=cf))
    assert off is not None and any("(--cache-ram MiB" in a for a in off.advice)
    on = rules.cache_bound(_ev(_step(1, 4, "over"), cache=cf, telemetry={
        "identity": {"settings": {"--cache-ram": "8192"}}}))
    assert on is not None and not any("(--cache-ram MiB" in a for a in on.advice)
    assert any("--cache-ram is on already (8192 MiB)" in a for a in on.advice)


def test_the_users_who_gave_up_lead_the_evidence():
    broke = _step(1, 4, "over", 3000.0)
    broke.summary.cancelled, broke.summary.cancelled_waiting = 6, 4
    broke.summary.cancel_rate = 0.3
    ev = _ev(broke)
    lines = rules.context(ev)
    assert lines[0].startswith("At 4 users, users gave up on 6 requests (30% of its requests), 4 "
                               "before the first token came (--abandon)")
    assert decide(ev)[1][0] == lines[0]


def test_a_class_little_law_is_not_the_servers_concurrency():
    ev = _ev(_step(1, 4, "over", 3000.0), little={"in_service": 1.2, "waiting_share": 0.4})
    whole = " ".join(rules.queuing(ev).evidence)
    assert "so the server serves one person at a time" in whole
    mine = " ".join(rules.queuing(replace(ev, scope="chat")).evidence)
    assert "1.2 of chat's requests were in service at once" in mine
    assert "the server serves" not in mine


def test_an_agent_verdict_quotes_the_tables_ttft():
    from llmbench.results.sessions import Dist, Sessions
    ev = _ev(_step(1, 4, "over", 3000.0))
    ev.first.sessions = Sessions(step_ttft=Dist(n=20, p95=640.0))
    ev.subject.sessions = Sessions(step_ttft=Dist(n=20, p95=2480.0))
    # the agents' table shows a session step's TTFT: the verdict quotes the same figures
    assert rules.context(ev)[0].startswith(
        "From 2 to 4 users: TTFT p95 (per session step) 640 ms -> 2.48 s")


def test_a_starved_servers_limit_is_not_stated_as_its_capacity():
    ev = _ev(_step(1, 4, "over", 10000.0, monitor=_busy(3.0)), ttft=(500.0, 10000.0))
    assert rules.starved(ev)
    # just over the lag limit is a busy machine's jitter: not a starved server
    jitter = _ev(_step(1, 4, "over", 10000.0, monitor={**_busy(3.0), "lag_p99_ms": 12.0}),
                 ttft=(500.0, 10000.0))
    assert not rules.starved(jitter)
    assert headline(ev, "Held 2 users. At 4 users, TTFT p95 was 10.00 s, over 2.00 s.").endswith(
        "That is the server's limit on a machine busy with other processes, not its capacity.")
    quiet = _ev(_step(1, 4, "over", 10000.0), ttft=(500.0, 10000.0))
    assert not rules.starved(quiet) and "capacity" not in headline(quiet, "Held 2 users.")


def test_a_ramp_still_going_on_says_so():
    held = _ev(None, ttft=(500.0, 500.0))
    going = replace(held, c=Circumstances(planned=4, going_on=True))
    assert headline(going) == "Held 2 users so far (1 of 4 steps); the ramp goes on."


def _starved_step(server_cores: float, busy: float, lag_p99_ms: float = 19.4) -> Step:
    # as a real llama.cpp -np 3 -t 1 ramp read it with two other processes busy (run.json)
    st = _step(1, 4, "over", 6000.0, monitor={"overloaded": True, "lag_p99_ms": lag_p99_ms,
                                             "cpu_pct": 1.2})
    return Step.from_dict({**st.to_dict(), "telemetry": {
        "start": 10.0, "end": 20.0,
        "server": {"cpu_s": 13.0, "cores": server_cores, "pids": 1, "covered_s": 10.0},
        "llmbench": {"cpu_s": 0.1, "cores": 0.01, "pids": 1, "covered_s": 10.0},
        "machine": {"source": "proc", "cpus": 2, "busy_cores": busy, "covered_s": 10.0}}})


def test_a_server_kept_off_its_cores_is_starved_though_the_loop_barely_lagged():
    info = {"meta": {"local": {"cpus": 2, "server_cpus": 2}},
            "identity": {"kind": "llama.cpp", "settings": {"--threads": "1"}}}
    # one user, no think: a request at the server all the time, half of it before its first token
    busy = {"in_service": 0.5, "waiting": 0.5, "waiting_share": 0.5}
    ev = _ev(_starved_step(0.19, 1.99), ttft=(500.0, 6000.0), telemetry=info, little=busy)
    # the loop's lag (19 ms) is under the starved bar, the server's CPU (0.19 of 1) is not
    assert rules.server_starved(ev) and rules.starved(ev)
    assert "not its capacity" in headline(ev)
    assert "result stands" not in rules._lag_note(ev)[0]
    # the same server using its one core on a busy machine: its own limit, stated as such
    fed = _ev(_starved_step(0.95, 1.99), ttft=(500.0, 6000.0), telemetry=info, little=busy)
    assert not rules.starved(fed) and "not its capacity" not in headline(fed)
    # a quiet machine, or a server with nothing to do, is not starved
    quiet = _ev(_starved_step(0.19, 0.4), ttft=(500.0, 6000.0), telemetry=info, little=busy)
    idle = _ev(_starved_step(0.19, 1.99), ttft=(500.0, 6000.0), telemetry=info,
               little={"in_service": 0.2, "waiting": 0.1, "waiting_share": 0.3})
    assert not rules.server_starved(quiet) and not rules.server_starved(idle)
    # a server not known to compute on its CPU threads (the mock, a GPU server): its few
    # cores are all it needs
    mock = _ev(_starved_step(0.19, 1.99), ttft=(500.0, 6000.0), little=busy,
               telemetry={"meta": info["meta"], "identity": {"kind": "mock"}})
    gpu = _ev(_starved_step(0.19, 1.99), ttft=(500.0, 6000.0), little=busy, telemetry={
        "meta": info["meta"], "identity": {"kind": "llama.cpp", "settings": {
            "--threads": "1", "--n-gpu-layers": "99"}}})
    assert not rules.server_starved(mock) and not rules.server_starved(gpu)


def test_a_starved_server_that_saturated_is_not_read_as_not_cpu():
    # real llama.cpp -t 1 at 3 users: gaps 5.1x, the server's process 0.2 cores, machine full
    info = {"meta": {"local": {"cpus": 2, "server_cpus": 2}},
            "identity": {"kind": "llama.cpp", "settings": {"--threads": "1"}}}
    first = Step.from_dict({**_starved_step(0.2, 1.99).to_dict(), "index": 0, "load": 1,
                            "state": "held", "held": True})
    broke = _starved_step(0.15, 1.99)
    ev = Evidence(steps=[first, broke], broke=broke, subject=broke, first=first,
                  ttft_p95_ms=(2680.0, 7500.0), itl_p50_ms=(108.0, 550.0), itl_grew=True,
                  ttft_grew=True, telemetry=info,
                  little={"in_service": 2.7, "waiting": 0.5, "waiting_share": 0.16})
    f = rules.saturation(ev)
    assert f is not None and f.cause == "machine_cpu"
    assert any("got 0.1 of the 1 core it can use" in e for e in f.evidence)
    assert not any("not CPU compute" in e for e in f.evidence)
    assert f.advice == [rules.STARVED_ADVICE]


def test_a_starved_server_that_queued_is_told_of_its_cores_before_its_slots():
    # real llama.cpp -np 3 -t 1 at 6 users: 3 running, 3 waiting, the server at 0.2 cores
    info = {"meta": {"local": {"cpus": 2, "server_cpus": 2}},
            "identity": {"kind": "llama.cpp", "settings": {"--threads": "1"}}}
    busy = {"in_service": 2.7, "waiting": 3.0, "waiting_share": 0.58}
    ev = _ev(_starved_step(0.2, 1.98), ttft=(1320.0, 12930.0), itl=(164.4, 201.0),
             telemetry=info, little=busy, server_kind="llamacpp",
             server={"running_max": 3, "waiting_max": 3, "slots": 3})
    f = rules.queuing(ev)
    assert f is not None and f.advice[0] == rules.STARVED_ADVICE
    # the slots' advice stays, quoting the gaps this run measured
    assert "164.4 ms" in f.advice[1] and "201.0 ms" in f.advice[1]


def _thrash(share=None):
    from llmbench.analysis.cachebound import Reprefill
    return Reprefill(load=4, later_turns=20, lost=18, lost_tokens=600.0, prompt_tokens=700.0,
                     light_load=2, light_lost_share=0.0,
                     ms_per_token=None if share is None else 0.8, ttft_share=share)


def test_re_prefilled_histories_are_a_note_beside_queuing():
    ev = _ev(_step(1, 4, "over", 3000.0), reprefill=_thrash(0.52))
    found, notes = decide(ev)
    assert found.kind == "queuing"
    said = [n for n in notes if "re-prefilled their whole history" in n]
    assert said == [_thrash(0.52).sentence()]
    assert "one KV state thrashed between users" in said[0]
    assert "about 52% of their TTFT (0.80 ms a token, the server's timings)" in said[0]
    # plain queuing (no such reading: no cache counts, or the cache kept the histories)
    _, quiet = decide(_ev(_step(1, 4, "over", 3000.0)))
    assert not any("re-prefilled" in n for n in quiet)


def test_when_the_cache_is_the_verdict_the_re_prefill_is_said_once_with_its_share():
    cache = CacheBound(sessions_held=2, session_tokens=900, reprefill_tokens=600,
                       warm_share=0.8, broke_share=0.2, sentence="The KV cache holds about 2")
    found, notes = decide(_ev(_step(1, 4, "over", 3000.0), cache=cache,
                              reprefill=_thrash(0.52)))
    assert found.kind == "cache_bound"
    assert not any("re-prefilled their whole history" in n for n in notes)
    assert [e for e in found.evidence if e.startswith("Re-prefilling")] == [
        "Re-prefilling whole histories was about 52% of the later turns' TTFT at 4 users "
        "(0.80 ms a token, the server's timings)."]
