""""Cache-bound": the server's KV cache, not its compute or its slots, is what broke the step.

docs/agents.md ("Cache-bound") says how it looks from outside (like queuing: the first token
gets later, the gaps stay) and how it is told apart: the share of prompt tokens served from the
cache fell and the tokens each call prefilled grew, in the client's usage and, where the server
says, in its own counters (``server_cache``).

Pure: from the records of two steps (the last that held, warm, and the one that broke) and the
server's samples over their hold windows, ``finding`` says whether the cache is the limit, why,
and what moves it on this kind of server.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Sequence

from llmbench.records.record import Record
from llmbench.results.sessions import CacheBound

# The cache "fell" when the share of prompt tokens it served at the broken step is at most
# this fraction of the warm step's, by at least FELL_BY, from a warm share of at least WARM:
# a cache that served little to begin with cannot be what ran out. A budget a little short of
# the sessions evicts some of them only (on the mock, 5 agents on a budget for 4.4 sessions:
# 72% -> 46%), so a quarter less is enough.
WARM = 0.3
FELL_TO = 0.75
FELL_BY = 0.15
# ... and each call prefilled at least this many times as many tokens, and this many more
PREFILL_GROWTH = 1.5
PREFILL_MIN_TOKENS = 32


@dataclass(frozen=True)
class StepCache:
    """One step's prompt cache, from its records (successful requests of its hold window)."""

    load: float
    requests: int
    told: int                           # requests whose usage said how many tokens were cached
    cached_share: float | None          # cached / prompt over those
    prefilled_per_call: float | None    # uncached prompt tokens a request, over those
    prompt_per_call: float | None
    session_tokens: float | None        # a session's (conversation's) largest prompt, mean
    sessions: int
    agents: bool = False                # agent sessions (session ids), not people's turns


def step_cache(records: Sequence[Record], load: float) -> StepCache:
    """``records``: the step's window (its hold window's requests)."""
    ok = [r for r in records if r.ok and not r.warmup and r.prompt_tokens]
    told = [r for r in ok if r.cached_tokens is not None]
    prompt = sum(r.prompt_tokens or 0 for r in told)
    cached = sum(r.cached_tokens or 0 for r in told)
    largest: dict[Any, int] = {}
    for r in ok:
        key = r.session_id if r.session_id is not None else (r.user, r.conversation)
        largest[key] = max(largest.get(key, 0), r.prompt_tokens or 0)
    return StepCache(
        load=load, requests=len(ok), told=len(told),
        cached_share=(cached / prompt) if told and prompt else None,
        prefilled_per_call=((prompt - cached) / len(told)) if told else None,
        prompt_per_call=(sum(r.prompt_tokens or 0 for r in ok) / len(ok)) if ok else None,
        session_tokens=(sum(largest.values()) / len(largest)) if largest else None,
        sessions=len(largest), agents=any(r.session_id is not None for r in ok))


@dataclass(frozen=True)
class ServerCache:
    """The server's own view of its prompt cache over a window, from its samples."""

    kind: str | None
    hit_rate: float | None              # of prompt tokens, from its counters' change
    source: str | None                  # which counters said it
    kv_usage_max: float | None = None
    kv_budget_tokens: float | None = None
    ctx_per_slot: float | None = None
    slots: float | None = None
    context_length: float | None = None
    evicted_tokens: float | None = None
    prefilled_tokens: float | None = None    # prompt tokens it computed in the window
    samples: int = 0


def _delta(window: Sequence[dict[str, Any]], key: str) -> float | None:
    vals = [s[key] for s in window if s.get(key) is not None]
    if len(vals) < 2:
        return None
    d = vals[-1] - vals[0]
    return d if d >= 0 else None          # a counter that went back: the server restarted


def _last(window: Sequence[dict[str, Any]], key: str) -> float | None:
    vals = [s[key] for s in window if s.get(key) is not None]
    return vals[-1] if vals else None


