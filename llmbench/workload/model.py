"""What a workload is: conversations of user turns, and the fingerprint of the exact prompts."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from llmbench.workload.salt import Salt


@dataclass(frozen=True)
class Turn:
    """One user message and the reply length asked for it."""
    user: str
    max_tokens: int | None = None
    prompt_tokens: int | None = None     # the client's count of this turn's text (images not
                                         # counted: only the server's usage counts them)
    images: tuple[str, ...] = ()         # image URLs (data URIs) sent with the text (--images)
    batch: tuple[str, ...] = ()          # more inputs sent in the same request (--batch-size:
                                         # embeddings); prompt_tokens counts them all


@dataclass(frozen=True)
class Conversation:
    """A conversation's turns, sent one after another by one user."""
    id: str
    turns: tuple[Turn, ...]
    system: str | None = None
    # passes through the pool before this draw (``draw``): lap k > 0 begins with its own salt
    # (Salt.for_lap); not part of the prompts' fingerprint
    lap: int = 0


def draw(convs: Sequence[Conversation], i: int) -> Conversation:
    """The ``i``-th conversation a run starts from its pool: the pool in order, again and again,
    each pass marked with its lap (a conversation of lap 0 is the pool's own object)."""
    n = len(convs)
    c = convs[i % n]
    lap = i // n
    return c if lap == 0 else replace(c, lap=lap)


class Made(Sequence[Conversation]):
    """Conversations made when asked for (``made(i)``, i from 0 to len - 1): a slice is a list
    of them, a negative index counts from the end, one out of range is an IndexError."""

    def made(self, i: int) -> Conversation:
        raise NotImplementedError

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        return self.made(i)


@dataclass
class Workload:
    """The conversations a run draws from, with where they came from."""
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
    # what goes first in each target's conversations (workload.salt): by target name ("main"
    # for run and ramp, "router" and "direct" for the probe); none: no salt (--same-prompts)
    salts: dict[str, Salt] = field(default_factory=dict)
    # the share of each prompt the workload shares with others of its run on purpose (a shared
    # prefix, the prefix-hit plan), when llmbench made it; None: unknown (files, traces)
    shared_share: float | None = None

    def salt_for(self, target: str = "main") -> Salt:
        """The salt of one target's conversations (no salt when none was made)."""
        if target in self.salts:
            return self.salts[target]
        return self.salts.get("main", Salt())

    @property
    def fingerprint(self) -> str:
        """Same prompts, sampling parameters, seed and tokenizer -> same hash."""
        h = hashlib.sha256()
        head = {"tokenizer": self.tokenizer, "seed": self.seed, "params": self.params}
        h.update(json.dumps(head, sort_keys=True).encode())
        seen: dict[int, bytes] = {}          # the images of a run are a small shared pool
        for c in self.conversations:
            h.update(b"\x00C" + (c.system or "").encode())
            for t in c.turns:
                h.update(b"\x00T" + t.user.encode() + b"\x00" + str(t.max_tokens).encode())
                for b in t.batch:
                    h.update(b"\x00B" + b.encode())
                for u in t.images:
                    d = seen.get(id(u))
                    if d is None:
                        d = seen[id(u)] = hashlib.sha256(u.encode()).digest()
                    h.update(b"\x00I" + d)
        return h.hexdigest()[:16]

    def describe_salt(self) -> dict[str, Any]:
        """run.json's "salt": what every conversation began with, per target."""
        first = self.salt_for(next(iter(self.salts), "main"))   # main, or the probe's router
        d = first.describe()
        if len(self.salts) > 1:
            d["by_target"] = {k: v.text for k, v in self.salts.items()}
        return d

    def describe(self) -> dict[str, Any]:
        # the fingerprint is the prompts' before the salt: two runs of one command differ in
        # their salts only, and compare calls them the same workload
        return {"source": self.source, "tokenizer": self.tokenizer, "salt": self.describe_salt(),
                "tokenizer_info": self.tokenizer_info, "seed": self.seed,
                "params": self.params, "conversations": len(self.conversations),
                "turns": sum(len(c.turns) for c in self.conversations),
                "fingerprint": self.fingerprint,
                **({"prefix_hit": self.prefix} if self.prefix else {})}


def user_content(t: Turn) -> Any:
    """A user turn's content: its text, or (with images) the chat API's content parts."""
    if not t.images:
        return t.user
    return [{"type": "text", "text": t.user}] + [
        {"type": "image_url", "image_url": {"url": u}} for u in t.images]


def messages_for(conv: Conversation, turn: int, replies: list[str]) -> list[dict[str, Any]]:
    """The whole history a person would send at ``turn``: earlier turns with the real replies
    (and their images: a chat client sends the whole conversation again)."""
    t = conv.turns[turn]
    if t.batch:                          # a batch of inputs (embeddings): no history, no system
        return [{"role": "user", "content": x} for x in (t.user,) + t.batch]
    msgs: list[dict[str, Any]] = []
    if conv.system:
        msgs.append({"role": "system", "content": conv.system})
    for i in range(turn):
        msgs.append({"role": "user", "content": user_content(conv.turns[i])})
        msgs.append({"role": "assistant", "content": replies[i] if i < len(replies) else ""})
    msgs.append({"role": "user", "content": user_content(conv.turns[turn])})
    return msgs
