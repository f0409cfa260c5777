"""Anonymise recorded requests: every text becomes synthetic text of the same token length,
consistently, so a recording keeps the structure a prefix cache sees and none of the words.

Text is cut into chunks of CHUNK_WORDS words from its start; each chunk is replaced by synthetic
words drawn with a generator seeded by a hash of the chunk (and the seed), as many tokens long as
the chunk by the recording's tokenizer. The same chunk always becomes the same replacement, so:
a shared system prompt stays shared, a growing history keeps its earlier messages verbatim, and
two prompts that share their first 100 words share their first 4 replaced chunks (the share is
kept to within one chunk). The synthetic words are nouns from workload/words.py picked at random:
the replacement shares no 4-word run with the original except by a chance a test bounds.

What is text in a request body: every string value, except the keys of STRUCTURE (roles, types,
ids, the model, stop reasons: they shape the request and say nothing of its content), and
images, whose data is replaced by a marker naming its size (``image:<hash>:<bytes>``): an image
is content, and a synthetic one of the same size is not built here.
"""

from __future__ import annotations

import hashlib
import random
import re
from typing import Any, Iterable, Iterator

from llmbench.workload.synthetic import text_of_tokens
from llmbench.workload.tokenizer import Tokenizer

CHUNK_WORDS = 24
_TAIL = re.compile(r"[.?!:;,]+\s*$")
STRUCTURE = frozenset({"role", "type", "model", "id", "tool_call_id", "tool_use_id", "call_id",
                       "finish_reason", "stop_reason", "media_type", "detail", "format",
                       "tool_choice", "previous_response_id", "object", "status",
                       "reasoning_effort", "service_tier"})
# keys whose strings are names: replaced by a short stable name (a function's name says what
# the tool does), the same everywhere it appears (a tool's definition and its calls)
NAMES = frozenset({"name"})
# keys whose values are images (data URIs or links)
IMAGES = frozenset({"url", "image_url", "data", "images"})
CACHE_MAX = 500_000          # replacements kept; past it the cache starts over (still consistent)


def _digest(text: str, seed: int) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16,
                           key=seed.to_bytes(8, "little", signed=True)).digest()


def chunks(text: str) -> list[str]:
    """``text`` in chunks of CHUNK_WORDS words, from its start (module doc)."""
    words = text.split()
    return [" ".join(words[i:i + CHUNK_WORDS]) for i in range(0, len(words), CHUNK_WORDS)]


class Counts:
    """Token counts of chunks, remembered: a growing history is counted once. ``prime`` counts
    the new ones of a request in one batch (a server tokenizer asks them on a few connections
    at once, not one call after another)."""

    def __init__(self, tok: Tokenizer) -> None:
        self.tok = tok
        self.known: dict[bytes, int] = {}

    def prime(self, texts: Iterable[str]) -> None:
        new: dict[bytes, str] = {}
        for t in texts:
            k = _digest(t, 0)
            if k not in self.known:
                new[k] = t
        if new:
            if len(self.known) + len(new) > CACHE_MAX:
                self.known.clear()
            self.known.update(zip(new, self.tok.count_many(list(new.values()))))

    def __call__(self, text: str) -> int:
        k = _digest(text, 0)
        n = self.known.get(k)
        if n is None:
            n = self.known[k] = self.tok.count(text)
        return n


def strings(v: Any, key: str | None = None) -> Iterator[str]:
    """The texts ``Anonymiser.value`` replaces by synthetic text (for ``Counts.prime``)."""
    if isinstance(v, str):
        if key not in STRUCTURE and key not in NAMES and key not in IMAGES \
                and not v.startswith("data:"):
            yield v
    elif isinstance(v, dict):
        for k, x in v.items():
            yield from strings(x, k)
    elif isinstance(v, list):
        if key != "required":
            for x in v:
                yield from strings(x, key if key in IMAGES else None)


class Anonymiser:
    """Replaces texts by synthetic ones of the same token length, the same way every time."""

    def __init__(self, tok: Tokenizer, seed: int = 0, counts: Counts | None = None) -> None:
        self.tok, self.seed = tok, seed
        self.counts = counts or Counts(tok)
        self._cache: dict[bytes, str] = {}

    def _chunk(self, chunk: str, n: int | None = None) -> str:
        key = _digest(chunk if n is None else f"{n}\x00{chunk}", self.seed)
        got = self._cache.get(key)
        if got is None:
            n = self.counts(chunk) if n is None else n
            got = text_of_tokens(self.tok, random.Random(_digest(chunk, self.seed)), n)
            if len(self._cache) >= CACHE_MAX:
                self._cache.clear()
            self._cache[key] = got
        return got

    def text(self, text: str) -> str:
        if not text.strip():
            return text
        # the text's closing punctuation is kept: a template puts its own text after the
        # message ("\n\n", an end-of-turn tag) and a tokenizer merges ".\n\n" into one
        # token where a word's end would not, so the prompt would grow a token per message
        m = _TAIL.search(text)
        tail = m.group(0) if m and m.start() > 0 else ""
        cs = chunks(text)
        # a chunk counted alone can differ by a token from the same words in the text (a
        # tokenizer merges across the cut): the last chunk takes up the difference, so the
        # whole text is as long as the original (the leading chunks, what prefixes share,
        # stay the same replacement everywhere)
        head = [self._chunk(c) for c in cs[:-1]]
        last = (self.counts(text) - sum(self.counts(c) for c in cs[:-1])
                - (self.counts(tail.strip()) if tail.strip() else 0))
        if len(cs) == 1 and not tail:
            return self._chunk(cs[0])
        return " ".join(head + [self._chunk(cs[-1], max(last, 1))]) + tail.strip()

    def name(self, name: str) -> str:
        return "tool_" + _digest(name, self.seed).hex()[:8]

    def body(self, body: dict[str, Any]) -> Any:
        """A request body, anonymised; its new chunks counted in one batch first."""
        self.counts.prime(x for t in strings(body) for x in [t, *chunks(t)]
                          + [m.group(0).strip() for m in [_TAIL.search(t)] if m])
        return self.value(body)

    def value(self, v: Any, key: str | None = None) -> Any:
        """A request body (or any part of it), anonymised."""
        if isinstance(v, str):
            if key in STRUCTURE:
                return v
            if key in NAMES:
                return self.name(v)
            if key in IMAGES or v.startswith("data:"):
                return f"image:{_digest(v, self.seed).hex()[:12]}:{len(v)}"
            return self.text(v)
        if isinstance(v, dict):
            out: dict[str, Any] = {}
            for k, x in v.items():
                if key == "properties" and isinstance(k, str):
                    k = self.name(k)      # a JSON schema's property names are content
                out[k] = self.value(x, k)
            return out
        if isinstance(v, list):
            if key == "required":       # a schema's required property names
                return [self.name(x) if isinstance(x, str) else x for x in v]
            return [self.value(x, key if key in IMAGES else None) for x in v]
        return v
