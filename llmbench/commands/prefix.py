"""--prefix-hit-ratio around a run: send the workload's warm-up conversations (each shared
prompt once, not counted), read the server's prefix-cache counters after the warm-up and after
the run, and judge the ratio achieved (llmbench.analysis.prefix_hit)."""

from __future__ import annotations

import asyncio
from typing import Any

from llmbench.load.harness import TargetSpec
from llmbench.servers.scrape import ServerProbe
from llmbench.load.shapes import ClosedLoop
from llmbench.commands.common import Common


def scrape_counters(c: Common) -> tuple[str | None, dict[str, Any] | None]:
    """(server kind, one poll) or (None, None) when probing is off or finds nothing."""
    if c.server_probe == "off":
        return None, None
    import aiohttp          # here, not at import: a run without a server probe never loads it
    probe = ServerProbe(c.target.server_root, c.server_probe,
                        headers={k: v for k, v in c.target.request_headers().items()
                                 if k != "content-type"}, net=c.target.net)

    async def once() -> dict[str, Any] | None:
        async with probe.session() as session:
            if await probe.detect(session) is None:
                return None
            return await probe.poll_once(session)
    try:
        sample = asyncio.run(once())
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError):
        return None, None
    return (probe.kind if sample else None), sample


def warm_up(c: Common) -> int:
    """Send the warm-up conversations (all at once) through a harness of their own, so none of
    them lands in the run's records; the number that failed."""
    warm = c.workload.warmup
    if not warm:
        return 0
    harness = c.harness(None)
    outcome = harness.run(ClosedLoop(warm, len(warm)), [TargetSpec(c.target, server_probe="off",
                                                                   salt=c.workload.salt_for("main"))])
    return sum(1 for r in outcome.records if not r.ok)
