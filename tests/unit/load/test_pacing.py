"""load.pacing.TurnGate: a burst of the generator's own work is spread over loop turns, and
the loop reads its sockets between them (issue 50 §1: stamps are taken when data is read)."""

from __future__ import annotations

import asyncio
import socket

import pytest

from llmbench.load.eventloop import run as run_loop
from llmbench.load.pacing import TurnGate


async def _burst(gate: TurnGate | None, n: int, order: list[str]) -> int:
    """Runs the burst; how many of its pieces had to wait for a later turn."""
    waited = 0

    async def work(i: int) -> None:
        nonlocal waited
        if gate is not None:
            slot = gate.enter()
            if slot is not None:
                waited += 1
                await slot
        order.append(f"work{i}")
    await asyncio.gather(*(work(i) for i in range(n)))
    return waited


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_socket_with_data_is_read_within_the_burst_not_after_it(loop):
    """Data waiting on a socket while 64 tasks want to run: with the gate the reader runs
    after at most a few turns' worth (2 x per_turn) of them; without it, after all 64."""
    def measure(gate: TurnGate | None) -> tuple[int, int]:
        order: list[str] = []
        waited = [0]

        async def main() -> None:
            a, b = socket.socketpair()
            a.setblocking(False)
            b.setblocking(False)
            ev = asyncio.get_running_loop()
            ev.add_reader(a.fileno(), lambda: (a.recv(100), order.append("read")))
            try:
                b.send(b"x")
                await asyncio.sleep(0)      # the burst begins in a turn of its own
                waited[0] = await _burst(gate, 64, order)
                for _ in range(5):
                    await asyncio.sleep(0)
            finally:
                ev.remove_reader(a.fileno())
                a.close()
                b.close()
        run_loop(main(), loop)
        assert sum(x.startswith("work") for x in order) == 64, "every piece of work ran"
        return order.index("read"), waited[0]
    read_at, waited = measure(TurnGate(per_turn=4))
    assert read_at <= 2 * 4
    assert waited >= 64 - 2 * 4         # the rest of the burst waited for later turns
    assert measure(None)[0] in (0, 64)  # the reader ran before or after the whole burst


def test_no_turn_lets_more_than_its_allowance_through():
    passed_in_turn: list[int] = []

    async def main() -> None:
        gate = TurnGate(per_turn=3)
        turn = [0]
        done = asyncio.Event()

        def tick() -> None:
            turn[0] += 1
            if not done.is_set():
                asyncio.get_running_loop().call_soon(tick)
        asyncio.get_running_loop().call_soon(tick)

        async def work() -> None:
            slot = gate.enter()
            if slot is not None:
                await slot
            passed_in_turn.append(turn[0])
        await asyncio.gather(*(work() for _ in range(20)))
        done.set()
    asyncio.run(main())
    assert len(passed_in_turn) == 20
    per_turn: dict[int, int] = {}
    for t in passed_in_turn:
        per_turn[t] = per_turn.get(t, 0) + 1
    assert max(per_turn.values()) <= 3
    assert len(per_turn) >= 20 // 3


def test_a_cancelled_waiter_takes_no_allowance():
    async def main() -> list[str]:
        gate = TurnGate(per_turn=1)
        assert gate.enter() is None                 # this turn's one
        first = gate.enter()
        second = gate.enter()
        assert first is not None and second is not None
        first.cancel()
        await asyncio.wait_for(second, 1.0)         # the next turn goes to the live one
        return ["ok"]
    assert asyncio.run(main()) == ["ok"]
