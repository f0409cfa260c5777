"""``llmbench context``'s spec: how far the prompt may grow, and the TTFT bound
(llmbench/commands/context.py). The target options are run's: with no --url the server on this
machine, else the built-in mock."""

from __future__ import annotations

import dataclasses
from typing import Iterator, Any

from llmbench.commands.groups import RequestOpts, ServerOpts, TargetOpts
from llmbench.commands.options import INT, P_LOAD, SECONDS_ABOVE_0, UsageError, option

# the server's own words for its limit, by the identity's key
LIMIT_NAMES = (("context_per_slot", "n_ctx per slot"), ("max_model_len", "max_model_len"),
               ("context_length", "its context length"))


@dataclasses.dataclass(kw_only=True)
class ContextSpec(RequestOpts, ServerOpts, TargetOpts):
    """``llmbench context``: grow the prompt (doubling, then bisecting to one word) until the
    server refuses it, fails, runs out of memory or its TTFT passes ``ttft_limit``; the
    longest prompt served, what stopped the next, the server's own limit when it says one,
    and TTFT against prompt length (the prefill rate)."""

    command = "context"

    from_words: int = option("Words in the first prompt (then doubled).", P_LOAD, kind=INT, default=256)
    up_to_words: int = option("Most words a prompt may have.", P_LOAD, kind=INT, default=1_000_000)
    ttft_limit: Any = option("A prompt whose first token takes longer than this is too long, e.g. 60s.", P_LOAD, kind=SECONDS_ABOVE_0, default="120s", metavar="DURATION")

    def _check(self) -> Iterator[str]:
        if not 1 <= self.from_words <= 10_000_000:
            yield f"--from-words {self.from_words}: give 1 to 10000000 words"
        if not self.from_words <= self.up_to_words <= 10_000_000:
            yield (f"--up-to-words {self.up_to_words}: give --from-words "
                   f"({self.from_words}) to 10000000 words")

    def perform(self, say: Any) -> int:
        from llmbench.commands import context
        from llmbench.commands.local import with_local_server
        from llmbench.commands.spec import MaybeMock, make_target, prepare
        from llmbench.client.request import Timeouts
        spec = with_local_server(self)
        prepare(spec)
        with MaybeMock(spec.url, demo=spec.demo) as (url, model):
            tgt = make_target(spec, url, spec.model or model)
            from llmbench import wire
            if wire.get(tgt.api).output == "embeddings":
                raise UsageError(f"--api {tgt.api}: use a chat or completions API; an "
                                 "embeddings API has no first token to time")
            params, timeouts = spec.build_request(api=tgt.api)
            limit_s = float(spec.ttft_limit)
            # a prompt over the bound is answered "too long" when its first token comes, or
            # by the timeout a little after the bound
            timeouts = Timeouts(timeouts.connect_s, max(timeouts.first_token_s, limit_s * 1.5),
                                timeouts.idle_s, max(timeouts.total_s, limit_s * 2))
            limit, name = server_limit(tgt)
            say(f"context of {tgt.model} at {tgt.shown(tgt.endpoint)}")
            say(f"the server says {name}: {limit} tokens" if limit else
                "the server does not say its context limit")
            plan = context.ContextPlan(tgt, params, timeouts, spec.from_words,
                                       spec.up_to_words, limit_s, limit, name)
            result = context.perform(plan, say)
            return 0 if result.longest is not None else 1


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
