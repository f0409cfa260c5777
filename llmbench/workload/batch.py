"""--batch-size N: N prompts in one request (the embeddings API takes a batch). The k-th request
carries the first turns of conversations kN .. kN+N-1, made on access, so a regenerated
synthetic workload stays regenerated."""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from llmbench.workload.model import Conversation, Turn


class Batched(Sequence):
    def __init__(self, convs: Sequence[Conversation], size: int) -> None:
        self.convs = convs
        self.size = size

    def __len__(self) -> int:
        return len(self.convs) // self.size

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        firsts: list[Turn] = [self.convs[i * self.size + j].turns[0] for j in range(self.size)]
        counts = [t.prompt_tokens for t in firsts]
        total = sum(c for c in counts if c is not None) if all(c is not None for c in counts) else None
        turn = replace(firsts[0], batch=tuple(t.user for t in firsts[1:]), prompt_tokens=total,
                       max_tokens=None)
        return Conversation(f"batch-{i}", (turn,))
