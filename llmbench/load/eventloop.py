"""Which event loop runs the load: uvloop when it is installed, asyncio's own otherwise.

Measured with scripts/bench_client_cpu.py (docs/metrics.md, "Client cost"): uvloop cuts the
client's CPU per request start and per token event, and at 128 lock-step streams those costs
are what delays requests (they start in waves). It is optional: without it llmbench runs the
same on asyncio's loop. ``LLMBENCH_LOOP=asyncio`` forces asyncio's loop (to compare, or to rule
the loop out when something looks wrong).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any, Coroutine, TypeVar

T = TypeVar("T")

LOOP_ENV = "LLMBENCH_LOOP"


def choose(loop: str = "auto") -> str:
    """'uvloop' or 'asyncio': what ``run`` will use for ``loop`` (auto | asyncio | uvloop)."""
    if loop == "auto":
        loop = os.environ.get(LOOP_ENV, "auto") or "auto"
    if loop == "asyncio":
        return "asyncio"
    try:
        import uvloop  # noqa: F401
    except ImportError:
        if loop == "uvloop":
            raise
        return "asyncio"
    return "uvloop"


def run(coro: Coroutine[Any, Any, T], loop: str = "auto") -> T:
    """``asyncio.run`` on the chosen loop; inside a running event loop (a Jupyter cell), on a
    loop of its own in a thread, waited for here (Ctrl-C / interrupting the kernel cancels it)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _run_here(coro, loop)
    import threading
    out: dict[str, Any] = {}
    ready = threading.Event()

    def body() -> None:
        async def main() -> T:
            out["loop"], out["task"] = asyncio.get_running_loop(), asyncio.current_task()
            ready.set()
            return await coro
        try:
            out["value"] = _run_here(main(), loop)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            out["error"] = exc
        finally:
            ready.set()
    t = threading.Thread(target=body, name="llmbench-loop", daemon=True)
    t.start()
    try:
        while t.is_alive():
            t.join(0.1)
    except KeyboardInterrupt:
        ready.wait(5.0)
        if "loop" in out:
            out["loop"].call_soon_threadsafe(out["task"].cancel)
        t.join()
        raise
    if "error" in out:
        raise out["error"]
    return out["value"]


def _run_here(coro: Coroutine[Any, Any, T], loop: str = "auto") -> T:
    if choose(loop) == "uvloop":
        import uvloop
        if hasattr(asyncio, "Runner"):          # Python 3.11+
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                return runner.run(coro)
        loop_ = uvloop.new_event_loop()         # 3.10: what asyncio.run does, on uvloop
        try:
            asyncio.set_event_loop(loop_)
            return loop_.run_until_complete(coro)
        finally:
            asyncio.set_event_loop(None)
            loop_.close()
    return asyncio.run(coro)


async def sleep_or_stop(stop: asyncio.Event, seconds: float) -> bool:
    """Sleep unless told to stop meanwhile; False if stopped."""
    if seconds <= 0:
        return not stop.is_set()
    try:
        await asyncio.wait_for(stop.wait(), seconds)
        return False
    except asyncio.TimeoutError:
        return True
