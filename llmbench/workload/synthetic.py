"""Synthetic prompts of exact token lengths; every prompt starts differently by default.

A server's prefix cache makes a repeated prompt look fast, so each request gets a unique
opening unless ``shared_prefix_tokens`` asks for shared prefixes on purpose.
"""

from __future__ import annotations

import random

from .model import Conversation, Turn
from .tokenizer import Tokenizer

WORDS = ("time year people way day man thing woman life child world school state family student "
         "group country problem hand part place case week company system program question work "
         "government number night point home water room mother area money story fact month lot "
         "right study book eye job word business issue side kind head house service friend father "
         "power hour game line end member law car city community name president team minute idea "
         "kid body information back parent face others level office door health person art war "
         "history party result change morning reason research girl guy moment air teacher force "
         "education").split()


def _words(rng: random.Random, n: int) -> list[str]:
    return [rng.choice(WORDS) for _ in range(n)]


def text_of_tokens(tok: Tokenizer, rng: random.Random, n: int, head: str = "") -> str:
    """Text that is exactly ``n`` tokens long by ``tok`` (``head`` included), when reachable."""
    if n <= 0:
        return head
    words = _words(rng, max(n, 1))
    text = (head + " " + " ".join(words)).strip()
    ids = tok.encode(text)
    for _ in range(8):
        if len(ids) == n:
            return text
        if len(ids) > n:
            if tok.approximate:
                pieces = text.split(" ")
                text = " ".join(pieces[: max(len(pieces) - (len(ids) - n), 1)])
            else:
                text = tok.decode(ids[:n])
        else:
            text = text + " " + " ".join(_words(rng, n - len(ids)))
        ids = tok.encode(text)
    return text


def synthetic(tok: Tokenizer, count: int, prompt_tokens: tuple[int, int],
              output_tokens: tuple[int, int] | None, seed: int, turns: int = 1,
              shared_prefix_tokens: int = 0, prefixes: int = 1, words: int = 0,
              unique_prefix: bool = True) -> list[Conversation]:
    """``count`` conversations of ``turns`` user turns each."""
    rng = random.Random(seed)
    shared = [text_of_tokens(tok, random.Random(seed * 1000 + i), shared_prefix_tokens)
              for i in range(max(prefixes, 1))] if shared_prefix_tokens > 0 else []

    def draw(lo_hi: tuple[int, int]) -> int:
        lo, hi = lo_hi
        return lo if lo >= hi else rng.randint(lo, hi)

    convs = []
    for c in range(count):
        turn_list = []
        for t in range(turns):
            head = ""
            if shared:
                head = shared[rng.randrange(len(shared))] if t == 0 else ""
            if unique_prefix:
                head = (head + f" [{seed}-{c}-{t}]").strip()
            if words:
                text = (head + " " + " ".join(_words(rng, words))).strip()
            else:
                text = text_of_tokens(tok, rng, draw(prompt_tokens), head)
            out = draw(output_tokens) if output_tokens else None
            turn_list.append(Turn(text, out, tok.count(text)))
        convs.append(Conversation(f"syn-{c}", tuple(turn_list)))
    return convs


def vllm_random(tok: Tokenizer, count: int, input_len: int, output_len: int, range_ratio: float,
                prefix_len: int, seed: int) -> list[Conversation]:
    """vLLM's ``random`` dataset: lengths uniform in [len*(1-r), len*(1+r)], a common prefix of
    ``prefix_len`` tokens, and a per-request offset so no two prompts start alike past it."""
    rng = random.Random(seed)
    prefix = text_of_tokens(tok, random.Random(seed + 7919), prefix_len) if prefix_len else ""
    convs = []
    for i in range(count):
        lo_in, hi_in = int(input_len * (1 - range_ratio)), int(input_len * (1 + range_ratio))
        lo_out, hi_out = int(output_len * (1 - range_ratio)), int(output_len * (1 + range_ratio))
        n_in = rng.randint(max(lo_in, 1), max(hi_in, 1))
        n_out = rng.randint(max(lo_out, 1), max(hi_out, 1))
        body = text_of_tokens(tok, rng, n_in, f"{i}")
        text = (prefix + " " + body).strip() if prefix else body
        convs.append(Conversation(f"random-{i}", (Turn(text, n_out, tok.count(text)),)))
    return convs