def server_cache(samples: Sequence[dict[str, Any]], start: float, end: float
                 ) -> ServerCache | None:
    """The server's prompt cache over [start, end] (its samples a little past the end too:
    a counter moves when a request ends, after the window's last one started)."""
    window = [s for s in samples if start <= s.get("t", -1) <= end + 2.0 and "error" not in s]
    if not window:
        return None
    kind = window[-1].get("kind")
    hit, source = None, None
    cached, prefilled = _delta(window, "cached_tokens_total"), _delta(window, "prefilled_tokens_total")
    if cached is not None and prefilled is not None and cached + prefilled > 0:
        hit = cached / (cached + prefilled)
        source = "llamacpp:prompt_tokens_cached_total / (that + llamacpp:prompt_tokens_total)"
    hits, queries = _delta(window, "prefix_cache_hits"), _delta(window, "prefix_cache_queries")
    if hit is None and hits is not None and queries:
        hit = hits / queries
        source = ("vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total"
                  if kind != "mock" else "the mock's prefix_cache_hits_total / queries_total")
    rates = [s["cache_hit_rate"] for s in window if s.get("cache_hit_rate") is not None]
    if hit is None and rates:
        hit = sum(rates) / len(rates)
        source = "sglang:cache_hit_rate"
    kv = [s["kv_cache_usage"] for s in window if s.get("kv_cache_usage") is not None]
    return ServerCache(kind=kind, hit_rate=hit, source=source, kv_usage_max=max(kv) if kv else None,
                       kv_budget_tokens=_last(window, "kv_budget_tokens"),
                       ctx_per_slot=_last(window, "ctx_per_slot"), slots=_last(window, "slots"),
                       context_length=_last(window, "context_length"),
                       evicted_tokens=_delta(window, "kv_evicted_tokens_total"),
                       prefilled_tokens=prefilled, samples=len(window))


def _fell(a: float | None, b: float | None) -> bool:
    return a is not None and b is not None and a >= WARM and b <= a * FELL_TO and a - b >= FELL_BY


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{v * 100:.0f}%"


def _tokens(v: float | None) -> str:
    return "–" if v is None else f"{v:,.0f}"


def _rates(server_warm: ServerCache | None, server_broke: ServerCache | None
           ) -> tuple[float | None, float | None]:
    return (server_warm.hit_rate if server_warm is not None else None,
            server_broke.hit_rate if server_broke is not None else None)


def _prefill_grew(warm: StepCache, broke: StepCache) -> bool:
    pw, pb = warm.prefilled_per_call, broke.prefilled_per_call
    return (pw is not None and pb is not None and pb >= PREFILL_GROWTH * max(pw, 1.0)
            and pb - pw >= PREFILL_MIN_TOKENS)


def _is_cache_bound(warm: StepCache, broke: StepCache, server_warm: ServerCache | None,
                    server_broke: ServerCache | None) -> bool:
    """The cache fell (by the server's counters where it has them for both windows: they see
    every request, not only those whose usage says; else by the client's usage) and each call
    prefilled more."""
    s_warm, s_broke = _rates(server_warm, server_broke)
    server_said = s_warm is not None and s_broke is not None
    fell = _fell(s_warm, s_broke) if server_said else _fell(warm.cached_share, broke.cached_share)
    grew = _prefill_grew(warm, broke)
    if not grew and server_said and _fell(s_warm, s_broke) and broke.prefilled_per_call is None:
        grew = True                       # no usage said; the server's counters did
    return fell and grew


def _slot_bound(kind: str | None, srv: ServerCache | None) -> bool:
    """llama.cpp keeps one conversation's KV per slot: its slots, not its tokens, count."""
    return kind == "llamacpp" and srv is not None and bool(srv.slots) and bool(srv.ctx_per_slot)


