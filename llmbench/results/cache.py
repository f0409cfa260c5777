"""The result contract's prompt cache (run.json's ``prompt_cache``): how much of the prompts the
server said it took from its prefix cache, over the successful measured requests that reported
it, and the lines to print: ``message`` when the share flatters the run, ``note`` when the
server (Ollama) does not say, ``paths_differ`` when a probe's paths read their caches unlike.
Built by llmbench/analysis/checks.py (``prompt_cache``) from the records; None when no request
reported cached tokens and the server is not one known to keep them quiet."""

from __future__ import annotations

from dataclasses import dataclass

from llmbench.results.contract import Part, part


@dataclass
class CacheCounts(Part):
    """Cached against prompt tokens over ``requests`` that reported both; ``share`` None when
    none did."""

    requests: int = 0
    cached_tokens: int = 0
    prompt_tokens: int = 0
    share: float | None = None


@dataclass
class PromptCache(CacheCounts):
    """The whole run's counts (these fields), then its first turns' (whose prompts a run makes
    new: later turns resend their history, which a cache rightly holds) and each probe path's;
    ``salt`` the salt's source ("per run", "--prompt-salt", "none (--same-prompts)"),
    ``server`` "ollama" when its /v1 reported nothing."""

    first_turns: CacheCounts | None = part(None, omit="none")
    by_path: dict[str, CacheCounts] = part(default_factory=dict, omit="empty")
    salt: str | None = None
    server: str | None = part(None, omit="none")
    message: str | None = None
    note: str | None = part(None, omit="none")
    paths_differ: str | None = part(None, omit="none")
