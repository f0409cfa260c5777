"""The result contract's cache resets (run.json's ``cache_resets``, issue 46): each time
``--reset-cache`` emptied (or tried to empty) the server's prompt cache, how, and whether a
probe afterwards showed that it took (llmbench/servers/reset.py makes them)."""

from __future__ import annotations

from dataclasses import dataclass

from llmbench.results.contract import Part


@dataclass
class CacheReset(Part):
    """``when`` ("before step 2"), ``how`` (the server's call; None: it has none),
    ``status``: took, did_not_take, failed, unchecked or no_reset; the probe prompt's cached
    tokens before and after the reset, its length, the seconds it all took, the line said."""

    when: str = ""
    how: str | None = None
    status: str = "unchecked"
    cached_before: int | None = None
    cached_after: int | None = None
    probe_prompt_tokens: int | None = None
    seconds: float | None = None
    text: str = ""
