"""``--reset-cache between-steps|between-settings|off`` (ramp and sweep): the option, and the
step hook that empties the server's prompt cache before a step (llmbench/servers/reset.py does
the reset and its check). A ramp's default is off; a sweep's is between-settings (each
setting's ramp starts on an empty cache)."""

from __future__ import annotations

import dataclasses
from typing import Iterator, Any

from llmbench.specs.options import P_STEPS, Spec, option


@dataclasses.dataclass(kw_only=True)
class CacheResetOpts(Spec):
    """--reset-cache: empty the server's prompt cache before the load."""
    reset_cache: str | None = option("Empty the server's prompt cache, checked by a probe and recorded in run.json: between-steps (before every step), between-settings (sweep: before each setting's ramp, its default), off (ramp's default).", P_STEPS, metavar="WHEN")

    def _check(self) -> Iterator[str]:
        from llmbench.servers.reset import check_mode
        try:
            check_mode(self.reset_cache)
        except ValueError as exc:
            yield str(exc)
        if self.reset_cache == "between-settings" and self.command != "sweep":
            yield ("--reset-cache between-settings is a sweep's (a setting is a "
                   "sweep's); a ramp resets between-steps or off")

    def reset_mode(self) -> str:
        return self.reset_cache or ("between-settings" if self.command == "sweep" else "off")


class StepResets:
    """The ramp's ``before_step`` hook: a reset before the first step (between-settings) or
    before every step (between-steps); ``recorded()`` is run.json's ``cache_resets``."""

    def __init__(self, resetter: Any, every_step: bool, setting: bool) -> None:
        self.resetter = resetter
        self.every_step = every_step
        self.setting = setting          # a sweep's: its first reset is "before this setting"

    async def before_step(self, index: int) -> None:
        if index == 0 or self.every_step:
            when = (f"before step {index + 1}" if self.every_step or not self.setting
                    else "before this setting's ramp")
            await self.resetter(when)

    def recorded(self) -> list[Any]:
        from llmbench.results.reset import CacheReset
        return [CacheReset.from_dict(o.to_dict()) for o in self.resetter.outcomes]


def step_resets(spec: Any, target: Any, mock: bool = False) -> StepResets | None:
    """The hook for this ramp (None: --reset-cache off)."""
    mode = spec.reset_mode()
    if mode == "off":
        return None
    from llmbench.servers.reset import CacheReset

    def say(line: str) -> None:
        print(line, flush=True)
    return StepResets(CacheReset(target, say, "mock" if mock else None),
                      every_step=mode == "between-steps", setting=spec.command == "sweep")