def _server_lines(warm: StepCache, broke: StepCache, server_warm: ServerCache | None,
                  server_broke: ServerCache | None, noun: str) -> list[str]:
    """What the server's own counters say of its cache over the two windows."""
    s_warm, s_broke = _rates(server_warm, server_broke)
    srv = server_broke or server_warm
    out = []
    if s_warm is not None and s_broke is not None:
        fell = _fell(s_warm, s_broke)
        out.append(f"The server's own counters {'agree' if fell else 'do not agree'}: "
                   f"its prompt cache served {_pct(s_warm)} of prompt tokens at {warm.load:g} and "
                   f"{_pct(s_broke)} at {broke.load:g} ({server_broke.source})."  # type: ignore[union-attr]
                   )
    elif srv is not None:
        out.append(f"The server ({srv.kind}) reports no prompt-cache counters; this rests on the "
                   "cached tokens its replies' usage reported.")
    if srv is not None and srv.prefilled_tokens is not None and server_broke is not None \
            and server_broke.prefilled_tokens is not None and server_warm is not None \
            and server_warm.prefilled_tokens is not None:
        out.append(f"It computed {_tokens(server_warm.prefilled_tokens)} prompt tokens in the "
                   f"{warm.load:g}-{noun} hold window and {_tokens(server_broke.prefilled_tokens)} "
                   f"in the {broke.load:g}-{noun} one (llamacpp:prompt_tokens_total).")
    if server_broke is not None and server_broke.evicted_tokens:
        out.append(f"It evicted {_tokens(server_broke.evicted_tokens)} cached tokens in the "
                   f"{broke.load:g}-{noun} window to fit its KV budget.")
    return out


def _capacity_lines(sessions: float | None, srv: ServerCache | None, kind: str | None,
                    cap: float | None, size: float) -> list[str]:
    """How many sessions of this size its KV holds, and how full it was."""
    out = []
    if cap is not None and size and _slot_bound(kind, srv):
        assert srv is not None and srv.slots is not None
        out.append(f"It keeps one conversation's KV per slot: {srv.slots:g} slots of "
                   f"{_tokens(srv.ctx_per_slot)} tokens hold {sessions:g} sessions of "
                   f"~{_tokens(size)} tokens.")
    elif cap is not None and size:
        out.append(f"Its KV cache is {_tokens(cap)} tokens ({_capacity(srv)[1]}): "
                   f"{cap / size:.1f} sessions of ~{_tokens(size)} tokens.")
    if srv is not None and srv.kv_usage_max is not None and srv.kv_usage_max >= 0.9:
        out.append(f"Its KV cache was {srv.kv_usage_max * 100:.0f}% full.")
    return out


def finding(warm: StepCache, broke: StepCache, server_warm: ServerCache | None,
            server_broke: ServerCache | None, unit: str = "users") -> CacheBound | None:
    """Whether the step broke on the cache (``_is_cache_bound``), and why; None when not."""
    if not _is_cache_bound(warm, broke, server_warm, server_broke):
        return None
    s_warm, s_broke = _rates(server_warm, server_broke)
    pw, pb = warm.prefilled_per_call, broke.prefilled_per_call
    size = broke.session_tokens or warm.session_tokens or 0.0
    held = warm.load
    srv = server_broke or server_warm
    kind = srv.kind if srv is not None else None
    cap, _ = _capacity(srv)
    sessions = cap / size if cap is not None and size else None     # of this size, it holds
    if sessions is not None and _slot_bound(kind, srv):
        assert srv is not None and srv.slots is not None and srv.ctx_per_slot is not None
        sessions = float(srv.slots) if size <= srv.ctx_per_slot else 0.0
    # a ramp of agents counts agents; of people taking turns, users
    noun = "agents" if unit == "users" and broke.agents and warm.agents else unit
    one = noun.rstrip("s") if warm.load == 1 and noun in ("agents", "users") else noun
    evidence = [
        f"At {warm.load:g} {one}, {_pct(warm.cached_share)} of prompt tokens came from "
        f"the cache and each call prefilled ~{_tokens(pw)} tokens; at {broke.load:g}, "
        f"{_pct(broke.cached_share)}, and each call prefilled ~{_tokens(pb)} of its "
        f"~{_tokens(broke.prompt_per_call)}: the sessions evicted each other's context "
        "between their calls, so the first token waited for the whole context again.",
        *_server_lines(warm, broke, server_warm, server_broke, noun),
        *_capacity_lines(sessions, srv, kind, cap, size)]
    return CacheBound(
        sessions_held=held, session_tokens=size, reprefill_tokens=pb or 0.0,
        warm_share=warm.cached_share, broke_share=broke.cached_share,
        capacity_tokens=cap if sessions is not None else None, capacity_sessions=sessions,
        server_agrees=_fell(s_warm, s_broke) if s_warm is not None and s_broke is not None
        else None,
        sentence=(f"The KV cache holds about {held:g} sessions of this size "
                  f"(~{_tokens(size)} tokens each); beyond that each call re-prefills about "
                  f"{_tokens(pb)} tokens."),
        evidence=tuple(evidence), advice=tuple(advice(kind, size, srv)))


