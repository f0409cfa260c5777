"""Users who give up (``--abandon``): the client cancels a request the way a person does, by
closing its connection.

Two behaviours, alone or together:

- ``after=2s``: a user who sees no first token within 2 s gives up (closes the connection
  while waiting: the request may still be queued or prefilling at the server).
- ``share=0.2,after-tokens=20``: a fifth of the replies are stopped mid-stream after their
  20th token event (a person pressing stop); which replies is drawn per request from ``seed``.

A cancelled request is its own outcome: ``Record.error_kind == "cancelled"`` (``ok`` False),
with ``error`` saying which behaviour cancelled it; how the summary counts it and how the
server's letting go is judged (``analysis.abandon``): docs/commands.md, "Users who give up".

Pure: the policy and its parser; the client's watchdog (``client.request``) applies it.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any, Callable

from llmbench.errors import UsageError
from llmbench.options import duration

CANCELLED = "cancelled"         # the record's error_kind
KEYS = ("after", "share", "after-tokens", "seed")
HINT = ("expected after=DURATION (give up without a first token), and/or "
        "share=P,after-tokens=N (stop that share of replies after N tokens), e.g. after=2s or "
        "share=0.2,after-tokens=20")


@dataclass(frozen=True)
class Abandon:
    """When a user gives up on a request: the module docstring's two behaviours, as fields."""

    after_s: float | None = None
    share: float = 0.0
    after_tokens: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if self.after_s is not None and not (math.isfinite(self.after_s) and self.after_s > 0):
            raise ValueError("Abandon.after_s: a time above 0 s")
        if not (0.0 <= self.share <= 1.0):
            raise ValueError("Abandon.share: a share between 0 and 1")
        if self.after_tokens is not None and self.after_tokens < 1:
            raise ValueError("Abandon.after_tokens: at least 1")
        if self.share > 0 and self.after_tokens is None:
            raise ValueError("Abandon.share needs after_tokens (after how many tokens to stop)")

    @property
    def on(self) -> bool:
        return self.after_s is not None or (self.share > 0 and self.after_tokens is not None)

    def text(self) -> str:
        """As the flag takes it: 'after=2s', 'share=0.2,after-tokens=20'."""
        parts = []
        if self.after_s is not None:
            parts.append(f"after={self.after_s:g}s")
        if self.share > 0:
            parts.append(f"share={self.share:g},after-tokens={self.after_tokens}")
        return ",".join(parts)

    def describe(self) -> dict[str, object]:
        return {"after_s": self.after_s, "share": self.share, "after_tokens": self.after_tokens,
                "seed": self.seed, "text": self.text()}

    def chooser(self) -> "StopDraw":
        return StopDraw(self)


class StopDraw:
    """Which requests a user stops mid-stream: one seeded draw per request, in send order."""

    __slots__ = ("share", "after", "_rng")

    def __init__(self, a: Abandon) -> None:
        self.share = a.share if a.after_tokens is not None else 0.0
        self.after = a.after_tokens
        self._rng = random.Random(f"abandon-{a.seed}")

    def stop_after(self) -> int | None:
        """Token events after which this request is stopped; None: read to the end."""
        if self.share <= 0:
            return None
        return self.after if self._rng.random() < self.share else None


def parse_abandon(texts: str | list[str] | tuple[str, ...] | None, flag: str = "--abandon",
                  seed: int = 0) -> Abandon | None:
    """'after=2s', 'share=0.2,after-tokens=20' (or both, in one value or repeated) -> Abandon;
    None when not given. One line naming the flag for anything else."""
    if texts is None:
        return None
    items = [texts] if isinstance(texts, str) else list(texts)
    if not items:
        return None
    got: dict[str, str] = {}
    for text in items:
        for part in str(text).split(","):
            part = part.strip()
            if not part:
                continue
            k, eq, v = part.partition("=")
            k = k.strip().lower().replace("_", "-")
            if not eq or not v.strip():
                raise UsageError(f"{flag} {text!r}: {part!r} has no value; {HINT}")
            if k not in KEYS:
                raise UsageError(f"{flag} {text!r}: unknown key {k!r} (one of "
                                 f"{', '.join(KEYS)}); {HINT}")
            if k in got:
                raise UsageError(f"{flag} {text!r}: {k} is given twice")
            got[k] = v.strip()
    shown = ",".join(str(t) for t in items)

    def number(key: str, read: Callable[[str], Any], what: str) -> Any:
        try:
            return read(got[key])
        except ValueError:
            raise UsageError(f"{flag} {shown!r}: {key}={got[key]!r} is not {what}") from None
    after_s = None
    if "after" in got:
        after_s = duration(got["after"], f"{flag} after=", zero_ok=False)
    share = 0.0
    if "share" in got:
        share = number("share", lambda raw: float(raw[:-1]) / 100.0 if raw.endswith("%")
                       else float(raw), "a number; a share between 0 and 1 (or 0-100%)")
        if not (math.isfinite(share) and 0.0 < share <= 1.0):
            raise UsageError(f"{flag} {shown!r}: share={got['share']!r} must be above 0 and at "
                             "most 1 (or 100%)")
    tokens = None
    if "after-tokens" in got:
        tokens = number("after-tokens", int, "a whole number of tokens")
        if tokens < 1:
            raise UsageError(f"{flag} {shown!r}: after-tokens={got['after-tokens']!r} must be "
                             "at least 1")
    if (share > 0) != (tokens is not None):
        missing = "after-tokens=N" if share > 0 else "share=P"
        raise UsageError(f"{flag} {shown!r}: share and after-tokens go together; add "
                         f"{missing}")
    if "seed" in got:
        seed = number("seed", int, "a whole number")
    if after_s is None and tokens is None:
        raise UsageError(f"{flag} {shown!r}: {HINT}")
    return Abandon(after_s=after_s, share=share, after_tokens=tokens, seed=seed)
