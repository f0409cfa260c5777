"""``llmbench context``'s spec: how far the prompt may grow, and the TTFT bound
(llmbench/commands/context.py). The target options are run's: with no --url the server on this
machine, else the built-in mock."""

from __future__ import annotations

import dataclasses
from typing import Any, Iterator

from llmbench.specs.groups import RequestOpts, ServerOpts, TargetOpts
from llmbench.specs.options import INT, P_LOAD, SECONDS_ABOVE_0, option


@dataclasses.dataclass(kw_only=True)
class ContextSpec(RequestOpts, ServerOpts, TargetOpts):
    """``llmbench context``'s options (what it measures: llmbench/commands/context.py)."""

    command = "context"

    from_words: int = option("Words in the first prompt (then doubled).", P_LOAD, kind=INT, default=256)
    up_to_words: int = option("Most words a prompt may have.", P_LOAD, kind=INT, default=1_000_000)
    ttft_limit: Any = option("A prompt whose first token takes longer than this is too long, e.g. 60s.", P_LOAD, kind=SECONDS_ABOVE_0, default="120s", metavar="DURATION")

    def _check(self) -> Iterator[str]:
        if not 1 <= self.from_words <= 10_000_000:
            yield f"--from-words {self.from_words}: give 1 to 10000000 words"
        if not self.from_words <= self.up_to_words <= 10_000_000:
            yield (f"--up-to-words {self.up_to_words}: give --from-words "
                   f"({self.from_words}) to 10000000 words")