def _capacity(srv: ServerCache | None) -> tuple[float | None, str]:
    """The server's KV cache in tokens (None: not said), and what says it."""
    if srv is None:
        return None, ""
    if srv.kv_budget_tokens:
        return srv.kv_budget_tokens, "its KV budget"
    if srv.ctx_per_slot and srv.slots:
        return (srv.ctx_per_slot * srv.slots,
                f"{srv.slots:g} slots of {srv.ctx_per_slot:,.0f} tokens")
    if srv.context_length:
        return srv.context_length, "its context length"
    return None, ""


def advice(kind: str | None, session_tokens: float, srv: ServerCache | None = None) -> list[str]:
    """What moves the cache's limit, on this kind of server."""
    need = f"{session_tokens:,.0f}" if session_tokens else "a session's"
    if kind == "llamacpp":
        slots = f"{srv.slots:g}" if srv is not None and srv.slots else "N"
        ctx = srv.ctx_per_slot if srv is not None else None
        if ctx and session_tokens and session_tokens > ctx:
            first = (f"A session ({need} tokens) does not fit a slot's context ({ctx:,.0f} = "
                     f"-c / -np {slots}): raise -c, or use fewer parallel slots (-np) so each "
                     "gets more of it.")
        else:
            first = (f"llama.cpp keeps one conversation's KV per slot: its {slots} slots (-np) "
                     f"hold {slots} sessions warm, and a session that finds its slot taken "
                     f"prefills its {need} tokens again. More slots (-np, with -c raised so "
                     "-c / -np still holds a session) keep more sessions warm.")
        return [first,
                "Keep evicted prompts in host memory (--cache-ram MiB, on by default in recent "
                "builds; 0 turns it off), or halve the KV's size with a quantized cache "
                "(-ctk q8_0 -ctv q8_0); --cache-reuse N reuses shifted chunks of a prompt."]
    if kind == "vllm":
        return ["Give the KV cache more room: --gpu-memory-utilization higher, --max-model-len "
                "no longer than a session needs, --kv-cache-dtype fp8 (half the size per token).",
                "Keep prefix caching on (--enable-prefix-caching, the V1 engine's default), run "
                "fewer sequences at once (--max-num-seqs) so the cache is shared by fewer, or "
                "offload KV to CPU memory (--kv-offloading-size, LMCache)."]
    if kind == "sglang":
        return ["Give RadixAttention's cache more room: --mem-fraction-static higher, "
                "--kv-cache-dtype fp8_e5m2; keep it on (no --disable-radix-cache), and run fewer "
                "requests at once (--max-running-requests)."]
    if kind == "ollama":
        return [f"Give each session its context: OLLAMA_CONTEXT_LENGTH (or num_ctx) of at least "
                f"{need} tokens per parallel slot (Ollama splits it over OLLAMA_NUM_PARALLEL), "
                "fewer OLLAMA_NUM_PARALLEL, or a quantized KV cache (OLLAMA_KV_CACHE_TYPE=q8_0 "
                "with OLLAMA_FLASH_ATTENTION=1)."]
    if kind == "mock":
        return [f"The mock's KV budget (--kv-tokens) holds the sessions warm: raise it to about "
                f"{need} tokens a session times the sessions you want warm."]
    return ["Give the server's KV cache room for more sessions (a larger context or KV budget, "
            "a quantized KV cache), run fewer at once (fewer parallel slots), and keep prefix "
            "caching on where it is off."]


