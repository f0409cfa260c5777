"""The result contract's users who give up (``--abandon``): what they did (``Abandonment``) and
what the server did with the connections they closed (``SlotRelease``). Built by
llmbench/analysis/abandon.py from the records and the server probe's samples; a field a run
could not measure is None, never 0."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from llmbench.results.contract import Part, part


@dataclass
class SlotRelease(Part):
    """Whether the server let go of what cancelled requests held, by the release check of
    analysis.abandon (its module docstring). ``ok`` None: it could not be told (no running
    count from the server, or nothing was cancelled)."""

    ok: bool | None = None
    within_s: float = 0.0
    cancelled: int = 0
    samples: int = 0                    # server samples with a running count
    over_samples: int = 0               # of them, counting more than llmbench had open
    max_excess: float | None = None     # the most requests it counted beyond llmbench's open
    longest_s: float | None = None      # the longest stretch of such samples, seconds
    longest_from_s: float | None = None     # where it began, seconds after the run's start
    source: str | None = None           # the server probe's kind (llamacpp, vllm, mock...)
    text: str = ""


@dataclass
class Abandonment(Part):
    """A run with ``--abandon``: the users' policy (``after_s``: no first token within it;
    ``share`` of the replies stopped after ``after_tokens`` token events), the requests they
    cancelled (``cancelled``; ``waiting``: before any token; ``streaming``: mid-reply) and
    the server's release of them."""

    policy: str = ""
    after_s: float | None = part(None, omit="none")
    share: float | None = part(None, omit="none")
    after_tokens: int | None = part(None, omit="none")
    requests: int = 0
    cancelled: int = 0
    waiting: int = 0
    streaming: int = 0
    release: SlotRelease = field(default_factory=SlotRelease)

    def sentence(self) -> str:
        """'Users gave up on 12 of 80 requests (9 before a first token, 3 mid-reply).'"""
        if not self.cancelled:
            return (f"No user gave up ({self.policy}): every request of {self.requests} was "
                    "answered or failed on its own.")
        return (f"Users gave up on {self.cancelled} of {self.requests} requests "
                f"({self.waiting} before a first token, {self.streaming} mid-reply; "
                f"{self.policy}).")


def describe(policy: Any) -> dict[str, Any]:
    """The policy's settings as Abandonment's fields (``client.abandon.Abandon``)."""
    return {"policy": policy.text(), "after_s": policy.after_s,
            "share": policy.share or None, "after_tokens": policy.after_tokens}
