"""Synthetic prompts of exact token lengths; every prompt starts differently by default.

A server's prefix cache makes a repeated prompt look fast, so each request gets a unique
opening unless ``shared_prefix_tokens`` asks for shared prefixes on purpose.
"""

from __future__ import annotations

import random
from typing import Callable

from llmbench.workload.model import Conversation, Made, Turn
from llmbench.workload import progress
from llmbench.workload.tokenizer import Tokenizer
from llmbench.workload.words import WORDS       # the one vocabulary, shared with the salt

UNIT_WORDS_MIN = 16   # fewer one-token words than this: build prompts token by token instead


def _words(rng: random.Random, n: int, vocab: tuple[str, ...] | None = None) -> list[str]:
    vocab = vocab or WORDS
    return [rng.choice(vocab) for _ in range(n)]


def prepare_unit_words(tok: Tokenizer) -> None:
    """For a server tokenizer: find the words that are one token with and without a leading
    space, and check that a run of them counts one token per word. Then a prompt of N such words
    is N tokens by construction, and the server is asked once per prompt (to verify) instead of
    several times (to trim). BPE tokenizers with a pre-tokenizer (GPT-2/Llama 3/Qwen style) and
    SentencePiece never merge across a space, so this holds for the models people serve."""
    if tok.server is None or tok.unit_words:
        return
    unit = tuple(_alone_one_token(tok, _one_token_each(tok, list(WORDS))))
    if len(unit) >= UNIT_WORDS_MIN and tok.count(" ".join(unit + unit[:3])) == len(unit) + 3:
        tok.unit_words = unit


