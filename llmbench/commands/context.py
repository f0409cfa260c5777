"""``llmbench context``: the longest prompt the server serves, and what a long prompt costs.

One request at a time (the same client and Records as every command), each with a prompt of
its own (a new first word, so no prefix cache shortens it) and one output token: the prompt
doubles until the server refuses it, fails, runs out of memory or its TTFT passes the bound,
then the gap between the longest served and the shortest that was not is halved down to one
word. What it says: the longest prompt served (the server's own token count), what stopped
the next one, the server's own limit when it says one (``LIMIT_NAMES``), and the prefill rate
(tokens/s) fitted to TTFT against prompt length. A server that cuts a long prompt instead of
refusing it (Ollama keeps the end of a prompt longer than its num_ctx) is told by its count no
longer growing."""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import dataclass, field
from time import perf_counter
from typing import TYPE_CHECKING, Any, Callable

from llmbench.records.record import Record, clean

_VOCAB = ("time", "year", "people", "way", "day", "man", "thing", "woman", "life", "child",
          "world", "school", "state", "family", "student", "group", "country", "problem",
          "hand", "part", "place", "case", "week", "company", "system", "program", "question",
          "work", "number", "night", "point", "home", "water", "room", "mother", "area")


@dataclass
class ContextPlan:
    """`llmbench context`: the target, the prompt lengths to try and the TTFT bound."""
    target: Any
    params: Any
    timeouts: Any
    start_words: int = 256
    max_words: int = 1_000_000
    ttft_limit_s: float = 120.0
    server_limit: int | None = None           # the server's own, when it says one
    limit_name: str | None = None             # what it calls it (n_ctx per slot, max_model_len)


@dataclass
class Probe:
    """One prompt length tried: its record, and whether it was served in time."""
    words: int
    rec: Record
    good: bool = False          # served, within the TTFT bound, not cut

    @property
    def served(self) -> bool:
        return self.rec.ok

    @property
    def tokens(self) -> int | None:
        return self.rec.prompt_tokens


@dataclass
class ContextResult:
    """The prompt lengths tried: the longest served and the shortest that was not."""
    probes: list[Probe] = field(default_factory=list)
    longest: Probe | None = None              # the longest prompt served
    stopped: Probe | None = None              # the shortest that was not
    why: str = ""                             # what stopped it, in words
    truncated: bool = False                   # the server cut prompts instead of refusing

    def prefill_tokens_per_s(self) -> float | None:
        """The slope of TTFT over prompt tokens (least squares over the served probes)."""
        pts = [(p.tokens, p.rec.ttft) for p in self.probes
               if p.good and p.tokens and p.rec.ttft is not None]
        if len(pts) < 2 or len({n for n, _ in pts}) < 2:
            return None
        n_mean = sum(n for n, _ in pts) / len(pts)
        t_mean = sum(t for _, t in pts) / len(pts)
        cov = sum((n - n_mean) * (t - t_mean) for n, t in pts)
        var = sum((n - n_mean) ** 2 for n, _ in pts)
        slope = cov / var if var else 0.0          # seconds per token
        return 1.0 / slope if slope > 0 else None


def prompt_of(words: int) -> str:
    """``words`` words, the first one new each time (no prefix cache shortens it): a
    six-digit number, so every tokenizer counts it the same each time."""
    head = str(100_000 + secrets.randbelow(900_000))
    body = [_VOCAB[(i * 7) % len(_VOCAB)] for i in range(max(words - 1, 0))]
    return " ".join([head, *body])


def why_not(rec: Record, limit_s: float) -> str:
    """What stopped a probe, in words."""
    from llmbench.servers.refusal import said
    text = said(rec.error, 70) if rec.error else ""
    low = (rec.error or "").lower()
    if rec.ok:
        return f"its TTFT {rec.ttft:.1f} s passed the bound ({limit_s:g} s, --ttft-limit)"
    if "out of memory" in low or "oom" in low.split() or "cuda error" in low:
        return f"the server ran out of memory ({rec.status}: {text})"
    if rec.error_kind == "http_status" and rec.status is not None and 400 <= rec.status < 500:
        return f"the server refused it (HTTP {rec.status}: {text or 'no reason given'})"
    if rec.error_kind in ("timeout_first_token", "timeout_total", "timeout_idle"):
        return f"no answer in time ({rec.error_kind})"
    return f"the server failed it ({rec.error_kind}{f' {rec.status}' if rec.status else ''}: " \
           f"{text})"


async def _send(client: Any, words: int, n: int, target: Any) -> Probe:
    rec = Record(f"ctx-{n}", scheduled=perf_counter(), user=0, turn=0)
    await client.send([{"role": "user", "content": prompt_of(words)}], 1, rec, abandon=False)
    clean(rec, target.secrets())
    return Probe(words, rec)


