"""What a workload is: conversations of user turns, and the fingerprint of the exact prompts."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Turn:
    user: str
    max_tokens: int | None = None
    prompt_tokens: int | None = None     # the client's count of this turn's text


@dataclass(frozen=True)
class Conversation:
    id: str
    turns: tuple[Turn, ...]
    system: str | None = None


@dataclass
class Workload:
    conversations: list[Conversation]
    source: str
    tokenizer: str
    seed: int
    params: dict[str, Any] = field(default_factory=dict)   # sampling parameters that shape it
    warnings: list[str] = field(default_factory=list)
    tokenizer_info: dict[str, Any] = field(default_factory=dict)   # which, how exact, from where
    # sent before the measured requests and not counted (the prefix-hit workload's shared
    # prompts, so the cache holds them); the plan the workload was aimed by, if any
    warmup: list[Conversation] = field(default_factory=list)
    prefix: dict[str, Any] | None = None

    @property
    def fingerprint(self) -> str:
        """Same prompts, sampling parameters, seed and tokenizer -> same hash."""
        h = hashlib.sha256()
        head = {"tokenizer": self.tokenizer, "seed": self.seed, "params": self.params}
        h.update(json.dumps(head, sort_keys=True).encode())
        for c in self.conversations:
            h.update(b"\x00C" + (c.system or "").encode())
            for t in c.turns:
                h.update(b"\x00T" + t.user.encode() + b"\x00" + str(t.max_tokens).encode())
        return h.hexdigest()[:16]

    def describe(self) -> dict[str, Any]:
        return {"source": self.source, "tokenizer": self.tokenizer,
                "tokenizer_info": self.tokenizer_info, "seed": self.seed,
                "params": self.params, "conversations": len(self.conversations),
                "turns": sum(len(c.turns) for c in self.conversations),
                "fingerprint": self.fingerprint,
                **({"prefix_hit": self.prefix} if self.prefix else {})}


def messages_for(conv: Conversation, turn: int, replies: list[str]) -> list[dict[str, str]]:
    """The whole history a person would send at ``turn``: earlier turns with the real replies."""
    msgs: list[dict[str, str]] = []
    if conv.system:
        msgs.append({"role": "system", "content": conv.system})
    for i in range(turn):
        msgs.append({"role": "user", "content": conv.turns[i].user})
        msgs.append({"role": "assistant", "content": replies[i] if i < len(replies) else ""})
    msgs.append({"role": "user", "content": conv.turns[turn].user})
    return msgs
