"""``llmbench chat``'s spec: one user, a few turns, the server's own figures per turn
(llmbench/commands/chat.py). The target options are run's and ramp's: with no --url the
server on this machine, else the built-in mock."""

from __future__ import annotations

import dataclasses
from typing import Iterator, Any

from llmbench.commands.groups import RequestOpts, ServerOpts, TargetOpts
from llmbench.commands.options import INT, P_LOAD, UsageError, option

MAX_TURNS = 50


@dataclasses.dataclass(kw_only=True)
class ChatSpec(RequestOpts, ServerOpts, TargetOpts):
    """``llmbench chat``: a few turns of a real conversation with one user, printing each
    turn's TTFT, decode rate, prompt tokens and how many came from the server's cache, and the
    reply's first words. What to run before a ramp."""

    command = "chat"

    replies: int = option("Replies to ask for: the turns of the conversation.", P_LOAD, kind=INT, default=3)
    reply_tokens: int = option("Longest reply asked for in each turn (max tokens).", P_LOAD, kind=INT, default=64)

    def _check(self) -> Iterator[str]:
        if not 1 <= self.replies <= MAX_TURNS:
            yield f"--replies {self.replies}: give 1 to {MAX_TURNS}"
        if not 1 <= self.reply_tokens <= 100_000:
            yield f"--reply-tokens {self.reply_tokens}: give 1 to 100000 tokens"

    def perform(self, say: Any, fail: Any) -> int:
        from llmbench.commands import chat
        from llmbench.commands.local import with_local_server
        from llmbench.commands.spec import MaybeMock, make_target, prepare
        spec = with_local_server(self)
        prepare(spec)
        with MaybeMock(spec.url, demo=spec.demo) as (url, model):
            tgt = make_target(spec, url, spec.model or model)
            from llmbench import wire
            if wire.get(tgt.api).output == "embeddings":
                raise UsageError(f"--api {tgt.api}: an embeddings API has no conversation; "
                                 "chat with a chat API")
            params, timeouts = spec.build_request(api=tgt.api)
            say(f"chat with {tgt.model} at {tgt.shown(tgt.endpoint)}")
            code, _ = chat.perform(chat.ChatPlan(tgt, params, timeouts, spec.replies,
                                                 spec.reply_tokens), say, fail)
            return code
