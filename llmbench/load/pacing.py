"""How much of llmbench's own work one turn of the event loop may do before it reads again.

The loop reads only between its turns. In a turn it runs every task that is ready, so when N
lock-step streams end together, N users finish a record and start their next request in one
turn: ~150 µs each (issue 50), 1,024 of them ~150 ms during which nothing is read. Stamped on
read (TLS; platforms without kernel receive times: load.monitor says where), every first token
that arrived meanwhile was 120-140 ms late.

``TurnGate`` bounds that: at most ``per_turn`` pieces of such work (a request's finish, a
request's start) pass in one turn; the others wait for the following turns, each of which
reads the sockets first. The work is the same, spread over turns; a start that waited is
client queue time (``start - scheduled``), as any wait of the load generator is, never TTFT.
"""

from __future__ import annotations

import asyncio
from collections import deque

# Pieces of work let through per loop turn: 8 x ~150 µs keeps a turn's own work near 1 ms,
# the most a stamp waits behind it; fewer only adds turns (each turn costs a poll).
PER_TURN = 8


class TurnGate:
    """``await gate.enter()`` before a piece of the load generator's own work."""

    __slots__ = ("per_turn", "_used", "_waiters", "_loop", "_armed")

    def __init__(self, per_turn: int = PER_TURN) -> None:
        self.per_turn = per_turn
        self._used = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._armed = False

    def enter(self) -> "asyncio.Future[None] | None":
        """None when this turn has room (go on at once, no await), else a future to await
        (resolved in a later turn, after the loop has read the sockets)."""
        if self._used < self.per_turn and not self._waiters:
            self._used += 1
            self._arm()
            return None
        loop = self._loop or asyncio.get_running_loop()
        self._loop = loop
        fut: asyncio.Future[None] = loop.create_future()
        self._waiters.append(fut)
        self._arm()
        return fut

    def _arm(self) -> None:
        if not self._armed:
            self._armed = True
            loop = self._loop or asyncio.get_running_loop()
            self._loop = loop
            loop.call_soon(self._turn)

    def _turn(self) -> None:
        """The next turn: a new allowance, given to the longest waiting first."""
        self._armed = False
        self._used = 0
        waiters = self._waiters
        while waiters and self._used < self.per_turn:
            w = waiters.popleft()
            if not w.done():            # a cancelled waiter (the run stopping) takes none
                w.set_result(None)
                self._used += 1
        if self._used or waiters:
            self._arm()