def _one_token_each(tok: Tokenizer, words: list[str]) -> list[str]:
    """The words that are one token with a leading space, asked of the server a group at a
    time: no merge across a space (prepare_unit_words) makes " w1 w2 ... wn" exactly the sum
    of its words' counts, each at least 1, so n tokens means one each. A group that is not
    is halved (the halves asked at once) until its words are asked alone: one call for the
    common words of a real model's vocabulary instead of one per word (those calls were most
    of a run's start-up)."""
    ok: set[str] = set()
    groups = [words] if words else []
    while groups:
        halves = []
        for g, n in zip(groups, tok.count_many([" " + " ".join(g) for g in groups])):
            if n == len(g):
                ok.update(g)
            elif len(g) > 1:
                halves += [g[:len(g) // 2], g[len(g) // 2:]]
        groups = halves
    return [w for w in words if w in ok]


def _alone_one_token(tok: Tokenizer, words: list[str]) -> list[str]:
    """Of ``words`` (one token each after a space), those that are one token with nothing
    before them too, as a prompt's first word is. Asked as lines in 3 calls, not one per word
    (~100 calls were ~10 ms of a run's start-up CPU, issue 50 §2): where a line break counts
    the same wherever it is (BPE pre-tokenizers split at it: GPT-2, Llama 3, Qwen; the mock),
    "w1\\nw2..." counts the words' tokens plus the breaks', so its count says whether each word
    is one token. A tokenizer that reads a text's first word apart from the same word after a
    break (SentencePiece) does not add up, and each word is asked alone. A word kept that is
    not one token alone is caught by the server's recount of the prompts (``_server_counts``),
    which then counts and refits every one."""
    if not words:
        return []
    first = words[0]
    one, two, lines = tok.count_many([first, f"{first}\n{first}", "\n".join(words)])
    per_break = two - 2 * one
    if one == 1 and per_break >= 0 and lines == len(words) + (len(words) - 1) * per_break:
        return words
    return [w for w, n in zip(words, tok.count_many(words)) if n == 1]


def _opening(tok: Tokenizer, seed: int, *ids: int) -> str:
    """A unique first few tokens per prompt, so a prefix cache cannot flatter the server."""
    if not tok.unit_words:
        return "[" + "-".join(str(i) for i in (seed, *ids)) + "]"
    # the ids as digits in base len(unit_words), least significant first: prompts differ at
    # their first token, the way block-hashing prefix caches see it
    k = len(tok.unit_words)
    out = []
    for i in (*ids, seed):
        while True:
            out.append(tok.unit_words[i % k])
            i //= k
            if i <= 0:          # a negative id's floor division never reaches 0
                break
    return " ".join(out)


def _fit(tok: Tokenizer, rng: random.Random, text: str, n: int) -> str:
    """Adjust ``text`` until it is ``n`` tokens by ``tok``, when reachable."""
    # an approximate tokenizer trims by words and only counts (its ids are a growing table)
    encode = (lambda t: range(tok.count(t))) if tok.approximate else tok.encode
    ids = encode(text)
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
            text = text + " " + " ".join(_words(rng, n - len(ids), tok.unit_words or None))
        ids = encode(text)
    return text


def text_of_tokens(tok: Tokenizer, rng: random.Random, n: int, head: str = "",
                   reserve: int = 0) -> str:
    """Text that is exactly ``n`` tokens long by ``tok`` (``head`` included), when reachable;
    ``reserve``: that many tokens fewer, left for the run's salt (workload.salt), with the
    words drawn as for ``n``: the random generator moves the same way with or without a salt,
    so the same seed makes the same lengths and turns whatever the salt."""
    if n <= 0:
        return head
    if tok.unit_words:
        # one token per word by construction (verified by the server afterwards)
        have = len(head.split())
        if have >= n:
            return head
        words = _words(rng, n - have, tok.unit_words)
        return (head + " " + " ".join(words[:max(n - have - reserve, 0)])).strip()
    words = _words(rng, max(n, 1))
    return _fit(tok, rng, (head + " " + " ".join(words)).strip(), max(n - reserve, 1))


VERIFY_SAMPLE = 256   # prompts built from one-token words that the server recounts


def _server_counts(tok: Tokenizer, convs: list[Conversation],
                   targets: dict[tuple[int, int], int], seed: int,
                   constructed: bool) -> list[Conversation]:
    """With a server tokenizer: have the server count the prompts (a few connections at once),
    refit any that is off, and keep the server's count as the turn's prompt length.

    Prompts built from one-token words are N words = N tokens by construction; whether that
    holds is a property of the tokenizer, not of a prompt, so a random sample of them is
    recounted (a ramp builds thousands of prompts and sends a fraction). One miscount in the
    sample and every prompt is recounted. ``constructed``: every prompt is one-token words only."""
    if tok.server is None:
        return convs
    flat = [(ci, ti) for ci, c in enumerate(convs) for ti in range(len(c.turns))]
    rng = random.Random(seed + 104729)
    check = flat
    if constructed and len(flat) > VERIFY_SAMPLE:
        check = sorted(rng.sample(flat, VERIFY_SAMPLE))
    def server_counts(keys: list) -> dict:
        # a prompt the server failed to count (after its retries) is left out: counted below
        # the way it was built, never refitted on a guess
        got = tok.server.count_many([convs[ci].turns[ti].user for ci, ti in keys], lenient=True)
        return {k: n for k, n in zip(keys, got) if n is not None}
    counts = server_counts(check)
    built = {k: len(convs[k[0]].turns[k[1]].user.split()) for k in check} if constructed else {}
    if check is not flat and any(counts[k] != built[k] for k in check if k in counts):
        check = flat
        counts = server_counts(flat)
    asked = set(check)
    turns = [list(c.turns) for c in convs]
    refit = 0
    for ci, ti in flat:
        t = turns[ci][ti]
        got = counts.get((ci, ti))
        if got is None and (ci, ti) in asked:
            got = len(t.user.split()) if constructed or tok.local is None \
                else tok.local.count(t.user)
            turns[ci][ti] = Turn(t.user, t.max_tokens, got)
            continue
        if got is None:
            got = len(t.user.split())          # one-token words, as the sample confirmed
        want = targets.get((ci, ti))
        text = t.user
        if want is not None and got != want:
            text = _fit(tok, rng, text, want)
            got = tok.count(text)
            refit += 1
        turns[ci][ti] = Turn(text, t.max_tokens, got)
    tok.verified = {"prompts": len(flat), "recounted_by_server": len(check), "refit": refit}
    return [Conversation(c.id, tuple(ts), c.system) for c, ts in zip(convs, turns)]


def synthetic(tok: Tokenizer, count: int, prompt_tokens: tuple[int, int],
              output_tokens: tuple[int, int] | None, seed: int, turns: int = 1,
              shared_prefix_tokens: int = 0, prefixes: int = 1, words: int = 0,
              reserve: int = 0) -> list[Conversation]:
    """``count`` conversations of ``turns`` user turns each; a first turn is ``reserve``
    tokens short of its length, left for the salt sent before it (workload.salt)."""
    if not words:
        prepare_unit_words(tok)
    recipe = dict(prompt_tokens=prompt_tokens, output_tokens=output_tokens, seed=seed,
                  turns=turns, shared_prefix_tokens=shared_prefix_tokens, prefixes=prefixes,
                  words=words, reserve=reserve)
    one, rng, targets = _maker(tok, **recipe)     # type: ignore[arg-type]
    if tok.server is None and count > LAZY_FROM:
        # not a million prompts of ~500 bytes held: made again from the seed as they are sent
        from llmbench.workload.tokenizer import rebuild_spec
        spec = rebuild_spec(tok)
        return Regenerated(one, rng, count, targets,       # type: ignore[return-value]
                           recipe=None if spec is None else (spec, recipe))
    progress.begin(progress.BUILDING, count * max(turns, 1))
    try:
        convs = [one(c) for c in range(count)]
    finally:
        progress.end()
    return _server_counts(tok, convs, targets, seed, bool(tok.unit_words) and not words)


def _maker(tok: Tokenizer, prompt_tokens: tuple[int, int], output_tokens: tuple[int, int] | None,
           seed: int, turns: int, shared_prefix_tokens: int, prefixes: int, words: int,
           reserve: int = 0) -> tuple[Callable[[int], Conversation], random.Random, dict]:
    """``one(c)``, conversation c made from the random generator it returns (called in order
    from its first state), and the per-prompt targets it fills (for a server's counts)."""
    rng = random.Random(seed)
    shared = [text_of_tokens(tok, random.Random(seed * 1000 + i), shared_prefix_tokens)
              for i in range(max(prefixes, 1))] if shared_prefix_tokens > 0 else []

    def draw(lo_hi: tuple[int, int]) -> int:
        lo, hi = lo_hi
        return lo if lo >= hi else rng.randint(lo, hi)

    server = tok.server is not None
    targets: dict[tuple[int, int], int] = {}

    def one(c: int) -> Conversation:
        turn_list = []
        for t in range(turns):
            head = ""
            if shared:
                head = shared[rng.randrange(len(shared))] if t == 0 else ""
            head = (head + " " + _opening(tok, seed, c, t)).strip()     # every prompt its own
            if words:
                text = (head + " " + " ".join(_words(rng, words))).strip()
            else:
                n = draw(prompt_tokens)
                r = reserve if t == 0 else 0
                targets[(c, t)] = max(n - r, 1)
                text = text_of_tokens(tok, rng, n, head, r)
            out = draw(output_tokens) if output_tokens else None
            # a server's count comes in one batch below, not one call per prompt here
            turn_list.append(Turn(text, out, None if server else tok.count(text)))
            progress.tick()
        return Conversation(f"syn-{c}", tuple(turn_list))
    return one, rng, targets


# conversations above which a synthetic workload with a local tokenizer is not kept in memory
LAZY_FROM = 50_000


class Regenerated(Made):
    """``count`` conversations made by ``one(c)`` in order from one random generator, kept as
    the generator's state every BLOCK conversations (a few KB) and made again a block at a
    time when asked for: the same prompts, bit for bit, as building them all up front.
    Shapes take conversations in order, so each block is made about once more.

    It pickles as its recipe (the tokenizer's --tokenizer spec, synthetic()'s arguments and
    the states; ``recipe``), not as conversations: a worker process (--workers) makes the
    same conversations again from it, and a million-conversation workload crosses to each
    worker in about 1 MB instead of 500. Without a recipe (a tokenizer that cannot be rebuilt
    by name) it pickles as the list of its conversations."""

    BLOCK = 4096

    def __init__(self, one: Callable[[int], Conversation], rng: random.Random, count: int,
                 scratch: dict, recipe: tuple[str, dict] | None = None,
                 states: list | None = None) -> None:
        self._one, self._rng, self._count, self._scratch = one, rng, count, scratch
        self._recipe = recipe
        if states is None:
            states = []
            for c in range(count):              # one pass now: the states, and errors early
                if c % self.BLOCK == 0:
                    states.append(rng.getstate())
                    scratch.clear()             # per-prompt targets: for server counting only
                one(c)
            scratch.clear()
        self._states = states
        self._cache: dict[int, list[Conversation]] = {}

    def __reduce__(self):  # type: ignore[override]
        if self._recipe is None:
            return (list, (list(self),))
        spec, args = self._recipe
        return (_regenerated, (spec, args, self._count, self._states))

    def __len__(self) -> int:
        return self._count

    def _block(self, b: int) -> list[Conversation]:
        got = self._cache.get(b)
        if got is None:
            self._rng.setstate(self._states[b])
            lo = b * self.BLOCK
            got = [self._one(c) for c in range(lo, min(lo + self.BLOCK, self._count))]
            self._scratch.clear()
            if len(self._cache) >= 2:       # the block in use and the one before it
                self._cache.pop(next(iter(self._cache)))
            self._cache[b] = got
        return got

    def made(self, i: int) -> Conversation:
        return self._block(i // self.BLOCK)[i % self.BLOCK]

    def __iter__(self):
        for b in range(len(self._states)):
            yield from self._block(b)


def _regenerated(spec: str, args: dict, count: int, states: list) -> Regenerated:
    """A Regenerated unpickled: tokenizer rebuilt from its spec, no pass over the conversations."""
    from llmbench.workload.tokenizer import load_tokenizer
    one, rng, targets = _maker(load_tokenizer(spec), **args)
    return Regenerated(one, rng, count, targets, (spec, args), states)


def vllm_random(tok: Tokenizer, count: int, input_len: int, output_len: int, range_ratio: float,
                prefix_len: int, seed: int, reserve: int = 0) -> list[Conversation]:
    """vLLM's ``random`` dataset: lengths uniform in [len*(1-r), len*(1+r)], a common prefix of
    ``prefix_len`` tokens, and a per-request offset so no two prompts start alike past it."""
    prepare_unit_words(tok)
    rng = random.Random(seed)
    prefix = text_of_tokens(tok, random.Random(seed + 7919), prefix_len) if prefix_len else ""
    n_prefix = len(prefix.split()) if tok.unit_words else 0
    server = tok.server is not None
    convs = []
    targets: dict[tuple[int, int], int] = {}
    for i in range(count):
        lo_in, hi_in = int(input_len * (1 - range_ratio)), int(input_len * (1 + range_ratio))
        lo_out, hi_out = int(output_len * (1 - range_ratio)), int(output_len * (1 + range_ratio))
        n_in = rng.randint(max(lo_in, 1), max(hi_in, 1))
        n_out = rng.randint(max(lo_out, 1), max(hi_out, 1))
        head = _opening(tok, seed, i) if tok.unit_words else f"{i}"
        body = text_of_tokens(tok, rng, n_in, head, reserve)
        text = (prefix + " " + body).strip() if prefix else body
        if tok.unit_words:
            targets[(i, 0)] = max(n_prefix + n_in - reserve, 1)
        convs.append(Conversation(f"random-{i}", (Turn(text, n_out,
                                                       None if server else tok.count(text)),)))
    return _server_counts(tok, convs, targets, seed, bool(tok.unit_words))