async def measure(plan: ContextPlan, say: Callable[[str], None]) -> ContextResult:
    from llmbench.client.request import Client
    out = ContextResult()

    def ok(p: Probe) -> bool:
        if not p.served or (p.rec.ttft or 0.0) > plan.ttft_limit_s:
            return False
        # a prompt cut by the server: its count did not grow with a tenth more words or more
        # (a few words more may tokenize to as many tokens)
        prior = [q for q in out.probes if q.served and q.words <= p.words * 0.9 and q.tokens]
        if prior and p.tokens is not None and p.tokens <= max(q.tokens or 0 for q in prior):
            out.truncated = True
            return False
        return True

    async with Client(plan.target, plan.params, plan.timeouts) as client:
        n = 0

        async def probe(words: int) -> bool:
            nonlocal n
            n += 1
            p = await _send(client, words, n, plan.target)
            out.probes.append(p)
            good = p.good = ok(p)
            say(row(p, good, out.truncated and p.served and not good))
            if good and (out.longest is None or p.words > out.longest.words):
                out.longest = p
            elif not good and (out.stopped is None or p.words < out.stopped.words):
                out.stopped = p
            return good

        lo, hi = 0, None
        words = max(plan.start_words, 1)
        while words <= plan.max_words:              # doubling
            if not await probe(words):
                hi = words
                break
            lo = words
            words *= 2
        if hi is not None:
            while hi - lo > 1:                      # bisecting, to one word
                mid = (lo + hi) // 2
                if await probe(mid):
                    lo = mid
                else:
                    hi = mid
    if out.stopped is not None:
        out.why = ("the server cut the prompt (its count stopped growing): it truncates "
                   "prompts over its context instead of refusing them" if out.truncated
                   and out.stopped.served else why_not(out.stopped.rec, plan.ttft_limit_s))
    return out


def row(p: Probe, good: bool, cut: bool = False) -> str:
    tokens = f"{p.tokens:>8}" if p.tokens is not None else f"{'-':>8}"
    ttft = f"{p.rec.ttft:8.2f}s" if p.rec.ttft is not None else f"{'-':>9}"
    what = "served" if good else ("cut by the server" if cut else "over the bound")
    if not p.served:
        what = f"not served ({p.rec.error_kind}{f' {p.rec.status}' if p.rec.status else ''})"
    return f"{p.words:>8} {tokens} {ttft}  {what}"


def summary(plan: ContextPlan, r: ContextResult) -> list[str]:
    """The closing lines (80 columns)."""
    out = []
    limit = (f" (the server's limit: {plan.server_limit})" if plan.server_limit else "")
    if r.longest is None:
        out.append("no prompt was served" + limit)
    else:
        out.append(f"longest prompt served: {r.longest.tokens} tokens{limit}")
    if r.stopped is not None:
        import textwrap
        out += textwrap.wrap(f"the next, about {r.stopped.tokens or _estimate(r, r.stopped.words)}"
                             f" tokens: {r.why}", 78, subsequent_indent="  ",
                             break_on_hyphens=False)
    else:
        out.append(f"every prompt up to {plan.max_words} words was served (--up-to-words)")
    rate = r.prefill_tokens_per_s()
    served = [p for p in r.probes if p.good and p.tokens and p.rec.ttft is not None]
    if rate is not None and served:
        a = min(served, key=lambda p: p.tokens or 0)
        b = max(served, key=lambda p: p.tokens or 0)
        out.append(f"prefill: about {rate:,.0f} tokens/s (TTFT {a.rec.ttft:.2f} s at {a.tokens} "
                   f"tokens, {b.rec.ttft:.2f} s at {b.tokens})")
    return out


def _estimate(r: ContextResult, words: int) -> int:
    """Tokens for ``words`` words, from the served probes' tokens per word."""
    served = [p for p in r.probes if p.served and p.tokens]
    if not served:
        return words
    per = max(served, key=lambda p: p.words)
    return round(words * (per.tokens or 0) / per.words)


def perform(plan: ContextPlan, say: Callable[[str], None]) -> ContextResult:
    say(f"{'words':>8} {'tokens':>8} {'TTFT':>9}  result (tokens: the server's count)")
    result = asyncio.run(measure(plan, say))
    for line in summary(plan, result):
        say(line)
    return result


if TYPE_CHECKING:
    from llmbench.specs.context import ContextSpec


def perform_spec(opts: ContextSpec, say: Any) -> int:
    """The longest prompt the server serves (no --url: one on this machine, else the
    mock); the exit code."""
    from llmbench.commands.local import one_server
    from llmbench.client.request import Timeouts
    with one_server(opts, "use a chat or completions API; an embeddings API has no first "
                    "token to time") as (spec, tgt, params, timeouts):
        limit_s = float(spec.ttft_limit)
        # a prompt over the bound is answered "too long" when its first token comes, or
        # by the timeout a little after the bound
        timeouts = Timeouts(timeouts.connect_s, max(timeouts.first_token_s, limit_s * 1.5),
                            timeouts.idle_s, max(timeouts.total_s, limit_s * 2))
        limit, name = server_limit(tgt)
        say(f"context of {tgt.model} at {tgt.shown(tgt.endpoint)}")
        say(f"the server says {name}: {limit} tokens" if limit else
            "the server does not say its context limit")
        plan = ContextPlan(tgt, params, timeouts, spec.from_words, spec.up_to_words, limit_s,
                           limit, name)
        result = perform(plan, say)
        return 0 if result.longest is not None else 1


# the server's own words for its limit, by the identity's key
LIMIT_NAMES = (("context_per_slot", "n_ctx per slot"), ("max_model_len", "max_model_len"),
               ("context_length", "its context length"))


def server_limit(target: Any) -> tuple[int | None, str | None]:
    """The server's own context limit and its name for it, when its pages say one."""
    import asyncio

    async def ask() -> dict[str, Any]:
        import aiohttp
        from llmbench.servers.local import identify_root
        async with aiohttp.ClientSession(trust_env=False) as session:
            headers = {k: v for k, v in target.request_headers().items()
                       if k != "content-type"}
            return await identify_root(session, target.server_root.rstrip("/"), 5.0, headers)
    try:
        ident = asyncio.run(ask())
    except Exception:                   # noqa: BLE001 - a server that says nothing
        return None, None
    for key, name in LIMIT_NAMES:
        v = ident.get(key)
        if isinstance(v, int) and v > 0:
            return v, name
    return None, None