def _window(records: Sequence[Record], step: Any) -> list[Record]:
    from llmbench.records.definitions import window
    return window(records, step.index, step.hold_start, step.hold_end)


def _as_table(step: Any, c: StepCache) -> StepCache:
    """A step of agents: its cache as the steps' table shows it (the sessions that started in
    its hold, all their calls: ``analysis.sessions``), so the verdict quotes the table's
    figures, not a second count over the hold window's calls."""
    x = step.sessions
    if x is None or x.cached_share is None:
        return c
    return replace(c, cached_share=x.cached_share, prefilled_per_call=x.prefilled_per_call,
                   session_tokens=x.context_tokens or c.session_tokens)


def ramp_finding(steps: Sequence[Any], records: Sequence[Record], broke: Any,
                 server_samples: Sequence[dict[str, Any]] = (), unit: str = "users"
                 ) -> CacheBound | None:
    """The cache finding for a ramp's broken step against the last step that held before it
    (None: no step held before it, or the cache was not the limit)."""
    i = next((k for k, s in enumerate(steps) if s is broke), None)
    held = [s for s in steps[:i] if s.held] if i else []
    if not held:
        return None
    warm = held[-1]
    recs = list(records)
    return finding(_as_table(warm, step_cache(_window(recs, warm), warm.load)),
                   _as_table(broke, step_cache(_window(recs, broke), broke.load)),
                   server_cache(server_samples, warm.hold_start, warm.hold_end),
                   server_cache(server_samples, broke.hold_start, broke.hold_end), unit)


# "Re-prefilled its whole history": a later turn whose cache served under this share of the
# history it resent (the previous turn's prompt and reply)
LOST_BELOW = 0.5
# the step explained thrashed when at least this share of its later turns lost their history,
# the lighter step kept it when at most LIGHT_LOST did: the cache held the histories of fewer
# users than took turns (a server with no cache loses them at one user too: not this)
THRASHED = 0.5
LIGHT_LOST = 0.2
MIN_LATER_TURNS = 4


@dataclass(frozen=True)
class Reprefill:
    """Later turns that prefilled their whole history again at the step explained, against
    the lighter step that kept it: one KV state thrashed between users. Where the server timed
    its prefill (llama.cpp's timings): ``ms_per_token``, its median pace, and ``ttft_share``,
    the re-prefill's share of the later turns' TTFT."""

    load: float
    later_turns: int
    lost: int
    lost_tokens: float                  # history tokens re-prefilled a later turn, mean
    prompt_tokens: float                # a later turn's prompt, mean
    light_load: float
    light_lost_share: float
    ms_per_token: float | None = None
    ttft_share: float | None = None

    def sentence(self, unit: str = "users") -> str:
        from llmbench.results.schema import amount
        text = (f"At {amount(self.load, unit)}, {self.lost} of {self.later_turns} later turns "
                f"re-prefilled their whole history (~{_tokens(self.lost_tokens)} tokens a "
                f"call, of ~{_tokens(self.prompt_tokens)}), where at "
                f"{amount(self.light_load, unit)} {self.light_lost_share * 100:.0f}% did: one "
                "KV state thrashed between users, the server's cache keeping fewer users' "
                "histories than took turns.")
        if self.ttft_share is not None and self.ms_per_token is not None:
            text += (f" That prefill was about {self.ttft_share * 100:.0f}% of their TTFT "
                     f"({self.ms_per_token:.2f} ms a token, the server's timings).")
        return text


