"""--batch-size N: N prompts in one request (the embeddings API takes a batch). The k-th request
carries the first turns of conversations kN .. kN+N-1, made on access, so a regenerated
synthetic workload stays regenerated."""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from llmbench.workload.model import Conversation, Made, Turn


class Batched(Made):
    def __init__(self, convs: Sequence[Conversation], size: int) -> None:
        self.convs = convs
        self.size = size

    def __len__(self) -> int:
        return len(self.convs) // self.size

    def made(self, i: int) -> Conversation:
        firsts: list[Turn] = [self.convs[i * self.size + j].turns[0] for j in range(self.size)]
        counts = [t.prompt_tokens for t in firsts]
        total = sum(c for c in counts if c is not None) if all(c is not None for c in counts) else None
        turn = replace(firsts[0], batch=tuple(t.user for t in firsts[1:]), prompt_tokens=total,
                       max_tokens=None)
        return Conversation(f"batch-{i}", (turn,))
