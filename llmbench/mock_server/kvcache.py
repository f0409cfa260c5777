"""The KV budget shared by all sessions (``--kv-tokens``): what a server under agents runs out of.

A server keeps the KV of the prompts it computed, so that a conversation's next turn, whose
prompt starts with the previous one and its reply, prefills only what is new. The budget is in
tokens, counted in blocks of ``block_tokens``; every rule below can be followed on paper:

- A prompt's *blocks* are its whole blocks of ``block_tokens`` tokens, each named by its tokens
  and the block before it (a chained hash, as vLLM's prefix cache): two prompts share a block
  only when they share everything before it too.
- A request's *cached tokens* are ``block_tokens`` times its leading blocks that are in the
  cache, at most ``(prompt - 1) // block_tokens`` blocks: the prompt's last token is always
  computed (it gives the first token's logits), as vLLM and llama.cpp do. The rest is
  prefilled at the mock's cost per uncached token (``prefill_ms_per_token``).
- Then every block of the prompt is in the cache, used now, and held (pinned) while the request
  runs. When it ends, the blocks of its prompt followed by its reply as the next turn will
  send it (``<|assistant|>`` and the reply's text) join the cache, used now, and nothing is held.
- Whenever the cache holds more blocks than the budget's ``kv_tokens // block_tokens``, the
  least recently used prefix that no running request holds is evicted whole: its last block
  and every block before it that it alone continues, up to where it joins a prefix another
  cached one shares (a system prompt the other sessions still use stays). Again until the
  cache fits. Held blocks are never evicted; when they alone exceed the budget, the cache
  holds more until they are released.

So with a budget for N sessions' contexts, N sessions taking turns find their whole previous
context cached; N + 1 or more taking turns in a round evict each other before they come back,
and every returning turn prefills its whole context again (LRU against a cycle longer than the
cache). tests/integration/test_mock_kv.py checks a mock over HTTP against this model, request by
request.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field


@dataclass(eq=False, slots=True)
class _Block:
    """One cached block of prompt tokens: the block before it, its depth, its last use."""
    parent: int | None      # the key of the block before it (None: the prompt's first)
    depth: int              # blocks before it
    last: int = 0           # when it was last used (the cache's clock)
    pins: int = 0           # running requests that hold it
    children: int = 0       # cached blocks that continue it


@dataclass
class Held:
    """What one request holds while it runs: its prompt's blocks, and the tokens after the last
    whole block (the start of the next block, which its reply continues)."""
    keys: list[int]
    tail: list[str] = field(default_factory=list)


class KvCache:
    def __init__(self, budget_tokens: int, block_tokens: int) -> None:
        self.block = max(block_tokens, 1)
        self.capacity = budget_tokens // self.block       # in blocks
        self._blocks: dict[int, _Block] = {}
        self._clock = 0
        self._heap: list[tuple[int, int, int, int]] = []  # (last, -depth, order, key)
        self._order = 0
        self.pinned = 0                                   # blocks held by running requests
        self.evicted_total = 0                            # blocks evicted since the start

    def __len__(self) -> int:
        return len(self._blocks)

    @property
    def tokens(self) -> int:
        """Tokens the cache holds (running requests' prompts and cached prefixes)."""
        return len(self._blocks) * self.block

    def keys(self, tokens: list[str], after: int | None = None) -> list[int]:
        """The chained keys of the whole blocks of ``tokens``, continuing the block ``after``."""
        b = self.block
        out = []
        h = after
        for i in range(0, len(tokens) - b + 1, b):
            h = hash((h, tuple(tokens[i:i + b])))
            out.append(h)
        return out

    def cached(self, keys: list[int], limit: int) -> int:
        """How many leading blocks of ``keys`` are cached, at most ``limit``."""
        n = 0
        blocks = self._blocks
        for k in keys[:max(limit, 0)]:
            if k not in blocks:
                break
            n += 1
        return n

    def hold(self, keys: list[int]) -> None:
        """A request starts: its prompt's blocks are cached (those missing are added), used
        now, and held until ``release``."""
        self._clock += 1
        self._touch(keys, pin=1)
        self._evict()

    def release(self, held: Held, more: list[int]) -> None:
        """The request ended: ``more`` (the blocks its reply completes, after its prompt's) join
        the cache, the whole chain is used now, and nothing of it is held any longer."""
        self._clock += 1
        self._touch(held.keys + more, pin=0)
        for k in held.keys:
            node = self._blocks.get(k)
            if node is not None and node.pins > 0:
                node.pins -= 1
                if node.pins == 0:
                    self.pinned -= 1
                    self._candidate(k, node)
        self._evict()

    def clear(self) -> int:
        """Drop every block no running request holds (a cache reset); the tokens dropped."""
        keep = {k: node for k, node in self._blocks.items() if node.pins}
        # a held block's chain up to the root is held too (hold pins every block of a prompt)
        for node in keep.values():
            node.children = 0
        for k, node in keep.items():
            if node.parent is not None and node.parent in keep:
                keep[node.parent].children += 1
        dropped = len(self._blocks) - len(keep)
        self._blocks = keep
        self._heap = []
        self.evicted_total += dropped
        return dropped * self.block

    def resize(self, budget_tokens: int) -> None:
        self.capacity = budget_tokens // self.block
        self._evict()

    # -- inside --------------------------------------------------------------------------------
    def _touch(self, keys: list[int], pin: int) -> None:
        blocks = self._blocks
        parent: int | None = None
        for depth, k in enumerate(keys):
            node = blocks.get(k)
            if node is None:
                node = blocks[k] = _Block(parent, depth)
                if parent is not None:
                    blocks[parent].children += 1
            node.last = self._clock
            if pin:
                if node.pins == 0:
                    self.pinned += 1
                node.pins += 1
            parent = k
        if keys and not pin:
            self._candidate(keys[-1], blocks[keys[-1]])

    def _candidate(self, key: int, node: _Block) -> None:
        """A block that may be evictable now (checked again when popped)."""
        if node.pins == 0 and node.children == 0:
            self._order += 1
            heapq.heappush(self._heap, (node.last, -node.depth, self._order, key))

    def _evict(self) -> None:
        blocks = self._blocks
        heap = self._heap
        while len(blocks) > self.capacity and heap:
            last, _, _, key = heapq.heappop(heap)
            node = blocks.get(key)
            if node is None or node.last != last or node.pins or node.children:
                continue                        # a stale entry: used, held or continued since
            # the whole prefix, from its end up to the block another cached prefix shares
            while True:
                del blocks[key]
                self.evicted_total += 1
                if node.parent is None:
                    break
                key, node = node.parent, blocks[node.parent]
                node.children -= 1
                if node.children or node.pins:
                    self._candidate(key, node)
                    break
        if len(heap) > 4 * len(blocks) + 64:    # stale entries: rebuild from the leaves
            self._heap = []
            for key, node in blocks.items():
                self._candidate(key, node)