def _history_lost(records: Sequence[Record], window: Sequence[Record]
                  ) -> list[tuple[Record, float]]:
    """The window's later turns whose usage said what was cached, each with the history
    tokens it prefilled again (0 when the cache kept it): its conversation's previous call,
    prompt and reply, is the history it resent."""
    by_key: dict[Any, list[Record]] = {}
    for r in records:
        if r.ok and r.prompt_tokens:
            key = r.session_id if r.session_id is not None else (r.user, r.conversation)
            by_key.setdefault(key, []).append(r)
    out = []
    for r in window:
        if not r.ok or r.warmup or not r.prompt_tokens or r.cached_tokens is None:
            continue
        key = r.session_id if r.session_id is not None else (r.user, r.conversation)
        before = [p for p in by_key.get(key, ()) if p is not r and p.done <= r.start]
        if not before or (r.session_id is None and r.turn == 0):
            continue                    # a first turn: no history to keep
        prev = max(before, key=lambda p: p.done)
        history = (prev.prompt_tokens or 0) + (prev.output_tokens or 0)
        if not history or history > r.prompt_tokens:
            continue                    # not a prefix of this prompt: another history
        lost = r.cached_tokens < LOST_BELOW * history
        out.append((r, float(history - r.cached_tokens) if lost else 0.0))
    return out


def _pace_ms(r: Record) -> float | None:
    """ms a prompt token of this request took to prefill, from the server's own timings
    (llama.cpp's prompt_ms over prompt_n); None where it sends none. From TTFT alone it cannot
    be told: under a queue the wait grows with the others' histories, in step with one's own."""
    t = r.server_timing
    if not t or not t.get("prompt_ms") or not t.get("prompt_n"):
        return None
    return float(t["prompt_ms"]) / float(t["prompt_n"])


def _step_and_window(records: Sequence[Record], step: Any) -> tuple[list[Record], list[Record]]:
    """The step's requests up to the end of its hold (its ramp-in too: a window request's
    previous turn is among them), and its hold window's; found on a column store's columns,
    never every record of the run."""
    from llmbench.records.definitions import window
    pool = window(records, step.index, -math.inf, step.hold_end)
    start = step.hold_start
    return pool, [r for r in pool if r.start >= start]


def reprefill(records: Sequence[Record], subject: Any, light: Any) -> Reprefill | None:
    """Whether the step explained (``subject``) re-prefilled whole histories that the lighter
    step (``light``) kept; None without cached-token counts (no cache counters: nothing can
    be told from TTFT alone, plain queuing looks the same), or when it did not."""
    if light is None or subject is None or light is subject:
        return None
    now = _history_lost(*_step_and_window(records, subject))
    before = _history_lost(*_step_and_window(records, light))
    if len(now) < MIN_LATER_TURNS or len(before) < 2:
        return None
    lost = [x for _, x in now if x > 0]
    light_share = sum(1 for _, x in before if x > 0) / len(before)
    if len(lost) < THRASHED * len(now) or light_share > LIGHT_LOST:
        return None
    # the re-prefill's time, where the server timed its prefill: of the later turns' TTFT
    timed = [(r, x, p) for r, x in now if (p := _pace_ms(r)) is not None and r.ttft]
    share = pace = None
    if len(timed) == len(now):
        spent = sum(x * p for _, x, p in timed) / 1000.0
        share = min(1.0, spent / sum(r.ttft or 0.0 for r, _, _ in timed))
        paces = sorted(p for _, _, p in timed)
        pace = paces[len(paces) // 2]
    return Reprefill(load=subject.load, later_turns=len(now), lost=len(lost),
                     lost_tokens=sum(lost) / len(lost),
                     prompt_tokens=sum(r.prompt_tokens or 0 for r, _ in now) / len(now),
                     light_load=light.load, light_lost_share=light_share,
                     ms_per_token=pace, ttft_share=share)
