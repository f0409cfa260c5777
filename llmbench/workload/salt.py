"""The per-run prompt salt: a few words at the start of every conversation, new for every run.

A server's prefix cache keeps the prompts of the run before (the same seed sends the same
prompts: a second run found 93 % of its prompt tokens cached on llama.cpp and "won" a
comparison for free). docs/commands.md ("Prompts are new to the server in every run") tells
the rest as a user sees it, with --same-prompts and --prompt-salt; what the code keeps to:

- The salt is ``SALT_WORDS`` random words, each one token by the run's tokenizer, first in each
  conversation's first message: a prefix cache matches from the first token on, so it finds
  nothing of an earlier run, and a prefix shared on purpose is still shared within the run.
- Prompts llmbench writes to a length keep that length with the salt included (it takes the
  place of as many of their tokens); prompts given as text get the salt in front, counted.
- Lap k > 0 through the pool begins with ``Salt.for_lap(k)``, drawn deterministically from the
  run's salt and k (with one salt for every lap the server found lap 2 in its cache and TTFT
  got better the longer the ramp ran); ``--prompt-salt`` with a run's salt replays its laps.
- The probe gives each path its own salt (a path word in front of the run's), so neither path
  reads the other's cache.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import Any

from llmbench.workload.words import WORDS

SALT_WORDS = 4                 # 4 words of a ~100-word vocabulary: 10^8 salts
MAX_SALT_CHARS = 200           # --prompt-salt: a few words, not a prompt


@dataclass(frozen=True)
class Salt:
    """What goes first in every conversation of one target: ``text`` ("" for none), its
    ``tokens`` by the run's tokenizer, and where it came from ("per run", "--prompt-salt",
    "none (--same-prompts)" or "none")."""

    text: str = ""
    tokens: int = 0
    source: str = "none"              # a workload built without options (the API's internals)
    # the one-token words of the run's tokenizer (vocabulary): what a lap's salt is drawn from
    vocab: tuple[str, ...] = field(default=(), repr=False, compare=False)

    def __bool__(self) -> bool:
        return bool(self.text)

    def for_lap(self, lap: int) -> "Salt":
        """The salt of pass ``lap`` through the conversations (0: this one; module doc): as
        many one-token words as this salt has words when made of them (a per-run salt, a
        probe path's), else as it has tokens, so a prompt written to a length keeps it."""
        if lap <= 0 or not self.text:
            return self
        vocab = sorted(set(self.vocab or WORDS))
        rng = random.Random(f"{self.text}\x00lap {lap}")
        words = self.text.split()
        n = len(words) if set(words) <= set(vocab) else max(self.tokens, 1)
        text = " ".join(rng.choice(vocab) for _ in range(n))
        while text.split()[0] == self.text.split()[0] and len(vocab) > 1:
            # never the same first token as lap 0's: a cache would match it (one token, but
            # a lap that starts as the first did is not the new prompt it is said to be)
            text = " ".join([rng.choice(vocab)] + text.split()[1:])
        return Salt(text, self.tokens, self.source, self.vocab)

    def with_word(self, word: str) -> "Salt":
        """This salt with one more (one-token) word in front: a probe path's own salt."""
        return replace(self, text=f"{word} {self.text}".strip(), tokens=self.tokens + 1)

    def apply(self, messages: list[dict[str, Any]], batch: bool = False) -> list[dict[str, Any]]:
        """``messages`` with the salt at the start of the first one (of every one when they are
        a batch of separate inputs: each starts a prompt of its own). A new list; the turn's
        messages are never changed."""
        if not self.text:
            return messages
        out = list(messages)
        for i in range(len(out) if batch else min(len(out), 1)):
            out[i] = {**out[i], "content": _salted(out[i].get("content"), self.text)}
        return out

    def describe(self) -> dict[str, Any]:
        """run.json's salt; ``per_lap``: lap k > 0 begins with ``for_lap(k)`` of this text."""
        d: dict[str, Any] = {"text": self.text, "tokens": self.tokens, "source": self.source}
        if self.text:
            d["per_lap"] = True
        return d


def _salted(content: Any, text: str) -> Any:
    if isinstance(content, str):
        return f"{text} {content}"
    if isinstance(content, list):           # content parts (text with images): the first text
        parts = list(content)
        for i, p in enumerate(parts):
            if isinstance(p, dict) and p.get("type") == "text":
                parts[i] = {**p, "text": f"{text} {p.get('text', '')}"}
                return parts
        return [{"type": "text", "text": text}] + parts
    return content


def vocabulary(tok: Any) -> tuple[str, ...]:
    """Words that are one token by ``tok`` with and without a space before them: the
    server tokenizer's unit words when it has them, else the synthetic words that count so."""
    if getattr(tok, "unit_words", None):
        return tuple(tok.unit_words)
    if getattr(tok, "server", None) is not None:
        return WORDS                        # no unit words: counted once below, as they are
    try:
        words = tuple(w for w in WORDS if tok.count(w) == 1 and tok.count(" " + w) == 1)
    except Exception:                       # noqa: BLE001 - a tokenizer that cannot count
        words = ()
    return words if len(words) >= 16 else WORDS


def new_salt(tok: Any) -> Salt:
    """A fresh salt for one run, drawn with the system's randomness."""
    vocab = vocabulary(tok)
    rng = random.SystemRandom()
    text = " ".join(rng.choice(vocab) for _ in range(SALT_WORDS))
    return Salt(text, count(tok, text), "per run", tuple(vocab))


def given_salt(tok: Any, text: str) -> Salt:
    """--prompt-salt TEXT."""
    return Salt(text, count(tok, text), "--prompt-salt", tuple(vocabulary(tok)))


def path_words(tok: Any, n: int, salt: Salt) -> list[str]:
    """``n`` distinct one-token words for a probe's paths, the same for the same salt."""
    vocab = sorted(set(vocabulary(tok)))
    rng = random.Random(salt.text or "no salt")
    return rng.sample(vocab, n)


def count(tok: Any, text: str) -> int:
    """The salt's tokens as it is sent (followed by a space and the prompt)."""
    if not text:
        return 0
    words = text.split()
    unit = set(getattr(tok, "unit_words", ()) or ())
    if unit and all(w in unit for w in words):
        return len(words)                   # one token each, as the server confirmed
    try:
        return int(tok.count(text))
    except Exception:                       # noqa: BLE001 - a server that cannot count now
        return len(words)


def check_text(text: str) -> str | None:
    """Why --prompt-salt TEXT cannot be used, or None."""
    if not text.strip():
        return "is empty; give a few words, or --same-prompts for no salt"
    if len(text) > MAX_SALT_CHARS:
        return f"is {len(text)} characters; a salt is a few words (at most {MAX_SALT_CHARS})"
    if any(ord(ch) < 32 for ch in text):
        return "holds a control character (a newline?); give words on one line"
    return None
