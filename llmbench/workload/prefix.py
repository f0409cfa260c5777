"""A workload aimed at a prefix-cache hit ratio: every prompt is one of a few shared system
prompts (block-aligned) followed by a user message of its own.

A prompt of N tokens whose shared part is S tokens (S a multiple of the server's cache block)
has S tokens cached once that system prompt was sent, so the hit ratio is S / N. Each shared
prompt is sent once first (``warmup``: not counted), so the measured requests all find theirs.

The pieces are separate so a trace of lengths aims the same way (workload.traces).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from llmbench.workload.model import Conversation, Turn
from llmbench.workload.synthetic import _opening, prepare_unit_words, text_of_tokens
from llmbench.workload.tokenizer import Tokenizer

DEFAULT_BLOCK_TOKENS = 16     # vLLM's (and the mock's) KV-cache block


@dataclass(frozen=True)
class PrefixPlan:
    """--prefix-hit-ratio: how many prompt tokens to share, in blocks."""
    ratio: float                  # the target: fraction of prompt tokens cached
    block_tokens: int
    shared_tokens: int            # per prompt, a multiple of block_tokens
    prefixes: int                 # distinct shared system prompts

    def to_dict(self) -> dict[str, float | int]:
        return {"target": self.ratio, "block_tokens": self.block_tokens,
                "shared_tokens": self.shared_tokens, "prefixes": self.prefixes}


def aligned_shared_tokens(ratio: float, prompt_tokens: int, block_tokens: int) -> int:
    """The shared part of a prompt of ``prompt_tokens`` for ``ratio``, rounded to whole blocks
    (a cache reuses whole blocks only) and leaving at least one token of the prompt its own."""
    b = max(block_tokens, 1)
    shared = int(round(ratio * prompt_tokens / b)) * b
    while shared >= prompt_tokens and shared > 0:
        shared -= b
    return max(shared, 0)


def shared_texts(tok: Tokenizer, n: int, tokens: int, seed: int) -> list[str]:
    """``n`` distinct texts of ``tokens`` tokens each; distinct from their first token on."""
    return [text_of_tokens(tok, random.Random(seed * 7727 + k), tokens,
                           _opening(tok, seed + 1, 900_000 + k)) for k in range(n)]


def warmup_conversations(system: list[str], tok: Tokenizer, seed: int,
                         max_tokens: int | None) -> list[Conversation]:
    """One short request per shared system prompt: afterwards the cache holds each of them."""
    return [Conversation(f"prefix-warmup-{k}",
                         (Turn(text_of_tokens(tok, random.Random(seed + k), 8,
                                              _opening(tok, seed + 2, 800_000 + k)), max_tokens),),
                         system=s) for k, s in enumerate(system)]


def prefix_hit_workload(tok: Tokenizer, count: int, prompt_tokens: tuple[int, int],
                        output_tokens: tuple[int, int] | None, seed: int, ratio: float,
                        block_tokens: int = DEFAULT_BLOCK_TOKENS, prefixes: int = 1,
                        reserve: int = 0
                        ) -> tuple[list[Conversation], list[Conversation], PrefixPlan]:
    """(measured conversations, warm-up conversations, plan). With a tokenizer of one-token
    words each prompt's shared part is cut to its own length (the ratio holds per request);
    otherwise the shared length is set from the middle of the prompt range (on average).
    ``reserve``: the run's salt, which every request sends first, is part of the shared prefix,
    so that is ``reserve`` tokens shorter here (salt and system prompt stay block-aligned)."""
    prepare_unit_words(tok)
    lo, hi = prompt_tokens
    exact = bool(tok.unit_words)
    shared_n = aligned_shared_tokens(ratio, hi if exact else (lo + hi) // 2, block_tokens)
    plan = PrefixPlan(ratio, block_tokens, aligned_shared_tokens(ratio, (lo + hi) // 2,
                                                                 block_tokens), max(prefixes, 1))
    system = shared_texts(tok, plan.prefixes, max(shared_n - reserve, 1), seed) \
        if shared_n else []
    rng = random.Random(seed)
    convs = []
    for c in range(count):
        n = lo if lo >= hi else rng.randint(lo, hi)
        mine = system[c % len(system)] if system else None
        own_shared = shared_n
        if exact and mine is not None:
            # one word = one token: the first k words are the first k tokens, and whole blocks
            # of the longest shared prompt (the one warmed) are whole blocks of this one
            own_shared = aligned_shared_tokens(ratio, n, block_tokens)
            mine = " ".join(mine.split()[:max(own_shared - reserve, 1)]) if own_shared else None
        own = max(n - own_shared, 1)
        # no shared system prompt: the salt comes first in the user's own text
        text = text_of_tokens(tok, rng, own, _opening(tok, seed, c), 0 if mine else reserve)
        out = None
        if output_tokens:
            out = output_tokens[0] if output_tokens[0] >= output_tokens[1] else rng.randint(*output_tokens)
        count_n = len(text.split()) if exact else tok.count(text)
        convs.append(Conversation(f"prefix-{c}", (Turn(text, out, count_n),), system=mine))
    warm = warmup_conversations(system, tok, seed, output_tokens[0] if output_tokens else None)
    return convs, warm, plan
