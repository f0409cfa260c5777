"""``llmbench chat``'s spec: one user, a few turns, the server's own figures per turn
(llmbench/commands/chat.py). The target options are run's and ramp's: with no --url the
server on this machine, else the built-in mock."""

from __future__ import annotations

import dataclasses
from typing import Iterator

from llmbench.specs.groups import RequestOpts, ServerOpts, TargetOpts
from llmbench.specs.options import INT, P_LOAD, option

MAX_TURNS = 50


@dataclasses.dataclass(kw_only=True)
class ChatSpec(RequestOpts, ServerOpts, TargetOpts):
    """``llmbench chat``'s options (what it prints: llmbench/commands/chat.py)."""

    command = "chat"

    replies: int = option("Replies to ask for: the turns of the conversation.", P_LOAD, kind=INT, default=3)
    reply_tokens: int = option("Longest reply asked for in each turn (max tokens).", P_LOAD, kind=INT, default=64)

    def _check(self) -> Iterator[str]:
        if not 1 <= self.replies <= MAX_TURNS:
            yield f"--replies {self.replies}: give 1 to {MAX_TURNS}"
        if not 1 <= self.reply_tokens <= 100_000:
            yield f"--reply-tokens {self.reply_tokens}: give 1 to 100000 tokens"
